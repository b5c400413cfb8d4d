// calibrate/ppi.ts: the tutors' means and differences (report/ppi.ts) on simulated studies. Each
// study: tutors answering the same tasks, people's scores and a judge's from one latent quality
// (the judge biased, or favouring one tutor), the people's sample drawn by the plan's own sampler
// (report/sheet.ts) with some rows left blank, the truth each tutor's expected human score.
import { mulberry32 } from '../report/analysis.ts';
import { tutorDifferences, tutorMean } from '../report/ppi.ts';
import type { PpiData, TutorMeanParts } from '../report/ppi.ts';
import { samplingDesign } from '../report/tutors.ts';
import { pairKey } from '../run-judge.ts';
import { stratifiedSample } from '../report/sheet.ts';
import type { CalibrationCheck, CalibrationResult, CalibrationRun } from './types.ts';

/** One kind of study. Spreads are shares of the scale's range; the judge's bias is in points. */
type Setting = {
  low: number;
  high: number;
  tutors: number;
  tasks: number;
  /** the share of all transcripts the plan samples for people */
  share: number;
  /** each tutor's latent quality, as a share of the range above the lowest score */
  quality: number[];
  /** the judge's bias on each tutor, in points of the scale */
  bias: number[];
  /** the judge's own noise, as a share of the range */
  judgeNoise: number;
  /** each tutor's tasks, when they differ (else every tutor has all `tasks`) */
  tasksOf?: number[][];
  /** a task's shift in quality (share of the range), when tasks differ in difficulty */
  taskShift?: (task: number) => number;
  /** each transcript's inclusion probability under the plan, to weight by (`model/task`) */
  inclusion?: Map<string, number>;
};

/** How the transcripts vary: by task, by transcript, by scorer (shares of the range). */
const TASK_SPREAD = 0.2;
const TRANSCRIPT_SPREAD = 0.2;
const SCORER_SPREAD = 0.12;
/** The share of sampled transcripts two people score (the human score their mean). */
const TWO_SCORERS = 0.25;
/** The share of sampled rows left blank (missing at random). */
const BLANK = 0.1;

type Pair = { task_id: string; model: string };

/** What a study gave: per tutor its estimate, and the truth. */
type StudyResult = { tutors: TutorMeanParts[]; truth: number[]; correlation: number };

function simulateStudy(setting: Setting, random: () => number): StudyResult {
  const range = setting.high - setting.low;
  const taskEffects = Array.from({ length: setting.tasks }, () => gauss(random) * TASK_SPREAD);

  // 1. Every transcript's latent quality, a person's score, a second person's, the judge's.
  const refs: (Pair & { human: number; judge: number })[] = [];
  for (let m = 0; m < setting.tutors; m++) {
    for (const t of tasksOf(setting, m)) {
      const shift = setting.taskShift?.(t) ?? 0;
      const noise = gauss(random) * TRANSCRIPT_SPREAD;
      const latent = setting.quality[m]! + shift + taskEffects[t]! + noise;
      const score = (shift: number, spread: number) => {
        const value = setting.low + range * (latent + gauss(random) * spread) + shift;
        return Math.min(setting.high, Math.max(setting.low, Math.round(value)));
      };
      let human = score(0, SCORER_SPREAD);
      if (random() < TWO_SCORERS) {
        human = (human + score(0, SCORER_SPREAD)) / 2;
      }
      const judge = score(setting.bias[m]!, setting.judgeNoise);
      refs.push({ task_id: `t${t}`, model: `m${m}`, human, judge });
    }
  }

  // 2. The people's sample, as the plan draws it; a blank row leaves it.
  const size = Math.max(1, Math.round(refs.length * setting.share));
  const chosen = new Set(stratifiedSample(refs, size, random));
  const scored = new Set([...chosen].filter(() => random() >= BLANK));

  // 3. Each tutor's estimate, and its truth: the expected score of one person.
  const spread = Math.hypot(TASK_SPREAD, TRANSCRIPT_SPREAD, SCORER_SPREAD);
  const tutors: TutorMeanParts[] = [];
  const truth: number[] = [];
  let correlation = 0;
  for (let m = 0; m < setting.tutors; m++) {
    const own = refs.filter((ref) => ref.model === `m${m}`);
    const labeled = own.filter((ref) => scored.has(ref));
    const unlabeled = own.filter((ref) => !scored.has(ref));
    const data: PpiData = {
      human: labeled.map((ref) => ref.human),
      judge: labeled.map((ref) => ref.judge),
      judgeUnlabeled: unlabeled.map((ref) => ref.judge),
    };
    const inclusion = setting.inclusion;
    if (inclusion !== undefined) {
      const of = (ref: Pair) => inclusion.get(`${ref.model}/${ref.task_id}`)!;
      data.weights = labeled.map((ref) => 1 / of(ref));
      data.weightsUnlabeled = unlabeled.map((ref) => 1 / (1 - of(ref)));
    }
    tutors.push(tutorMean(data, { low: setting.low, high: setting.high }));
    // The truth: the expected score over the tutor's kind of tasks.
    const tasks = tasksOf(setting, m);
    const qualities = tasks.map((t) => setting.quality[m]! + (setting.taskShift?.(t) ?? 0));
    const expected = qualities.map((quality) => expectedScore(setting, quality, spread));
    truth.push(expected.reduce((sum, value) => sum + value, 0) / expected.length);
    correlation += pearson(
      own.map((ref) => ref.human),
      own.map((ref) => ref.judge),
    );
  }
  return { tutors, truth, correlation: correlation / setting.tutors };
}

/** The expected score of a latent quality spread normally by `spread` (shares of the range),
 * rounded to the scale and clipped at its ends. */
function expectedScore(setting: Setting, quality: number, spread: number): number {
  let expected = 0;
  for (let score = setting.low; score <= setting.high; score++) {
    const at = (edge: number) =>
      normalCdf(((edge - setting.low) / range(setting) - quality) / spread);
    const below = score === setting.low ? 0 : at(score - 0.5);
    const above = score === setting.high ? 1 : at(score + 0.5);
    expected += score * (above - below);
  }
  return expected;
}

/** A tutor's tasks: its own list, else every task. */
function tasksOf(setting: Setting, tutor: number): number[] {
  return setting.tasksOf?.[tutor] ?? Array.from({ length: setting.tasks }, (_, t) => t);
}

function range(setting: Setting): number {
  return setting.high - setting.low;
}

/** The figures of many studies of one setting. */
type Tally = {
  means: { covered: number; total: number };
  differences: { covered: number; total: number };
  widthRatio: { sum: number; total: number };
  /** studies where some pair's order was established the wrong way, or at all when all are equal */
  wrongOrders: number;
  studies: number;
  correlation: number;
};

function runStudies(setting: Setting, run: CalibrationRun): Tally {
  const random = mulberry32(run.seed);
  const tally: Tally = {
    means: { covered: 0, total: 0 },
    differences: { covered: 0, total: 0 },
    widthRatio: { sum: 0, total: 0 },
    wrongOrders: 0,
    studies: run.studies,
    correlation: 0,
  };
  for (let s = 0; s < run.studies; s++) {
    const study = simulateStudy(setting, random);
    tally.correlation += study.correlation / run.studies;
    study.tutors.forEach((tutor, m) => {
      const figures = tutor.figures;
      if (figures.ci95 === null) {
        return;
      }
      tally.means.total++;
      if (figures.ci95[0] <= study.truth[m]! && study.truth[m]! <= figures.ci95[1]) {
        tally.means.covered++;
      }
      if (figures.width_ratio !== null) {
        tally.widthRatio.sum += figures.width_ratio;
        tally.widthRatio.total++;
      }
    });

    const named = study.tutors.map((tutor, m) => ({ model: String(m), interval: tutor.interval }));
    let wrong = false;
    for (const difference of tutorDifferences('x', named)) {
      const truth = study.truth[Number(difference.a)]! - study.truth[Number(difference.b)]!;
      tally.differences.total++;
      if (difference.ci95[0] <= truth && truth <= difference.ci95[1]) {
        tally.differences.covered++;
      }
      // An established order is wrong when the truth is the other way or a tie.
      if (difference.established && difference.diff * truth <= 0) {
        wrong = true;
      }
    }
    if (wrong) {
      tally.wrongOrders++;
    }
  }
  return tally;
}

const share = (part: { covered: number; total: number }) => part.covered / part.total;
const percent = (rate: number) => `${(rate * 100).toFixed(1)}%`;

// ---- The settings ------------------------------------------------------------------------------

/** Four tutors of rising quality, 100 tasks each: 5% of the 400 transcripts is 5 a tutor. */
function study(
  low: number,
  high: number,
  sample: number,
  bias: number[],
  judgeNoise = 0.1,
): Setting {
  return {
    low,
    high,
    tutors: 4,
    tasks: 100,
    share: sample,
    quality: [0.3, 0.42, 0.54, 0.66],
    bias,
    judgeNoise,
  };
}

const LENIENT = [0.5, 0.5, 0.5, 0.5];
const OWN_FAMILY = [0.5, 0, 0, 0];

/** A coverage check: the tutors' means and their differences, the lower of the two against 93%. */
function coverage(name: string, setting: Setting): CalibrationCheck {
  return {
    name,
    target: '>= 93%',
    studies: 1000,
    fastStudies: 150,
    run(run): CalibrationResult {
      const tally = runStudies(setting, run);
      const means = share(tally.means);
      const differences = share(tally.differences);
      const rate = Math.min(means, differences);
      const detail = `means ${percent(means)} of ${tally.means.total}, differences ${percent(differences)} of ${tally.differences.total}`;
      return { rate, studies: run.studies, pass: rate >= 0.93, detail };
    },
  };
}

const SCALES: [number, number][] = [
  [0, 2],
  [1, 5],
];

const coverageChecks = SCALES.flatMap(([low, high]) => {
  return [0.05, 0.2].flatMap((sample) => {
    const sampled = `${sample * 100}% sample`;
    return [
      coverage(
        `PPI 95% intervals of tutors' means and differences cover the truth, ${low}-${high} scale, ${sampled}, judge lenient by 0.5`,
        study(low, high, sample, LENIENT),
      ),
      coverage(
        `PPI 95% intervals of tutors' means and differences cover the truth, ${low}-${high} scale, ${sampled}, judge of one tutor's family (+0.5 on it)`,
        study(low, high, sample, OWN_FAMILY),
      ),
    ];
  });
});

// ---- The judge's worth: never costs, helps when it tracks the people ---------------------------

/** How much wider the PPI interval is than the people-only one on average (negative: narrower),
 * in the worst of every setting above and a judge that hardly tracks the people: at most 2%. */
const neverWider: CalibrationCheck = {
  name: 'PPI intervals wider than people-only ones, mean excess width in the worst setting (every setting above, and a judge of noise 1)',
  target: '<= 2%',
  studies: 300,
  fastStudies: 40,
  run(run): CalibrationResult {
    const settings = SCALES.flatMap(([low, high]) => {
      return [0.05, 0.2].flatMap((sample) => [
        study(low, high, sample, LENIENT),
        study(low, high, sample, OWN_FAMILY),
        study(low, high, sample, LENIENT, 1),
      ]);
    });
    let worst = 0;
    for (const setting of settings) {
      const tally = runStudies(setting, run);
      worst = Math.max(worst, tally.widthRatio.sum / tally.widthRatio.total);
    }
    const detail = `${settings.length} settings`;
    return { rate: worst - 1, studies: run.studies, pass: worst - 1 <= 0.02, detail };
  },
};

/** With a judge that correlates 0.7 with the people within a tutor: the PPI interval at least 20%
 * narrower than the people's alone, on average. 400 transcripts a tutor, 5% of them scored. */
const narrower: CalibrationCheck = {
  name: 'PPI interval narrower than people-only, judge correlating 0.7 with people, 1-5 scale, 5% sample of 400 a tutor',
  target: '>= 20%',
  studies: 300,
  fastStudies: 40,
  run(run): CalibrationResult {
    const setting = { ...study(1, 5, 0.05, [0, 0, 0, 0], 0.2), tasks: 400 };
    const tally = runStudies(setting, run);
    const gain = 1 - tally.widthRatio.sum / tally.widthRatio.total;
    const detail = `judge-people correlation ${tally.correlation.toFixed(2)}`;
    return { rate: gain, studies: run.studies, pass: gain >= 0.2, detail };
  },
};

/** Equal tutors, a judge that favours one: how often some order is established anyway. */
const wrongOrders: CalibrationCheck = {
  name: 'studies establishing a wrong order of tutors (four equal tutors, judge +0.5 on one, 1-5 scale, 20% sample; Holm over the pairs)',
  target: '<= 5%',
  studies: 1000,
  fastStudies: 150,
  run(run): CalibrationResult {
    const setting = { ...study(1, 5, 0.2, OWN_FAMILY), quality: [0.5, 0.5, 0.5, 0.5] };
    const tally = runStudies(setting, run);
    const rate = tally.wrongOrders / tally.studies;
    return { rate, studies: run.studies, pass: rate <= 0.05 };
  },
};

/** Tutors with different tasks: one has 80, two have the first 40 of them, and the last 40 are
 * harder. The plan's sampler spreads tasks, so it draws the first tutor's hard tasks more often;
 * weighting by the inclusion probabilities (samplingDesign's, from the plan's sampler) corrects it. */
function unequalRates(): Setting {
  const first = Array.from({ length: 80 }, (_, t) => t);
  const shared = first.slice(0, 40);
  const setting: Setting = {
    ...study(0, 2, 0.2, LENIENT),
    tutors: 3,
    tasks: 80,
    quality: [0.5, 0.45, 0.55],
    tasksOf: [first, shared, shared],
    taskShift: (task) => (task >= 40 ? -0.5 : 0),
  };
  const population = setting.tasksOf!.flatMap((tasks, m) => {
    return tasks.map((t) => ({ task_id: `t${t}`, model: `m${m}` }));
  });
  const rule = { scorers: ['a'], sample: '20%', overlap: 1, seed: 7, show_system_prompt: false };
  const design = samplingDesign({ rule, assignments: [] }, population);
  const inclusion = new Map<string, number>();
  for (const ref of population) {
    inclusion.set(
      `${ref.model}/${ref.task_id}`,
      design.inclusion!.get(pairKey(ref.task_id, ref.model))!,
    );
  }
  return { ...setting, inclusion };
}

const weightedDesign: CalibrationCheck = {
  name: "PPI 95% intervals cover the truth where the plan's rates differ within a tutor (weighted by inclusion probabilities), 0-2 scale, 20% sample",
  target: '>= 93%',
  studies: 600,
  fastStudies: 100,
  run(run): CalibrationResult {
    const weighted = unequalRates();
    const tally = runStudies(weighted, run);
    const unweighted = runStudies({ ...weighted, inclusion: undefined }, run);
    const means = share(tally.means);
    const differences = share(tally.differences);
    const rate = Math.min(means, differences);
    const detail =
      `means ${percent(means)}, differences ${percent(differences)}; unweighted: means ` +
      `${percent(share(unweighted.means))}, differences ${percent(share(unweighted.differences))}`;
    return { rate, studies: run.studies, pass: rate >= 0.93, detail };
  },
};

export const checks: CalibrationCheck[] = [
  ...coverageChecks,
  weightedDesign,
  neverWider,
  narrower,
  wrongOrders,
];

// ---- Leaf helpers ------------------------------------------------------------------------------

/** A standard normal draw (Box-Muller). */
function gauss(random: () => number): number {
  const u = 1 - random();
  const v = random();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
}

/** The standard normal CDF, to about 1e-7 (Abramowitz and Stegun 26.2.17): the truth of a
 * simulated study needs no more. */
function normalCdf(x: number): number {
  const t = 1 / (1 + 0.2316419 * Math.abs(x));
  const poly =
    t *
    (0.31938153 + t * (-0.356563782 + t * (1.781477937 + t * (-1.821255978 + t * 1.330274429))));
  const tail = (Math.exp((-x * x) / 2) / Math.sqrt(2 * Math.PI)) * poly;
  return x >= 0 ? 1 - tail : tail;
}

/** Pearson's correlation; 0 when either side does not vary. */
function pearson(xs: readonly number[], ys: readonly number[]): number {
  const mx = xs.reduce((sum, x) => sum + x, 0) / xs.length;
  const my = ys.reduce((sum, y) => sum + y, 0) / ys.length;
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  xs.forEach((x, i) => {
    sxy += (x - mx) * (ys[i]! - my);
    sxx += (x - mx) ** 2;
    syy += (ys[i]! - my) ** 2;
  });
  return sxx > 0 && syy > 0 ? sxy / Math.sqrt(sxx * syy) : 0;
}
