// report/import.ts: `report.ts import FILE.jsonl`: transcripts an eval tool exported, one a line
// ({"model", "task_id", "messages", optional "metadata" and "problem_statement"}), written where
// the run reads them, {out}/{model}/{task_id}.json. Each is checked by the run's own reader
// (loadTranscript) before anything is written, and the import is all or nothing: one bad line, or
// one transcript that would replace another's bytes, and no file is written. A transcript already
// there with the same bytes is left as it is (counted), so importing a file again changes nothing.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Command } from 'commander';
import {
  DEFAULTS,
  EvalError,
  EvalInputError,
  issuePath,
  loadTranscript,
  pairKey,
  readRegularFile,
  STUDY_DIR_HELP,
  unreadableReason,
  z,
} from '../run-judge.ts';
import type { IO, Transcript } from '../run-judge.ts';

/** `import`'s flags. */
export type ImportOptions = { out: string; dir?: string };

/** What an import did: transcripts written, already there with the same bytes, repeated lines. */
export type ImportSummary = { written: number; unchanged: number; duplicates: number };

/** Adds `import` to the report's commands. */
export function addImportCommand(cli: Command, io: Pick<IO, 'stdout' | 'stderr'>): void {
  cli
    .command('import')
    .description(
      'transcripts from a JSONL file (one a line: model, task_id, messages, optional metadata) ' +
        'written as {out}/{model}/{task_id}.json; all or nothing, never over other bytes',
    )
    .argument('<file>', 'the JSONL file')
    .option('--out <dir>', 'the transcripts folder to write into', DEFAULTS.transcripts)
    .option('--dir <folder>', STUDY_DIR_HELP)
    .addHelpText(
      'after',
      '\nExit status: 0 imported (or already there); 2 a line the run would refuse, a ' +
        'transcript that would replace other bytes, or a file it cannot use: nothing written.',
    )
    .action((file: string, options: ImportOptions, command: Command) => {
      // --out's default is the study's transcripts folder (the study paths' `out` is sheet's).
      const out =
        options.dir !== undefined && command.getOptionValueSource('out') === 'default'
          ? path.join(options.dir, DEFAULTS.transcripts)
          : options.out;
      const summary = importTranscripts(file, out);
      const parts = [`${summary.written} transcript(s) written to ${out}`];
      parts.push(`${summary.unchanged} already there with the same bytes`);
      if (summary.duplicates > 0) {
        parts.push(`${summary.duplicates} repeated line(s) skipped`);
      }
      io.stdout.write(`import: ${parts.join('; ')}\n`);
    });
}

/** A line as the import reads it: strict, so a misspelt field is refused, never dropped. */
const LineSchema = z.strictObject({
  model: z.string().min(1, 'is empty'),
  task_id: z.string().min(1, 'is empty'),
  messages: z.array(z.unknown(), 'must be an array of messages, each {role, content}'),
  metadata: z.record(z.string(), z.unknown()).optional(),
  problem_statement: z.unknown().optional(),
});

/** One transcript to write: where, its bytes, and the line it came from. */
type Planned = { model: string; task_id: string; file: string; bytes: Buffer; line: number };

/** At most this many bad lines are listed: the first few say what to fix. */
const LISTED = 10;

/** Imports every line of `file` into `out`; throws, having written nothing, on any problem. */
export function importTranscripts(file: string, out: string): ImportSummary {
  // 1. Every line checked, each problem named by its line number.
  const lines = jsonlLines(file);
  const problems: string[] = [];
  const planned = new Map<string, Planned>();
  let duplicates = 0;
  const checks = fs.mkdtempSync(path.join(os.tmpdir(), 'run-judge-import-'));
  try {
    for (const { text, line } of lines) {
      const one = plannedTranscript(text, line, out, checks);
      if (typeof one === 'string') {
        problems.push(`line ${line}: ${one}`);
        continue;
      }
      const key = pairKey(one.task_id, one.model);
      const before = planned.get(key);
      if (before === undefined) {
        planned.set(key, one);
      } else if (before.bytes.equals(one.bytes)) {
        duplicates++;
      } else {
        problems.push(
          `line ${line}: ${one.model}/${one.task_id} is line ${before.line} too, with other ` +
            'content; keep one',
        );
      }
    }
  } finally {
    fs.rmSync(checks, { recursive: true, force: true });
  }
  if (lines.length === 0) {
    problems.push('no transcript in it (every line is blank)');
  }

  // 2. A transcript already there is left alone when its bytes are the same, else refused.
  const toWrite: Planned[] = [];
  let unchanged = 0;
  for (const one of planned.values()) {
    const there = existingBytes(one.file);
    if (there === undefined) {
      toWrite.push(one);
    } else if (typeof there === 'string') {
      problems.push(`line ${one.line}: ${one.file}: ${there}`);
    } else if (there.equals(one.bytes)) {
      unchanged++;
    } else {
      problems.push(
        `line ${one.line}: ${one.file} exists with other content, never overwritten; ` +
          'move it away, or give the line another model or task_id',
      );
    }
  }
  refuseProblems(file, problems);

  // 3. All written, or none.
  writeAll(toWrite, out);
  return { written: toWrite.length, unchanged, duplicates };
}

/** The file's non-blank lines with their numbers; a byte-order mark and CRLF endings are fine. */
function jsonlLines(file: string): { text: string; line: number }[] {
  let content: string;
  try {
    content = readRegularFile(file).toString('utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reason = code === 'EISDIR' ? 'a folder, not a JSONL file' : unreadableReason(file, error);
    throw new EvalInputError(`${file}: ${reason}`, { cause: error });
  }
  const lines = content.replace(/^\uFEFF/, '').split('\n');
  return lines.flatMap((text, i) => {
    const trimmed = text.replace(/\r$/, '');
    return trimmed.trim() === '' ? [] : [{ text: trimmed, line: i + 1 }];
  });
}

/** One line as the transcript to write, or what is wrong with it. `checks` is a scratch folder
 * where the run's reader reads it back. */
function plannedTranscript(
  text: string,
  line: number,
  out: string,
  checks: string,
): Planned | string {
  // 1. The line's fields, and the names that become a folder and a file.
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return `not JSON (${(error as Error).message})`;
  }
  const parsed = LineSchema.safeParse(value);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => {
      const where = issuePath(issue.path);
      return issue.code === 'unrecognized_keys'
        ? `${issue.keys.join(', ')}: not a field of a line (model, task_id, messages, metadata, ` +
            'problem_statement)'
        : `${where}: ${issue.message}`;
    });
    return problems.join('; ');
  }
  const fields = parsed.data;
  const badName =
    segmentProblem(fields.model, 'model', 'a folder') ??
    segmentProblem(fields.task_id, 'task_id', 'a file name');
  if (badName !== undefined) {
    return badName;
  }

  // 2. The transcript as the run reads it; its metadata names its pair (a disagreeing one is
  // refused by the reader, as the run would).
  const transcript: Record<string, unknown> = {
    metadata: { task_id: fields.task_id, model: fields.model, ...fields.metadata },
  };
  if (fields.problem_statement !== undefined) {
    transcript.problem_statement = fields.problem_statement;
  }
  transcript.messages = fields.messages;
  const bytes = Buffer.from(`${JSON.stringify(transcript, null, 2)}\n`);
  const checked = path.join(checks, String(line), fields.model, `${fields.task_id}.json`);
  fs.mkdirSync(path.dirname(checked), { recursive: true });
  fs.writeFileSync(checked, bytes);
  let read: Transcript;
  try {
    read = loadTranscript({ task_id: fields.task_id, model: fields.model, path: checked });
  } catch (error) {
    if (!(error instanceof EvalError)) throw error;
    return error.message.slice(checked.length + 2);
  }
  const linked = imageByPath(read);
  if (linked !== undefined) {
    return linked;
  }
  const file = path.join(out, fields.model, `${fields.task_id}.json`);
  return { model: fields.model, task_id: fields.task_id, file, bytes, line };
}

/** The longest a name may be: 255 bytes, with `.json` and the temporary copy's `.<pid>.tmp`. */
const NAME_MAX = 255;
const TEMP_ROOM = Buffer.byteLength('..json.4194304.tmp');

/** Why a model or task_id cannot be one path segment of the transcripts folder, if it cannot. */
function segmentProblem(name: string, field: string, what: string): string | undefined {
  // Quoted as JSON: a control character in it shows escaped.
  const quoted = JSON.stringify(name);
  const fix = `rename it in the file (the run reads ${path.join('{model}', '{task_id}.json')})`;
  if (/[/\\\x00-\x1f\x7f]/.test(name)) {
    return `${field} ${quoted} cannot be ${what}: it holds / or \\ or a control character; ${fix}`;
  }
  if (name.startsWith('.')) {
    return `${field} ${quoted} cannot be ${what}: it starts with a dot; ${fix}`;
  }
  if (field === 'model' && name === 'node_modules') {
    return `model "node_modules" is never read as a tutor's folder; ${fix}`;
  }
  const room = field === 'model' ? NAME_MAX : NAME_MAX - TEMP_ROOM;
  if (Buffer.byteLength(name) > room) {
    return `${field} is ${Buffer.byteLength(name)} bytes (UTF-8): at most ${room}; ${fix}`;
  }
  return undefined;
}

/** An image given by path: it would be looked for beside the written file, where it is not. */
function imageByPath(transcript: Transcript): string | undefined {
  for (const [i, message] of transcript.messages.entries()) {
    if (typeof message.content === 'string') continue;
    const at = message.content.findIndex((block) => 'path' in block);
    if (at >= 0) {
      return (
        `messages[${i}].content[${at}]: an image by path cannot come along; give it inline, ` +
        'as {type: "image", source: {type: "base64", media_type, data}}'
      );
    }
  }
  return undefined;
}

/** A file's bytes; undefined when there is none; a string saying why a path is not a file. */
function existingBytes(file: string): Buffer | string | undefined {
  const stat = fs.statSync(file, { throwIfNoEntry: false });
  if (stat === undefined) {
    return undefined;
  }
  if (!stat.isFile()) {
    return 'exists and is not a file; move it away';
  }
  return fs.readFileSync(file);
}

/** Every problem in one error (the first few listed), saying that nothing was written. */
function refuseProblems(file: string, problems: string[]): void {
  if (problems.length === 0) {
    return;
  }
  const listed = problems.slice(0, LISTED).join('; ');
  const more = problems.length > LISTED ? `; and ${problems.length - LISTED} more` : '';
  throw new EvalInputError(`${file}: ${listed}${more}; nothing written`);
}

/**
 * Writes each transcript through a temporary copy linked into place, so no file is ever seen half
 * written and none is replaced (a link fails where a file is). On any failure, the files and
 * folders made so far are removed again.
 */
function writeAll(planned: Planned[], out: string): void {
  const made: string[] = [];
  const folders: string[] = [];
  try {
    for (const one of planned) {
      const folder = path.dirname(one.file);
      const first = fs.mkdirSync(folder, { recursive: true });
      if (first !== undefined) folders.push(first);
      const temp = path.join(folder, `.${path.basename(one.file)}.${process.pid}.tmp`);
      try {
        fs.writeFileSync(temp, one.bytes, { flag: 'wx', flush: true });
        fs.linkSync(temp, one.file);
      } finally {
        fs.rmSync(temp, { force: true });
      }
      made.push(one.file);
    }
    for (const folder of new Set([out, ...planned.map((one) => path.dirname(one.file))])) {
      syncFolder(folder);
    }
  } catch (error) {
    for (const file of made) fs.rmSync(file, { force: true });
    for (const folder of folders.reverse()) fs.rmSync(folder, { recursive: true, force: true });
    const code = (error as NodeJS.ErrnoException).code ?? String(error);
    const at = planned[made.length]?.file ?? out;
    throw new EvalInputError(
      `${at}: cannot be written (${code}); nothing written (the ${made.length} written before ` +
        'were removed)',
      { cause: error },
    );
  }
}

/** Makes a folder's new entries durable. */
function syncFolder(folder: string): void {
  const fd = fs.openSync(folder, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
