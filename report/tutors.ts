// report/tutors.ts: the tutors compared through the people's sample, over the report's rows: per
// tutor and dimension the PPI++ mean (report/ppi.ts) from the judge's rows and the human-scored
// transcripts among them, every pair's difference, the ranking; how the sample was drawn (the plan
// in plan.json, whose inclusion probabilities weight it where its rates differ within a tutor) and
// what left it; and the report's text cells of all that. Pure functions: plan.json is read in
// report.ts.
import { compareText, isComplete, oneLine, pairKey } from '../run-judge.ts';
import type { HumanRow, PlanManifest, Rubric, ScoreRow } from '../run-judge.ts';
import { figure, groupBy, mulberry32, withInterval } from './analysis.ts';
import type { CellTable } from './analysis.ts';
import { tutorShares } from './plan-sample.ts';
import { MIN_HUMAN, scaleOf, tutorDifferences, tutorMean, tutorRanking } from './ppi.ts';
import type { PpiData, TutorDifference, TutorMean, TutorRanking } from './ppi.ts';
import { sampleSize, stratifiedSample } from './sheet.ts';

/** A judge row as the estimates read it. */
type Judged = Omit<ScoreRow, 'notes'>;

type Pair = { task_id: string; model: string };

// ---- How the sample was drawn ------------------------------------------------------------------

/** How the people's sample was drawn, as the estimates use it: `inclusion` is each transcript's
 * probability of being drawn (weighted design only). */
export type SamplingDesign = {
  kind: 'no_plan' | 'no_rule' | 'all' | 'one_rate' | 'weighted';
  text: string;
  inclusion?: Map<string, number>;
};

/** How many times the plan's sampler is run again to find its inclusion probabilities. */
export const DESIGN_DRAWS = 1000;

/**
 * The sample's design from the plan (plan.json) and the transcripts judged and scored (its
 * population): without a plan, or without its rule, each tutor's human-scored transcripts are taken
 * as a simple random sample of its transcripts; a plan taking every transcript samples none; a
 * plan over tutors that all have the same tasks draws each tutor's transcripts at one rate (the
 * tasks are exchangeable in its sampler), so no weights; otherwise each transcript's inclusion
 * probability is the share of DESIGN_DRAWS runs of the plan's own sampler, on the same rule, that
 * draw it, and the estimates weight by it.
 */
export function samplingDesign(
  manifest: PlanManifest | undefined,
  population: readonly Pair[],
): SamplingDesign {
  if (manifest === undefined) {
    return {
      kind: 'no_plan',
      text:
        "no plan.json beside the human scores: each tutor's human-scored transcripts are taken " +
        'as a simple random sample of its transcripts',
    };
  }
  if (manifest.rule === undefined) {
    return {
      kind: 'no_rule',
      text:
        "plan.json records no sampling rule (an older plan): each tutor's human-scored " +
        'transcripts are taken as a simple random sample of its transcripts',
    };
  }
  if (manifest.rule.sample === undefined) {
    return { kind: 'all', text: 'the plan gives people every transcript: no sample to weight' };
  }

  const tasksOf = groupBy([...population], (ref) => ref.model);
  const taskSets = new Set(
    [...tasksOf.values()].map((refs) =>
      refs
        .map((ref) => ref.task_id)
        .sort(compareText)
        .join('\n'),
    ),
  );
  if (taskSets.size <= 1) {
    return {
      kind: 'one_rate',
      text:
        `the plan's sample (--sample ${manifest.rule.sample}) draws each tutor's transcripts at one ` +
        "rate (every tutor has the same tasks): a tutor's human-scored transcripts are unweighted",
    };
  }

  // Tutors with different tasks: the plan's sampler spreads tasks, so rates differ within a tutor.
  const refs = population.map((ref) => ({ task_id: ref.task_id, model: ref.model }));
  const shares = tutorShares(manifest.rule.sample, refs, true);
  const size =
    shares === null ? Math.min(refs.length, planSize(manifest.rule.sample, refs.length)) : null;
  const random = mulberry32(manifest.rule.seed ^ 0x5bd1e995);
  const drawn = new Map(refs.map((ref) => [ref, 0]));
  for (let draw = 0; draw < DESIGN_DRAWS; draw++) {
    const total = size ?? [...shares!.values()].reduce((sum, count) => sum + count, 0);
    for (const ref of stratifiedSample(refs, total, random, shares ?? undefined)) {
      drawn.set(ref, drawn.get(ref)! + 1);
    }
  }
  const inclusion = new Map<string, number>();
  for (const [ref, count] of drawn) {
    inclusion.set(pairKey(ref.task_id, ref.model), count / DESIGN_DRAWS);
  }
  return {
    kind: 'weighted',
    text:
      `the plan's sample (--sample ${manifest.rule.sample}) draws transcripts at different rates ` +
      "within a tutor (the tutors' tasks differ): each is weighted by its inverse inclusion " +
      `probability, from ${DESIGN_DRAWS} runs of the plan's sampler`,
    inclusion,
  };
}

/** `--sample` as a number of transcripts, as the plan took it. */
function planSize(sample: string, total: number): number {
  return /^\d+$/.test(sample) ? Number(sample) : sampleSize(sample, total);
}

// ---- The tutors compared -----------------------------------------------------------------------

/** The human rows as read and as used, for what left the sample. */
export type HumanSample = { read: HumanRow[]; used: HumanRow[] };

/** Everything the tutors' section shows; `models` in the report's order of tutors. */
export type TutorComparison = ReturnType<typeof compareTutors>;

/** The tutors' estimates as the report holds them (the JSON's): what the tables and the page read. */
export type TutorsView = {
  models: { model: string; ppi: Record<string, TutorMean> | null }[];
  model_differences: TutorDifference[];
  tutor_ranking: Record<string, TutorRanking>;
  human_sample: TutorComparison['human_sample'];
};

/**
 * Per tutor and dimension the PPI++ mean over the judge's rows of it and the human-scored
 * transcripts among them (a transcript's human score the mean of its complete, current rows),
 * weighted where the design says; per dimension every pair's difference and the ranking; and the
 * sample: its design, its transcripts, and the rows that left it.
 */
export function compareTutors(
  judged: Judged[],
  humans: HumanSample,
  rubric: Rubric,
  design: SamplingDesign,
) {
  // 1. Each transcript's human rows that count: complete, of the transcript as it is now.
  const comparable = humans.used.filter((row) => isComplete(row, rubric) && row.stale !== true);
  const humansOf = groupBy(comparable, (row) => pairKey(row.task_id, row.model));
  const judgedOf = groupBy(judged, (row) => row.model);
  const models = [...new Set([...judged, ...comparable].map((row) => row.model))].sort(compareText);
  const weighted = design.kind === 'weighted';

  // 2. Per tutor and dimension: the human-scored transcripts among those judged, and the rest.
  const parts = models.map((model) => {
    const rows = judgedOf.get(model) ?? [];
    const labeled = rows.filter((row) => humansOf.has(pairKey(row.task_id, row.model)));
    const unlabeled = rows.filter((row) => !humansOf.has(pairKey(row.task_id, row.model)));
    const inclusion = (row: Judged) => design.inclusion?.get(pairKey(row.task_id, row.model)) ?? 0;
    const perDimension = rubric.dimensions.map((dimension) => {
      const name = dimension.name;
      const data: PpiData = {
        human: labeled.map((row) => {
          const scores = humansOf.get(pairKey(row.task_id, row.model))!;
          return scores.reduce((sum, human) => sum + human.scores[name]!, 0) / scores.length;
        }),
        judge: labeled.map((row) => row.scores[name]!),
        judgeUnlabeled: unlabeled.map((row) => row.scores[name]!),
      };
      if (weighted && labeled.every((row) => inclusion(row) > 0)) {
        data.weights = labeled.map((row) => 1 / inclusion(row));
        data.weightsUnlabeled = unlabeled.map((row) => 1 / Math.max(1e-3, 1 - inclusion(row)));
      }
      return tutorMean(data, scaleOf(dimension));
    });
    return { model, perDimension };
  });

  // 3. Per dimension: every pair, Holm over them, the ranking.
  const differences: TutorDifference[] = [];
  const ranking: Record<string, TutorRanking> = {};
  rubric.dimensions.forEach((dimension, d) => {
    const tutors = parts.map((part) => ({
      model: part.model,
      interval: part.perDimension[d]!.interval,
    }));
    const pairs = tutorDifferences(dimension.name, tutors);
    differences.push(...pairs);
    const estimates = parts.map((part) => {
      return { model: part.model, estimate: part.perDimension[d]!.figures.estimate };
    });
    ranking[dimension.name] = tutorRanking(estimates, pairs);
  });

  // 4. Per tutor, its dimensions' figures, as the JSON prints them.
  const ppi = new Map(
    parts.map((part) => {
      const byName: Record<string, TutorMean> = {};
      rubric.dimensions.forEach((dimension, d) => {
        byName[dimension.name] = part.perDimension[d]!.figures;
      });
      return [part.model, byName];
    }),
  );
  return {
    ppi,
    model_differences: differences,
    tutor_ranking: ranking,
    human_sample: humanSample(judged, humans, rubric, design),
  };
}

/** The sample: its design, the transcripts people scored that count, and what left it. */
function humanSample(
  judged: Judged[],
  humans: HumanSample,
  rubric: Rubric,
  design: SamplingDesign,
) {
  const judgedKeys = new Set(judged.map((row) => pairKey(row.task_id, row.model)));
  const keyOf = (row: Pair) => pairKey(row.task_id, row.model);
  const usedSet = new Set(humans.used);
  const blank = humans.read.filter((row) => !isComplete(row, rubric));
  const unsure = humans.read.filter((row) => isComplete(row, rubric) && !usedSet.has(row));
  const stale = humans.used.filter((row) => isComplete(row, rubric) && row.stale === true);
  const counted = humans.used.filter((row) => isComplete(row, rubric) && row.stale !== true);
  const sampled = new Set(humans.read.map(keyOf));
  const scored = new Set(counted.map(keyOf));
  return {
    design: design.kind,
    design_text: design.text,
    transcripts_sampled: sampled.size,
    transcripts_scored: [...scored].filter((key) => judgedKeys.has(key)).length,
    scored_not_judged: [...scored].filter((key) => !judgedKeys.has(key)).length,
    left_out: {
      blank_rows: blank.length,
      unsure_rows: unsure.length,
      stale_rows: stale.length,
      transcripts: [...sampled].filter((key) => !scored.has(key)).length,
    },
  };
}

// ---- The report's text cells -------------------------------------------------------------------

const TUTOR_HEADER = [
  'model',
  'n',
  'N',
  'PPI [95% CI]',
  'lambda',
  'width',
  'judge only [95% CI]',
  'people only [95% CI]',
];

/** The tutors' estimates as text tables: per dimension the tutors (one table of every dimension
 * when wide, the judge's gain in words), the order established among them, every pair's difference;
 * then the notes. */
export function tutorTables(
  comparison: TutorsView,
  dimensions: readonly string[],
  wide: boolean,
): { tables: CellTable[]; notes: string[] } {
  const tables: CellTable[] = [];
  const rowsOf = (name: string) => {
    return comparison.models.map((row) => tutorCells(row.model, row.ppi?.[name] ?? null, wide));
  };
  const differencesOf = (name: string) => {
    return comparison.model_differences.filter((entry) => entry.dimension === name);
  };
  if (wide) {
    const rows = dimensions.flatMap((name) => {
      return rowsOf(name).map((row) => [row[0]!, name, ...row.slice(1)]);
    });
    const header = [TUTOR_HEADER[0]!, 'dimension', ...TUTOR_HEADER.slice(1), 'the judge'];
    header.splice(header.indexOf('width'), 1);
    tables.push({ title: TUTORS_TITLE, rows: [header, ...rows] });
    const pairs = dimensions.flatMap((name) => {
      return differencesOf(name).map((entry) => [name, ...differenceCells(entry)]);
    });
    const orders = dimensions.map((name) => {
      return `${name} ${rankingText(comparison.tutor_ranking[name]!)}`;
    });
    tables.push({
      title: `the tutors' differences; their order: ${orders.join('; ')}`,
      rows: [['dimension', ...DIFFERENCE_HEADER], ...pairs],
    });
  } else {
    for (const name of dimensions) {
      const title = `${TUTORS_TITLE} on ${name}`;
      tables.push({ title, rows: [TUTOR_HEADER, ...rowsOf(name)] });
      const ranking = rankingText(comparison.tutor_ranking[name]!);
      const pairs = differencesOf(name).map(differenceCells);
      if (pairs.length > 0) {
        const title = `the tutors' differences on ${name}; their order: ${ranking}`;
        tables.push({ title, rows: [DIFFERENCE_HEADER, ...pairs] });
      }
    }
  }
  return { tables, notes: tutorNotes(comparison) };
}

const TUTORS_TITLE = "the tutors' means from the judge and the people's sample (PPI++)";
const DIFFERENCE_HEADER = ['a - b', 'difference [95% CI]', 'order established'];

/** One tutor's row on one dimension: the judge's gain as a width change (-31%), or in words when
 * wide (none: a tutor of no judge row or human row of its own). */
function tutorCells(model: string, entry: TutorMean | null, wide: boolean): string[] {
  if (entry === null) {
    return [model, '0', '0', 'not judged', '-', '-', '-', '-'];
  }
  const judge = withInterval(entry.judge_only_mean, entry.judge_only_ci95);
  const bias = entry.judge_biased === true ? ' bias' : '';
  const people = withInterval(entry.human_only_mean, entry.human_only_ci95);
  const cells = [
    model,
    String(entry.n_human),
    String(entry.n_judged),
    entry.estimate === null ? shortReason(entry) : withInterval(entry.estimate, entry.ci95),
    figure(entry.lambda),
    widthChange(entry),
    judge + bias,
    people,
  ];
  if (wide) {
    cells.splice(5, 1);
    cells.push(entry.estimate === null ? '-' : gainWords(entry));
  }
  return cells;
}

/** Why a tutor has no estimate, short enough for a cell (the JSON's `reason` says it whole). */
export function shortReason(entry: TutorMean): string {
  return entry.n_judged === 0 ? 'not judged' : `under ${MIN_HUMAN} scored`;
}

/** The PPI interval's width against the people-only one: -31%, 0%; '-' without both. */
function widthChange(entry: TutorMean): string {
  if (entry.width_ratio === null) {
    return '-';
  }
  const change = Math.round((entry.width_ratio - 1) * 100);
  return change === 0 ? '0%' : `${change}%`;
}

/** What the judge gives a tutor's estimate, in words: "the judge narrows the interval by 31%", or
 * "the judge adds nothing here: lambda 0.0". */
export function gainWords(entry: TutorMean): string {
  if (entry.width_ratio === null || entry.lambda === null) {
    return '-';
  }
  const gain = Math.round((1 - entry.width_ratio) * 100);
  if (entry.lambda === 0 || gain <= 0) {
    return `the judge adds nothing here: lambda ${entry.lambda.toFixed(1)}`;
  }
  return `the judge narrows the interval by ${gain}%`;
}

/** One pair's row: a - b, its interval, whether its order is established. */
function differenceCells(entry: TutorDifference): string[] {
  return [
    `${entry.a} - ${entry.b}`,
    withInterval(entry.diff, entry.ci95),
    entry.established ? 'yes' : 'no',
  ];
}

/** The order, highest first: `>` where it is established, `~` where it is not (each name's
 * control characters escaped: the order goes into titles and lines). */
export function rankingText(ranking: TutorRanking): string {
  if (ranking.order.length === 0) {
    return 'none estimated';
  }
  const parts = [oneLine(ranking.order[0]!)];
  ranking.established.forEach((established, i) => {
    parts.push(established ? '>' : '~', oneLine(ranking.order[i + 1]!));
  });
  return parts.join(' ');
}

/** How to read the tutors' tables: the method, the sample and what left it. */
function tutorNotes(comparison: TutorsView): string[] {
  const sample = comparison.human_sample;
  const left = sample.left_out;
  const text = [
    "PPI: the judge's mean over all the tutor's transcripts (N judged), corrected by its error on",
    "the n people scored (PPI++, lambda tuned; lambda 0: the people's mean alone, where its",
    'interval is the narrower); width: against the people-only interval (-31%: the judge narrows',
    "it by 31%); bias: the judge-only mean outside the PPI interval; differences: the tutors'",
    "samples independent; '>' an order established at family-wise error 5% over the pairs",
    "(Holm), '~' one not established.",
    `Human sample: ${sample.design_text}; ${sample.transcripts_scored} transcript(s) scored and`,
    `judged; left it (assumed missing at random): ${left.transcripts} transcript(s), from`,
    `${left.blank_rows} blank row(s), ${left.unsure_rows} unsure (--exclude-unsure), ${left.stale_rows}`,
    `stale; ${sample.scored_not_judged} scored but not judged.`,
  ].join(' ');
  return wrapWords(text, 100);
}

/** Text broken into lines of at most `width` columns at spaces, the lines after the first
 * indented by two. */
function wrapWords(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    const next = line === '' ? word : `${line} ${word}`;
    if (next.length > width && line !== '') {
      lines.push(line);
      line = `  ${word}`;
    } else {
      line = next;
    }
  }
  lines.push(line);
  return lines;
}

// ---- Into the report ---------------------------------------------------------------------------

/** The tutors' estimates as the JSON holds them: each model's `ppi`, then the differences, the
 * ranking and the sample at the top level. */
export type WithTutors<R extends { models: { model: string }[] }> = Omit<R, 'models'> & {
  models: (R['models'][number] & { ppi: Record<string, TutorMean> | null })[];
  model_differences: TutorDifference[];
  tutor_ranking: Record<string, TutorRanking>;
  human_sample: TutorComparison['human_sample'];
};

export function withTutors<R extends { models: { model: string }[] }>(
  report: R,
  comparison: TutorComparison,
): WithTutors<R> {
  const models = report.models.map((row) => {
    return Object.assign({}, row, { ppi: comparison.ppi.get(row.model) ?? null });
  });
  const added = {
    model_differences: comparison.model_differences,
    tutor_ranking: comparison.tutor_ranking,
    human_sample: comparison.human_sample,
  };
  // The JSON's keys: the tutors' after the report's `ranking` (the tutors' Spearman), or last.
  const entries: [string, unknown][] = Object.entries(Object.assign({}, report, { models }));
  const at = entries.findIndex(([key]) => key === 'ranking');
  entries.splice(at < 0 ? entries.length : at + 1, 0, ...Object.entries(added));
  return Object.fromEntries(entries) as WithTutors<R>;
}

/** One judge's estimates of the tutors, for its `comparison` entry: each tutor's, the
 * differences, the ranking, and how much narrower than the people's alone its intervals are on
 * average over the tutors and dimensions estimated (`narrows_by`, a share; null with none). */
export function judgeTutors(comparison: TutorComparison) {
  const ratios = [...comparison.ppi.values()].flatMap((byName) => {
    return Object.values(byName).flatMap((entry) => {
      return entry.width_ratio === null ? [] : [entry.width_ratio];
    });
  });
  const mean = ratios.length === 0 ? null : sumOf(ratios) / ratios.length;
  return {
    models: [...comparison.ppi].map(([model, ppi]) => ({ model, ppi })),
    model_differences: comparison.model_differences,
    tutor_ranking: comparison.tutor_ranking,
    narrows_by: mean === null ? null : 1 - mean,
  };
}

export type JudgeTutors = ReturnType<typeof judgeTutors>;

/** The judges side by side on what they add to the tutors' estimates: per dimension how much
 * narrower than people-only their PPI intervals are on average, and which narrows them most. */
export function judgeGainTable(
  judges: readonly { name: string; tutors?: JudgeTutors }[],
  dimensions: readonly string[],
): { table: CellTable; line: string } | null {
  const given = judges.filter((judge) => judge.tutors !== undefined);
  if (given.length === 0) {
    return null;
  }

  // A row a dimension (then all of them), a column a judge: the dimensions' names are the long ones.
  const gainOn = (judge: (typeof given)[number], name: string) => {
    const ratios = judge.tutors!.models.flatMap((entry) => {
      const ratio = entry.ppi[name]?.width_ratio ?? null;
      return ratio === null ? [] : [ratio];
    });
    return ratios.length === 0 ? '-' : percentText(1 - sumOf(ratios) / ratios.length);
  };
  const rows = dimensions.map((name) => [name, ...given.map((judge) => gainOn(judge, name))]);
  rows.push([
    'all',
    ...given.map((judge) => {
      const all = judge.tutors!.narrows_by;
      return all === null ? '-' : percentText(all);
    }),
  ]);

  const ranked = given
    .filter((judge) => judge.tutors!.narrows_by !== null)
    .sort((a, b) => b.tutors!.narrows_by! - a.tutors!.narrows_by!);
  let line = "no judge's estimates of the tutors could be set against people-only ones";
  if (ranked.length > 0) {
    const best = ranked[0]!;
    const others = ranked.slice(1).map((judge) => {
      return `${oneLine(judge.name)} ${percentText(judge.tutors!.narrows_by!)}`;
    });
    const rest = others.length > 0 ? ` (${others.join(', ')})` : '';
    line =
      `the judge that narrows the tutors' intervals most: ${oneLine(best.name)}, by ` +
      `${percentText(best.tutors!.narrows_by!)} on average${rest}`;
  }
  const title =
    "what each judge adds to the tutors' means: PPI intervals narrower than people-only";
  const header = ['dimension', ...given.map((judge) => judge.name)];
  return { table: { title, rows: [header, ...rows] }, line };
}

function percentText(share: number): string {
  return `${Math.round(share * 100)}%`;
}

function sumOf(values: readonly number[]): number {
  return values.reduce((sum, value) => sum + value, 0);
}
