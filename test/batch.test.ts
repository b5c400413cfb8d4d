// End-to-end tests of issue 4 (Message Batches, structured outputs, images in transcripts), driving the CLI as a
// process against the loopback fake; plus unit tests of splitIntoBatches and batchCustomId.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import type { TestContext } from 'node:test';
import { FakeAnthropic } from './fake-anthropic.ts';
import type { BatchResult, FakeOptions, RecordedRequest, Reply } from './fake-anthropic.ts';
import {
  csvRows, judgeEntry, makeWorkspace, readCsv, readLog, runCli, setupCli, sha256, snapshot, startCli, tagLine, waitFor,
} from './cli-helpers.ts';
import type { CliOptions, Workspace, WorkspaceOptions } from './cli-helpers.ts';
import {
  BATCH_LIMITS, EvalInputError, batchCustomId, buildJudgePrompt, loadJson, loadRubric, loadTranscript, splitIntoBatches,
} from '../run-judge.ts';
import type { ReferenceKey, Task } from '../run-judge.ts';

// ---------------------------------------------------------------------------------------------
// Helpers (this file's own; cli-helpers.ts is shared and left untouched)
// ---------------------------------------------------------------------------------------------

const POLL = ['--batch', '--poll-interval', '0.05'];
const CUSTOM_ID = /^[A-Za-z0-9_-]{1,64}$/;
const PNG_1X1 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';
const GIF_1X1 = 'R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7';

/** Every HTTP request the fake receives (batch endpoints included, which `fake.requests` leaves out): "METHOD /path". */
function recordAllHttp(fake: FakeAnthropic): string[] {
  const seen: string[] = [];
  // The fake keeps its server private; listening to it records traffic without changing the fake.
  const server = (fake as unknown as { server: Server }).server;
  server.prependListener('request', (req: IncomingMessage) => { seen.push(`${req.method} ${(req.url ?? '').split('?')[0]}`); });
  return seen;
}

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * Puts `intercept` in front of the fake's own handler, for what the fake cannot script (a batch create the API
 * rejects, a results stream missing a line); `intercept` returns true when it answered the request itself.
 */
function interceptHttp(fake: FakeAnthropic, intercept: (req: IncomingMessage, res: ServerResponse) => boolean): void {
  const server = (fake as unknown as { server: Server }).server;
  const handlers = server.listeners('request') as Handler[];
  server.removeAllListeners('request');
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (!intercept(req, res)) for (const handler of handlers) handler(req, res);
  });
}

/** Makes the fake's JSONL results drop the results of the given custom_ids. */
function dropResults(fake: FakeAnthropic, dropped: () => string[]): void {
  interceptHttp(fake, (req, res) => {
    if (/\/results$/.test((req.url ?? '').split('?')[0]!)) {
      const end = res.end.bind(res) as (body: string) => ServerResponse;
      (res as unknown as { end: (body: string) => ServerResponse }).end = (body: string) => end(body.split('\n')
        .filter((line) => line !== '' && !dropped().includes((JSON.parse(line) as { custom_id: string }).custom_id))
        .map((line) => `${line}\n`).join(''));
    }
    return false;
  });
}

async function setup(t: TestContext, fakeOpts: FakeOptions = {}, wsOpts: WorkspaceOptions = {}) {
  const cli = await setupCli(t, fakeOpts, wsOpts);
  return { ...cli, http: recordAllHttp(cli.fake), stateFile: `${cli.ws.output}.batches.json` };
}

const modelOf = (req: RecordedRequest) => req.body?.model as string;
const tagOf = (req: RecordedRequest) => tagOfParams(req.body);
const keysOf = (ws: Workspace) => ws.pairs.map((p) => `${p.model}/${p.task_id}`).sort();
const rowKeys = (file: string) => csvRows(file).map((row) => row.key).sort();
const creates = (http: string[]) => http.filter((line) => line === 'POST /v1/messages/batches').length;
const syncCalls = (http: string[]) => http.filter((line) => line === 'POST /v1/messages').length;

/** The "model/task" of a request (synchronous body or batch params), from the tag line the workspace puts in each transcript. */
function tagOfParams(params: any): string | undefined {
  const content = params?.messages?.[0]?.content;
  const text = typeof content === 'string' ? content
    : Array.isArray(content) ? content.map((block: any) => (block?.type === 'text' ? block.text : '')).join('\n') : '';
  return /test-tag (\S+\/\S+)/.exec(text)?.[1];
}

/** Batch results scripted per transcript ("m01/proof02"); unlisted ones succeed with the fake's valid answer. */
function resultsByTag(map: Record<string, BatchResult>): FakeOptions['batch'] {
  return { result: (_id, params) => map[tagOfParams(params) ?? ''] };
}

/** One log entry per key; fails when a key has none or several. */
function logByKey(file: string) {
  const entries = readLog(file);
  const byKey = new Map<string, (typeof entries)[number]>();
  for (const entry of entries) {
    const key = `${entry.model}/${entry.task_id}`;
    assert.ok(!byKey.has(key), `one log entry for ${key}`);
    byKey.set(key, entry);
  }
  return byKey;
}

/** A copy of the shipped rubric in which proof_scaffolding allows 0, 2 or 4: enums must follow the rubric, not 0..2. */
function rubricWithGaps(): { text: string; allowed: Record<string, number[]> } {
  const rubric = JSON.parse(fs.readFileSync(new URL('../rubric.json', import.meta.url), 'utf8')) as { dimensions: { name: string; scores: Record<string, string> }[] };
  const scaffolding = rubric.dimensions.find((d) => d.name === 'proof_scaffolding')!;
  scaffolding.scores = { 0: 'none', 2: 'some', 4: 'excellent' };
  const allowed = Object.fromEntries(rubric.dimensions.map((d) => [d.name, Object.keys(d.scores).map(Number).sort((a, b) => a - b)]));
  return { text: JSON.stringify(rubric, null, 2), allowed };
}

/** Checks the structured-output schema: flat, all required, enums of the allowed scores, no bounds, closed objects. */
function assertAnswerSchema(schema: any, allowed: Record<string, number[]>): void {
  const keysAnywhere = new Set<string>();
  const walk = (value: unknown) => {
    if (Array.isArray(value)) value.forEach(walk);
    else if (value && typeof value === 'object') for (const [key, child] of Object.entries(value)) { keysAnywhere.add(key); walk(child); }
  };
  walk(schema);
  for (const banned of ['$ref', '$defs', 'definitions', '$schema', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum']) {
    assert.ok(!keysAnywhere.has(banned), `no "${banned}" anywhere in the schema: ${JSON.stringify(schema)}`);
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
    assert.deepEqual([...scores.properties[name].enum].sort((a: number, b: number) => a - b), values, `enum of ${name}`);
  }
}

/** Replaces m01/proof01 (by default) with a transcript holding a file image (photo.png beside it) and an inline GIF. */
function writeImageTranscript(ws: Workspace, { model = 'm01', taskId = 'proof01', withFile = true } = {}): { png: string; transcript: string } {
  const dir = path.join(ws.transcripts, model);
  const png = path.join(dir, 'photo.png');
  if (withFile) fs.writeFileSync(png, Buffer.from(PNG_1X1, 'base64'));
  const transcript = path.join(dir, `${taskId}.json`);
  fs.writeFileSync(transcript, JSON.stringify({
    metadata: { task_id: taskId, model },
    messages: [
      { role: 'system', content: tagLine(model, taskId) },
      { role: 'user', content: [{ type: 'text', text: 'IMG-BEFORE my attempt:' }, { type: 'image', path: 'photo.png' }, { type: 'text', text: 'IMG-AFTER is it right?' }] },
      { role: 'assistant', content: 'What does your second line claim?' },
      { role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/gif', data: GIF_1X1 } }] },
    ],
  }, null, 2));
  return { png, transcript };
}

/** The content of a request for the image transcript: prompt text, then each label and its image, in order. */
function assertImageContent(content: any): void {
  assert.ok(Array.isArray(content), 'content is a list of blocks');
  assert.equal(content.length, 5, JSON.stringify(content).slice(0, 400));
  assert.equal(content[0].type, 'text');
  const prompt = content[0].text as string;
  assert.match(prompt, /Student: IMG-BEFORE my attempt:\n {4}\[image 1\]\n {4}IMG-AFTER is it right\?/);
  assert.match(prompt, /Student: \[image 2\]/);
  assert.ok(!prompt.includes('[image 3]'));
  assert.deepEqual(content.slice(1), [
    { type: 'text', text: '[image 1]' },
    { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG_1X1 } },
    { type: 'text', text: '[image 2]' },
    { type: 'image', source: { type: 'base64', media_type: 'image/gif', data: GIF_1X1 } },
  ]);
}

const imageJudge = (model: string, extra: Record<string, unknown> = {}) => judgeEntry(model, { media: ['text', 'image'], ...extra });

// ---------------------------------------------------------------------------------------------
describe('--batch', () => {
  test('one batch for all pending rows, valid unique custom_ids, no synchronous call, rows, log, state file removed', async (t) => {
    const { fake, http, ws, run, stateFile } = await setup(t);
    const result = await run(POLL);
    assert.equal(result.code, 0, result.stderr);

    assert.equal(fake.batches.length, 1);
    assert.equal(creates(http), 1);
    const requests = fake.batches[0]!.requests;
    assert.equal(requests.length, 6);
    const ids = requests.map((r) => r.custom_id);
    for (const id of ids) assert.match(id, CUSTOM_ID);
    assert.equal(new Set(ids).size, 6, 'custom_ids are unique');
    assert.deepEqual(requests.map((r) => tagOfParams(r.params)).sort(), keysOf(ws), 'one request per pair');
    assert.ok(requests.every((r) => r.params.model === 'judge-a' && r.params.max_tokens === 512 && !('output_config' in r.params)));

    assert.equal(fake.requests.length, 0);
    assert.equal(syncCalls(http), 0);
    assert.deepEqual(rowKeys(ws.output), keysOf(ws));
    assert.equal(readCsv(ws.output).length, 7, 'header + 6 rows');
    assert.equal(fs.existsSync(stateFile), false, 'state file removed when done');
    assert.equal(fs.existsSync(`${ws.output}.lock`), false);

    const log = logByKey(ws.log);
    assert.equal(log.size, 6);
    for (const entry of log.values()) {
      assert.equal(entry.status, 'scored');
      assert.equal(entry.judge, 'judge-a');
      assert.equal(entry.answers.length, 1);
      assert.equal(entry.answers[0]!.text, fake.validAnswer());
      assert.equal(entry.attempts.length, 0);
    }
    assert.match(result.stderr, /batches created 1, resumed 0/);
  });

  test('results arriving out of order are matched by custom_id: each row gets its own scores and notes', async (t) => {
    const order: string[] = [];
    const scoresFor = (key: string, i: number) => ({ mathematical_correctness: i % 3, proof_scaffolding: Math.floor(i / 3), error_diagnosis: (i + 1) % 3 });
    const keys = ['m01', 'm02'].flatMap((model) => ['proof01', 'proof02', 'proof03'].map((taskId) => `${model}/${taskId}`));
    const { fake, ws, run } = await setup(t, {
      batch: {
        result: (customId, params) => {
          const key = tagOfParams(params)!;
          order.push(customId);
          return { type: 'succeeded', text: fake.validAnswer(scoresFor(key, keys.indexOf(key)), `note for ${key}`) };
        },
      },
    });
    const result = await run(POLL);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.requests.length, 0);
    const rows = csvRows(ws.output);
    assert.equal(rows.length, 6);
    for (const { key, record } of rows) {
      const expected = scoresFor(key, keys.indexOf(key));
      assert.deepEqual(record.slice(2, 5), [expected.mathematical_correctness, expected.proof_scaffolding, expected.error_diagnosis].map(String), key);
      assert.equal(record[8], `note for ${key}`);
    }
    // The audit log pairs each transcript with its own answer too.
    for (const [key, entry] of logByKey(ws.log)) assert.equal(entry.notes, `note for ${key}`);
    assert.equal(new Set(order).size, 6);
  });

  test('errored, expired and canceled results go through the synchronous chain, primary judge first', async (t) => {
    const { fake, ws, run, stateFile } = await setup(t, {
      batch: resultsByTag({
        'm01/proof01': { type: 'errored', errorType: 'overloaded_error', message: 'Overloaded' },
        'm01/proof02': { type: 'expired' },
        'm01/proof03': { type: 'canceled' },
      }),
      // The primary fails synchronously too, so the fallback order shows.
      responder: (req) => (modelOf(req) === 'judge-a' ? { kind: 'error', status: 500, type: 'api_error', message: 'boom' } : undefined),
    }, { models: 1 });
    const result = await run(POLL);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.batches.length, 1);
    assert.equal(fake.batches[0]!.requests.length, 3);
    assert.equal(fake.requests.length, 6);
    for (const key of ['m01/proof01', 'm01/proof02', 'm01/proof03']) {
      assert.deepEqual(fake.requests.filter((req) => tagOf(req) === key).map(modelOf), ['judge-a', 'judge-b'], key);
    }
    assert.deepEqual(rowKeys(ws.output), keysOf(ws));
    const log = logByKey(ws.log);
    const expectedKind = { 'm01/proof01': /errored.*overloaded_error/, 'm01/proof02': /expired/, 'm01/proof03': /canceled/ } as const;
    for (const [key, kind] of Object.entries(expectedKind)) {
      const entry = log.get(key)!;
      assert.equal(entry.status, 'scored');
      assert.equal(entry.judge, 'judge-b');
      assert.equal(entry.attempts.length, 2, JSON.stringify(entry.attempts));
      assert.match(entry.attempts[0]!.message, kind);
      assert.equal(entry.attempts[1]!.status, 500);
    }
    assert.equal(fs.existsSync(stateFile), false);
  });

  test('--no-fallback: failed batch results are reported failed (exit 1) with zero synchronous calls', async (t) => {
    const { fake, http, ws, run, stateFile } = await setup(t, {
      batch: resultsByTag({ 'm01/proof01': { type: 'errored' }, 'm01/proof02': { type: 'expired' }, 'm01/proof03': { type: 'succeeded', text: 'I think 2' } }),
    }, { models: 2 });
    const result = await run([...POLL, '--no-fallback']);
    assert.equal(result.code, 1, result.stderr);
    assert.equal(fake.requests.length, 0);
    assert.equal(syncCalls(http), 0);
    assert.deepEqual(rowKeys(ws.output), ['m02/proof01', 'm02/proof02', 'm02/proof03']);
    assert.match(result.stderr, /6 selected: 3 scored, 0 skipped .*3 failed/);
    for (const key of ['m01/proof01', 'm01/proof02', 'm01/proof03']) assert.match(result.stderr, new RegExp(`failed ${key}: `));
    const log = logByKey(ws.log);
    assert.equal(log.get('m01/proof03')!.status, 'failed');
    assert.equal(log.get('m01/proof03')!.answers[0]!.text, 'I think 2');
    assert.equal(fs.existsSync(stateFile), false, 'the ended batch is no longer pending');
  });

  test('an unparseable batch answer goes through the synchronous chain; the log keeps the batch answer', async (t) => {
    const { fake, ws, run } = await setup(t, {
      batch: resultsByTag({ 'm01/proof02': { type: 'succeeded', text: 'I think 2' } }),
      responder: () => ({ text: JSON.stringify({ scores: { mathematical_correctness: 0, proof_scaffolding: 1, error_diagnosis: 0, student_agency: 1, proof_convention_alignment: 0, integrity_boundary: 1 }, notes: 'sync answer' }) }),
    }, { models: 1 });
    const result = await run(POLL);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(fake.requests.map((req) => [tagOf(req), modelOf(req)]), [['m01/proof02', 'judge-a']]);
    const row = csvRows(ws.output).find((r) => r.key === 'm01/proof02')!;
    assert.deepEqual(row.record.slice(2), ['0', '1', '0', '1', '0', '1', 'sync answer']);
    assert.equal(rowKeys(ws.output).length, 3);
    const entry = logByKey(ws.log).get('m01/proof02')!;
    assert.equal(entry.status, 'scored');
    assert.equal(entry.answers.length, 2);
    assert.equal(entry.answers[0]!.text, 'I think 2');
    assert.match(entry.answers[1]!.text, /sync answer/);
    assert.equal(entry.attempts.length, 1);
    assert.equal(entry.attempts[0]!.error, 'EvalJudgeResponseError');
  });

  test('resume after the process is killed while polling: no second create, every row written once', async (t) => {
    const { fake, http, ws, run, start, stateFile } = await setup(t, { batch: { pollsUntilEnded: 1000 } });
    const first = start(POLL);
    await waitFor(() => fs.existsSync(stateFile) && fake.batches.length === 1 && fake.batchPolls >= 1, 20_000, 'polling');
    // The state file maps every custom_id and names the batch before polling starts.
    const state = fs.readFileSync(stateFile, 'utf8');
    assert.ok(state.includes(fake.batches[0]!.id));
    for (const request of fake.batches[0]!.requests) assert.ok(state.includes(request.custom_id), request.custom_id);
    first.child.kill('SIGKILL');
    const killed = await first.done;
    assert.equal(killed.signal, 'SIGKILL');
    assert.equal(fs.existsSync(stateFile), true);

    fake.batches[0]!.endedAt = Date.now();
    const result = await run(POLL);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.batches.length, 1, 'no second batch');
    assert.equal(creates(http), 1);
    assert.equal(fake.requests.length, 0);
    assert.match(result.stderr, /resuming 1 pending batch/);
    assert.match(result.stderr, /batches created 0, resumed 1/);
    assert.deepEqual(rowKeys(ws.output), keysOf(ws));
    assert.equal(readCsv(ws.output).length, 7);
    assert.equal(fs.existsSync(stateFile), false);
  });

  test('Ctrl-C while polling leaves the batch running (exit 130, says to rerun, state kept); a rerun resumes it', async (t) => {
    const { fake, http, ws, run, start, stateFile } = await setup(t, { batch: { pollsUntilEnded: 1000 } });
    const first = start(POLL);
    await waitFor(() => fs.existsSync(stateFile) && fake.batches.length === 1 && fake.batchPolls >= 1, 20_000, 'polling');
    first.child.kill('SIGINT');
    const interrupted = await first.done;
    assert.equal(interrupted.code, 130, interrupted.stderr);
    assert.match(interrupted.stderr, /rerun/i);
    assert.ok(interrupted.stderr.includes(fake.batches[0]!.id), 'names the batch left running');
    assert.equal(fs.existsSync(stateFile), true, 'state file kept');
    assert.ok(!http.some((line) => /cancel/.test(line)), `no cancel call: ${http.join(', ')}`);
    assert.equal(fake.batches[0]!.endedAt, undefined);
    assert.equal(fs.existsSync(ws.output) ? csvRows(ws.output).length : 0, 0);
    assert.match(interrupted.stderr, /batches pending 1: 6 processing, 0 succeeded/, 'progress shown while polling');

    const dry = await run(['--dry-run', ...POLL], { apiKey: null });
    assert.equal(dry.code, 0, dry.stderr);
    assert.match(dry.stderr, /all 6 selected transcript\(s\) are already scored or in a pending batch; nothing would be sent/);
    assert.equal(dry.stdout, '');

    fake.batches[0]!.endedAt = Date.now();
    const result = await run(POLL);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.batches.length, 1);
    assert.equal(creates(http), 1);
    assert.deepEqual(rowKeys(ws.output), keysOf(ws));
    assert.equal(fs.existsSync(stateFile), false);
  });

  test('results cut off inside a line are a provider error: the batch stays pending and is collected at the next poll', async (t) => {
    const { fake, ws, run, stateFile } = await setup(t, {}, { models: 1 });
    let cut = true;
    interceptHttp(fake, (req, res) => {
      if (/\/results$/.test((req.url ?? '').split('?')[0]!) && cut) {
        cut = false;
        const end = res.end.bind(res) as (body: string) => ServerResponse;
        (res as unknown as { end: (body: string) => ServerResponse }).end = (body: string) => end(body.slice(0, Math.floor(body.length / 2)));
      }
      return false;
    });
    const result = await run(POLL);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /results were cut off/);
    assert.deepEqual(rowKeys(ws.output), ['m01/proof01', 'm01/proof02', 'm01/proof03']);
    assert.equal(fake.requests.length, 0, 'no synchronous call: the results were read again');
    assert.equal(fs.existsSync(stateFile), false);
  });

  test('a result missing from the results stream goes through the synchronous chain; with --no-fallback it is reported failed', async (t) => {
    const { fake, ws, run, stateFile } = await setup(t, {}, { models: 1 });
    dropResults(fake, () => [batchCustomId('proof01', 'm01')]);
    const result = await run(POLL);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(rowKeys(ws.output), ['m01/proof01', 'm01/proof02', 'm01/proof03']);
    assert.equal(fake.requests.length, 1, 'only the missing transcript is judged synchronously');
    const entry = readLog(ws.log).find((line) => line.task_id === 'proof01')!;
    assert.match(entry.attempts[0]!.message, /returned no result/);
    assert.equal(fs.existsSync(stateFile), false);

    const second = await setup(t, {}, { models: 1 });
    dropResults(second.fake, () => [batchCustomId('proof01', 'm01')]);
    const failed = await second.run([...POLL, '--no-fallback']);
    assert.equal(failed.code, 1, failed.stderr);
    assert.deepEqual(rowKeys(second.ws.output), ['m01/proof02', 'm01/proof03']);
    assert.match(failed.stderr, /failed m01\/proof01: .*returned no result/);
    assert.equal(second.fake.requests.length, 0);
  });

  test('a batch create the API rejects (400) leaves no pending-batch trace and no "orphaned batch" warning on the rerun', async (t) => {
    const { fake, ws, run, stateFile } = await setup(t, {}, { models: 1, judge: judgeEntry('judge-a', { structured_output: true }) });
    let reject = true;
    interceptHttp(fake, (req, res) => {
      if (!(reject && req.method === 'POST' && req.url === '/v1/messages/batches')) return false;
      req.resume().on('end', () => {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message: 'requests.0.params.output_config.format: json_schema is not supported' } }));
      });
      return true;
    });
    const rejected = await run(POLL);
    assert.equal(rejected.code, 2, rejected.stderr);
    assert.match(rejected.stderr, /judge judge-a rejects "structured_output"/);
    assert.equal(fake.batches.length, 0);
    assert.equal(fs.existsSync(stateFile), false, `no pending batch recorded after a rejected create: ${fs.existsSync(stateFile) ? fs.readFileSync(stateFile, 'utf8').slice(0, 120) : ''}`);
    reject = false;
    const rerun = await run(POLL);
    assert.equal(rerun.code, 0, rerun.stderr);
    assert.deepEqual(rowKeys(ws.output), keysOf(ws));
    assert.doesNotMatch(rerun.stderr, /orphaned/, 'nothing was submitted, so nothing can be orphaned');
    assert.equal(fs.existsSync(stateFile), false);
  });

  test('--dry-run --batch prints the first request\'s prompt, counts requests and batches, and sends or writes nothing', async (t) => {
    const { fake, http, ws, run, stateFile } = await setup(t);
    const before = snapshot(ws.dir);
    const result = await run(['--dry-run', ...POLL], { apiKey: null });
    assert.equal(result.code, 0, result.stderr);
    const rubric = loadRubric(ws.rubric);
    const expected = buildJudgePrompt(
      loadJson(path.join(ws.tasks, 'proof01.json')) as Task,
      loadJson(path.join(ws.referenceKeys, 'proof01.json')) as ReferenceKey,
      loadTranscript({ task_id: 'proof01', model: 'm01', path: path.join(ws.transcripts, 'm01', 'proof01.json') }),
      rubric,
    );
    assert.equal(result.stdout, `${expected}\n`);
    assert.match(result.stderr, /would send 6 request\(s\) in 1 batch\(es\)/);
    assert.equal(fake.batches.length, 0);
    assert.deepEqual(http, []);
    assert.deepEqual(snapshot(ws.dir), before, 'no file written');
    assert.equal(fs.existsSync(stateFile), false);
  });

  test('--dry-run --batch counts only the transcripts not yet scored', async (t) => {
    const { fake, ws, run } = await setup(t);
    assert.equal((await run(['--task', 'proof01'])).code, 0);
    assert.equal(fake.requests.length, 2);
    const before = snapshot(ws.dir);
    const result = await run(['--dry-run', ...POLL], { apiKey: null });
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /test-tag m01\/proof02/, 'the first pending transcript');
    assert.match(result.stderr, /would send 4 request\(s\) in 1 batch\(es\)/);
    assert.equal(fake.batches.length, 0);
    assert.equal(fake.requests.length, 2);
    assert.deepEqual(snapshot(ws.dir), before);
  });
});

// ---------------------------------------------------------------------------------------------
describe('splitIntoBatches and batchCustomId', () => {
  const items = (...bytes: number[]) => bytes.map((b, i) => ({ id: i, bytes: b }));
  const ids = (batches: { id: number }[][]) => batches.map((batch) => batch.map((item) => item.id));

  test('splitIntoBatches respects maxRequests and maxBytes, keeps order, and throws for one item over maxBytes', () => {
    assert.deepEqual(ids([...splitIntoBatches(items(1, 1, 1, 1, 1), { maxRequests: 2, maxBytes: 1000 })]), [[0, 1], [2, 3], [4]]);
    assert.deepEqual(ids([...splitIntoBatches(items(40, 60, 1, 50, 50, 100), { maxRequests: 10, maxBytes: 100 })]), [[0, 1], [2, 3], [4], [5]]);
    assert.deepEqual(ids([...splitIntoBatches(items(30, 30, 30, 30, 30), { maxRequests: 2, maxBytes: 70 })]), [[0, 1], [2, 3], [4]]);
    assert.deepEqual([...splitIntoBatches([], { maxRequests: 2, maxBytes: 10 })], []);
    const many = items(...Array.from({ length: 25 }, (_, i) => 1 + (i % 7)));
    const split = [...splitIntoBatches(many, { maxRequests: 4, maxBytes: 12 })];
    assert.deepEqual(split.flat().map((item) => item.id), many.map((item) => item.id), 'order kept, nothing lost');
    for (const batch of split) {
      assert.ok(batch.length >= 1 && batch.length <= 4);
      assert.ok(batch.reduce((sum, item) => sum + item.bytes, 0) <= 12);
    }
    assert.throws(() => [...splitIntoBatches(items(5, 11, 5), { maxRequests: 10, maxBytes: 10 })], (error: unknown) => error instanceof EvalInputError && /11 bytes/.test(error.message));
    assert.deepEqual(BATCH_LIMITS, { maxRequests: 100_000, maxBytes: 256 * 1024 * 1024 });
    assert.equal([...splitIntoBatches(items(...Array(100_001).fill(1)))].length, 2, 'the default limits split at 100,000 requests');
  });

  test('batchCustomId is stable, distinct per pair, and within the API limits', () => {
    const pairs: [string, string][] = [
      ['proof01', 'm01'], ['proof01', 'm02'], ['proof02', 'm01'], ['a_b', 'c'], ['a', 'b_c'], ['a\u0000b', 'c'],
      ['x'.repeat(300), 'model with spaces/and:colons'], ['証明', 'モデル'], ['', ''],
    ];
    const seen = new Set<string>();
    for (const [taskId, model] of pairs) {
      const id = batchCustomId(taskId, model);
      assert.match(id, CUSTOM_ID, `${taskId}/${model}`);
      assert.equal(batchCustomId(taskId, model), id, 'stable');
      seen.add(id);
    }
    assert.equal(seen.size, pairs.length, 'distinct');
    assert.notEqual(batchCustomId('proof01', 'm01'), batchCustomId('m01', 'proof01'));
  });
});

// ---------------------------------------------------------------------------------------------
describe('structured outputs', () => {
  test('the request carries a flat enum schema; the parser still rejects an out-of-range score; the unflagged fallback sends none', async (t) => {
    const rubric = rubricWithGaps();
    const { fake, ws, run } = await setup(t, {
      responder: (req) => (modelOf(req) === 'judge-a' ? { text: fake.validAnswer({ mathematical_correctness: 3 }) } : { text: fake.validAnswer({ proof_scaffolding: 4 }, 'from b') }),
    }, { models: 1, tasks: ['proof01'], rubricText: rubric.text, judge: judgeEntry('judge-a', { structured_output: true }) });
    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(fake.requests.map(modelOf), ['judge-a', 'judge-b']);
    const [primary, fallback] = fake.requests;
    assert.equal(primary!.body.output_config.format.type, 'json_schema');
    assertAnswerSchema(primary!.body.output_config.format.schema, rubric.allowed);
    assert.equal('output_config' in fallback!.body, false, 'no output_config without the flag');
    const entry = logByKey(ws.log).get('m01/proof01')!;
    assert.equal(entry.attempts[0]!.error, 'EvalJudgeResponseError');
    assert.match(entry.attempts[0]!.message, /mathematical_correctness/);
    assert.deepEqual(csvRows(ws.output)[0]!.record.slice(2), ['2', '4', '2', '2', '2', '2', 'from b']);
  });

  test('with --batch, every batch request carries the same schema', async (t) => {
    const rubric = rubricWithGaps();
    const { fake, run } = await setup(t, {}, { models: 1, rubricText: rubric.text, judge: judgeEntry('judge-a', { structured_output: true }) });
    const result = await run(POLL);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.batches.length, 1);
    assert.equal(fake.batches[0]!.requests.length, 3);
    for (const { params } of fake.batches[0]!.requests) {
      assert.equal(params.output_config.format.type, 'json_schema');
      assertAnswerSchema(params.output_config.format.schema, rubric.allowed);
    }
    assert.equal(fake.requests.length, 0);
  });

  test('a 400 saying the schema is unsupported stops the chain (no fallback call), naming the judge and structured_output', async (t) => {
    const unsupported: Reply = { kind: 'error', status: 400, type: 'invalid_request_error', message: 'output_config.format: json_schema is not supported for this model' };
    const { fake, ws, run } = await setup(t, { responder: (req) => (modelOf(req) === 'judge-a' ? unsupported : undefined) },
      { models: 1, tasks: ['proof01', 'proof02'], judge: judgeEntry('judge-a', { structured_output: true }) });
    const result = await run(['--concurrency', '1']);
    assert.equal(result.code, 1, result.stderr);
    assert.deepEqual(fake.requests.map(modelOf), ['judge-a', 'judge-a'], 'the fallback judge is never called');
    assert.match(result.stderr, /failed m01\/proof01: judge judge-a .*"structured_output"/);
    const entry = logByKey(ws.log).get('m01/proof01')!;
    assert.equal(entry.status, 'failed');
    assert.equal(entry.error?.class, 'EvalUnsupportedError');
    assert.equal(fs.existsSync(ws.output) ? csvRows(ws.output).length : 0, 0);
  });
});

// ---------------------------------------------------------------------------------------------
describe('images in transcripts', () => {
  test('placeholders in the prompt, then the images as labelled blocks in order, to an image judge', async (t) => {
    const { fake, ws, run } = await setup(t, {}, { models: 1, tasks: ['proof01', 'proof02'], judge: imageJudge('judge-a') });
    writeImageTranscript(ws);
    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.requests.length, 2);
    const imageRequest = fake.requests.find((req) => tagOf(req) === 'm01/proof01')!;
    assert.equal(modelOf(imageRequest), 'judge-a');
    assertImageContent(imageRequest.body.messages[0].content);
    const textRequest = fake.requests.find((req) => tagOf(req) === 'm01/proof02')!;
    assert.equal(typeof textRequest.body.messages[0].content, 'string', 'a text-only transcript is sent as before');
    assert.deepEqual(rowKeys(ws.output), ['m01/proof01', 'm01/proof02']);
  });

  test('a text-only judge is skipped for the image transcript but still judges the others', async (t) => {
    const { fake, ws, run } = await setup(t, {}, { models: 1, tasks: ['proof01', 'proof02'], judge: judgeEntry('judge-a'), fallbacks: [imageJudge('judge-b')] });
    writeImageTranscript(ws);
    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(fake.requests.filter((req) => modelOf(req) === 'judge-a').map(tagOf), ['m01/proof02']);
    assert.deepEqual(fake.requests.filter((req) => modelOf(req) === 'judge-b').map(tagOf), ['m01/proof01']);
    assertImageContent(fake.requests.find((req) => modelOf(req) === 'judge-b')!.body.messages[0].content);
    const log = logByKey(ws.log);
    assert.equal(log.get('m01/proof01')!.judge, 'judge-b');
    assert.equal(log.get('m01/proof02')!.judge, 'judge-a');
    assert.deepEqual(rowKeys(ws.output), ['m01/proof01', 'm01/proof02']);
  });

  test('when every judge is text-only, the image transcript fails naming them (exit 1); the others still get rows', async (t) => {
    const { fake, ws, run } = await setup(t, {}, { models: 1, tasks: ['proof01', 'proof02'] });
    writeImageTranscript(ws);
    const result = await run();
    assert.equal(result.code, 1, result.stderr);
    assert.deepEqual(fake.requests.map(tagOf), ['m01/proof02']);
    assert.deepEqual(rowKeys(ws.output), ['m01/proof02']);
    assert.match(result.stderr, /failed m01\/proof01: .*judge-a, judge-b/);
    assert.match(result.stderr, /media/);
    assert.match(result.stderr, /2 selected: 1 scored, 0 skipped .*1 failed/);
    assert.equal(logByKey(ws.log).get('m01/proof01')!.status, 'failed');
  });

  test('a missing image file is an input error naming the file; no request for that transcript', async (t) => {
    const { fake, ws, run } = await setup(t, {}, { models: 1, tasks: ['proof01', 'proof02'], judge: imageJudge('judge-a') });
    const { png } = writeImageTranscript(ws, { withFile: false });
    const result = await run();
    assert.equal(result.code, 1, result.stderr);
    assert.ok(result.stderr.includes(png), result.stderr);
    assert.deepEqual(fake.requests.map(tagOf), ['m01/proof02']);
    assert.deepEqual(rowKeys(ws.output), ['m01/proof02']);
    assert.equal(logByKey(ws.log).get('m01/proof01')!.error?.class, 'EvalInputError');
  });

  test('the dry-run shows the placeholders and lists the image files', async (t) => {
    const { fake, http, ws, run } = await setup(t, {}, { models: 1, tasks: ['proof01', 'proof02'], judge: imageJudge('judge-a') });
    const { png } = writeImageTranscript(ws);
    const before = snapshot(ws.dir);
    const result = await run(['--dry-run'], { apiKey: null });
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /Student: IMG-BEFORE my attempt:\n {4}\[image 1\]\n {4}IMG-AFTER is it right\?/);
    assert.match(result.stdout, /Student: \[image 2\]/);
    assert.match(result.stderr, /\[image 1\].*photo\.png/);
    assert.ok(result.stderr.includes(png), result.stderr);
    assert.match(result.stderr, /\[image 2\].*inline base64.*image\/gif/);
    assert.equal(fake.requests.length, 0);
    assert.deepEqual(http, []);
    assert.deepEqual(snapshot(ws.dir), before);
  });

  test('--batch: an image-capable primary gets the images in its batch params', async (t) => {
    const { fake, ws, run } = await setup(t, {}, { models: 1, tasks: ['proof01', 'proof02'], judge: imageJudge('judge-a') });
    writeImageTranscript(ws);
    const result = await run(POLL);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.batches.length, 1);
    const requests = fake.batches[0]!.requests;
    assert.equal(requests.length, 2);
    assertImageContent(requests.find((r) => tagOfParams(r.params) === 'm01/proof01')!.params.messages[0].content);
    assert.equal(fake.requests.length, 0);
    assert.deepEqual(rowKeys(ws.output), ['m01/proof01', 'm01/proof02']);
  });

  test('--batch with a text-only primary: the image transcript is judged synchronously by the image judge, the rest batched', async (t) => {
    const { fake, ws, run } = await setup(t, {}, { models: 1, tasks: ['proof01', 'proof02'], judge: judgeEntry('judge-a'), fallbacks: [imageJudge('judge-b')] });
    writeImageTranscript(ws);
    const result = await run(POLL);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.batches.length, 1);
    assert.deepEqual(fake.batches[0]!.requests.map((r) => r.custom_id), [batchCustomId('proof02', 'm01')]);
    assert.deepEqual(fake.requests.map((req) => [tagOf(req), modelOf(req)]), [['m01/proof01', 'judge-b']]);
    assert.deepEqual(rowKeys(ws.output), ['m01/proof01', 'm01/proof02']);
  });
});

// ---------------------------------------------------------------------------------------------
describe('--batch: review fixes', () => {
  /** Writes a state file by hand, as a previous run would have left it. */
  function writeState(stateFile: string, batches: unknown[]): string {
    fs.mkdirSync(path.dirname(stateFile), { recursive: true });
    const text = JSON.stringify({ version: 1, batches });
    fs.writeFileSync(stateFile, text);
    return text;
  }

  test('a state entry with "id": null (a create that may have gone through) stops the run: exit 2 naming the state file, no batch, no call', async (t) => {
    const { fake, http, ws, run, stateFile } = await setup(t);
    const text = writeState(stateFile, [{ id: null, judge: 'judge-a', submitted_at: '2026-11-30T00:00:00Z', requests: { t_x: ['proof01', 'm01', 'abc'] } }]);
    const result = await run(POLL);
    assert.equal(result.code, 2, result.stderr);
    assert.ok(result.stderr.includes(stateFile), result.stderr);
    assert.equal(fake.batches.length, 0, 'no batch created: that could pay twice');
    assert.deepEqual(http, [], 'no call at all');
    assert.equal(fs.readFileSync(stateFile, 'utf8'), text, 'the state file is left for the user to check');
    assert.equal(fs.existsSync(ws.output) ? csvRows(ws.output).length : 0, 0);
    assert.equal(fs.existsSync(`${ws.output}.lock`), false);
  });

  test('a state entry naming a batch the API does not know (404): warning naming the state file, its transcripts resubmitted, all rows, exit 0', async (t) => {
    const { fake, http, ws, run, stateFile } = await setup(t);
    const gone = [['proof01', 'm01'], ['proof02', 'm02']] as const;
    writeState(stateFile, [{
      id: 'msgbatch_gone', judge: 'judge-a', submitted_at: '2026-11-30T00:00:00Z',
      requests: Object.fromEntries(gone.map(([taskId, model]) => [batchCustomId(taskId, model), [taskId, model, 'abc']])),
    }]);
    const result = await run(POLL);
    assert.equal(result.code, 0, result.stderr);
    assert.ok(http.includes('GET /v1/messages/batches/msgbatch_gone'), http.join(', '));
    const warning = result.stderr.split('\n').find((line) => line.includes('msgbatch_gone')) ?? '';
    assert.match(warning, /^warning: /, result.stderr);
    assert.ok(warning.includes(stateFile), warning);
    assert.match(warning, /submitted again/);
    assert.equal(fake.batches.length, 1, 'one new batch');
    const submitted = fake.batches[0]!.requests.map((r) => r.custom_id);
    assert.equal(submitted.length, 6, 'every pending transcript, those of the unknown batch included');
    for (const [taskId, model] of gone) assert.ok(submitted.includes(batchCustomId(taskId, model)), `${model}/${taskId} resubmitted`);
    assert.equal(fake.requests.length, 0);
    assert.deepEqual(rowKeys(ws.output), keysOf(ws));
    assert.equal(readCsv(ws.output).length, 7);
    assert.match(result.stderr, /batches created 1, resumed 0/);
    assert.equal(fs.existsSync(stateFile), false);
  });

  test('a transcript edited between submission and results is judged again synchronously; the log says its prompt changed', { timeout: 60_000 }, async (t) => {
    const { fake, http, ws, run, start, stateFile } = await setup(t, {
      batch: { pollsUntilEnded: 1000 },
      responder: () => ({ text: fake.validAnswer({}, 'judged again') }),
    });
    const first = start(POLL);
    await waitFor(() => fs.existsSync(stateFile) && fake.batches.length === 1 && fake.batchPolls >= 1, 20_000, 'polling');
    first.child.kill('SIGKILL');
    assert.equal((await first.done).signal, 'SIGKILL');

    const file = path.join(ws.transcripts, 'm01', 'proof02.json');
    const transcript = JSON.parse(fs.readFileSync(file, 'utf8')) as { messages: { role: string; content: string }[] };
    const last = transcript.messages.at(-1)!;
    last.content = `${last.content} EDITED-AFTER-SUBMISSION`;
    fs.writeFileSync(file, JSON.stringify(transcript, null, 2));
    fake.batches[0]!.endedAt = Date.now();

    const result = await run(POLL);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.batches.length, 1, 'no second batch');
    assert.equal(creates(http), 1);
    assert.deepEqual(fake.requests.map((req) => [tagOf(req), modelOf(req)]), [['m01/proof02', 'judge-a']], 'one synchronous request, for the edited pair');
    const sent = fake.requests[0]!.body.messages[0].content as string;
    assert.match(sent, /EDITED-AFTER-SUBMISSION/, 'the current transcript is judged');
    assert.deepEqual(rowKeys(ws.output), keysOf(ws));
    assert.equal(readCsv(ws.output).length, 7, 'one row per pair');
    for (const { key, record } of csvRows(ws.output)) assert.equal(record[8], key === 'm01/proof02' ? 'judged again' : 'ok', key);

    const log = logByKey(ws.log);
    const edited = log.get('m01/proof02')!;
    assert.equal(edited.status, 'scored');
    assert.equal(edited.judge, 'judge-a');
    assert.equal(edited.attempts.length, 1, JSON.stringify(edited.attempts));
    assert.match(edited.attempts[0]!.message, /prompt that has changed since it was submitted/);
    assert.equal(edited.prompt_sha256, sha256(sent), 'the log hashes the prompt that was judged');
    for (const [key, entry] of log) {
      if (key === 'm01/proof02') continue;
      assert.deepEqual([entry.status, entry.attempts.length, entry.answers.length, entry.notes], ['scored', 0, 1, 'ok'], `${key} comes from the batch`);
    }
    assert.equal(fs.existsSync(stateFile), false);
  });

  test('a batch create answered 429 (retry-after 0.1) is retried once it may: exactly 2 create attempts, 1 batch, exit 0', async (t) => {
    const { fake, ws, run, stateFile } = await setup(t, {}, { models: 1 });
    const createAttempts: number[] = [];
    interceptHttp(fake, (req, res) => {
      if (!(req.method === 'POST' && (req.url ?? '').split('?')[0] === '/v1/messages/batches')) return false;
      createAttempts.push(Date.now());
      if (createAttempts.length > 1) return false;
      req.resume().on('end', () => {
        res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '0.1' });
        res.end(JSON.stringify({ type: 'error', error: { type: 'rate_limit_error', message: 'Number of requests has exceeded your per-minute rate limit' } }));
      });
      return true;
    });
    const result = await run(POLL);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(createAttempts.length, 2, 'one retry');
    assert.ok(createAttempts[1]! - createAttempts[0]! >= 95, `retried ${createAttempts[1]! - createAttempts[0]!} ms later, before retry-after`);
    assert.equal(fake.batches.length, 1);
    assert.equal(fake.batches[0]!.requests.length, 3);
    assert.equal(fake.requests.length, 0, 'nothing judged synchronously instead');
    assert.deepEqual(rowKeys(ws.output), keysOf(ws));
    assert.match(result.stderr, /batches created 1, resumed 0/);
    assert.equal(fs.existsSync(stateFile), false);
  });
});
