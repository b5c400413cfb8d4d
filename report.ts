// report.ts: the analysis after the judge run. Does the judge agree with the people who scored the
// transcripts as well as they agree with each other, and does it rank the tutors as they do?
// `sheet` makes the scoring plan (report-sheet.ts, its pages scoring-page.ts) or a blank sheet.
// This file reads the inputs and prints; the figures are pure functions in report-analysis.ts; the
// HTML page (--html) is in report-html.ts.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Command, CommanderError, Option } from 'commander';
import { z } from 'zod';
import {
  DEFAULTS,
  EvalError,
  EvalInputError,
  allowedScore,
  allowedScores,
  checkOutputFile,
  compareText,
  defaultLog,
  isEntryModule,
  issuePath,
  loadRubric,
  nearestKeyHint,
  pairKey,
  readCsvFile,
  readHumanScores,
  readTranscripts,
  refuseFlagsNpmTook,
  refuseRepeatedPairs,
  rubricDimensions,
  scoreColumns,
  unguard,
} from './run-judge.ts';
import type { HumanRow, Rubric, ScoreRow } from './run-judge.ts';
import {
  analyse,
  comparableHumanRows,
  figure,
  reportCells,
  withInterval,
} from './report-analysis.ts';
import type { Report, Scores } from './report-analysis.ts';
import { writeHtmlPage } from './report-html.ts';
import { scoringSheet, writeScoringPlan } from './report-sheet.ts';
import type { PlanOptions } from './report-sheet.ts';

export { scoringSheet };

type IO = { stdout: NodeJS.WritableStream; stderr: NodeJS.WritableStream };

/** Runs `report.ts [agreement]` or `report.ts sheet`; returns the exit status. */
export async function main(argv: string[], io: IO): Promise<number> {
  // 1. The two commands, writing to io rather than to the process; the command sets the status.
  const result = { status: 0 };
  const cli = buildCli(io, result);

  // 2. Run the one asked for; a user error is one line on stderr and exit 2, never a stack trace.
  try {
    refuseFlagsNpmTook(process.env, cli);
    await cli.parseAsync(argv, { from: 'user' });
    return result.status;
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

/** `sheet` and `agreement` (the default), with their options and defaults; `agreement` puts its
 * exit status (1: the gate failed) in `result`. */
function buildCli(io: IO, result: { status: number }): Command {
  // exitOverride and configureOutput come first: a command inherits them when it is made. A usage
  // error is one line, commander's suggestion included.
  const packageJson = fs.readFileSync(new URL('package.json', import.meta.url), 'utf8');
  const cli = new Command('report')
    .description('The analysis after the judge run: the judge against the human scores.')
    .version(JSON.parse(packageJson).version)
    .exitOverride()
    .configureOutput({
      writeOut: (text) => io.stdout.write(text),
      writeErr: (text) => io.stderr.write(text),
      outputError: (text, write) => {
        const line = text
          .replace(/^error: /, '')
          .trim()
          .replace(/\s*\n\s*/g, ' ');
        write(`report: ${line} (see --help)\n`);
      },
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
    .addOption(
      new Option(
        '--scores <file>',
        'a judge CSV, or NAME=file; repeat to compare judges (named NAME, else by the file stem)',
      )
        .argParser(collect)
        .default([], DEFAULTS.output),
    )
    .option(
      '--human-scores <path>',
      'the human scores: a folder of sheets (every *.csv in it) or one CSV',
      DEFAULTS.humanScores,
    )
    .option('--rubric <file>', 'rubric', DEFAULTS.rubric)
    .addOption(
      new Option(
        '--log <file>',
        "a judge's audit log, or NAME=file: paired by name or position; skipped when absent",
      )
        .argParser(collect)
        .default([], `${DEFAULTS.log} for the default CSV, else the CSV's path with .jsonl`),
    )
    .addOption(
      new Option(
        '--min-kappa <x>',
        "CI gate: exit 1 when a dimension's kappa is below x or unknown; dimension=x for one",
      )
        .argParser(collect)
        .default([], 'no gate'),
    )
    .addOption(
      new Option(
        '--on <figure>',
        "what --min-kappa checks: the kappa, or its interval's lower end",
      ).choices(['kappa', 'lower']),
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
    .addHelpText(
      'after',
      '\nExit status: 0 the report was printed; 1 the --min-kappa gate failed (the report is printed ' +
        'too); 2 usage error or a file it cannot use.',
    )
    .allowExcessArguments()
    .action((options: AgreementOptions, command: Command) => {
      refuseArguments(command.args, cli);
      result.status = printAgreement(options, io);
    });

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
  scores: string[];
  humanScores: string;
  rubric: string;
  log: string[];
  minKappa: string[];
  on?: 'kappa' | 'lower';
  html?: string;
  transcripts: string;
};

/** `agreement`: the report on stdout in the format asked for; with --html, the page too. Returns
 * the exit status: 1 when the gate failed, else 0. */
function printAgreement(options: AgreementOptions, io: IO): number {
  // 1. A format it does not know, or judges it cannot tell apart, are refused before anything is read.
  if (!['table', 'markdown', 'json'].includes(options.format)) {
    throw new EvalInputError(`--format ${options.format}: use table, markdown or json`);
  }
  if (options.html !== undefined) checkOutputFile(options.html); // a FIFO would hang the write
  const judges = judgeInputs(options.scores, options.log);
  const on = options.on ?? 'kappa';
  if (options.on !== undefined && options.minKappa.length === 0) {
    throw new EvalInputError(
      `--on ${options.on} says what --min-kappa checks: give --min-kappa too`,
    );
  }

  // 2. The inputs: the rubric and the gate's thresholds, each judge's rows and audit log, the human
  // rows.
  const rubric = loadRubric(options.rubric);
  const thresholds = gateThresholds(options.minKappa, rubric);
  const runs = judges.map((judge) => {
    const rows = readJudgeScores(judge.scores, rubric);
    return { judge, rows, audit: readAuditLog(judge.log, rubric, rows) };
  });
  const judgeCsvs = judges.map((judge) => judge.scores);
  const checks = { judgeCsvs, transcripts: options.transcripts };
  const humans = readHumanScores(options.humanScores, rubric, checks);

  // 3. The analysis of the first judge; with more, every judge on the transcripts all of them
  // scored; with --min-kappa, the gate on the first judge's figures.
  const first = runs[0]!;
  const report: FullReport = analyse(first.rows, humans, rubric, analysisAudit(first.audit));
  if (runs.length > 1) {
    report.comparison = compareJudges(runs, humans, rubric);
  }
  if (thresholds.size > 0) {
    report.gate = gate(report, thresholds, on);
  }

  // 4. The report as aligned tables, as Markdown (the gate's verdict last), or as one JSON object;
  // a failed gate is also one line on stderr, for a CI log.
  if (options.format === 'json') {
    io.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } else {
    io.stdout.write(formatReport(report, options.format === 'markdown', on));
  }
  if (report.gate?.passed === false) {
    io.stderr.write(`report: ${gateVerdict(report.gate, on)}\n`);
  }

  // 5. With --html, the page, with every transcript, and where it went.
  if (options.html !== undefined) {
    const transcriptsDir = options.transcripts;
    // The page shows the human rows the figures rest on; the others are listed in its run table.
    const shown = comparableHumanRows(humans, rubric);
    const page = {
      report,
      rubric,
      audit: first.audit,
      judged: first.rows,
      humans: shown,
      transcriptsDir,
    };
    writeHtmlPage(options.html, page);
    io.stderr.write(`report: wrote the page to ${options.html}\n`);
  }
  return report.gate?.passed === false ? 1 : 0;
}

/** A word on the command line that is no option: a mistyped command (`sheets`), named as such. */
function refuseArguments(args: string[], cli: Command): void {
  if (args.length === 0) {
    return;
  }
  const known = cli.commands.map((command) => command.name());
  const hint = nearestKeyHint(args[0]!, known);
  const listed = known.map((name) => (name === 'agreement' ? `${name} (the default)` : name));
  throw new EvalInputError(
    `unknown command "${args[0]}"${hint}; the commands are ${listed.join(', ')}`,
  );
}

/** Commander's collector of a repeatable option's values. */
function collect(value: string, previous: string[]): string[] {
  return previous.concat([value]);
}

// ---- Reading the inputs ------------------------------------------------------------------------

/** One judge to report on: its name, its CSV and its audit log. */
export type JudgeInput = { name: string; scores: string; log: string };

/** The judges of `--scores` (the default CSV without one), each with its `--log`: paired by name,
 * else by position; without one, the default log for the default CSV, else the CSV's .jsonl. */
export function judgeInputs(scoresValues: string[], logValues: string[]): JudgeInput[] {
  // 1. Each judge's name: given as NAME=file, else the file's stem; two alike cannot be told apart.
  const given = scoresValues.length > 0 ? scoresValues : [DEFAULTS.output];
  const judges = given.map((value) => {
    const named = nameAndFile(value, '--scores');
    const name = named.name ?? path.basename(named.file, path.extname(named.file));
    return { name, scores: named.file, log: defaultLog(named.file) };
  });
  const names = judges.map((judge) => judge.name);
  const twice = names.find((name, i) => names.indexOf(name) !== i);
  if (twice !== undefined) {
    throw new EvalInputError(
      `--scores: two judges named "${twice}"; name each as --scores NAME=file`,
    );
  }

  // 2. Each log to its judge: by name, or by its position among the --log values.
  const paired = new Set<JudgeInput>();
  logValues.forEach((value, i) => {
    const named = nameAndFile(value, '--log');
    const judge = named.name === undefined ? judges[i] : judges.find((j) => j.name === named.name);
    if (judge === undefined) {
      const which =
        named.name === undefined
          ? `is log ${i + 1} of ${judges.length} judges`
          : `names no judge of --scores (${names.join(', ')})`;
      throw new EvalInputError(`--log ${value} ${which}`);
    }
    if (paired.has(judge)) {
      throw new EvalInputError(`--log ${value}: judge "${judge.name}" already has a --log`);
    }
    paired.add(judge);
    judge.log = named.file;
  });
  return judges;
}

/** `NAME=file` or `file`: a name is what comes before the first `=`, if it holds no path separator. */
function nameAndFile(value: string, option: string): { name?: string; file: string } {
  const at = value.indexOf('=');
  const name = value.slice(0, at);
  if (at < 0 || /[\\/]/.test(name)) {
    return { file: value };
  }
  if (name === '' || at === value.length - 1) {
    throw new EvalInputError(
      `${option} ${value}: write NAME=file, both non-empty, or just the file`,
    );
  }
  return { name, file: value.slice(at + 1) };
}

/** `--min-kappa x` and `--min-kappa dimension=x` as a threshold per dimension, the named ones over
 * the plain one; a name the rubric lacks or a figure outside [-1, 1] is a usage error. */
export function gateThresholds(values: string[], rubric: Rubric): Map<string, number> {
  const known = rubricDimensions(rubric);
  const named = new Map<string | undefined, number>();
  for (const value of values) {
    const at = value.lastIndexOf('=');
    const dimension = at < 0 ? undefined : value.slice(0, at);
    const figure = value.slice(at + 1);
    const threshold = figure.trim() === '' ? NaN : Number(figure);
    if (!Number.isFinite(threshold) || threshold < -1 || threshold > 1) {
      throw new EvalInputError(
        `--min-kappa ${value}: "${figure}" is not a kappa between -1 and 1 (write 0.6, or dimension=0.6)`,
      );
    }
    if (dimension !== undefined && !known.includes(dimension)) {
      throw new EvalInputError(
        `--min-kappa ${value}: no dimension "${dimension}" in the rubric; its dimensions are ${known.join(', ')}`,
      );
    }
    if (named.has(dimension)) {
      const which = dimension === undefined ? 'the plain --min-kappa' : `--min-kappa ${dimension}=`;
      throw new EvalInputError(`--min-kappa ${value}: ${which} is given twice; give it once`);
    }
    named.set(dimension, threshold);
  }

  const thresholds = new Map<string, number>();
  for (const dimension of known) {
    const threshold = named.get(dimension) ?? named.get(undefined);
    if (threshold !== undefined) {
      thresholds.set(dimension, threshold);
    }
  }
  return thresholds;
}

/** The judge CSV's rows: each score one its dimension allows, the formula guards taken off. */
export function readJudgeScores(file: string, rubric: Rubric): ScoreRow[] {
  const records = readCsvFile(file);
  const columns = scoreColumns(rubric);

  const header = records[0]?.record ?? [];
  if (header.join(',') !== columns.join(',')) {
    throw new EvalInputError(`${file}: header is not ${columns.join(',')}`);
  }

  const rows = records.slice(1).map(({ record, info }) => {
    const row = judgeRow(record, rubric, `${file}: line ${info.lines}`);
    return { row, line: info.lines };
  });

  // A duplicated row would count twice in a mean and once in agreement: refused, naming both lines.
  refuseRepeatedPairs(
    file,
    rows.map(({ row, line }) => ({ pair: row, line })),
  );
  return rows.map(({ row }) => row);
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
export function readAuditLog(log: string, rubric?: Rubric, scored?: ScoreRow[]): Audit {
  // 1. Every line; the last scored one of each transcript makes its row. With the rubric, a row's
  // samples must each give every dimension an allowed score (else they are of another rubric).
  const lines = auditEntries(log);
  const entries = lines.map(({ entry }) => entry);
  const rows = new Map<string, AuditRow>();
  const lineOf = new Map<string, number>();
  for (const { entry, line } of lines) {
    if (entry.status === 'scored' && entry.judge) {
      const key = pairKey(entry.task_id, entry.model);
      rows.set(key, auditRow(entry, entry.judge));
      lineOf.set(key, line);
    }
  }
  if (rubric !== undefined) {
    for (const [key, row] of rows) {
      checkSamples(row.samples, rubric, `${log}: line ${lineOf.get(key)}`);
    }
  }
  // Given the CSV, only its transcripts count: a log also holds rows removed since.
  if (scored !== undefined) {
    const inCsv = new Set(scored.map((row) => pairKey(row.task_id, row.model)));
    for (const key of [...rows.keys()]) {
      if (!inCsv.has(key)) {
        rows.delete(key);
      }
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

/** Each sample's score of each dimension, one the dimension allows; `at` names the log line. */
function checkSamples(samples: Scores[], rubric: Rubric, at: string): void {
  samples.forEach((sample, i) => {
    for (const dimension of rubric.dimensions) {
      const score = sample[dimension.name];
      if (score === undefined || !allowedScores(dimension).includes(score)) {
        const found = score === undefined ? 'no score' : `${score}, not an allowed score`;
        throw new EvalInputError(
          `${at}: sample_scores[${i}].${dimension.name}: ${found}; is this log of another rubric?`,
        );
      }
    }
  });
}

/** The log's lines, none without a log; a torn last line (a crash mid-write) is left out; a line
 * that is not an audit entry is an error naming the file and line. */
function auditEntries(log: string): { entry: AuditLine; line: number }[] {
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
  const entries: { entry: AuditLine; line: number }[] = [];
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
        return `${issuePath(issue.path)}: ${issue.message}`;
      });
      throw new EvalInputError(`${log}: line ${i + 1}: ${problems.join('; ')}`);
    }
    entries.push({ entry: parsed.data, line: i + 1 });
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

// ---- Judges side by side, and the CI gate -----------------------------------------------------

/** The report, with the comparison of judges (more than one --scores) and the gate (--min-kappa). */
export type FullReport = Report & { comparison?: JudgeComparison[]; gate?: Gate };

/** One judge's CSV rows and audit log. */
type JudgeRun = { judge: JudgeInput; rows: ScoreRow[]; audit: Audit };

export type JudgeComparison = ReturnType<typeof compareJudges>[number];

/** Every judge on the same transcripts: those all of them scored and people scored completely (and
 * not stale: the transcript unchanged since). */
export function compareJudges(runs: JudgeRun[], humans: HumanRow[], rubric: Rubric) {
  // 1. The transcripts compared.
  const keyOf = (row: { task_id: string; model: string }) => pairKey(row.task_id, row.model);
  const complete = comparableHumanRows(humans, rubric);
  let common = new Set(complete.map(keyOf));
  for (const run of runs) {
    const scored = new Set(run.rows.map(keyOf));
    common = new Set([...common].filter((key) => scored.has(key)));
  }
  const humansCompared = complete.filter((row) => common.has(keyOf(row)));

  // 2. Each judge's figures on them, and what a transcript cost it.
  return runs.map((run) => {
    const rows = run.rows.filter((row) => common.has(keyOf(row)));
    const report = analyse(rows, humansCompared, rubric, analysisAudit(run.audit, common));
    const dimensions = report.dimensions.map((dimension) => {
      return {
        name: dimension.name,
        kappa: dimension.judge_vs_human.kappa,
        kappa_ci95: dimension.judge_vs_human.kappa_ci95,
        gap_to_ceiling: dimension.gap_to_ceiling,
        leniency: dimension.leniency,
        self_consistency: dimension.self_consistency,
      };
    });
    return {
      name: run.judge.name,
      scores: run.judge.scores,
      log: run.judge.log,
      n_transcripts: common.size,
      cost_usd_per_transcript: costPerTranscript(run.audit, common),
      dimensions,
    };
  });
}

/** The mean cost of the rows' last scored entries; null when any is unknown, or there are none. */
function costPerTranscript(audit: Audit, keys: Set<string>): number | null {
  let total = 0;
  for (const key of keys) {
    const cost = audit.rows.get(key)?.cost_usd ?? null;
    if (cost === null) {
      return null;
    }
    total += cost;
  }
  return keys.size === 0 ? null : total / keys.size;
}

/** The CI gate's outcome: the dimensions whose figure is below its threshold, or unknown. */
export type Gate = {
  passed: boolean;
  failures: { dimension: string; figure: number | null; threshold: number }[];
};

/** Each dimension with a threshold against the first judge's kappa (or its interval's lower end). */
export function gate(report: Report, thresholds: Map<string, number>, on: 'kappa' | 'lower'): Gate {
  const failures: Gate['failures'] = [];
  for (const dimension of report.dimensions) {
    const threshold = thresholds.get(dimension.name);
    if (threshold === undefined) {
      continue;
    }
    const judge = dimension.judge_vs_human;
    const figure = on === 'lower' ? (judge.kappa_ci95?.[0] ?? null) : judge.kappa;
    // Within 1e-9 of it is at it: floating-point noise must not fail a kappa that equals it.
    if (figure === null || figure < threshold - 1e-9) {
      failures.push({ dimension: dimension.name, figure, threshold });
    }
  }
  return { passed: failures.length === 0, failures };
}

/** The gate's verdict in one line, each failure with its figure and threshold. */
export function gateVerdict(result: Gate, on: 'kappa' | 'lower'): string {
  const what = on === 'lower' ? "kappa's 95% CI lower end" : 'kappa';
  if (result.passed) {
    return `gate passed: ${what} at or above its threshold on every dimension checked`;
  }
  const failures = result.failures.map((failure) => {
    // Six decimals at most, trailing zeros dropped: 0.79963 must not print as its threshold 0.8.
    const figure = failure.figure === null ? 'unknown' : String(Number(failure.figure.toFixed(6)));
    return `${failure.dimension} ${what} ${figure} (threshold ${failure.threshold})`;
  });
  return `gate failed: ${failures.join('; ')}`;
}

// ---- Formatting: aligned text and Markdown (the JSON is the report itself) ---------------------

/** The report's tables, aligned as text or as GitHub-flavoured Markdown (for a CI job summary);
 * then the judges side by side, and the gate's verdict last. */
export function formatReport(
  report: FullReport,
  markdown: boolean,
  on: 'kappa' | 'lower' = 'kappa',
) {
  const cells = reportCells(report);
  const table = markdown ? markdownTable : alignedTable;
  const parts = [cells.summary, table(cells.agreement), table(cells.models)];
  if (report.comparison !== undefined) {
    const n = report.comparison[0]?.n_transcripts ?? 0;
    parts.push(`judges side by side, on the ${n} transcript(s) all of them and people scored:`);
    parts.push(table(comparisonCells(report.comparison)));
  }
  if (report.gate !== undefined) {
    parts.push(gateVerdict(report.gate, on));
  }
  return `${parts.join('\n\n')}\n`;
}

/** The comparison as one table, the judges of a dimension together. */
function comparisonCells(comparison: JudgeComparison[]): string[][] {
  const header = [
    'dimension',
    'judge',
    'kappa [95% CI]',
    'gap to ceiling [95% CI]',
    'leniency [95% CI]',
    'samples unanimous / mean range',
    'cost per transcript',
  ];
  const rows = (comparison[0]?.dimensions ?? []).flatMap((dimension, i) => {
    return comparison.map((judge) => {
      const figures = judge.dimensions[i]!;
      const gap = figures.gap_to_ceiling;
      const samples = figures.self_consistency;
      const cost = judge.cost_usd_per_transcript;
      return [
        dimension.name,
        judge.name,
        withInterval(figures.kappa, figures.kappa_ci95),
        gap === null
          ? '-'
          : `${withInterval(gap.kappa_diff, gap.ci95)} ${gap.verdict ?? ''}`.trim(),
        withInterval(figures.leniency.mean_diff, figures.leniency.ci95),
        samples === null ? '-' : `${figure(samples.unanimous)} / ${figure(samples.mean_range)}`,
        cost === null ? 'unknown' : `$${cost.toFixed(4)}`,
      ];
    });
  });
  return [header, ...rows];
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
