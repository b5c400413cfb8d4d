// report.ts: the analysis after the judge run (issue 8). Does the judge agree with the people who scored the
// transcripts, as well as they agree with each other, and does it rank the tutors as they do? So far: the statistics.
// Each figure is a pure function of (human, judge) score pairs; the report's reading and printing come next.
import * as fs from 'node:fs';
import { Command, CommanderError } from 'commander';
import { parse as parseCsv } from 'csv-parse/sync';
import { stringify as stringifyCsv } from 'csv-stringify/sync';
import { EvalError, EvalInputError, isEntryModule, loadRubric, readTranscripts } from './run-judge.ts';

type Rubric = ReturnType<typeof loadRubric>;
/** One human's scores of one transcript; a score left empty (not scored yet) is absent, and the row incomplete. */
export type HumanRow = {
  task_id: string;
  model: string;
  scorer: string;
  scores: Record<string, number>;
  notes: string;
};
const DEFAULTS = { transcripts: 'evals/transcripts', rubric: 'rubric.json', humanScores: 'evals/human_scores.csv' };
const REPORT_DEFAULTS = { ...DEFAULTS, scores: 'evals/scores/judge_scores.csv', log: 'evals/scores/judge_log.jsonl' };
/** A judge CSV row, as run-judge wrote it (the formula guard taken off task and model). */
export type JudgeRow = { task_id: string; model: string; scores: Record<string, number> };

/** Runs `report.ts <command>`; so far the one command is `sheet`. Returns the exit status. */
export async function main(argv: string[], io: { stdout: NodeJS.WritableStream; stderr: NodeJS.WritableStream }) {
  const cli = new Command('report')
    .description('The analysis after the judge run: the judge against the human scores.')
    .exitOverride()
    .configureOutput({ writeOut: (out) => io.stdout.write(out), writeErr: (out) => io.stderr.write(out) });
  cli
    .command('sheet')
    .description("print a blank scoring sheet: one row per transcript, scores empty, never the judge's")
    .option('--scorer <name>', 'add a scorer column filled with this name')
    .option('--transcripts <dir>', 'transcripts folder: {model}/{task_id}.json', DEFAULTS.transcripts)
    .option('--rubric <file>', 'rubric: its dimensions are the columns', DEFAULTS.rubric)
    .action((options: { scorer?: string; transcripts: string; rubric: string }) => {
      io.stdout.write(scoringSheet(readTranscripts(options.transcripts), loadRubric(options.rubric), options.scorer));
    });
  cli
    .command('agreement', { isDefault: true })
    .description('the judge against the human scores, per dimension and per model')
    .option('--format <format>', 'table, markdown or json', 'table')
    .option('--scores <file>', 'the judge CSV', REPORT_DEFAULTS.scores)
    .option('--human-scores <file>', 'the human scores CSV', REPORT_DEFAULTS.humanScores)
    .option('--rubric <file>', 'rubric', REPORT_DEFAULTS.rubric)
    .option('--log <file>', 'the audit log, for which judge scored each row (skipped when absent)', REPORT_DEFAULTS.log)
    .action((options: { scores: string; humanScores: string; rubric: string; log: string; format: string }) => {
      if (!['table', 'markdown', 'json'].includes(options.format)) {
        throw new EvalInputError(`--format ${options.format}: use table, markdown or json`);
      }
      const rubric = loadRubric(options.rubric);
      const judged = readJudgeScores(options.scores, rubric);
      const report = analyse(judged, readHumanScores(options.humanScores, rubric), rubric, judgesOf(options.log));
      const json = `${JSON.stringify(report, null, 2)}\n`;
      io.stdout.write(options.format === 'json' ? json : formatReport(report, options.format === 'markdown'));
    });
  try {
    await cli.parseAsync(argv, { from: 'user' });
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode === 0 ? 0 : 2;
    if (!(error instanceof EvalError)) throw error;
    io.stderr.write(`report: ${error.message}\n`);
    return 2;
  }
}

/** The blank sheet people fill in, blind to the judge: the judge CSV's columns (and a scorer), one row a transcript. */
export function scoringSheet(refs: { task_id: string; model: string }[], rubric: Rubric, scorer?: string): string {
  const names = rubric.dimensions.map((dimension) => dimension.name);
  const [header, scorerCell] = [['task_id', 'model', ...names, 'notes'], scorer === undefined ? [] : [scorer]];
  if (scorer !== undefined) header.push('scorer');
  const rows = refs.map((ref) => [ref.task_id, ref.model, ...names.map(() => ''), '', ...scorerCell]);
  return stringifyCsv([header, ...rows], { record_delimiter: '\n', quoted_match: /[\r\n]/ });
}

/** Reads the human scores: the sheet's columns in any order, `scorer` optional; a bad cell is an error naming the
 * file, the line and the column; a (task_id, model, scorer) scored twice is an error too. */
export function readHumanScores(file: string, rubric: Rubric): HumanRow[] {
  const names = rubric.dimensions.map((dimension) => dimension.name);
  const records = readCsvFile(file, true) as { record: string[]; info: { lines: number } }[];
  const [head, ...body] = records;
  const header = head?.record ?? [];
  const required = ['task_id', 'model', ...names, 'notes'];
  const missing = required.filter((column) => !header.includes(column));
  const unknown = header.filter((column) => !required.includes(column) && column !== 'scorer');
  if (missing.length || unknown.length) {
    const problems = [missing.length && `missing ${missing.join(', ')}`, unknown.length && `unknown ${unknown}`];
    throw new EvalInputError(`${file}: header: ${problems.filter(Boolean).join('; ')} (expected ${required}[,scorer])`);
  }
  const seen = new Set<string>();
  return body.map(({ record, info }) => {
    const cell = (column: string) => record[header.indexOf(column)] ?? '';
    const at = `${file}: line ${info.lines}`;
    const scores: Record<string, number> = {};
    for (const dimension of rubric.dimensions) {
      const value = cell(dimension.name).trim();
      if (value !== '') scores[dimension.name] = allowedScore(dimension, value, at); // empty: not scored yet
    }
    const row = {
      task_id: cell('task_id'),
      model: cell('model'),
      scorer: cell('scorer'),
      scores,
      notes: cell('notes'),
    };
    for (const column of ['task_id', 'model'] as const)
      if (!row[column]) throw new EvalInputError(`${at}: ${column} is empty`);
    const key = JSON.stringify([row.task_id, row.model, row.scorer]);
    if (seen.has(key)) throw new EvalInputError(`${at}: ${row.model}/${row.task_id} scored twice by "${row.scorer}"`);
    seen.add(key);
    return row;
  });
}

/** The judge's rows (run-judge's CSV): every score a number, the formula guard taken off task and model. */
export function readJudgeScores(file: string, rubric: Rubric): JudgeRow[] {
  const names = rubric.dimensions.map((dimension) => dimension.name);
  const records = readCsvFile(file, true) as { record: string[]; info: { lines: number } }[];
  const [header = [], ...rows] = records.map(({ record }) => record);
  const expected = ['task_id', 'model', ...names, 'notes'];
  if (header.join(',') !== expected.join(',')) throw new EvalInputError(`${file}: header is not ${expected}`);
  const unguard = (cell: string) => cell.replace(/^'/, '');
  return rows.map((row, i) => {
    const at = `${file}: line ${records[i + 1]!.info.lines}`;
    const scores = rubric.dimensions.map((d, j) => [d.name, allowedScore(d, row[j + 2] ?? '', at)] as const);
    return { task_id: unguard(row[0]!), model: unguard(row[1]!), scores: Object.fromEntries(scores) };
  });
}

/** A score cell's number, when it is one of its dimension's allowed scores; else an error naming the cell. */
function allowedScore(dimension: Rubric['dimensions'][number], value: string, at: string): number {
  if (Object.hasOwn(dimension.scores, value) && /^(0|[1-9]\d*)$/.test(value)) return Number(value);
  const allowed = Object.keys(dimension.scores).join(', ');
  throw new EvalInputError(`${at}: ${dimension.name}: "${value}" is not an allowed score (${allowed})`);
}

/** How many rows each judge scored, from the audit log's last scored entry per transcript; {} without a log. */
export function judgesOf(log: string): Record<string, number> {
  if (!fs.existsSync(log)) return {};
  const last = new Map<string, string>();
  for (const line of fs.readFileSync(log, 'utf8').split('\n')) {
    const entry = line.trim()
      ? (JSON.parse(line) as { status?: string; judge?: string; model: string; task_id: string })
      : undefined;
    if (entry?.status === 'scored' && entry.judge) last.set(`${entry.model}/${entry.task_id}`, entry.judge);
  }
  const counts: Record<string, number> = {};
  for (const judge of last.values()) counts[judge] = (counts[judge] ?? 0) + 1;
  return counts;
}

/** The report: agreement per dimension (and the human ceiling), models side by side, what is missing. */
export function analyse(judged: JudgeRow[], humans: HumanRow[], rubric: Rubric, judges: Record<string, number> = {}) {
  const keyOf = (row: { model: string; task_id: string }) => `${row.model}/${row.task_id}`;
  const judgeOf = new Map(judged.map((row) => [keyOf(row), row]));
  const complete = humans.filter((row) => isComplete(row, rubric));
  const humanKeys = new Set(complete.map(keyOf));
  const byTranscript = groupBy(complete, keyOf);
  const dimensions = rubric.dimensions.map((dimension) => {
    const labels = Object.keys(dimension.scores)
      .map(Number)
      .sort((a, b) => a - b);
    const figures = (units: Pair[][]) => {
      const pairs = units.flat();
      const kappa = (sample: Pair[]) => quadraticWeightedKappa(sample, labels);
      return { ...agreement(pairs, labels), kappa_ci95: bootstrapCi(units, kappa) };
    };
    // Judge against each human row; human against human: each pair of scorers once, the first name first.
    const judgeUnits = [...byTranscript].flatMap(([key, rows]) => {
      const judge = judgeOf.get(key);
      return judge ? [rows.map((row): Pair => [row.scores[dimension.name]!, judge.scores[dimension.name]!])] : [];
    });
    const humanUnits = [...byTranscript].flatMap(([key, rows]) => {
      if (!judgeOf.has(key)) return [];
      const sorted = [...rows].sort((a, b) => (a.scorer < b.scorer ? -1 : a.scorer > b.scorer ? 1 : 0));
      const pairs = sorted.flatMap((a, i) =>
        sorted.slice(i + 1).map((b): Pair => [a.scores[dimension.name]!, b.scores[dimension.name]!]),
      );
      return pairs.length ? [pairs] : [];
    });
    const ceiling = humanUnits.length ? (({ confusion: _, ...figured }) => figured)(figures(humanUnits)) : null;
    return {
      ...{ name: dimension.name, labels, judge_vs_human: figures(judgeUnits) },
      ...{ human_vs_human: ceiling, self_consistency: null }, // self-consistency needs --samples (not built yet)
    };
  });
  const models = [...new Set([...judged, ...complete].map((row) => row.model))].sort();
  const meanOf = (values: number[]) => (values.length ? values.reduce((a, b) => a + b, 0) / values.length : null);
  const side = models.map((model) => {
    const judgeRows = judged.filter((row) => row.model === model);
    const humanRows = complete.filter((row) => row.model === model);
    const per = (rows: { scores: Record<string, number>; task_id: string }[]) => {
      const units = [...groupBy(rows, (row) => row.task_id).values()];
      const mean = Object.fromEntries(
        rubric.dimensions.map((d) => [d.name, meanOf(rows.map((row) => row.scores[d.name]!))]),
      );
      const ci = Object.fromEntries(
        rubric.dimensions.map((d) => [
          d.name,
          bootstrapCi(units, (sample) => meanOf(sample.map((row) => row.scores[d.name]!))),
        ]),
      );
      return { mean, ci };
    };
    const [judge, human] = [per(judgeRows), per(humanRows)];
    return {
      ...{ model, n_judge: judgeRows.length, n_human: humanRows.length },
      ...{ judge_mean: judge.mean, judge_ci95: judge.ci, human_mean: human.mean, human_ci95: human.ci },
    };
  });
  const both = side.filter((row) => row.n_judge && row.n_human);
  const ranking = Object.fromEntries(
    rubric.dimensions.map((d) => [
      d.name,
      spearman(
        both.map((row) => row.judge_mean[d.name]!),
        both.map((row) => row.human_mean[d.name]!),
      ),
    ]),
  );
  const missing = {
    no_human: judged
      .map(keyOf)
      .filter((key) => !humanKeys.has(key))
      .sort(),
    no_judge: [...humanKeys].filter((key) => !judgeOf.has(key)).sort(),
  };
  const pairs = dimensions[0]?.judge_vs_human.n ?? 0;
  return { pairs, missing, dimensions, models: side, ranking, judges };
}

type Report = ReturnType<typeof analyse>;
/** The report's tables, aligned as text or as GitHub-flavoured Markdown (for a CI job summary). */
export function formatReport(report: Report, markdown: boolean): string {
  const figure = (value: number | null | undefined) => (value === null || value === undefined ? '-' : value.toFixed(2));
  const interval = (ci: [number, number] | null) => (ci ? `[${figure(ci[0])}, ${figure(ci[1])}]` : '-');
  const agreementRows = report.dimensions.map((d) => {
    const [judge, ceiling] = [d.judge_vs_human, d.human_vs_human];
    const human = ceiling ? `${figure(ceiling.kappa)} ${interval(ceiling.kappa_ci95)}` : '-';
    const shares = [figure(judge.exact), figure(judge.within_one)];
    return [d.name, String(judge.n), ...shares, `${figure(judge.kappa)} ${interval(judge.kappa_ci95)}`, human];
  });
  const modelRows = report.models.flatMap((row) =>
    report.dimensions.map((d) => [
      ...[row.model, d.name, `${figure(row.judge_mean[d.name])} ${interval(row.judge_ci95[d.name] ?? null)}`],
      `${figure(row.human_mean[d.name])} ${interval(row.human_ci95[d.name] ?? null)}`,
      figure(report.ranking[d.name]),
    ]),
  );
  const table = (header: string[], rows: string[][]) => {
    if (markdown) return [header, header.map(() => '---'), ...rows].map((r) => `| ${r.join(' | ')} |`).join('\n');
    const widths = header.map((_, i) => Math.max(...[header, ...rows].map((r) => r[i]!.length)));
    return [header, ...rows]
      .map((r) =>
        r
          .map((cell, i) => cell.padEnd(widths[i]!))
          .join('  ')
          .trimEnd(),
      )
      .join('\n');
  };
  const { no_human, no_judge } = report.missing;
  const missing = `no human row: ${no_human.join(', ') || 'none'}; no judge row: ${no_judge.join(', ') || 'none'}`;
  const judges =
    Object.entries(report.judges)
      .map(([judge, rows]) => `${judge} ${rows}`)
      .join(', ') || 'no audit log';
  return (
    [
      `${report.pairs} (transcript, scorer) pairs; ${missing}; rows by judge: ${judges}`,
      table(['dimension', 'n', 'exact', 'within one', 'kappa [95% CI]', 'human ceiling kappa [95% CI]'], agreementRows),
      table(['model', 'dimension', 'judge mean [95% CI]', 'human mean [95% CI]', 'Spearman of model means'], modelRows),
    ].join('\n\n') + '\n'
  );
}
/** A CSV file's records (with where each ends, for `info`); a missing or malformed file is an input error. */
function readCsvFile(file: string, info = false): unknown[] {
  try {
    return parseCsv(fs.readFileSync(file), { bom: true, skip_empty_lines: true, info });
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'file not found' : (error as Error).message;
    throw new EvalInputError(`${file}: ${reason}`, { cause: error });
  }
}
function groupBy<T>(items: T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) groups.set(key(item), [...(groups.get(key(item)) ?? []), item]);
  return groups;
}

/** Whether a human row scores every dimension of the rubric. */
export const isComplete = (row: HumanRow, rubric: Rubric) => rubric.dimensions.every((d) => d.name in row.scores);

/** Agreement between two raters on one dimension: its allowed scores are the labels, used or not. */
export type Agreement = { n: number; exact: number; within_one: number; kappa: number | null; confusion: number[][] };
/** A pair of scores of one transcript: the first rater's (a human), then the second's (the judge, or a human). */
export type Pair = readonly [number, number];

/** Exact and within-one agreement, quadratic-weighted kappa over `labels`, and the confusion matrix (rows: first). */
export function agreement(pairs: readonly Pair[], labels: readonly number[]): Agreement {
  const n = pairs.length;
  const share = (close: (a: number, b: number) => boolean) =>
    n ? pairs.filter(([a, b]) => close(a, b)).length / n : 0;
  return {
    n,
    exact: share((a, b) => a === b),
    within_one: share((a, b) => Math.abs(a - b) <= 1),
    kappa: quadraticWeightedKappa(pairs, labels),
    confusion: confusionMatrix(pairs, labels),
  };
}

/** Counts of each (first, second) score, in label order; a score outside the labels is an error, never dropped. */
export function confusionMatrix(pairs: readonly Pair[], labels: readonly number[]): number[][] {
  const sorted = [...labels].sort((a, b) => a - b);
  const matrix = sorted.map(() => sorted.map(() => 0));
  for (const [a, b] of pairs) {
    const [i, j] = [sorted.indexOf(a), sorted.indexOf(b)];
    if (i < 0 || j < 0) throw new RangeError(`score ${i < 0 ? a : b} is not one of the labels ${sorted.join(', ')}`);
    matrix[i]![j]!++;
  }
  return matrix;
}

/** Cohen's kappa with quadratic weights (i - j)^2 / (k - 1)^2 over the label positions; null when undefined (no
 * pairs, or an expected disagreement of 0, as when both raters always give the same one score). */
export function quadraticWeightedKappa(pairs: readonly Pair[], labels: readonly number[]): number | null {
  const observed = confusionMatrix(pairs, labels);
  const k = observed.length;
  const n = pairs.length;
  if (!n || k < 2) return null;
  const rows = observed.map((row) => row.reduce((sum, count) => sum + count, 0));
  const columns = observed[0]!.map((_, j) => observed.reduce((sum, row) => sum + row[j]!, 0));
  let [disagreed, expected] = [0, 0];
  for (let i = 0; i < k; i++) {
    for (let j = 0; j < k; j++) {
      const weight = (i - j) ** 2 / (k - 1) ** 2;
      disagreed += (weight * observed[i]![j]!) / n;
      expected += (weight * rows[i]! * columns[j]!) / n ** 2;
    }
  }
  return expected === 0 ? null : 1 - disagreed / expected;
}

/** A percentile bootstrap interval (95% by default) of `statistic` over resampled units (transcripts, each with its
 * pairs); seeded, so the same input prints the same interval. Null when the statistic is undefined too often. */
export function bootstrapCi<T>(
  units: readonly (readonly T[])[],
  statistic: (sample: T[]) => number | null,
  { resamples = 2000, seed = 1, level = 0.95 } = {},
): [number, number] | null {
  if (!units.length) return null;
  const random = mulberry32(seed);
  const values: number[] = [];
  for (let r = 0; r < resamples; r++) {
    const sample = Array.from({ length: units.length }, () => units[Math.floor(random() * units.length)]!).flat();
    const value = statistic(sample);
    if (value !== null && Number.isFinite(value)) values.push(value);
  }
  if (values.length < resamples / 2) return null; // undefined in most resamples: no interval worth printing
  values.sort((a, b) => a - b);
  const at = (q: number) => values[Math.min(values.length - 1, Math.max(0, Math.floor(q * values.length)))]!;
  return [at((1 - level) / 2), at(1 - (1 - level) / 2)];
}

/** Spearman's rank correlation (ties get their average rank); null with fewer than 3 values or no spread. */
export function spearman(xs: readonly number[], ys: readonly number[]): number | null {
  if (xs.length !== ys.length) throw new RangeError(`spearman: ${xs.length} values against ${ys.length}`);
  if (xs.length < 3) return null;
  const [rx, ry] = [averageRanks(xs), averageRanks(ys)];
  const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;
  const [mx, my] = [mean(rx), mean(ry)];
  let [sxy, sxx, syy] = [0, 0, 0];
  rx.forEach((x, i) => {
    const [dx, dy] = [x - mx, ry[i]! - my];
    [sxy, sxx, syy] = [sxy + dx * dy, sxx + dx * dx, syy + dy * dy];
  });
  return sxx && syy ? sxy / Math.sqrt(sxx * syy) : null;
}

/** 1-based ranks, tied values sharing the mean of the ranks they span. */
function averageRanks(values: readonly number[]): number[] {
  const order = values.map((value, i) => [value, i] as const).sort((a, b) => a[0] - b[0]);
  const ranks = new Array<number>(values.length);
  for (let start = 0; start < order.length;) {
    let end = start;
    while (end + 1 < order.length && order[end + 1]![0] === order[start]![0]) end++;
    for (let i = start; i <= end; i++) ranks[order[i]![1]] = (start + end) / 2 + 1;
    start = end + 1;
  }
  return ranks;
}

/** A small seeded PRNG (mulberry32): the bootstrap must print the same interval for the same input. */
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

if (isEntryModule(import.meta.url)) main(process.argv.slice(2), process).then((code) => (process.exitCode = code));
