// report/analysis.ts: the figures of the report, over the matched transcripts: agreement per
// dimension and per tutor, the human ceiling and the gap to it, leniency, Krippendorff's alpha, the
// judge's self-consistency, the models side by side, and the report's text cells, which the text
// formats (report.ts) and the page (report/html.ts) both print. Definitions: docs/analysis.md, "How
// the figures are computed". Pure functions, nothing read or printed here.
import {
  allowedScores,
  assignmentLabel,
  byNumber,
  compareAssignments,
  compareText,
  isComplete,
  oneLine,
  pairKey,
  pairLabel,
  rubricDimensions,
} from '../run-judge.ts';
import type { Dimension, HumanRow, Rubric, ScoreRow } from '../run-judge.ts';
import {
  ALT_TEST_HEADER,
  altTest,
  altTestAll,
  altTestCells,
  altTestNote,
  DEFAULT_EPSILON,
} from './alt-test.ts';
import { selfPreferenceFigures } from './self-preference.ts';
import {
  familyReadings,
  gapToCeiling,
  leniencyDifference,
  leniencyTest,
  verdictCell,
  verdictLines,
  verdictNotes,
  verdictScope,
} from './verdicts.ts';
import type { DimensionTests } from './verdicts.ts';

/** A row with scores, as the statistics read it: they need no notes. */
type Scored = Omit<ScoreRow, 'notes'>;

/** One judging's scores, dimension by dimension: a CSV row's. */
export type Scores = ScoreRow['scores'];

/** What the analysis takes of the audit log (report.ts's `analysisAudit` makes it of report/inputs.ts'
 * `Audit`): rows scored per judge, and the samples of each transcript judged k times. */
export type AnalysisAudit = {
  judges: Record<string, number>;
  samples: Scores[][];
  /** The family of the judge that scored the rows, as its answers record it; null: unknown. */
  family?: string | null;
  /** Its rows left out as stale (inputs edited since judged), as `model/task`. */
  stale_judge?: string[];
};

/** What the reading of the figures takes: the non-inferiority margin of the gap (kappa units),
 * each tutor's family (its models.json entry's), for self-preference, and the alternative
 * annotator test's epsilon (default DEFAULT_EPSILON). */
export type AnalysisOptions = {
  margin: number;
  tutorFamilies?: Map<string, string>;
  epsilon?: number;
};

export const DEFAULT_MARGIN = 0.1;

/** A figure over fewer (human, judge) or (scorer, scorer) pairs than this rests on few. */
export const FEW_PAIRS = 30;

// ---- The analysis ------------------------------------------------------------------------------

/** A matched transcript: its judge row and its complete human rows, sorted by scorer. */
type Matched = { judge: Scored; humans: HumanRow[] };

/** The report: agreement per dimension, the human ceiling, models side by side, what is missing. */
export function analyse(
  judged: Scored[],
  humans: HumanRow[],
  rubric: Rubric,
  audit: AnalysisAudit = { judges: {}, samples: [] },
  options: AnalysisOptions = { margin: DEFAULT_MARGIN },
) {
  // 1. Each transcript's judge row, and its complete human rows (a row not fully scored is none).
  const judgeOf = new Map(judged.map((row) => [pairKey(row.task_id, row.model), row]));
  const complete = comparableHumanRows(humans, rubric);
  const humansOf = groupBy(complete, (row) => pairKey(row.task_id, row.model));

  // 2. The matched transcripts (a judge row and a complete human row): every figure is over these.
  const matched: Matched[] = [];
  for (const [key, rows] of humansOf) {
    const judge = judgeOf.get(key);
    if (judge !== undefined) {
      matched.push({ judge, humans: [...rows].sort((a, b) => compareText(a.scorer, b.scorer)) });
    }
  }

  // 3. Per dimension and tutor model: agreement and both means, over the model's matched transcripts.
  const modelNames = [...new Set([...judged, ...complete].map((row) => row.model))].sort(
    compareText,
  );
  const matchedOf = groupBy(matched, (transcript) => transcript.judge.model);
  const perModel = rubric.dimensions.map((dimension) => {
    const withMatches = modelNames.filter((model) => matchedOf.has(model));
    return withMatches.map((model) => modelFigures(model, matchedOf.get(model)!, dimension));
  });

  // 4. Per dimension: the judge against the humans, the ceiling, the gap, leniency, alpha, samples;
  // the verdicts and leniency readings of every dimension read together.
  const tests: DimensionTests[] = [];
  const separately = rubric.dimensions.map((dimension, d) => {
    return dimensionReport(dimension, matched, audit.samples, perModel[d]!, options, tests);
  });
  const dimensions = familyReadings(separately, tests, options.margin);

  // 5. Per model: the judge's and the humans' means side by side.
  const models = modelsSideBySide(modelNames, judged, complete, perModel, rubric);

  return {
    pairs: dimensions[0]?.judge_vs_human.n ?? 0,
    missing: missingRows(judged, humans, rubric, audit.stale_judge ?? []),
    scope: verdictScope(matched),
    dimensions,
    models,
    ranking: modelRanking(models, rubric),
    self_preference: selfPreference(matched, rubric, audit.family ?? null, options.tutorFamilies),
    alt_test_all: altTestAll(dimensions, options.epsilon ?? DEFAULT_EPSILON),
    judges: audit.judges,
  };
}

/**
 * Self-preference: per dimension, the judge's leniency (its score minus the transcript's human
 * mean) over matched transcripts of tutors of its own family, over the others, and own minus
 * other, with an interval over tutors and its verdict (report/self-preference.ts). Null when the
 * judge's family is unknown, or no matched tutor shares it, or none differs.
 */
function selfPreference(
  matched: Matched[],
  rubric: Rubric,
  family: string | null,
  tutorFamilies: Map<string, string> | undefined,
) {
  if (family === null || tutorFamilies === undefined) {
    return null;
  }
  const own = matched.map((transcript) => tutorFamilies.get(transcript.judge.model) === family);
  if (!own.includes(true) || !own.includes(false)) {
    return null;
  }

  const dimensions = rubric.dimensions.map((dimension) => {
    const units = matched.map((transcript, i) => {
      const humanScores = transcript.humans.map((row) => row.scores[dimension.name]!);
      const judge = transcript.judge.scores[dimension.name]!;
      const leniency = judge - sum(humanScores) / humanScores.length;
      return { tutor: transcript.judge.model, own: own[i]!, leniency };
    });
    return { name: dimension.name, ...selfPreferenceFigures(units) };
  });
  return { family, dimensions };
}

export type Report = ReturnType<typeof analyse>;
export type DimensionReport = ReturnType<typeof dimensionReport>;
export type ModelReport = ReturnType<typeof modelsSideBySide>[number];

/** A dimension's scale: its allowed scores (the labels) and each one's position on it. */
type Scale = { labels: number[]; k: number; positionOf: Map<number, number> };

function scaleOf(allowed: readonly number[]): Scale {
  const labels = [...allowed].sort(byNumber);
  const positionOf = new Map(labels.map((label, i) => [label, i]));
  return { labels, k: labels.length, positionOf };
}

/** A score's position on its scale; a score not a label is an error. */
function position(scale: Scale, score: number): number {
  const found = scale.positionOf.get(score);
  if (found === undefined) {
    throw new RangeError(`score ${score} is not one of the labels ${scale.labels.join(', ')}`);
  }
  return found;
}

/** One dimension over the matched transcripts: the judge against each human row, the ceiling
 * (transcripts with two or more scorers), the gap between them, leniency, alpha, the samples. */
function dimensionReport(
  dimension: Dimension,
  matched: Matched[],
  samples: Scores[][],
  perModel: ReturnType<typeof modelFigures>[],
  options: AnalysisOptions,
  tests: DimensionTests[],
) {
  const name = dimension.name;
  const scale = scaleOf(allowedScores(dimension));
  const k = scale.k;

  // 1. Each transcript's sums. All matched: (human, judge) counts, judge - human mean, alpha terms.
  // With two or more scorers: (human, judge) counts, (scorer, scorer) counts, the humans' alpha terms.
  const judgeCells = 0;
  const leniencyAt = k * k;
  const judgeAlphaAt = k * k + 1;
  const all = unitSums(k * k + 1 + k + 1);
  const scorerCells = k * k;
  const humanAlphaAt = 2 * k * k;
  const ceiling = unitSums(2 * k * k + k + 1);
  const differences: number[] = [];
  for (const transcript of matched) {
    const judge = transcript.judge.scores[name]!;
    const humanScores = transcript.humans.map((row) => row.scores[name]!);
    const judgeAt = position(scale, judge);
    const humanAt = humanScores.map((score) => position(scale, score));

    const row = new Float64Array(all.width);
    judgeCounts(row, judgeCells, humanAt, judgeAt, k);
    row[leniencyAt] = judge - sum(humanScores) / humanScores.length;
    alphaTerms(row, judgeAlphaAt, [...humanAt, judgeAt], k);
    addUnit(all, row);
    differences.push(leniencyDifference(judge, humanScores));

    if (humanAt.length >= 2) {
      const pairs = new Float64Array(ceiling.width);
      judgeCounts(pairs, judgeCells, humanAt, judgeAt, k);
      scorerCounts(pairs, scorerCells, humanAt, k);
      alphaTerms(pairs, humanAlphaAt, humanAt, k);
      addUnit(ceiling, pairs);
    }
  }

  // 2. The point estimates (every transcript once) and the bootstrap intervals (resampled).
  const n = all.count;
  const allTotals = totals(all);
  const allIntervals = bootstrapIntervals(all, [
    (sums) => kappaOfCounts(sums, judgeCells, k),
    (sums) => sums[leniencyAt]! / n,
    (sums) => alphaOfTerms(sums, judgeAlphaAt, k),
  ]);
  const ceilingTotals = totals(ceiling);
  const kappas = {
    judge: (sums: Float64Array) => kappaOfCounts(sums, judgeCells, k),
    ceiling: (sums: Float64Array) => kappaOfCounts(sums, scorerCells, k),
  };
  const ceilingIntervals = bootstrapIntervals(ceiling, [
    (sums) => kappaOfCounts(sums, scorerCells, k),
    (sums) => alphaOfTerms(sums, humanAlphaAt, k),
  ]);

  // 3. The figures, named as the JSON prints them.
  const judgeFigures = countsAgreement(allTotals, judgeCells, k);
  const scorerFigures = countsAgreement(ceilingTotals, scorerCells, k);
  const hasCeiling = ceiling.count > 0;
  const gap = hasCeiling
    ? gapToCeiling(ceiling, kappas, options.margin, scorerFigures.n, FEW_PAIRS)
    : null;
  const leniency = leniencyTest(differences);
  tests.push({ gap: gap === null ? null : gap.test, leniency });
  return {
    name,
    labels: scale.labels,
    judge_vs_human: {
      n: judgeFigures.n,
      exact: judgeFigures.exact,
      within_one: judgeFigures.within_one,
      kappa: judgeFigures.kappa,
      confusion: judgeFigures.confusion,
      kappa_ci95: allIntervals[0]!.ci95,
      undefined_resamples: allIntervals[0]!.undefined_resamples,
      resamples: allIntervals[0]!.resamples,
      few_pairs: judgeFigures.n < FEW_PAIRS,
    },
    human_vs_human: hasCeiling
      ? {
          n: scorerFigures.n,
          exact: scorerFigures.exact,
          within_one: scorerFigures.within_one,
          kappa: scorerFigures.kappa,
          kappa_ci95: ceilingIntervals[0]!.ci95,
          undefined_resamples: ceilingIntervals[0]!.undefined_resamples,
          resamples: ceilingIntervals[0]!.resamples,
          few_pairs: scorerFigures.n < FEW_PAIRS,
        }
      : null,
    gap_to_ceiling: gap === null ? null : gap.figures,
    alt_test: altTest(altTranscripts(matched, scale, name), options.epsilon ?? DEFAULT_EPSILON),
    leniency: {
      mean_diff: n > 0 ? allTotals[leniencyAt]! / n : null,
      ci95: allIntervals[1]!.ci95,
      reading: null as 'lenient' | 'harsh' | null, // read with every dimension's (familyReadings)
    },
    alpha: {
      humans: hasCeiling ? alphaOfTerms(ceilingTotals, humanAlphaAt, k) : null,
      humans_ci95: ceilingIntervals[1]!.ci95,
      humans_and_judge: n > 0 ? alphaOfTerms(allTotals, judgeAlphaAt, k) : null,
      humans_and_judge_ci95: allIntervals[2]!.ci95,
    },
    per_model: perModel.map((figures) => figures.agreement),
    self_consistency: selfConsistency(samples, name),
  };
}

/** The matched transcripts as the alternative annotator test reads them: positions on the scale. */
function altTranscripts(matched: Matched[], scale: Scale, name: string) {
  return matched.map((transcript) => {
    const scorers = transcript.humans.map((row) => {
      return { scorer: row.scorer, position: position(scale, row.scores[name]!) };
    });
    return { judge: position(scale, transcript.judge.scores[name]!), scorers };
  });
}

export type { Verdict } from './verdicts.ts';

/** One tutor model on one dimension, over its matched transcripts: agreement, and both means. */
function modelFigures(model: string, matched: Matched[], dimension: Dimension) {
  const name = dimension.name;
  const scale = scaleOf(allowedScores(dimension));
  const k = scale.k;

  // 1. Each transcript's sums: (human, judge) counts, the judge's score, the humans' mean score.
  const judgeAt = k * k;
  const humanAt = k * k + 1;
  const units = unitSums(k * k + 2);
  for (const transcript of matched) {
    const judge = transcript.judge.scores[name]!;
    const humanScores = transcript.humans.map((row) => row.scores[name]!);
    const row = new Float64Array(units.width);
    const humanPositions = humanScores.map((score) => position(scale, score));
    judgeCounts(row, 0, humanPositions, position(scale, judge), k);
    row[judgeAt] = judge;
    row[humanAt] = sum(humanScores) / humanScores.length;
    addUnit(units, row);
  }

  // 2. Point estimates and intervals.
  const n = units.count;
  const all = totals(units);
  const intervals = bootstrapIntervals(units, [
    (sums) => kappaOfCounts(sums, 0, k),
    (sums) => sums[judgeAt]! / n,
    (sums) => sums[humanAt]! / n,
  ]);
  const figures = countsAgreement(all, 0, k);
  return {
    agreement: {
      model,
      n: figures.n,
      exact: figures.exact,
      within_one: figures.within_one,
      kappa: figures.kappa,
      kappa_ci95: intervals[0]!.ci95,
      undefined_resamples: intervals[0]!.undefined_resamples,
      resamples: intervals[0]!.resamples,
      few_pairs: figures.n < FEW_PAIRS,
    },
    n_matched: n,
    judge_mean: all[judgeAt]! / n,
    judge_ci95: intervals[1]!.ci95,
    human_mean: all[humanAt]! / n,
    human_ci95: intervals[2]!.ci95,
  };
}

/**
 * Judges against each other, on transcripts every one of them scored (`judged[j]` the rows of judge
 * j, the first the reference): per dimension, each judge's kappa with the people minus the first
 * judge's, its interval paired on the same resamples, and its agreement with the first judge
 * (exact, kappa; one pair a transcript). Null for the first judge itself.
 */
export function judgesAgainstEachOther(judged: Scored[][], humans: HumanRow[], rubric: Rubric) {
  // 1. The transcripts: those with a complete human row and a row of every judge, in the order
  // analyse meets them, so a judge's resamples here are those of its own interval.
  const complete = comparableHumanRows(humans, rubric);
  const rowsOf = judged.map(
    (rows) => new Map(rows.map((row) => [pairKey(row.task_id, row.model), row])),
  );
  const transcripts: { judges: Scored[]; humans: HumanRow[] }[] = [];
  for (const [key, rows] of groupBy(complete, (row) => pairKey(row.task_id, row.model))) {
    const judges = rowsOf.map((of) => of.get(key));
    if (judges.every((row) => row !== undefined)) {
      transcripts.push({ judges: judges as Scored[], humans: rows });
    }
  }

  // 2. Per dimension: (human, judge j) counts for every judge, then (first, judge j) for the rest.
  const perDimension = rubric.dimensions.map((dimension) => {
    const scale = scaleOf(allowedScores(dimension));
    const k = scale.k;
    const cells = k * k;
    const withFirstAt = judged.length * cells;
    const units = unitSums(withFirstAt + (judged.length - 1) * cells);
    for (const transcript of transcripts) {
      const row = new Float64Array(units.width);
      const humanAt = transcript.humans.map((human) =>
        position(scale, human.scores[dimension.name]!),
      );
      const judgeAt = transcript.judges.map((judge) =>
        position(scale, judge.scores[dimension.name]!),
      );
      judgeAt.forEach((at, j) => {
        judgeCounts(row, j * cells, humanAt, at, k);
        if (j > 0) {
          judgeCounts(row, withFirstAt + (j - 1) * cells, [judgeAt[0]!], at, k);
        }
      });
      addUnit(units, row);
    }

    const kappaOf = (sums: Float64Array, at: number) => kappaOfCounts(sums, at, k);
    const diffOf = (j: number) => (sums: Float64Array) => {
      const first = kappaOf(sums, 0);
      const other = kappaOf(sums, j * cells);
      return first === null || other === null ? null : other - first;
    };
    const others = judged.slice(1).map((_, i) => i + 1);
    const statistics = others.flatMap((j) => {
      return [diffOf(j), (sums: Float64Array) => kappaOf(sums, withFirstAt + (j - 1) * cells)];
    });
    const intervals = bootstrapIntervals(units, statistics);
    const all = totals(units);
    return judged.map((_, j) => {
      if (j === 0) {
        return { kappa_diff_from_first: null, agreement_with_first: null };
      }
      const diff = intervals[2 * (j - 1)]!;
      const withFirst = intervals[2 * (j - 1) + 1]!;
      const agreementFigures = countsAgreement(all, withFirstAt + (j - 1) * cells, k);
      return {
        kappa_diff_from_first: {
          kappa_diff: diffOf(j)(all),
          ci95: diff.ci95,
          undefined_resamples: diff.undefined_resamples,
          resamples: diff.resamples,
        },
        agreement_with_first: {
          n: agreementFigures.n,
          exact: agreementFigures.exact,
          kappa: agreementFigures.kappa,
          kappa_ci95: withFirst.ci95,
          undefined_resamples: withFirst.undefined_resamples,
          resamples: withFirst.resamples,
        },
      };
    });
  });

  // 3. Per judge, its dimensions in the rubric's order.
  return judged.map((_, j) => perDimension.map((judges) => judges[j]!));
}

/** A jury's rows: on each transcript every judge scored, per dimension the median of their
 * scores; of an even count, the lower of the two middle ones (a score the scale allows). */
export function juryRows(judged: Scored[][], rubric: Rubric): Scored[] {
  const first = judged[0] ?? [];
  const others = judged.slice(1).map((rows) => {
    return new Map(rows.map((row) => [pairKey(row.task_id, row.model), row]));
  });
  const rows: Scored[] = [];
  for (const row of first) {
    const members = others.map((of) => of.get(pairKey(row.task_id, row.model)));
    if (members.some((member) => member === undefined)) {
      continue;
    }
    const all = [row, ...(members as Scored[])];
    const scores: Scores = {};
    for (const name of rubricDimensions(rubric)) {
      const sorted = all.map((member) => member.scores[name]!).sort(byNumber);
      scores[name] = sorted[Math.floor((sorted.length - 1) / 2)]!;
    }
    rows.push({ task_id: row.task_id, model: row.model, scores });
  }
  return rows;
}

/** Adds each (human, judge) pair of a transcript to the counts at `at` (row: the human). */
function judgeCounts(row: Float64Array, at: number, humans: number[], judge: number, k: number) {
  for (const human of humans) {
    row[at + human * k + judge]! += 1;
  }
}

/** Adds each pair of a transcript's scorers once, the name sorting first as the first rater. */
function scorerCounts(row: Float64Array, at: number, humans: number[], k: number) {
  for (let i = 0; i < humans.length; i++) {
    for (let j = i + 1; j < humans.length; j++) {
      row[at + humans[i]! * k + humans[j]!]! += 1;
    }
  }
}

/** A unit's terms of Krippendorff's alpha at `at`: its count of each position (k of them), then
 * its observed disagreement, the squared differences of its ordered pairs over (m - 1). */
function alphaTerms(row: Float64Array, at: number, positions: number[], k: number) {
  const m = positions.length;
  if (m < 2) {
    return; // a unit with one value is not pairable: it counts for nothing
  }
  let disagreement = 0;
  for (const a of positions) {
    row[at + a]! += 1;
    for (const b of positions) {
      disagreement += (a - b) ** 2;
    }
  }
  row[at + k]! += disagreement / (m - 1);
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

/** Per model, in order: the judge's and the humans' means per dimension over the matched
 * transcripts, with 95% intervals, and the judge's mean over all it judged (`judge_mean_all`). */
function modelsSideBySide(
  modelNames: string[],
  judged: Scored[],
  complete: HumanRow[],
  perModel: ReturnType<typeof modelFigures>[][],
  rubric: Rubric,
) {
  const judgedOf = groupBy(judged, (row) => row.model);
  const humanRowsOf = groupBy(complete, (row) => row.model);
  const dimensionNames = rubricDimensions(rubric);
  return modelNames.map((model) => {
    const judgeRows = judgedOf.get(model) ?? [];
    const judgeMean: Record<string, number | null> = {};
    const judgeCi: Record<string, [number, number] | null> = {};
    const humanMean: Record<string, number | null> = {};
    const humanCi: Record<string, [number, number] | null> = {};
    const judgeMeanAll: Record<string, number | null> = {};
    let nMatched = 0;
    dimensionNames.forEach((name, d) => {
      const figures = perModel[d]!.find((row) => row.agreement.model === model);
      nMatched = figures?.n_matched ?? 0;
      judgeMean[name] = figures?.judge_mean ?? null;
      judgeCi[name] = figures?.judge_ci95 ?? null;
      humanMean[name] = figures?.human_mean ?? null;
      humanCi[name] = figures?.human_ci95 ?? null;
      judgeMeanAll[name] = meanOf(judgeRows.map((row) => row.scores[name]!));
    });
    return {
      model,
      n_judge: judgeRows.length,
      n_human: humanRowsOf.get(model)?.length ?? 0,
      n_matched: nMatched,
      judge_mean: judgeMean,
      judge_ci95: judgeCi,
      human_mean: humanMean,
      human_ci95: humanCi,
      judge_mean_all: judgeMeanAll,
    };
  });
}

/** Per dimension, Spearman's correlation of the judge's and the humans' means of the models, over
 * matched transcripts; means equal as fractions tie (rounded to 1e-9 before ranking). */
function modelRanking(models: ModelReport[], rubric: Rubric) {
  const both = models.filter((row) => row.n_matched > 0);
  const ranking: Record<string, number | null> = {};
  for (const name of rubricDimensions(rubric)) {
    const judgeMeans = both.map((row) => roundForTies(row.judge_mean[name]!));
    const humanMeans = both.map((row) => roundForTies(row.human_mean[name]!));
    ranking[name] = spearman(judgeMeans, humanMeans);
  }
  return ranking;
}

/** A mean rounded to 1e-9: 1/3 summed in two orders is one value, not two ranks. */
function roundForTies(value: number): number {
  return Math.round(value * 1e9) / 1e9;
}

/** The human rows every figure rests on: complete, and of the transcript as it is now. */
export function comparableHumanRows(humans: HumanRow[], rubric: Rubric): HumanRow[] {
  return humans.filter((row) => isComplete(row, rubric) && row.stale !== true);
}

/**
 * What cannot be compared, listed: judge rows without a human row, and the reverse; human rows
 * left out of every figure, incomplete (an empty score) or stale (their transcript edited since);
 * judge rows left out as stale (an input of their prompt edited since).
 */
function missingRows(judged: Scored[], humans: HumanRow[], rubric: Rubric, staleJudge: string[]) {
  const complete = comparableHumanRows(humans, rubric);
  const judgeKeys = new Set(judged.map((row) => pairKey(row.task_id, row.model)));
  const humanKeys = new Set(complete.map((row) => pairKey(row.task_id, row.model)));

  const noHuman = judged.filter((row) => !humanKeys.has(pairKey(row.task_id, row.model)));
  // A stale judge row is listed as stale only, not as no judge row.
  const stale = new Set(staleJudge);
  const noJudge = complete.filter((row) => {
    return !judgeKeys.has(pairKey(row.task_id, row.model)) && !stale.has(pairLabel(row));
  });
  const incomplete = humans.filter((row) => !isComplete(row, rubric));
  // An incomplete row is listed as incomplete only, stale or not.
  const staleHuman = humans.filter((row) => row.stale === true && isComplete(row, rubric));

  // A transcript scored by several people is listed once.
  return {
    no_human: noHuman.map(pairLabel).sort(compareText),
    no_judge: [...new Set(noJudge.map(pairLabel))].sort(compareText),
    incomplete_human: incomplete.sort(compareAssignments).map(assignmentLabel),
    stale_human: staleHuman.sort(compareAssignments).map(assignmentLabel),
    stale_judge: [...staleJudge].sort(compareText),
  };
}

// ---- The report's text cells, for the text formats and the page --------------------------------

/** A table as text cells, its header first, with what it shows said above it. */
export type CellTable = { title: string; rows: string[][] };

/** Footnotes of a report's tables: each said once, its marker (¹, ², ...) after the cells it is of. */
export type Footnotes = string[];

/** The report as text tables. Narrow (the default), each fits in 100 columns: the judge against the
 * people, against the human ceiling, reliability; then the tutors, one table a dimension. Wide (one
 * table for the dimensions, one for the tutors), as --wide prints it and the page shows it. */
export function reportCells(report: Report, wide = false) {
  const notes: Footnotes = [];
  const names = report.dimensions.map((dimension) => dimension.name);
  const judgeRows = report.dimensions.map((dimension) => judgeCells(dimension, notes));
  const ceilingRows = report.dimensions.map((dimension) => ceilingCells(dimension, notes));
  const reliabilityRows = report.dimensions.map(reliabilityCells);
  const altRows = report.dimensions.map((dimension) =>
    altTestCells(dimension.name, dimension.alt_test),
  );
  const tables: CellTable[] = [];
  if (wide) {
    const rows = report.dimensions.map((dimension, d) => {
      const ceiling = ceilingRows[d]!.slice(1);
      const alt = altRows[d]!.slice(1);
      return [...judgeRows[d]!, ...ceiling, ...alt, ...reliabilityRows[d]!.slice(1)];
    });
    const header = [
      ...JUDGE_HEADER,
      ...CEILING_HEADER.slice(1),
      ...ALT_TEST_HEADER.slice(1),
      ...RELIABILITY_HEADER.slice(1),
    ];
    tables.push({
      title:
        'per dimension: the judge against the people, the human ceiling, the alternative ' +
        'annotator test, reliability',
      rows: [header, ...rows],
    });
  } else {
    tables.push({ title: 'the judge against the people', rows: [JUDGE_HEADER, ...judgeRows] });
    tables.push({
      title: 'against the human ceiling (how well two people agree)',
      rows: [CEILING_HEADER, ...ceilingRows],
    });
    const epsilon = report.alt_test_all.epsilon;
    const place = "can the judge take a scorer's place";
    tables.push({
      title: `the alternative annotator test at epsilon ${epsilon} (${place})`,
      rows: [ALT_TEST_HEADER, ...altRows],
    });
    tables.push({ title: 'reliability', rows: [RELIABILITY_HEADER, ...reliabilityRows] });
  }

  // The tutors: one table, or one a dimension (without the dimension column).
  const modelRows = names.map((name, d) => {
    return report.models.map((row) => modelCells(row, report.dimensions[d]!, notes));
  });
  if (wide) {
    const rows = modelRows.flatMap((rows, d) =>
      rows.map((row) => [row[0]!, names[d]!, ...row.slice(1)]),
    );
    const header = [MODEL_HEADER[0]!, 'dimension', ...MODEL_HEADER.slice(1)];
    tables.push({ title: 'the tutors side by side', rows: [header, ...rows] });
  } else {
    names.forEach((name, d) => {
      const spearman = figure(report.ranking[name]);
      const title = `the tutors on ${name} (Spearman of the means ${spearman})`;
      tables.push({ title, rows: [MODEL_HEADER, ...modelRows[d]!] });
    });
  }
  const verdicts = verdictLines(report);
  return { summary: summaryLine(report), verdicts, tables, notes: readingNotes(report, notes) };
}

const JUDGE_HEADER = ['dimension', 'n', 'exact', 'within 1', 'kappa [95% CI]', 'leniency [95% CI]'];
const CEILING_HEADER = ['dimension', 'pairs', 'ceiling kappa [95% CI]', 'gap [95% CI]', 'verdict'];
const RELIABILITY_HEADER = ['dimension', 'alpha people / with judge', 'samples unanimous / range'];
const MODEL_HEADER = [
  'model',
  'n',
  'judge mean [95% CI]',
  'human mean [95% CI]',
  'all judged',
  'kappa [95% CI]',
];

/** How many pairs were compared, what is missing (counts, the first few named; the JSON lists all),
 * and which judges scored the rows. */
function summaryLine(report: Report): string {
  const missing = report.missing;
  // Names come from files people and servers write: their control characters are shown escaped.
  const byJudge = Object.entries(report.judges).map(([judge, rows]) => `${oneLine(judge)} ${rows}`);
  const judges = byJudge.join(', ') || 'no audit log';
  const parts = [
    `${report.pairs} (transcript, scorer) pairs`,
    `no human row: ${fewNamed(missing.no_human)}`,
    `no judge row: ${fewNamed(missing.no_judge)}`,
    `rows by judge: ${judges}`,
  ];
  // Left out of every figure, so said whenever there are any.
  if (missing.incomplete_human.length > 0) {
    parts.push(`incomplete human rows (left out): ${fewNamed(missing.incomplete_human)}`);
  }
  if (missing.stale_human.length > 0) {
    const stale = fewNamed(missing.stale_human);
    parts.push(`stale human rows (transcript edited since scored; left out): ${stale}`);
  }
  if (missing.stale_judge.length > 0) {
    const stale = fewNamed(missing.stale_judge);
    parts.push(`stale judge rows (an input edited since judged; left out): ${stale}`);
  }
  return wrapped(parts, '; ', 100);
}

/** Parts joined by `separator`, a line broken after one where the next part would pass `width`
 * columns; the lines after the first indented by two spaces. */
export function wrapped(parts: string[], separator: string, width: number): string {
  const lines = [parts[0] ?? ''];
  for (const part of parts.slice(1)) {
    const last = lines.length - 1;
    if (lines[last]!.length + separator.length + part.length > width) {
      lines[last] += separator.trimEnd();
      lines.push(`  ${part}`);
    } else {
      lines[last] += `${separator}${part}`;
    }
  }
  return lines.join('\n');
}

/** A list as text: `none`, all of it up to three, else its count and the first three. */
function fewNamed(names: string[]): string {
  if (names.length === 0) {
    return 'none';
  }
  if (names.length <= 3) {
    return names.map(oneLine).join(', ');
  }
  return `${names.length} (${names.slice(0, 3).map(oneLine).join(', ')}, ...)`;
}

/** One dimension's row of the judge's table: agreement with the people, leniency. */
function judgeCells(dimension: DimensionReport, notes: Footnotes): string[] {
  const judge = dimension.judge_vs_human;
  const leniency = dimension.leniency;
  const kappa = estimate(judge.kappa, judge.kappa_ci95, judge.n);
  const reading = leniency.reading === null ? '' : ` ${leniency.reading}`;
  return [
    dimension.name,
    String(judge.n),
    figure(judge.exact),
    figure(judge.within_one),
    kappa + undefinedNote(notes, judge, `${dimension.name}: kappa`),
    estimate(leniency.mean_diff, leniency.ci95, judge.n) + reading,
  ];
}

/** One dimension's row of the ceiling's table: the people's kappa, the gap and its verdict. */
function ceilingCells(dimension: DimensionReport, notes: Footnotes): string[] {
  const ceiling = dimension.human_vs_human;
  const gap = dimension.gap_to_ceiling;
  if (ceiling === null || gap === null) {
    return [dimension.name, '0', '-', '-', '-'];
  }
  const kappa = estimate(ceiling.kappa, ceiling.kappa_ci95, ceiling.n);
  const gapCell = estimate(gap.kappa_diff, gap.ci95, ceiling.n);
  return [
    dimension.name,
    String(ceiling.n),
    kappa + undefinedNote(notes, ceiling, `${dimension.name}: ceiling kappa`),
    gapCell + undefinedNote(notes, gap, `${dimension.name}: gap`),
    verdictWords(gap),
  ];
}

/** One dimension's row of reliability: alpha without and with the judge, self-consistency. */
function reliabilityCells(dimension: DimensionReport): string[] {
  const alpha = dimension.alpha;
  const samples = dimension.self_consistency;
  let consistency = '-';
  if (samples !== null) {
    consistency = `${figure(samples.unanimous)} / ${figure(samples.mean_range)} (n ${samples.n})`;
  }
  return [
    dimension.name,
    `${figure(alpha.humans)} / ${figure(alpha.humans_and_judge)}`,
    consistency,
  ];
}

/** A gap's verdict in words: `as good`, `below`, `undetermined (60)`, `too few (30)`, `no
 * ceiling`; `-` without one (report/verdicts.ts). */
export function verdictWords(gap: NonNullable<DimensionReport['gap_to_ceiling']>): string {
  return verdictCell(gap);
}

/** One model's row of the tutors' table, on one dimension (n: its matched transcripts). */
function modelCells(row: ModelReport, dimension: DimensionReport, notes: Footnotes) {
  const name = dimension.name;
  const agreement = dimension.per_model.find((entry) => entry.model === row.model);
  let kappa = '-';
  if (agreement !== undefined) {
    const what = `${row.model} on ${name}: kappa`;
    kappa = estimate(agreement.kappa, agreement.kappa_ci95, agreement.n);
    kappa += undefinedNote(notes, agreement, what);
  }
  const pairs = agreement?.n ?? 0;
  return [
    row.model,
    String(row.n_matched),
    estimate(row.judge_mean[name], row.judge_ci95[name] ?? null, pairs),
    estimate(row.human_mean[name], row.human_ci95[name] ?? null, pairs),
    figure(row.judge_mean_all[name]),
    kappa,
  ];
}

/** A figure and its interval as a cell, `†` after it when it rests on fewer than FEW_PAIRS pairs;
 * an interval collapsed to a point on few pairs is `[too few]`, not a certainty. */
export function estimate(
  value: number | null | undefined,
  ci: [number, number] | null,
  pairs: number,
): string {
  if (value === null || value === undefined) {
    return '-';
  }
  if (pairs >= FEW_PAIRS) {
    return withInterval(value, ci);
  }
  if (ci !== null && ci[0] === ci[1]) {
    return `${figure(value)} [too few]`;
  }
  return `${withInterval(value, ci)}${FEW_MARK}`;
}

/** The mark of a figure resting on few pairs. */
export const FEW_MARK = '†';

/** The footnote marker of an interval some of whose resamples were undefined; else nothing. */
export function undefinedNote(
  notes: Footnotes,
  interval: Omit<Interval, 'ci95'>,
  what: string,
): string {
  if (interval.undefined_resamples === 0) {
    return '';
  }
  const text = `${what} undefined in ${interval.undefined_resamples} of ${interval.resamples} resamples`;
  let at = notes.indexOf(text);
  if (at < 0) {
    notes.push(text);
    at = notes.length - 1;
  }
  return superscript(at + 1);
}

/** A footnote's number as superscript digits: 1 is ¹, 12 is ¹². */
export function superscript(n: number): string {
  return [...String(n)].map((digit) => SUPERSCRIPT_DIGITS[Number(digit)]!).join('');
}

/** The superscript digits 0 to 9, in order. */
export const SUPERSCRIPT_DIGITS = '⁰¹²³⁴⁵⁶⁷⁸⁹';

/** The notes under the tables: how to read the verdicts (the margin), the marks, each footnote. */
function readingNotes(report: Report, notes: Footnotes): string[] {
  const lines: string[] = [];
  const margin = report.dimensions.find((dimension) => dimension.gap_to_ceiling !== null)
    ?.gap_to_ceiling?.margin;
  if (margin !== undefined) {
    lines.push(...verdictNotes(margin, report.dimensions.length));
    const altTestWords = altTestNote(report.alt_test_all.epsilon).split(' ');
    lines.push(...wrapped(altTestWords, ' ', 100).split('\n'));
  }
  lines.push(
    `${FEW_MARK} on fewer than ${FEW_PAIRS} pairs: resting on few; [too few]: an interval ` +
      'collapsed to a point on them',
  );
  notes.forEach((note, i) =>
    lines.push(`${superscript(i + 1)} ${note} (left out of its interval)`),
  );
  return lines;
}

/** ` (u/r undefined)` after an interval some of whose resamples were undefined; else nothing. */
export function undefinedShare(interval: Omit<Interval, 'ci95'>): string {
  if (interval.undefined_resamples === 0) {
    return '';
  }
  return ` (${interval.undefined_resamples}/${interval.resamples} undefined)`;
}

/** A figure to two decimals ('0.00', never '-0.00'); '-' when there is none. */
export function figure(value: number | null | undefined): string {
  if (value === null || value === undefined) {
    return '-';
  }
  const text = value.toFixed(2);
  return text === '-0.00' ? '0.00' : text;
}

/** A figure and its interval, as `0.71 [0.40, 0.90]`; '-' for either when there is none. */
export function withInterval(
  value: number | null | undefined,
  ci: [number, number] | null,
): string {
  if (value === null || value === undefined) {
    return '-'; // no figure: no interval either
  }
  const interval = ci === null ? '-' : `[${figure(ci[0])}, ${figure(ci[1])}]`;
  return `${figure(value)} ${interval}`;
}

// ---- The statistics ----------------------------------------------------------------------------

/** Agreement of two raters on one dimension: its allowed scores are the labels, used or not. */
export type Agreement = {
  n: number;
  exact: number | null; // null with no pairs: no figure, not 0
  within_one: number | null;
  kappa: number | null;
  confusion: number[][];
};

/** Two scores of one transcript: a human's first, then the judge's or another human's. */
export type Pair = readonly [number, number];

/** Exact and within-one agreement (one step apart on the scale), quadratic-weighted kappa, the
 * confusion matrix (rows: first). */
export function agreement(pairs: readonly Pair[], labels: readonly number[]): Agreement {
  const k = labels.length;
  return countsAgreement(Float64Array.from(confusionMatrix(pairs, labels).flat()), 0, k);
}

/** Counts of each (first, second) score in label order; a score not a label is an error. */
export function confusionMatrix(pairs: readonly Pair[], labels: readonly number[]): number[][] {
  const scale = scaleOf(labels);
  const matrix = scale.labels.map(() => scale.labels.map(() => 0));
  for (const [first, second] of pairs) {
    matrix[position(scale, first)]![position(scale, second)]!++;
  }
  return matrix;
}

/** Cohen's kappa, weights (i - j)^2 / (k - 1)^2 over label positions; null with no pairs or when
 * no disagreement is expected (both raters always give one same score). */
export function quadraticWeightedKappa(pairs: readonly Pair[], labels: readonly number[]) {
  return agreement(pairs, labels).kappa;
}

/** The agreement figures of a k x k confusion matrix held flat in `counts` from `at`. */
function countsAgreement(counts: Float64Array, at: number, k: number): Agreement {
  let n = 0;
  let exact = 0;
  let withinOne = 0;
  const confusion: number[][] = [];
  for (let i = 0; i < k; i++) {
    confusion.push([]);
    for (let j = 0; j < k; j++) {
      const count = counts[at + i * k + j]!;
      confusion[i]!.push(count);
      n += count;
      exact += i === j ? count : 0;
      withinOne += Math.abs(i - j) <= 1 ? count : 0;
    }
  }
  return {
    n,
    exact: n > 0 ? exact / n : null,
    within_one: n > 0 ? withinOne / n : null,
    kappa: kappaOfCounts(counts, at, k),
    confusion,
  };
}

/** Quadratic-weighted kappa of a k x k confusion matrix held flat in `counts` from `at`: with
 * weights (i - j)^2 / (k - 1)^2, the expected disagreement sum(w r_i c_j) / n^2 expands into the
 * margins' first and second moments, so one pass over the cells, no array, and exact integers. */
export function kappaOfCounts(counts: Float64Array, at: number, k: number): number | null {
  if (k < 2) {
    return null;
  }

  let n = 0;
  let squaredSteps = 0;
  let firstSum = 0;
  let secondSum = 0;
  let firstSquares = 0;
  let secondSquares = 0;
  for (let i = 0; i < k; i++) {
    for (let j = 0; j < k; j++) {
      const count = counts[at + i * k + j]!;
      n += count;
      squaredSteps += count * (i - j) ** 2;
      firstSum += count * i;
      secondSum += count * j;
      firstSquares += count * i * i;
      secondSquares += count * j * j;
    }
  }
  if (n === 0) {
    return null;
  }

  // n^2 (k - 1)^2 times the observed and the expected disagreement.
  const observed = n * squaredSteps;
  const expected = n * firstSquares + n * secondSquares - 2 * firstSum * secondSum;
  return expected === 0 ? null : 1 - observed / expected;
}

/** Krippendorff's alpha, interval metric on positions, of units each holding its raters' scores;
 * a unit with one score counts for nothing; 1 when every score is the same (as NLTK gives). */
export function intervalAlpha(units: readonly (readonly number[])[], labels: readonly number[]) {
  const scale = scaleOf(labels);
  const terms = new Float64Array(scale.k + 1);
  for (const unit of units) {
    alphaTerms(
      terms,
      0,
      unit.map((score) => position(scale, score)),
      scale.k,
    );
  }
  return alphaOfTerms(terms, 0, scale.k);
}

/** Alpha from summed terms at `at` (count per position, then observed disagreement); null with no
 * pairable value. D_o = observed / n; D_e = sum of n_c n_d (c - d)^2 over n (n - 1). */
function alphaOfTerms(terms: Float64Array, at: number, k: number): number | null {
  let n = 0;
  let expected = 0;
  for (let c = 0; c < k; c++) {
    n += terms[at + c]!;
    for (let d = 0; d < k; d++) {
      expected += terms[at + c]! * terms[at + d]! * (c - d) ** 2;
    }
  }
  if (n === 0) {
    return null;
  }
  if (expected === 0) {
    return 1; // every value the same: perfect agreement, as NLTK gives
  }
  const observed = terms[at + k]! / n;
  return 1 - observed / (expected / (n * (n - 1)));
}

/** Per-unit (transcript) sufficient statistics: a resample sums them, each unit's row times how
 * often the resample drew it. Units with the same row share it (a sparse row per distinct one), so
 * a resample's sums cost its draws plus the distinct rows, however many pairs a unit holds. */
export type UnitSums = {
  width: number;
  count: number;
  rowOf: number[];
  rowIndex: Map<string, number>;
  starts: number[];
  at: number[];
  value: number[];
};

export function unitSums(width: number): UnitSums {
  return { width, count: 0, rowOf: [], rowIndex: new Map(), starts: [0], at: [], value: [] };
}

/** Adds one unit, given as a dense row of `width` figures (its non-zero ones are kept). */
export function addUnit(units: UnitSums, row: Float64Array): void {
  const key = row.join(',');
  let index = units.rowIndex.get(key);
  if (index === undefined) {
    index = units.rowIndex.size;
    units.rowIndex.set(key, index);
    row.forEach((value, i) => {
      if (value !== 0) {
        units.at.push(i);
        units.value.push(value);
      }
    });
    units.starts.push(units.at.length);
  }
  units.rowOf.push(index);
  units.count++;
}

/** The sums over every unit once: the point estimates. */
function totals(units: UnitSums): Float64Array {
  const multiplicities = new Float64Array(units.rowIndex.size);
  for (const index of units.rowOf) {
    multiplicities[index]!++;
  }
  return weightedSums(units, multiplicities, new Float64Array(units.width));
}

/** The sums of the distinct rows, each times its multiplicity, into `into`. */
function weightedSums(units: UnitSums, multiplicities: Float64Array, into: Float64Array) {
  into.fill(0);
  for (let row = 0; row < multiplicities.length; row++) {
    const times = multiplicities[row]!;
    if (times === 0) {
      continue;
    }
    for (let e = units.starts[row]!; e < units.starts[row + 1]!; e++) {
      into[units.at[e]!]! += times * units.value[e]!;
    }
  }
  return into;
}

/** A percentile interval, and how many of how many resamples left its statistic undefined. */
export type Interval = {
  ci95: [number, number] | null;
  undefined_resamples: number;
  resamples: number;
};

/** Seeded percentile bootstrap intervals (95% by default) of each statistic of the units' sums,
 * over resampled units (transcripts); an interval is null when its statistic is undefined in
 * over half the resamples. A resample is a multiplicity per unit; every statistic sees the same
 * resamples, so a difference of two (the gap) is paired. */
export function bootstrapIntervals(
  units: UnitSums,
  statistics: ((sums: Float64Array) => number | null)[],
  { resamples = 2000, seed = 1, level = 0.95 } = {},
): Interval[] {
  if (units.count === 0) {
    return statistics.map(() => ({ ci95: null, undefined_resamples: 0, resamples: 0 }));
  }

  const random = mulberry32(seed);
  const multiplicities = new Float64Array(units.rowIndex.size);
  const sums = new Float64Array(units.width);
  const values = statistics.map(() => new Float64Array(resamples));
  const defined = statistics.map(() => 0);
  for (let r = 0; r < resamples; r++) {
    multiplicities.fill(0);
    for (let draw = 0; draw < units.count; draw++) {
      multiplicities[units.rowOf[Math.floor(random() * units.count)]!]!++;
    }
    weightedSums(units, multiplicities, sums);
    statistics.forEach((statistic, s) => {
      const value = statistic(sums);
      if (value !== null && Number.isFinite(value)) {
        values[s]![defined[s]!++] = value;
      }
    });
  }

  return values.map((all, s) => percentileInterval(all.subarray(0, defined[s]!), resamples, level));
}

/** The interval of the defined values of `resamples`; null when over half were undefined. */
function percentileInterval(values: Float64Array, resamples: number, level: number): Interval {
  const undefinedResamples = resamples - values.length;
  if (undefinedResamples > resamples / 2) {
    return { ci95: null, undefined_resamples: undefinedResamples, resamples };
  }

  values.sort();
  const percentile = (q: number) => {
    const index = Math.min(values.length - 1, Math.max(0, Math.floor(q * values.length)));
    return values[index]!;
  };
  const ci95: [number, number] = [percentile((1 - level) / 2), percentile(1 - (1 - level) / 2)];
  return { ci95, undefined_resamples: undefinedResamples, resamples };
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
export function mulberry32(seed: number): () => number {
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
