// Shared test helpers: temp dirs, small valid inputs, judge configs, the loopback fake, workspaces, and running the CLI.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { Writable } from 'node:stream';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { TestContext } from 'node:test';
import type { Browser } from 'playwright-core';
import { buildSync } from 'esbuild';
import { parse as parseCsvSync } from 'csv-parse/sync';
import { stringify as stringifyCsv } from 'csv-stringify/sync';
import { FakeAnthropic } from '../fakes/anthropic.ts';
import type { FakeOptions, RecordedRequest } from '../fakes/anthropic.ts';
import { AuditLineSchema } from '../run-judge.ts';
import type {
  AuditLine,
  Clock,
  JudgeConfig,
  ReferenceKey,
  Task,
  Transcript,
} from '../run-judge.ts';

// ---------------------------------------------------------------------------------------------
// Paths and constants
// ---------------------------------------------------------------------------------------------

export const REPO = fileURLToPath(new URL('..', import.meta.url));
export const RUBRIC_FILE = path.join(REPO, 'rubric.json');
export const MODELS_FILE = path.join(REPO, 'models.json');
export const RUN_JUDGE_FILE = path.join(REPO, 'run-judge.ts');
/** The CLI under test; RUN_JUDGE_SCRIPT may point at a mutated copy inside the repo (to check that the tests can fail). */
export const SCRIPT = process.env.RUN_JUDGE_SCRIPT ?? RUN_JUDGE_FILE;
/** Absolute loader URL, so a spawned CLI can run with any cwd. */
export const TSX_LOADER = import.meta.resolve('tsx');

/** Debian's chromium, and the flags that keep it off this machine's closed network (the page tests). */
const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/**
 * Headless Chromium, the one launcher of the page tests. It has no profile of its own: each
 * `newContext()` starts empty and costs far less than a launch, so one browser serves a whole test
 * file. A missing Chromium fails the suite with one line, never skips it.
 */
export async function launchChromium(): Promise<Browser> {
  if (!fs.existsSync(CHROMIUM)) {
    throw new Error('Chromium is not installed: apt-get install chromium (see README)');
  }
  const { chromium } = await import('playwright-core');
  // Playwright's own SIGINT handler exits the process: tests that send themselves a Ctrl-C share it.
  return chromium.launch({
    executablePath: CHROMIUM,
    args: CHROMIUM_ARGS,
    headless: true,
    handleSIGINT: false,
    handleSIGTERM: false,
    handleSIGHUP: false,
  });
}

/** Where the SDK points when no fake is running: a closed loopback port, so nothing can reach the internet. */
export const DEAD_BASE_URL = 'http://127.0.0.1:9';

export const DIMENSIONS = [
  'mathematical_correctness',
  'proof_scaffolding',
  'error_diagnosis',
  'student_agency',
  'proof_convention_alignment',
  'integrity_boundary',
] as const;

export const EXPECTED_HEADER = ['task_id', 'model', ...DIMENSIONS, 'notes'].join(',');

/** The key unit tests put in RJ_TEST_KEY (judgeConfig's api_key_env); distinctive, so a leak is easy to spot. */
export const TEST_KEY = 'sk-test-secret-key-123';
/** The key a CLI run gets in ANTHROPIC_API_KEY (judgeEntry's api_key_env) unless told otherwise. */
export const CLI_KEY = 'sk-test';

// ---------------------------------------------------------------------------------------------
// Small utilities
// ---------------------------------------------------------------------------------------------

export const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');
export const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

type AnyFunction = (...args: unknown[]) => unknown;

/**
 * Runs `fn` with each of node:fs's functions `names` replaced by `wrap(original)` (modules that
 * imported node:fs see the replacement too), each put back after: a test counts calls with it.
 */
export async function withFsWrapped<T>(
  names: string[],
  wrap: (original: AnyFunction) => AnyFunction,
  fn: () => Promise<T>,
): Promise<T> {
  const fsModule = createRequire(import.meta.url)('node:fs') as Record<string, unknown>;
  const originals = names.map((name) => fsModule[name] as AnyFunction);
  names.forEach((name, i) => {
    fsModule[name] = wrap(originals[i]!);
  });
  syncBuiltinESMExports();
  try {
    return await fn();
  } finally {
    names.forEach((name, i) => {
      fsModule[name] = originals[i];
    });
    syncBuiltinESMExports();
  }
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** A RegExp matching text that contains every part, in any order: for `assert.throws(fn, { message: mentioning(...) })`. */
export function mentioning(...parts: string[]): RegExp {
  return new RegExp(parts.map((part) => `(?=[\\s\\S]*${escapeRegExp(part)})`).join(''));
}

function makeTempDir(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/** A fresh temp dir, removed after the test. */
export function tempDir(t: TestContext, prefix = 'rj-test-'): string {
  const dir = makeTempDir(prefix);
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Writes `value` as pretty JSON (a string is written as is, e.g. to write malformed JSON), creating parent folders. */
export function writeJson(file: string, value: unknown): string {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, typeof value === 'string' ? value : JSON.stringify(value, null, 2));
  return file;
}

// ---------------------------------------------------------------------------------------------
// Time: a clock that jumps instead of waiting
// ---------------------------------------------------------------------------------------------

/**
 * A clock whose sleeps skip ahead while nothing is in flight; `jumpedMs()` says how far it is ahead of the real one;
 * `waitFor(settled)` adds what it waits for before each jump (a fake's `settled`: startFake adds it).
 */
export type JumpClock = Clock & { jumpedMs(): number; waitFor(settled: () => Promise<void>): void };

type Sleeper = { target: number; timer?: ReturnType<typeof setTimeout>; wake(): void };

let ownImmediates = 0; // every jump clock's own turns below, so that none waits on another's
const nextMacrotask = () =>
  new Promise<void>((resolve) => {
    ownImmediates++;
    setImmediate(() => {
      ownImmediates--;
      resolve();
    });
  });
/** Turns of this process's own that are still to run (run-judge handles answers that came together one a turn). */
const turnsPending = () =>
  process.getActiveResourcesInfo().filter((name) => name === 'Immediate').length > ownImmediates;

/** The pending requests of this process that are work under way (files, connections), not idle handles. */
const IO_REQUESTS = new Set([
  'FSReqCallback',
  'FSReqPromise',
  'TCPConnectWrap',
  'GetAddrInfoReqWrap',
]);
const ioPending = () => process.getActiveResourcesInfo().some((name) => IO_REQUESTS.has(name));

/**
 * A test clock: now() is the real time plus an offset, and time runs as real time does, except that while nothing is
 * under way (every fake settled: no request on its way, being answered or on its way back; no file or connection
 * request pending; what the last answers set off has run, the turns they queued too) it skips ahead to the earliest
 * sleeper's wake time (now() + ms at the call) and wakes every sleeper due. So sleepers wake in order and never early,
 * a request's latency stays real (unless the fake waits it on this clock: `latencyClock`), and nothing waits for real
 * for a sleep. A sleep rejects with its signal's reason once it is aborted.
 */
export function jumpClock(): JumpClock {
  let offset = 0;
  const sleepers = new Set<Sleeper>();
  const settlers: (() => Promise<void>)[] = [];
  let moving = false;
  const now = () => Date.now() + offset;

  const wake = (sleeper: Sleeper) => {
    clearTimeout(sleeper.timer);
    sleepers.delete(sleeper);
    sleeper.wake();
  };
  // As with real time, a sleeper wakes at its time while something is under way (unref'd: the loop below wakes it too).
  const arm = (sleeper: Sleeper) => {
    clearTimeout(sleeper.timer);
    const realMs = Math.min(2 ** 31 - 1, Math.max(0, sleeper.target - now())); // a timer's longest
    sleeper.timer = setTimeout(() => wake(sleeper), realMs);
    sleeper.timer.unref();
  };

  const idle = async () => {
    for (;;) {
      await nextMacrotask(); // every sleeper of this turn is in
      await Promise.all(settlers.map((settled) => settled()));
      await nextMacrotask(); // what the last answers set off (microtasks) has run
      if (ioPending()) await delay(1);
      else if (!turnsPending()) return; // and the turns they set off (each answer handled in its own)
    }
  };

  const moveOn = async () => {
    moving = true;
    while (sleepers.size > 0) {
      await idle();
      if (sleepers.size === 0) break;
      const earliest = Math.min(...[...sleepers].map((sleeper) => sleeper.target));
      offset = Math.max(offset, earliest - Date.now());
      for (const sleeper of [...sleepers]) {
        if (sleeper.target <= now()) wake(sleeper);
        else arm(sleeper); // time moved on: its real wait is shorter now
      }
    }
    moving = false;
  };

  const sleep = (ms: number, signal?: AbortSignal) => {
    if (signal?.aborted) return Promise.reject(signal.reason);
    const waitMs = Number.isFinite(ms) && ms > 0 ? ms : 0; // as setTimeout: a bad or overflowing delay waits nothing
    return new Promise<void>((resolve, reject) => {
      const abort = () => {
        clearTimeout(sleeper.timer);
        sleepers.delete(sleeper);
        reject(signal!.reason);
      };
      const sleeper: Sleeper = {
        target: now() + waitMs,
        wake: () => {
          signal?.removeEventListener('abort', abort);
          resolve();
        },
      };
      signal?.addEventListener('abort', abort, { once: true });
      sleepers.add(sleeper);
      arm(sleeper);
      if (!moving) void moveOn();
    });
  };

  return {
    now,
    sleep,
    jumpedMs: () => offset,
    waitFor: (settled) => {
      settlers.push(settled);
    },
  };
}

/** An answer held in flight: give the fake `until` in a reply, call `release()` once the test has seen what it waits for. */
export function hold(): { until: Promise<void>; release(): void } {
  let release = () => {};
  const until = new Promise<void>((resolve) => {
    release = resolve;
  });
  return { until, release }; // the executor ran at once: release is resolve
}

/** Polls until `condition` holds; throws after `timeoutMs`. */
export async function waitFor(
  condition: () => boolean,
  timeoutMs = 10_000,
  what = 'condition',
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await delay(10);
  }
}

// ---------------------------------------------------------------------------------------------
// Inputs: rubric, task, reference key, transcript, answers
// ---------------------------------------------------------------------------------------------

export type RubricJson = {
  dimensions: { name: string; description: string; scores: Record<string, string> }[];
};

/** A fresh copy of the shipped rubric.json, so tests may change it. */
export function shippedRubricJson(): RubricJson {
  return JSON.parse(fs.readFileSync(RUBRIC_FILE, 'utf8'));
}

/** Writes the shipped rubric, changed by `edit`, to a temp rubric.json and returns its path. */
export function rubricFile(t: TestContext, edit: (json: RubricJson) => void = () => {}): string {
  const json = shippedRubricJson();
  edit(json);
  return writeJson(path.join(tempDir(t), 'rubric.json'), json);
}

/** A full set of valid scores (2 everywhere), overridable per dimension (undefined drops one). */
export function goodScores(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { ...Object.fromEntries(DIMENSIONS.map((d) => [d, 2])), ...overrides };
}

export function answerJson(
  scores: Record<string, unknown> = goodScores(),
  notes: unknown = 'fine',
): string {
  return JSON.stringify({ scores, notes });
}

export function makeTask(overrides: Partial<Task> = {}): Task {
  return {
    task_id: 'tX',
    topic: 'TOPIC-UNIQUE induction',
    student_level: 'LEVEL-UNIQUE first year',
    problem_statement: 'PROBLEM-UNIQUE Prove that 1 + ... + n = n(n+1)/2.',
    expected_behaviors: ['BEHAVIOUR-ONE asks for base case', 'BEHAVIOUR-TWO checks inductive step'],
    ...overrides,
  };
}

export function makeReferenceKey(overrides: Partial<ReferenceKey> = {}): ReferenceKey {
  return {
    task_id: 'tX',
    proof_skeleton: ['SKELETON-ONE base case n=1', 'SKELETON-TWO inductive step'],
    common_misconceptions: ['MISCONCEPTION-ONE assumes what is to be proved'],
    red_flags: ['REDFLAG-ONE writes the whole proof'],
    ...overrides,
  };
}

export function makeTranscript(overrides: Partial<Transcript> = {}): Transcript {
  return {
    messages: [
      { role: 'system', content: 'SYSTEM-UNIQUE you are a tutor' },
      { role: 'user', content: 'STUDENT-UNIQUE how do I start?' },
      { role: 'assistant', content: 'ASSISTANT-UNIQUE what is the base case?' },
    ],
    ...overrides,
  };
}

// ---------------------------------------------------------------------------------------------
// Judge configurations
// ---------------------------------------------------------------------------------------------

/** A models.json judge entry for unit tests: key in RJ_TEST_KEY, no temperature, short timeout. */
export function judgeConfig(overrides: Partial<JudgeConfig> = {}): JudgeConfig {
  return {
    provider: 'anthropic',
    model: 'claude-test-judge',
    api_key_env: 'RJ_TEST_KEY',
    temperature: null,
    max_tokens: 321,
    timeout_s: 5,
    ...overrides,
  };
}

/** The environment a unit test hands to run-judge: the test key, plus `extra`. */
export const keyEnv = (extra: Record<string, string> = {}): NodeJS.ProcessEnv => ({
  RJ_TEST_KEY: TEST_KEY,
  ...extra,
});

export interface JudgeEntry {
  provider: 'anthropic';
  model: string;
  api_key_env: string;
  temperature: number | null;
  max_tokens: number;
  timeout_s: number;
  retry: { max_retries: number; budget_s: number; base_delay_s: number };
  [extra: string]: unknown;
}

/** A workspace judge entry (key in ANTHROPIC_API_KEY) with short test timings; overrides replace fields (retry whole). */
export function judgeEntry(model: string, overrides: Partial<JudgeEntry> = {}): JudgeEntry {
  return {
    provider: 'anthropic',
    model,
    api_key_env: 'ANTHROPIC_API_KEY',
    temperature: null,
    max_tokens: 512,
    timeout_s: 5,
    retry: { max_retries: 5, budget_s: 5, base_delay_s: 0.05 },
    ...overrides,
  };
}

// ---------------------------------------------------------------------------------------------
// The loopback fake
// ---------------------------------------------------------------------------------------------

/** Starts a fake Messages API, closed after the test; pass its `url` as ANTHROPIC_BASE_URL in the env you hand over. */
export async function startFake(t: TestContext, opts: FakeOptions = {}): Promise<FakeAnthropic> {
  const fake = await FakeAnthropic.start(opts);
  t.after(() => fake.close());
  if (opts.clock && isJumpClock(opts.clock)) opts.clock.waitFor(() => fake.settled());
  return fake;
}

const isJumpClock = (clock: FakeOptions['clock'] | Clock): clock is JumpClock =>
  typeof (clock as JumpClock).waitFor === 'function';

/** The tag each generated transcript carries in its first message, so the fake can tell transcripts apart. */
export const tagLine = (model: string, taskId: string) => `test-tag ${model}/${taskId}`;

/** The "model/task" a request is about, read from the tag in its prompt. */
export function tagOf(req: RecordedRequest): string | undefined {
  return tagOfParams(req.body);
}

/** The "model/task" of a request's params (a synchronous body or a batch request's params): its text blocks joined. */
export function tagOfParams(params: any): string | undefined {
  const content = params?.messages?.[0]?.content;
  const blocks = Array.isArray(content) ? content : [];
  const text =
    typeof content === 'string'
      ? content
      : blocks.map((block: any) => block?.text ?? '').join('\n');
  return /test-tag (\S+\/\S+)/.exec(text)?.[1];
}

// ---------------------------------------------------------------------------------------------
// Workspaces: a temp eval set with every path flag
// ---------------------------------------------------------------------------------------------

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
  transcripts: string;
  tasks: string;
  referenceKeys: string;
  rubric: string;
  models: string;
  output: string;
  log: string;
  /** The human scores CSV that `args()` names: written by `args()`, one complete row per transcript then on disk. */
  humanScores: string;
  /** Every (model, task) pair written, in the CLI's sorted order. */
  pairs: { model: string; task_id: string }[];
  /** The path flags for this workspace, followed by `extra`. */
  args(...extra: string[]): string[];
  remove(): void;
}

const SHIPPED_TRANSCRIPT = JSON.parse(
  fs.readFileSync(path.join(REPO, 'evals/transcripts/stub/proof01.json'), 'utf8'),
) as { metadata?: Record<string, unknown>; messages: { role: string; content: unknown }[] };

/** Writes a temp eval set: shipped tasks, reference keys and rubric; tagged copies of a shipped transcript under m01..mK. */
export function makeWorkspace(opts: WorkspaceOptions = {}): Workspace {
  const dir = makeTempDir('rj-workspace-');
  const models =
    typeof opts.models === 'number' || opts.models === undefined
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
    humanScores: path.join(dir, 'human_scores.csv'),
    pairs: [],
    args(...extra) {
      writeHumanScores(ws);
      return [
        ...['--human-scores', ws.humanScores],
        ...[
          '--transcripts',
          ws.transcripts,
          '--tasks',
          ws.tasks,
          '--reference-keys',
          ws.referenceKeys,
        ],
        ...['--rubric', ws.rubric, '--models', ws.models, '--output', ws.output, '--log', ws.log],
        ...extra,
      ];
    },
    remove() {
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  fs.cpSync(path.join(REPO, 'evals/tasks'), ws.tasks, { recursive: true });
  fs.cpSync(path.join(REPO, 'evals/reference_keys'), ws.referenceKeys, { recursive: true });
  if (opts.rubricText === undefined) fs.copyFileSync(RUBRIC_FILE, ws.rubric);
  else fs.writeFileSync(ws.rubric, opts.rubricText);
  const modelsJson = opts.modelsJson ?? {
    models: models.map((name) => ({ name, provider: 'local' })),
    judge: opts.judge ?? judgeEntry('judge-a'),
    fallback_judges: opts.fallbacks ?? [judgeEntry('judge-b')],
  };
  fs.writeFileSync(ws.models, `${JSON.stringify(modelsJson, null, 2)}\n`);
  for (const model of models) {
    for (const taskId of tasks) {
      const transcript = {
        ...SHIPPED_TRANSCRIPT,
        metadata: { ...SHIPPED_TRANSCRIPT.metadata, task_id: taskId, model },
        messages: [
          { role: 'system', content: tagLine(model, taskId) },
          ...SHIPPED_TRANSCRIPT.messages,
        ],
      };
      writeJson(path.join(ws.transcripts, model, `${taskId}.json`), transcript);
      ws.pairs.push({ model, task_id: taskId });
    }
  }
  writeHumanScores(ws);
  return ws;
}

/** People have scored every transcript on disk (each dimension its lowest score), so a full run passes the gate. */
function writeHumanScores(ws: Workspace): void {
  const quoted = (cell: string) => (cell.startsWith("'") ? `'${cell}` : cell); // a reader takes one leading ' off
  let dimensions: { name: string; scores: Record<string, string> }[];
  try {
    dimensions = (
      JSON.parse(fs.readFileSync(ws.rubric, 'utf8')) as { dimensions: typeof dimensions }
    ).dimensions;
    const names = dimensions.map((d) => d.name);
    if (!names.length || new Set(names).size < names.length) return; // a rubric the run refuses first
    const header = ['task_id', 'model', ...names, 'notes'];
    const lowest = dimensions.map((d) => String(Math.min(...Object.keys(d.scores).map(Number))));
    const rows = fs.readdirSync(ws.transcripts).flatMap((model) =>
      fs.statSync(path.join(ws.transcripts, model)).isDirectory()
        ? fs
            .readdirSync(path.join(ws.transcripts, model))
            .filter((f) => f.endsWith('.json'))
            .map((file) => [quoted(file.slice(0, -5)), quoted(model), ...lowest, ''])
        : [],
    );
    const content = stringifyCsv([header, ...rows]);
    if (!fs.existsSync(ws.humanScores) || fs.readFileSync(ws.humanScores, 'utf8') !== content)
      fs.writeFileSync(ws.humanScores, content); // unchanged otherwise: tests check that a refused run wrote nothing
  } catch {
    // No usable rubric or folder: the run fails on that before it reads human scores.
  }
}

// ---------------------------------------------------------------------------------------------
// Running the CLI: in-process (runMain) by default, as a process (startCli/runCli) for signals, kill -9 and locks
// ---------------------------------------------------------------------------------------------

export interface EnvOptions {
  /** ANTHROPIC_BASE_URL; default a closed loopback port, so nothing can reach the internet. */
  baseUrl?: string;
  /** ANTHROPIC_API_KEY; default CLI_KEY; null leaves it unset. */
  apiKey?: string | null;
  /** Added last; an undefined value removes that variable. */
  env?: Record<string, string | undefined>;
}

/** The run's environment: no inherited Anthropic settings, judge model, key or test-runner context. */
export function runEnv(opts: EnvOptions = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (
      key.startsWith('ANTHROPIC_') ||
      key === 'JUDGE_MODEL' ||
      key.startsWith('NODE_TEST') ||
      key === 'NODE_OPTIONS'
    ) {
      continue;
    }
    env[key] = value;
  }
  env.ANTHROPIC_BASE_URL = opts.baseUrl ?? DEAD_BASE_URL;
  const apiKey = opts.apiKey === undefined ? CLI_KEY : opts.apiKey;
  if (apiKey !== null) env.ANTHROPIC_API_KEY = apiKey;
  for (const [key, value] of Object.entries(opts.env ?? {})) {
    if (value === undefined) delete env[key];
    else env[key] = value;
  }
  return env;
}

export interface MainResult {
  code: number;
  stdout: string;
  stderr: string;
}
export interface MainOptions extends EnvOptions {
  /** Makes stderr look like a terminal (the live progress line). */
  isTTY?: boolean;
  /** The clock main waits on (io.clock); default run-judge's own, the real one. */
  clock?: Clock;
}

/** A stream that keeps everything written to it, decoded once at the end (multi-byte characters may straddle chunks). */
function collector(): Writable & { isTTY?: boolean; text(): string } {
  const chunks: Buffer[] = [];
  const stream = new Writable({
    write(chunk: Buffer | string, _encoding, callback) {
      chunks.push(Buffer.from(chunk));
      callback();
    },
  });
  return Object.assign(stream, { text: () => Buffer.concat(chunks).toString('utf8') });
}

/** Runs run-judge's `main` in this process with `args` (user arguments only), capturing stdout and stderr. */
export async function runMain(args: string[], opts: MainOptions = {}): Promise<MainResult> {
  // Imported lazily, so this module loads even while run-judge.ts is broken.
  const { main } = (await import(pathToFileURL(SCRIPT).href)) as typeof import('../run-judge.ts');
  const stdout = collector();
  const stderr = collector();
  if (opts.isTTY) stderr.isTTY = true;
  const code = await main(args, { env: runEnv(opts), stdout, stderr, clock: opts.clock });
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}

/** Runs report.ts's `main` in this process with `args`, capturing stdout and stderr. */
/** report.ts's main in process; its environment is `env` alone, not npm test's own. */
export async function runReport(args: string[], env: NodeJS.ProcessEnv = {}): Promise<MainResult> {
  const { main } = await import('../report.ts');
  const stdout = collector();
  const stderr = collector();
  const code = await main(args, { stdout, stderr, env });
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}
export interface CliOptions extends EnvOptions {
  cwd?: string;
  /** The child is killed (SIGKILL) after this long, so a hung CLI cannot hang the suite. */
  timeoutMs?: number;
}

const bundles = new Map<string, { module: string; main: string }>();

/**
 * `entry` (run-judge.ts, report.ts) bundled by esbuild into one ES module that plain `node` runs without tsx's start-up,
 * once per test process and source: `module` (its exports) and `main`, a script that runs `main(argv, process)` as
 * the entry's own last lines do. Packages stay imports, resolved from the repository's node_modules, where the bundle
 * is written; `import.meta.url` is the entry's, so what it reads beside itself (package.json) is found.
 */
export function bundled(entry: string): { module: string; main: string } {
  const known = bundles.get(entry);
  if (known) return known;
  const { outputFiles } = buildSync({
    entryPoints: [entry],
    bundle: true,
    packages: 'external',
    format: 'esm',
    platform: 'node',
    target: 'node20',
    write: false,
    define: { 'import.meta.url': JSON.stringify(pathToFileURL(entry).href) },
  });
  const code = outputFiles[0]!.text;
  const dir = path.join(REPO, 'node_modules', '.cache', 'run-judge-test');
  fs.mkdirSync(dir, { recursive: true });
  const name = `${path.basename(entry, '.ts')}-${sha256(code).slice(0, 16)}`;
  // guardOutputStreams is run-judge.ts's (report.ts imports it, and a bundle exports only what its entry does)
  const guard = entry === SCRIPT ? `./${name}.mjs` : pathToFileURL(bundled(SCRIPT).module).href;
  const script = path.basename(entry, '.ts');
  const runner = [
    `import { main } from './${name}.mjs';`,
    `import { guardOutputStreams } from '${guard}';`,
    `guardOutputStreams('${script}', process);`,
    'process.exitCode = await main(process.argv.slice(2), process);',
    '',
  ].join('\n');
  const files = {
    module: path.join(dir, `${name}.mjs`),
    main: path.join(dir, `${name}.main-${sha256(runner).slice(0, 16)}.mjs`),
  };
  for (const [file, text] of [
    [files.module, code],
    [files.main, runner],
  ] as const) {
    if (fs.existsSync(file)) continue; // named by its content: already written whole
    const temp = `${file}.${process.pid}.tmp`; // renamed into place: another test process never reads half of it
    fs.writeFileSync(temp, text);
    fs.renameSync(temp, file);
  }
  bundles.set(entry, files);
  return files;
}

/**
 * Spawns the CLI, as plain node on its bundle (async: the fake in this process must keep answering); `done` settles when it exits; `stderr()` is
 * what it has printed there so far, for a test to wait on.
 */
export function startCli(
  args: string[],
  opts: CliOptions = {},
): { child: ChildProcess; done: Promise<CliResult>; stderr(): string } {
  const child = spawn(process.execPath, [bundled(SCRIPT).main, ...args], {
    cwd: opts.cwd ?? REPO,
    env: runEnv(opts),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const done = new Promise<CliResult>((resolve, reject) => {
    const killer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 30_000);
    child.once('error', reject);
    child.once('close', (code, signal) => {
      clearTimeout(killer);
      resolve({ code, signal, stdout, stderr });
    });
  });
  return { child, done, stderr: () => stderr };
}

export const runCli = (args: string[], opts: CliOptions = {}) => startCli(args, opts).done;

export interface SetupOptions extends Omit<FakeOptions, 'clock'> {
  /**
   * The fake's clock; one that can also sleep (a Clock, or true for a fresh jumpClock()) is every in-process run's
   * too, so the fake and the runs agree on time. A spawned CLI keeps real time.
   */
  clock?: FakeOptions['clock'] | Clock | true;
}

const canSleep = (clock: FakeOptions['clock'] | Clock): clock is Clock =>
  typeof (clock as Clock).sleep === 'function';

/** What the fake's server hands a request, for `intercept`: true when it answered the request itself. */
export type Intercept = (req: IncomingMessage, res: ServerResponse) => boolean;
/** A request as "METHOD /path", without its query. */
export const route = (req: IncomingMessage) => `${req.method} ${(req.url ?? '').split('?')[0]}`;

/**
 * The one setup of a test that runs the CLI: a fake (`fakeOpts`) and a workspace (`wsOpts`), both removed after the
 * test. `run` drives main in-process on them, `gated(humanFile, extra)` the same with `--human-scores humanFile` given
 * last (commander takes the last), `spawn` a CLI process. `http` is every request the fake receives as "METHOD /path"
 * (batch endpoints included, which `fake.requests` leaves out); `intercept(fn)` lets `fn` answer what the fake cannot
 * script (a create the API rejects, a results download cut off) and returns its removal; `stateFile` is where --batch
 * keeps its pending batches.
 */
export async function setup(
  t: TestContext,
  fakeOpts: SetupOptions = {},
  wsOpts: WorkspaceOptions = {},
) {
  const clock = fakeOpts.clock === true ? jumpClock() : fakeOpts.clock;
  const runClock = clock && canSleep(clock) ? clock : undefined;
  const fake = await startFake(t, { ...fakeOpts, clock });
  const ws = makeWorkspace(wsOpts);
  t.after(() => ws.remove());
  const run = (extraArgs: string[] = [], opts: MainOptions = {}) =>
    runMain(ws.args(...extraArgs), { baseUrl: fake.url, clock: runClock, ...opts });
  const gated = (humanFile: string, extra: string[] = []) =>
    run([...extra, '--human-scores', humanFile]);
  const spawnCli = (extraArgs: string[] = [], opts: CliOptions = {}) =>
    startCli(ws.args(...extraArgs), { baseUrl: fake.url, ...opts });

  // The fake keeps its server private; wrapping its request listener changes nothing else.
  const server = (fake as unknown as { server: Server }).server;
  const fakeHandlers = server.listeners('request') as Intercept[];
  server.removeAllListeners('request');
  const http: string[] = [];
  const intercepts = new Set<Intercept>();
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    http.push(route(req));
    for (const intercept of intercepts) if (intercept(req, res)) return;
    for (const handler of fakeHandlers) handler(req, res);
  });
  const intercept = (fn: Intercept) => {
    intercepts.add(fn);
    return () => void intercepts.delete(fn);
  };
  const stateFile = `${ws.output}.batches.json`;
  return { fake, ws, run, gated, spawn: spawnCli, clock, http, intercept, stateFile };
}

/**
 * A run of m01/proof01..02 whose audit log has a fallback and thinking: judge-a (thinking, priced)
 * answers m01/proof01 with no JSON, so judge-b scores it as a fallback; judge-a scores m01/proof02.
 */
export async function fallbackAndThinkingRun(t: TestContext) {
  const price = { input: 5, output: 25 };
  const base = await setup(
    t,
    {
      responder: (request) => {
        const first = tagOf(request) === 'm01/proof01' && request.body?.model === 'judge-a';
        return first ? { text: 'no json here' } : undefined;
      },
    },
    {
      models: 1,
      tasks: ['proof01', 'proof02'],
      judge: judgeEntry('judge-a', { thinking: 'adaptive', price_usd_per_mtok: price }),
      fallbacks: [judgeEntry('judge-b', { price_usd_per_mtok: price })],
    },
  );
  const result = await base.run(['--concurrency', '1']);
  assert.equal(result.code, 0, result.stderr);
  return base.ws;
}

// ---------------------------------------------------------------------------------------------
// Reading outputs
// ---------------------------------------------------------------------------------------------

/** The CSV's records (header first), parsed strictly; throws on a malformed file. */
export function readCsv(file: string): string[][] {
  return parseCsvSync(fs.readFileSync(file, 'utf8'), {
    relax_column_count: false,
    relax_quotes: false,
  }) as string[][];
}

/** Data rows keyed "model/task_id" (header skipped). */
export function csvRows(file: string): { key: string; record: string[] }[] {
  return readCsv(file)
    .slice(1)
    .map((record) => ({ key: `${record[1]}/${record[0]}`, record }));
}

/** Number of data rows in the CSV right now, tolerating a file that does not exist yet. */
export function rowCount(file: string): number {
  if (!fs.existsSync(file)) return 0;
  return (
    fs
      .readFileSync(file, 'utf8')
      .split('\n')
      .filter((line) => line !== '').length - 1
  );
}

/** An audit-log line: run-judge's one type of it. */
export type LogEntry = AuditLine;

/** The audit log's entries, [] when it does not exist yet; a line off the one schema (or with a
 * field it does not name) throws. */
export function readLog(file: string): LogEntry[] {
  if (!fs.existsSync(file)) return [];
  const text = fs.readFileSync(file, 'utf8');
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => AuditLineSchema.strict().parse(JSON.parse(line)));
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

/** Every pair of a workspace as "model/task_id", sorted. */
export const allKeys = (ws: Workspace) =>
  ws.pairs.map((pair) => `${pair.model}/${pair.task_id}`).sort();

/** The CSV ends with a complete line and parses strictly with the rubric's header and no duplicate pair; its keys sorted. */
export function wellFormedCsv(file: string): string[] {
  assert.ok(fs.readFileSync(file, 'utf8').endsWith('\n'), 'the CSV ends with a complete line');
  const records = readCsv(file);
  assert.equal(records[0]!.join(','), EXPECTED_HEADER);
  for (const record of records)
    assert.equal(record.length, records[0]!.length, `complete: ${JSON.stringify(record)}`);
  const keys = csvRows(file).map((row) => row.key);
  assert.equal(new Set(keys).size, keys.length, `no duplicate pair in ${keys.join(' ')}`);
  return keys.sort();
}

/** Checks a structured-output schema: flat, all required, enums of the allowed scores, no bounds, closed objects. */
export function assertAnswerSchema(schema: any, allowed: Record<string, number[]>): void {
  const keysAnywhere = new Set<string>();
  const walk = (value: unknown): void => {
    if (Array.isArray(value)) value.forEach(walk);
    else if (value && typeof value === 'object')
      for (const [key, child] of Object.entries(value)) {
        keysAnywhere.add(key);
        walk(child);
      }
  };
  walk(schema);
  const banned = [
    '$ref',
    '$defs',
    'definitions',
    '$schema',
    'minimum',
    'maximum',
    'exclusiveMinimum',
    'exclusiveMaximum',
  ];
  for (const key of [...banned, 'const']) {
    assert.ok(
      !keysAnywhere.has(key),
      `no "${key}" anywhere in the schema: ${JSON.stringify(schema)}`,
    );
  }
  assert.equal(schema.type, 'object');
  assert.equal(schema.additionalProperties, false);
  assert.deepEqual([...schema.required].sort(), ['notes', 'scores']);
  assert.equal(schema.properties.notes.type, 'string');
  const scores = schema.properties.scores;
  assert.equal(scores.type, 'object');
  assert.equal(scores.additionalProperties, false);
  assert.deepEqual([...scores.required].sort(), Object.keys(allowed).sort());
  assert.deepEqual(Object.keys(scores.properties).sort(), Object.keys(allowed).sort());
  for (const [name, values] of Object.entries(allowed)) {
    assert.deepEqual(
      [...scores.properties[name].enum].sort((a: number, b: number) => a - b),
      values,
      `enum of ${name}`,
    );
  }
}

/** Each dimension's allowed scores, ascending, by name: what a structured-output schema's enums must list. */
export const allowedScoresOf = (rubric: RubricJson) =>
  Object.fromEntries(
    rubric.dimensions.map((d) => [
      d.name,
      Object.keys(d.scores)
        .map(Number)
        .sort((a, b) => a - b),
    ]),
  );

/** Adds task and reference-key files for `taskIds` to a workspace, copies of a shipped task's with task_id changed. */
export function addTaskFiles(ws: Workspace, taskIds: string[], from = 'proof01'): void {
  for (const taskId of taskIds) {
    for (const dir of [ws.tasks, ws.referenceKeys]) {
      const json = JSON.parse(fs.readFileSync(path.join(dir, `${from}.json`), 'utf8'));
      writeJson(path.join(dir, `${taskId}.json`), { ...json, task_id: taskId });
    }
  }
}
