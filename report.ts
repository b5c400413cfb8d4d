// report.ts: the analysis after the judge run. Does the judge agree with the people who scored the
// transcripts as well as they agree with each other, and does it rank the tutors as they do?
// `sheet` makes the scoring plan (report/sheet.ts, its pages report/scoring-page.ts) or a blank sheet.
// This file runs the commands and prints; the inputs are read in report/inputs.ts, the figures are
// pure functions in report/analysis.ts, the HTML page (--html) is in report/html.ts. Importing it
// runs nothing: `main` runs only when this file is the program.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Command, CommanderError, Option } from 'commander';
import {
  DEFAULTS,
  EvalError,
  EvalInputError,
  checkOutputFile,
  guardOutputStreams,
  inStudyDir,
  isEntryModule,
  isMockNotes,
  loadModelsConfig,
  loadRubric,
  nearestKeyHint,
  oneLine,
  pairKey,
  pairLabel,
  readHumanScores,
  readJudgeCsv,
  readTranscripts,
  refuseFlagsNpmTook,
  refuseOverwritingInput,
  sheetsIfListable,
  STUDY_DIR_HELP,
  rubricDimensions,
  loadPlanManifest,
  PLAN_FILE,
} from './run-judge.ts';
import type { HumanRow, IO, PlanManifest, Rubric, ScoreRow } from './run-judge.ts';
import { DEFAULT_EPSILON, altTestAllWords, altTestWords } from './report/alt-test.ts';
import {
  DEFAULT_MARGIN,
  SUPERSCRIPT_DIGITS,
  analyse,
  comparableHumanRows,
  estimate,
  figure,
  judgesAgainstEachOther,
  juryRows,
  reportCells,
  verdictWords,
  wrapped,
} from './report/analysis.ts';
import type {
  AnalysisAudit,
  AnalysisOptions,
  CellTable,
  Report,
  Scores,
} from './report/analysis.ts';
import { writeHtmlPage } from './report/html.ts';
import { namesInWords, verdictMarkdown } from './report/verdicts.ts';
import {
  compareTutors,
  judgeGainTable,
  judgeTutors,
  samplingDesign,
  tutorTables,
  withTutors,
} from './report/tutors.ts';
import type { HumanSample, JudgeTutors, SamplingDesign, WithTutors } from './report/tutors.ts';
import { judgeInputs, noAudit, readAuditLog, staleJudgeRows } from './report/inputs.ts';
import type { Audit, JudgeInput, JudgeRun } from './report/inputs.ts';
import { scoringSheet, updateScoringPlan, writeScoringPlan } from './report/sheet.ts';
import type { PlanOptions } from './report/sheet.ts';
import { addImportCommand } from './report/import.ts';
import { addViewCommand } from './report/view.ts';

/** Where the report writes and which environment it checks: run-judge's IO. `env` may be left out
 * by callers written before it was injected; it is then the process's. */
type ReportIO = Pick<IO, 'stdout' | 'stderr'> & Partial<Pick<IO, 'env'>>;

/** Runs `report.ts [agreement]` or `report.ts sheet`; returns the exit status. */
export async function main(argv: string[], io: ReportIO): Promise<number> {
  // 1. The two commands, writing to io rather than to the process; the command sets the status.
  const result = { status: 0 };
  const cli = buildCli(io, result);

  // 2. Run the one asked for; a user error is one line on stderr and exit 2, never a stack trace.
  try {
    refuseFlagsNpmTook(io.env ?? process.env, cli);
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
function buildCli(io: ReportIO, result: { status: number }): Command {
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
      '--show-system-prompt',
      "show the tutor's system prompt on the pages (hidden by default: it tells the tutors apart)",
    )
    .option(
      '--update',
      "bring the plan in --out up to date after edits: edited transcripts' rows emptied, new " +
        "ones assigned by the plan's rule, removed ones kept as orphaned, the sheets brought to " +
        'an edited rubric; every other row kept, a sheet losing a cell copied to before-update/',
    )
    .option(
      '--out <dir>',
      "the plan's folder: <scorer>.csv and <scorer>.html",
      DEFAULTS.humanScores,
    )
    .option('--scorer <name>', 'without --scorers: add a scorer column filled with this name')
    .option('--dir <folder>', STUDY_DIR_HELP)
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
    .action((options: SheetOptions, command: Command) => {
      inStudyDir(command, options.dir);
      printSheet(options, command, io);
    });

  cli
    .command('agreement', { isDefault: true })
    .description('the judge against the human scores, per dimension and per model')
    .option(
      '--format <format>',
      'table, markdown, latex (the per-dimension table) or json',
      'table',
    )
    .option('--wide', 'the text tables one per kind, wider than 100 columns')
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
      '--models <file>',
      "models.json: each tutor's family (its entry's family, else its provider), " +
        `for self-preference (default: ${DEFAULTS.models} in --dir, or here, when it exists)`,
    )
    .option(
      '--jury',
      'with several --scores, add the judge "jury": per transcript the median of their scores',
    )
    .option(
      '--gate-judge <name>',
      'with several --scores, --min-kappa gates this judge only (default: every judge given)',
    )
    .option(
      '--margin <kappa>',
      'the non-inferiority margin of the verdicts: as good when the gap to the human ceiling ' +
        'is not below -margin',
      String(DEFAULT_MARGIN),
    )
    .option(
      '--epsilon <share>',
      "the alternative annotator test's epsilon: how much less often the judge may be the " +
        'closer to the other scorers than a scorer is (0.2 experts, 0.15 trained, 0.1 crowd)',
      String(DEFAULT_EPSILON),
    )
    .option(
      '--html <file>',
      'also write the report as one self-contained HTML page, with every transcript',
    )
    .option(
      '--exclude-unsure',
      'leave out of every figure the human rows their scorer marked unsure',
    )
    .option('--dir <folder>', STUDY_DIR_HELP)
    .option(
      '--transcripts <dir>',
      'transcripts folder: for --html, and to find stale human and judge rows',
      DEFAULTS.transcripts,
    )
    .option('--tasks <dir>', 'task files, to find stale judge rows', DEFAULTS.tasks)
    .option(
      '--reference-keys <dir>',
      'reference keys, to find stale judge rows',
      DEFAULTS.referenceKeys,
    )
    .addHelpText(
      'after',
      '\nExit status: 0 the report was printed; 1 the --min-kappa gate failed ' +
        '(the report is printed too); 2 usage error or a file it cannot use.',
    )
    .allowExcessArguments()
    .action((options: AgreementOptions, command: Command) => {
      refuseArguments(command.args, cli, io.env ?? process.env);
      inStudyDir(command, options.dir);
      result.status = printAgreement(options, io);
    });
  addViewCommand(cli, io, result);
  addImportCommand(cli, io);

  // `report.ts --help` is asked of the report: its flags are the default command's
  const agreement = cli.commands.find((command) => command.name() === 'agreement')!;
  cli.addHelpText('after', () => {
    const flags = agreement.helpInformation().replace(/^Usage: .*\n/, '');
    return `\nThe report (agreement, the default command):${flags}\nThe plan: report sheet --help`;
  });

  return cli;
}

type SheetOptions = Omit<PlanOptions, 'scorers'> & {
  scorers?: string;
  scorer?: string;
  update?: boolean;
  dir?: string;
};

/** `sheet`: with --scorers, the plan written to --out; with --update, the plan there brought up to
 * date; without either, the blank sheet on stdout. */
function printSheet(options: SheetOptions, command: Command, io: ReportIO): void {
  if (options.update === true) {
    // The plan's rule is in its plan.json: a flag that would change it is refused, not ignored.
    const ruleFlag = ['scorers', 'scorer', 'sample', 'overlap', 'seed', 'showSystemPrompt'].find(
      (name) => command.getOptionValueSource(name) === 'cli',
    );
    if (ruleFlag !== undefined) {
      throw new EvalInputError(
        `--update keeps the plan's own rule (in its plan.json): ${flagOf(ruleFlag)} cannot ` +
          'change it; ' +
          'plan again in another --out to change it',
      );
    }
    updateScoringPlan(options, io);
    return;
  }
  if (options.scorers !== undefined) {
    if (options.scorer !== undefined) {
      throw new EvalInputError('--scorer and --scorers: give one (--scorers names the plan)');
    }
    writeScoringPlan(Object.assign({}, options, { scorers: options.scorers }), io);
    return;
  }

  const planOnly = ['sample', 'overlap', 'seed', 'out', 'showSystemPrompt'].find((name) => {
    return command.getOptionValueSource(name) === 'cli';
  });
  if (planOnly !== undefined) {
    throw new EvalInputError(`${flagOf(planOnly)} needs --scorers (the plan's scorers)`);
  }
  const transcripts = readTranscripts(options.transcripts);
  const rubric = loadRubric(options.rubric);
  io.stdout.write(scoringSheet(transcripts, rubric, options.scorer));
}

/** An option's flag as typed, from commander's name for it
 * (showSystemPrompt: --show-system-prompt). */
function flagOf(name: string): string {
  return `--${name.replace(/[A-Z]/g, (letter) => `-${letter.toLowerCase()}`)}`;
}

type AgreementOptions = {
  tasks: string;
  referenceKeys: string;
  format: string;
  scores: string[];
  humanScores: string;
  rubric: string;
  log: string[];
  minKappa: string[];
  on?: 'kappa' | 'lower';
  margin: string;
  epsilon: string;
  gateJudge?: string;
  jury?: boolean;
  wide?: boolean;
  models?: string;
  html?: string;
  transcripts: string;
  excludeUnsure?: boolean;
  dir?: string;
};

/** `agreement`: the report on stdout in the format asked for; with --html, the page too. Returns
 * the exit status: 1 when the gate failed, else 0. */
function printAgreement(options: AgreementOptions, io: ReportIO): number {
  // 1. A format it does not know, or judges it cannot tell apart, are refused before anything is
  // read.
  if (!['table', 'markdown', 'latex', 'json'].includes(options.format)) {
    throw new EvalInputError(`--format ${options.format}: use table, markdown, latex or json`);
  }
  if (options.html !== undefined) checkOutputFile(options.html); // a FIFO would hang the write
  const judges = judgeInputs(options.scores, options.log, options.dir);
  if (options.html !== undefined) {
    refuseOverwritingInput(options.html, '--html', reportInputs(options, judges));
  }
  const on = options.on ?? 'kappa';
  const analysisOptions = {
    margin: marginOf(options.margin),
    epsilon: epsilonOf(options.epsilon),
    tutorFamilies: tutorFamilies(options.models, options.dir),
  };
  if (options.on !== undefined && options.minKappa.length === 0) {
    throw new EvalInputError(
      `--on ${options.on} says what --min-kappa checks: give --min-kappa too`,
    );
  }

  // 2. The inputs: the rubric and the gate's thresholds, each judge's rows and audit log, the human
  // rows.
  const rubric = loadRubric(options.rubric);
  const thresholds = gateThresholds(options.minKappa, rubric);
  // A judge row whose inputs were edited since it was judged is left out, and listed.
  const files = {
    transcripts: options.transcripts,
    tasks: options.tasks,
    referenceKeys: options.referenceKeys,
    rubric: options.rubric,
  };
  const runs = judges.map((judge) => {
    const all = readJudgeCsv(judge.scores, rubric);
    const audit = readAuditLog(judge.log, rubric, all);
    const stale = new Set(staleJudgeRows(all, audit, files));
    const rows = all.filter((row) => !stale.has(row));
    return { judge, rows, audit, stale: [...stale].map(pairLabel) };
  });
  const judgeCsvs = judges.map((judge) => judge.scores);
  const checks = { judgeCsvs, transcripts: options.transcripts };
  const read = readHumanScores(options.humanScores, rubric, checks);
  // A scorer's "unsure" counts like any score unless asked otherwise.
  const humans = read.filter((row) => options.excludeUnsure !== true || row.unsure !== true);

  // 3. The analysis of the first judge; with more, every judge on the transcripts all of them
  // scored; with --min-kappa, the gate on the first judge's figures.
  const first = runs[0]!;
  const sample = { read, used: humans };
  const design = samplingDesign(planOf(options.humanScores), populationOf(runs, read));
  const analysed = analyse(first.rows, humans, rubric, analysisAudit(first), analysisOptions);
  const report: FullReport = withTutors(
    analysed,
    compareTutors(first.rows, sample, rubric, design),
  );
  const compared: ComparedRun[] = [...runs];
  if (options.jury === true) {
    if (runs.length < 2) {
      throw new EvalInputError('--jury needs two or more judges: give --scores more than once');
    }
    compared.push(juryOf(runs, rubric));
  }
  if (compared.length > 1) {
    const tutors = { sample, design };
    report.comparison = compareJudges(compared, humans, rubric, analysisOptions, tutors);
  }
  if (thresholds.size > 0) {
    // Every judge given (and the jury) is gated on what its own report says, or the one
    // --gate-judge names.
    const gated = gatedJudges(compared, options.gateJudge).map((run) => {
      if (run === first) {
        return { name: run.judge.name, report };
      }
      const own = analyse(run.rows, humans, rubric, analysisAudit(run), analysisOptions);
      return { name: run.judge.name, report: own };
    });
    report.gate = gate(gated, thresholds, on);
  }

  // 4. The report as aligned tables, as Markdown (the gate's verdict last), or as one JSON object;
  // a failed gate is also one line on stderr, for a CI log. Rows of a mock judge are made up: every
  // format says so first.
  const mocked = mockJudgeWarning(runs);
  if (mocked !== undefined) {
    io.stderr.write(`report: warning: ${mocked}\n`);
  }
  if (options.format === 'json') {
    const json = mocked === undefined ? report : { warning: mocked, ...report };
    io.stdout.write(`${JSON.stringify(json, null, 2)}\n`);
  } else {
    const format = options.format as PrintOptions['format'];
    const printed = formatReport(report, { format, wide: options.wide === true, on });
    io.stdout.write(mocked === undefined ? printed : warnedFirst(printed, mocked, format));
  }
  if (report.gate?.passed === false) {
    io.stderr.write(`report: ${gateVerdict(report.gate, on, compared.length > 1)}\n`);
  }

  // 5. With --html, the page, with every transcript, and where it went.
  if (options.html !== undefined) {
    const transcriptsDir = options.transcripts;
    // The page shows the human rows the figures rest on; the others are listed in its run table.
    const shown = comparableHumanRows(humans, rubric);
    const page = {
      report,
      tutors: report,
      rubric,
      audit: first.audit,
      judged: first.rows,
      humans: shown,
      transcriptsDir,
      warning: mocked,
    };
    writeHtmlPage(options.html, page);
    io.stderr.write(`report: wrote the page to ${options.html}\n`);
  }
  return report.gate?.passed === false ? 1 : 0;
}

/** Which judges' rows a mock judge gave (its notes say so), and how many: undefined when none. */
function mockJudgeWarning(runs: { judge: JudgeInput; rows: ScoreRow[] }[]): string | undefined {
  const mocked: string[] = [];
  for (const run of runs) {
    const count = run.rows.filter((row) => isMockNotes(row.notes)).length;
    if (count > 0) {
      mocked.push(`${count} of the ${run.rows.length} row(s) of judge ${run.judge.name}`);
    }
  }
  if (mocked.length === 0) return undefined;
  return (
    `${mocked.join(', ')} come from a mock judge: made-up scores, not judgements; ` +
    'these figures rehearse the protocol and measure nothing'
  );
}

/** A printed report with a warning before it, in its format's words. */
function warnedFirst(printed: string, warning: string, format: PrintOptions['format']): string {
  if (format === 'markdown') return `> **Warning:** ${oneLine(warning)}\n\n${printed}`;
  if (format === 'latex') {
    return `\\noindent\\textbf{Warning:} ${latexText(oneLine(warning))}\n\n${printed}`;
  }
  return `warning: ${oneLine(warning)}\n\n${printed}`;
}

/** The files the report reads, each with the flag that names it: the page may be none of them. */
function reportInputs(options: AgreementOptions, judges: JudgeInput[]) {
  const inputs = [{ flag: '--rubric', file: options.rubric }];
  for (const judge of judges) {
    inputs.push({ flag: '--scores', file: judge.scores });
    inputs.push({ flag: '--log', file: judge.log });
  }
  inputs.push({ flag: '--human-scores', file: path.join(options.humanScores, 'plan.json') });
  for (const file of sheetsIfListable(options.humanScores)) {
    inputs.push({ flag: '--human-scores', file });
  }
  try {
    for (const ref of readTranscripts(options.transcripts)) {
      inputs.push({ flag: '--transcripts', file: ref.path });
    }
  } catch (error) {
    // no transcripts: the page says so, none is read
    if (!(error instanceof EvalError)) throw error;
  }
  return inputs;
}

/** The judges --min-kappa gates: the one --gate-judge names, else every one given. */
function gatedJudges(runs: ComparedRun[], name: string | undefined): ComparedRun[] {
  if (name === undefined) {
    return runs;
  }
  const named = runs.filter((run) => run.judge.name === name);
  if (named.length === 0) {
    const names = runs.map((run) => run.judge.name).join(', ');
    throw new EvalInputError(
      `--gate-judge ${name}: no judge of that name; the judges are ${names}`,
    );
  }
  return named;
}

/** --margin as a kappa difference: a number from 0 to 2 (kappa runs from -1 to 1). */
function marginOf(value: string): number {
  const margin = value.trim() === '' ? NaN : Number(value);
  if (!Number.isFinite(margin) || margin < 0 || margin > 2) {
    throw new EvalInputError(`--margin ${value}: give a kappa difference from 0 to 2, as 0.1`);
  }
  return margin;
}

/** --epsilon as a share of transcripts: a number from 0 to 1. */
function epsilonOf(value: string): number {
  const epsilon = value.trim() === '' ? NaN : Number(value);
  if (!Number.isFinite(epsilon) || epsilon < 0 || epsilon > 1) {
    throw new EvalInputError(`--epsilon ${value}: give a share from 0 to 1, as 0.15`);
  }
  return epsilon;
}

/** A word on the command line that is no option: a mistyped command (`sheets`), named as such. */
function refuseArguments(args: string[], cli: Command, env: NodeJS.ProcessEnv): void {
  if (args.length === 0) {
    return;
  }
  const known = cli.commands.map((command) => command.name());
  const hint = nearestKeyHint(args[0]!, known);
  const listed = known.map((name) => (name === 'agreement' ? `${name} (the default)` : name));

  // npm takes a flag it knows (--format) without a trace and passes its value on as a word
  const script = env.npm_lifecycle_event;
  const format = ['table', 'markdown', 'latex', 'json'].includes(args[0]!);
  const flags = format ? `--format ${args[0]}` : '<flags>';
  const npm =
    script === undefined
      ? ''
      : `; if npm took a flag before it, put -- before the script's flags: ` +
        `npm run ${script} -- ${flags}`;
  throw new EvalInputError(
    `unknown command "${args[0]}"${hint}; the commands are ${listed.join(', ')}${npm}`,
  );
}

/** Commander's collector of a repeatable option's values. */
function collect(value: string, previous: string[]): string[] {
  return previous.concat([value]);
}

// ---- Judges side by side, and the CI gate -----------------------------------------------------

/** The report, with the comparison of judges (more than one --scores) and the gate
 * (--min-kappa). */
export type FullReport = WithTutors<Report> & { comparison?: JudgeComparison[]; gate?: Gate };

/** plan.json beside the human scores, when they are a folder holding one. */
function planOf(humanScores: string): PlanManifest | undefined {
  const file = path.join(humanScores, PLAN_FILE);
  if (!fs.existsSync(file) || !fs.statSync(humanScores).isDirectory()) {
    return undefined;
  }
  return loadPlanManifest(file);
}

/** Every transcript judged or given to people: the sample's population. */
function populationOf(runs: JudgeRun[], humans: HumanRow[]): { task_id: string; model: string }[] {
  const all = new Map<string, { task_id: string; model: string }>();
  for (const row of [...runs.flatMap((run) => run.rows), ...humans]) {
    all.set(pairKey(row.task_id, row.model), { task_id: row.task_id, model: row.model });
  }
  return [...all.values()];
}

export type JudgeComparison = ReturnType<typeof compareJudges>[number];

/** A judge compared: one given by --scores, or the jury of those (`members`, in the order
 * given). */
type ComparedRun = JudgeRun & { members?: JudgeRun[]; stale?: string[] };

/** The jury of the judges given (--jury): per transcript they all scored and dimension, the median
 * of their scores (of an even count the lower middle one). */
export function juryOf(runs: JudgeRun[], rubric: Rubric): ComparedRun {
  const names = runs.map((run) => run.judge.name);
  if (names.includes('jury')) {
    throw new EvalInputError(
      '--jury adds a judge named "jury": name the judge of --scores otherwise',
    );
  }
  const rows = juryRows(
    runs.map((run) => run.rows),
    rubric,
  ).map((row) => ({ ...row, notes: '' }));
  return { judge: { name: 'jury', scores: '', log: '' }, rows, audit: noAudit(), members: runs };
}

/** Every judge on the same transcripts: those all of them scored and people scored completely (and
 * not stale: the transcript unchanged since). */
export function compareJudges(
  runs: ComparedRun[],
  humans: HumanRow[],
  rubric: Rubric,
  options: AnalysisOptions = { margin: DEFAULT_MARGIN },
  tutors?: { sample: HumanSample; design: SamplingDesign },
) {
  // 1. The transcripts compared.
  const keyOf = (row: { task_id: string; model: string }) => pairKey(row.task_id, row.model);
  const complete = comparableHumanRows(humans, rubric);
  let common = new Set(complete.map(keyOf));
  for (const run of runs) {
    const scored = new Set(run.rows.map(keyOf));
    common = new Set([...common].filter((key) => scored.has(key)));
  }
  const humansCompared = complete.filter((row) => common.has(keyOf(row)));

  // 2. Each judge's figures on them, against the first judge's on the same resamples, and what a
  // transcript cost it.
  const rowsOf = runs.map((run) => run.rows.filter((row) => common.has(keyOf(row))));
  const againstFirst = judgesAgainstEachOther(rowsOf, humansCompared, rubric);
  return runs.map((run, j) => {
    const rows = rowsOf[j]!;
    const report = analyse(rows, humansCompared, rubric, analysisAudit(run, common), options);
    const dimensions = report.dimensions.map((dimension, d) => {
      const vsFirst = againstFirst[j]![d]!;
      return {
        name: dimension.name,
        n: dimension.judge_vs_human.n,
        ceiling_n: dimension.human_vs_human?.n ?? 0,
        kappa: dimension.judge_vs_human.kappa,
        kappa_ci95: dimension.judge_vs_human.kappa_ci95,
        gap_to_ceiling: dimension.gap_to_ceiling,
        alt_test: dimension.alt_test,
        leniency: dimension.leniency,
        self_consistency: dimension.self_consistency,
        kappa_diff_from_first: vsFirst.kappa_diff_from_first,
        agreement_with_first: vsFirst.agreement_with_first,
      };
    });
    const entry = {
      name: run.judge.name,
      scores: run.members === undefined ? run.judge.scores : null,
      log: run.members === undefined ? run.judge.log : null,
      n_transcripts: common.size,
      scope: report.scope,
      cost_usd_per_transcript: costPerTranscript(run, common),
      dimensions,
      self_preference: report.self_preference,
      // The tutors as this judge and the people's sample estimate them: on all its rows.
      tutors: tutorsOf(run.rows, rubric, tutors),
      alt_test_all: report.alt_test_all,
    };
    if (run.members === undefined) {
      return entry;
    }
    return Object.assign(entry, { members: run.members.map((member) => member.judge.name) });
  });
}

/** A judge's estimates of the tutors, over every row it scored; none without the sample. */
function tutorsOf(
  rows: JudgeRun['rows'],
  rubric: Rubric,
  tutors: { sample: HumanSample; design: SamplingDesign } | undefined,
): JudgeTutors | undefined {
  if (tutors === undefined) {
    return undefined;
  }
  return judgeTutors(compareTutors(rows, tutors.sample, rubric, tutors.design));
}

/** The mean cost of the rows' last scored entries; null when any is unknown, or there are none.
 * A jury's is the sum of its members'. */
function costPerTranscript(run: ComparedRun, keys: Set<string>): number | null {
  if (run.members !== undefined) {
    const costs = run.members.map((member) => costPerTranscript(member, keys));
    return costs.includes(null) ? null : costs.reduce((total, cost) => total! + cost!, 0);
  }
  let total = 0;
  for (const key of keys) {
    const cost = run.audit.rows.get(key)?.cost_usd ?? null;
    if (cost === null) {
      return null;
    }
    total += cost;
  }
  return keys.size === 0 ? null : total / keys.size;
}

/** What the analysis reads of the log: rows per judge (a plain object built from the Map, so any
 * name is an own key) and the samples of the rows in `keys` (all rows without); a stale row's
 * samples are left out with the row. */
export function analysisAudit(run: ComparedRun, keys?: Set<string>): AnalysisAudit {
  const judged = judgedKeys(run, keys);
  const samples: Scores[][] = [];
  for (const [key, row] of run.audit.rows) {
    if (row.samples.length > 1 && judged.has(key)) {
      samples.push(row.samples);
    }
  }
  const judges = Object.fromEntries(run.audit.rows_by_judge);
  return { judges, samples, family: judgeFamily(run, keys), stale_judge: run.stale ?? [] };
}

/** A judge's family: the one most of its rows' answers record (the first seen of a tie; stale rows
 * not counted); a jury's the one all its members share; null when the log does not say, or a
 * jury's members differ. */
function judgeFamily(run: ComparedRun, keys?: Set<string>): string | null {
  if (run.members !== undefined) {
    const families = new Set(run.members.map((member) => judgeFamily(member, keys)));
    return families.size === 1 ? [...families][0]! : null;
  }
  const judged = judgedKeys(run, keys);
  const counts = new Map<string, number>();
  for (const [key, row] of run.audit.rows) {
    if (row.family !== null && judged.has(key)) {
      counts.set(row.family, (counts.get(row.family) ?? 0) + 1);
    }
  }
  let family: string | null = null;
  for (const [name, count] of counts) {
    if (family === null || count > counts.get(family)!) {
      family = name;
    }
  }
  return family;
}

/** The run's rows the figures rest on (its stale rows are not among them), those in `keys` when
 * given, as pairKeys. */
function judgedKeys(run: ComparedRun, keys?: Set<string>): Set<string> {
  const all = run.rows.map((row) => pairKey(row.task_id, row.model));
  return new Set(all.filter((key) => keys === undefined || keys.has(key)));
}

/** Each tutor's family, from the `models` entries of models.json: its `family`, else its
 * `provider`. Without --models, the study's models.json (under --dir, else here) when it exists;
 * without either there are none (and no self-preference); a file --models names must exist. */
function tutorFamilies(named: string | undefined, dir: string | undefined): Map<string, string> {
  const families = new Map<string, string>();
  const file = named ?? path.join(dir ?? '.', DEFAULTS.models);
  if (named === undefined && !fs.existsSync(file)) {
    return families;
  }
  for (const entry of loadModelsConfig(file).models ?? []) {
    if (typeof entry !== 'object' || entry === null) {
      continue;
    }
    const model = entry as { name?: unknown; family?: unknown; provider?: unknown };
    const family = typeof model.family === 'string' ? model.family : model.provider;
    if (typeof model.name === 'string' && typeof family === 'string') {
      families.set(model.name, family);
    }
  }
  return families;
}

/** The CI gate's outcome: the dimensions whose figure is below its threshold, or unknown, each
 * with the judge it is of. */
export type Gate = {
  passed: boolean;
  failures: { judge: string; dimension: string; figure: number | null; threshold: number }[];
};

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
        `--min-kappa ${value}: "${figure}" is not a kappa between -1 and 1 ` +
          '(write 0.6, or dimension=0.6)',
      );
    }
    if (dimension !== undefined && !known.includes(dimension)) {
      throw new EvalInputError(
        `--min-kappa ${value}: no dimension "${dimension}" in the rubric; ` +
          `its dimensions are ${known.join(', ')}`,
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

/** Each dimension with a threshold against each gated judge's kappa (or its interval's lower
 * end). */
export function gate(
  judges: { name: string; report: Report }[],
  thresholds: Map<string, number>,
  on: 'kappa' | 'lower',
): Gate {
  const failures: Gate['failures'] = [];
  for (const judge of judges) {
    for (const dimension of judge.report.dimensions) {
      const threshold = thresholds.get(dimension.name);
      if (threshold === undefined) {
        continue;
      }
      const figures = dimension.judge_vs_human;
      const figure = on === 'lower' ? (figures.kappa_ci95?.[0] ?? null) : figures.kappa;
      // Within 1e-9 of it is at it: floating-point noise must not fail a kappa that equals it.
      if (figure === null || figure < threshold - 1e-9) {
        failures.push({ judge: judge.name, dimension: dimension.name, figure, threshold });
      }
    }
  }
  return { passed: failures.length === 0, failures };
}

/** The gate's verdict in one line, each failure with its figure and threshold. */
export function gateVerdict(result: Gate, on: 'kappa' | 'lower', named = false): string {
  const what = on === 'lower' ? "kappa's 95% CI lower end" : 'kappa';
  if (result.passed) {
    return `gate passed: ${what} at or above its threshold on every dimension checked`;
  }
  const failures = result.failures.map((failure) => {
    // Six decimals at most, trailing zeros dropped: 0.79963 must not print as its threshold 0.8.
    const figure = failure.figure === null ? 'unknown' : String(Number(failure.figure.toFixed(6)));
    const failed = `${failure.dimension} ${what} ${figure} (threshold ${failure.threshold})`;
    // The judge named where several were given: one judge's line stays as it was.
    return named ? `${failure.judge} ${failed}` : failed;
  });
  return `gate failed: ${failures.join('; ')}`;
}

// ---- Formatting: aligned text and Markdown (the JSON is the report itself) ---------------------

/** How the report is printed: aligned text, Markdown, or the per-dimension table as LaTeX. */
export type PrintOptions = {
  format: 'table' | 'markdown' | 'latex';
  wide: boolean;
  on: 'kappa' | 'lower';
};

/** The report's tables, aligned as text (each within 100 columns unless wide) or as
 * GitHub-flavoured Markdown (for a CI job summary); the notes under them; then self-preference and
 * the judges against each other, and the gate's verdict last. LaTeX: the per-dimension table
 * alone. */
export function formatReport(report: FullReport, options: PrintOptions): string {
  const cells = reportCells(report, options.wide);
  const names = report.dimensions.map((dimension) => dimension.name);
  const tutors = tutorTables(report, names, options.wide || options.format === 'latex');
  if (options.format === 'latex') {
    const judge = latexTable(cells.tables, [...cells.verdicts, ...cells.notes]);
    // A tutor's name may hold a newline: each cell one line, as a note is.
    const rows = tutors.tables[0]!.rows.map((row) => row.map(oneLine));
    return judge + latexTabular(rows, tutors.notes);
  }
  const table = options.format === 'markdown' ? markdownTable : alignedTable;
  const titled = (title: string, rows: string[][]) => `${title}:\n${table(rows)}`;
  const parts = [cells.summary];
  if (cells.verdicts.length > 0) {
    const markdown = options.format === 'markdown';
    parts.push(markdown ? verdictMarkdown(report).join('\n') : cells.verdicts.join('\n'));
  }
  const altTestAll = altTestAllWords(report.alt_test_all);
  if (altTestAll !== null) {
    parts.push(wrapped(altTestAll.split(' '), ' ', 100));
  }
  // The tutors' section opens with their estimates from the judge and the people's sample.
  const tutorsAt = cells.tables.findIndex((cellTable) => cellTable.title.startsWith('the tutors'));
  const tables = [...cells.tables];
  tables.splice(tutorsAt < 0 ? tables.length : tutorsAt, 0, ...tutors.tables);
  for (const cellTable of tables) {
    parts.push(titled(cellTable.title, cellTable.rows));
  }
  parts.push(tutors.notes.map(oneLine).join('\n'));
  if (report.self_preference !== null) {
    const title = `self-preference of the judge (family ${report.self_preference.family})`;
    const table = titled(title, selfPreferenceCells(report.self_preference));
    parts.push(table + selfPreferenceNotes(report.self_preference));
  }
  if (report.comparison !== undefined) {
    parts.push(
      ...comparisonTables(report.comparison, options.wide).map((t) => titled(t.title, t.rows)),
    );
    const gains = judgeGainTable(report.comparison, names);
    if (gains !== null) {
      parts.push(`${titled(gains.table.title, gains.table.rows)}\n${gains.line}`);
    }
  }
  // a note may quote a tutor's or a scorer's name: its control characters escaped
  parts.push(cells.notes.map(oneLine).join('\n'));
  if (report.gate !== undefined) {
    parts.push(gateVerdict(report.gate, options.on, report.comparison !== undefined));
  }
  return `${parts.join('\n\n')}\n`;
}

/** Self-preference per dimension: leniency on the judge's own family's tutors and on the rest,
 * own minus other with its interval, "favours own" after it when the interval is above 0. */
function selfPreferenceCells(preference: NonNullable<Report['self_preference']>): string[][] {
  const header = [
    'dimension',
    'own n',
    'other n',
    'tutors',
    'own',
    'other',
    'own - other [95% CI]',
  ];
  const rows = preference.dimensions.map((dimension) => {
    const reading = dimension.verdict === 'favours_own' ? ' favours own' : '';
    const diff = estimate(
      dimension.diff,
      dimension.ci95,
      Math.min(dimension.own_n, dimension.other_n),
    );
    return [
      dimension.name,
      String(dimension.own_n),
      String(dimension.other_n),
      `${dimension.own_tutors} / ${dimension.other_tutors}`,
      figure(dimension.own_leniency),
      figure(dimension.other_leniency),
      diff + reading,
    ];
  });
  return [header, ...rows];
}

/** Under the self-preference table: what its columns are, how its interval is had, and why a
 * verdict is undetermined. */
function selfPreferenceNotes(preference: NonNullable<Report['self_preference']>): string {
  const text =
    "own, other: the judge's leniency on its own family's tutors and on the others'; tutors: " +
    "own / other; the interval has the tutor as its unit (Welch's t over the tutors' " +
    'leniency), "favours own" when it is above 0';
  const lines = [wrapped(text.split(' '), ' ', 100)];
  const reasons = new Set(preference.dimensions.map((dimension) => dimension.reason));
  for (const reason of reasons) {
    if (reason !== null) {
      lines.push(wrapped(`undetermined: ${reason}`.split(' '), ' ', 100));
    }
  }
  return `\n${lines.join('\n')}`;
}

/** The judges compared: their files and cost, then per dimension against the people and against
 * the first judge (one table of every dimension when wide). */
function comparisonTables(comparison: JudgeComparison[], wide: boolean): CellTable[] {
  const n = comparison[0]?.n_transcripts ?? 0;
  const scope = comparison[0]?.scope;
  const people = scope === undefined ? 'people' : namesInWords(scope.scorers);
  const double = scope === undefined ? 0 : scope.ceiling.transcripts;
  const judges = comparison.map((judge) => {
    const members = 'members' in judge ? (judge.members as string[]).join(', ') : '-';
    const cost = judge.cost_usd_per_transcript;
    return [judge.name, members, cost === null ? 'unknown' : `$${cost.toFixed(4)}`];
  });
  const tables: CellTable[] = [
    {
      title:
        `judges side by side, on the ${n} transcript(s) all of them and ${people} scored ` +
        `(${double} by two or more)`,
      rows: [['judge', 'members', 'cost per transcript'], ...judges],
    },
  ];
  const header = [
    'judge',
    'kappa [95% CI]',
    'gap [95% CI]',
    'verdict',
    'leniency [95% CI]',
    'alt-test',
    "minus first's [95% CI]",
    'with first: kappa / exact',
    'samples',
  ];
  const perDimension = (comparison[0]?.dimensions ?? []).map((dimension, i) => {
    const rows = comparison.map((judge) => comparisonRow(judge, i));
    return { name: dimension.name, rows };
  });
  if (wide) {
    const rows = perDimension.flatMap((dimension) =>
      dimension.rows.map((row) => [dimension.name, ...row]),
    );
    tables.push({ title: 'the judges per dimension', rows: [['dimension', ...header], ...rows] });
    return tables;
  }
  // Narrow: against the people, and against the first judge, each a table a dimension.
  for (const dimension of perDimension) {
    tables.push({
      title: `the judges on ${dimension.name}`,
      rows: [header.slice(0, 5), ...dimension.rows.map((row) => row.slice(0, 5))],
    });
    tables.push({
      title: `the judges on ${dimension.name}, against the first and themselves`,
      rows: [
        [header[0]!, ...header.slice(5)],
        ...dimension.rows.map((row) => [row[0]!, ...row.slice(5)]),
      ],
    });
  }
  return tables;
}

/** One judge's cells on one dimension of the comparison. */
function comparisonRow(judge: JudgeComparison, i: number): string[] {
  const figures = judge.dimensions[i]!;
  const gap = figures.gap_to_ceiling;
  const samples = figures.self_consistency;
  const diff = figures.kappa_diff_from_first;
  const withFirst = figures.agreement_with_first;
  const leniency = figures.leniency;
  const reading = leniency.reading === null ? '' : ` ${leniency.reading}`;
  let first = '-';
  if (withFirst !== null) {
    const kappa = estimate(withFirst.kappa, withFirst.kappa_ci95, withFirst.n);
    first = `${kappa} / ${figure(withFirst.exact)}`;
  }
  return [
    judge.name,
    estimate(figures.kappa, figures.kappa_ci95, figures.n),
    gap === null ? '-' : estimate(gap.kappa_diff, gap.ci95, figures.ceiling_n),
    gap === null ? '-' : verdictWords(gap),
    estimate(leniency.mean_diff, leniency.ci95, figures.n) + reading,
    altTestWords(figures.alt_test),
    diff === null ? '-' : estimate(diff.kappa_diff, diff.ci95, figures.n),
    first,
    samples === null ? '-' : `${figure(samples.unanimous)} / ${figure(samples.mean_range)}`,
  ];
}

/** The per-dimension tables as one booktabs `tabular` a methods section can include (the judge's
 * columns, the ceiling's, then the alternative annotator test's), its notes as LaTeX comments. */
function latexTable(tables: CellTable[], notes: string[]): string {
  const judge = tables[0]!.rows;
  const ceiling = tables[1]!.rows;
  const altTest = tables[2]!.rows;
  const rows = judge.map((row, i) => {
    return [...row, ...ceiling[i]!.slice(1), ...altTest[i]!.slice(1)];
  });
  return latexTabular(rows, notes);
}

/** Rows of cells (the header first) as a booktabs `tabular`, the notes as LaTeX comments above. */
function latexTabular(rows: string[][], notes: string[]): string {
  // A column of plain numbers is set right, any other left.
  const numeric = (i: number) => rows.slice(1).every((row) => /^[\d.-]+$/.test(row[i]!));
  const columns = rows[0]!.map((_, i) => (numeric(i) ? 'r' : 'l')).join('');
  const line = (row: string[]) => `${row.map(latexText).join(' & ')} \\\\`;
  const body = [
    `\\begin{tabular}{${columns}}`,
    '\\toprule',
    line(rows[0]!),
    '\\midrule',
    ...rows.slice(1).map(line),
    '\\bottomrule',
    '\\end{tabular}',
  ];
  // one comment line a note, whatever a name in it holds: a newline would start a live line
  const comments = notes.map((note) => `% ${oneLine(note)}`);
  return `${[...comments, ...body].join('\n')}\n`;
}

/** Text as LaTeX: its special characters escaped, a number's minus sign as math (a hyphen
 * otherwise), the marks as math superscripts. */
function latexText(text: string): string {
  const escaped = text.replace(/[\\{}&%$#_^~]/g, (char) => {
    const named: Record<string, string> = {
      '\\': '\\textbackslash{}',
      '~': '\\textasciitilde{}',
      '^': '\\textasciicircum{}',
    };
    return named[char] ?? `\\${char}`;
  });
  return escaped
    .replace(/(^|[^\w.])-(?=\.?\d)/g, '$1$-$')
    .replace(/†/g, '$^\\dagger$')
    .replace(
      new RegExp(`[${SUPERSCRIPT_DIGITS}]+`, 'g'),
      (marks) => `$^{${[...marks].map((mark) => SUPERSCRIPT_DIGITS.indexOf(mark)).join('')}}$`,
    );
}

/** Rows of cells (the header first) in columns as wide as their widest cell, two spaces apart. */
function alignedTable(rows: string[][]): string {
  const header = rows[0] ?? [];
  const printable = rows.map((row) => row.map(oneLine)); // a name's control characters escaped
  const widths = header.map((_, i) => Math.max(...printable.map((row) => row[i]!.length)));
  const lines = printable.map((row) => {
    const padded = row.map((cell, i) => cell.padEnd(widths[i]!));
    return padded.join('  ').trimEnd();
  });
  return lines.join('\n');
}

/** Rows of cells (the header first) as a GitHub-flavoured Markdown table. */
function markdownTable(rows: string[][]): string {
  const header = rows[0] ?? [];
  const lines = [header, header.map(() => '---'), ...rows.slice(1)];
  // A cell's control characters escaped, and its pipes, which would end the cell.
  const cell = (text: string) => oneLine(text).replaceAll('|', '\\|');
  return lines.map((row) => `| ${row.map(cell).join(' | ')} |`).join('\n');
}

// Last, so that everything above is defined before the command runs.
if (isEntryModule(import.meta.url)) {
  guardOutputStreams('report', process);
  main(process.argv.slice(2), process).then((code) => {
    process.exitCode = code;
  });
}
