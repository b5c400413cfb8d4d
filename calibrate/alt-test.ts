// calibrate/alt-test.ts: how often the alternative annotator test (report/alt-test.ts) passes a
// judge that is worse than the scorers by epsilon (0.15) or more: each scorer's null hypothesis
// holds, so a pass is a false one.
//
// Two kinds of study. The worst case, drawn as each left-out scorer's wins: on each transcript the
// scorer alone is the closer to the others with chance epsilon, else the two tie; the judge is
// never the closer. Four scorers on 15 transcripts each (the fewest a scorer is tested on; four
// scorers is where the rate peaks). Then scored studies: a transcript's quality q is drawn from
// 0..4, three scorers score it round(q + 0.6 e) and the judge round(q + 1.05 e), e ~ N(0, 1),
// clamped to 0..4, on 40 transcripts all three scored; the judge's noise is where rho_scorer -
// rho_judge is above epsilon, its value estimated on 100,000 transcripts and printed.
import { mulberry32 } from '../report/analysis.ts';
import { altTest, altTestOfWins } from '../report/alt-test.ts';
import type { AltTranscript, Wins } from '../report/alt-test.ts';
import type { CalibrationCheck, CalibrationRun } from './types.ts';

const EPSILON = 0.15;

/** Standard normal draws (Box-Muller). */
function normals(random: () => number): () => number {
  return () => {
    const u = 1 - random();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random());
  };
}

/** The worst case: per scorer, the scorer alone closer with chance epsilon, else a tie. */
function worstCase(options: CalibrationRun) {
  const random = mulberry32(options.seed);
  let passed = 0;
  for (let s = 0; s < options.studies; s++) {
    const wins = new Map<string, Wins[]>();
    for (const scorer of ['a', 'b', 'c', 'd']) {
      const list: Wins[] = [];
      for (let i = 0; i < 15; i++) {
        list.push(random() < EPSILON ? { judge: 0, scorer: 1 } : { judge: 1, scorer: 1 });
      }
      wins.set(scorer, list);
    }
    if (altTestOfWins(wins, EPSILON).passes === true) {
      passed++;
    }
  }
  const rate = passed / options.studies;
  return {
    rate,
    studies: options.studies,
    pass: rate <= 0.05,
    detail: '4 scorers on 15 transcripts each, rho_scorer - rho_judge = epsilon, the rest ties',
  };
}

const POINTS = 5;
const SCORER_NOISE = 0.6;
const WORSE_JUDGE_NOISE = 1.05;
const BETTER_JUDGE_NOISE = 0.3;

/** One scored transcript: the judge's and three scorers' positions. */
function scoredTranscript(random: () => number, normal: () => number, judgeNoise: number) {
  const q = Math.floor(random() * POINTS);
  const at = (noise: number) => Math.min(POINTS - 1, Math.max(0, Math.round(q + noise)));
  const scorers = ['a', 'b', 'c'].map((scorer) => {
    return { scorer, position: at(SCORER_NOISE * normal()) };
  });
  return { judge: at(judgeNoise * normal()), scorers };
}

/** rho_scorer - rho_judge of the first scorer left out, over many transcripts. */
function trueDifference(random: () => number, normal: () => number, judgeNoise: number): number {
  let total = 0;
  const n = 100000;
  for (let i = 0; i < n; i++) {
    const transcript = scoredTranscript(random, normal, judgeNoise);
    const left = transcript.scorers[0]!.position;
    const others = transcript.scorers.slice(1);
    const error = (position: number) => {
      return others.reduce((sum, other) => sum + (position - other.position) ** 2, 0);
    };
    const judge = error(transcript.judge);
    const scorer = error(left);
    total += (scorer <= judge ? 1 : 0) - (judge <= scorer ? 1 : 0);
  }
  return total / n;
}

/** One scored study: 40 transcripts, each scored by the judge and all three scorers. */
export function scoredStudy(random: () => number, judgeNoise = WORSE_JUDGE_NOISE): AltTranscript[] {
  const normal = normals(random);
  const transcripts: AltTranscript[] = [];
  for (let i = 0; i < 40; i++) {
    transcripts.push(scoredTranscript(random, normal, judgeNoise));
  }
  return transcripts;
}

/** The share of scored studies the test passes with the worse judge; and with a better one. */
function scoredStudies(options: CalibrationRun) {
  const random = mulberry32(options.seed);
  const normal = normals(random);
  const passRate = (judgeNoise: number) => {
    let passed = 0;
    for (let s = 0; s < options.studies; s++) {
      if (altTest(scoredStudy(random, judgeNoise), EPSILON).passes === true) {
        passed++;
      }
    }
    return passed / options.studies;
  };
  const difference = trueDifference(random, normal, WORSE_JUDGE_NOISE);
  const rate = passRate(WORSE_JUDGE_NOISE);
  const power = passRate(BETTER_JUDGE_NOISE);
  return {
    rate,
    studies: options.studies,
    pass: rate <= 0.05 && difference >= EPSILON,
    detail:
      `3 scorers on 40 transcripts, rho_scorer - rho_judge ${difference.toFixed(3)}; passes ` +
      `${(100 * power).toFixed(1)}% with a judge nearer the others than they are`,
  };
}

export const checks: CalibrationCheck[] = [
  {
    name: 'alt-test: passes a judge worse by epsilon, worst case',
    target: '<= 5%',
    studies: 4000,
    fastStudies: 1000,
    run: worstCase,
  },
  {
    name: 'alt-test: passes a judge worse by more than epsilon, scored studies',
    target: '<= 5%',
    studies: 2000,
    fastStudies: 300,
    run: scoredStudies,
  },
];
