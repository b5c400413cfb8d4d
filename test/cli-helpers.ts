// Helpers for driving run-judge.ts as a process against the loopback fake: temp eval sets, spawning, reading outputs.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseCsvSync } from 'csv-parse/sync';
import type { TestContext } from 'node:test';
import { FakeAnthropic } from './fake-anthropic.ts';
import type { FakeOptions, RecordedRequest } from './fake-anthropic.ts';

export const REPO = fileURLToPath(new URL('..', import.meta.url));
/** The CLI under test; RUN_JUDGE_SCRIPT may point at a mutated copy inside the repo (to check that the tests can fail). */
export const SCRIPT = process.env.RUN_JUDGE_SCRIPT ?? path.join(REPO, 'run-judge.ts');
/** Absolute loader URL, so the CLI can run with any cwd. */
export const TSX_LOADER = import.meta.resolve('tsx');
export const SHIPPED_RUBRIC = path.join(REPO, 'rubric.json');

export const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');
export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export interface JudgeEntry {
  provider: 'anthropic'; model: string; api_key_env: string; temperature: number | null; max_tokens: number; timeout_s: number;
  retry: { max_retries: number; budget_s: number; base_delay_s: number };
  [extra: string]: unknown;
}

/** A judge entry with short test timings; overrides replace fields (retry is replaced whole). */
export function judgeEntry(model: string, overrides: Partial<JudgeEntry> = {}): JudgeEntry {
  return {
    provider: 'anthropic', model, api_key_env: 'ANTHROPIC_API_KEY', temperature: null, max_tokens: 512, timeout_s: 5,
    retry: { max_retries: 5, budget_s: 5, base_delay_s: 0.05 }, ...overrides,
  };
}

export interface WorkspaceOptions {
  /** Number of evaluated-model folders (m01..mNN) or their names. */
  models?: number | string[];
  tasks?: string[];
  judge?: JudgeEntry;
  /** Fallback judges; default one, judge-b. */
  fallbacks?: JudgeEntry[];
  /** Replaces models.json entirely. */
  modelsJson?: unknown;
  /** Replaces rubric.json's text. */
  rubricText?: string;
}

export interface Workspace {
  dir: string;
  transcripts: string; tasks: string; referenceKeys: string; rubric: string; models: string; output: string; log: string;
  /** Every (model, task) pair written, in the CLI's sorted order. */
  pairs: { model: string; task_id: string }[];
  /** The path flags for this workspace, followed by `extra`. */
  args(...extra: string[]): string[];
  remove(): void;
}

const SHIPPED_TRANSCRIPT = JSON.parse(fs.readFileSync(path.join(REPO, 'evals/transcripts/stub/proof01.json'), 'utf8')) as {
  metadata?: Record<string, unknown>; messages: { role: string; content: unknown }[];
};

/** The tag each generated transcript carries in its first message, so the fake can tell transcripts apart. */
export const tagLine = (model: string, taskId: string) => `test-tag ${model}/${taskId}`;

/** The "model/task" a request is about, read from the tag in its prompt. */
export function tagOf(req: RecordedRequest): string | undefined {
  const content = req.body?.messages?.[0]?.content;
  const text = typeof content === 'string' ? content : JSON.stringify(content ?? '');
  return /test-tag (\S+\/\S+)/.exec(text)?.[1];
}

/** Writes a temp eval set: shipped tasks, reference keys and rubric; copies of a shipped transcript under m01..mK. */
export function makeWorkspace(opts: WorkspaceOptions = {}): Workspace {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'run-judge-cli-'));
  const models = typeof opts.models === 'number' || opts.models === undefined
    ? Array.from({ length: opts.models ?? 2 }, (_, i) => `m${String(i + 1).padStart(2, '0')}`)
    : opts.models;
  const tasks = opts.tasks ?? ['proof01', 'proof02', 'proof03'];
  const ws: Workspace = {
    dir,
    transcripts: path.join(dir, 'transcripts'),
    tasks: path.join(dir, 'tasks'),
    referenceKeys: path.join(dir, 'reference_keys'),
    rubric: path.join(dir, 'rubric.json'),
    models: path.join(dir, 'models.json'),
    output: path.join(dir, 'scores', 'judge_scores.csv'),
    log: path.join(dir, 'scores', 'judge_log.jsonl'),
    pairs: [],
    args(...extra) {
      return ['--transcripts', ws.transcripts, '--tasks', ws.tasks, '--reference-keys', ws.referenceKeys, '--rubric', ws.rubric,
        '--models', ws.models, '--output', ws.output, '--log', ws.log, ...extra];
    },
    remove() {
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  fs.cpSync(path.join(REPO, 'evals/tasks'), ws.tasks, { recursive: true });
  fs.cpSync(path.join(REPO, 'evals/reference_keys'), ws.referenceKeys, { recursive: true });
  if (opts.rubricText === undefined) fs.copyFileSync(SHIPPED_RUBRIC, ws.rubric);
  else fs.writeFileSync(ws.rubric, opts.rubricText);
  const modelsJson = opts.modelsJson ?? {
    models: models.map((name) => ({ name, provider: 'local' })),
    judge: opts.judge ?? judgeEntry('judge-a'),
    fallback_judges: opts.fallbacks ?? [judgeEntry('judge-b')],
  };
  fs.writeFileSync(ws.models, `${JSON.stringify(modelsJson, null, 2)}\n`);
  for (const model of models) {
    fs.mkdirSync(path.join(ws.transcripts, model), { recursive: true });
    for (const taskId of tasks) {
      const transcript = {
        ...SHIPPED_TRANSCRIPT,
        metadata: { ...SHIPPED_TRANSCRIPT.metadata, task_id: taskId, model },
        messages: [{ role: 'system', content: tagLine(model, taskId) }, ...SHIPPED_TRANSCRIPT.messages],
      };
      fs.writeFileSync(path.join(ws.transcripts, model, `${taskId}.json`), JSON.stringify(transcript, null, 2));
      ws.pairs.push({ model, task_id: taskId });
    }
  }
  return ws;
}

export interface CliResult { code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string; ms: number }
export interface CliOptions {
  cwd?: string;
  /** ANTHROPIC_BASE_URL; default an unroutable loopback port, so nothing can reach the internet. */
  baseUrl?: string;
  /** ANTHROPIC_API_KEY; null leaves it unset. */
  apiKey?: string | null;
  env?: Record<string, string>;
  timeoutMs?: number;
}

/** The child's environment: no inherited Anthropic settings, key or test-runner context. */
function cliEnv(opts: CliOptions): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (key.startsWith('ANTHROPIC_') || key === 'JUDGE_MODEL' || key.startsWith('NODE_TEST') || key === 'NODE_OPTIONS') continue;
    env[key] = value;
  }
  env.ANTHROPIC_BASE_URL = opts.baseUrl ?? 'http://127.0.0.1:9';
  const apiKey = opts.apiKey === undefined ? 'sk-test' : opts.apiKey;
  if (apiKey !== null) env.ANTHROPIC_API_KEY = apiKey;
  return { ...env, ...opts.env };
}

/** Spawns the CLI (async: the fake in this process must keep answering); `done` settles when it exits. */
export function startCli(args: string[], opts: CliOptions = {}): { child: ChildProcess; done: Promise<CliResult> } {
  const started = Date.now();
  const child = spawn(process.execPath, ['--import', TSX_LOADER, SCRIPT, ...args], {
    cwd: opts.cwd ?? REPO, env: cliEnv(opts), stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => { stdout += chunk; });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => { stderr += chunk; });
  const done = new Promise<CliResult>((resolve, reject) => {
    const killer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 30_000);
    child.once('error', reject);
    child.once('close', (code, signal) => {
      clearTimeout(killer);
      resolve({ code, signal, stdout, stderr, ms: Date.now() - started });
    });
  });
  return { child, done };
}

export const runCli = (args: string[], opts: CliOptions = {}) => startCli(args, opts).done;

/** A fake and a temp workspace, both cleaned up after the test; `run`/`start` drive the CLI on that workspace. */
export async function setupCli(t: TestContext, fakeOpts: FakeOptions = {}, wsOpts: WorkspaceOptions = {}) {
  const fake = await FakeAnthropic.start(fakeOpts);
  const ws = makeWorkspace(wsOpts);
  t.after(async () => {
    await fake.close();
    ws.remove();
  });
  const run = (extra: string[] = [], opts: CliOptions = {}) => runCli(ws.args(...extra), { baseUrl: fake.url, ...opts });
  const start = (extra: string[] = [], opts: CliOptions = {}) => startCli(ws.args(...extra), { baseUrl: fake.url, ...opts });
  return { fake, ws, run, start };
}

/** The CSV's records (header first), parsed strictly; throws on a malformed file. */
export function readCsv(file: string): string[][] {
  return parseCsvSync(fs.readFileSync(file, 'utf8'), { relax_column_count: false, relax_quotes: false }) as string[][];
}

/** Data rows keyed "model/task_id" (header skipped). */
export function csvRows(file: string): { key: string; record: string[] }[] {
  return readCsv(file).slice(1).map((record) => ({ key: `${record[1]}/${record[0]}`, record }));
}

export interface LogEntry {
  run_id: string; timestamp: string; task_id: string; model: string; status: 'scored' | 'failed'; judge: string | null;
  scores?: Record<string, number>; notes?: string; error?: { class: string; message: string };
  attempts: { judge: string | null; error: string; status: number | null; message: string }[];
  answers: { judge: string; text: string; stop_reason: string | null; request_id: string | null; usage: { input_tokens: number; output_tokens: number }; latency_ms: number }[];
  usage: { input_tokens: number; output_tokens: number }; latency_ms: number; prompt_sha256: string | null; rubric_sha256: string;
}

export function readLog(file: string): LogEntry[] {
  if (!fs.existsSync(file)) return [];
  const text = fs.readFileSync(file, 'utf8');
  return text.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line) as LogEntry);
}

/** Polls until `condition` holds; throws after `timeoutMs`. */
export async function waitFor(condition: () => boolean, timeoutMs = 10_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

/** Number of data rows in the CSV right now, tolerating a file that does not exist yet. */
export function rowCount(file: string): number {
  if (!fs.existsSync(file)) return 0;
  return fs.readFileSync(file, 'utf8').split('\n').filter((line) => line !== '').length - 1;
}

/** Every file under `dir` with its size, mtime and content hash: compare before and after to prove nothing changed. */
export function snapshot(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  if (!fs.existsSync(dir)) return out;
  const walk = (d: string) => {
    for (const entry of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, entry.name);
      if (entry.isDirectory()) {
        out.set(`${p}/`, 'dir');
        walk(p);
      } else {
        const stat = fs.statSync(p);
        out.set(p, `${stat.size}:${stat.mtimeMs}:${sha256(fs.readFileSync(p))}`);
      }
    }
  };
  walk(dir);
  return out;
}

/** The greatest number of requests the fake held at once, given each is answered `latencyMs` after it arrived. */
export function maxInFlight(requests: RecordedRequest[], latencyMs: number): number {
  let max = 0;
  for (const req of requests) {
    const open = requests.filter((other) => other.at <= req.at && req.at < other.at + latencyMs).length;
    max = Math.max(max, open);
  }
  return max;
}
