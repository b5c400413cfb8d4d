// calibrate/verdicts.ts: the error rates of the report's verdicts (report/verdicts.ts), measured on
// seeded simulated studies: the gap's false "as good" at the margin and its power at no gap, how
// often transcripts_to_decide transcripts decide it, and the family-wise error over six dimensions
// of the gap verdicts and of the leniency readings.
//
// A simulated study: every transcript has a true quality z ~ N(0, 1) on each dimension (the
// dimensions independent); a scorer gives it cut(z + 0.6 e) and the judge cut(z + s e), e ~ N(0, 1),
// cut at -0.6 and 0.6 into the three points of the shipped rubric's scales. The people's kappa
// is then 0.62; the judge's noise s is solved so that its kappa with a person is the people's plus
// the gap asked for. Every transcript is scored by every scorer of the study. The judge and the
// people share the cuts, so the judge's mean equals theirs: no leniency.
import { addUnit, kappaOfCounts, mulberry32, unitSums } from '../report/analysis.ts';
import type { UnitSums } from '../report/analysis.ts';
import {
  MIN_TRANSCRIPTS,
  familyVerdicts,
  gapTestOf as reportGapTest,
  leniencyDifference,
  leniencyTest,
  transcriptsToDecide,
} from '../report/verdicts.ts';
import type { GapTest } from '../report/verdicts.ts';
import type { CalibrationCheck, CalibrationResult, CalibrationRun } from './types.ts';

/** The scale's points, its cuts on the latent quality, the people's noise, the margin. */
export const POINTS = 3;
const CUTS = [-0.6, 0.6];
export const HUMAN_NOISE = 0.6;
export const MARGIN = 0.1;

// ---- The population ----------------------------------------------------------------------------

/** The standard normal CDF through erfc (Numerical Recipes' erfcc: relative error under 1.2e-7). */
function normalCdf(x: number): number {
  const z = Math.abs(x) / Math.SQRT2;
  const t = 1 / (1 + 0.5 * z);
  const poly =
    -z * z -
    1.26551223 +
    t *
      (1.00002368 +
        t *
          (0.37409196 +
            t *
              (0.09678418 +
                t *
                  (-0.18628806 +
                    t *
                      (0.27886807 +
                        t *
                          (-1.13520398 +
                            t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
  const erfc = t * Math.exp(poly);
  return x >= 0 ? 1 - erfc / 2 : erfc / 2;
}

/** The chance of each point for a rater of noise `noise` on a transcript of quality z. */
function pointChances(z: number, noise: number): number[] {
  const chances: number[] = [];
  let below = 0;
  for (const cut of CUTS) {
    const upTo = normalCdf((cut - z) / noise);
    chances.push(upTo - below);
    below = upTo;
  }
  chances.push(1 - below);
  return chances;
}

/** The quadratic-weighted kappa between two raters of noises a and b over the population of
 * transcripts: their joint distribution integrated over z (trapezoids on [-8, 8]). */
export function populationKappa(a: number, b: number): number {
  const joint = Array.from({ length: POINTS }, () => new Array<number>(POINTS).fill(0));
  const steps = 2000;
  const width = 16 / steps;
  for (let i = 0; i <= steps; i++) {
    const z = -8 + i * width;
    const ends = i === 0 || i === steps ? 0.5 : 1;
    const weight = (ends * width * Math.exp((-z * z) / 2)) / Math.sqrt(2 * Math.PI);
    const first = pointChances(z, a);
    const second = pointChances(z, b);
    for (let x = 0; x < POINTS; x++) {
      for (let y = 0; y < POINTS; y++) {
        joint[x]![y]! += weight * first[x]! * second[y]!;
      }
    }
  }

  let observed = 0;
  let expected = 0;
  const rows = joint.map((row) => row.reduce((sum, p) => sum + p, 0));
  const columns = joint[0]!.map((_, y) => joint.reduce((sum, row) => sum + row[y]!, 0));
  const total = rows.reduce((sum, p) => sum + p, 0);
  for (let x = 0; x < POINTS; x++) {
    for (let y = 0; y < POINTS; y++) {
      observed += (joint[x]![y]! / total) * (x - y) ** 2;
      expected += (rows[x]! / total) * (columns[y]! / total) * (x - y) ** 2;
    }
  }
  return 1 - observed / expected;
}

/** The judge's noise that puts its kappa with a person at the people's kappa plus `gap`. */
export function judgeNoise(gap: number): number {
  const target = populationKappa(HUMAN_NOISE, HUMAN_NOISE) + gap;
  let low = 0.01;
  let high = 50;
  for (let i = 0; i < 60; i++) {
    const middle = (low + high) / 2;
    if (populationKappa(HUMAN_NOISE, middle) > target) {
      low = middle;
    } else {
      high = middle;
    }
  }
  return (low + high) / 2;
}

// ---- A study -----------------------------------------------------------------------------------

/** One dimension of a simulated study: per transcript the judge's point and the scorers'. */
export type SimulatedDimension = { judge: number[]; scorers: number[][] };

/** A study of `transcripts` transcripts, each scored by `scorers` people and the judge (noise
 * `judge`), on `dimensions` independent dimensions. */
export function simulateStudy(
  random: () => number,
  size: { transcripts: number; scorers: number; dimensions: number },
  judge: number,
): SimulatedDimension[] {
  const normal = normals(random);
  const study: SimulatedDimension[] = [];
  for (let d = 0; d < size.dimensions; d++) {
    const dimension: SimulatedDimension = { judge: [], scorers: [] };
    for (let t = 0; t < size.transcripts; t++) {
      const quality = normal();
      dimension.judge.push(point(quality + judge * normal()));
      const scores: number[] = [];
      for (let s = 0; s < size.scorers; s++) {
        scores.push(point(quality + HUMAN_NOISE * normal()));
      }
      dimension.scorers.push(scores);
    }
    study.push(dimension);
  }
  return study;
}

/** Standard normal draws (Box-Muller, both of each pair used). */
function normals(random: () => number): () => number {
  let spare: number | null = null;
  return () => {
    if (spare !== null) {
      const value = spare;
      spare = null;
      return value;
    }
    const radius = Math.sqrt(-2 * Math.log(1 - random()));
    const angle = 2 * Math.PI * random();
    spare = radius * Math.sin(angle);
    return radius * Math.cos(angle);
  };
}

function point(latent: number): number {
  return CUTS.filter((cut) => latent > cut).length;
}

/** A dimension's transcripts as the report's gap reads them: per transcript its (person, judge)
 * counts, then its (scorer, scorer) counts, the first in scorer order as the first rater. A
 * transcript's row is made once per distinct set of points (addUnit keys rows by their text). */
function gapUnits(dimension: SimulatedDimension): UnitSums {
  const cells = POINTS * POINTS;
  const units = unitSums(2 * cells);
  const indexOf = new Map<number, number>();
  dimension.judge.forEach((judge, t) => {
    const scores = dimension.scorers[t]!;
    const key = scores.reduce((sum, score) => sum * POINTS + score, judge);
    const index = indexOf.get(key);
    if (index !== undefined) {
      units.rowOf.push(index);
      units.count++;
      return;
    }
    const row = new Float64Array(2 * cells);
    scores.forEach((score, a) => {
      row[score * POINTS + judge]! += 1;
      for (let b = a + 1; b < scores.length; b++) {
        row[cells + score * POINTS + scores[b]!]! += 1;
      }
    });
    addUnit(units, row);
    indexOf.set(key, units.rowOf.at(-1)!);
  });
  return units;
}

/** The two kappas of a dimension's gap, on its units' sums. */
const KAPPAS = {
  judge: (sums: Float64Array) => kappaOfCounts(sums, 0, POINTS),
  ceiling: (sums: Float64Array) => kappaOfCounts(sums, POINTS * POINTS, POINTS),
};

/** A dimension's gap test, as the report makes it. */
export function gapTestOf(dimension: SimulatedDimension): GapTest {
  return gapTest(gapUnits(dimension));
}

/** The gap test of a dimension's transcripts (as gapUnits makes them). */
function gapTest(units: UnitSums): GapTest {
  return reportGapTest(units, KAPPAS, MARGIN);
}

/** A dimension's leniency test, as the report makes it. */
function leniencyTestOf(dimension: SimulatedDimension) {
  const differences = dimension.judge.map((judge, t) => {
    return leniencyDifference(judge, dimension.scorers[t]!);
  });
  return leniencyTest(differences);
}

/** Every dimension's gap verdict and leniency reading, read together as the report reads them. */
export function studyVerdicts(study: SimulatedDimension[]) {
  const gaps = study.map(gapTestOf);
  const leniencies = study.map(leniencyTestOf);
  const family = familyVerdicts(gaps, leniencies);
  return {
    gaps,
    verdicts: family.gaps.map((gap) => gap!.verdict),
    readings: family.readings,
    /** What the report says would decide each undetermined gap (computed on demand: it costs). */
    get transcriptsToDecide() {
      return family.gaps.map((verdict, d) => {
        const jack = gaps[d]!.jackknife;
        const open = verdict!.verdict === 'undetermined' && jack !== null;
        return open ? transcriptsToDecide(jack, MARGIN, verdict!.level) : null;
      });
    },
  };
}

// ---- The checks --------------------------------------------------------------------------------

/** One setting's rate over `studies` studies; a seed of its own, from the run's and the setting. */
function rateOf(
  run: CalibrationRun,
  setting: number,
  event: (random: () => number) => boolean | null,
): { rate: number; studies: number } {
  const random = mulberry32(run.seed + 7919 * setting);
  let counted = 0;
  let hits = 0;
  for (let i = 0; i < run.studies; i++) {
    const hit = event(random);
    if (hit === null) {
      continue;
    }
    counted++;
    hits += hit ? 1 : 0;
  }
  return { rate: counted === 0 ? 0 : hits / counted, studies: counted };
}

/** The worst of several settings' rates (the highest, or the lowest for a floor), each named. It
 * meets its target when within three Monte Carlo standard errors of it (at the target, on the
 * worst setting's studies): the worst of up to 24 rates, each measured on a few hundred studies,
 * strays that far from a rate that is at the target. */
function worstOf(
  settings: { name: string; rate: number; studies: number }[],
  floor: boolean,
  target: number,
): CalibrationResult {
  const worst = settings.reduce((a, b) => ((floor ? b.rate < a.rate : b.rate > a.rate) ? b : a));
  const studies = settings.reduce((sum, setting) => sum + setting.studies, 0);
  const percent = (rate: number) => `${(rate * 100).toFixed(1)}%`;
  const others = settings.map((setting) => `${setting.name} ${percent(setting.rate)}`);
  const allowance = 3 * Math.sqrt((target * (1 - target)) / Math.max(1, worst.studies));
  const within = `within 3 SE: ${floor ? '>=' : '<='} ${percent(floor ? target - allowance : target + allowance)}`;
  return {
    rate: worst.rate,
    studies,
    pass: floor ? worst.rate >= target - allowance : worst.rate <= target + allowance,
    detail: `worst ${worst.name} of ${worst.studies} studies (${within}); ${others.join(', ')}`,
  };
}

const SCORERS = [2, 3, 4];
const SIZES = [3, 5, 10, 20, MIN_TRANSCRIPTS, 50, 100, 400];

/** False "as good" at the margin: the judge's kappa below the people's by exactly the margin. */
function falseAsGood(run: CalibrationRun): CalibrationResult {
  const noise = judgeNoise(-MARGIN);
  const settings = SCORERS.flatMap((scorers) => {
    return SIZES.map((transcripts, i) => {
      const rate = rateOf(run, scorers * 100 + i, (random) => {
        const study = simulateStudy(random, { transcripts, scorers, dimensions: 1 }, noise);
        return studyVerdicts(study).verdicts[0] === 'as_good';
      });
      return { name: `n ${transcripts} x ${scorers} scorers`, ...rate };
    });
  });
  return worstOf(settings, false, 0.05);
}

/** "As good" when the judge is as good as people (gap 0), on 400 transcripts. */
function powerAtNoGap(run: CalibrationRun): CalibrationResult {
  const noise = judgeNoise(0);
  const settings = SCORERS.map((scorers) => {
    const rate = rateOf(run, 1000 + scorers, (random) => {
      const study = simulateStudy(random, { transcripts: 400, scorers, dimensions: 1 }, noise);
      return studyVerdicts(study).verdicts[0] === 'as_good';
    });
    return { name: `${scorers} scorers`, ...rate };
  });
  return worstOf(settings, true, 0.8);
}

/**
 * transcripts_to_decide is a promise made if the observed gap and spread held. A pilot of 40
 * transcripts by two scorers whose gap is undetermined says how many would decide it; a study of
 * that many transcripts drawn from the pilot's own (its gap and spread holding) is decided? At
 * most a million of them: more only decides more often. The detail also gives the rate when at
 * most 20,000 are drawn from the true population instead, which the pilot's uncertain gap bounds.
 */
function transcriptsDecide(run: CalibrationRun): CalibrationResult {
  const gaps = [0, -0.05, -0.2];
  const fromTruth: string[] = [];
  const settings = gaps.map((gap, i) => {
    const noise = judgeNoise(gap);
    let truthDecided = 0;
    let truthStudies = 0;
    const rate = rateOf(run, 2000 + i, (random) => {
      const size = { transcripts: 40, scorers: 2, dimensions: 1 };
      const pilotUnits = gapUnits(simulateStudy(random, size, noise)[0]!);
      const pilot = gapTest(pilotUnits);
      if (familyVerdicts([pilot], []).gaps[0]!.verdict !== 'undetermined') {
        return null;
      }
      const needed =
        pilot.jackknife === null ? null : transcriptsToDecide(pilot.jackknife, MARGIN, 0.05);
      if (needed === null) {
        return null;
      }

      const truth = { transcripts: Math.min(needed, 20000), scorers: 2, dimensions: 1 };
      truthStudies++;
      truthDecided += decided(gapTest(gapUnits(simulateStudy(random, truth, noise)[0]!))) ? 1 : 0;
      return decided(gapTest(resampled(pilotUnits, Math.min(needed, 1000000), random)));
    });
    fromTruth.push(`gap ${gap} ${((100 * truthDecided) / Math.max(1, truthStudies)).toFixed(1)}%`);
    return { name: `gap ${gap}`, ...rate };
  });
  const result = worstOf(settings, true, 0.7);
  result.detail += `; drawn from the truth instead: ${fromTruth.join(', ')}`;
  return result;
}

/** Whether a single dimension's gap reads "as good" or "below". */
function decided(test: GapTest): boolean {
  const verdict = familyVerdicts([test], []).gaps[0]!.verdict;
  return verdict === 'as_good' || verdict === 'below';
}

/** `count` transcripts drawn with replacement from those of `units`. */
function resampled(units: UnitSums, count: number, random: () => number): UnitSums {
  const rowOf: number[] = [];
  for (let i = 0; i < count; i++) {
    rowOf.push(units.rowOf[Math.floor(random() * units.count)]!);
  }
  return {
    width: units.width,
    count,
    rowOf,
    rowIndex: units.rowIndex,
    starts: units.starts,
    at: units.at,
    value: units.value,
  };
}

/** At least one of six dimensions read lenient or harsh, with no leniency on any. */
function familyLeniency(run: CalibrationRun): CalibrationResult {
  const noise = judgeNoise(-MARGIN);
  const settings = [1, 2, 3].flatMap((scorers) => {
    return [3, 10, 30, 100, 400].map((transcripts, i) => {
      const rate = rateOf(run, 3000 + scorers * 100 + i, (random) => {
        const study = simulateStudy(random, { transcripts, scorers, dimensions: 6 }, noise);
        const tests = study.map(leniencyTestOf);
        return familyVerdicts([], tests).readings.some((reading) => reading !== null);
      });
      return { name: `n ${transcripts} x ${scorers} scorer(s)`, ...rate };
    });
  });
  return worstOf(settings, false, 0.05);
}

/** At least one of six dimensions read "as good", every gap exactly at the margin. */
function familyAsGood(run: CalibrationRun): CalibrationResult {
  const noise = judgeNoise(-MARGIN);
  const settings = [2, 3].flatMap((scorers) => {
    return [MIN_TRANSCRIPTS, 100, 400].map((transcripts, i) => {
      const rate = rateOf(run, 4000 + scorers * 100 + i, (random) => {
        const study = simulateStudy(random, { transcripts, scorers, dimensions: 6 }, noise);
        return studyVerdicts(study).verdicts.some((verdict) => verdict === 'as_good');
      });
      return { name: `n ${transcripts} x ${scorers} scorers`, ...rate };
    });
  });
  return worstOf(settings, false, 0.05);
}

export const checks: CalibrationCheck[] = [
  {
    name: 'gap: false "as good" at the margin, worst of n 3-400 x 2-4 scorers',
    target: '<= 5%',
    studies: 2000,
    fastStudies: 300,
    run: falseAsGood,
  },
  {
    name: 'gap: "as good" at no gap, n 400, worst of 2-4 scorers',
    target: '>= 80%',
    studies: 1000,
    fastStudies: 200,
    run: powerAtNoGap,
  },
  {
    name: 'gap: transcripts_to_decide decides it, worst of three gaps',
    target: '>= 70%',
    studies: 600,
    fastStudies: 150,
    run: transcriptsDecide,
  },
  {
    name: 'leniency: any of 6 dimensions lenient or harsh with none, worst of n x scorers',
    target: '<= 5%',
    studies: 1500,
    fastStudies: 300,
    run: familyLeniency,
  },
  {
    name: 'gap: any of 6 dimensions "as good", all at the margin, worst of n x scorers',
    target: '<= 5%',
    studies: 1000,
    fastStudies: 200,
    run: familyAsGood,
  },
];
