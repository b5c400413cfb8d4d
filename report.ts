// report.ts: the analysis after the judge run. Does the judge agree with the people who scored the transcripts, as
// well as they agree with each other, and does it rank the tutors as they do? `sheet` makes the blank scoring sheet.
// Each figure is a pure function of (human, judge) score pairs; reading and printing are at the edges.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Command, CommanderError } from 'commander';
import { stringify as stringifyCsv } from 'csv-stringify/sync';
import { EvalError, EvalInputError, isEntryModule, loadRubric, loadTranscript, transcriptToText } from './run-judge.ts';
import {
  allowedScore,
  guardCell,
  isComplete,
  readCsvFile,
  readHumanScores,
  readTranscripts,
  unguard,
} from './run-judge.ts';
import type { HumanRow } from './run-judge.ts';
export type { HumanRow };

type Rubric = ReturnType<typeof loadRubric>;
const DEFAULTS = { transcripts: 'evals/transcripts', rubric: 'rubric.json', humanScores: 'evals/human_scores.csv' };
const REPORT_DEFAULTS = { ...DEFAULTS, scores: 'evals/scores/judge_scores.csv', log: 'evals/scores/judge_log.jsonl' };
/** A judge CSV row, as run-judge wrote it (the formula guard taken off task, model and notes). */
export type JudgeRow = Scored & { notes: string };
type Scored = { task_id: string; model: string; scores: Record<string, number> }; // the statistics need no notes

/** Runs `report.ts [agreement]` or `report.ts sheet`; returns the exit status. */
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
    .option('--html <file>', 'also write the report as one self-contained HTML page, with every transcript')
    .option('--transcripts <dir>', 'transcripts folder, for --html', REPORT_DEFAULTS.transcripts)
    .action((options: typeof REPORT_DEFAULTS & { format: string; html?: string }) => {
      if (!['table', 'markdown', 'json'].includes(options.format)) {
        throw new EvalInputError(`--format ${options.format}: use table, markdown or json`);
      }
      const rubric = loadRubric(options.rubric);
      const judged = readJudgeScores(options.scores, rubric);
      const humans = readHumanScores(options.humanScores, rubric);
      const report = analyse(judged, humans, rubric, readAuditLog(options.log));
      const json = `${JSON.stringify(report, null, 2)}\n`;
      io.stdout.write(options.format === 'json' ? json : formatReport(report, options.format === 'markdown'));
      if (options.html === undefined) return;
      const entries = transcriptEntries(judged, humans).map((entry) => ({
        ...entry,
        transcript: transcriptTextOf(path.join(options.transcripts, entry.model, `${entry.task_id}.json`), entry),
      }));
      writePage(options.html, renderHtml(report, entries));
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
  // Guarded like the judge CSV: people open the sheet in a spreadsheet, where a name like =cmd() would run.
  const rows = refs.map((ref) => [ref.task_id, ref.model, ...names.map(() => ''), '', ...scorerCell].map(guardCell));
  return stringifyCsv([header, ...rows], { record_delimiter: '\n', quoted_match: /[\r\n]/ });
}

/** The judge's rows (run-judge's CSV): every score a number, the formula guard taken off task, model and notes. */
export function readJudgeScores(file: string, rubric: Rubric): JudgeRow[] {
  const names = rubric.dimensions.map((dimension) => dimension.name);
  const records = readCsvFile(file);
  const [header = [], ...rows] = records.map(({ record }) => record);
  const expected = ['task_id', 'model', ...names, 'notes'];
  if (header.join(',') !== expected.join(',')) throw new EvalInputError(`${file}: header is not ${expected}`);
  return rows.map((row, i) => {
    const at = `${file}: line ${records[i + 1]!.info.lines}`;
    const scores = rubric.dimensions.map((d, j) => [d.name, allowedScore(d, row[j + 2] ?? '', at)] as const);
    const notes = unguard(row[names.length + 2] ?? '');
    return { task_id: unguard(row[0]!), model: unguard(row[1]!), scores: Object.fromEntries(scores), notes };
  });
}

/** From the audit log, each transcript's last scored entry: how many rows each judge scored, and each transcript's
 * samples when it was judged several times (--samples); nothing without a log. A torn last line is left out. */
export function readAuditLog(log: string): Audit {
  type Entry = { status?: string; judge?: string; model?: string; task_id?: string; sample_scores?: Scores[] };
  const last = new Map<string, Entry>();
  const lines = fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n') : [];
  lines.forEach((line, i) => {
    let entry: Entry | undefined;
    try {
      entry = line.trim() ? JSON.parse(line) : undefined;
    } catch {
      if (i < lines.length - 1) throw new EvalInputError(`${log}: line ${i + 1} is not a JSON object`);
    }
    if (entry?.status === 'scored' && entry.judge) last.set(`${entry.model}/${entry.task_id}`, entry);
  });
  const judges: Record<string, number> = {};
  for (const { judge } of last.values()) judges[judge!] = (judges[judge!] ?? 0) + 1;
  const samples = [...last.values()].flatMap(({ sample_scores = [] }) =>
    sample_scores.length > 1 ? [sample_scores] : [],
  );
  return { judges, samples };
}
type Scores = Record<string, number>;
type Audit = { judges: Record<string, number>; samples: Scores[][] };

/** Per dimension, over transcripts judged several times: the share whose samples all agree, and their mean range. */
export function selfConsistency(samples: Record<string, number>[][], dimension: string) {
  if (!samples.length) return null;
  const ranges = samples.map((scores) => {
    const values = scores.map((sample) => sample[dimension]!);
    return Math.max(...values) - Math.min(...values);
  });
  const unanimous = ranges.filter((range) => range === 0).length / ranges.length;
  return { n: ranges.length, unanimous, mean_range: ranges.reduce((a, b) => a + b, 0) / ranges.length };
}

/** The report: agreement per dimension (and the human ceiling), models side by side, what is missing. */
export function analyse(
  judged: Scored[],
  humans: HumanRow[],
  rubric: Rubric,
  audit: Audit = { judges: {}, samples: [] },
) {
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
      ...{ human_vs_human: ceiling, self_consistency: selfConsistency(audit.samples, dimension.name) },
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
  return { pairs, missing, dimensions, models: side, ranking, judges: audit.judges };
}

type Report = ReturnType<typeof analyse>;
/** The report's summary line and its two tables as text cells, each table's header first: every format prints these. */
function reportText(report: Report) {
  const figure = (value: number | null | undefined) => (value === null || value === undefined ? '-' : value.toFixed(2));
  const interval = (ci: [number, number] | null) => (ci ? `[${figure(ci[0])}, ${figure(ci[1])}]` : '-');
  const agreement = report.dimensions.map((d) => {
    const [judge, ceiling] = [d.judge_vs_human, d.human_vs_human];
    const human = ceiling ? `${figure(ceiling.kappa)} ${interval(ceiling.kappa_ci95)}` : '-';
    const shares = [figure(judge.exact), figure(judge.within_one)];
    const samples = d.self_consistency;
    const consistency = samples ? `${figure(samples.unanimous)} / ${figure(samples.mean_range)} (n ${samples.n})` : '-';
    return [
      d.name,
      String(judge.n),
      ...shares,
      `${figure(judge.kappa)} ${interval(judge.kappa_ci95)}`,
      human,
      consistency,
    ];
  });
  const models = report.models.flatMap((row) =>
    report.dimensions.map((d) => [
      ...[row.model, d.name, `${figure(row.judge_mean[d.name])} ${interval(row.judge_ci95[d.name] ?? null)}`],
      `${figure(row.human_mean[d.name])} ${interval(row.human_ci95[d.name] ?? null)}`,
      figure(report.ranking[d.name]),
    ]),
  );
  const { no_human, no_judge } = report.missing;
  const missing = `no human row: ${no_human.join(', ') || 'none'}; no judge row: ${no_judge.join(', ') || 'none'}`;
  const judges =
    Object.entries(report.judges)
      .map(([judge, rows]) => `${judge} ${rows}`)
      .join(', ') || 'no audit log';
  const consistency = 'samples unanimous / mean range';
  agreement.unshift([
    'dimension',
    'n',
    'exact',
    'within one',
    'kappa [95% CI]',
    'human ceiling kappa [95% CI]',
    consistency,
  ]);
  models.unshift(['model', 'dimension', 'judge mean [95% CI]', 'human mean [95% CI]', 'Spearman of model means']);
  const summary = `${report.pairs} (transcript, scorer) pairs; ${missing}; rows by judge: ${judges}`;
  return { summary, agreement, models };
}

/** The report's tables, aligned as text or as GitHub-flavoured Markdown (for a CI job summary). */
export function formatReport(report: Report, markdown: boolean): string {
  const table = ([header = [], ...rows]: string[][]) => {
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
  const text = reportText(report);
  return [text.summary, table(text.agreement), table(text.models)].join('\n\n') + '\n';
}

/** Every transcript with a judge or a human row, sorted by model then task, with those rows. */
export function transcriptEntries(judged: JudgeRow[], humans: HumanRow[]) {
  const keyOf = (row: { model: string; task_id: string }) => JSON.stringify([row.model, row.task_id]);
  const [judgeOf, humansOf] = [new Map(judged.map((row) => [keyOf(row), row])), groupBy(humans, keyOf)];
  const refs = [...judged, ...humans].map((row) => [keyOf(row), { model: row.model, task_id: row.task_id }] as const);
  const order = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  return [...new Map(refs).values()]
    .sort((a, b) => order(a.model, b.model) || order(a.task_id, b.task_id))
    .map((ref) => ({ ...ref, judge: judgeOf.get(keyOf(ref)), humans: humansOf.get(keyOf(ref)) ?? [] }));
}
/** One transcript on the page: its rows, and its text or why it cannot be shown. */
export type TranscriptEntry = ReturnType<typeof transcriptEntries>[number] & {
  transcript: string | { unavailable: string };
};

/** A transcript's text for the page; one missing or unreadable is a note in its place, never a crash. */
function transcriptTextOf(file: string, ref: { model: string; task_id: string }): TranscriptEntry['transcript'] {
  try {
    return transcriptToText(loadTranscript({ ...ref, path: file }));
  } catch (error) {
    if (!(error instanceof EvalError)) throw error;
    return { unavailable: `transcript not shown: ${error.message.slice(0, 300)}` }; // a schema error can run long
  }
}
/** Writes the page; a path it cannot write is an input error naming the file, not a stack trace. */
function writePage(file: string, html: string) {
  try {
    fs.writeFileSync(file, html);
  } catch (error) {
    throw new EvalInputError(`${file}: cannot write the HTML page (${(error as Error).message})`, { cause: error });
  }
}

/** Untrusted text (transcripts, notes, every name) as HTML text: `<script>` shows as text, never runs. */
export const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);

const PAGE_STYLE = `body{font:14px/1.45 system-ui,sans-serif;color:#111;margin:24px;max-width:1140px}
table{border-collapse:collapse;margin:6px 0 18px}th,td{border:1px solid #ccc;padding:4px 8px;text-align:left}
td{white-space:nowrap}
th{background:#f3f4f6}.grid td,.grid th{text-align:center;min-width:24px;padding:2px 6px}.grid td.dark{color:#fff}
.bars{display:grid;grid-template-columns:auto auto 150px auto;gap:3px 6px;align-items:center;font-size:12px}
.bar{position:relative;height:10px;background:#e5e7eb}.bar i,.bar b{position:absolute;top:0;bottom:0}
.bar i{background:#93c5fd}.bar.human i{background:#fdba74}
.bar b{top:-3px;bottom:-3px;width:2px;margin-left:-1px;background:#000}
.differs{background:#fcd34d;font-weight:bold}section{border-top:1px solid #ccc;margin-top:18px}
.notes{white-space:pre-wrap}pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f6f6f6;padding:8px}`;

/** The report as one self-contained page (inline style; no script, nothing fetched): the tables, each confusion
 * matrix as a shaded grid and each interval as a bar; then per transcript the scores side by side, notes and text. */
export function renderHtml(report: Report, entries: TranscriptEntry[]): string {
  const text = reportText(report);
  const tr = (cells: string[], html = '', tag = 'td') =>
    `<tr>${cells.map((cell) => `<${tag}>${escapeHtml(cell)}</${tag}>`).join('')}${html}</tr>\n`;
  const table = ([header = [], ...rows]: string[][], extra: string, html: (i: number) => string) => {
    const body = rows.map((row, i) => tr(row, `<td>${html(i)}</td>`)).join('');
    return `<table>${tr(header, `<th>${extra}</th>`, 'th')}${body}</table>`;
  };
  const grid = (i: number) => {
    const d = report.dimensions[i]!;
    const [labels, confusion] = [d.labels, d.judge_vs_human.confusion];
    const max = Math.max(1, ...confusion.flat());
    const shade = (count: number) => `background:rgba(29,78,216,${(count / max).toFixed(2)})`;
    const cell = (count: number) =>
      `<td style="${shade(count)}"${count / max > 0.5 ? ' class="dark"' : ''}>${count}</td>`;
    const rows = confusion.map((row, j) => tr([String(labels[j])], row.map(cell).join(''), 'th'));
    const head = tr(['human ↓ judge →', ...labels.map(String)], '', 'th');
    return `<table class="grid">${head}${rows.join('')}</table>`;
  };
  const cells = report.models.flatMap((row) => report.dimensions.map((d) => ({ row, d })));
  const bars = (i: number) => {
    const { row, d } = cells[i]!;
    const [lo, hi] = [d.labels[0]!, d.labels.at(-1)!]; // the dimension's whole scale, not the data's
    const at = (value: number) => ((value - lo) / (hi - lo || 1)) * 100;
    const bar = (who: 'judge' | 'human') => {
      const [mean, ci] = [row[`${who}_mean`][d.name], row[`${who}_ci95`][d.name]];
      const span = ci ? `<i style="left:${at(ci[0]).toFixed(1)}%;right:${(100 - at(ci[1])).toFixed(1)}%"></i>` : '';
      const mark = mean === null || mean === undefined ? '' : `<b style="left:${at(mean).toFixed(1)}%"></b>`;
      return `<span>${who}</span><span>${lo}</span><div class="bar ${who}">${span}${mark}</div><span>${hi}</span>`;
    };
    return `<div class="bars">${bar('judge')}${bar('human')}</div>`;
  };
  const entry = ({ model, task_id, judge, humans, transcript }: TranscriptEntry) => {
    const scorers = humans.map((row) => row.scorer || 'human');
    const rows = report.dimensions.map(({ name }) => {
      const [score, figure] = [judge?.scores[name], (value?: number) => (value === undefined ? '–' : String(value))];
      const differs = (value?: number) => value !== undefined && score !== undefined && value !== score;
      const human = humans.map(
        ({ scores }) => `<td${differs(scores[name]) ? ' class="differs"' : ''}>${figure(scores[name])}</td>`,
      );
      return tr([name], `<td>${figure(score)}</td>${human.join('')}`, 'th');
    });
    const notes = [['judge', judge?.notes ?? ''] as const, ...humans.map((row, i) => [scorers[i]!, row.notes] as const)]
      .filter(([, note]) => note)
      .map(([who, note]) => `<p class="notes"><b>${escapeHtml(who)}'s notes:</b> ${escapeHtml(note)}</p>`);
    const folded =
      typeof transcript === 'string'
        ? `<details><summary>Transcript</summary><pre>${escapeHtml(transcript)}</pre></details>`
        : `<p><em>${escapeHtml(transcript.unavailable)}</em></p>`;
    const scores = `<table>${tr(['dimension', 'judge', ...scorers], '', 'th')}${rows.join('')}</table>`;
    return `<section><h3>${escapeHtml(`${model} / ${task_id}`)}</h3>${scores}${notes.join('')}${folded}</section>\n`;
  };
  const title = 'The judge against the human scores';
  return `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>${title}</title>
<style>${PAGE_STYLE}</style></head><body><h1>${title}</h1><p>${escapeHtml(text.summary)}</p>
<h2>Agreement per dimension</h2>${table(text.agreement, 'confusion (rows: human; columns: judge)', grid)}
<h2>Models side by side</h2>${table(text.models, 'means and 95% intervals', bars)}
<h2>Transcripts</h2><p><span class="differs">Highlighted</span>: a human's score that differs from the judge's.</p>
${entries.map(entry).join('')}</body></html>\n`;
}
function groupBy<T>(items: T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) groups.set(key(item), [...(groups.get(key(item)) ?? []), item]);
  return groups;
}

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
