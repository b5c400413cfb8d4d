// End-to-end tests of the run-judge CLI as a process, talking to the loopback fake through the real SDK.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import type { TestContext } from 'node:test';
import { FakeAnthropic } from './fake-anthropic.ts';
import type { FakeOptions, RecordedRequest, Reply } from './fake-anthropic.ts';
import {
  REPO, SHIPPED_RUBRIC, csvRows, judgeEntry, makeWorkspace, maxInFlight, readCsv, readLog, rowCount, runCli, sha256,
  setupCli, snapshot, startCli, tagOf, waitFor,
} from './cli-helpers.ts';
import type { CliOptions, WorkspaceOptions } from './cli-helpers.ts';
import { buildJudgePrompt, loadJson, loadRubric, loadTranscript } from '../run-judge.ts';
import type { ReferenceKey, Task } from '../run-judge.ts';

const COLUMNS = 'task_id,model,mathematical_correctness,proof_scaffolding,error_diagnosis,student_agency,proof_convention_alignment,integrity_boundary,notes';

const setup = setupCli;

const allKeys = (pairs: { model: string; task_id: string }[]) => pairs.map((p) => `${p.model}/${p.task_id}`).sort();
const modelOf = (req: RecordedRequest) => req.body?.model as string;
const error = (status: number, type: string, message: string, extra: Partial<Extract<Reply, { kind: 'error' }>> = {}): Reply =>
  ({ kind: 'error', status, type, message, ...extra });
const rateLimited = (retryAfter?: string, extra: Partial<Extract<Reply, { kind: 'error' }>> = {}): Reply =>
  error(429, 'rate_limit_error', 'Number of requests has exceeded your per-minute rate limit',
    { ...(retryAfter ? { headers: { 'retry-after': retryAfter } } : {}), ...extra });

/** Every line of the CSV ends with a newline, and the file parses strictly with one header and no duplicate pair. */
function assertWellFormedCsv(file: string): string[] {
  const text = fs.readFileSync(file, 'utf8');
  assert.ok(text.endsWith('\n'), 'the CSV ends with a complete line');
  const records = readCsv(file);
  assert.equal(records[0]!.join(','), COLUMNS);
  for (const record of records) assert.equal(record.length, 9, `complete record: ${JSON.stringify(record)}`);
  const keys = csvRows(file).map((row) => row.key);
  assert.equal(new Set(keys).size, keys.length, `no duplicate pair in ${keys.join(' ')}`);
  return keys.sort();
}

// ---------------------------------------------------------------------------------------------
describe('dry-run', { concurrency: true }, () => {
  test('prints exactly one prompt for the shipped data, with no key, no request and no file written', async (t) => {
    const fake = await FakeAnthropic.start();
    t.after(() => fake.close());
    const scoresDir = path.join(REPO, 'evals/scores');
    const hadScores = fs.existsSync(scoresDir);
    const before = snapshot(path.join(REPO, 'evals'));

    const result = await runCli(['--dry-run', '--task', 'proof01', '--model', 'stub'], { cwd: REPO, baseUrl: fake.url, apiKey: null });

    assert.equal(result.code, 0, result.stderr);
    const rubric = loadRubric(path.join(REPO, 'rubric.json'));
    const expected = buildJudgePrompt(
      loadJson(path.join(REPO, 'evals/tasks/proof01.json')) as Task,
      loadJson(path.join(REPO, 'evals/reference_keys/proof01.json')) as ReferenceKey,
      loadTranscript({ task_id: 'proof01', model: 'stub', path: path.join(REPO, 'evals/transcripts/stub/proof01.json') }),
      rubric,
    );
    assert.equal(result.stdout, `${expected}\n`);
    assert.equal(result.stdout.split('You are an expert evaluator').length - 1, 1, 'one prompt');
    assert.match(result.stdout, /Task ID: proof01\n/);
    assert.match(result.stdout, /Student: I need to prove sqrt\(2\) is irrational/);
    assert.match(result.stderr, /1 transcript\(s\) selected/);
    assert.equal(fake.requests.length, 0);
    assert.equal(fs.existsSync(scoresDir), hadScores, 'evals/scores neither created nor removed');
    assert.deepEqual(snapshot(path.join(REPO, 'evals')), before, 'nothing under evals/ changed');
    assert.deepEqual(fs.readdirSync(REPO).filter((f) => /\.(csv|jsonl|lock|tmp)$/.test(f)), [], 'no output, log, lock or temp file at the repo root');
  });

  test('with explicit paths, writes nothing into the workspace (no CSV, log or lock)', async (t) => {
    const { fake, ws, run } = await setup(t);
    const before = snapshot(ws.dir);
    const result = await run(['--dry-run', '--task', 'proof02', '--model', 'm02'], { apiKey: null });
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /test-tag m02\/proof02/);
    assert.equal(fake.requests.length, 0);
    assert.deepEqual(snapshot(ws.dir), before);
    assert.equal(fs.existsSync(path.dirname(ws.output)), false);
  });

  test('still prints its prompt when models.json sets a numeric temperature (nothing is called)', async (t) => {
    const { fake, run } = await setup(t, {}, { judge: judgeEntry('judge-a', { temperature: 0.5 }) });
    const result = await run(['--dry-run', '--task', 'proof03', '--model', 'm01'], { apiKey: null });
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /Task ID: proof03\n/);
    assert.equal(fake.requests.length, 0);
  });

  test('a dry-run whose filters match nothing exits 2 and lists what exists', async (t) => {
    const { fake, run } = await setup(t);
    const result = await run(['--dry-run', '--model', 'stub'], { apiKey: null });
    assert.equal(result.code, 2);
    assert.equal(result.stdout, '');
    assert.match(result.stderr, /--model stub.*models \(folders\): m01, m02/);
    assert.equal(fake.requests.length, 0);
  });

  test('selecting several transcripts prints only the first and says how many were selected', async (t) => {
    const fake = await FakeAnthropic.start();
    t.after(() => fake.close());
    const result = await runCli(['--dry-run', '--model', 'stub'], { cwd: REPO, baseUrl: fake.url, apiKey: null });
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout.split('You are an expert evaluator').length - 1, 1, 'one prompt only');
    assert.match(result.stdout, /Task ID: proof01\n/, 'the first in sorted order');
    assert.match(result.stderr, /\b3 transcript\(s\) selected/);
    assert.match(result.stderr, /stub\/proof01/);
    assert.equal(fake.requests.length, 0);
  });
});

// ---------------------------------------------------------------------------------------------
describe('exit codes', { concurrency: true }, () => {
  test('0 when every transcript is scored: one complete row each, stdout empty, lock removed', async (t) => {
    const { fake, ws, run } = await setup(t);
    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout, '');
    assert.deepEqual(assertWellFormedCsv(ws.output), allKeys(ws.pairs));
    assert.equal(fake.requests.length, 6);
    assert.ok(fake.requests.every((req) => modelOf(req) === 'judge-a'));
    assert.ok(fake.requests.every((req) => req.body.max_tokens === 512 && !('temperature' in req.body)));
    for (const { record } of csvRows(ws.output)) assert.deepEqual(record.slice(2, 8), ['2', '2', '2', '2', '2', '2']);
    assert.match(result.stderr, /6 selected: 6 scored, 0 skipped/);
    assert.equal(fs.existsSync(`${ws.output}.lock`), false, 'lock removed after the run');
  });

  test('1 when one transcript is unusable from every judge; the others still get rows', async (t) => {
    const { fake, ws, run } = await setup(t, {
      responder: (req) => (tagOf(req) === 'm02/proof02' ? { text: `prose from ${modelOf(req)}` } : undefined),
    });
    const result = await run();
    assert.equal(result.code, 1, result.stderr);
    assert.deepEqual(assertWellFormedCsv(ws.output), allKeys(ws.pairs).filter((k) => k !== 'm02/proof02'));
    assert.match(result.stderr, /failed m02\/proof02: .*judge-a.*judge-b/);
    assert.match(result.stderr, /6 selected: 5 scored, 0 skipped .*, 1 failed/);
    const failing = fake.requests.filter((req) => tagOf(req) === 'm02/proof02').map(modelOf);
    assert.deepEqual(failing, ['judge-a', 'judge-b']);
    const entry = readLog(ws.log).find((e) => e.model === 'm02' && e.task_id === 'proof02')!;
    assert.equal(entry.status, 'failed');
    assert.equal(entry.judge, null);
    assert.deepEqual(entry.attempts.map((a) => [a.judge, a.error, a.status]), [['judge-a', 'EvalJudgeResponseError', null], ['judge-b', 'EvalJudgeResponseError', null]]);
    assert.deepEqual(entry.answers.map((a) => a.text), ['prose from judge-a', 'prose from judge-b']);
    assert.equal(entry.error?.class, 'EvalJudgesExhaustedError');
  });

  test('a failed transcript is judged again on the next run, and only it', async (t) => {
    let broken = true;
    const { fake, ws, run } = await setup(t, {
      responder: (req) => (broken && tagOf(req) === 'm01/proof03' ? error(500, 'api_error', 'Internal server error') : undefined),
    });
    assert.equal((await run()).code, 1);
    assert.equal(rowCount(ws.output), 5);
    broken = false;
    const before = fake.requests.length;
    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(fake.requests.slice(before).map(tagOf), ['m01/proof03']);
    assert.deepEqual(assertWellFormedCsv(ws.output), allKeys(ws.pairs));
  });

  test('1 for a transcript whose metadata disagrees with its path, naming the file and both values; no request for it', async (t) => {
    const { fake, ws, run } = await setup(t);
    const file = path.join(ws.transcripts, 'm01', 'proof02.json');
    const transcript = JSON.parse(fs.readFileSync(file, 'utf8'));
    transcript.metadata.model = 'someone-else';
    fs.writeFileSync(file, JSON.stringify(transcript));
    const result = await run();
    assert.equal(result.code, 1, result.stderr);
    assert.ok(result.stderr.includes(file), result.stderr);
    assert.match(result.stderr, /someone-else/);
    assert.match(result.stderr, /"m01"/);
    assert.equal(fake.requests.filter((req) => tagOf(req) === 'm01/proof02').length, 0);
    assert.equal(rowCount(ws.output), 5);
  });

  test('1 for a 400 on one transcript: an input error stops its chain (no fallback) but not the run', async (t) => {
    const { fake, ws, run } = await setup(t, {
      responder: (req) => (tagOf(req) === 'm01/proof01' ? error(400, 'invalid_request_error', 'prompt is too long') : undefined),
    });
    const result = await run();
    assert.equal(result.code, 1, result.stderr);
    assert.deepEqual(fake.requests.filter((req) => tagOf(req) === 'm01/proof01').map(modelOf), ['judge-a']);
    assert.equal(fake.requests.length, 6);
    assert.match(result.stderr, /failed m01\/proof01: judge judge-a: HTTP 400 invalid_request_error: prompt is too long/);
    assert.equal(rowCount(ws.output), 5);
    const entry = readLog(ws.log).find((e) => e.status === 'failed')!;
    assert.equal(entry.error?.class, 'EvalInputError');
  });

  test('1 for a transcript whose task file is missing, naming the file; the others are scored', async (t) => {
    const { fake, ws, run } = await setup(t);
    const file = path.join(ws.transcripts, 'm01', 'proof04.json');
    fs.copyFileSync(path.join(ws.transcripts, 'm01', 'proof01.json'), file);
    const transcript = JSON.parse(fs.readFileSync(file, 'utf8'));
    delete transcript.metadata;
    fs.writeFileSync(file, JSON.stringify(transcript));
    const result = await run();
    assert.equal(result.code, 1, result.stderr);
    assert.ok(result.stderr.includes(`${path.join(ws.tasks, 'proof04.json')}: file not found`), result.stderr);
    assert.equal(fake.requests.length, 6);
    assert.equal(rowCount(ws.output), 6);
  });

  test('1 when the API cannot be reached: every transcript fails over both judges, no row', async (t) => {
    const { ws } = await setup(t);
    const result = await runCli(ws.args('--model', 'm01'), { baseUrl: 'http://127.0.0.1:9' });
    assert.equal(result.code, 1, result.stderr);
    assert.match(result.stderr, /3 selected: 0 scored, 0 skipped .* 3 failed/);
    assert.match(result.stderr, /connection failed/);
    assert.equal(rowCount(ws.output), 0);
    const log = readLog(ws.log);
    assert.equal(log.length, 3);
    for (const entry of log) assert.deepEqual(entry.attempts.map((a) => [a.judge, a.error, a.status]), [['judge-a', 'EvalProviderError', null], ['judge-b', 'EvalProviderError', null]]);
  });

  test('2 for an unknown flag, with no request', async (t) => {
    const { fake, ws, run } = await setup(t);
    const result = await run(['--bogus']);
    assert.equal(result.code, 2);
    assert.match(result.stderr, /unknown option '--bogus'/);
    assert.equal(fake.requests.length, 0);
    assert.equal(fs.existsSync(ws.output), false);
  });

  test('2 for a bad --concurrency (0, -1, 1.5, abc)', async (t) => {
    const { fake, ws, run } = await setup(t);
    for (const value of ['0', '-1', '1.5', 'abc']) {
      const result = await run(['--concurrency', value]);
      assert.equal(result.code, 2, `--concurrency ${value}: ${result.stderr}`);
      assert.match(result.stderr, /--concurrency.*must be a positive integer/);
    }
    assert.equal(fake.requests.length, 0);
    assert.equal(fs.existsSync(ws.output), false);
  });

  test('2 for filters that match nothing, listing the models and tasks that exist', async (t) => {
    const { fake, ws, run } = await setup(t);
    const byTask = await run(['--task', 'proof99']);
    assert.equal(byTask.code, 2);
    assert.match(byTask.stderr, /--task proof99/);
    assert.match(byTask.stderr, /models \(folders\): m01, m02; tasks: proof01, proof02, proof03/);
    const byModel = await run(['--model', 'anthropic', '--task', 'proof01']);
    assert.equal(byModel.code, 2);
    assert.match(byModel.stderr, /--task proof01 --model anthropic/);
    assert.match(byModel.stderr, /m01, m02/);
    assert.equal(fake.requests.length, 0);
    assert.equal(fs.existsSync(ws.output), false);
  });

  test('2 when the key is missing: stderr names ANTHROPIC_API_KEY, no request, no file', async (t) => {
    const { fake, ws, run } = await setup(t);
    const result = await run([], { apiKey: null });
    assert.equal(result.code, 2);
    assert.match(result.stderr, /ANTHROPIC_API_KEY/);
    assert.equal(fake.requests.length, 0);
    assert.equal(fs.existsSync(path.dirname(ws.output)), false, 'no CSV, log or lock');
  });

  test('2 for a numeric temperature in models.json, before any request', async (t) => {
    const { fake, ws, run } = await setup(t, {}, { fallbacks: [judgeEntry('judge-b', { temperature: 0.2 })] });
    const result = await run();
    assert.equal(result.code, 2);
    assert.match(result.stderr, /temperature/);
    assert.match(result.stderr, /judge-b/);
    assert.equal(fake.requests.length, 0);
    assert.equal(fs.existsSync(ws.output), false);
  });

  test('2 for a bad rubric (empty dimensions, invalid JSON, duplicate names), naming the file, before any request', async (t) => {
    const { fake, ws, run } = await setup(t);
    const shipped = JSON.parse(fs.readFileSync(SHIPPED_RUBRIC, 'utf8'));
    const cases: [string, RegExp][] = [
      [JSON.stringify({ dimensions: [] }), /"dimensions" is empty/],
      ['{"dimensions": [', /invalid JSON/],
      [JSON.stringify({ dimensions: [shipped.dimensions[0], shipped.dimensions[0]] }), /duplicate dimension name "mathematical_correctness"/],
    ];
    for (const [text, reason] of cases) {
      fs.writeFileSync(ws.rubric, text);
      const result = await run();
      assert.equal(result.code, 2, result.stderr);
      assert.ok(result.stderr.includes(ws.rubric), result.stderr);
      assert.match(result.stderr, reason);
    }
    assert.equal(fake.requests.length, 0);
    assert.equal(fs.existsSync(ws.output), false);
  });

  test('2 when the CSV header differs from the rubric columns; the file is left as it was', async (t) => {
    const { fake, ws, run } = await setup(t);
    fs.mkdirSync(path.dirname(ws.output), { recursive: true });
    fs.writeFileSync(ws.output, 'task_id,model,score,notes\nproof01,m01,2,old\n');
    const result = await run();
    assert.equal(result.code, 2);
    assert.match(result.stderr, /header .* differs from the rubric's columns/);
    assert.equal(fs.readFileSync(ws.output, 'utf8'), 'task_id,model,score,notes\nproof01,m01,2,old\n');
    assert.equal(fake.requests.length, 0);
    assert.equal(fs.existsSync(`${ws.output}.lock`), false);
  });

  test('a 401 stops the run at once: exit 2, no fallback, no new request after it', async (t) => {
    const { fake, ws, run } = await setup(t, { latencyMs: 100, responder: () => error(401, 'authentication_error', 'invalid x-api-key') });
    const result = await run(['--concurrency', '3'], { apiKey: 'sk-test-SECRET' });
    assert.equal(result.code, 2, result.stderr);
    assert.equal(fake.requests.length, 3, 'only the three already in flight');
    assert.ok(fake.requests.every((req) => modelOf(req) === 'judge-a'), 'no fallback judge for a configuration error');
    assert.match(result.stderr, /stopped: judge judge-a: HTTP 401 authentication_error: invalid x-api-key/);
    assert.equal(rowCount(ws.output), 0);
    assert.ok(!result.stderr.includes('sk-test-SECRET'));
  });
});

// ---------------------------------------------------------------------------------------------
describe('concurrency', () => {
  test('24 transcripts at --concurrency 8: 8 requests in flight at once, 24 complete rows', { timeout: 30_000 }, async (t) => {
    const latencyMs = 150;
    const { fake, ws, run } = await setup(t, { latencyMs }, { models: 8 });
    const result = await run(['--concurrency', '8']);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.requests.length, 24);
    assert.equal(maxInFlight(fake.requests, latencyMs), 8);
    const span = fake.requests.at(-1)!.at - fake.requests[0]!.at;
    assert.ok(span < 8 * latencyMs, `parallel, not serial: the last request came ${span} ms after the first`);
    assert.deepEqual(assertWellFormedCsv(ws.output), allKeys(ws.pairs));
    assert.equal(fs.readFileSync(ws.output, 'utf8').split('\n').length, 26, 'header + 24 lines + final newline');
  });

  test('rows are appended as judgements finish, not at the end', { timeout: 30_000 }, async (t) => {
    const { fake, ws, start } = await setup(t, { responder: (req) => (tagOf(req) === 'm01/proof01' ? { text: fake.validAnswer({}, 'slow'), delayMs: 3000 } : undefined) });
    const { child, done } = start(['--concurrency', '2']);
    let exited = false;
    void done.then(() => { exited = true; });
    await waitFor(() => rowCount(ws.output) >= 5, 20_000, 'five rows');
    assert.equal(exited, false, 'five rows are on disk while the slow judgement is still in flight');
    assert.deepEqual(csvRows(ws.output).map((row) => row.key).sort(), allKeys(ws.pairs).filter((k) => k !== 'm01/proof01'));
    const result = await done;
    assert.equal(result.code, 0, result.stderr);
    assert.equal(child.exitCode, 0);
    assert.equal(csvRows(ws.output).at(-1)!.key, 'm01/proof01', 'the slow one comes last, in completion order');
  });

  test('--concurrency 1 never has two requests in flight', async (t) => {
    const latencyMs = 60;
    const { fake, run } = await setup(t, { latencyMs });
    const result = await run(['--concurrency', '1']);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.requests.length, 6);
    assert.equal(maxInFlight(fake.requests, latencyMs), 1);
  });
});

// ---------------------------------------------------------------------------------------------
describe('retries and fallbacks', () => {
  test('429 then success on the same judge, after retry-after', async (t) => {
    const { fake, ws, run } = await setup(t, { responder: (_req, i) => (i === 0 ? rateLimited('0.2') : undefined) });
    const result = await run(['--task', 'proof01', '--model', 'm01']);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(fake.requests.map(modelOf), ['judge-a', 'judge-a']);
    const gap = fake.requests[1]!.at - fake.requests[0]!.at;
    assert.ok(gap >= 195, `waited ${gap} ms for retry-after 0.2`);
    assert.ok(gap < 1000, `waited ${gap} ms, not a long backoff`);
    const [entry] = readLog(ws.log);
    assert.equal(entry!.status, 'scored');
    assert.equal(entry!.judge, 'judge-a', 'the row is scored by the primary judge');
    assert.deepEqual(entry!.attempts, [], 'a wait request is not a failed attempt');
    assert.equal(rowCount(ws.output), 1);
  });

  test('529 overloaded is retried on the same judge', async (t) => {
    const { fake, ws, run } = await setup(t, {
      responder: (_req, i) => (i === 0 ? error(529, 'overloaded_error', 'Overloaded', { headers: { 'retry-after': '0.05' } }) : undefined),
    });
    const result = await run(['--task', 'proof02', '--model', 'm02']);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(fake.requests.map(modelOf), ['judge-a', 'judge-a']);
    assert.equal(readLog(ws.log)[0]!.judge, 'judge-a');
  });

  test('429 without retry-after backs off and retries on the same judge', async (t) => {
    const { fake, ws, run } = await setup(t, { responder: (_req, i) => (i < 2 ? rateLimited() : undefined) });
    const result = await run(['--task', 'proof01', '--model', 'm01']);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(fake.requests.map(modelOf), ['judge-a', 'judge-a', 'judge-a']);
    assert.equal(readLog(ws.log)[0]!.judge, 'judge-a');
  });

  test('a 429 whose retry-after exceeds the budget falls back to judge-b at once', async (t) => {
    const { fake, ws, run } = await setup(t, {
      responder: (req) => (modelOf(req) === 'judge-a' ? rateLimited('10') : undefined),
    });
    const result = await run(['--task', 'proof01', '--model', 'm01']);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(fake.requests.map(modelOf), ['judge-a', 'judge-b']);
    const gap = fake.requests[1]!.at - fake.requests[0]!.at;
    assert.ok(gap < 1000, `fell back after ${gap} ms, without waiting out retry-after`);
    const [entry] = readLog(ws.log);
    assert.equal(entry!.judge, 'judge-b');
    assert.deepEqual(entry!.attempts.map((a) => [a.judge, a.error, a.status]), [['judge-a', 'EvalProviderError', 429]]);
    assert.match(entry!.attempts[0]!.message, /rate_limit_error/);
  });

  test('429s beyond max_retries fall back after exactly 1 + max_retries requests', async (t) => {
    const { fake, ws, run } = await setup(t, {
      responder: (req) => (modelOf(req) === 'judge-a' ? rateLimited('0.01') : undefined),
    }, { judge: judgeEntry('judge-a', { retry: { max_retries: 3, budget_s: 5, base_delay_s: 0.01 } }) });
    const result = await run(['--task', 'proof01', '--model', 'm01']);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(fake.requests.map(modelOf), ['judge-a', 'judge-a', 'judge-a', 'judge-a', 'judge-b']);
    assert.equal(readLog(ws.log)[0]!.judge, 'judge-b');
  });

  test('a spend-limit 429 is not retried: one request to judge-a, then judge-b', async (t) => {
    const { fake, ws, run } = await setup(t, {
      responder: (req) => (modelOf(req) === 'judge-a'
        ? rateLimited('0.01', { message: 'You have reached your specified API usage limits', errorCode: 'enforced_spend_limit_reached' })
        : undefined),
    });
    const result = await run(['--task', 'proof03', '--model', 'm01']);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(fake.requests.map(modelOf), ['judge-a', 'judge-b']);
    const [entry] = readLog(ws.log);
    assert.equal(entry!.judge, 'judge-b');
    assert.deepEqual(entry!.attempts.map((a) => [a.judge, a.status]), [['judge-a', 429]]);
  });

  test('a timeout is never resubmitted: one request to judge-a, then judge-b', async (t) => {
    const { fake, ws, run } = await setup(t, {
      responder: (req) => (modelOf(req) === 'judge-a' ? { kind: 'hang' } : undefined),
    }, { judge: judgeEntry('judge-a', { timeout_s: 0.3 }) });
    const result = await run(['--task', 'proof01', '--model', 'm02']);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(fake.requests.map(modelOf), ['judge-a', 'judge-b']);
    const [entry] = readLog(ws.log);
    assert.equal(entry!.judge, 'judge-b');
    assert.deepEqual(entry!.attempts.map((a) => [a.judge, a.error, a.status]), [['judge-a', 'EvalTimeoutError', null]]);
    assert.match(entry!.attempts[0]!.message, /judge judge-a: request timed out/);
  });

  test('a 429 without rate-limit headers pauses every request of that judge until retry-after', async (t) => {
    const { fake, run } = await setup(t, { latencyMs: 50, responder: (_req, i) => (i === 0 ? rateLimited('0.5') : undefined) });
    const result = await run(['--concurrency', '3']);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.requests.length, 7);
    const t0 = fake.requests[0]!.at;
    const early = fake.requests.slice(3).filter((req) => req.at - t0 < 500).map((req) => req.at - t0);
    assert.deepEqual(early, [], 'no request of judge-a started during the pause');
    assert.ok(fake.requests.every((req) => modelOf(req) === 'judge-a'));
  });

  test('model_env (JUDGE_MODEL) replaces the judge model in requests and in the log', async (t) => {
    const { fake, ws, run } = await setup(t, {}, { judge: judgeEntry('judge-a', { model_env: 'JUDGE_MODEL' }) });
    const result = await run(['--task', 'proof01', '--model', 'm01'], { env: { JUDGE_MODEL: 'judge-override' } });
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(fake.requests.map(modelOf), ['judge-override']);
    assert.equal(readLog(ws.log)[0]!.judge, 'judge-override');
  });

  test('--no-fallback uses the primary judge only: its failure is the transcript\'s failure', async (t) => {
    const { fake, ws, run } = await setup(t, {
      responder: (req) => (tagOf(req) === 'm01/proof01' ? error(500, 'api_error', 'Internal server error') : undefined),
    });
    const result = await run(['--no-fallback']);
    assert.equal(result.code, 1, result.stderr);
    assert.ok(fake.requests.every((req) => modelOf(req) === 'judge-a'));
    assert.equal(fake.requests.length, 6);
    assert.equal(rowCount(ws.output), 5);
    assert.match(result.stderr, /failed m01\/proof01: judge judge-a: HTTP 500 api_error: Internal server error/);
  });

  test('a 500 falls back without a retry on the same judge', async (t) => {
    const { fake, ws, run } = await setup(t, {
      responder: (req) => (modelOf(req) === 'judge-a' ? error(500, 'api_error', 'Internal server error') : undefined),
    });
    const result = await run(['--task', 'proof01', '--model', 'm01']);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(fake.requests.map(modelOf), ['judge-a', 'judge-b']);
    assert.deepEqual(readLog(ws.log)[0]!.attempts.map((a) => a.status), [500]);
  });
});

// ---------------------------------------------------------------------------------------------
describe('rate-limit pacing', () => {
  test('15 transcripts at --concurrency 15 against 5 requests/s: all rows, no fallback, 429s only in the opening burst', { timeout: 30_000 }, async (t) => {
    const accepted = new Set<number>(); // the fake calls the responder only for requests it does not rate-limit
    const { fake, ws, run } = await setup(t, {
      rateLimit: { limit: 5, windowMs: 1000 },
      responder: (_req, i) => { accepted.add(i); return undefined; },
    }, { models: 5 });
    const result = await run(['--concurrency', '15']);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(assertWellFormedCsv(ws.output), allKeys(ws.pairs));
    assert.ok(fake.requests.every((req) => modelOf(req) === 'judge-a'), 'no request to the fallback judge');
    const log = readLog(ws.log);
    assert.equal(log.length, 15);
    assert.ok(log.every((entry) => entry.judge === 'judge-a' && entry.attempts.length === 0), 'every row by the primary judge');
    assert.equal(accepted.size, 15);
    assert.equal(fake.requests.length, 15 + fake.count429);
    const rejected = fake.requests.map((_req, i) => i).filter((i) => !accepted.has(i));
    assert.ok(rejected.every((i) => i < 15), `once the headers were known no request met a 429; rejected: ${rejected.join(',')}`);
    assert.ok(fake.count429 <= 10, `429s: ${fake.count429}`);
    const span = fake.requests.at(-1)!.at - fake.requests[0]!.at;
    assert.ok(span >= 1000, `15 requests at 5/s need more than one window; took ${span} ms`);
  });
});

// ---------------------------------------------------------------------------------------------
describe('resume and --rescore', () => {
  test('a rerun skips every scored pair, says how many, and sends no request', async (t) => {
    const { fake, ws, run } = await setup(t);
    assert.equal((await run()).code, 0);
    const csv = fs.readFileSync(ws.output, 'utf8');
    const before = fake.requests.length;
    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.requests.length, before, 'no new request');
    assert.match(result.stderr, /skipping 6 transcript\(s\) already scored/);
    assert.match(result.stderr, /6 selected: 0 scored, 6 skipped/);
    assert.equal(fs.readFileSync(ws.output, 'utf8'), csv, 'CSV untouched');
  });

  test('a rerun judges only the pairs that have no row yet', async (t) => {
    const { fake, ws, run } = await setup(t, {}, { models: 3 });
    assert.equal((await run(['--task', 'proof01'])).code, 0);
    assert.equal(fake.requests.length, 3);
    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /skipping 3 transcript\(s\)/);
    assert.deepEqual(fake.requests.slice(3).map(tagOf).sort(), allKeys(ws.pairs).filter((k) => !k.endsWith('proof01')));
    assert.deepEqual(assertWellFormedCsv(ws.output), allKeys(ws.pairs));
  });

  test('--rescore --task proof01 replaces those rows only; the audit log keeps old and new answers', async (t) => {
    let round = 1;
    const { fake, ws, run } = await setup(t, { responder: () => ({ text: fake.validAnswer({ student_agency: round }, `round ${round}`) }) });
    assert.equal((await run()).code, 0);
    const otherBefore = csvRows(ws.output).filter((row) => row.record[0] !== 'proof01');
    round = 0;
    const before = fake.requests.length;
    const result = await run(['--rescore', '--task', 'proof01']);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /--rescore: removed 2 existing row\(s\)/);
    assert.deepEqual(fake.requests.slice(before).map(tagOf).sort(), ['m01/proof01', 'm02/proof01']);
    assert.deepEqual(assertWellFormedCsv(ws.output), allKeys(ws.pairs), 'exactly one row per pair');
    const rows = csvRows(ws.output);
    for (const row of rows.filter((r) => r.record[0] === 'proof01')) {
      assert.equal(row.record[5], '0', 'new student_agency score');
      assert.equal(row.record[8], 'round 0');
    }
    assert.deepEqual(rows.filter((row) => row.record[0] !== 'proof01'), otherBefore, 'other rows kept as they were');
    const proof01 = readLog(ws.log).filter((e) => e.task_id === 'proof01' && e.model === 'm01');
    assert.deepEqual(proof01.map((e) => e.notes), ['round 1', 'round 0']);
    assert.notEqual(proof01[0]!.run_id, proof01[1]!.run_id);
    assert.ok(proof01[0]!.answers[0]!.text.includes('round 1'), 'the old raw answer is still in the log');
    assert.equal(fs.readdirSync(path.dirname(ws.output)).filter((f) => f.endsWith('.tmp')).length, 0, 'no temp file left');
  });

  test('a torn last line is repaired: the CSV parses, that pair alone is judged again', async (t) => {
    const { fake, ws, run } = await setup(t, {}, { models: 3 });
    assert.equal((await run(['--concurrency', '1'])).code, 0);
    const lines = fs.readFileSync(ws.output, 'utf8').split('\n');
    const last = lines.at(-2)!;
    const tornKey = `${last.split(',')[1]}/${last.split(',')[0]}`;
    const torn = `${lines.slice(0, -2).join('\n')}\n${last.slice(0, 15)}`;
    fs.writeFileSync(ws.output, torn);
    assert.throws(() => readCsv(ws.output), 'the torn file does not parse as complete rows');
    const before = fake.requests.length;
    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /repaired .*torn last line/);
    assert.match(result.stderr, /skipping 8 transcript\(s\)/);
    assert.deepEqual(fake.requests.slice(before).map(tagOf), [tornKey]);
    assert.deepEqual(assertWellFormedCsv(ws.output), allKeys(ws.pairs));
  });

  test('a CSV holding only a torn header is repaired and gets a full header', async (t) => {
    const { fake, ws, run } = await setup(t);
    fs.mkdirSync(path.dirname(ws.output), { recursive: true });
    fs.writeFileSync(ws.output, 'task_id,model,mathem');
    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /repaired/);
    assert.equal(fake.requests.length, 6);
    assert.deepEqual(assertWellFormedCsv(ws.output), allKeys(ws.pairs));
  });

  test('a torn line holding an open quoted field (notes with a newline) is repaired too', async (t) => {
    const { fake, ws, run } = await setup(t, { responder: () => ({ text: fake.validAnswer({}, 'line one\nline two, "quoted"') }) });
    assert.equal((await run(['--concurrency', '1'])).code, 0);
    const text = fs.readFileSync(ws.output, 'utf8');
    fs.writeFileSync(ws.output, `${text}proof09,m09,2,2,2,2,2,2,"half a note\nstill open`);
    const before = fake.requests.length;
    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /repaired/);
    assert.equal(fake.requests.length, before, 'the torn pair does not exist in the workspace; nothing to judge');
    assert.equal(fs.readFileSync(ws.output, 'utf8'), text, 'back to the complete rows');
    assert.equal(csvRows(ws.output)[0]!.record[8], 'line one\nline two, "quoted"');
  });
});

// ---------------------------------------------------------------------------------------------
describe('crash safety', () => {
  test('kill -9 mid-run, then a rerun: exactly one row per pair, only the missing ones judged again', { timeout: 60_000 }, async (t) => {
    const { fake, ws, start, run } = await setup(t, { latencyMs: 300 }, { models: 10 });
    const { child, done } = start(['--concurrency', '4']);
    await waitFor(() => rowCount(ws.output) >= 5, 20_000, 'some rows');
    child.kill('SIGKILL');
    const killed = await done;
    assert.equal(killed.signal, 'SIGKILL');
    const afterKill = assertWellFormedCsv(ws.output);
    assert.ok(afterKill.length >= 5 && afterKill.length < 30, `rows after the kill: ${afterKill.length}`);
    assert.ok(fs.existsSync(`${ws.output}.lock`), 'the killed run left its lock behind');

    const before = fake.requests.length;
    const result = await run(['--concurrency', '4']);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, new RegExp(`skipping ${afterKill.length} transcript\\(s\\)`));
    const rejudged = fake.requests.slice(before).map(tagOf).sort();
    assert.deepEqual(rejudged, allKeys(ws.pairs).filter((k) => !afterKill.includes(k)), 'only what was missing');
    assert.deepEqual(assertWellFormedCsv(ws.output), allKeys(ws.pairs));
    assert.equal(rowCount(ws.output), 30);
    assert.equal(fs.existsSync(`${ws.output}.lock`), false);
  });
});

// ---------------------------------------------------------------------------------------------
describe('lock', { concurrency: true }, () => {
  test('a lock held by a live process stops the run, naming its pid; the lock is left alone', async (t) => {
    const { fake, ws, run } = await setup(t);
    fs.mkdirSync(path.dirname(ws.output), { recursive: true });
    fs.writeFileSync(`${ws.output}.lock`, `${process.pid}\n`);
    const result = await run();
    assert.notEqual(result.code, 0);
    assert.ok(result.stderr.includes(`process ${process.pid}`), result.stderr);
    assert.equal(fake.requests.length, 0);
    assert.equal(fs.readFileSync(`${ws.output}.lock`, 'utf8'), `${process.pid}\n`);
    assert.equal(fs.existsSync(ws.output), false);
  });

  test('a stale lock from a dead process is taken over; the run succeeds and removes it', async (t) => {
    const { ws, run } = await setup(t);
    const dead = spawn(process.execPath, ['-e', '']);
    await new Promise((resolve) => dead.once('close', resolve));
    fs.mkdirSync(path.dirname(ws.output), { recursive: true });
    fs.writeFileSync(`${ws.output}.lock`, `${dead.pid}\n`);
    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    assert.equal(rowCount(ws.output), 6);
    assert.equal(fs.existsSync(`${ws.output}.lock`), false);
  });

  test('a second run on the same output while the first is running exits non-zero naming the first', { timeout: 30_000 }, async (t) => {
    const { fake, ws, start, run } = await setup(t, { latencyMs: 500 });
    const first = start(['--concurrency', '1']);
    await waitFor(() => fake.requests.length >= 1, 10_000, 'the first run to start');
    const lock = fs.readFileSync(`${ws.output}.lock`, 'utf8').trim();
    assert.equal(lock, String(first.child.pid));
    const second = await run();
    assert.equal(second.code, 2);
    assert.ok(second.stderr.includes(`process ${first.child.pid}`), second.stderr);
    const firstResult = await first.done;
    assert.equal(firstResult.code, 0, firstResult.stderr);
    assert.equal(fake.requests.length, 6, 'the second run sent nothing');
    assert.deepEqual(assertWellFormedCsv(ws.output), allKeys(ws.pairs));
  });
});

// ---------------------------------------------------------------------------------------------
describe('audit log', { concurrency: true }, () => {
  test('one line per transcript with every field, including an unparseable answer\'s raw text', async (t) => {
    const { fake, ws, run } = await setup(t, {
      responder: (req) => (tagOf(req) === 'm01/proof01' && modelOf(req) === 'judge-a' ? { text: 'I think it is good', usage: { input_tokens: 7, output_tokens: 3 } } : undefined),
    });
    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    const log = readLog(ws.log);
    assert.equal(log.length, 6);
    const rubricSha = sha256(fs.readFileSync(ws.rubric));
    const runIds = new Set(log.map((e) => e.run_id));
    assert.equal(runIds.size, 1);
    assert.match([...runIds][0]!, /^[0-9a-f-]{36}$/);
    for (const entry of log) {
      assert.ok(!Number.isNaN(Date.parse(entry.timestamp)), entry.timestamp);
      assert.equal(entry.status, 'scored');
      assert.match(entry.prompt_sha256!, /^[0-9a-f]{64}$/);
      assert.equal(entry.rubric_sha256, rubricSha);
      assert.equal(typeof entry.latency_ms, 'number');
      assert.ok(entry.answers.length >= 1);
      const req = fake.requests.find((r) => tagOf(r) === `${entry.model}/${entry.task_id}`)!;
      assert.equal(entry.prompt_sha256, sha256(req.body.messages[0].content), 'the hash of the prompt actually sent');
    }
    const entry = log.find((e) => e.model === 'm01' && e.task_id === 'proof01')!;
    assert.equal(entry.judge, 'judge-b');
    assert.deepEqual(entry.attempts.map((a) => [a.judge, a.error, a.status]), [['judge-a', 'EvalJudgeResponseError', null]]);
    assert.match(entry.attempts[0]!.message, /unusable answer/);
    assert.deepEqual(entry.answers.map((a) => [a.judge, a.text]), [['judge-a', 'I think it is good'], ['judge-b', fake.validAnswer()]]);
    assert.deepEqual(entry.usage, { input_tokens: 107, output_tokens: 23 }, 'usage sums every answer');
    assert.deepEqual(entry.answers[0]!.usage, { input_tokens: 7, output_tokens: 3 });
    assert.match(entry.answers[0]!.request_id!, /^req_fake_\d+$/);
    assert.equal(entry.scores?.mathematical_correctness, 2);
    const other = log.find((e) => e.model === 'm02' && e.task_id === 'proof03')!;
    assert.equal(other.judge, 'judge-a');
    assert.deepEqual(other.attempts, []);
    assert.match(result.stderr, /tokens in 607, out 123/, 'five answers of 100/20 tokens and two for the fallback transcript');
  });

  test('prompt_sha256 equals the sha256 of the prompt the dry-run prints', async (t) => {
    const { ws, run } = await setup(t);
    const dry = await run(['--dry-run', '--task', 'proof02', '--model', 'm01'], { apiKey: null });
    assert.equal(dry.code, 0);
    assert.equal((await run(['--task', 'proof02', '--model', 'm01'])).code, 0);
    assert.equal(readLog(ws.log)[0]!.prompt_sha256, sha256(dry.stdout.slice(0, -1)));
  });

  test('the API key never appears in the log, CSV, stdout or stderr', async (t) => {
    const secret = 'sk-test-SECRET';
    const { fake, ws, run } = await setup(t, {
      responder: (req) => (tagOf(req) === 'm02/proof01' ? error(500, 'api_error', 'boom') : tagOf(req) === 'm01/proof02' && modelOf(req) === 'judge-a' ? { text: 'nope' } : undefined),
    });
    const result = await run([], { apiKey: secret });
    assert.equal(result.code, 1, result.stderr);
    assert.ok(fake.requests.every((req) => req.headers['x-api-key'] === secret || req.headers.authorization === `Bearer ${secret}`), 'the key is sent, from api_key_env');
    for (const [what, text] of [['log', fs.readFileSync(ws.log, 'utf8')], ['CSV', fs.readFileSync(ws.output, 'utf8')], ['stdout', result.stdout], ['stderr', result.stderr]] as const) {
      assert.ok(!text.includes(secret), `${what} holds the key`);
      assert.ok(!text.includes('SECRET'), `${what} holds part of the key`);
    }
    assert.equal(readLog(ws.log).filter((e) => e.status === 'failed').length, 1);
  });
});

// ---------------------------------------------------------------------------------------------
describe('CSV formula injection', { concurrency: true }, () => {
  test('notes starting with = + - @ tab or CR get a leading quote in the CSV; the log keeps them raw', async (t) => {
    const notes: Record<string, string> = {
      'm01/proof01': '=HYPERLINK("http://evil.example","click")',
      'm01/proof02': '+1+2',
      'm01/proof03': '-2+3',
      'm02/proof01': '@SUM(A1:A2)',
      'm02/proof02': '\tcmd',
      'm02/proof03': '  =1+1',
      'm03/proof01': '\r=1',
      'm03/proof02': 'fine = not a formula',
      'm03/proof03': 'plain',
    };
    const { fake, ws, run } = await setup(t, { responder: (req) => ({ text: fake.validAnswer({}, notes[tagOf(req)!]) }) }, { models: 3 });
    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    const cells = Object.fromEntries(csvRows(ws.output).map((row) => [row.key, row.record[8]]));
    for (const [key, raw] of Object.entries(notes)) {
      const dangerous = /^[ ]*[=+\-@\t\r]/.test(raw);
      assert.equal(cells[key], dangerous ? `'${raw}` : raw, key);
    }
    assert.equal(cells['m01/proof01'], '\'=HYPERLINK("http://evil.example","click")');
    for (const entry of readLog(ws.log)) assert.equal(entry.notes, notes[`${entry.model}/${entry.task_id}`]);
  });
});

// ---------------------------------------------------------------------------------------------
describe('output streams', { concurrency: true }, () => {
  test('stderr that is not a terminal holds no control characters; stdout of a run is empty', async (t) => {
    const { run } = await setup(t, {
      latencyMs: 20,
      responder: (req, i) => (i === 0 ? rateLimited('0.05') : tagOf(req) === 'm02/proof03' ? { text: 'prose' } : undefined),
    });
    const result = await run();
    assert.equal(result.code, 1, result.stderr);
    assert.equal(result.stdout, '');
    assert.ok(result.stderr.length > 0);
    assert.ok(!result.stderr.includes('\x1b'), 'no ESC');
    assert.ok(!result.stderr.includes('\r'), 'no carriage return');
    assert.match(result.stderr, /6 selected: 5 scored, 0 skipped .* 1 failed; tokens in \d+, out \d+; wall time [\d.]+ s/);
    assert.match(result.stderr, /m02\/proof03: attempt failed: judge judge-a: unusable answer/);
  });

  test('--help explains every flag and the exit statuses, exit 0', async () => {
    const result = await runCli(['--help']);
    assert.equal(result.code, 0);
    for (const flag of ['--task', '--model', '--dry-run', '--concurrency', '--rescore', '--transcripts', '--tasks', '--reference-keys', '--rubric', '--models', '--output', '--log']) {
      assert.ok(result.stdout.includes(flag), flag);
    }
    assert.match(result.stdout, /Exit status/);
  });
});

// ---------------------------------------------------------------------------------------------
describe('SIGINT', () => {
  test('the first SIGINT finishes the judgements in flight, writes them, prints the summary, exits 130; a rerun completes', { timeout: 60_000 }, async (t) => {
    const { fake, ws, start, run } = await setup(t, { latencyMs: 500 }, { models: 10, tasks: ['proof01', 'proof02'] });
    const { child, done } = start(['--concurrency', '2']);
    await waitFor(() => rowCount(ws.output) >= 1, 20_000, 'the first rows');
    child.kill('SIGINT');
    const result = await done;
    assert.equal(result.code, 130, result.stderr);
    assert.match(result.stderr, /stopping: finishing the judgements in flight/);
    assert.match(result.stderr, /interrupted: 20 selected: \d+ scored/);
    const rows = assertWellFormedCsv(ws.output);
    assert.equal(rows.length, fake.requests.length, 'every request answered became a row');
    assert.ok(rows.length >= 2 && rows.length < 20, `rows: ${rows.length}`);
    assert.match(result.stderr, new RegExp(`20 selected: ${rows.length} scored`));
    assert.equal(readLog(ws.log).length, rows.length);
    assert.equal(fs.existsSync(`${ws.output}.lock`), false);

    const before = fake.requests.length;
    const rerun = await run(['--concurrency', '8']);
    assert.equal(rerun.code, 0, rerun.stderr);
    assert.equal(fake.requests.length - before, 20 - rows.length);
    assert.deepEqual(assertWellFormedCsv(ws.output), allKeys(ws.pairs));
  });

  test('a second SIGINT exits at once with 130; what was written stays complete', { timeout: 30_000 }, async (t) => {
    const { fake, ws, start } = await setup(t, { latencyMs: 3000 });
    const { child, done } = start(['--concurrency', '2']);
    await waitFor(() => fake.requests.length >= 2, 10_000, 'requests in flight');
    child.kill('SIGINT');
    await new Promise((resolve) => setTimeout(resolve, 400));
    const sentAt = Date.now();
    child.kill('SIGINT');
    const result = await done;
    assert.equal(result.code, 130);
    assert.ok(Date.now() - sentAt < 1500, 'did not wait for the 3 s answers');
    assert.equal(rowCount(ws.output), 0);
    assertWellFormedCsv(ws.output);
    assert.equal(fs.existsSync(`${ws.output}.lock`), false, 'the exit handler removed the lock');
  });
});

// ---------------------------------------------------------------------------------------------
describe('review fixes', { concurrency: true }, () => {
  /** The workspace's flags with one path flag's value replaced. */
  const withFlag = (args: string[], flag: string, value: string) => args.map((arg, i) => (args[i - 1] === flag ? value : arg));

  // Unwritable outputs: the parent of /dev/null/x.csv is an existing file (mkdir says EEXIST); deeper, ENOTDIR.
  for (const [flag, file] of [
    ['--output', '/dev/null/x.csv'],
    ['--output', '/dev/null/sub/x.csv'],
    ['--log', '/dev/null/log.jsonl'],
    ['--log', '/dev/null/sub/log.jsonl'],
  ] as const) {
    test(`${flag} ${file} (cannot be created) exits 2 naming the path, without a stack trace or a request; no lock left`, async (t) => {
      const { fake, ws } = await setup(t);
      const result = await runCli(withFlag(ws.args(), flag, file), { baseUrl: fake.url });
      assert.equal(result.code, 2, result.stderr);
      assert.ok(result.stderr.includes(file), result.stderr);
      assert.doesNotMatch(result.stderr, /^\s+at /m, 'no stack trace');
      assert.equal(fake.requests.length, 0);
      assert.equal(fs.existsSync(`${ws.output}.lock`), false);
    });
  }

  test('a 401 while other transcripts are retrying 429s stops those retries too: exit 2, no request after the 401', { timeout: 30_000 }, async (t) => {
    const answeredAt: number[] = [];
    const { fake, ws, run } = await setup(t, {
      // m01/proof01 gets its 401 at ~400 ms; every other request is asked to wait 0.3 s, for up to 20 retries and 30 s.
      responder: (req) => {
        if (tagOf(req) !== 'm01/proof01') return rateLimited('0.3');
        answeredAt.push(req.at + 400);
        return error(401, 'authentication_error', 'invalid x-api-key', { delayMs: 400 });
      },
    }, { judge: judgeEntry('judge-a', { retry: { max_retries: 20, budget_s: 30, base_delay_s: 0.05 } }) });
    const result = await run(['--concurrency', '4']);
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /stopped: judge judge-a: HTTP 401 authentication_error/);
    assert.equal(answeredAt.length, 1, 'one 401');
    const after = fake.requests.filter((req) => req.at > answeredAt[0]! + 100).map((req) => `${tagOf(req)} +${req.at - answeredAt[0]!} ms`);
    assert.deepEqual(after, [], 'no request started after the 401 was answered');
    assert.ok(fake.requests.length <= 1 + 3 * 3, `${fake.requests.length} requests: the 429-retrying transcripts kept retrying`);
    assert.ok(fake.requests.every((req) => modelOf(req) === 'judge-a'), 'no fallback judge after a configuration error');
    assert.deepEqual([...new Set(fake.requests.map(tagOf))].sort(), ['m01/proof01', 'm01/proof02', 'm01/proof03', 'm02/proof01'], 'the other two were never started');
    assert.equal(rowCount(ws.output), 0);
  });
});
