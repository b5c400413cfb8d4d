// report-analysis.ts: the figures of the report, from (human, judge) score pairs: agreement per
// dimension, the human ceiling, the judge's self-consistency, the models side by side, and the
// report's text cells, which the text formats (report.ts) and the page (report-html.ts) both print.
// Pure functions, nothing read or printed here.
import {
  allowedScores,
  byNumber,
  compareText,
  isComplete,
  pairKey,
  pairLabel,
  rubricDimensions,
} from './run-judge.ts';
import type { Dimension, HumanRow, Rubric, ScoreRow } from './run-judge.ts';

/** A row with scores, as the statistics read it: they need no notes. */
type Scored = Omit<ScoreRow, 'notes'>;

/** One judging's scores, dimension by dimension. */
export type Scores = Record<string, number>;

/** From the audit log: rows scored per judge, and the samples of each transcript judged k times. */
export type Audit = { judges: Record<string, number>; samples: Scores[][] };

// ---- The analysis ------------------------------------------------------------------------------

/** The report: agreement per dimension, the human ceiling, models side by side, what is missing. */
export function analyse(
  judged: Scored[],
  humans: HumanRow[],
  rubric: Rubric,
  audit: Audit = { judges: {}, samples: [] },
) {
  // 1. Each transcript's judge row, and its complete human rows (a row not fully scored is none).
  const judgeOf = new Map(judged.map((row) => [pairKey(row.task_id, row.model), row]));
  const complete = humans.filter((row) => isComplete(row, rubric));
  const humansOf = groupBy(complete, (row) => pairKey(row.task_id, row.model));

  // 2. Per dimension: the judge against the humans, the humans against each other, the samples.
  const dimensions = rubric.dimensions.map((dimension) => {
    return dimensionReport(dimension, humansOf, judgeOf, audit.samples);
  });

  // 3. Per model: the judge's and the humans' means side by side.
  const models = modelsSideBySide(judged, complete, rubric);

  return {
    pairs: dimensions[0]?.judge_vs_human.n ?? 0,
    missing: missingRows(judged, complete),
    dimensions,
    models,
    ranking: modelRanking(models, rubric),
    judges: audit.judges,
  };
}

export type Report = ReturnType<typeof analyse>;
export type DimensionReport = ReturnType<typeof dimensionReport>;
export type ModelReport = ReturnType<typeof modelsSideBySide>[number];

/** One dimension: the judge against each human row, the human ceiling, the judge's own samples. */
function dimensionReport(
  dimension: Dimension,
  humansOf: Map<string, HumanRow[]>,
  judgeOf: Map<string, Scored>,
  samples: Scores[][],
) {
  // Only transcripts with a judge row count, for the ceiling too: it is what the judge is held to.
  const name = dimension.name;
  const judgeUnits: Pair[][] = [];
  const humanUnits: Pair[][] = [];
  for (const [key, rows] of humansOf) {
    const judge = judgeOf.get(key);
    if (judge === undefined) {
      continue;
    }
    judgeUnits.push(rows.map((row) => [row.scores[name]!, judge.scores[name]!]));
    const scorers = scorerPairs(rows, name);
    if (scorers.length > 0) {
      humanUnits.push(scorers);
    }
  }

  const labels = allowedScores(dimension);
  return {
    name,
    labels,
    judge_vs_human: agreementOverTranscripts(judgeUnits, labels),
    human_vs_human: humanUnits.length > 0 ? humanCeiling(humanUnits, labels) : null,
    self_consistency: selfConsistency(samples, name),
  };
}

/** Each pair of a transcript's scorers once, the name that sorts first as the first rater. */
function scorerPairs(rows: HumanRow[], dimension: string): Pair[] {
  const sorted = [...rows].sort((a, b) => compareText(a.scorer, b.scorer));
  const pairs: Pair[] = [];
  for (let i = 0; i < sorted.length; i++) {
    for (let j = i + 1; j < sorted.length; j++) {
      pairs.push([sorted[i]!.scores[dimension]!, sorted[j]!.scores[dimension]!]);
    }
  }
  return pairs;
}

/** Agreement over every pair, and kappa's bootstrap interval over transcripts (a unit's pairs). */
function agreementOverTranscripts(units: Pair[][], labels: number[]) {
  const figures = agreement(units.flat(), labels);
  const kappaOf = (sample: Pair[]) => quadraticWeightedKappa(sample, labels);
  return {
    n: figures.n,
    exact: figures.exact,
    within_one: figures.within_one,
    kappa: figures.kappa,
    confusion: figures.confusion,
    kappa_ci95: bootstrapCi(units, kappaOf),
  };
}

/** How well the humans agree with each other: the ceiling to hold the judge to (no confusion). */
function humanCeiling(units: Pair[][], labels: number[]) {
  const figures = agreementOverTranscripts(units, labels);
  return {
    n: figures.n,
    exact: figures.exact,
    within_one: figures.within_one,
    kappa: figures.kappa,
    kappa_ci95: figures.kappa_ci95,
  };
}

/** Over transcripts judged several times: the share whose samples all agree, their mean range. */
export function selfConsistency(samples: Scores[][], dimension: string) {
  if (samples.length === 0) {
    return null;
  }

  const ranges = samples.map((scores) => {
    const values = scores.map((sample) => sample[dimension]!);
    return Math.max(...values) - Math.min(...values);
  });
  const unanimous = ranges.filter((range) => range === 0).length;
  return {
    n: ranges.length,
    unanimous: unanimous / ranges.length,
    mean_range: sum(ranges) / ranges.length,
  };
}

/** Per model, in order: the judge's and the humans' mean per dimension, with 95% intervals. */
function modelsSideBySide(judged: Scored[], complete: HumanRow[], rubric: Rubric) {
  const names = new Set([...judged, ...complete].map((row) => row.model));
  return [...names].sort(compareText).map((model) => {
    const judgeRows = judged.filter((row) => row.model === model);
    const humanRows = complete.filter((row) => row.model === model);
    const judge = meansWithIntervals(judgeRows, rubric);
    const human = meansWithIntervals(humanRows, rubric);
    return {
      model,
      n_judge: judgeRows.length,
      n_human: humanRows.length,
      judge_mean: judge.mean,
      judge_ci95: judge.ci95,
      human_mean: human.mean,
      human_ci95: human.ci95,
    };
  });
}

/** The mean per dimension over `rows`, and its bootstrap interval over tasks (resampled whole). */
function meansWithIntervals(rows: Scored[], rubric: Rubric) {
  const tasks = [...groupBy(rows, (row) => row.task_id).values()];
  const mean: Record<string, number | null> = {};
  const ci95: Record<string, [number, number] | null> = {};
  for (const name of rubricDimensions(rubric)) {
    const meanScore = (sample: Scored[]) => meanOf(sample.map((row) => row.scores[name]!));
    mean[name] = meanScore(rows);
    ci95[name] = bootstrapCi(tasks, meanScore);
  }
  return { mean, ci95 };
}

/** Per dimension, Spearman's correlation of the judge's and the humans' means of the models. */
function modelRanking(models: ModelReport[], rubric: Rubric) {
  const both = models.filter((row) => row.n_judge > 0 && row.n_human > 0);
  const ranking: Record<string, number | null> = {};
  for (const name of rubricDimensions(rubric)) {
    const judgeMeans = both.map((row) => row.judge_mean[name]!);
    const humanMeans = both.map((row) => row.human_mean[name]!);
    ranking[name] = spearman(judgeMeans, humanMeans);
  }
  return ranking;
}

/** What cannot be compared, listed: judge rows without a human row, and the reverse. */
function missingRows(judged: Scored[], complete: HumanRow[]) {
  const judgeKeys = new Set(judged.map((row) => pairKey(row.task_id, row.model)));
  const humanKeys = new Set(complete.map((row) => pairKey(row.task_id, row.model)));

  const noHuman = judged.filter((row) => !humanKeys.has(pairKey(row.task_id, row.model)));
  const noJudge = complete.filter((row) => !judgeKeys.has(pairKey(row.task_id, row.model)));

  // A transcript scored by several people is listed once.
  return {
    no_human: noHuman.map(pairLabel).sort(compareText),
    no_judge: [...new Set(noJudge.map(pairLabel))].sort(compareText),
  };
}

// ---- The report's text cells, for the text formats and the page --------------------------------

/** The summary line and both tables as text cells, each header first: what every format prints. */
export function reportCells(report: Report) {
  const agreementRows = report.dimensions.map(agreementCells);
  const modelRows = report.models.flatMap((row) => {
    return report.dimensions.map((dimension) => modelCells(row, dimension.name, report.ranking));
  });

  return {
    summary: summaryLine(report),
    agreement: [
      [
        'dimension',
        'n',
        'exact',
        'within one',
        'kappa [95% CI]',
        'human ceiling kappa [95% CI]',
        'samples unanimous / mean range',
      ],
      ...agreementRows,
    ],
    models: [
      [
        'model',
        'dimension',
        'judge mean [95% CI]',
        'human mean [95% CI]',
        'Spearman of model means',
      ],
      ...modelRows,
    ],
  };
}

/** How many pairs were compared, what is missing, and which judges scored the rows. */
function summaryLine(report: Report): string {
  const noHuman = report.missing.no_human.join(', ') || 'none';
  const noJudge = report.missing.no_judge.join(', ') || 'none';
  const byJudge = Object.entries(report.judges).map(([judge, rows]) => `${judge} ${rows}`);
  const judges = byJudge.join(', ') || 'no audit log';
  return `${report.pairs} (transcript, scorer) pairs; no human row: ${noHuman}; no judge row: ${noJudge}; rows by judge: ${judges}`;
}

/** One dimension's row of the agreement table. */
function agreementCells(dimension: DimensionReport): string[] {
  const judge = dimension.judge_vs_human;
  const ceiling = dimension.human_vs_human;
  const samples = dimension.self_consistency;

  let consistency = '-';
  if (samples !== null) {
    consistency = `${figure(samples.unanimous)} / ${figure(samples.mean_range)} (n ${samples.n})`;
  }

  return [
    dimension.name,
    String(judge.n),
    figure(judge.exact),
    figure(judge.within_one),
    withInterval(judge.kappa, judge.kappa_ci95),
    ceiling === null ? '-' : withInterval(ceiling.kappa, ceiling.kappa_ci95),
    consistency,
  ];
}

/** One model's row of the models table, on one dimension. */
function modelCells(row: ModelReport, dimension: string, ranking: Report['ranking']): string[] {
  return [
    row.model,
    dimension,
    withInterval(row.judge_mean[dimension], row.judge_ci95[dimension] ?? null),
    withInterval(row.human_mean[dimension], row.human_ci95[dimension] ?? null),
    figure(ranking[dimension]),
  ];
}

/** A figure to two decimals; '-' when there is none. */
function figure(value: number | null | undefined): string {
  return value === null || value === undefined ? '-' : value.toFixed(2);
}

/** A figure and its interval, as `0.71 [0.40, 0.90]`; '-' for either when there is none. */
function withInterval(value: number | null | undefined, ci: [number, number] | null): string {
  const interval = ci === null ? '-' : `[${figure(ci[0])}, ${figure(ci[1])}]`;
  return `${figure(value)} ${interval}`;
}

// ---- The statistics ----------------------------------------------------------------------------

/** Agreement of two raters on one dimension: its allowed scores are the labels, used or not. */
export type Agreement = {
  n: number;
  exact: number;
  within_one: number;
  kappa: number | null;
  confusion: number[][];
};

/** Two scores of one transcript: a human's first, then the judge's or another human's. */
export type Pair = readonly [number, number];

/** Exact and within-one agreement, quadratic-weighted kappa, the confusion matrix (rows: first). */
export function agreement(pairs: readonly Pair[], labels: readonly number[]): Agreement {
  const n = pairs.length;
  const exact = pairs.filter(([first, second]) => first === second).length;
  const withinOne = pairs.filter(([first, second]) => Math.abs(first - second) <= 1).length;
  return {
    n,
    exact: n > 0 ? exact / n : 0,
    within_one: n > 0 ? withinOne / n : 0,
    kappa: quadraticWeightedKappa(pairs, labels),
    confusion: confusionMatrix(pairs, labels),
  };
}

/** Counts of each (first, second) score in label order; a score not a label is an error. */
export function confusionMatrix(pairs: readonly Pair[], labels: readonly number[]): number[][] {
  const sorted = [...labels].sort(byNumber);
  const matrix = sorted.map(() => sorted.map(() => 0));
  for (const [first, second] of pairs) {
    const row = sorted.indexOf(first);
    const column = sorted.indexOf(second);
    if (row < 0 || column < 0) {
      const unknown = row < 0 ? first : second;
      throw new RangeError(`score ${unknown} is not one of the labels ${sorted.join(', ')}`);
    }
    matrix[row]![column]!++;
  }
  return matrix;
}

/** Cohen's kappa, weights (i - j)^2 / (k - 1)^2 over label positions; null with no pairs or when
 * no disagreement is expected (both raters always give one same score). */
export function quadraticWeightedKappa(pairs: readonly Pair[], labels: readonly number[]) {
  const observed = confusionMatrix(pairs, labels);
  const k = observed.length;
  const n = pairs.length;
  if (n === 0 || k < 2) {
    return null;
  }

  const rowTotals = observed.map((row) => sum(row));
  const columnTotals = observed[0]!.map((_, j) => sum(observed.map((row) => row[j]!)));
  let disagreed = 0;
  let expected = 0;
  for (let i = 0; i < k; i++) {
    for (let j = 0; j < k; j++) {
      const weight = (i - j) ** 2 / (k - 1) ** 2;
      disagreed += (weight * observed[i]![j]!) / n;
      expected += (weight * rowTotals[i]! * columnTotals[j]!) / n ** 2;
    }
  }
  return expected === 0 ? null : 1 - disagreed / expected;
}

/** A seeded percentile bootstrap interval (95% by default) of `statistic` over resampled units
 * (transcripts, each with its pairs); null when the statistic is undefined too often. */
export function bootstrapCi<T>(
  units: readonly (readonly T[])[],
  statistic: (sample: T[]) => number | null,
  { resamples = 2000, seed = 1, level = 0.95 } = {},
): [number, number] | null {
  if (units.length === 0) {
    return null;
  }

  const random = mulberry32(seed);
  const values: number[] = [];
  for (let r = 0; r < resamples; r++) {
    const drawn = Array.from({ length: units.length }, () => {
      return units[Math.floor(random() * units.length)]!;
    });
    const value = statistic(drawn.flat());
    if (value !== null && Number.isFinite(value)) {
      values.push(value);
    }
  }
  if (values.length < resamples / 2) {
    return null; // undefined in most resamples: no interval worth printing
  }

  values.sort(byNumber);
  const percentile = (q: number) => {
    const index = Math.min(values.length - 1, Math.max(0, Math.floor(q * values.length)));
    return values[index]!;
  };
  return [percentile((1 - level) / 2), percentile(1 - (1 - level) / 2)];
}

/** Spearman's rank correlation, ties at their average rank; null under 3 values or no spread. */
export function spearman(xs: readonly number[], ys: readonly number[]): number | null {
  if (xs.length !== ys.length) {
    throw new RangeError(`spearman: ${xs.length} values against ${ys.length}`);
  }
  if (xs.length < 3) {
    return null;
  }

  const xRanks = averageRanks(xs);
  const yRanks = averageRanks(ys);
  const xMean = sum(xRanks) / xRanks.length;
  const yMean = sum(yRanks) / yRanks.length;
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (let i = 0; i < xRanks.length; i++) {
    const dx = xRanks[i]! - xMean;
    const dy = yRanks[i]! - yMean;
    sxy += dx * dy;
    sxx += dx * dx;
    syy += dy * dy;
  }
  if (!sxx || !syy) {
    return null;
  }
  return sxy / Math.sqrt(sxx * syy);
}

/** 1-based ranks, tied values sharing the mean of the ranks they span. */
function averageRanks(values: readonly number[]): number[] {
  const order = values.map((value, index) => ({ value, index }));
  order.sort((a, b) => byNumber(a.value, b.value));

  const ranks = new Array<number>(values.length);
  let start = 0;
  while (start < order.length) {
    let end = start;
    while (end + 1 < order.length && order[end + 1]!.value === order[start]!.value) {
      end++;
    }
    for (let i = start; i <= end; i++) {
      ranks[order[i]!.index] = (start + end) / 2 + 1;
    }
    start = end + 1;
  }
  return ranks;
}

/** A small seeded PRNG (mulberry32): the same input must print the same bootstrap interval. */
function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// ---- Leaf helpers ------------------------------------------------------------------------------

/** Items grouped by key, the groups in the order of their first items. */
export function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const group = groups.get(key(item));
    if (group === undefined) {
      groups.set(key(item), [item]);
    } else {
      group.push(item);
    }
  }
  return groups;
}

function sum(values: readonly number[]): number {
  return values.reduce((total, value) => total + value, 0);
}

/** The mean, or null for no values. */
function meanOf(values: readonly number[]): number | null {
  return values.length === 0 ? null : sum(values) / values.length;
}
