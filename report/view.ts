// report/view.ts: `report.ts view`, every judge run of a study on one page: the runs (one a judge
// CSV and its audit log in the scores folder) with their judges, time, rows, failures, cost and
// settings; per transcript, the transcript, the prompt, each run's answers and the people's scores;
// filters, and two runs side by side. Served on 127.0.0.1 (read afresh at each load) or written as
// one self-contained page. The data rides as JSON with `<` escaped; the page's script
// (report/pages/view.js) sets every text as text, and the page's policy runs no other script.
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import type { Command } from 'commander';
import type * as Zod from 'zod';
import {
  AuditLineSchema,
  DEFAULTS,
  EvalError,
  EvalInputError,
  allowedScores,
  buildJudgePrompt,
  checkOutputFile,
  comparePairs,
  compareText,
  defaultLog,
  inStudyDir,
  loadModelsConfig,
  loadRubric,
  loadTaskFiles,
  loadTranscript,
  pairKey,
  readHumanScores,
  readJudgeCsv,
  refuseOverwritingInput,
  replaceFileDurably,
  sha256,
  STUDY_DIR_HELP,
  transcriptImages,
  writablePath,
  z,
} from '../run-judge.ts';
import type { HumanRow, IO, Rubric, ScoreRow, TranscriptRef } from '../run-judge.ts';
import { escapeHtml } from './html-escape.ts';
import {
  auditEntries,
  listedTranscripts,
  noAudit,
  readAuditLog,
  staleJudgeRows,
} from './inputs.ts';
import type { Audit, InputFiles } from './inputs.ts';
import { pageScript } from './page-script.ts';
import type { PageTurn } from './scoring-page.ts';
import { transcriptTurns } from './sheet.ts';

/** Where the viewer reads the study: the scores folder's runs and every input of their prompts. */
export type ViewOptions = {
  /** The folder of the judge CSVs and their audit logs; default evals/scores of --dir. */
  scoresDir?: string;
  dir?: string;
  transcripts: string;
  tasks: string;
  referenceKeys: string;
  rubric: string;
  humanScores: string;
  models: string;
};

/** Everything the page shows; the script reads it from the page's JSON. */
export type ViewData = {
  study: string;
  scores_dir: string;
  dimensions: { name: string; description: string; labels: number[] }[];
  runs: ViewRun[];
  transcripts: ViewTranscript[];
  /** What could not be read, and so is not shown (a run's files, the human scores). */
  notes: string[];
};

/** One run: a judge CSV and its audit log (either may be missing), and what they record. */
export type ViewRun = {
  name: string;
  scores: string | null;
  log: string | null;
  /** Each judge that gave a row's scores, with its rows and those as a fallback. */
  judges: { name: string; rows: number; fallback_rows: number }[];
  families: string[];
  first: string | null;
  last: string | null;
  /** Distinct run ids in the log: each start of run-judge on it. */
  sessions: number;
  rows: number;
  stale: number;
  /** Transcripts without a row whose last entry failed. */
  failed: number;
  fallbacks: number;
  cost_usd: number | null;
  /** The sample counts of its rows (--samples k), each once. */
  samples: number[];
  /** Answers whose thinking the log kept, and answers with redacted thinking. */
  thinking_answers: number;
  redacted_thinking_answers: number;
  /** Each judge's request settings as models.json gives them now: the log does not record them. */
  settings: { judge: string; text: string }[];
  results: ViewResult[];
};

/** A run's outcome for one transcript (`t`: its index in `transcripts`). */
export type ViewResult = {
  t: number;
  /** `no row`: scored in the log, its row since removed from the CSV. */
  status: 'scored' | 'failed' | 'no row';
  scores: Record<string, number> | null;
  notes: string;
  stale: boolean;
  judge: string | null;
  fallback: boolean;
  timestamp: string | null;
  cost_usd: number | null;
  /** Every audit line of the transcript, oldest first. */
  entries: ViewEntry[];
};

/** One audit line of a transcript, as the viewer shows it. */
export type ViewEntry = {
  line: number;
  run_id: string | null;
  timestamp: string | null;
  status: string | null;
  judge: string | null;
  scores: Record<string, number> | null;
  notes: string | null;
  error: string | null;
  cost_usd: number | null;
  /** The sha256 of the prompt sent, as the log recorded it. */
  prompt_sha256: string | null;
  sample_scores: Record<string, number>[];
  attempts: {
    judge: string | null;
    error: string;
    status: number | null;
    message: string;
    raw_text: string | null;
  }[];
  answers: {
    judge: string | null;
    model: string | null;
    provider: string | null;
    family: string | null;
    text: string;
    thinking: string | null;
    redacted_thinking: number;
    stop_reason: string | null;
    request_id: string | null;
    latency_ms: number | null;
    scores: Record<string, number> | null;
  }[];
};

/** One transcript: its text as the scoring page shows it, its prompt, and the people's rows. */
export type ViewTranscript = {
  model: string;
  task_id: string;
  turns: PageTurn[] | null;
  /** Why the transcript is not shown, when it is not. */
  unavailable: string | null;
  prompt: string | null;
  /** How the prompt was had, or why it is not shown. */
  prompt_note: string;
  prompt_sha256: string | null;
  humans: {
    scorer: string;
    scores: Record<string, number>;
    notes: string;
    unsure: boolean;
    stale: boolean;
  }[];
};

/** A run's files: its CSV and its log, either absent. */
type RunFiles = { name: string; scores: string | null; log: string | null };

// ---- The command --------------------------------------------------------------------------------

/** `view`'s flags: where to serve or write the page, and the study's paths. */
type ViewCliOptions = ViewOptions & { port?: string; out?: string };

/** Adds `view` to the report's commands; its action puts the exit status in `result`. */
export function addViewCommand(
  cli: Command,
  io: Pick<IO, 'stdout' | 'stderr'>,
  result: { status: number },
): void {
  cli
    .command('view')
    .description(
      'every judge run of the study on one page: the runs, each transcript with its prompt, ' +
        "answers and the people's scores, two runs side by side; served on 127.0.0.1, or written",
    )
    .option('--port <n>', 'serve on this port of 127.0.0.1 (default: any free one)')
    .option('--out <file>', 'write the page to this file (self-contained) instead of serving it')
    .option('--dir <folder>', STUDY_DIR_HELP)
    .option(
      '--scores-dir <folder>',
      'the judge CSVs and their audit logs, each pair a run ' +
        `(default: ${path.dirname(DEFAULTS.output)} in --dir, or here)`,
    )
    .option(
      '--transcripts <dir>',
      'transcripts folder: {model}/{task_id}.json',
      DEFAULTS.transcripts,
    )
    .option('--tasks <dir>', 'task files, to rebuild the prompts', DEFAULTS.tasks)
    .option(
      '--reference-keys <dir>',
      'reference keys, to rebuild the prompts',
      DEFAULTS.referenceKeys,
    )
    .option('--rubric <file>', 'rubric', DEFAULTS.rubric)
    .option(
      '--human-scores <path>',
      "the people's scores: a folder of sheets or one CSV (shown when present)",
      DEFAULTS.humanScores,
    )
    .option('--models <file>', "models.json, for the judges' settings", DEFAULTS.models)
    .addHelpText(
      'after',
      '\nServed, the page reads the study again at each load; Ctrl-C stops the server.\n' +
        'Exit status: 0 served and stopped, or written; 2 usage error or a file it cannot use.',
    )
    .action(async (options: ViewCliOptions, command: Command) => {
      inStudyDir(command, options.dir);
      result.status = await runView(options, io, untilStopped);
    });
}

/** `view`: the page written to --out, or served until `stopped` resolves. */
export async function runView(
  options: ViewCliOptions,
  io: Pick<IO, 'stdout' | 'stderr'>,
  stopped: () => Promise<void>,
): Promise<number> {
  // 1. The flags, and the study read once: a study that cannot be read fails here.
  if (options.out !== undefined && options.port !== undefined) {
    throw new EvalInputError('--out writes the page, --port serves it: give one of them');
  }
  const port = parsePort(options.port);
  const data = readView(options, loadRubric(options.rubric));
  for (const note of data.notes) {
    io.stderr.write(`view: ${note}\n`);
  }
  const what = `${data.runs.length} run(s), ${data.transcripts.length} transcript(s)`;

  // 2. Written, or served until stopped.
  if (options.out !== undefined) {
    writeView(options.out, options, data);
    io.stderr.write(`view: wrote ${what} to ${options.out}\n`);
    return 0;
  }
  const page = () => viewPage(readView(options, loadRubric(options.rubric)));
  const server = await serveView(port, page, (message) => io.stderr.write(`view: ${message}\n`));
  io.stdout.write(`view: ${what} of ${data.study} at ${server.url} (Ctrl-C stops it)\n`);
  await stopped();
  await server.close();
  io.stderr.write('view: stopped\n');
  return 0;
}

/** Resolves at the first SIGINT or SIGTERM: the way a server is stopped. */
function untilStopped(): Promise<void> {
  return new Promise((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolve();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
}

// ---- Reading the study -------------------------------------------------------------------------

/** The study as the page shows it: every run of the scores folder and every transcript of them. */
export function readView(options: ViewOptions, rubric: Rubric): ViewData {
  // 1. The runs, each read on its own: one that cannot be read is a note, the others are shown.
  const notes: string[] = [];
  const files: InputFiles = {
    transcripts: options.transcripts,
    tasks: options.tasks,
    referenceKeys: options.referenceKeys,
    rubric: options.rubric,
  };
  const settings = modelsSettings(options.models, notes);
  const read: { files: RunFiles; run: RunRead }[] = [];
  for (const run of runFiles(scoresDirOf(options), options.dir)) {
    try {
      read.push({ files: run, run: readRun(run, rubric, files) });
    } catch (error) {
      if (!(error instanceof EvalError)) throw error;
      notes.push(`run ${run.name} not shown: ${error.message}`);
    }
  }

  // 2. The people's rows, when there are sheets.
  const humans = humanRows(options, rubric, notes);

  // 3. Every transcript a run or a person scored, or the folder holds, in the one pair order.
  const listed = listedTranscripts(options.transcripts);
  const pairs = new Map<string, { model: string; task_id: string }>();
  const rows = [...read.flatMap((one) => one.run.pairs), ...humans, ...listed.refs.values()];
  for (const row of rows) {
    pairs.set(pairKey(row.task_id, row.model), { model: row.model, task_id: row.task_id });
  }
  const sorted = [...pairs.values()].sort(comparePairs);
  const index = new Map(sorted.map((pair, i) => [pairKey(pair.task_id, pair.model), i]));
  const prompts = new PromptBuilder(files, rubric);
  const humansOf = new Map<string, HumanRow[]>();
  for (const row of humans) {
    const key = pairKey(row.task_id, row.model);
    humansOf.set(key, [...(humansOf.get(key) ?? []), row]);
  }
  const transcripts = sorted.map((pair) => {
    const key = pairKey(pair.task_id, pair.model);
    const own = humansOf.get(key) ?? [];
    return viewTranscript(pair, listed.refs.get(key), listed.missing(pair), prompts, own);
  });

  return {
    study: path.resolve(options.dir ?? '.'),
    scores_dir: scoresDirOf(options),
    dimensions: rubric.dimensions.map((dimension) => ({
      name: dimension.name,
      description: dimension.description,
      labels: allowedScores(dimension),
    })),
    runs: read.map((one) => viewRun(one.files, one.run, index, settings)),
    transcripts,
    notes,
  };
}

/** The scores folder: --scores-dir, else the study's (the folder of the default judge CSV). */
function scoresDirOf(options: ViewOptions): string {
  return options.scoresDir ?? path.join(options.dir ?? '.', path.dirname(DEFAULTS.output));
}

/**
 * The runs of a scores folder: each judge CSV with its audit log (the one run-judge writes beside
 * it: judge_log.jsonl for the default CSV, else the CSV's stem), then each log no CSV claims.
 */
export function runFiles(scoresDir: string, dir = '.'): RunFiles[] {
  let names: string[];
  try {
    names = fs.readdirSync(scoresDir).sort(compareText);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reason = code === 'ENOENT' ? 'no such folder' : `cannot be read (${code})`;
    throw new EvalInputError(
      `${scoresDir}: ${reason}; give the folder of the judge CSVs and their audit logs ` +
        '(--scores-dir, or --dir STUDY for STUDY/evals/scores)',
      { cause: error },
    );
  }
  const isFile = (name: string) => fs.statSync(path.join(scoresDir, name)).isFile();
  const csvs = names.filter((name) => name.endsWith('.csv') && isFile(name));
  const logs = new Set(names.filter((name) => name.endsWith('.jsonl') && isFile(name)));

  const runs: RunFiles[] = [];
  for (const csv of csvs) {
    const scores = path.join(scoresDir, csv);
    const log = defaultLog(scores, dir);
    const own = path.dirname(log) === path.dirname(scores) && logs.delete(path.basename(log));
    runs.push({ name: csv.slice(0, -'.csv'.length), scores, log: own ? log : null });
  }
  for (const log of logs) {
    runs.push({
      name: log.slice(0, -'.jsonl'.length),
      scores: null,
      log: path.join(scoresDir, log),
    });
  }
  return runs;
}

/** An audit line as the viewer reads it: run-judge's AuditLineSchema, every field but the pair
 * optional (logs written before a field existed), a null thinking none. */
const answerLine = AuditLineSchema.shape.answers.element;
const ViewLineSchema = AuditLineSchema.extend({
  attempts: z.array(AuditLineSchema.shape.attempts.element.partial()),
  answers: z.array(answerLine.extend({ thinking: answerLine.shape.thinking.nullable() }).partial()),
})
  .partial()
  .required({ task_id: true, model: true });

type ViewLine = Zod.infer<typeof ViewLineSchema>;

/** What one run's files hold: its rows (the CSV's, else the log's scored entries), log and audit. */
type RunRead = {
  rows: ScoreRow[];
  stale: Set<ScoreRow>;
  lines: { entry: ViewLine; line: number }[];
  audit: Audit;
  pairs: { model: string; task_id: string }[];
};

/** Reads one run: the CSV's rows (checked against the rubric), its log, which rows are stale. */
function readRun(run: RunFiles, rubric: Rubric, files: InputFiles): RunRead {
  const csvRows = run.scores === null ? undefined : readJudgeCsv(run.scores, rubric);
  const lines = run.log === null ? [] : auditEntries(run.log, ViewLineSchema);
  const audit = run.log === null ? noAudit() : readAuditLog(run.log, rubric, csvRows);

  // Without a CSV, the rows are the log's: each transcript's last scored entry.
  let rows = csvRows;
  if (rows === undefined) {
    const last = new Map<string, ScoreRow>();
    for (const { entry } of lines) {
      if (entry.status === 'scored' && entry.scores !== undefined) {
        const row = {
          task_id: entry.task_id,
          model: entry.model,
          scores: entry.scores,
          notes: entry.notes ?? '',
        };
        last.set(pairKey(entry.task_id, entry.model), row);
      }
    }
    rows = [...last.values()];
  }
  const stale = new Set(staleJudgeRows(rows, audit, files));
  const pairs = [...rows, ...lines.map((line) => line.entry)];
  return { rows, stale, lines, audit, pairs };
}

/** One run as the page shows it, its results indexed by transcript. */
function viewRun(
  files: RunFiles,
  run: RunRead,
  index: Map<string, number>,
  settings: JudgeSettings,
): ViewRun {
  // 1. Each transcript's lines, oldest first, and its row.
  const linesOf = new Map<string, ViewEntry[]>();
  for (const { entry, line } of run.lines) {
    const key = pairKey(entry.task_id, entry.model);
    const entries = linesOf.get(key) ?? [];
    entries.push(viewEntry(entry, line));
    linesOf.set(key, entries);
  }
  const rowOf = new Map(run.rows.map((row) => [pairKey(row.task_id, row.model), row]));

  // 2. A result for every transcript with a row or a line.
  const keys = new Set([...rowOf.keys(), ...linesOf.keys()]);
  const results = [...keys].map((key) => {
    const row = rowOf.get(key);
    const entries = linesOf.get(key) ?? [];
    const last = entries.at(-1);
    const recorded = run.audit.rows.get(key);
    let status: ViewResult['status'] = 'scored';
    if (row === undefined) {
      status = last?.status === 'failed' ? 'failed' : 'no row';
    }
    return {
      t: index.get(key)!,
      status,
      scores: row?.scores ?? null,
      notes: row?.notes ?? '',
      stale: row !== undefined && run.stale.has(row),
      judge: recorded?.judge ?? (row === undefined ? (last?.judge ?? null) : null),
      fallback: recorded?.fallback ?? false,
      timestamp: recorded?.timestamp ?? last?.timestamp ?? null,
      cost_usd: recorded?.cost_usd ?? last?.cost_usd ?? null,
      entries,
    };
  });
  results.sort((a, b) => a.t - b.t);

  // 3. The run as a whole.
  const entries = run.lines.map((one) => one.entry);
  const timestamps = entries.flatMap((entry) => (entry.timestamp ? [entry.timestamp] : []));
  timestamps.sort(compareText);
  const answers = entries.flatMap((entry) => entry.answers ?? []);
  const judges = [...run.audit.rows_by_judge].map(([name, rows]) => {
    return { name, rows, fallback_rows: run.audit.fallback_rows.get(name) ?? 0 };
  });
  const asked = new Set(answers.flatMap((answer) => (answer.judge ? [answer.judge] : [])));
  for (const judge of judges) asked.add(judge.name);
  const scored = results.filter((result) => result.status === 'scored');
  const samples = scored.map((result) => {
    return Math.max(1, result.entries.at(-1)?.sample_scores.length ?? 1);
  });
  return {
    name: files.name,
    scores: files.scores,
    log: files.log,
    judges,
    families: [...new Set(answers.flatMap((answer) => (answer.family ? [answer.family] : [])))],
    first: timestamps[0] ?? null,
    last: timestamps.at(-1) ?? null,
    sessions: new Set(entries.flatMap((entry) => (entry.run_id ? [entry.run_id] : []))).size,
    rows: run.rows.length,
    stale: run.stale.size,
    failed: results.filter((result) => result.status === 'failed').length,
    fallbacks: judges.reduce((total, judge) => total + judge.fallback_rows, 0),
    cost_usd: run.audit.total_cost_usd,
    samples: [...new Set(samples)].sort((a, b) => a - b),
    thinking_answers: answers.filter((answer) => (answer.thinking ?? '') !== '').length,
    redacted_thinking_answers: answers.filter((answer) => (answer.redacted_thinking ?? 0) > 0)
      .length,
    settings: [...asked].sort(compareText).map((judge) => ({
      judge,
      text: settings.byModel.get(judge) ?? settings.fromEnv ?? 'not in models.json now',
    })),
    results,
  };
}

/** One audit line as the page shows it. */
function viewEntry(entry: ViewLine, line: number): ViewEntry {
  const attempts = (entry.attempts ?? []).map((attempt) => ({
    judge: attempt.judge ?? null,
    error: attempt.error ?? 'error',
    status: attempt.status ?? null,
    message: attempt.message ?? '',
    raw_text: attempt.raw_text ?? null,
  }));
  const answers = (entry.answers ?? []).map((answer) => ({
    judge: answer.judge ?? null,
    model: answer.model ?? null,
    provider: answer.provider ?? null,
    family: answer.family ?? null,
    text: answer.text ?? '',
    thinking: answer.thinking ?? null,
    redacted_thinking: answer.redacted_thinking ?? 0,
    stop_reason: answer.stop_reason ?? null,
    request_id: answer.request_id ?? null,
    latency_ms: answer.latency_ms ?? null,
    scores: answer.scores ?? null,
  }));
  const error = entry.error === undefined ? null : `${entry.error.class}: ${entry.error.message}`;
  return {
    line,
    run_id: entry.run_id ?? null,
    timestamp: entry.timestamp ?? null,
    status: entry.status ?? null,
    judge: entry.judge ?? null,
    scores: entry.scores ?? null,
    notes: entry.notes ?? null,
    error,
    cost_usd: entry.cost_usd ?? null,
    prompt_sha256: entry.prompt_sha256 ?? null,
    sample_scores: entry.sample_scores ?? [],
    attempts,
    answers,
  };
}

/** Each judge's settings in models.json now: by model id, and of the entry whose model id an
 * environment variable may set (model_env), which answers under any id; none when unreadable. */
type JudgeSettings = { byModel: Map<string, string>; fromEnv: string | null };

function modelsSettings(file: string, notes: string[]): JudgeSettings {
  const settings: JudgeSettings = { byModel: new Map(), fromEnv: null };
  if (!fs.existsSync(file)) {
    return settings;
  }
  let config: ReturnType<typeof loadModelsConfig>;
  try {
    config = loadModelsConfig(file);
  } catch (error) {
    if (!(error instanceof EvalError)) throw error;
    notes.push(`judges' settings not shown: ${error.message}`);
    return settings;
  }
  for (const judge of [config.judge, ...config.fallback_judges]) {
    const parts: string[] = [judge.provider];
    parts.push(`thinking ${judge.thinking ?? 'off'}`);
    if (judge.effort !== undefined) parts.push(`effort ${judge.effort}`);
    if (judge.reasoning_effort !== undefined) {
      parts.push(`reasoning_effort ${judge.reasoning_effort}`);
    }
    const temperature = judge.temperature ?? null;
    parts.push(`temperature ${temperature === null ? "the model's default" : temperature}`);
    parts.push(`max_tokens ${judge.max_tokens}`);
    const text = parts.join(', ');
    if (!settings.byModel.has(judge.model)) settings.byModel.set(judge.model, text);
    if (judge.model_env !== undefined && settings.fromEnv === null) {
      settings.fromEnv = `${text} (the entry whose model id ${judge.model_env} sets)`;
    }
  }
  return settings;
}

/** The people's rows, stale ones marked; none without sheets (a note when they cannot be read). */
function humanRows(options: ViewOptions, rubric: Rubric, notes: string[]): HumanRow[] {
  if (!fs.existsSync(options.humanScores)) {
    return [];
  }
  try {
    return readHumanScores(options.humanScores, rubric, { transcripts: options.transcripts });
  } catch (error) {
    if (!(error instanceof EvalError)) throw error;
    notes.push(`the people's scores not shown: ${error.message}`);
    return [];
  }
}

/** A transcript's turns (every message shown, the system prompt too), prompt and people's rows. */
function viewTranscript(
  pair: { model: string; task_id: string },
  ref: TranscriptRef | undefined,
  missing: string,
  prompts: PromptBuilder,
  humans: HumanRow[],
): ViewTranscript {
  const people = humans.map((row) => ({
    scorer: row.scorer,
    scores: row.scores,
    notes: row.notes,
    unsure: row.unsure === true,
    stale: row.stale === true,
  }));
  const shown = {
    model: pair.model,
    task_id: pair.task_id,
    turns: null,
    unavailable: missing,
    prompt: null,
    prompt_note: `not rebuilt: ${missing}`,
    prompt_sha256: null,
    humans: people,
  };
  if (ref === undefined) {
    return shown;
  }
  try {
    const transcript = loadTranscript(ref);
    const turns = transcriptTurns(transcript, transcriptImages(transcript, ref.path), true);
    return Object.assign(shown, { turns, unavailable: null }, prompts.of(ref, transcript));
  } catch (error) {
    if (!(error instanceof EvalError)) throw error;
    const reason = `transcript not shown: ${error.message.slice(0, 300)}`;
    return Object.assign(shown, { unavailable: reason, prompt_note: `not rebuilt: ${reason}` });
  }
}

/** The judge prompts, rebuilt from the files now with run-judge's buildJudgePrompt (the audit log
 * keeps each prompt's sha256, not its text); each task's files read once. */
class PromptBuilder {
  private readonly tasks = new Map<string, ReturnType<typeof loadTaskFiles> | EvalError>();

  constructor(
    private readonly files: InputFiles,
    private readonly rubric: Rubric,
  ) {}

  of(ref: TranscriptRef, transcript: Parameters<typeof buildJudgePrompt>[2]) {
    let task = this.tasks.get(ref.task_id);
    if (task === undefined) {
      try {
        task = loadTaskFiles(this.files, ref.task_id);
      } catch (error) {
        if (!(error instanceof EvalError)) throw error;
        task = error;
      }
      this.tasks.set(ref.task_id, task);
    }
    if (task instanceof EvalError) {
      return { prompt: null, prompt_note: `not rebuilt: ${task.message}`, prompt_sha256: null };
    }
    const prompt = buildJudgePrompt(task.task, task.referenceKey, transcript, this.rubric);
    return {
      prompt,
      prompt_note:
        "rebuilt from the files now with run-judge's buildJudgePrompt: the audit log keeps the " +
        "prompt's sha256, not its text; images go after it, as [image N] marks",
      prompt_sha256: sha256(prompt),
    };
  }
}

// ---- The page ----------------------------------------------------------------------------------

/** The page: the data as JSON and the script that shows it; nothing fetched, no other script. */
export function viewPage(data: ViewData): string {
  const script = pageScript('view.js');
  const hash = crypto.createHash('sha256').update(script).digest('base64');
  const policy =
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; " +
    `script-src 'sha256-${hash}'; base-uri 'none'; form-action 'none'`;
  const json = JSON.stringify(data).replace(/</g, '\\u003c');
  const study = escapeHtml(data.study);
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="${policy}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Judge runs: ${study}</title>
<style>${VIEW_CSS}</style></head><body>
<header><h1>Judge runs</h1><p class="study">${study}</p></header>
<main id="app"><noscript>The viewer needs JavaScript.</noscript></main>
<script type="application/json" id="view-data">${json}</script>
<script>${script}</script>
</body></html>
`;
}

const VIEW_CSS = `body{font:14px/1.45 system-ui,sans-serif;color:#111;margin:0;background:#fafafa}
header{display:flex;flex-wrap:wrap;gap:4px 16px;align-items:baseline;padding:8px 20px;
background:#fff;border-bottom:1px solid #ccc}
header h1{font-size:19px;margin:0}
.study{margin:0;color:#555;overflow-wrap:anywhere}
main{padding:8px 20px 40px;max-width:1500px}
h2{font-size:17px;margin:18px 0 6px}
h3{font-size:15px;margin:12px 0 4px}
h4{font-size:13px;margin:10px 0 2px;color:#333}
p{margin:4px 0}
.hint{color:#555;font-size:13px;overflow-wrap:anywhere}
.notes-list{color:#991b1b}
.wide{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;background:#fff}
th,td{border:1px solid #d4d4d4;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f3f4f6;font-weight:600}
table.runs td.num,table.runs th.num{text-align:right}
table.runs td.settings{min-width:220px;font-size:12px}
table.runs tr.is-a{background:#eff6ff}
table.runs tr.is-b{background:#fff7ed}
.pick{white-space:nowrap}
.filters{display:flex;flex-wrap:wrap;gap:6px 14px;align-items:center;margin:8px 0;padding:8px 10px;
background:#fff;border:1px solid #ddd}
.filters label{display:flex;gap:4px;align-items:center;font-size:13px}
select,button{font:inherit;font-size:13px}
button{padding:3px 10px;cursor:pointer}
table.list{width:100%}
table.list tbody tr{cursor:pointer}
table.list tbody tr:hover{background:#f0f9ff}
table.list td.pair a{color:#1d4ed8;text-decoration:none;font-weight:600}
.strip{display:inline-flex;gap:2px;font:12px/1 ui-monospace,monospace}
.strip span{display:inline-block;min-width:16px;padding:3px 2px;text-align:center;border-radius:3px;
background:#f3f4f6}
.strip span.differs,td.differs{background:#fcd34d;font-weight:bold}
.strip span.none{color:#999}
.tag{display:inline-block;font-size:11px;padding:0 5px;border-radius:8px;margin:1px 2px 1px 0;
white-space:nowrap}
.tag.stale{background:#fee2e2;color:#991b1b}
.tag.failed{background:#991b1b;color:#fff}
.tag.fallback{background:#ede9fe;color:#5b21b6}
.tag.unjudged{background:#e5e7eb;color:#374151}
.tag.unsure{background:#fef3c7;color:#92400e}
.legend{font-size:12px;color:#444}
.legend b{font-family:ui-monospace,monospace}
.detail-nav{display:flex;flex-wrap:wrap;gap:6px 10px;align-items:center;margin:10px 0}
table.scores td,table.scores th{text-align:center}
table.scores th:first-child{text-align:left}
.columns{display:grid;grid-template-columns:minmax(0,1.15fr) minmax(0,1fr);gap:16px;
align-items:start;margin-top:10px}
.columns.three{grid-template-columns:minmax(0,1fr) minmax(0,1fr) minmax(0,1fr)}
.panel{background:#fff;border:1px solid #ddd;padding:2px 12px 10px;min-width:0}
.panel.run-a{border-top:3px solid #2563eb}
.panel.run-b{border-top:3px solid #ea580c}
pre{white-space:pre-wrap;overflow-wrap:anywhere;font:12.5px/1.45 ui-monospace,monospace;
background:#f3f4f6;padding:6px 8px;margin:3px 0;max-height:420px;overflow:auto}
.turns{display:flex;flex-direction:column;gap:8px}
.turn{border-radius:8px;padding:3px 10px 6px;max-width:94%}
.turn pre{background:none;padding:0;font:13.5px/1.5 system-ui,sans-serif;max-height:none}
.turn .who{font-size:11px;font-weight:bold;text-transform:uppercase;letter-spacing:.04em;margin:2px 0}
.turn.student{background:#eff6ff;border:1px solid #bfdbfe;align-self:flex-start}
.turn.student .who{color:#1e40af}
.turn.tutor{background:#fffbeb;border:1px solid #fde68a;align-self:flex-end}
.turn.tutor .who{color:#92400e}
.turn.other{background:#f3f4f6;border:1px solid #ddd}
.turn img{max-width:100%}
details{margin:6px 0}
details>summary{cursor:pointer;font-weight:600}
.entry{border-top:1px solid #e5e7eb;padding-top:4px}
.answer{border-left:3px solid #d4d4d4;padding-left:8px;margin:6px 0}
.facts{font-size:12.5px;color:#333;overflow-wrap:anywhere}
.warning{color:#991b1b;font-weight:600}
dl.kv{display:grid;grid-template-columns:auto 1fr;gap:1px 10px;margin:4px 0;font-size:13px}
dl.kv dt{color:#555}
dl.kv dd{margin:0;overflow-wrap:anywhere}
@media (max-width:900px){header{padding:6px 10px}main{padding:6px 10px 30px}
.columns,.columns.three{grid-template-columns:minmax(0,1fr)}
.turn{max-width:100%}
table.stack,table.stack tbody,table.stack tr,table.stack td{display:block;width:auto}
table.stack thead{display:none}
table.stack tr{border:1px solid #d4d4d4;margin:0 0 8px;background:#fff;padding:4px 6px}
table.stack td{border:none;padding:2px 0;text-align:left}
table.stack td.num{text-align:left}
table.stack td[data-label]::before{content:attr(data-label) ": ";color:#555;font-size:12px}
table.stack td.settings{min-width:0}
table.stack td:empty{display:none}
table.stack td.pick{display:inline-block;margin-right:14px}
table.scores th,table.scores td{overflow-wrap:anywhere;padding:3px 4px}}`;

// ---- Serving and writing -----------------------------------------------------------------------

/** A server of the viewer on 127.0.0.1; each load of the page reads the study again. */
export type ViewServer = { url: string; close(): Promise<void> };

/**
 * Serves the page at `/` on 127.0.0.1 (port 0: any free one). A request that names another host is
 * refused: a web page elsewhere must not read the transcripts through a name that resolves here.
 */
export async function serveView(
  port: number,
  page: () => string,
  onError: (message: string) => void,
): Promise<ViewServer> {
  const hosts = new Set<string>();
  const server = http.createServer((request, response) => {
    const reply = (status: number, type: string, body: string) => {
      response.writeHead(status, {
        'content-type': `${type}; charset=utf-8`,
        'cache-control': 'no-store',
        'x-content-type-options': 'nosniff',
      });
      response.end(request.method === 'HEAD' ? undefined : body);
    };
    if (!hosts.has(request.headers.host ?? '')) {
      reply(403, 'text/plain', 'the viewer answers only to 127.0.0.1 and localhost\n');
      return;
    }
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      reply(405, 'text/plain', 'the viewer only reads\n');
      return;
    }
    if ((request.url ?? '/').split('?')[0] !== '/') {
      reply(404, 'text/plain', 'the viewer is at /\n');
      return;
    }
    try {
      reply(200, 'text/html', page());
    } catch (error) {
      if (!(error instanceof EvalError)) throw error;
      onError(error.message);
      reply(500, 'text/plain', `${error.message}\n`);
    }
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => {
      const reason = error.code === 'EADDRINUSE' ? 'in use' : `cannot be used (${error.code})`;
      const fix = 'give another, or leave --port out for any free one';
      reject(new EvalInputError(`--port ${port}: ${reason}; ${fix}`, { cause: error }));
    });
    server.listen(port, '127.0.0.1', () => resolve());
  });
  const bound = (server.address() as { port: number }).port;
  hosts.add(`127.0.0.1:${bound}`);
  hosts.add(`localhost:${bound}`);
  return {
    url: `http://127.0.0.1:${bound}/`,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** Writes the page to `file`, refusing a file the viewer reads (a CSV, a log, the rubric...). */
export function writeView(file: string, options: ViewOptions, data: ViewData): void {
  checkOutputFile(file);
  const inputs = [
    { flag: '--rubric', file: options.rubric },
    { flag: '--models', file: options.models },
  ];
  for (const run of data.runs) {
    if (run.scores !== null) inputs.push({ flag: '--scores-dir', file: run.scores });
    if (run.log !== null) inputs.push({ flag: '--scores-dir', file: run.log });
  }
  refuseOverwritingInput(file, '--out', inputs);
  writablePath(file, () => replaceFileDurably(file, viewPage(data)));
}

/** `--port`: a whole number from 0 (any free port) to 65535. */
export function parsePort(value: string | undefined): number {
  if (value === undefined) {
    return 0;
  }
  const port = Number(value);
  if (!/^\d+$/.test(value) || port > 65535) {
    throw new EvalInputError(`--port ${value}: give a port from 1 to 65535, or 0 for any free one`);
  }
  return port;
}
