// report/inputs.ts: what report.ts reads from disk, and the types of what it reads: the judges'
// CSVs and audit logs, the transcripts the HTML page shows, and the scorers' sheets and transcript
// files the scoring plan checks. The human scores and the plan are read by run-judge.ts's
// readHumanScores, the same reader the human-scores gate uses. Nothing here imports a report file
// but report/analysis.ts (for a type), so the report's modules form no circle.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type * as Zod from 'zod';
// run-judge's zod, so one copy of it is loaded and both scripts' schemas are of one kind
import {
  AuditLineSchema,
  DEFAULTS,
  EvalError,
  EvalInputError,
  allowedScores,
  compareText,
  defaultLog,
  inputHashes,
  issuePath,
  loadTranscript,
  pairKey,
  readCsvFile,
  readJudgeCsv,
  readRegularFile,
  readTranscripts,
  transcriptToText,
  unreadableReason,
  z,
} from '../run-judge.ts';
import type { Rubric, ScoreRow, TranscriptRef } from '../run-judge.ts';
import type { Scores } from './analysis.ts';

// ---- The judges: which files, their CSV rows and their audit logs -------------------------------

/** One judge to report on: its name, its CSV and its audit log. */
export type JudgeInput = { name: string; scores: string; log: string };

/** The judges of `--scores` (the default CSV without one), each with its `--log`: paired by name,
 * else by position; without one, the default log for the default CSV, else the CSV's .jsonl. */
export function judgeInputs(scoresValues: string[], logValues: string[], dir = '.'): JudgeInput[] {
  // 1. Each judge's name: given as NAME=file, else the file's stem; two alike cannot be told apart.
  // The default CSV is the study folder's (--dir), else the current folder's.
  const given = scoresValues.length > 0 ? scoresValues : [path.join(dir, DEFAULTS.output)];
  const judges = given.map((value) => {
    const named = nameAndFile(value, '--scores');
    const name = named.name ?? path.basename(named.file, path.extname(named.file));
    return { name, scores: named.file, log: defaultLog(named.file, dir) };
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

/** One judge's CSV rows and audit log. */
export type JudgeRun = { judge: JudgeInput; rows: ScoreRow[]; audit: Audit };

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

/** What the log says of one row: its transcript's last scored entry. */
export type AuditRow = {
  judge: string;
  /** The family of the judge whose answer gave the scores, as the log records it; null: not said. */
  family: string | null;
  /** The sha256 of each input its prompt was built from (run-judge's inputHashes); null: not logged. */
  input_sha256: Record<string, string | null> | null;
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

/** Where the inputs of a judge's prompt are now, to tell its rows stale. */
export type InputFiles = {
  transcripts: string;
  tasks: string;
  referenceKeys: string;
  rubric: string;
};

/**
 * The judge rows whose inputs (transcript, task, reference key, rubric, template) differ from the
 * files now, by the hashes their audit line records. A row whose line records none, or an input
 * unreadable now, cannot be told: it is kept, as a row judged before the log recorded hashes.
 */
export function staleJudgeRows(rows: ScoreRow[], audit: Audit, files: InputFiles): ScoreRow[] {
  return rows.filter((row) => {
    const recorded = audit.rows.get(pairKey(row.task_id, row.model))?.input_sha256 ?? null;
    if (recorded === null) {
      return false;
    }
    const transcriptPath = path.join(files.transcripts, row.model, `${row.task_id}.json`);
    const now = inputHashes(files, {
      task_id: row.task_id,
      model: row.model,
      path: transcriptPath,
    });
    return Object.entries(now).some(([input, hash]) => {
      const then = recorded[input] ?? null;
      return hash !== null && then !== null && hash !== then;
    });
  });
}

/** The audit of a judge without a log of its own (a jury): nothing recorded. */
export function noAudit(): Audit {
  return {
    rows: new Map(),
    rows_by_judge: new Map(),
    fallback_rows: new Map(),
    rubric_sha256: [],
    prompt_template_sha256: [],
    last_judged: null,
    total_cost_usd: null,
    human_scoring: null,
    before_human_scoring_rows: 0,
  };
}

/** Each transcript's last scored entry in the log, and what the page header says of the run. */
export function readAuditLog(log: string, rubric?: Rubric, scored?: ScoreRow[]): Audit {
  // 1. Every line; the last scored one of each transcript makes its row. With the rubric, a row's
  // samples must each give every dimension an allowed score (else they are of another rubric).
  const lines = auditEntries(log, LoggedLineSchema);
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
function auditRow(entry: LoggedLine, judge: string): AuditRow {
  const others = (entry.attempts ?? []).filter((attempt) => {
    return typeof attempt.judge === 'string' && attempt.judge !== judge;
  });
  const scoring = (entry.answers ?? []).filter((answer) => answer.scores);
  // A log of before `judge_family` and `fallback`: the first scored answer's family, and a judge of
  // another id tried first.
  const family = scoring.find((answer) => typeof answer.family === 'string')?.family ?? null;
  return {
    judge,
    family: entry.judge_family === undefined ? family : entry.judge_family,
    input_sha256: entry.input_sha256 ?? null,
    fallback: entry.fallback ?? others.length > 0,
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

/** The log's lines as `schema` reads them, none without a log; a torn last line (a crash
 * mid-write) is left out; a line that is not an audit entry is an error naming the file and line. */
export function auditEntries<S extends Zod.ZodType>(
  log: string,
  schema: S,
): { entry: Zod.infer<S>; line: number }[] {
  if (!fs.existsSync(log)) {
    return [];
  }

  let content: string;
  try {
    content = readRegularFile(log).toString('utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reason =
      code === 'EISDIR' ? 'a folder, not an audit log (.jsonl)' : unreadableReason(log, error);
    throw new EvalInputError(`--log ${log}: ${reason}`, { cause: error });
  }

  const lines = content.split('\n');
  const entries: { entry: Zod.infer<S>; line: number }[] = [];
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
    const parsed = schema.safeParse(entry);
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

/** A line of the audit log as the report reads it: run-judge's AuditLineSchema, only the fields
 * the report uses, and every one but the pair optional, for logs written before it had them (a
 * null thinking, as a hand-written log may say, is none). */
const LoggedLineSchema = AuditLineSchema.pick({
  task_id: true,
  model: true,
  status: true,
  judge: true,
  judge_family: true,
  fallback: true,
  timestamp: true,
  cost_usd: true,
  rubric_sha256: true,
  prompt_template_sha256: true,
  input_sha256: true,
  sample_scores: true,
  human_scoring: true,
  before_human_scoring: true,
})
  .extend({
    attempts: z.array(AuditLineSchema.shape.attempts.element.pick({ judge: true }).partial()),
    answers: z.array(
      AuditLineSchema.shape.answers.element
        .pick({ family: true, scores: true })
        .extend({ thinking: AuditLineSchema.shape.answers.element.shape.thinking.nullable() })
        .partial(),
    ),
  })
  .partial()
  .required({ task_id: true, model: true });

type LoggedLine = Zod.infer<typeof LoggedLineSchema>;

// ---- The transcripts, for the HTML page ---------------------------------------------------------

/** A transcript's text as the page shows it, or why it cannot be shown. */
export type TranscriptText = string | { unavailable: string };

/** A transcript's text; one missing or unreadable is a note in its place, never a crash. */
export function transcriptTextOf(ref: TranscriptRef): TranscriptText {
  try {
    return transcriptToText(loadTranscript(ref));
  } catch (error) {
    if (!(error instanceof EvalError)) {
      throw error;
    }
    // Cut short: a schema error can run long.
    return { unavailable: `transcript not shown: ${error.message.slice(0, 300)}` };
  }
}

/**
 * The transcripts the folder holds, by pair (run-judge's listing: inside the folder, no link out of
 * it), and what to say of a row whose transcript is not among them.
 */
export function listedTranscripts(dir: string): {
  refs: Map<string, TranscriptRef>;
  missing: (pair: { task_id: string; model: string }) => string;
} {
  try {
    const refs = new Map(readTranscripts(dir).map((ref) => [pairKey(ref.task_id, ref.model), ref]));
    const missing = (pair: { task_id: string; model: string }) => {
      const file = path.join(dir, pair.model, `${pair.task_id}.json`);
      return `transcript not shown: ${file}: file not found in the transcripts folder`;
    };
    return { refs, missing };
  } catch (error) {
    if (!(error instanceof EvalError)) throw error;
    const reason = `transcript not shown: ${error.message.slice(0, 300)}`;
    return { refs: new Map(), missing: () => reason };
  }
}

// ---- What the scoring plan checks on disk -------------------------------------------------------

/** A transcript file's bytes, as the sheet's hash is taken of them. */
export function readTranscriptBytes(ref: TranscriptRef): Buffer {
  try {
    return fs.readFileSync(ref.path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new EvalInputError(`${ref.path}: cannot be read (${code})`, { cause: error });
  }
}

/** Columns a sheet holds besides scores and notes: a cell in any other column is someone's work. */
const IDENTITY_COLUMNS = ['task_id', 'model', 'scorer', 'transcript_sha256'];

/** Whether any row of a sheet has a cell filled in beside its identity columns. */
export function holdsScores(file: string): boolean {
  const records = readCsvFile(file, {});
  const header = records[0]?.record ?? [];
  return records.slice(1).some(({ record }) => {
    return record.some(
      (cell, i) => !IDENTITY_COLUMNS.includes(header[i] ?? '') && cell.trim() !== '',
    );
  });
}

// ---- Leaf helpers -------------------------------------------------------------------------------

/** The values that are strings, each once, in order of first appearance. */
function distinct(values: (string | null | undefined)[]): string[] {
  const strings = values.filter((value) => typeof value === 'string');
  return [...new Set(strings)];
}
