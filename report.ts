// report.ts: the analysis after the judge run. Does the judge agree with the people who scored the
// transcripts as well as they agree with each other, and does it rank the tutors as they do?
// `sheet` makes the scoring plan (report-sheet.ts, its pages scoring-page.ts) or a blank sheet.
// This file reads the inputs and prints; the figures are pure functions in report-analysis.ts; the
// HTML page (--html) is in report-html.ts.
import * as fs from 'node:fs';
import { Command, CommanderError } from 'commander';
import { z } from 'zod';
import {
  DEFAULTS,
  EvalError,
  EvalInputError,
  allowedScore,
  checkOutputFile,
  compareText,
  isEntryModule,
  loadRubric,
  pairKey,
  pairLabel,
  readCsvFile,
  readHumanScores,
  readTranscripts,
  refuseFlagsNpmTook,
  scoreColumns,
  unguard,
} from './run-judge.ts';
import type { Rubric, ScoreRow } from './run-judge.ts';
import { analyse, reportCells } from './report-analysis.ts';
import type { Report, Scores } from './report-analysis.ts';
import { writeHtmlPage } from './report-html.ts';
import { scoringSheet, writeScoringPlan } from './report-sheet.ts';
import type { PlanOptions } from './report-sheet.ts';

export { scoringSheet };

type IO = { stdout: NodeJS.WritableStream; stderr: NodeJS.WritableStream };

/** Runs `report.ts [agreement]` or `report.ts sheet`; returns the exit status. */
export async function main(argv: string[], io: IO): Promise<number> {
  // 1. The two commands, writing to io rather than to the process.
  const cli = buildCli(io);

  // 2. Run the one asked for; a user error is one line on stderr and exit 2, never a stack trace.
  try {
    refuseFlagsNpmTook(process.env, cli);
    await cli.parseAsync(argv, { from: 'user' });
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      return error.exitCode === 0 ? 0 : 2;
    }
    if (!(error instanceof EvalError)) {
      throw error;
    }
    io.stderr.write(`report: ${error.message}\n`);
    return 2;
  }
}

/** `sheet` and `agreement` (the default), with their options and defaults. */
function buildCli(io: IO): Command {
  // exitOverride and configureOutput come first: a command inherits them when it is made.
  const cli = new Command('report')
    .description('The analysis after the judge run: the judge against the human scores.')
    .exitOverride()
    .configureOutput({
      writeOut: (text) => io.stdout.write(text),
      writeErr: (text) => io.stderr.write(text),
    });

  cli
    .command('sheet')
    .description(
      'the scoring plan: with --scorers, a sheet and a blind scoring page per scorer in --out; ' +
        "without, a blank sheet of every transcript on stdout; never the judge's scores",
    )
    .option('--scorers <names>', 'the plan: these scorers, comma-separated (alice,bob,carol)')
    .option('--sample <n|p%>', 'score a sample stratified by model and task (default: all)')
    .option('--overlap <k>', 'scorers per chosen transcript (default 1)')
    .option('--seed <s>', 'the seed of the sample and the assignment (default 0)')
    .option(
      '--out <dir>',
      "the plan's folder: <scorer>.csv and <scorer>.html",
      DEFAULTS.humanScores,
    )
    .option('--scorer <name>', 'without --scorers: add a scorer column filled with this name')
    .option(
      '--transcripts <dir>',
      'transcripts folder: {model}/{task_id}.json',
      DEFAULTS.transcripts,
    )
    .option('--tasks <dir>', 'task files, for the scoring pages', DEFAULTS.tasks)
    .option(
      '--reference-keys <dir>',
      'reference keys, for the scoring pages',
      DEFAULTS.referenceKeys,
    )
    .option('--rubric <file>', 'rubric: its dimensions are the columns', DEFAULTS.rubric)
    .action((options: SheetOptions, command: Command) => printSheet(options, command, io));

  cli
    .command('agreement', { isDefault: true })
    .description('the judge against the human scores, per dimension and per model')
    .option('--format <format>', 'table, markdown or json', 'table')
    .option('--scores <file>', 'the judge CSV', DEFAULTS.output)
    .option(
      '--human-scores <path>',
      'the human scores: a folder of sheets (every *.csv in it) or one CSV',
      DEFAULTS.humanScores,
    )
    .option('--rubric <file>', 'rubric', DEFAULTS.rubric)
    .option(
      '--log <file>',
      'the audit log, for which judge scored each row (skipped when absent)',
      DEFAULTS.log,
    )
    .option(
      '--html <file>',
      'also write the report as one self-contained HTML page, with every transcript',
    )
    .option(
      '--transcripts <dir>',
      'transcripts folder: for --html, and to find stale human rows',
      DEFAULTS.transcripts,
    )
    .action((options: AgreementOptions) => printAgreement(options, io));

  return cli;
}

type SheetOptions = Omit<PlanOptions, 'scorers'> & { scorers?: string; scorer?: string };

/** `sheet`: with --scorers, the plan written to --out; without, the blank sheet on stdout. */
function printSheet(options: SheetOptions, command: Command, io: IO): void {
  if (options.scorers !== undefined) {
    if (options.scorer !== undefined) {
      throw new EvalInputError('--scorer and --scorers: give one (--scorers names the plan)');
    }
    writeScoringPlan({ ...options, scorers: options.scorers }, io.stdout);
    return;
  }

  const planOnly = ['sample', 'overlap', 'seed', 'out'].find((name) => {
    return command.getOptionValueSource(name) === 'cli';
  });
  if (planOnly !== undefined) {
    throw new EvalInputError(`--${planOnly} needs --scorers (the plan's scorers)`);
  }
  const transcripts = readTranscripts(options.transcripts);
  const rubric = loadRubric(options.rubric);
  io.stdout.write(scoringSheet(transcripts, rubric, options.scorer));
}

type AgreementOptions = {
  format: string;
  scores: string;
  humanScores: string;
  rubric: string;
  log: string;
  html?: string;
  transcripts: string;
};

/** `agreement`: the report on stdout in the format asked for; with --html, the page too. */
function printAgreement(options: AgreementOptions, io: IO): void {
  // 1. A format it does not know is refused before anything is read.
  if (!['table', 'markdown', 'json'].includes(options.format)) {
    throw new EvalInputError(`--format ${options.format}: use table, markdown or json`);
  }
  if (options.html !== undefined) checkOutputFile(options.html); // a FIFO would hang the write

  // 2. The inputs: the rubric, the judge's rows, the human rows, the audit log if there is one.
  const rubric = loadRubric(options.rubric);
  const judged = readJudgeScores(options.scores, rubric);
  const checks = { judgeCsvs: [options.scores], transcripts: options.transcripts };
  const humans = readHumanScores(options.humanScores, rubric, checks);
  const audit = readAuditLog(options.log);

  // 3. The analysis.
  const report = analyse(judged, humans, rubric, analysisAudit(audit));

  // 4. The report as aligned tables, as Markdown, or as one JSON object.
  if (options.format === 'json') {
    io.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } else {
    io.stdout.write(formatReport(report, options.format === 'markdown'));
  }

  // 5. With --html, the page, with every transcript.
  if (options.html !== undefined) {
    writeHtmlPage(options.html, report, judged, humans, options.transcripts);
  }
}

// ---- Reading the inputs ------------------------------------------------------------------------

/** The judge CSV's rows: each score one its dimension allows, the formula guards taken off. */
export function readJudgeScores(file: string, rubric: Rubric): ScoreRow[] {
  const records = readCsvFile(file);
  const columns = scoreColumns(rubric);

  const header = records[0]?.record ?? [];
  if (header.join(',') !== columns.join(',')) {
    throw new EvalInputError(`${file}: header is not ${columns.join(',')}`);
  }

  // A duplicated row would count twice in a mean and once in agreement: refused, naming both lines.
  const lineOf = new Map<string, number>();
  return records.slice(1).map(({ record, info }) => {
    const row = judgeRow(record, rubric, `${file}: line ${info.lines}`);
    const first = lineOf.get(pairKey(row.task_id, row.model));
    if (first !== undefined) {
      throw new EvalInputError(
        `${file}: lines ${first} and ${info.lines} both score ${pairLabel(row)}: keep one`,
      );
    }
    lineOf.set(pairKey(row.task_id, row.model), info.lines);
    return row;
  });
}

/** One record of the judge CSV as a row; `at` names its file and line in an error. */
function judgeRow(record: string[], rubric: Rubric, at: string): ScoreRow {
  const scores: Scores = {};
  rubric.dimensions.forEach((dimension, i) => {
    scores[dimension.name] = allowedScore(dimension, record[i + 2] ?? '', at);
  });

  return {
    task_id: unguard(record[0]!),
    model: unguard(record[1]!),
    scores,
    notes: unguard(record[rubric.dimensions.length + 2] ?? ''),
  };
}

/** A line of the audit log, loosely: only the fields the report reads; every one but the pair is
 * optional, for old logs. */
const AuditLineSchema = z.object({
  task_id: z.string(),
  model: z.string(),
  status: z.string().optional(),
  judge: z.string().nullish(),
  timestamp: z.string().optional(),
  cost_usd: z.number().nullish(),
  rubric_sha256: z.string().nullish(),
  prompt_template_sha256: z.string().nullish(),
  sample_scores: z.array(z.record(z.string(), z.number())).optional(),
  attempts: z.array(z.object({ judge: z.string().nullish() })).optional(),
  answers: z
    .array(
      z.object({
        thinking: z.string().nullish(),
        scores: z.record(z.string(), z.number()).nullish(),
      }),
    )
    .optional(),
  human_scoring: z.unknown().optional(),
  before_human_scoring: z.boolean().optional(),
});

type AuditLine = z.infer<typeof AuditLineSchema>;

/** What the log says of one row: its transcript's last scored entry. */
export type AuditRow = {
  judge: string;
  /** Scored by a judge after another judge's failed attempts: a fallback of the chain. */
  fallback: boolean;
  /** Each sample's scores with --samples k > 1, else none. */
  samples: Scores[];
  /** Of this entry's answers; null when unknown (no price, or an old log). */
  cost_usd: number | null;
  timestamp: string | null;
  rubric_sha256: string | null;
  /** The judge's thinking in each answer that gave scores, when the run kept it. */
  thinking: string[];
  before_human_scoring: boolean;
};

/** The audit log as the report, the comparison and the page header read it. */
export type Audit = {
  /** By pairKey: each transcript's last scored entry. */
  rows: Map<string, AuditRow>;
  /** Rows per judge, the judges in the order their first row appears. */
  rows_by_judge: Map<string, number>;
  /** Of those, the rows each judge scored as a fallback. */
  fallback_rows: Map<string, number>;
  /** The rows' rubric hashes, each once, in order of appearance (more than one: mixed rubrics). */
  rubric_sha256: string[];
  /** The prompt template hashes, where the log records them. */
  prompt_template_sha256: string[];
  /** The newest row's timestamp; null without one. */
  last_judged: string | null;
  /** Every entry's cost, failed ones too; null when any is unknown or there is no log. */
  total_cost_usd: number | null;
  /** The newest entry's `human_scoring`, as recorded; null when no entry records it. */
  human_scoring: unknown;
  /** Rows judged with --before-human-scoring. */
  before_human_scoring_rows: number;
};

/** Each transcript's last scored entry in the log, and what the page header says of the run. */
export function readAuditLog(log: string): Audit {
  // 1. Every line; the last scored one of each transcript makes its row.
  const entries = auditEntries(log);
  const rows = new Map<string, AuditRow>();
  for (const entry of entries) {
    if (entry.status === 'scored' && entry.judge) {
      rows.set(pairKey(entry.task_id, entry.model), auditRow(entry, entry.judge));
    }
  }

  // 2. Counted per judge, in Maps: a judge may be named anything, `__proto__` too.
  const rowsByJudge = new Map<string, number>();
  const fallbackRows = new Map<string, number>();
  for (const row of rows.values()) {
    rowsByJudge.set(row.judge, (rowsByJudge.get(row.judge) ?? 0) + 1);
    if (row.fallback) {
      fallbackRows.set(row.judge, (fallbackRows.get(row.judge) ?? 0) + 1);
    }
  }

  // 3. The run as a whole: hashes, the last judged row, the cost of every paid answer.
  const rowList = [...rows.values()];
  const timestamps = rowList.flatMap((row) => (row.timestamp === null ? [] : [row.timestamp]));
  const costs = entries.map((entry) => entry.cost_usd ?? null);
  const known = costs.length > 0 && !costs.includes(null);
  const scoring = entries.filter((entry) => entry.human_scoring !== undefined);
  return {
    rows,
    rows_by_judge: rowsByJudge,
    fallback_rows: fallbackRows,
    rubric_sha256: distinct(rowList.map((row) => row.rubric_sha256)),
    prompt_template_sha256: distinct(entries.map((entry) => entry.prompt_template_sha256)),
    last_judged: timestamps.sort(compareText).at(-1) ?? null,
    total_cost_usd: known ? costs.reduce((total, cost) => total! + cost!, 0) : null,
    human_scoring: scoring.at(-1)?.human_scoring ?? null,
    before_human_scoring_rows: rowList.filter((row) => row.before_human_scoring).length,
  };
}

/** One scored entry as its row's record. */
function auditRow(entry: AuditLine, judge: string): AuditRow {
  const others = (entry.attempts ?? []).filter((attempt) => {
    return typeof attempt.judge === 'string' && attempt.judge !== judge;
  });
  const scoring = (entry.answers ?? []).filter((answer) => answer.scores);
  return {
    judge,
    fallback: others.length > 0,
    samples: entry.sample_scores ?? [],
    cost_usd: entry.cost_usd ?? null,
    timestamp: entry.timestamp ?? null,
    rubric_sha256: entry.rubric_sha256 ?? null,
    thinking: scoring.flatMap((answer) => (answer.thinking ? [answer.thinking] : [])),
    before_human_scoring: entry.before_human_scoring === true,
  };
}

/** The log's lines, none without a log; a torn last line (a crash mid-write) is left out; a line
 * that is not an audit entry is an error naming the file and line. */
function auditEntries(log: string): AuditLine[] {
  if (!fs.existsSync(log)) {
    return [];
  }

  let content: string;
  try {
    content = fs.readFileSync(log, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reason = code === 'EISDIR' ? 'a folder, not an audit log (.jsonl)' : String(error);
    throw new EvalInputError(`--log ${log}: ${reason}`, { cause: error });
  }

  const lines = content.split('\n');
  const entries: AuditLine[] = [];
  lines.forEach((line, i) => {
    if (line.trim() === '') {
      return;
    }
    let entry: unknown;
    try {
      entry = JSON.parse(line);
    } catch {
      if (i === lines.length - 1) {
        return;
      }
      throw new EvalInputError(`${log}: line ${i + 1} is not a JSON object`);
    }
    const parsed = AuditLineSchema.safeParse(entry);
    if (!parsed.success) {
      const problems = parsed.error.issues.map((issue) => {
        return `${issue.path.join('.') || '(line)'}: ${issue.message}`;
      });
      throw new EvalInputError(`${log}: line ${i + 1}: ${problems.join('; ')}`);
    }
    entries.push(parsed.data);
  });
  return entries;
}
/** What the analysis reads of the log: rows per judge (a plain object built from the Map, so any
 * name is an own key) and the samples of the rows in `keys` (all rows without). */
function analysisAudit(audit: Audit, keys?: Set<string>) {
  const samples: Scores[][] = [];
  for (const [key, row] of audit.rows) {
    if (row.samples.length > 1 && (keys === undefined || keys.has(key))) {
      samples.push(row.samples);
    }
  }
  return { judges: Object.fromEntries(audit.rows_by_judge), samples };
}

/** The values that are strings, each once, in order of first appearance. */
function distinct(values: (string | null | undefined)[]): string[] {
  const strings = values.filter((value) => typeof value === 'string');
  return [...new Set(strings)];
}

// ---- Formatting: aligned text and Markdown (the JSON is the report itself) ---------------------

/** The report's tables, aligned as text or as GitHub-flavoured Markdown (for a CI job summary). */
export function formatReport(report: Report, markdown: boolean): string {
  const cells = reportCells(report);
  const table = markdown ? markdownTable : alignedTable;
  return `${cells.summary}\n\n${table(cells.agreement)}\n\n${table(cells.models)}\n`;
}

/** Rows of cells (the header first) in columns as wide as their widest cell, two spaces apart. */
function alignedTable(rows: string[][]): string {
  const header = rows[0] ?? [];
  const widths = header.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  const lines = rows.map((row) => {
    const padded = row.map((cell, i) => cell.padEnd(widths[i]!));
    return padded.join('  ').trimEnd();
  });
  return lines.join('\n');
}

/** Rows of cells (the header first) as a GitHub-flavoured Markdown table. */
function markdownTable(rows: string[][]): string {
  const header = rows[0] ?? [];
  const lines = [header, header.map(() => '---'), ...rows.slice(1)];
  return lines.map((row) => `| ${row.join(' | ')} |`).join('\n');
}

// Last, so that everything above is defined before the command runs.
if (isEntryModule(import.meta.url)) {
  main(process.argv.slice(2), process).then((code) => {
    process.exitCode = code;
  });
}
