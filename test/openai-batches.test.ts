// --batch with an OpenAI primary judge: OpenAI's Batch API through the real openai SDK, against the
// loopback fake of fakes/openai.ts (a JSONL file uploaded, the batch created from it, polled, its output and error
// files read). In-process runs on a jump clock: no poll is waited out for real.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import type { TestContext } from 'node:test';
import { FakeOpenAi } from '../fakes/openai.ts';
import type { FakeOpenAiOptions, OpenAiBatchResult } from '../fakes/openai.ts';
import {
  csvRows,
  jumpClock,
  makeWorkspace,
  mentioning,
  readLog,
  runMain,
  waitFor,
} from './helpers.ts';
import type { Workspace } from './helpers.ts';

const { batchCustomId } = await import('../run-judge.ts');

const BATCH = ['--batch', '--poll-interval', '0.01'];
const PRICE = { input: 2, output: 8 };

/** A fake OpenAI server, a workspace of m01/proof01..02 judged by gpt-test at it, and in-process runs on a jump clock. */
async function batchSetup(t: TestContext, opts: FakeOpenAiOptions = {}) {
  const fake = await FakeOpenAi.start(opts);
  t.after(() => fake.close());
  const clock = jumpClock();
  clock.waitFor(() => fake.settled());
  const judge = {
    provider: 'openai',
    model: 'gpt-test',
    api_key_env: 'OPENAI_TEST_KEY',
    base_url: fake.url,
    temperature: null,
    max_tokens: 512,
    timeout_s: 5,
    structured_output: true,
    retry: { max_retries: 2, budget_s: 5, base_delay_s: 0.05 },
    price_usd_per_mtok: PRICE,
  };
  const ws: Workspace = makeWorkspace({
    models: 1,
    tasks: ['proof01', 'proof02'],
    modelsJson: { models: [{ name: 'm01', provider: 'local' }], judge, fallback_judges: [] },
  });
  t.after(() => ws.remove());
  const env = { OPENAI_TEST_KEY: 'sk-openai-batch-test', OPENAI_BASE_URL: undefined };
  const run = (args: string[] = BATCH) => runMain(ws.args(...args), { env, clock });
  const routes = () => fake.requests.map((req) => `${req.method} ${req.path.split('?')[0]}`);
  const stateFile = `${ws.output}.batches.json`;
  return { fake, ws, run, routes, stateFile };
}

const rowKeys = (ws: Workspace) =>
  fs.existsSync(ws.output)
    ? csvRows(ws.output)
        .map((row) => row.key)
        .sort()
    : [];
const count = (routes: string[], route: string) => routes.filter((seen) => seen === route).length;

describe('--batch with an OpenAI judge: OpenAI Batch API', () => {
  test('the requests uploaded as JSONL, one batch created, polled, its output file read: rows and audit lines at half price', async (t) => {
    const { fake, ws, run, routes, stateFile } = await batchSetup(t, {
      batch: { pollsUntilEnded: 3 },
    });
    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(rowKeys(ws), ['m01/proof01', 'm01/proof02']);
    assert.equal(fs.existsSync(stateFile), false, 'no batch is left pending');

    const seen = routes();
    assert.deepEqual(seen.slice(0, 3), ['GET /v1/batches', 'POST /v1/files', 'POST /v1/batches']);
    assert.equal(count(seen, 'GET /v1/batches/batch_fake_1'), 3);
    assert.equal(count(seen, 'POST /v1/chat/completions'), 0, 'nothing judged synchronously');
    assert.match(result.stderr, /submitted batch batch_fake_1: 2 request\(s\) to gpt-test/);
    assert.match(result.stderr, /batches pending 1: 2 processing, 0 succeeded, 0 errored/);

    // The file: one line a request, for Chat Completions, each with the strict answer schema.
    const [input] = [...fake.files.values()];
    assert.equal(input!.purpose, 'batch');
    const lines = input!.content
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line));
    assert.deepEqual(
      lines.map((line) => line.custom_id).sort(),
      [batchCustomId('proof01', 'm01'), batchCustomId('proof02', 'm01')].sort(),
    );
    for (const line of lines) {
      assert.equal(line.method, 'POST');
      assert.equal(line.url, '/v1/chat/completions');
      assert.equal(line.body.model, 'gpt-test');
      assert.equal(line.body.max_completion_tokens, 512);
      assert.equal(line.body.response_format.json_schema.strict, true);
    }
    const batch = fake.batches[0]!;
    assert.equal(batch.endpoint, '/v1/chat/completions');
    assert.equal(batch.completion_window, '24h');

    const entries = readLog(ws.log) as any[];
    assert.equal(entries.length, 2);
    for (const entry of entries) {
      assert.equal(entry.status, 'scored');
      assert.equal(entry.judge, 'gpt-test');
      assert.equal(entry.answers[0].provider, 'openai');
      assert.match(entry.answers[0].request_id, /^req_batch_req_\d$/);
      const { input_tokens, output_tokens } = entry.usage;
      const list = (input_tokens * PRICE.input + output_tokens * PRICE.output) / 1e6;
      assert.ok(input_tokens > 0);
      assert.equal(output_tokens, 20);
      assert.ok(Math.abs(entry.cost_usd - list / 2) < 1e-12, `${entry.cost_usd} is half ${list}`);
    }
  });

  test('--dry-run --batch counts the requests for the OpenAI judge, sends and writes nothing', async (t) => {
    const { fake, ws, run } = await batchSetup(t);
    const result = await run(['--dry-run', ...BATCH]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /would send 2 request\(s\) in 1 batch\(es\) to gpt-test/);
    assert.equal(fake.requests.length, 0);
    assert.equal(fs.existsSync(ws.output), false);
  });
});

describe('--batch with an OpenAI judge: results that cannot become rows go through the chain', () => {
  const CASES: { label: string; result: OpenAiBatchResult; reason: RegExp }[] = [
    {
      label: 'a line of the error file (expired)',
      result: { kind: 'error', code: 'batch_expired', message: 'not run within the window' },
      reason: /judge gpt-test: batch request errored: batch_expired: not run within the window$/,
    },
    {
      label: 'a response that is an HTTP error',
      result: { kind: 'http', status: 400, type: 'invalid_request_error', message: 'bad' },
      reason: /judge gpt-test: batch request errored: HTTP 400: invalid_request_error: bad$/,
    },
    {
      label: 'an answer that is not JSON',
      result: { kind: 'completion', text: 'no json here' },
      reason: /judge gpt-test: unusable answer: the answer is not JSON/,
    },
    {
      label: 'a request in neither file',
      result: { kind: 'missing' },
      reason: /judge gpt-test: batch batch_fake_1 returned no result for it$/,
    },
  ];
  for (const { label, result: scripted, reason } of CASES) {
    test(`${label}: judged again synchronously, the batch's failure in its audit line; the other from the batch`, async (t) => {
      const failing = batchCustomId('proof01', 'm01');
      const { ws, run, routes } = await batchSetup(t, {
        batch: { result: (customId) => (customId === failing ? scripted : undefined) },
      });
      const result = await run();
      assert.equal(result.code, 0, result.stderr);
      assert.deepEqual(rowKeys(ws), ['m01/proof01', 'm01/proof02']);
      assert.equal(count(routes(), 'POST /v1/chat/completions'), 1);
      assert.equal(count(routes(), 'POST /v1/batches'), 1);
      const entries = readLog(ws.log) as any[];
      const judged = entries.find((entry) => entry.task_id === 'proof01');
      assert.equal(judged.status, 'scored');
      assert.equal(judged.attempts.length, 1);
      assert.match(judged.attempts[0].message, reason);
      const batched = entries.find((entry) => entry.task_id === 'proof02');
      assert.deepEqual(batched.attempts, []);
    });
  }
});

describe('--batch with an OpenAI judge: an error file that has expired (404)', () => {
  test("the output file's rows are written; the download is tried 3 times, then the errored transcript goes through the chain", async (t) => {
    const failing = batchCustomId('proof01', 'm01');
    const expired: OpenAiBatchResult = { kind: 'error', code: 'batch_expired', message: 'late' };
    const { fake, ws, run, routes, stateFile } = await batchSetup(t, {
      batch: {
        result: (customId) => (customId === failing ? expired : undefined),
        errorFileExpired: true,
      },
    });
    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(rowKeys(ws), ['m01/proof01', 'm01/proof02']);
    const errorFile = fake.batches[0]!.error_file_id!;
    assert.equal(count(routes(), `GET /v1/files/${errorFile}/content`), 3);
    assert.equal(count(routes(), 'POST /v1/chat/completions'), 1);
    assert.match(result.stderr, mentioning(`No such File object: ${errorFile}`, 'next poll'));
    assert.doesNotMatch(result.stderr, /check the model id/);
    const entries = readLog(ws.log) as any[];
    const judged = entries.find((entry) => entry.task_id === 'proof01');
    assert.equal(judged.status, 'scored');
    assert.match(judged.attempts[0].message, /returned no result for it/);
    assert.equal(fs.existsSync(stateFile), false);
  });
});

describe('--batch with an OpenAI judge: a server without a batch endpoint', () => {
  test('refused before any transcript is sent: exit 2, one message naming the base URL and saying to drop --batch', async (t) => {
    const { fake, ws, run, routes, stateFile } = await batchSetup(t, { batch: false });
    const result = await run();
    assert.equal(result.code, 2, result.stderr);
    assert.match(
      result.stderr,
      mentioning(
        `the server at ${fake.url} has no Batch API (GET /batches answered HTTP 404)`,
        'run without --batch',
      ),
    );
    assert.deepEqual(routes(), ['GET /v1/batches'], 'nothing but the check was sent');
    assert.equal(fs.existsSync(stateFile), false);
    assert.deepEqual(rowKeys(ws), []);
  });

  test('a server answering every unknown path 200 with an error: refused before any transcript is sent, the same on a rerun', async (t) => {
    const { fake, ws, run, routes, stateFile } = await batchSetup(t, { batch: 'error-200' });
    for (const attempt of [1, 2]) {
      const result = await run();
      assert.equal(result.code, 2, `run ${attempt}: ${result.stderr}`);
      assert.match(
        result.stderr,
        mentioning(
          `the server at ${fake.url} has no Batch API (GET /batches answered HTTP 200 without a list`,
          'Unexpected endpoint or method',
          'run without --batch',
        ),
      );
      assert.equal(fs.existsSync(stateFile), false);
    }
    assert.deepEqual(routes(), ['GET /v1/batches', 'GET /v1/batches'], 'no file uploaded');
    assert.deepEqual(rowKeys(ws), []);
  });

  test('a state file such a server left (an entry without an id) is refused with what to do', async (t) => {
    const { fake, run, stateFile } = await batchSetup(t);
    const requests = { [batchCustomId('proof01', 'm01')]: ['proof01', 'm01', 'sha'] };
    const entry = { judge: 'gpt-test', provider: 'openai', submitted_at: '2026-12-01', requests };
    fs.mkdirSync(path.dirname(stateFile), { recursive: true });
    fs.writeFileSync(stateFile, JSON.stringify({ version: 1, batches: [entry] }));
    const result = await run();
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, mentioning(stateFile, 'batches[0].id', 'then fix or delete'));
    assert.equal(fake.requests.length, 0);
  });
});

/** A run stopped by Ctrl-C once its batch has been polled (the batch never ends while it runs). */
async function interruptedWhilePolling(t: TestContext) {
  const setup = await batchSetup(t, { batch: { pollsUntilEnded: Infinity } });
  const pending = setup.run();
  await waitFor(() => (setup.fake.batches[0]?.polls ?? 0) >= 1, 10_000, 'the first poll');
  process.emit('SIGINT', 'SIGINT');
  const stopped = await pending;
  return { ...setup, stopped };
}

describe('--batch with an OpenAI judge: Ctrl-C while polling, and the rerun', () => {
  test('Ctrl-C leaves the batch pending (not cancelled), says where and how to resume, exits 130', async (t) => {
    const { fake, ws, stopped, routes, stateFile } = await interruptedWhilePolling(t);
    assert.equal(stopped.code, 130, stopped.stderr);
    assert.match(
      stopped.stderr,
      mentioning(
        `batch(es) batch_fake_1 left running at ${fake.url}, not cancelled`,
        'rerun the same command',
        stateFile,
      ),
    );
    assert.ok(!routes().some((route) => /cancel/.test(route)), routes().join(', '));
    assert.equal(fake.batches[0]!.status, 'in_progress');
    const state = JSON.parse(fs.readFileSync(stateFile, 'utf8'));
    assert.equal(state.batches[0].id, 'batch_fake_1');
    assert.equal(state.batches[0].provider, 'openai');
    assert.deepEqual(rowKeys(ws), []);
  });

  test('a rerun resumes the pending batch: polled again, never uploaded or created a second time; its rows written once', async (t) => {
    const { fake, ws, run, routes, stateFile } = await interruptedWhilePolling(t);
    fake.batches[0]!.endAfterPolls = 0; // it completes at the next poll
    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /resuming 1 pending batch\(es\) from .*: batch_fake_1/);
    assert.equal(count(routes(), 'POST /v1/files'), 1);
    assert.equal(count(routes(), 'POST /v1/batches'), 1);
    assert.equal(count(routes(), 'POST /v1/chat/completions'), 0);
    assert.deepEqual(rowKeys(ws), ['m01/proof01', 'm01/proof02']);
    assert.equal(readLog(ws.log).length, 2);
    assert.equal(fs.existsSync(stateFile), false);
  });
});

describe('--batch with an OpenAI judge: a pending batch of another provider', () => {
  test('a state entry of before (no "provider": Anthropic) is never asked of OpenAI: exit 2, nothing sent', async (t) => {
    const { fake, ws, run, stateFile } = await batchSetup(t);
    const requests = { [batchCustomId('proof01', 'm01')]: ['proof01', 'm01', 'sha'] };
    const entry = { id: 'msgbatch_1', judge: 'claude-x', submitted_at: '2026-12-01', requests };
    fs.mkdirSync(ws.output.replace(/[^/]+$/, ''), { recursive: true });
    fs.writeFileSync(stateFile, JSON.stringify({ version: 1, batches: [entry] }));
    const result = await run();
    assert.equal(result.code, 2, result.stderr);
    assert.match(
      result.stderr,
      mentioning(
        'batch msgbatch_1 went to claude-x ("provider": "anthropic")',
        'set that judge back',
      ),
    );
    assert.equal(fake.requests.length, 0);
    assert.equal(fs.existsSync(stateFile), true, 'the entry is kept');
  });
});
