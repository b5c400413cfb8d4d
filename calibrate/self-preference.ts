// calibrate/self-preference.ts: how often self-preference (report/self-preference.ts) says the
// judge favours its own family when it does not: the tutors differ in how leniently the judge
// treats them, but not by family.
//
// A simulated study: six tutors, three of the judge's family and three of others, 20 transcripts
// each. A transcript has a quality q drawn from 0..3; two people score it round(q + 0.5 e) and the
// judge round(q + 0.5 e), e ~ N(0, 1), clamped to 0..3; the judge's leniency toward tutor j adds
// u_j ~ N(0, 0.3) score points to its leniency on each of j's transcripts, the same law for every
// family, so no family effect.
import { mulberry32 } from '../report/analysis.ts';
import { selfPreferenceFigures } from '../report/self-preference.ts';
import type { LeniencyUnit } from '../report/self-preference.ts';
import type { CalibrationCheck, CalibrationRun } from './types.ts';

const TUTORS_A_SIDE = 3;
const TRANSCRIPTS_A_TUTOR = 20;
const TUTOR_SD = 0.3;
const SCORE_NOISE = 0.5;

/** Standard normal draws (Box-Muller). */
function normals(random: () => number): () => number {
  return () => {
    const u = 1 - random();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random());
  };
}

/** A score of quality q with noise, rounded and clamped to the scale 0..3. */
function scored(q: number, noise: number): number {
  return Math.min(3, Math.max(0, Math.round(q + noise)));
}

/** One study's transcripts as self-preference reads them, `familyEffect` added to own tutors. */
export function simulatedStudy(random: () => number, familyEffect = 0): LeniencyUnit[] {
  const normal = normals(random);
  const units: LeniencyUnit[] = [];
  for (let j = 0; j < 2 * TUTORS_A_SIDE; j++) {
    const own = j < TUTORS_A_SIDE;
    const tutorEffect = TUTOR_SD * normal() + (own ? familyEffect : 0);
    for (let i = 0; i < TRANSCRIPTS_A_TUTOR; i++) {
      const q = Math.floor(random() * 4);
      const people = scored(q, SCORE_NOISE * normal()) + scored(q, SCORE_NOISE * normal());
      const judge = scored(q, SCORE_NOISE * normal());
      units.push({ tutor: `t${j}`, own, leniency: judge - people / 2 + tutorEffect });
    }
  }
  return units;
}

/** The share of studies read `favours_own`, with no family effect; and the power at +0.5. */
function falseFavoursOwn(options: CalibrationRun) {
  const random = mulberry32(options.seed);
  let favoured = 0;
  for (let s = 0; s < options.studies; s++) {
    if (selfPreferenceFigures(simulatedStudy(random)).verdict === 'favours_own') {
      favoured++;
    }
  }
  let found = 0;
  for (let s = 0; s < options.studies; s++) {
    if (selfPreferenceFigures(simulatedStudy(random, 0.5)).verdict === 'favours_own') {
      found++;
    }
  }
  const rate = favoured / options.studies;
  const power = `${((100 * found) / options.studies).toFixed(1)}% with own tutors +0.5 points`;
  return {
    rate,
    studies: options.studies,
    pass: rate <= 0.05,
    detail: `6 tutors, 3 a side, 20 transcripts each, tutor SD 0.3; favours_own ${power}`,
  };
}

export const checks: CalibrationCheck[] = [
  {
    name: 'self-preference: favours_own with no family effect',
    target: '<= 5%',
    studies: 4000,
    fastStudies: 1000,
    run: falseFavoursOwn,
  },
];
