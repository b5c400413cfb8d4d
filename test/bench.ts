// npm run bench: speed and memory figures, each a ratio to its ideal measured in the same run.
// Not a test: the machines are shared and noisy, so figures are printed, and targets are checked by reading them.
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { FakeAnthropic } from '../fakes/anthropic.ts';
import type { FakeOptions } from '../fakes/anthropic.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SCRIPT = path.join(ROOT, 'run-judge.ts');
const TASK_IDS = ['proof01', 'proof02', 'proof03'];

interface Exit {
  code: number | null;
  ms: number;
  stderr: string;
  exitedAt: number;
}

/** Runs a command to completion, timing it from spawn to exit. */
function run(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
  cwd = ROOT,
  stdout: 'ignore' | 'inherit' = 'ignore',
): Promise<Exit> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env, stdio: ['ignore', stdout, 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk) => {
      stderr += chunk;
    });
    child.on('error', reject);
    child.on('exit', (code) =>
      resolve({ code, ms: performance.now() - started, stderr, exitedAt: Date.now() }),
    );
  });
}

/** A temp eval set of `count` transcripts (copies of a shipped one under generated model folders). */
function makeEvalSet(
  count: number,
  judge: Record<string, unknown> = {},
): { dir: string; args: string[] } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'run-judge-bench-'));
  for (const sub of ['tasks', 'reference_keys'])
    fs.cpSync(path.join(ROOT, 'evals', sub), path.join(dir, sub), { recursive: true });
  fs.copyFileSync(path.join(ROOT, 'rubric.json'), path.join(dir, 'rubric.json'));
  const baseJudge = {
    provider: 'anthropic',
    api_key_env: 'ANTHROPIC_API_KEY',
    temperature: null,
    max_tokens: 512,
    timeout_s: 30,
  };
  fs.writeFileSync(
    path.join(dir, 'models.json'),
    JSON.stringify({
      judge: { ...baseJudge, model: 'judge-primary', ...judge },
      fallback_judges: [{ ...baseJudge, model: 'judge-fallback' }],
    }),
  );
  for (let i = 0; i < count; i++) {
    const taskId = TASK_IDS[i % TASK_IDS.length]!;
    const model = `m${String(Math.floor(i / TASK_IDS.length)).padStart(5, '0')}`;
    const source = JSON.parse(
      fs.readFileSync(path.join(ROOT, 'evals/transcripts/stub', `${taskId}.json`), 'utf8'),
    );
    delete source.metadata;
    fs.mkdirSync(path.join(dir, 'transcripts', model), { recursive: true });
    fs.writeFileSync(
      path.join(dir, 'transcripts', model, `${taskId}.json`),
      JSON.stringify(source),
    );
  }
  const files = {
    transcripts: 'transcripts',
    tasks: 'tasks',
    'reference-keys': 'reference_keys',
    rubric: 'rubric.json',
  };
  const outputs = { models: 'models.json', output: 'scores.csv', log: 'log.jsonl' };
  const args = Object.entries({ ...files, ...outputs }).flatMap(([flag, file]) => [
    `--${flag}`,
    path.join(dir, file),
  ]);
  // The bench measures judging, not the protocol: no human scores, so its full runs go --before-human-scoring.
  return { dir, args: [...args, '--before-human-scoring'] };
}

const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const fmt = (ratio: number) => `${ratio.toFixed(2)}x`;
const csvRows = (dir: string) =>
  fs.readFileSync(path.join(dir, 'scores.csv'), 'utf8').trim().split('\n').length - 1;
const logEntries = (dir: string) =>
  fs
    .readFileSync(path.join(dir, 'log.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { status: string; judge: string | null });
const judgeEnv = (fake: FakeAnthropic) => ({
  ...process.env,
  ANTHROPIC_BASE_URL: fake.url,
  ANTHROPIC_API_KEY: 'sk-bench',
});
/** The run's own wall time, from its summary line (excludes tsx's start-up, measured in [startup]). */
const summaryWallMs = (stderr: string) =>
  Number(/wall time ([\d.]+) s/.exec(stderr)?.[1] ?? NaN) * 1000;

/**
 * Anthropic's API tells its limits on every answer (`anthropic-ratelimit-*`): the fake of the figures
 * that measure speed does too, with limits these runs never reach. Without them a judge starts slowly
 * (2 requests, 2 more an answer), as it must against a server that tells nothing.
 */
const API_LIMITS: FakeOptions = {
  buckets: { requests: { capacity: 100_000, perSecond: 100_000 } },
};

/** Judges `count` fresh transcripts with the CLI against a fake started with `options`, closed after. */
async function judgeAgainstFake(count: number, options: FakeOptions, concurrency: number) {
  const fake = await FakeAnthropic.start(options);
  const { dir, args } = makeEvalSet(count);
  const cli = ['--import', 'tsx', SCRIPT, ...args, '--concurrency', String(concurrency)];
  const result = await run(process.execPath, cli, judgeEnv(fake));
  await fake.close();
  return { fake, dir, result };
}

async function benchStartup(): Promise<void> {
  const empty = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'run-judge-bench-')), 'empty.ts');
  fs.writeFileSync(empty, '');
  const oneTranscript = ['--task', 'proof01', '--model', 'stub'];
  const baseline: number[] = [];
  const dryRun: number[] = [];
  const firstRequest: number[] = [];

  // A full run on the same data as the dry-run: one spot check, its row rescored each time.
  const fake = await FakeAnthropic.start({ latencyMs: 0 });
  const outputs = fs.mkdtempSync(path.join(os.tmpdir(), 'run-judge-bench-'));
  const output = [
    '--output',
    path.join(outputs, 'scores.csv'),
    '--log',
    path.join(outputs, 'log.jsonl'),
  ];
  const fullRun = [SCRIPT, ...oneTranscript, ...output, '--rescore'];

  await run('npx', ['tsx', SCRIPT, '--dry-run', ...oneTranscript]); // warm tsx's compile cache
  for (let i = 0; i < 10; i++) {
    baseline.push((await run('npx', ['tsx', empty])).ms);
    dryRun.push((await run('npx', ['tsx', SCRIPT, '--dry-run', ...oneTranscript])).ms);
    const before = fake.requests.length;
    const spawnedAt = Date.now();
    await run('npx', ['tsx', ...fullRun], judgeEnv(fake));
    firstRequest.push((fake.requests[before]?.at ?? NaN) - spawnedAt);
  }
  await fake.close();

  const ratio = median(dryRun) / median(baseline);
  console.log(
    `[startup] dry-run ${median(dryRun).toFixed(0)} ms vs npx tsx on an empty file ${median(baseline).toFixed(0)} ms (medians of 10, interleaved): ${fmt(ratio)} (target <= 1.4x)`,
  );
  const first = median(firstRequest) / median(dryRun);
  console.log(
    `[startup] a full run's first request leaves ${median(firstRequest).toFixed(0)} ms after its start, vs the dry-run's ${median(dryRun).toFixed(0)} ms on the same transcript (medians of 10, interleaved): ${fmt(first)} (target <= 1.3x)`,
  );
}

/** Judging time: from the first request reaching the fake to the process exit (after the last row), start-up excluded. */
const judgingMs = (fake: FakeAnthropic, result: Exit) =>
  result.exitedAt - (fake.requests[0]?.at ?? NaN);

async function benchConcurrency(): Promise<void> {
  const count = 200,
    latencyMs = 200,
    concurrency = 16,
    repeats = 3;
  const ideal = Math.ceil(count / concurrency) * latencyMs;
  const runs: {
    judging: number;
    run: number;
    process: number;
    rows: number;
    code: number | null;
  }[] = [];
  for (let i = 0; i < repeats; i++) {
    const options = Object.assign({ latencyMs }, API_LIMITS);
    const { fake, dir, result } = await judgeAgainstFake(count, options, concurrency);
    runs.push({
      judging: judgingMs(fake, result),
      run: summaryWallMs(result.stderr),
      process: result.ms,
      rows: csvRows(dir),
      code: result.code,
    });
  }
  const ratio = (key: 'judging' | 'run' | 'process') =>
    fmt(median(runs.map((r) => r[key])) / ideal);
  console.log(
    `[a] ${count} transcripts, ${latencyMs} ms latency, concurrency ${concurrency}, ideal ceil(${count}/${concurrency}) x ${latencyMs} ms = ${ideal} ms (medians of ${repeats}): judging (first request to exit) ${ratio('judging')} (target <= 1.25x; runs ${runs.map((r) => fmt(r.judging / ideal)).join(' ')}); the run's own wall time, with loading the SDK and fetch ${ratio('run')}; whole process with tsx start-up ${ratio('process')}; rows ${runs.map((r) => r.rows).join('/')}, exit ${runs.map((r) => r.code).join('/')}`,
  );
}

/** The unit each bucket counts, as the bench reports it. */
const BUCKET_UNITS = {
  requests: 'requests',
  inputTokens: 'input tokens',
  outputTokens: 'output tokens',
} as const;
const num = (value: number) => Math.round(value).toLocaleString('en-US');
/** Reads a file the run should have written; a missing one (a crashed run) reads as nothing, not a bench stopped. */
const orNothing = <T>(read: () => T, nothing: T): T => {
  try {
    return read();
  } catch {
    return nothing;
  }
};

async function benchTokenBuckets(): Promise<void> {
  const count = 80,
    concurrency = 16,
    latencyMs = 200;
  const scenarios: { name: string; what: string; buckets: NonNullable<FakeOptions['buckets']> }[] =
    [
      {
        name: 'A',
        what: 'requests bucket 8/s (capacity 8)',
        buckets: { requests: { capacity: 8, perSecond: 8 } },
      },
      {
        name: 'B',
        what: 'input-token bucket 4,000/s (capacity 4,000), no request limit',
        buckets: { inputTokens: { capacity: 4000, perSecond: 4000 } },
      },
    ];
  for (const scenario of scenarios) {
    const { fake, dir, result } = await judgeAgainstFake(
      count,
      { latencyMs, buckets: scenario.buckets },
      concurrency,
    );
    const runMs = judgingMs(fake, result);
    // What the 80 requests cost each bucket: the fake's own counts per admitted request, times 80.
    const admitted = fake.charged.requests;
    const perRequest = {
      requests: 1,
      inputTokens: fake.charged.inputTokens / admitted,
      outputTokens: fake.charged.outputTokens / admitted,
    };
    const limits = (Object.keys(BUCKET_UNITS) as (keyof typeof BUCKET_UNITS)[]).flatMap((name) => {
      const bucket = scenario.buckets[name];
      if (!bucket) return [];
      const total = count * perRequest[name];
      const ms = (Math.max(0, total - bucket.capacity) / bucket.perSecond) * 1000;
      const formula = `max(0, ${count} x ${num(perRequest[name])} ${BUCKET_UNITS[name]} - ${num(bucket.capacity)}) / ${num(bucket.perSecond)}/s`;
      return [{ ms, formula }];
    });
    const binding = limits.reduce((a, b) => (b.ms > a.ms ? b : a));
    const bound = binding.ms + latencyMs;
    const entries = orNothing(() => logEntries(dir), []);
    const failed = entries.filter((entry) => entry.status !== 'scored').length;
    const fallbacks = entries.filter(
      (entry) => entry.status === 'scored' && entry.judge !== 'judge-primary',
    ).length;
    const requests = fake.requests.length;
    const cacheReads = fake.charged.cacheReadTokens
      ? ` (+ ${num(fake.charged.cacheReadTokens / admitted)} read from the cache)`
      : '';
    console.log(
      `[b-${scenario.name}] ${count} transcripts, ${scenario.what}, ${latencyMs} ms latency, concurrency ${concurrency}: ` +
        `judging (first request to exit) ${runMs.toFixed(0)} ms / bucket bound ${binding.formula} + ${latencyMs} ms = ${bound.toFixed(0)} ms = ${fmt(runMs / bound)} (target <= 1.15x); ` +
        `429s ${fake.count429} of ${requests} requests (${((100 * fake.count429) / requests).toFixed(1)}%, target <= 10%); ` +
        `failed rows ${failed}; fallbacks ${fallbacks} (target 0); rows ${orNothing(() => csvRows(dir), NaN)}, exit ${result.code}; ` +
        `input tokens per request as the fake counted them ${num(perRequest.inputTokens)}${cacheReads} (mean of ${admitted} admitted)`,
    );
  }
}

/** What `npm run judge` passes node before run-judge.ts (package.json): the figures start it so. */
const JUDGE_NODE = /^node (.*) run-judge\.ts$/
  .exec(
    JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).scripts.judge as string,
  )![1]!
  .split(' ');

/** Peak RSS (KiB) of one CLI process judging `count` transcripts, read by GNU time. */
async function peakRss(count: number): Promise<number> {
  const fake = await FakeAnthropic.start({ latencyMs: 0 });
  const { dir, args } = makeEvalSet(count);
  const result = await run(
    '/usr/bin/time',
    [
      '-f',
      'maxrss_kib=%M',
      process.execPath,
      ...JUDGE_NODE,
      SCRIPT,
      ...args,
      '--concurrency',
      '16',
    ],
    judgeEnv(fake),
  );
  await fake.close();
  if (csvRows(dir) !== count)
    throw new Error(
      `peak RSS run wrote ${csvRows(dir)} rows, expected ${count}: ${result.stderr.slice(-500)}`,
    );
  return Number(/maxrss_kib=(\d+)/.exec(result.stderr)?.[1] ?? NaN);
}

/** Memory stays flat however many transcripts there are: twice as many take no more. */
async function benchMemory(): Promise<void> {
  const mib = (kib: number) => `${(kib / 1024).toFixed(1)} MiB`;
  const small = await peakRss(50);
  const large = await peakRss(5000);
  const larger = await peakRss(10_000);
  console.log(
    `[c] peak RSS started as npm run judge starts it (node ${JUDGE_NODE.join(' ')}): 10000 over 5000 transcripts ` +
      `${mib(larger)} / ${mib(large)} = ${fmt(larger / large)} (target <= 1.2x); 5000 over 50 ${mib(large)} / ` +
      `${mib(small)} = ${fmt(large / small)}`,
  );
}

async function benchBatch(): Promise<void> {
  const count = 200;
  const fake = await FakeAnthropic.start({ latencyMs: 50, batch: { pollsUntilEnded: 2 } });
  const { dir, args } = makeEvalSet(count);
  const result = await run(
    process.execPath,
    ['--import', 'tsx', SCRIPT, ...args, '--batch', '--poll-interval', '0.2'],
    judgeEnv(fake),
  );
  await fake.close();
  const endedAt = fake.batches[0]?.endedAt ?? NaN;
  const lastRowAt = fs.statSync(path.join(dir, 'scores.csv')).mtimeMs;
  const perThousand = ((lastRowAt - endedAt) / count) * 1000;
  console.log(
    `[d] batch mode, ${count} transcripts: batch creates ${fake.batches.length} (must be 1), synchronous message calls ${fake.requests.length} (must be 0), rows ${csvRows(dir)} (must be ${count}); batch end to last row ${(lastRowAt - endedAt).toFixed(0)} ms = ${perThousand.toFixed(0)} ms per 1,000 results; exit ${result.code}`,
  );
}

/** The bare fetch loop (test/bench/bare-loop.ts) the figures `loop1000` and `loop120` compare run-judge with. */
const BARE_LOOP = path.join(ROOT, 'test/bench/bare-loop.ts');
/** An eval set's arguments with its outputs (scores.csv, log.jsonl) moved to `outDir`: a fresh output per run. */
const withOutputs = (args: string[], dir: string, outDir: string) =>
  args.map((arg) =>
    arg.startsWith(dir + path.sep) && /\/(scores\.csv|log\.jsonl)$/.test(arg)
      ? path.join(outDir, path.basename(arg))
      : arg,
  );
const lineCount = (file: string) =>
  orNothing(() => fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).length, 0);

/**
 * run-judge side by side with a bare fetch loop on the same `count` transcripts, the same fake latency and
 * concurrency, both started as `npm run judge` starts run-judge (node with its `--import`), runs
 * interleaved: whole-process wall time (spawn to exit), and for information from the first request to exit.
 */
async function benchBareLoop(
  name: string,
  count: number,
  latencyMs: number,
  concurrency: number,
  target: number,
): Promise<void> {
  const repeats = 5; // the per-run ratios spread widely on a shared 2-core machine
  const { dir, args } = makeEvalSet(count);
  const node = JUDGE_NODE;
  const fresh = () => fs.mkdtempSync(path.join(os.tmpdir(), 'run-judge-bench-out-'));
  const judgeOnce = async (set: { dir: string; args: string[] }) => {
    const fake = await FakeAnthropic.start(Object.assign({ latencyMs }, API_LIMITS));
    const out = fresh();
    const cli = [
      ...node,
      SCRIPT,
      ...withOutputs(set.args, set.dir, out),
      '--concurrency',
      String(concurrency),
    ];
    const result = await run(process.execPath, cli, judgeEnv(fake));
    await fake.close();
    const sizes = fake.requests.map((r) => Buffer.byteLength(JSON.stringify(r.body)));
    const bytes = sizes.reduce((a, b) => a + b, 0) / sizes.length;
    return { result, fake, bytes, rows: orNothing(() => csvRows(out), NaN) };
  };
  const loopOnce = async (bytes: number) => {
    const fake = await FakeAnthropic.start({ latencyMs });
    const output = path.join(fresh(), 'lines.txt');
    const cli = [
      ...node,
      BARE_LOOP,
      path.join(dir, 'transcripts'),
      output,
      String(concurrency),
      String(Math.round(bytes)),
    ];
    const result = await run(process.execPath, cli, judgeEnv(fake));
    await fake.close();
    return { result, fake, rows: lineCount(output) };
  };

  // Warm-up (tsx's compile cache for both scripts), and the size of run-judge's requests, which the loop's match.
  const small = makeEvalSet(30);
  const warm = await judgeOnce(small);
  const bytes = warm.bytes;
  await loopOnce(bytes);

  const judge: { process: number; judging: number; rows: number; code: number | null }[] = [];
  const loop: { process: number; judging: number; rows: number; code: number | null }[] = [];
  for (let i = 0; i < repeats; i++) {
    const j = await judgeOnce({ dir, args });
    judge.push({
      process: j.result.ms,
      judging: judgingMs(j.fake, j.result),
      rows: j.rows,
      code: j.result.code,
    });
    const l = await loopOnce(bytes);
    loop.push({
      process: l.result.ms,
      judging: judgingMs(l.fake, l.result),
      rows: l.rows,
      code: l.result.code,
    });
  }
  const med = (runs: typeof judge, key: 'process' | 'judging') => median(runs.map((r) => r[key]));
  const ratio = med(judge, 'process') / med(loop, 'process');
  const runs = judge.map((r, i) => fmt(r.process / loop[i]!.process)).join(' ');
  console.log(
    `[${name}] ${num(count)} transcripts, ${latencyMs} ms latency, concurrency ${concurrency}, run-judge vs a bare fetch loop (test/bench/bare-loop.ts), both whole-process wall time started as npm run judge starts run-judge (node ${node.join(' ')}), medians of ${repeats}, interleaved: ` +
      `run-judge ${med(judge, 'process').toFixed(0)} ms / bare loop ${med(loop, 'process').toFixed(0)} ms = ${fmt(ratio)} (target <= ${fmt(target)}; runs ${runs}); ` +
      `first request to exit ${med(judge, 'judging').toFixed(0)} / ${med(loop, 'judging').toFixed(0)} ms = ${fmt(med(judge, 'judging') / med(loop, 'judging'))}; ` +
      `request body ${num(bytes)} bytes each; rows ${judge.map((r) => r.rows).join('/')} vs lines ${loop.map((r) => r.rows).join('/')}, exit ${judge.map((r) => r.code).join('/')} vs ${loop.map((r) => r.code).join('/')}; load average ${os.loadavg()[0]!.toFixed(1)} on ${os.cpus().length} cores`,
  );
}

/**
 * Not a figure (left out of a full run): run-judge and the bare loop on the `loop1000` workload, each under
 * `node --cpu-prof` started as `npm run judge` starts run-judge, and each main thread's profile summarized by
 * test/bench/profile-summary.ts (their shares side by side show where run-judge spends its time over the loop).
 */
async function benchProfile(): Promise<void> {
  const count = 1000,
    latencyMs = 50,
    concurrency = 32;
  const { dir, args } = makeEvalSet(count);
  const profiled = async (what: string, script: string[], rows: () => number) => {
    const fake = await FakeAnthropic.start({ latencyMs });
    const profiles = fs.mkdtempSync(path.join(os.tmpdir(), 'run-judge-bench-profile-'));
    const node = ['--cpu-prof', '--cpu-prof-dir', profiles, ...JUDGE_NODE];
    const result = await run(process.execPath, [...node, ...script], judgeEnv(fake));
    await fake.close();
    const sizes = fake.requests.map((r) => Buffer.byteLength(JSON.stringify(r.body)));
    // The main thread's profile is the largest; tsx's loader thread writes a small one too.
    const main = fs
      .readdirSync(profiles)
      .map((name) => path.join(profiles, name))
      .sort((a, b) => fs.statSync(b).size - fs.statSync(a).size)[0]!;
    console.log(
      `[profile] ${what}, ${num(count)} transcripts, ${latencyMs} ms latency, concurrency ${concurrency}: ${result.ms.toFixed(0)} ms, rows ${orNothing(rows, NaN)}, exit ${result.code}`,
    );
    const summary = path.join(ROOT, 'test/bench/profile-summary.ts');
    await run(
      process.execPath,
      ['--import', 'tsx', summary, main, '10'],
      process.env,
      ROOT,
      'inherit',
    );
    return sizes.reduce((a, b) => a + b, 0) / sizes.length;
  };
  const bytes = await profiled(
    'run-judge',
    [SCRIPT, ...args, '--concurrency', String(concurrency)],
    () => csvRows(dir),
  );
  const lines = path.join(dir, 'lines.txt');
  const loop = [
    BARE_LOOP,
    path.join(dir, 'transcripts'),
    lines,
    String(concurrency),
    String(Math.round(bytes)),
  ];
  await profiled('bare loop', loop, () => lineCount(lines));
}

/** A report's inputs: `count` transcripts (10 tutor models), each scored by the judge and by 4
 * people on 3 dimensions (scales 0-2, 0-4 and {0, 2, 4}), the scores near a seeded true level. */
function makeReportSet(count: number): string[] {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'run-judge-bench-report-'));
  const scales = { correctness: [0, 1, 2], scaffolding: [0, 1, 2, 3, 4], diagnosis: [0, 2, 4] };
  const dimensions = Object.entries(scales).map(([name, scores]) => {
    const levels = Object.fromEntries(scores.map((score) => [String(score), `level ${score}`]));
    return { name, description: name, scores: levels };
  });
  fs.writeFileSync(path.join(dir, 'rubric.json'), JSON.stringify({ dimensions }));

  let state = 12345;
  const random = () => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return state / 2147483648;
  };
  const near = (scores: number[], level: number) => {
    const at = Math.round(level * (scores.length - 1) + (random() - 0.5) * 1.5);
    return scores[Math.min(scores.length - 1, Math.max(0, at))]!;
  };
  const names = Object.keys(scales);
  const judge = [`task_id,model,${names.join(',')},notes`];
  const humans = [`task_id,model,${names.join(',')},notes,scorer`];
  for (let i = 0; i < count; i++) {
    const model = `m${i % 10}`;
    const task = `task${String(Math.floor(i / 10)).padStart(5, '0')}`;
    const levels = Object.values(scales).map(() => random());
    const scoresOf = () => Object.values(scales).map((scores, d) => near(scores, levels[d]!));
    judge.push(`${task},${model},${scoresOf().join(',')},ok`);
    for (const scorer of ['ann', 'bob', 'cat', 'dan']) {
      humans.push(`${task},${model},${scoresOf().join(',')},,${scorer}`);
    }
  }
  fs.writeFileSync(path.join(dir, 'scores.csv'), `${judge.join('\n')}\n`);
  fs.writeFileSync(path.join(dir, 'human_scores.csv'), `${humans.join('\n')}\n`);
  return [
    '--scores',
    path.join(dir, 'scores.csv'),
    '--human-scores',
    path.join(dir, 'human_scores.csv'),
    '--rubric',
    path.join(dir, 'rubric.json'),
    '--log',
    path.join(dir, 'no-log.jsonl'),
    '--format',
    'json',
  ];
}

/** Runs `report.ts ARGS` under GNU time: its wall time and its CPU time (user + system), in ms. */
async function timedReport(args: string[]) {
  const report = path.join(ROOT, 'report.ts');
  const timed = ['-f', 'cpu_s=%U+%S', process.execPath, '--import', 'tsx', report, ...args];
  const result = await run('/usr/bin/time', timed);
  const cpu = /cpu_s=([\d.]+)\+([\d.]+)/.exec(result.stderr);
  const cpuMs = (Number(cpu?.[1] ?? NaN) + Number(cpu?.[2] ?? NaN)) * 1000;
  return { wall: result.ms, cpu: cpuMs, code: result.code };
}

async function benchReport(): Promise<void> {
  const sets = { 1000: makeReportSet(1000), 2000: makeReportSet(2000) };
  const help = { wall: [] as number[], cpu: [] as number[] };
  const runs = {
    1000: { wall: [] as number[], cpu: [] as number[] },
    2000: { wall: [] as number[], cpu: [] as number[] },
  };
  const exits = new Set<number | null>();
  await timedReport(['--help']); // warm tsx's compile cache
  for (let i = 0; i < 5; i++) {
    const shown = await timedReport(['--help']);
    help.wall.push(shown.wall);
    help.cpu.push(shown.cpu);
    for (const count of [1000, 2000] as const) {
      const result = await timedReport(sets[count]);
      exits.add(result.code);
      runs[count].wall.push(result.wall);
      runs[count].cpu.push(result.cpu);
    }
  }
  const less = (count: 1000 | 2000, key: 'wall' | 'cpu') =>
    median(runs[count][key]) - median(help[key]);
  const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
  console.log(
    `[report] 2,000 transcripts x 4 scorers x 3 dimensions, report time (the command less report.ts --help, medians of 5, interleaved; target <= 3 s): ` +
      `wall ${seconds(less(2000, 'wall'))} (${seconds(median(runs[2000].wall))} less ${seconds(median(help.wall))}), ` +
      `CPU ${seconds(less(2000, 'cpu'))} (${seconds(median(runs[2000].cpu))} less ${seconds(median(help.cpu))}); ` +
      `2,000 vs 1,000 transcripts: wall ${fmt(less(2000, 'wall') / less(1000, 'wall'))}, CPU ${fmt(less(2000, 'cpu') / less(1000, 'cpu'))} (linear: 2.00x); ` +
      `load average ${os.loadavg()[0]!.toFixed(1)} on ${os.cpus().length} cores; exit ${[...exits].join('/')}`,
  );
}

const only = process.argv[2];
const benches: Record<string, () => Promise<void>> = {
  startup: benchStartup,
  a: benchConcurrency,
  b: benchTokenBuckets,
  c: benchMemory,
  d: benchBatch,
  report: benchReport,
  loop1000: () => benchBareLoop('loop1000', 1000, 50, 32, 1.3),
  loop120: () => benchBareLoop('loop120', 120, 300, 12, 1.25),
};
if (only === 'profile') await benchProfile();
for (const [name, bench] of Object.entries(benches)) if (!only || only === name) await bench();
