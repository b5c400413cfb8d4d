// report/ppi.ts: the tutors compared through the people's sample. People score a random sample of
// each tutor's transcripts, the judge scores all of them; prediction-powered inference (PPI++,
// Angelopoulos, Duchi and Zrnic 2023) corrects the judge's mean by its error on the sample, with an
// interval that holds whatever the judge's bias. Per tutor and dimension: the PPI++ mean and its
// interval beside the judge's mean and the people's; per dimension every pair of tutors' difference,
// Holm's procedure over the pairs, the ranking. Definitions: docs/analysis.md, "The tutors compared".
// Pure functions, nothing read or printed here.
import { allowedScores } from '../run-judge.ts';
import type { Dimension } from '../run-judge.ts';
import { studentTCdf, studentTQuantile } from './distributions.ts';

// ---- The estimator ------------------------------------------------------------------------------

/** One tutor on one dimension as the estimator takes it: the human-scored transcripts (`human`,
 * the scorers' mean, and `judge`), the judge's scores of the others (`judgeUnlabeled`), and each
 * transcript's inverse inclusion probability where the sample's rates differ (else none). */
export type PpiData = {
  human: readonly number[];
  judge: readonly number[];
  judgeUnlabeled: readonly number[];
  weights?: readonly number[];
  weightsUnlabeled?: readonly number[];
};

/** The normal z of a two-sided 95% interval. */
const Z95 = 1.959963984540054;

/**
 * PPI++'s mean as ppi_py computes it (`ppi_mean_pointestimate`, `ppi_mean_ci`): lambda, unless
 * given, is Cov(human, judge) over the n scored / ((1 + n/N) Var(judge) over all n + N), clipped to
 * [0, 1] (0 when the judge gives one score throughout); the estimate is the mean of lambda * judge
 * over the N others plus the mean of (human - lambda * judge) over the n; the normal interval's
 * variances are those of its two terms (divided by n, not n - 1). Weights are scaled to average 1.
 */
export function ppiMean(data: PpiData, lambda?: number) {
  const n = data.human.length;
  const N = data.judgeUnlabeled.length;
  const w = normalisedWeights(data.weights, n);
  const wu = normalisedWeights(data.weightsUnlabeled, N);
  const used = lambda ?? tunedLambda(data, w, wu);

  const imputed = data.judgeUnlabeled.map((score, i) => wu[i]! * used * score);
  const rectifier = data.human.map((human, i) => w[i]! * (human - used * data.judge[i]!));
  const estimate = meanOf(imputed) + meanOf(rectifier);
  const se = Math.sqrt(populationVariance(imputed) / N + populationVariance(rectifier) / n);
  const ci95: [number, number] = [estimate - Z95 * se, estimate + Z95 * se];
  return { estimate, lambda: used, se, ci95 };
}

/** ppi_py's power-tuning of the mean (`_calc_lam_glm` on the gradients at the lambda = 1
 * estimate), clipped to [0, 1]; 0 when the judge's scores do not vary (nothing to tune on). The
 * human-scored transcript at `skip` is left out (the jackknife), the others' weights scaled again to
 * average 1. Sums, no arrays: the jackknife calls it once per transcript. */
function tunedLambda(
  data: PpiData,
  w: readonly number[],
  wu: readonly number[],
  skip = -1,
): number {
  const n = skip < 0 ? data.human.length : data.human.length - 1;
  const N = data.judgeUnlabeled.length;
  if (n < 1 || N === 0) {
    return 0;
  }
  const kept = skip < 0 ? n : w.reduce((sum, weight, i) => (i === skip ? sum : sum + weight), 0);
  const scale = skip < 0 ? 1 : n / kept;

  // 1. The classic (lambda = 1) estimate.
  let rectified = 0;
  for (let i = 0; i < data.human.length; i++) {
    if (i !== skip) {
      rectified += w[i]! * scale * (data.human[i]! - data.judge[i]!);
    }
  }
  let imputed = 0;
  for (let j = 0; j < N; j++) {
    imputed += wu[j]! * data.judgeUnlabeled[j]!;
  }
  const classic = imputed / N + rectified / n;

  // 2. The gradients of the squared loss there: their covariance over the n, and the spread of
  // the judge's over all n + N.
  let grads = 0;
  let hats = 0;
  let products = 0;
  let hatSquares = 0;
  for (let i = 0; i < data.human.length; i++) {
    if (i === skip) {
      continue;
    }
    const grad = w[i]! * scale * (data.human[i]! - classic);
    const hat = w[i]! * scale * (data.judge[i]! - classic);
    grads += grad;
    hats += hat;
    products += grad * hat;
    hatSquares += hat * hat;
  }
  const covariance = products / n - (grads / n) * (hats / n);
  let allHats = hats;
  let allSquares = hatSquares;
  for (let j = 0; j < N; j++) {
    const hat = wu[j]! * (data.judgeUnlabeled[j]! - classic);
    allHats += hat;
    allSquares += hat * hat;
  }
  const spread = (allSquares - (allHats * allHats) / (n + N)) / (n + N - 1);
  if (!(spread > 1e-12)) {
    return 0;
  }
  const lambda = covariance / ((1 + n / N) * spread);
  return Math.min(1, Math.max(0, lambda));
}

/** Weights scaled to sum to `count` (ppi_py's `construct_weight_vector`); ones when none. */
function normalisedWeights(weights: readonly number[] | undefined, count: number): number[] {
  if (weights === undefined) {
    return new Array<number>(count).fill(1);
  }
  const total = weights.reduce((sum, weight) => sum + weight, 0);
  return weights.map((weight) => (weight / total) * count);
}

/** The scale a dimension's scores lie on, for the small-sample floor: its lowest and highest. */
export type ScaleRange = { low: number; high: number };

/** A dimension's scale: its lowest and highest allowed score. */
export function scaleOf(dimension: Dimension): ScaleRange {
  const scores = allowedScores(dimension);
  return { low: Math.min(...scores), high: Math.max(...scores) };
}

/** How the report's interval widens the normal one on few human-scored transcripts: the people's
 * term's variance is shrunk toward (range * PRIOR_SPREAD)^2 with PRIOR_DF pseudo-degrees of
 * freedom. */
export const PRIOR_DF = 1;
export const PRIOR_SPREAD = 1 / 3;

/** A mean with the parts its interval and the differences are made of. */
export type MeanInterval = {
  estimate: number;
  ci95: [number, number];
  lambda: number;
  /** the variance of the judge's term (over the N not scored by people) and its degrees of freedom */
  imputed: { variance: number; df: number };
  /** the variance of the people's term (with lambda's own uncertainty) and its degrees of freedom */
  rectifier: { variance: number; df: number };
  df: number;
};

/**
 * The report's interval of one tutor's mean, at a given lambda: the PPI++ estimate, its two
 * variances from the centred (weighted) terms divided by n - 1 and N - 1; the people's term's
 * variance shrunk toward (range / 3)^2 by one pseudo-degree of freedom, so that three transcripts
 * that happen to agree do not give a zero-width interval; with a tuned lambda, lambda's own
 * jackknife variance times that of the judge's mean on the sample against the rest; Student's t at
 * the Welch-Satterthwaite degrees of freedom of the two terms.
 */
export function meanInterval(
  data: PpiData,
  lambda: number,
  scale: ScaleRange,
  tuned: boolean,
): MeanInterval {
  const n = data.human.length;
  const N = data.judgeUnlabeled.length;
  const w = normalisedWeights(data.weights, n);
  const wu = normalisedWeights(data.weightsUnlabeled, N);

  // 1. The estimate (ppi_py's), and each term's deviations from its own (weighted) mean.
  const rectifiers = data.human.map((human, i) => human - lambda * data.judge[i]!);
  const rectifierMean = weightedMean(rectifiers, w);
  const imputedMean = N === 0 ? 0 : lambda * weightedMean(data.judgeUnlabeled, wu);
  const estimate = imputedMean + rectifierMean;

  // 2. The people's term: its variance, shrunk toward the scale's (range / 3)^2.
  const rectifierSquares = rectifiers.reduce((sum, value, i) => {
    return sum + (w[i]! * (value - rectifierMean)) ** 2;
  }, 0);
  const priorVariance = ((scale.high - scale.low) * PRIOR_SPREAD) ** 2;
  const rectifierDf = n - 1 + PRIOR_DF;
  let rectifierVariance = (rectifierSquares + PRIOR_DF * priorVariance) / rectifierDf / n;
  if (tuned && lambda > 0) {
    rectifierVariance += lambdaVariance(data, w, wu) * judgeGapVariance(data);
  }

  // 3. The judge's term over the transcripts people did not score.
  let imputedVariance = 0;
  if (lambda > 0 && N > 1) {
    const judgeMean = weightedMean(data.judgeUnlabeled, wu);
    const squares = data.judgeUnlabeled.reduce((sum, value, i) => {
      return sum + (wu[i]! * lambda * (value - judgeMean)) ** 2;
    }, 0);
    imputedVariance = squares / (N - 1) / N;
  }
  const imputedDf = Math.max(1, N - 1);

  // 4. Student's t at the Welch-Satterthwaite degrees of freedom of the sum.
  const parts = [
    { variance: imputedVariance, df: imputedDf },
    { variance: rectifierVariance, df: rectifierDf },
  ];
  const df = satterthwaite(parts);
  const half = studentTQuantile(0.975, df) * Math.sqrt(imputedVariance + rectifierVariance);
  return {
    estimate,
    ci95: [estimate - half, estimate + half],
    lambda,
    imputed: parts[0]!,
    rectifier: parts[1]!,
    df,
  };
}

/** Lambda's jackknife variance over the human-scored transcripts (each left out in turn, lambda
 * tuned again on the rest): what tuning it on the same transcripts adds to the estimate's error. */
function lambdaVariance(data: PpiData, w: readonly number[], wu: readonly number[]): number {
  const n = data.human.length;
  if (n < 3) {
    return 0;
  }
  const values: number[] = [];
  for (let out = 0; out < n; out++) {
    values.push(tunedLambda(data, w, wu, out));
  }
  const mean = meanOf(values);
  const squares = values.reduce((sum, value) => sum + (value - mean) ** 2, 0);
  return ((n - 1) / n) * squares;
}

/** The variance of the judge's mean over the n scored minus over the N others: lambda multiplies
 * it, so lambda's error reaches the estimate through it. */
function judgeGapVariance(data: PpiData): number {
  const n = data.human.length;
  const N = data.judgeUnlabeled.length;
  if (N === 0) {
    return 0;
  }
  return sampleVariance([...data.judge, ...data.judgeUnlabeled]) * (1 / n + 1 / N);
}

/** Welch-Satterthwaite degrees of freedom of a sum of independent variance estimates. */
export function satterthwaite(parts: readonly { variance: number; df: number }[]): number {
  const used = parts.filter((part) => part.variance > 0);
  if (used.length === 0) {
    return Math.max(1, Math.min(...parts.map((part) => part.df)));
  }
  const total = used.reduce((sum, part) => sum + part.variance, 0);
  const spread = used.reduce((sum, part) => sum + part.variance ** 2 / part.df, 0);
  return (total * total) / spread;
}

// ---- One tutor, one dimension -----------------------------------------------------------------

/** One tutor's mean on one dimension, as the report and the JSON give it. */
export type TutorMean = {
  /** the PPI++ estimate and its 95% interval; null with `reason` */
  estimate: number | null;
  ci95: [number, number] | null;
  /** the lambda used: PPI++'s, or 0 where the people's interval alone is the narrower */
  lambda: number | null;
  /** PPI++'s tuned lambda, before that choice */
  lambda_tuned: number | null;
  /** the tutor's transcripts scored by people and judged, and all it has judged */
  n_human: number;
  n_judged: number;
  human_only_mean: number | null;
  human_only_ci95: [number, number] | null;
  /** the judge's mean over every transcript it judged, and its interval */
  judge_only_mean: number | null;
  judge_only_ci95: [number, number] | null;
  /** the PPI interval's width over the people-only one */
  width_ratio: number | null;
  /** the judge-only mean outside the PPI interval: the judge's bias on this tutor */
  judge_biased: boolean | null;
  /** the interval's degrees of freedom, and whether the sample's transcripts were weighted */
  df: number | null;
  weighted: boolean;
  reason: string | null;
};

/** A tutor's mean with the variances its differences need (not printed). */
export type TutorMeanParts = { figures: TutorMean; interval: MeanInterval | null };

/** Fewer human-scored (and judged) transcripts than this: no estimate. */
export const MIN_HUMAN = 2;

/**
 * One tutor's mean on one dimension: PPI++ with lambda tuned, and the people's mean alone (lambda
 * 0) on the same transcripts; the narrower of the two intervals is the estimate (on few transcripts,
 * tuning lambda costs more than the judge gives back). Null, with the reason, under MIN_HUMAN
 * human-scored transcripts or with no judged one.
 */
export function tutorMean(data: PpiData, scale: ScaleRange): TutorMeanParts {
  const n = data.human.length;
  const nJudged = n + data.judgeUnlabeled.length;
  const weighted = data.weights !== undefined;
  const judgeAll = [...data.judge, ...data.judgeUnlabeled];
  const judgeOnly = nJudged === 0 ? null : plainMean(judgeAll);
  const empty: TutorMean = {
    estimate: null,
    ci95: null,
    lambda: null,
    lambda_tuned: null,
    n_human: n,
    n_judged: nJudged,
    human_only_mean: null,
    human_only_ci95: null,
    judge_only_mean: judgeOnly?.estimate ?? null,
    judge_only_ci95: judgeOnly?.ci95 ?? null,
    width_ratio: null,
    judge_biased: null,
    df: null,
    weighted,
    reason: null,
  };
  if (nJudged === 0) {
    return { figures: { ...empty, reason: 'no judged transcript' }, interval: null };
  }
  if (n < MIN_HUMAN) {
    const reason = `${n} human-scored transcript(s) among its judged ones: fewer than ${MIN_HUMAN}`;
    return { figures: { ...empty, reason }, interval: null };
  }

  const tuned = ppiMean(data).lambda;
  const people = meanInterval(data, 0, scale, false);
  const corrected = meanInterval(data, tuned, scale, true);
  const chosen = width(corrected.ci95) < width(people.ci95) ? corrected : people;
  const judgeMean = judgeOnly!.estimate;
  return {
    figures: {
      ...empty,
      estimate: chosen.estimate,
      ci95: chosen.ci95,
      lambda: chosen.lambda,
      lambda_tuned: tuned,
      human_only_mean: people.estimate,
      human_only_ci95: people.ci95,
      width_ratio: width(people.ci95) > 0 ? width(chosen.ci95) / width(people.ci95) : null,
      judge_biased: judgeMean < chosen.ci95[0] || judgeMean > chosen.ci95[1],
      df: chosen.df,
    },
    interval: chosen,
  };
}

/** A plain mean with its t interval (the judge's over all it judged); a point with one value. */
function plainMean(values: readonly number[]): { estimate: number; ci95: [number, number] } {
  const estimate = meanOf(values);
  if (values.length < 2) {
    return { estimate, ci95: [estimate, estimate] };
  }
  const half =
    studentTQuantile(0.975, values.length - 1) * Math.sqrt(sampleVariance(values) / values.length);
  return { estimate, ci95: [estimate - half, estimate + half] };
}

function width(ci: readonly [number, number]): number {
  return ci[1] - ci[0];
}

/** A planning figure: roughly the half-width of a tutor's 95% interval with n of its transcripts
 * scored by people and N more judged, people's scores assumed to spread with an SD of a quarter of
 * the scale; the report's own small-sample prior and t; a judge correlating `correlation` with
 * people narrowing it as PPI++ would at the best lambda, by sqrt(1 - rho^2 / (1 + n/N)). */
export function plannedHalfWidth(
  n: number,
  N: number,
  scale: ScaleRange,
  correlation: number,
): number {
  const range = scale.high - scale.low;
  const spread = (range / 4) ** 2;
  const prior = (range * PRIOR_SPREAD) ** 2;
  const df = n - 1 + PRIOR_DF;
  const variance = ((n - 1) * spread + PRIOR_DF * prior) / df / n;
  const gain = N > 0 ? 1 - correlation ** 2 / (1 + n / N) : 1;
  return studentTQuantile(0.975, df) * Math.sqrt(variance * gain);
}

// ---- Tutors against each other -----------------------------------------------------------------

/** The family-wise error of the established orders over a dimension's pairs (Holm). */
export const FAMILY_ALPHA = 0.05;

/** Two tutors' difference on one dimension: a minus b, its 95% interval, and whether the order is
 * established (Holm over the dimension's pairs). */
export type TutorDifference = {
  a: string;
  b: string;
  dimension: string;
  diff: number;
  ci95: [number, number];
  p: number;
  established: boolean;
};

/**
 * Every pair of tutors with an estimate, a before b in the order given: the difference of their
 * estimates, its interval from the sum of their variances (the two samples independent) at the
 * Welch-Satterthwaite degrees of freedom of the four terms, its two-sided p-value, and Holm's
 * procedure over the pairs at FAMILY_ALPHA.
 */
export function tutorDifferences(
  dimension: string,
  tutors: readonly { model: string; interval: MeanInterval | null }[],
): TutorDifference[] {
  const estimated = tutors.filter((tutor) => tutor.interval !== null);
  const pairs: Omit<TutorDifference, 'established'>[] = [];
  for (let i = 0; i < estimated.length; i++) {
    for (let j = i + 1; j < estimated.length; j++) {
      const a = estimated[i]!;
      const b = estimated[j]!;
      const parts = [a.interval!.imputed, a.interval!.rectifier, b.interval!.imputed];
      parts.push(b.interval!.rectifier);
      const variance = parts.reduce((sum, part) => sum + part.variance, 0);
      const df = satterthwaite(parts);
      const diff = a.interval!.estimate - b.interval!.estimate;
      const half = studentTQuantile(0.975, df) * Math.sqrt(variance);
      const p = variance > 0 ? 2 * studentTCdf(-Math.abs(diff) / Math.sqrt(variance), df) : 1;
      pairs.push({ a: a.model, b: b.model, dimension, diff, ci95: [diff - half, diff + half], p });
    }
  }
  const rejected = holmRejects(pairs.map((pair) => pair.p));
  return pairs.map((pair, i) => Object.assign(pair, { established: rejected[i]! }));
}

/** Holm's step-down procedure: which p-values are rejected at family-wise error `alpha`. */
export function holmRejects(pValues: readonly number[], alpha = FAMILY_ALPHA): boolean[] {
  const order = pValues.map((p, i) => ({ p, i })).sort((x, y) => x.p - y.p || x.i - y.i);
  const rejected = pValues.map(() => false);
  for (let rank = 0; rank < order.length; rank++) {
    if (order[rank]!.p > alpha / (order.length - rank)) {
      break;
    }
    rejected[order[rank]!.i] = true;
  }
  return rejected;
}

/** The tutors with an estimate, highest first (ties by name), and for each after the first whether
 * its order below the one before it is established. */
export type TutorRanking = { order: string[]; established: boolean[] };

export function tutorRanking(
  estimates: readonly { model: string; estimate: number | null }[],
  differences: readonly TutorDifference[],
): TutorRanking {
  const ranked = estimates
    .filter((entry) => entry.estimate !== null)
    .sort((x, y) => y.estimate! - x.estimate! || (x.model < y.model ? -1 : 1));
  const order = ranked.map((entry) => entry.model);
  const established = order.slice(1).map((model, i) => {
    const above = order[i]!;
    const pair = differences.find((entry) => {
      return (entry.a === above && entry.b === model) || (entry.a === model && entry.b === above);
    });
    return pair?.established ?? false;
  });
  return { order, established };
}

// ---- Leaf helpers ------------------------------------------------------------------------------

function meanOf(values: readonly number[]): number {
  let sum = 0;
  for (const value of values) {
    sum += value;
  }
  return sum / values.length;
}

function weightedMean(values: readonly number[], weights: readonly number[]): number {
  let sum = 0;
  let total = 0;
  values.forEach((value, i) => {
    sum += weights[i]! * value;
    total += weights[i]!;
  });
  return sum / total;
}

/** The variance dividing by the count (numpy's default std). */
function populationVariance(values: readonly number[]): number {
  const mean = meanOf(values);
  return values.reduce((sum, value) => sum + (value - mean) ** 2, 0) / values.length;
}

/** The variance dividing by the count less one (numpy's cov). */
function sampleVariance(values: readonly number[]): number {
  const mean = meanOf(values);
  return values.reduce((sum, value) => sum + (value - mean) ** 2, 0) / (values.length - 1);
}
