// Message Batches (--batch), end to end through `main` in-process against the loopback fake: submission and the state
// file, results matched by custom_id, failed results through the synchronous chain, resume, creates and polls that
// fail, the dry-run, structured outputs and images (images in transcripts also without --batch). Ctrl-C and kill -9
// need a real process. Plus unit tests of splitIntoBatches and batchCustomId.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { createServer } from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import * as path from 'node:path';
import { before, describe, test } from 'node:test';
import type { TestContext } from 'node:test';
import type { BatchResult, FakeOptions, RecordedRequest } from '../fakes/anthropic.ts';
import {
  answerJson,
  csvRows,
  goodScores,
  judgeEntry,
  mentioning,
  readCsv,
  readLog,
  route,
  setup,
  sha256,
  shippedRubricJson,
  snapshot,
  tagLine,
  tagOf,
  tagOfParams,
  waitFor,
  assertAnswerSchema,
  allowedScoresOf,
  bundled,
  SCRIPT,
} from './helpers.ts';
import type { Intercept, JudgeEntry, JumpClock, Workspace, WorkspaceOptions } from './helpers.ts';
import type { ReferenceKey, Task } from '../run-judge.ts';

// Destructured, not imported by name: a renamed export then fails its own tests, not the whole file.
const { batchCustomId, buildJudgePrompt, loadJson, loadRubric, loadTranscript, splitIntoBatches } =
  await import('../run-judge.ts');

// ---------------------------------------------------------------------------------------------
// Helpers (this file's own)
// ---------------------------------------------------------------------------------------------

const BATCH = ['--batch', '--poll-interval', '0.01'];
const CUSTOM_ID = /^[A-Za-z0-9_-]{1,64}$/;
const CREATE = 'POST /v1/messages/batches';
const SYNC_CALL = 'POST /v1/messages';
const PNG_1X1 =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';
const GIF_1X1 = 'R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7';

const isCreate = (req: IncomingMessage) => route(req) === CREATE;
const isRetrieve = (req: IncomingMessage) =>
  /^GET \/v1\/messages\/batches\/[^/]+$/.test(route(req));
const isResults = (req: IncomingMessage) =>
  /^GET \/v1\/messages\/batches\/[^/]+\/results$/.test(route(req));

/** setup's fake and in-process runs on a jump clock: no poll or backoff waited out (a spawned CLI keeps real time). */
const JUMP = { clock: true } as const;

/** A loopback port nothing listens on: a connection to it is refused. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * Answers an intercepted request with an API error and `extra` headers, once its body is read; a 529 may be retried
 * at once.
 */
function answerError(
  req: IncomingMessage,
  res: ServerResponse,
  status: number,
  type: string,
  message: string,
  extra: Record<string, string> = {},
) {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (status === 529) headers['retry-after-ms'] = '0';
  Object.assign(headers, extra);
  req
    .resume()
    .on('end', () =>
      res
        .writeHead(status, headers)
        .end(JSON.stringify({ type: 'error', error: { type, message } })),
    );
  return true;
}

/** Lets the fake answer, rewriting the body it sends. */
function rewriteBody(res: ServerResponse, rewrite: (body: string) => string): false {
  const end = res.end.bind(res) as (body: string) => ServerResponse;
  (res as unknown as { end: (body: string) => ServerResponse }).end = (body) => end(rewrite(body));
  return false;
}

/** The JSONL results without the lines of the given custom_ids. */
const dropResults = (body: string, dropped: string[]) =>
  body
    .split('\n')
    .filter(
      (line) =>
        line !== '' && !dropped.includes((JSON.parse(line) as { custom_id: string }).custom_id),
    )
    .map((line) => `${line}\n`)
    .join('');

/** How far the jump clock of `setup` has run ahead of real time. */
const jumpedMs = (clock: unknown) => (clock as JumpClock).jumpedMs();
const modelOf = (req: RecordedRequest) => req.body?.model as string;
const keysOf = (ws: Workspace) => ws.pairs.map((pair) => `${pair.model}/${pair.task_id}`).sort();
const rowKeys = (file: string) =>
  fs.existsSync(file)
    ? csvRows(file)
        .map((row) => row.key)
        .sort()
    : [];
const count = (http: string[], line: string) => http.filter((seen) => seen === line).length;
const readState = (file: string) =>
  JSON.parse(fs.readFileSync(file, 'utf8')) as {
    version: number;
    batches: {
      id: string | null;
      judge: string;
      requests: Record<string, [string, string, string]>;
    }[];
  };

/** The text prompt of a request: the whole content, or its first block. */
const promptOf = (params: any) => {
  const content = params.messages[0].content;
  return (typeof content === 'string' ? content : content[0].text) as string;
};

/** Batch results scripted per transcript ("m01/proof02"); unlisted ones succeed with the fake's valid answer. */
function resultsByTag(map: Record<string, BatchResult | undefined>): FakeOptions['batch'] {
  return { result: (_id, params) => map[tagOfParams(params) ?? ''] };
}

/** One log entry per transcript; fails when one has none or several. */
function logByKey(file: string) {
  const byKey = new Map<string, ReturnType<typeof readLog>[number]>();
  for (const entry of readLog(file)) {
    const key = `${entry.model}/${entry.task_id}`;
    assert.ok(!byKey.has(key), `one log entry for ${key}`);
    byKey.set(key, entry);
  }
  return byKey;
}

/** Appends `marker` to the last message of a workspace transcript. */
function editTranscript(ws: Workspace, model: string, taskId: string, marker: string): void {
  const file = path.join(ws.transcripts, model, `${taskId}.json`);
  const transcript = JSON.parse(fs.readFileSync(file, 'utf8')) as {
    messages: { content: string }[];
  };
  transcript.messages.at(-1)!.content += ` ${marker}`;
  fs.writeFileSync(file, JSON.stringify(transcript, null, 2));
}

/** The judge prompt of one workspace transcript, built from its files. */
function expectedPrompt(ws: Workspace, model: string, taskId: string): string {
  return buildJudgePrompt(
    loadJson(path.join(ws.tasks, `${taskId}.json`)) as Task,
    loadJson(path.join(ws.referenceKeys, `${taskId}.json`)) as ReferenceKey,
    loadTranscript({
      task_id: taskId,
      model,
      path: path.join(ws.transcripts, model, `${taskId}.json`),
    }),
    loadRubric(ws.rubric),
  );
}

/** The shipped rubric with proof_scaffolding allowing 0, 2 or 4: enums must follow the rubric, not 0..2. */
function rubricWithGaps(): { text: string; allowed: Record<string, number[]> } {
  const rubric = shippedRubricJson();
  rubric.dimensions.find((d) => d.name === 'proof_scaffolding')!.scores = {
    0: 'none',
    2: 'some',
    4: 'excellent',
  };
  const allowed = allowedScoresOf(rubric);
  return { text: JSON.stringify(rubric, null, 2), allowed };
}

// ---------------------------------------------------------------------------------------------
describe('--batch: submission and results', () => {
  test('one batch of every pending transcript, recorded in the state file before the create; rows and log from the results', async (t) => {
    const { fake, http, ws, run, intercept, stateFile } = await setup(t, {
      ...JUMP,
      batch: { pollsUntilEnded: 2 },
    });
    let stateAtCreate: ReturnType<typeof readState> | undefined;
    intercept((req) => {
      if (isCreate(req) && fs.existsSync(stateFile)) stateAtCreate = readState(stateFile);
      return false;
    });
    const result = await run(BATCH);
    assert.equal(result.code, 0, result.stderr);

    assert.equal(count(http, CREATE), 1);
    assert.equal(count(http, SYNC_CALL), 0, 'no synchronous call');
    assert.equal(fake.batches.length, 1);
    const requests = fake.batches[0]!.requests;
    assert.deepEqual(
      requests.map((r) => tagOfParams(r.params)).sort(),
      keysOf(ws),
      'one request per transcript',
    );
    for (const { custom_id, params } of requests) {
      const [model, taskId] = tagOfParams(params)!.split('/') as [string, string];
      assert.match(custom_id, CUSTOM_ID);
      assert.equal(custom_id, batchCustomId(taskId, model));
      assert.deepEqual(
        [params.model, params.max_tokens, 'output_config' in params],
        ['judge-a', 512, false],
      );
      assert.equal(promptOf(params), expectedPrompt(ws, model, taskId));
    }
    assert.equal(new Set(requests.map((r) => r.custom_id)).size, 6, 'custom_ids are unique');

    // Before the create call, the state maps every custom_id to its pair and prompt hash, with no batch id yet.
    assert.ok(stateAtCreate, 'the state file exists when the create call arrives');
    assert.equal(stateAtCreate.batches.length, 1);
    assert.deepEqual(
      [stateAtCreate.batches[0]!.id, stateAtCreate.batches[0]!.judge],
      [null, 'judge-a'],
    );
    const expectedMapping = Object.fromEntries(
      requests.map(({ custom_id, params }) => {
        const [model, taskId] = tagOfParams(params)!.split('/');
        return [custom_id, [taskId, model, sha256(promptOf(params))]];
      }),
    );
    assert.deepEqual(stateAtCreate.batches[0]!.requests, expectedMapping);

    assert.match(result.stderr, /submitted batch msgbatch_fake_1: 6 request\(s\) to judge-a/);
    assert.match(
      result.stderr,
      /batches pending 1: 6 processing, 0 succeeded/,
      'the counts are shown while polling',
    );
    assert.match(
      result.stderr,
      /6 selected: 6 scored, 0 skipped .*0 failed.*batches created 1, resumed 0/,
    );
    assert.deepEqual(rowKeys(ws.output), keysOf(ws));
    assert.equal(readCsv(ws.output).length, 7, 'header + 6 rows');
    assert.equal(
      fs.existsSync(stateFile),
      false,
      'the state file is removed when no batch is pending',
    );
    assert.equal(fs.existsSync(`${ws.output}.lock`), false);

    const log = logByKey(ws.log);
    assert.equal(log.size, 6);
    for (const [key, entry] of log) {
      assert.deepEqual(
        [entry.status, entry.judge, entry.attempts.length],
        ['scored', 'judge-a', 0],
        key,
      );
      assert.deepEqual(
        entry.answers.map((answer) => answer.text),
        [fake.validAnswer()],
      );
      const [model, taskId] = key.split('/') as [string, string];
      assert.equal(entry.prompt_sha256, expectedMapping[batchCustomId(taskId, model)]![2]);
    }
  });

  test('results arriving in any order are matched by custom_id: each row and log entry gets its own answer', async (t) => {
    const keys = ['m01', 'm02'].flatMap((model) =>
      ['proof01', 'proof02', 'proof03'].map((task) => `${model}/${task}`),
    );
    const scoresFor = (key: string) => {
      const i = keys.indexOf(key);
      return {
        mathematical_correctness: i % 3,
        proof_scaffolding: Math.floor(i / 3),
        error_diagnosis: (i + 1) % 3,
      };
    };
    const { fake, ws, run } = await setup(t, {
      ...JUMP,
      batch: {
        result: (_id, params) => {
          const key = tagOfParams(params)!;
          return {
            type: 'succeeded',
            text: answerJson(goodScores(scoresFor(key)), `note for ${key}`),
          };
        },
      },
    });
    const result = await run(BATCH);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.requests.length, 0);
    const rows = csvRows(ws.output);
    assert.deepEqual(rows.map((row) => row.key).sort(), keys);
    for (const { key, record } of rows) {
      const expected = scoresFor(key);
      assert.deepEqual(
        record.slice(2, 5),
        [
          expected.mathematical_correctness,
          expected.proof_scaffolding,
          expected.error_diagnosis,
        ].map(String),
        key,
      );
      assert.equal(record[8], `note for ${key}`);
    }
    for (const [key, entry] of logByKey(ws.log)) assert.equal(entry.notes, `note for ${key}`);
  });

  test('with structured_output, every batch request carries the answer schema derived from the rubric', async (t) => {
    const rubric = rubricWithGaps();
    const { fake, run } = await setup(t, JUMP, {
      models: 1,
      rubricText: rubric.text,
      judge: judgeEntry('judge-a', { structured_output: true }),
    });
    const result = await run(BATCH);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.batches.length, 1);
    assert.equal(fake.batches[0]!.requests.length, 3);
    for (const { params } of fake.batches[0]!.requests) {
      assert.equal(params.output_config.format.type, 'json_schema');
      assertAnswerSchema(params.output_config.format.schema, rubric.allowed);
    }
    assert.equal(fake.requests.length, 0);
  });
});

// ---------------------------------------------------------------------------------------------
describe('--batch: a batch answer costs half its list price', () => {
  test('each row from the batch: cost_usd is half of (input x price + output x price); the summary sums them', async (t) => {
    const price = { input: 5, output: 25 };
    const { ws, run } = await setup(t, JUMP, {
      models: 1,
      judge: judgeEntry('judge-a', { price_usd_per_mtok: price }),
    });
    const result = await run(BATCH);
    assert.equal(result.code, 0, result.stderr);
    const costs = [...logByKey(ws.log).values()].map(
      (entry) => (entry as { cost_usd?: number }).cost_usd,
    );
    const half = (100 * price.input + 20 * price.output) / 1e6 / 2; // the fake answers 100 tokens in, 20 out
    assert.deepEqual(costs, [half, half, half]);
    assert.match(
      result.stderr,
      new RegExp(`; cost \\$${(3 * half).toFixed(4).replace('.', '\\.')};`),
    );
  });
});

describe('--batch: a result whose custom_id is not one we sent, or a line that is no result', () => {
  // A name every plain object inherits must not be taken for one of ours: the lookup is of own keys only.
  const strangers: [string, (first: string) => string, string][] = [
    [
      '"constructor"',
      (first) => JSON.stringify({ ...JSON.parse(first), custom_id: 'constructor' }),
      'constructor',
    ],
    [
      '"__proto__"',
      (first) => JSON.stringify({ ...JSON.parse(first), custom_id: '__proto__' }),
      '__proto__',
    ],
    ['a line that is null', () => 'null', ''],
  ];
  for (const [label, strangerOf, customId] of strangers) {
    test(`${label} is ignored, said so; no crash, and the real results are written`, async (t) => {
      const { fake, ws, run, intercept, stateFile } = await setup(t, JUMP, { models: 1 });
      intercept(
        (req, res) =>
          isResults(req) &&
          rewriteBody(res, (body) => `${strangerOf(body.split('\n')[0]!)}\n${body}`),
      );
      const result = await run(BATCH);
      assert.equal(result.code, 0, result.stderr);
      assert.ok(
        result.stderr.includes(
          `batch msgbatch_fake_1: ignoring a result with unknown custom_id ${customId}\n`,
        ),
        result.stderr,
      );
      assert.equal(fake.requests.length, 0, 'nothing judged synchronously');
      assert.deepEqual(rowKeys(ws.output), keysOf(ws));
      assert.equal(readCsv(ws.output).length, 4, 'header + one row per transcript sent');
      assert.equal(logByKey(ws.log).size, 3);
      assert.equal(fs.existsSync(stateFile), false);
    });
  }
});

describe('--batch: a result line repeated for one request', () => {
  const second = answerJson(goodScores({ mathematical_correctness: 0 }), 'the second result');
  /** The results with the first line of `customId` followed by a copy answering `second`. */
  const repeated = (body: string, customId: string) =>
    body
      .split('\n')
      .flatMap((line) => {
        if (line === '' || JSON.parse(line).custom_id !== customId) return [line];
        const copy = JSON.parse(line);
        copy.result.message.content = [{ type: 'text', text: second }];
        return [line, JSON.stringify(copy)];
      })
      .join('\n');

  for (const samples of [1, 3]) {
    test(`--samples ${samples}: the first result makes the row; the second's answer is kept in a line of its own, said so`, async (t) => {
      const { fake, ws, run, intercept } = await setup(t, JUMP, { models: 1 });
      // The fake sends the results last request first: this one's copy comes before the others.
      const id = batchCustomId('proof03', 'm01');
      const first = samples > 1 ? `${id}_s${samples}` : id;
      intercept((req, res) => isResults(req) && rewriteBody(res, (body) => repeated(body, first)));
      const result = await run([...BATCH, '--samples', String(samples)]);
      assert.equal(result.code, 0, result.stderr);
      assert.equal(fake.requests.length, 0, 'nothing judged synchronously');
      assert.match(result.stderr, /3 selected: 3 scored, 0 skipped .*0 failed/);
      assert.match(
        result.stderr,
        mentioning(`batch msgbatch_fake_1: a second result for m01/proof03 (request ${first})`),
      );
      const row = csvRows(ws.output).find(({ key }) => key === 'm01/proof03')!;
      assert.equal(row.record[2], '2', 'the row is the first result, not the second');
      const lines = readLog(ws.log).filter((entry) => entry.task_id === 'proof03');
      assert.equal(lines.length, 2, JSON.stringify(lines));
      const scored = lines.find((entry) => entry.status === 'scored')!;
      assert.equal(scored.answers.length, samples);
      assert.ok(scored.answers.every((answer) => answer.text !== second));
      const kept = lines.find((entry) => entry.status === 'failed')!;
      assert.deepEqual(
        kept.answers.map((answer) => answer.text),
        [second],
      );
      assert.match(kept.error!.message, /a second result .* kept here, not used/);
      assert.ok(kept.answers[0]!.usage!.output_tokens > 0, 'its usage is counted');
    });
  }
});

// ---------------------------------------------------------------------------------------------
describe('--batch: results that cannot become rows go through the synchronous chain', () => {
  const staleAnswer = answerJson(goodScores(), 'stale batch answer');
  const maxTokensAnswer = answerJson(goodScores(), 'cut off');
  /** One transcript per kind of failed result; m03/proof02 and m03/proof03 succeed. */
  const FAILED: Record<string, { result?: BatchResult; reason: RegExp; batchAnswer?: string }> = {
    'm01/proof01': {
      result: { type: 'errored', errorType: 'overloaded_error', message: 'Overloaded' },
      reason: /judge judge-a: batch request errored: overloaded_error: Overloaded/,
    },
    'm01/proof02': { result: { type: 'expired' }, reason: /judge judge-a: batch request expired/ },
    'm01/proof03': {
      result: { type: 'canceled' },
      reason: /judge judge-a: batch request canceled/,
    },
    'm02/proof01': {
      result: { type: 'succeeded', text: 'I think 2' },
      reason: /judge judge-a: unusable answer: the answer is not JSON/,
      batchAnswer: 'I think 2',
    },
    'm02/proof02': {
      result: { type: 'succeeded', text: maxTokensAnswer, stopReason: 'max_tokens' },
      reason: /judge judge-a: unusable answer: .*max_tokens/,
      batchAnswer: maxTokensAnswer,
    },
    // Missing from the results stream.
    'm02/proof03': { reason: /judge judge-a: batch msgbatch_fake_1 returned no result/ },
    // Its transcript is edited after submission: the answer judged a prompt that is no longer the transcript's.
    'm03/proof01': {
      result: { type: 'succeeded', text: staleAnswer },
      reason:
        /judge judge-a: the batch answer judged a prompt that has changed since it was submitted/,
      batchAnswer: staleAnswer,
    },
  };
  const SUCCEEDED = ['m03/proof02', 'm03/proof03'];

  async function failedResults(t: TestContext, fakeOpts: FakeOptions = {}) {
    const results = Object.fromEntries(
      Object.entries(FAILED).map(([key, { result }]) => [key, result]),
    );
    const s = await setup(t, { ...JUMP, batch: resultsByTag(results), ...fakeOpts }, { models: 3 });
    s.intercept((req) => {
      if (isCreate(req)) editTranscript(s.ws, 'm03', 'proof01', 'EDITED-AFTER-SUBMISSION');
      return false;
    });
    s.intercept(
      (req, res) =>
        isResults(req) &&
        rewriteBody(res, (body) => dropResults(body, [batchCustomId('proof03', 'm02')])),
    );
    return s;
  }

  test('each is judged again, primary judge first, then the fallback; the log keeps the batch answer and why', async (t) => {
    const fromB = answerJson(goodScores({ mathematical_correctness: 1 }), 'from judge-b');
    const { fake, http, ws, run, stateFile } = await failedResults(t, {
      // The primary fails synchronously too, so the chain's order shows.
      responder: (req) =>
        modelOf(req) === 'judge-a'
          ? { kind: 'error', status: 500, type: 'api_error', message: 'boom' }
          : { text: fromB },
    });
    const result = await run(BATCH);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(count(http, CREATE), 1);
    assert.equal(fake.batches[0]!.requests.length, 9);
    assert.deepEqual(rowKeys(ws.output), keysOf(ws));
    const rows = new Map(csvRows(ws.output).map(({ key, record }) => [key, record]));
    const log = logByKey(ws.log);
    for (const [key, { reason, batchAnswer }] of Object.entries(FAILED)) {
      const sent = fake.requests.filter((req) => tagOf(req) === key);
      assert.deepEqual(sent.map(modelOf), ['judge-a', 'judge-b'], key);
      assert.equal(rows.get(key)![8], 'from judge-b', key);
      const entry = log.get(key)!;
      assert.deepEqual([entry.status, entry.judge], ['scored', 'judge-b'], key);
      assert.equal(entry.attempts.length, 2, `${key}: ${JSON.stringify(entry.attempts)}`);
      assert.match(entry.attempts[0]!.message, reason, key);
      assert.deepEqual(
        [entry.attempts[1]!.judge, entry.attempts[1]!.status],
        ['judge-a', 500],
        key,
      );
      assert.deepEqual(
        entry.answers.map((answer) => answer.text),
        [...(batchAnswer ? [batchAnswer] : []), fromB],
        key,
      );
      assert.equal(
        entry.prompt_sha256,
        sha256(promptOf(sent[1]!.body)),
        `${key}: the log hashes the prompt judged`,
      );
      const line = result.stderr
        .split('\n')
        .find((candidate) => candidate.startsWith(`${key}: scored by fallback`));
      assert.match(
        line ?? '',
        /^\S+: scored by fallback judge judge-b after judge judge-a: .*; judge judge-a: HTTP 500/,
      );
    }
    assert.match(
      promptOf(fake.requests.find((req) => tagOf(req) === 'm03/proof01')!.body),
      /EDITED-AFTER-SUBMISSION/,
    );
    for (const key of SUCCEEDED) {
      assert.equal(
        fake.requests.filter((req) => tagOf(req) === key).length,
        0,
        `${key} comes from the batch`,
      );
      assert.deepEqual(
        [log.get(key)!.attempts.length, log.get(key)!.answers.length, rows.get(key)![8]],
        [0, 1, 'ok'],
      );
    }
    assert.equal(fs.existsSync(stateFile), false);
  });

  test('--no-fallback: each is reported failed (exit 1) with zero synchronous calls; the others are written', async (t) => {
    const { fake, http, ws, run, stateFile } = await failedResults(t);
    const result = await run([...BATCH, '--no-fallback']);
    assert.equal(result.code, 1, result.stderr);
    assert.equal(count(http, SYNC_CALL), 0);
    assert.equal(fake.requests.length, 0);
    assert.deepEqual(rowKeys(ws.output), SUCCEEDED);
    assert.match(result.stderr, /9 selected: 2 scored, 0 skipped .*7 failed/);
    const log = logByKey(ws.log);
    for (const [key, { reason, batchAnswer }] of Object.entries(FAILED)) {
      const lines = result.stderr.split('\n').filter((line) => line.includes(`failed ${key}: `));
      assert.equal(
        lines.length,
        2,
        `${key} is printed when it fails and in the summary: ${result.stderr}`,
      );
      for (const line of lines) assert.match(line, reason);
      const entry = log.get(key)!;
      assert.equal(entry.status, 'failed', key);
      assert.match(entry.error!.message, reason, key);
      assert.deepEqual(
        entry.answers.map((answer) => answer.text),
        batchAnswer ? [batchAnswer] : [],
        `${key}: the log keeps the batch answer`,
      );
    }
    assert.equal(fs.existsSync(stateFile), false, 'the ended batch is no longer pending');
  });
});

// ---------------------------------------------------------------------------------------------
describe('--batch --samples 5 with one sample errored: the valid batch answers keep their scores', () => {
  // As without --batch (judgeSamples): fewer than k usable samples is never a row; the chain judges all k again.
  const errored = 'm01/proof02';
  const sampleScores = (i: number) => goodScores({ mathematical_correctness: i % 3 });
  const batch: FakeOptions['batch'] = {
    result: (customId, params) => {
      const i = Number(customId.slice(customId.lastIndexOf('_s') + 2));
      if (tagOfParams(params) === errored && i === 3) {
        return { type: 'errored', errorType: 'api_error', message: 'Internal server error' };
      }
      return { type: 'succeeded', text: answerJson(sampleScores(i), `sample ${i}`) };
    },
  };

  test('each of the 4 paid answers is logged with its scores; the transcript is judged again, 5 samples, as without --batch', async (t) => {
    const sync = answerJson(goodScores({ mathematical_correctness: 0 }), 'sync');
    const { fake, ws, run } = await setup(
      t,
      { ...JUMP, batch, responder: () => ({ text: sync }) },
      {
        models: 1,
      },
    );
    const result = await run([...BATCH, '--samples', '5']);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.batches[0]!.requests.length, 15);
    assert.deepEqual(
      fake.requests.map((req) => tagOf(req)),
      Array(5).fill(errored),
      'the errored transcript, all 5 samples again, synchronously',
    );

    const entry = logByKey(ws.log).get(errored)!;
    assert.equal(entry.status, 'scored');
    assert.match(entry.attempts[0]!.message, /batch request errored: api_error/);
    const answers = entry.answers as unknown as { text: string; scores: unknown }[];
    assert.equal(answers.length, 9, "the batch's 4 usable samples and the 5 synchronous ones");
    for (const [n, i] of [1, 2, 4, 5].entries()) {
      assert.equal(answers[n]!.text, answerJson(sampleScores(i), `sample ${i}`));
      assert.deepEqual(answers[n]!.scores, sampleScores(i), `batch sample ${i} keeps its scores`);
    }
    for (const answer of answers.slice(4)) assert.deepEqual(answer.scores, JSON.parse(sync).scores);
    assert.deepEqual(entry.scores, JSON.parse(sync).scores, 'the row is the synchronous median');
    assert.deepEqual(rowKeys(ws.output), keysOf(ws));
  });

  test('a sample that is no message (succeeded without "message") loses none of the other 4 answers', async (t) => {
    const malformed: FakeOptions['batch'] = {
      result: (customId, params) => {
        const i = Number(customId.slice(customId.lastIndexOf('_s') + 2));
        if (tagOfParams(params) === errored && i === 1)
          return { type: 'raw', result: { type: 'succeeded' } };
        return { type: 'succeeded', text: answerJson(sampleScores(i), `sample ${i}`) };
      },
    };
    const { ws, run } = await setup(t, { ...JUMP, batch: malformed }, { models: 1 });
    const result = await run([...BATCH, '--samples', '5', '--no-fallback']);
    assert.equal(result.code, 1, result.stderr);
    const entry = logByKey(ws.log).get(errored)!;
    assert.match(entry.error!.message, /the answer is not a message/);
    const answers = entry.answers as unknown as { scores: unknown }[];
    assert.deepEqual(
      answers.map((answer) => answer.scores),
      [2, 3, 4, 5].map(sampleScores),
    );
  });

  test('--no-fallback: the transcript fails, and its 4 paid answers are still logged with their scores', async (t) => {
    const { fake, ws, run } = await setup(t, { ...JUMP, batch }, { models: 1 });
    const result = await run([...BATCH, '--samples', '5', '--no-fallback']);
    assert.equal(result.code, 1, result.stderr);
    assert.equal(fake.requests.length, 0);
    const entry = logByKey(ws.log).get(errored)!;
    assert.equal(entry.status, 'failed');
    const answers = entry.answers as unknown as { scores: unknown }[];
    assert.deepEqual(
      answers.map((answer) => answer.scores),
      [1, 2, 4, 5].map(sampleScores),
    );
  });
});

// ---------------------------------------------------------------------------------------------
describe('--batch: a rerun resumes pending batches', () => {
  test('after kill -9 while polling: the state names the batch; the rerun creates none, writes each row once', async (t) => {
    const { fake, http, ws, run, spawn, stateFile } = await setup(t, {
      ...JUMP,
      batch: { pollsUntilEnded: 1000 },
    });
    const first = spawn(BATCH);
    await waitFor(() => fake.batchPolls >= 1, 20_000, 'the first poll');
    // Before polling starts, the state file names the batch and maps every custom_id.
    const state = readState(stateFile);
    assert.equal(state.batches.length, 1);
    assert.equal(state.batches[0]!.id, fake.batches[0]!.id);
    assert.deepEqual(
      Object.keys(state.batches[0]!.requests).sort(),
      fake.batches[0]!.requests.map((request) => request.custom_id).sort(),
    );
    first.child.kill('SIGKILL');
    assert.equal((await first.done).signal, 'SIGKILL');
    assert.equal(fs.existsSync(stateFile), true);

    fake.batches[0]!.endedAt = Date.now();
    const result = await run(BATCH);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(count(http, CREATE), 1, 'no second batch');
    assert.equal(fake.requests.length, 0);
    assert.match(
      result.stderr,
      mentioning('resuming 1 pending batch(es) from ', stateFile, 'msgbatch_fake_1'),
    );
    assert.match(result.stderr, /batches created 0, resumed 1/);
    assert.deepEqual(rowKeys(ws.output), keysOf(ws));
    assert.equal(readCsv(ws.output).length, 7);
    assert.equal(fs.existsSync(stateFile), false);
  });

  test('a resume check that fails transiently (503) keeps the batch: it is polled again, never resubmitted', async (t) => {
    const { fake, http, ws, run, intercept, stateFile } = await setup(t, JUMP, { models: 1 });
    // A 401 at the first poll stops the first run (exit 2) with its batch still pending.
    const stopAtPoll = intercept(
      (req, res) => isRetrieve(req) && answerError(req, res, 401, 'authentication_error', 'no'),
    );
    const stopped = await run(BATCH);
    assert.equal(stopped.code, 2, stopped.stderr);
    assert.match(stopped.stderr, /run-judge: judge judge-a: HTTP 401/);
    stopAtPoll();
    assert.equal(readState(stateFile).batches[0]!.id, 'msgbatch_fake_1');
    assert.equal(rowKeys(ws.output).length, 0);

    let failResumeCheck = true;
    intercept((req, res) => {
      if (!(isRetrieve(req) && failResumeCheck)) return false;
      failResumeCheck = false;
      return answerError(req, res, 503, 'api_error', 'unavailable');
    });
    const result = await run(BATCH);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(failResumeCheck, false);
    assert.equal(count(http, CREATE), 1, 'never resubmitted');
    assert.equal(fake.requests.length, 0);
    assert.match(result.stderr, /resuming 1 pending batch/);
    assert.doesNotMatch(result.stderr, /warning/);
    assert.deepEqual(rowKeys(ws.output), keysOf(ws));
    assert.equal(fs.existsSync(stateFile), false);
  });

  test('a pending batch the API does not know (404) is dropped with a warning naming the state file; its transcripts are submitted again', async (t) => {
    const { fake, http, ws, run, stateFile } = await setup(t, JUMP);
    const gone = [
      ['proof01', 'm01'],
      ['proof02', 'm02'],
    ] as const;
    const requests = Object.fromEntries(
      gone.map(([task, model]) => [batchCustomId(task, model), [task, model, 'abc']]),
    );
    fs.mkdirSync(path.dirname(stateFile), { recursive: true });
    const entry = {
      id: 'msgbatch_gone',
      judge: 'judge-a',
      submitted_at: '2026-11-30T00:00:00Z',
      requests,
    };
    fs.writeFileSync(stateFile, JSON.stringify({ version: 1, batches: [entry] }));
    const result = await run(BATCH);
    assert.equal(result.code, 0, result.stderr);
    assert.ok(http.includes('GET /v1/messages/batches/msgbatch_gone'), http.join(', '));
    const warning = result.stderr.split('\n').find((line) => line.includes('msgbatch_gone')) ?? '';
    assert.match(
      warning,
      /^warning: batch msgbatch_gone .*unknown to the API.*its 2 transcript\(s\) are submitted again/,
    );
    assert.ok(warning.includes(stateFile), warning);
    assert.equal(fake.batches.length, 1, 'one new batch');
    const submitted = fake.batches[0]!.requests.map((request) => request.custom_id);
    assert.equal(
      submitted.length,
      6,
      'every pending transcript, those of the unknown batch included',
    );
    for (const [task, model] of gone)
      assert.ok(submitted.includes(batchCustomId(task, model)), `${model}/${task}`);
    assert.equal(fake.requests.length, 0);
    assert.deepEqual(rowKeys(ws.output), keysOf(ws));
    assert.equal(readCsv(ws.output).length, 7);
    assert.match(result.stderr, /batches created 1, resumed 0/);
    assert.equal(fs.existsSync(stateFile), false);
  });

  /** A --batch run stopped by a 401 at its first poll: its batch of every transcript left pending. */
  async function stoppedWhilePending(t: TestContext, fakeOpts: FakeOptions = {}) {
    const s = await setup(t, { ...JUMP, ...fakeOpts }, { models: 1 });
    const stopAtPoll = s.intercept(
      (req, res) => isRetrieve(req) && answerError(req, res, 401, 'authentication_error', 'no'),
    );
    return {
      ...s,
      stop: async (extra: string[] = []) => {
        const stopped = await s.run([...BATCH, ...extra]);
        assert.equal(stopped.code, 2, stopped.stderr);
        stopAtPoll();
        assert.equal(readState(s.stateFile).batches.length, 1);
      },
    };
  }

  test('a rerun without --batch collects the pending batch: its transcripts are never judged again, every answer written', async (t) => {
    const { fake, http, ws, run, stop, stateFile } = await stoppedWhilePending(t);
    await stop();
    const dry = await run(['--dry-run'], { apiKey: null });
    assert.equal(dry.code, 0, dry.stderr);
    assert.match(dry.stderr, /3 transcript\(s\) wait in pending batches .*a run collects them/);
    assert.match(dry.stderr, /a run would judge none: every selected transcript has a row or wait/);

    const result = await run(['--poll-interval', '0.01']);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.requests.length, 0, 'nothing judged synchronously');
    assert.equal(count(http, CREATE), 1, 'no second batch');
    assert.match(
      result.stderr,
      mentioning('resuming 1 pending batch(es) from ', stateFile, 'msgbatch_fake_1'),
    );
    assert.match(result.stderr, /3 selected: 3 scored, 0 skipped/);
    assert.deepEqual(rowKeys(ws.output), keysOf(ws));
    for (const entry of logByKey(ws.log).values()) {
      assert.deepEqual([entry.status, entry.batch_id], ['scored', 'msgbatch_fake_1']);
    }
    assert.equal(fs.existsSync(stateFile), false);

    const again = await run(BATCH);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stderr, /3 selected: 0 scored, 3 skipped/);
    assert.equal(count(http, CREATE), 1);
  });

  test('a pending batch that judges scored transcripts again (--rescore), resumed without --rescore: its answers replace the rows, each logged', async (t) => {
    const fromBatch = answerJson(goodScores({ mathematical_correctness: 0 }), 'from the batch');
    const { fake, ws, run, stop, stateFile } = await stoppedWhilePending(t, {
      batch: { result: () => ({ type: 'succeeded', text: fromBatch }) },
    });
    const first = await run();
    assert.equal(first.code, 0, first.stderr);
    assert.equal(fake.requests.length, 3);
    await stop(['--rescore']);

    const result = await run(BATCH);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /3 selected: 3 scored/);
    assert.equal(fake.requests.length, 3, 'nothing judged synchronously again');
    assert.deepEqual(
      csvRows(ws.output).map(({ key, record }) => [key, record.at(-1)]),
      keysOf(ws).map((key) => [key, 'from the batch']),
    );
    const fromTheBatch = readLog(ws.log).filter((entry) => entry.batch_id === 'msgbatch_fake_1');
    assert.equal(fromTheBatch.length, 3, 'each paid answer logged');
    assert.equal(fs.existsSync(stateFile), false);
  });

  test('a batch read again after its rows were written (a crash before its entry left the state file) writes nothing twice', async (t) => {
    const { ws, run, stop, stateFile } = await stoppedWhilePending(t);
    await stop();
    const state = fs.readFileSync(stateFile);
    const collected = await run(BATCH);
    assert.equal(collected.code, 0, collected.stderr);
    const csv = fs.readFileSync(ws.output, 'utf8');
    const log = fs.readFileSync(ws.log, 'utf8');

    fs.writeFileSync(stateFile, state);
    const result = await run(BATCH);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /resuming 1 pending batch/);
    assert.equal(fs.readFileSync(ws.output, 'utf8'), csv);
    assert.equal(fs.readFileSync(ws.log, 'utf8'), log);
    assert.equal(fs.existsSync(stateFile), false);
  });
});

// ---------------------------------------------------------------------------------------------
// Two at a time: the other tests run while the stalled create waits out timeout_s (1 s) in real time, each on its own
// fake and clock.
describe('--batch: a create that fails', { concurrency: 2 }, () => {
  interface CreateFailure {
    label: string;
    judge?: JudgeEntry;
    answer: Intercept;
    attempts: number;
    code: number;
    message: RegExp;
    /** Whether the batch may exist: its state entry (id null) then stays, and the next run refuses. */
    mayExist: boolean;
  }
  const CASES: CreateFailure[] = [
    {
      label: 'rejected with 400 (structured output unsupported): no batch was made',
      judge: judgeEntry('judge-a', { structured_output: true }),
      answer: (req, res) =>
        answerError(
          req,
          res,
          400,
          'invalid_request_error',
          'requests.0.params.output_config.format: json_schema is not supported',
        ),
      attempts: 1,
      code: 2,
      message: /run-judge: judge judge-a: rejects "structured_output"/,
      mayExist: false,
    },
    {
      label: 'overloaded (529) on every attempt: retried, then no batch was made',
      answer: (req, res) => answerError(req, res, 529, 'overloaded_error', 'Overloaded'),
      attempts: 6,
      code: 1,
      message: /run-judge: judge judge-a: HTTP 529 overloaded_error: Overloaded/,
      mayExist: false,
    },
    {
      label: 'a server error (500): the batch may exist',
      answer: (req, res) => answerError(req, res, 500, 'api_error', 'Internal server error'),
      attempts: 1,
      code: 1,
      message: /run-judge: judge judge-a: HTTP 500 api_error/,
      mayExist: true,
    },
    {
      label: 'a connection lost: the batch may exist',
      answer: (req) => (req.socket.destroy(), true),
      attempts: 1,
      code: 1,
      message:
        /run-judge: judge judge-a: connection failed to http:\/\/127\.0\.0\.1:\d+: .*; the batch may exist: check the Console's batches .*, then delete its entry .*batches\.json/,
      mayExist: true,
    },
  ];

  test(
    'a create whose answer stalls ends at timeout_s (the body included): the batch may exist, its entry stays',
    { timeout: 20_000 },
    async (t) => {
      const judge = judgeEntry('judge-a', { timeout_s: 1 }); // real time, as for a message request
      const { http, ws, run, intercept, stateFile } = await setup(t, JUMP, { models: 1, judge });
      intercept((req, res) => {
        if (!isCreate(req)) return false;
        req.resume().on('end', () => {
          res.writeHead(200, { 'content-type': 'application/json' }).write('{"id": "msgbatch_');
        });
        return true;
      });
      const failed = await run(BATCH);
      assert.equal(failed.code, 1, failed.stderr);
      assert.match(
        failed.stderr,
        /run-judge: judge judge-a: request timed out .*; the batch may exist: .*delete its entry/,
      );
      assert.equal(count(http, CREATE), 1, 'never resubmitted');
      assert.deepEqual(
        readState(stateFile).batches.map((entry) => entry.id),
        [null],
      );
      assert.deepEqual(rowKeys(ws.output), []);
    },
  );

  for (const { label, judge, answer, attempts, code, message, mayExist } of CASES) {
    const then = mayExist
      ? 'its state entry stays and the next run refuses (exit 2) naming the state file, calling nothing'
      : 'no state entry is left, and the next run submits as if nothing happened';
    test(`${label}: exit ${code}; ${then}`, async (t) => {
      const { fake, http, ws, run, intercept, stateFile } = await setup(t, JUMP, {
        models: 1,
        ...(judge && { judge }),
      });
      const removeIntercept = intercept((req, res) => isCreate(req) && answer(req, res));
      const failed = await run(BATCH);
      assert.equal(failed.code, code, failed.stderr);
      assert.match(failed.stderr, message);
      assert.equal(count(http, CREATE), attempts);
      assert.equal(count(http, SYNC_CALL), 0, 'nothing judged synchronously instead');
      assert.deepEqual(rowKeys(ws.output), []);
      assert.equal(fs.existsSync(`${ws.output}.lock`), false);
      removeIntercept();
      const state = fs.existsSync(stateFile) ? fs.readFileSync(stateFile, 'utf8') : undefined;
      if (mayExist) {
        assert.deepEqual(
          readState(stateFile).batches.map((entry) => [
            entry.id,
            Object.keys(entry.requests).length,
          ]),
          [[null, 3]],
        );
      } else
        assert.equal(state, undefined, 'no pending-batch entry after a create that made no batch');

      const seenBefore = http.length;
      const rerun = await run(BATCH);
      if (mayExist) {
        assert.equal(rerun.code, 2, rerun.stderr);
        assert.match(
          rerun.stderr,
          mentioning(`run-judge: ${stateFile}: `, 'may exist', 'delete that entry'),
        );
        assert.deepEqual(
          http.slice(seenBefore),
          [],
          'no call at all: a second create could pay twice',
        );
        assert.equal(fake.batches.length, 0);
        assert.equal(
          fs.readFileSync(stateFile, 'utf8'),
          state,
          'the state file is left for the user to check',
        );
        assert.deepEqual(rowKeys(ws.output), []);
      } else {
        assert.equal(rerun.code, 0, rerun.stderr);
        assert.doesNotMatch(rerun.stderr, /warning|resuming|orphan/);
        assert.equal(fake.batches.length, 1);
        assert.deepEqual(rowKeys(ws.output), keysOf(ws));
        assert.equal(fs.existsSync(stateFile), false);
      }
      assert.equal(fs.existsSync(`${ws.output}.lock`), false);
    });
  }

  test('the API unreachable (connection refused: nothing was sent): exit 2, the one message naming the address; no state entry', async (t) => {
    const { fake, http, ws, run, stateFile } = await setup(t, JUMP, { models: 1 });
    const closed = await closedPort();
    const failed = await run(BATCH, { baseUrl: `http://127.0.0.1:${closed}` });
    assert.equal(failed.code, 2, failed.stderr);
    assert.equal(failed.stderr.trim().split('\n').length, 1, `one line: ${failed.stderr}`);
    assert.match(
      failed.stderr,
      mentioning(`run-judge: cannot reach the API at http://127.0.0.1:${closed}`, 'ECONNREFUSED'),
    );
    assert.doesNotMatch(failed.stderr, /may exist/);
    assert.equal(fs.existsSync(stateFile), false, 'no state entry: no batch can exist');
    assert.equal(fs.existsSync(`${ws.output}.lock`), false);
    assert.deepEqual(http, []);

    const rerun = await run(BATCH);
    assert.equal(rerun.code, 0, rerun.stderr);
    assert.equal(fake.batches.length, 1);
    assert.deepEqual(rowKeys(ws.output), keysOf(ws));
  });

  test('answered 429 once (retry-after 0.01 s), it is retried on the same judge: 2 attempts, 1 batch, nothing judged synchronously', async (t) => {
    const { fake, http, ws, run, intercept, stateFile } = await setup(t, JUMP, { models: 1 });
    let rateLimited = false;
    intercept((req, res) => {
      if (!isCreate(req) || rateLimited) return false;
      rateLimited = true;
      return answerError(req, res, 429, 'rate_limit_error', 'Number of requests', {
        'retry-after': '0.01',
      });
    });
    const result = await run(BATCH);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(count(http, CREATE), 2, 'one retry');
    assert.equal(fake.batches.length, 1);
    assert.equal(fake.batches[0]!.requests.length, 3);
    assert.equal(count(http, SYNC_CALL), 0);
    assert.deepEqual(rowKeys(ws.output), keysOf(ws));
    assert.match(result.stderr, /batches created 1, resumed 0/);
    assert.equal(fs.existsSync(stateFile), false);
  });
});

// ---------------------------------------------------------------------------------------------
describe('--batch: a poll or a results download that fails is tried again at the next poll', () => {
  const CASES: {
    label: string;
    matches: (req: IncomingMessage) => boolean;
    fail: Intercept;
    message: RegExp;
  }[] = [
    {
      label: 'results cut off inside a line',
      matches: isResults,
      fail: (_req, res) => rewriteBody(res, (body) => body.slice(0, Math.floor(body.length / 2))),
      message:
        /batch msgbatch_fake_1: judge judge-a: batch msgbatch_fake_1 results were cut off: .*; trying again at the next poll/,
    },
    {
      label: 'a poll answered 503',
      matches: isRetrieve,
      fail: (req, res) => answerError(req, res, 503, 'api_error', 'unavailable'),
      message:
        /batch msgbatch_fake_1: judge judge-a: HTTP 503 api_error: unavailable; trying again at the next poll/,
    },
  ];
  for (const { label, matches, fail, message } of CASES) {
    test(`${label}: the batch stays in the state file until its rows are written, each once`, async (t) => {
      const { fake, ws, run, intercept, stateFile } = await setup(t, JUMP, { models: 1 });
      let failed = false;
      let stateKeptAfterFailure: boolean | undefined;
      intercept((req, res) => {
        if (failed)
          stateKeptAfterFailure ??=
            fs.existsSync(stateFile) && readState(stateFile).batches.length === 1;
        if (failed || !matches(req)) return false;
        failed = true;
        return fail(req, res);
      });
      const result = await run(BATCH);
      assert.equal(result.code, 0, result.stderr);
      assert.ok(failed);
      assert.match(result.stderr, message);
      assert.equal(stateKeptAfterFailure, true, 'the batch is still pending at the next poll');
      assert.equal(fake.batches.length, 1);
      assert.equal(fake.requests.length, 0, 'no synchronous call: the results were read again');
      assert.deepEqual(rowKeys(ws.output), keysOf(ws));
      assert.equal(readCsv(ws.output).length, 4, 'each row once');
      assert.equal(logByKey(ws.log).size, 3);
      assert.equal(fs.existsSync(stateFile), false);
    });
  }
});

// ---------------------------------------------------------------------------------------------
const STALLS =
  '--batch: every wait has an end: a stalled poll or results download fails at its deadline (timeout_s)';
// Three at a time: each test waits out its stalls in real time while the others work, each on its own fake and clock.
describe(STALLS, { concurrency: 3 }, () => {
  // timeout_s runs in real time, as for a message request: 1 s where a stall is waited out (not 0.1: a loaded
  // machine must still answer in time the polls that do not stall), else too long to pass within the test.
  before(() => bundled(SCRIPT)); // the CLI's bundle is built (synchronously, a few 100 ms) before the stalls start
  const judge = judgeEntry('judge-a', { timeout_s: 1 });
  const patient = judgeEntry('judge-a', { timeout_s: 600 });
  const HANG_GUARD = { timeout: 20_000 }; // a run that never ends fails this test instead of hanging it

  test(
    'a poll whose body stalls is a failed poll, tried again at the next poll; every row from the batch',
    HANG_GUARD,
    async (t) => {
      const batch = { stallPoll: (poll: number) => poll === 1 };
      const { fake, ws, run, stateFile } = await setup(t, { ...JUMP, batch }, { models: 1, judge });
      const result = await run(BATCH);
      assert.equal(result.code, 0, result.stderr);
      assert.match(
        result.stderr,
        /batch msgbatch_fake_1: judge judge-a: batch msgbatch_fake_1 poll timed out after 1 s \(timeout_s\); trying again at the next poll/,
      );
      assert.ok(fake.batchPolls >= 3, 'the stalled poll, the next, the one the results call makes');
      assert.equal(fake.requests.length, 0, 'nothing judged synchronously');
      assert.deepEqual(rowKeys(ws.output), keysOf(ws));
      assert.equal(fs.existsSync(stateFile), false);
    },
  );

  test(
    'a results stream that sends one line then stalls: that row is kept, the rest come from the next download, each once',
    HANG_GUARD,
    async (t) => {
      const batch = { stallResults: (download: number) => (download === 1 ? 1 : undefined) };
      const { fake, ws, run, stateFile } = await setup(t, { ...JUMP, batch }, { models: 1, judge });
      const result = await run(BATCH);
      assert.equal(result.code, 0, result.stderr);
      assert.match(
        result.stderr,
        /batch msgbatch_fake_1: judge judge-a: batch msgbatch_fake_1 results timed out: no line for 1 s \(timeout_s\); trying again at the next poll/,
      );
      assert.ok(fake.batchDownloads >= 2);
      assert.equal(fake.requests.length, 0, 'nothing judged synchronously');
      assert.deepEqual(rowKeys(ws.output), keysOf(ws));
      assert.equal(readCsv(ws.output).length, 4, 'each row once');
      assert.equal(logByKey(ws.log).size, 3);
      assert.equal(fs.existsSync(stateFile), false);
    },
  );

  test(
    'a results stream that stalls every time: 3 downloads, then the chain judges what is missing',
    HANG_GUARD,
    async (t) => {
      const batch = { stallResults: () => 1 };
      const { fake, ws, run } = await setup(t, { ...JUMP, batch }, { models: 1, judge });
      const result = await run(BATCH);
      assert.equal(result.code, 0, result.stderr);
      assert.equal(fake.batchDownloads, 3);
      assert.equal(
        fake.requests.length,
        2,
        'the two results that never came, judged synchronously',
      );
      assert.deepEqual(rowKeys(ws.output), keysOf(ws));
      assert.equal(readCsv(ws.output).length, 4, 'each row once');
    },
  );

  test(
    'the run ends as soon as the last results are written, even when the stream stays open after them',
    HANG_GUARD,
    async (t) => {
      const batch = { pollsUntilEnded: 2, stallResults: () => 3 };
      const { fake, ws, run, clock, stateFile } = await setup(
        t,
        { ...JUMP, batch },
        { models: 1, judge: patient },
      );
      const result = await run([...BATCH.slice(0, 2), '10']);
      assert.equal(result.code, 0, result.stderr);
      assert.equal(fake.batchDownloads, 1);
      assert.equal(fake.requests.length, 0);
      assert.doesNotMatch(result.stderr, /timed out|trying again/);
      assert.ok(
        jumpedMs(clock) < 15_000,
        `one poll interval (10 s), no deadline and no further interval: ${jumpedMs(clock)}`,
      );
      assert.deepEqual(rowKeys(ws.output), keysOf(ws));
      assert.equal(fs.existsSync(stateFile), false);
    },
  );

  test("while polling, the progress line shows the batch's counts, not 'judged 0/3 ... ETA ?'", async (t) => {
    const { ws, run } = await setup(t, { ...JUMP, batch: { pollsUntilEnded: 3 } }, { models: 1 });
    const result = await run(BATCH, { isTTY: true });
    assert.equal(result.code, 0, result.stderr);
    const polling = result.stderr.slice(result.stderr.indexOf('batches pending'));
    const drawn = polling
      .split('\r\x1b[2K')
      .map((part) => part.split('\n')[0]!)
      .filter((line) => line.startsWith('judged '));
    assert.ok(
      drawn.some((line) =>
        /^judged 0\/3, failed 0; batch: 3 processing, 0 succeeded, 0 errored$/.test(line),
      ),
      drawn.join('\n'),
    );
    assert.ok(!drawn.some((line) => line.includes('ETA')), drawn.join('\n'));
    for (const line of drawn) {
      const judged = Number(/^judged (\d+)/.exec(line)![1]);
      assert.ok(judged === 0 || line.includes(' 0 processing'), `counts of the last poll: ${line}`);
    }
    assert.deepEqual(rowKeys(ws.output), keysOf(ws));
  });

  for (const [what, batch] of [
    ['a stalled poll', { stallPoll: () => true }],
    ['a stalled results download', { stallResults: () => 0 }],
  ] as const) {
    test(`one Ctrl-C interrupts ${what} at once: exit 130, the batch left running and named`, async (t) => {
      const { fake, spawn, stateFile } = await setup(
        t,
        { ...JUMP, batch },
        { models: 1, judge: patient },
      );
      const cli = spawn(BATCH, { timeoutMs: 15_000 });
      await waitFor(
        () => (what === 'a stalled poll' ? fake.batchPolls : fake.batchDownloads) >= 1,
        15_000,
        what,
      );
      cli.child.kill('SIGINT');
      const interrupted = await cli.done;
      assert.equal(interrupted.code, 130, interrupted.stderr);
      assert.match(
        interrupted.stderr,
        mentioning('batch(es) msgbatch_fake_1 left running at Anthropic', stateFile),
      );
      assert.equal(readState(stateFile).batches[0]!.id, 'msgbatch_fake_1');
    });
  }
});

// ---------------------------------------------------------------------------------------------
describe('--batch: polls that fail 3 times in a row stop the run, the batch left pending', () => {
  test(
    'exit 1, the last failure named, the batch left running for a rerun; the rerun collects it',
    { timeout: 20_000 },
    async (t) => {
      const { fake, ws, run, intercept, stateFile } = await setup(t, JUMP, { models: 1 });
      const stopFailing = intercept(
        (req, res) => isRetrieve(req) && answerError(req, res, 503, 'api_error', 'unavailable'),
      );
      const stopped = await run(BATCH);
      assert.equal(stopped.code, 1, stopped.stderr);
      assert.equal(
        stopped.stderr.split('\n').filter((line) => line.endsWith('trying again at the next poll'))
          .length,
        2,
      );
      assert.match(
        stopped.stderr,
        /^stopped: 3 polls in a row of batch msgbatch_fake_1 failed, the last: judge judge-a: HTTP 503 api_error: unavailable/m,
      );
      assert.match(
        stopped.stderr,
        mentioning('batch(es) msgbatch_fake_1 left running at Anthropic', 'rerun', stateFile),
      );
      assert.equal(readState(stateFile).batches[0]!.id, 'msgbatch_fake_1');
      assert.equal(fake.requests.length, 0, 'nothing judged synchronously');

      stopFailing();
      const rerun = await run(BATCH);
      assert.equal(rerun.code, 0, rerun.stderr);
      assert.equal(fake.batches.length, 1, 'never submitted again');
      assert.deepEqual(rowKeys(ws.output), keysOf(ws));
      assert.equal(fs.existsSync(stateFile), false);
    },
  );

  test(
    'the API unreachable once the batch is submitted (connection refused): exit 2, the one message naming the address',
    { timeout: 20_000 },
    async (t) => {
      const { fake, ws, run, intercept, stateFile } = await setup(t, JUMP, { models: 1 });
      intercept((req, res) => {
        if (isCreate(req)) res.on('finish', () => void fake.close());
        return false;
      });
      const stopped = await run(BATCH);
      assert.equal(stopped.code, 2, stopped.stderr);
      assert.match(
        stopped.stderr,
        mentioning(
          `stopped: cannot reach the API at ${fake.url}`,
          'ECONNREFUSED',
          '3 polls in a row of batch msgbatch_fake_1 failed',
        ),
      );
      assert.match(
        stopped.stderr,
        mentioning('batch(es) msgbatch_fake_1 left running at Anthropic', 'rerun', stateFile),
      );
      assert.equal(readState(stateFile).batches[0]!.id, 'msgbatch_fake_1', 'kept: it exists');
      assert.deepEqual(rowKeys(ws.output), []);
    },
  );
});

// ---------------------------------------------------------------------------------------------
describe('--batch: a malformed result or batch object never crashes the run', () => {
  const MALFORMED: { label: string; result: unknown; reason: RegExp }[] = [
    {
      label: '"result": null',
      result: null,
      reason: /judge judge-a: batch request without a result/,
    },
    {
      label: 'no "result" at all',
      result: undefined,
      reason: /judge judge-a: batch request without a result/,
    },
    {
      label: 'an errored result without "error"',
      result: { type: 'errored' },
      reason: /judge judge-a: batch request errored$/,
    },
    {
      label: 'an errored result whose "error" holds no error',
      result: { type: 'errored', error: { type: 'error', error: null } },
      reason: /judge judge-a: batch request errored$/,
    },
    {
      label: 'a succeeded result without "message"',
      result: { type: 'succeeded' },
      reason: /judge judge-a: the answer is not a message/,
    },
    {
      label: 'a result of an unknown type',
      result: { type: 'mystery' },
      reason: /judge judge-a: batch request mystery$/,
    },
  ];
  for (const { label, result: malformed, reason } of MALFORMED) {
    test(`${label}: that transcript's failure, judged again by the primary; the others come from the batch`, async (t) => {
      const batch = resultsByTag({ 'm01/proof01': { type: 'raw', result: malformed } });
      const { fake, ws, run, stateFile } = await setup(t, { ...JUMP, batch }, { models: 1 });
      const result = await run(BATCH);
      assert.equal(result.code, 0, result.stderr);
      assert.doesNotMatch(result.stderr, /^\s+at /m, 'no stack trace');
      assert.deepEqual(
        fake.requests.map((req) => `${tagOf(req)} ${modelOf(req)}`),
        ['m01/proof01 judge-a'],
      );
      assert.deepEqual(rowKeys(ws.output), keysOf(ws));
      const entry = logByKey(ws.log).get('m01/proof01')!;
      assert.deepEqual(
        [entry.status, entry.judge, entry.attempts.length],
        ['scored', 'judge-a', 1],
      );
      assert.equal(entry.attempts[0]!.judge, 'judge-a');
      assert.match(entry.attempts[0]!.message, reason);
      assert.equal(fs.existsSync(stateFile), false);
    });
  }

  test('a poll answered without "request_counts": counted as none; the results are collected as usual', async (t) => {
    const { fake, ws, run, intercept, stateFile } = await setup(
      t,
      { ...JUMP, batch: { pollsUntilEnded: 2 } },
      { models: 1 },
    );
    intercept(
      (req, res) =>
        isRetrieve(req) &&
        rewriteBody(res, (body) => {
          const { request_counts: _dropped, ...batch } = JSON.parse(body);
          return JSON.stringify(batch);
        }),
    );
    const result = await run(BATCH);
    assert.equal(result.code, 0, result.stderr);
    assert.match(
      result.stderr,
      /batches pending 1: 0 processing, 0 succeeded, 0 errored, 0 canceled, 0 expired/,
    );
    assert.equal(fake.requests.length, 0, 'nothing judged synchronously');
    assert.deepEqual(rowKeys(ws.output), keysOf(ws));
    assert.equal(fs.existsSync(stateFile), false);
  });
});

// ---------------------------------------------------------------------------------------------
describe('--batch: a results download that fails every time is tried 3 times, then the chain judges the batch', () => {
  const RESULTS = 'GET /v1/messages/batches/msgbatch_fake_1/results';
  const CASES: { label: string; fail: Intercept; message: RegExp }[] = [
    {
      label: 'answered 500',
      fail: (req, res) => answerError(req, res, 500, 'api_error', 'Internal server error'),
      message: /HTTP 500 api_error: Internal server error; trying again at the next poll/,
    },
    {
      label: 'answered 200 with a body that is not JSON lines',
      fail: (_req, res) => rewriteBody(res, () => 'garbage, not JSON lines\n'),
      message: /results were cut off: .*; trying again at the next poll/,
    },
  ];
  for (const { label, fail, message } of CASES) {
    test(`${label}: exactly 3 downloads, then each request is judged synchronously; every row written`, async (t) => {
      const { fake, http, ws, run, intercept, stateFile } = await setup(t, JUMP, { models: 1 });
      // Bounded, so an implementation that never stops downloading fails this test instead of hanging it.
      let downloads = 0;
      intercept((req, res) => isResults(req) && ++downloads <= 10 && fail(req, res));
      const result = await run(BATCH);
      assert.equal(result.code, 0, result.stderr);
      assert.equal(count(http, RESULTS), 3, http.join(', '));
      const retried = result.stderr
        .split('\n')
        .filter((line) => line.startsWith('batch msgbatch_fake_1: '));
      assert.equal(retried.length, 3, result.stderr);
      for (const line of retried) assert.match(line, message);
      assert.deepEqual(
        fake.requests.map((req) => `${tagOf(req)} ${modelOf(req)}`).sort(),
        keysOf(ws).map((key) => `${key} judge-a`),
      );
      assert.deepEqual(rowKeys(ws.output), keysOf(ws));
      assert.equal(readCsv(ws.output).length, 4, 'header + one row per transcript');
      for (const [key, entry] of logByKey(ws.log)) {
        assert.deepEqual(
          [entry.status, entry.judge, entry.attempts.length],
          ['scored', 'judge-a', 1],
          key,
        );
        assert.match(entry.attempts[0]!.message, /batch msgbatch_fake_1 returned no result/, key);
      }
      assert.equal(fs.existsSync(stateFile), false);
    });
  }
});

// ---------------------------------------------------------------------------------------------
describe('--batch: Ctrl-C while polling', () => {
  test('leaves the batch running (not cancelled), says how to resume, exits 130; the dry-run and a rerun see it pending', async (t) => {
    const { fake, http, ws, run, spawn, stateFile } = await setup(t, {
      ...JUMP,
      batch: { pollsUntilEnded: 1000 },
    });
    const first = spawn(BATCH);
    await waitFor(() => fake.batchPolls >= 1, 20_000, 'the first poll');
    first.child.kill('SIGINT');
    const interrupted = await first.done;
    assert.equal(interrupted.code, 130, interrupted.stderr);
    assert.match(
      interrupted.stderr,
      /batches pending 1: 6 processing, 0 succeeded/,
      'the counts are shown while polling',
    );
    assert.match(
      interrupted.stderr,
      mentioning(
        'batch(es) msgbatch_fake_1 left running at Anthropic, not cancelled',
        'rerun the same command',
        stateFile,
      ),
    );
    assert.ok(!http.some((line) => /cancel/.test(line)), `no cancel call: ${http.join(', ')}`);
    assert.equal(fake.batches[0]!.endedAt, undefined);
    assert.equal(readState(stateFile).batches[0]!.id, 'msgbatch_fake_1', 'the state file is kept');
    assert.deepEqual(rowKeys(ws.output), []);

    const dry = await run(['--dry-run', ...BATCH], { apiKey: null });
    assert.equal(dry.code, 0, dry.stderr);
    assert.match(
      dry.stderr,
      /would send 0 request\(s\).*all 6 selected.* already scored or in a pending batch/,
    );
    assert.equal(dry.stdout, '');

    fake.batches[0]!.endedAt = Date.now();
    const result = await run(BATCH);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(count(http, CREATE), 1);
    assert.deepEqual(rowKeys(ws.output), keysOf(ws));
    assert.equal(fs.existsSync(stateFile), false);
  });
});

// ---------------------------------------------------------------------------------------------
describe('--batch: Ctrl-C while a create waits out a 429', () => {
  test('exits 130 with its summary; no state entry for the batch never made; a rerun submits normally', async (t) => {
    // A budget that fits the 5 s retry-after, so the create would wait it out.
    const judge = judgeEntry('judge-a', {
      retry: { max_retries: 5, budget_s: 30, base_delay_s: 0.05 },
    });
    const { fake, http, ws, run, spawn, intercept, stateFile } = await setup(t, JUMP, {
      models: 1,
      judge,
    });
    let answered429 = false;
    const stopRateLimiting = intercept((req, res) => {
      if (!isCreate(req)) return false;
      res.on('finish', () => (answered429 = true));
      return answerError(req, res, 429, 'rate_limit_error', 'Number of requests', {
        'retry-after': '5',
      });
    });
    const first = spawn(BATCH);
    await waitFor(() => answered429, 20_000, 'the create answered 429');
    first.child.kill('SIGINT');
    const interrupted = await first.done;
    assert.equal(interrupted.signal, null, 'exited by itself');
    assert.equal(interrupted.code, 130, interrupted.stderr);
    assert.match(
      interrupted.stderr,
      /^interrupted: 3 selected: 0 scored, 0 skipped/m,
      'the summary is printed',
    );
    assert.equal(count(http, CREATE), 1, 'the create is not retried after Ctrl-C');
    assert.equal(fake.batches.length, 0);
    const entries = fs.existsSync(stateFile) ? readState(stateFile).batches : [];
    assert.deepEqual(
      entries.filter((entry) => entry.id === null),
      [],
      'no entry for a batch that was never created',
    );
    assert.deepEqual(rowKeys(ws.output), []);
    assert.equal(fs.existsSync(`${ws.output}.lock`), false);

    stopRateLimiting();
    const rerun = await run(BATCH);
    assert.equal(rerun.code, 0, rerun.stderr);
    assert.doesNotMatch(rerun.stderr, /previous run stopped while submitting/);
    assert.equal(count(http, CREATE), 2);
    assert.equal(fake.batches.length, 1);
    assert.equal(fake.batches[0]!.requests.length, 3);
    assert.deepEqual(rowKeys(ws.output), keysOf(ws));
    assert.equal(fs.existsSync(stateFile), false);
  });
});

// ---------------------------------------------------------------------------------------------
describe('--dry-run --batch', () => {
  const CASES = [
    { label: 'nothing scored yet', scoreFirst: false, first: ['m01', 'proof01'], requests: 6 },
    { label: 'proof01 already scored', scoreFirst: true, first: ['m01', 'proof02'], requests: 4 },
  ] as const;
  for (const { label, scoreFirst, first, requests } of CASES) {
    test(`${label}: prints the first request's prompt, counts the requests not yet scored, sends and writes nothing`, async (t) => {
      const { fake, http, ws, run, stateFile } = await setup(t, JUMP);
      if (scoreFirst) assert.equal((await run(['--task', 'proof01'])).code, 0);
      const seenBefore = http.length;
      const before = snapshot(ws.dir);
      const result = await run(['--dry-run', ...BATCH], { apiKey: null });
      assert.equal(result.code, 0, result.stderr);
      assert.equal(result.stdout, `${expectedPrompt(ws, first[0], first[1])}\n`);
      assert.match(
        result.stderr,
        new RegExp(
          `would send ${requests} request\\(s\\) in 1 batch\\(es\\) to judge-a; printed the prompt for ${first.join('/')}`,
        ),
      );
      assert.equal(fake.batches.length, 0);
      assert.deepEqual(http.slice(seenBefore), []);
      assert.deepEqual(snapshot(ws.dir), before, 'no file written');
      assert.equal(fs.existsSync(stateFile), false);
    });
  }
});

// ---------------------------------------------------------------------------------------------
describe('images in transcripts', () => {
  const imageJudge = (model: string) => judgeEntry(model, { media: ['text', 'image'] });

  /** Replaces m01/proof01 with a transcript holding a file image (photo.png beside it) and an inline GIF. */
  function writeImageTranscript(ws: Workspace, { withFile = true } = {}): string {
    const dir = path.join(ws.transcripts, 'm01');
    const png = path.join(dir, 'photo.png');
    if (withFile) fs.writeFileSync(png, Buffer.from(PNG_1X1, 'base64'));
    const image = {
      type: 'image',
      source: { type: 'base64', media_type: 'image/gif', data: GIF_1X1 },
    };
    const user = [
      { type: 'text', text: 'IMG-BEFORE my attempt:' },
      { type: 'image', path: 'photo.png' },
      { type: 'text', text: 'IMG-AFTER is it right?' },
    ];
    const messages = [
      { role: 'system', content: tagLine('m01', 'proof01') },
      { role: 'user', content: user },
      { role: 'assistant', content: 'What does your second line claim?' },
      { role: 'user', content: [image] },
    ];
    fs.writeFileSync(
      path.join(dir, 'proof01.json'),
      JSON.stringify({ metadata: { task_id: 'proof01', model: 'm01' }, messages }),
    );
    return png;
  }

  /** The content of a request for the image transcript: its prompt, then each label and its image, in order. */
  function assertImageContent(content: any): void {
    assert.ok(Array.isArray(content), 'content is a list of blocks');
    assert.equal(content.length, 5, JSON.stringify(content).slice(0, 400));
    assert.equal(content[0].type, 'text');
    assert.match(
      content[0].text,
      /Student: IMG-BEFORE my attempt:\n {4}\[image 1\]\n {4}IMG-AFTER is it right\?/,
    );
    assert.match(content[0].text, /Student: \[image 2\]/);
    assert.deepEqual(content.slice(1), [
      { type: 'text', text: '[image 1]' },
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG_1X1 } },
      { type: 'text', text: '[image 2]' },
      { type: 'image', source: { type: 'base64', media_type: 'image/gif', data: GIF_1X1 } },
    ]);
  }

  interface ImageCase {
    label: string;
    batch: boolean;
    judges: [JudgeEntry, ...JudgeEntry[]];
    withFile?: boolean;
    /** Where m01/proof01 (with images) goes: to a judge synchronously, in the batch, or nowhere (it fails). */
    imageTo: string | 'batch' | null;
    /** For a failure: its error class and what the failure line must mention. */
    failure?: { name: string; mentions: (png: string) => string[] };
  }
  const skipped = {
    name: 'EvalUnsupportedError',
    mentions: () => ['no judge takes images', 'judge-a, judge-b'],
  };
  const missingFile = {
    name: 'EvalInputError',
    mentions: (png: string) => [png, 'cannot be read'],
  };
  const CASES: ImageCase[] = [
    {
      label:
        'a text-only primary is skipped for the image transcript, which its image fallback judges; the primary judges the rest',
      batch: false,
      judges: [judgeEntry('judge-a'), imageJudge('judge-b')],
      imageTo: 'judge-b',
    },
    {
      label:
        'when no judge takes images, the image transcript fails naming the skipped judges (exit 1); the rest get rows',
      batch: false,
      judges: [judgeEntry('judge-a'), judgeEntry('judge-b')],
      imageTo: null,
      failure: skipped,
    },
    {
      label:
        'a missing image file is an input error naming the file; no request for that transcript',
      batch: false,
      judges: [imageJudge('judge-a'), imageJudge('judge-b')],
      withFile: false,
      imageTo: null,
      failure: missingFile,
    },
    {
      label: '--batch: an image-capable primary gets the images in its batch request',
      batch: true,
      judges: [imageJudge('judge-a')],
      imageTo: 'batch',
    },
    {
      label:
        '--batch, text-only primary: the image transcript is judged synchronously by the image fallback, the rest batched',
      batch: true,
      judges: [judgeEntry('judge-a'), imageJudge('judge-b')],
      imageTo: 'judge-b',
    },
    {
      label:
        '--batch, no judge takes images: the image transcript fails naming the skipped judges; the rest batched',
      batch: true,
      judges: [judgeEntry('judge-a'), judgeEntry('judge-b')],
      imageTo: null,
      failure: skipped,
    },
    {
      label:
        '--batch, a missing image file: that transcript is not batched and fails as an input error naming the file',
      batch: true,
      judges: [imageJudge('judge-a'), imageJudge('judge-b')],
      withFile: false,
      imageTo: null,
      failure: missingFile,
    },
  ];

  for (const { label, batch, judges, withFile, imageTo, failure } of CASES) {
    test(label, async (t) => {
      const [judge, ...fallbacks] = judges;
      const { fake, ws, run } = await setup(t, JUMP, {
        models: 1,
        tasks: ['proof01', 'proof02'],
        judge,
        fallbacks,
      });
      const png = writeImageTranscript(ws, { withFile });
      const result = await run(batch ? BATCH : []);
      assert.equal(result.code, failure ? 1 : 0, result.stderr);

      const batched = fake.batches.flatMap((created) => created.requests);
      const expectedBatched = batch
        ? ['m01/proof02', ...(imageTo === 'batch' ? ['m01/proof01'] : [])]
        : [];
      assert.deepEqual(
        batched.map((request) => tagOfParams(request.params)).sort(),
        expectedBatched.sort(),
      );
      const expectedSync = [
        ...(typeof imageTo === 'string' && imageTo !== 'batch' ? [`m01/proof01 ${imageTo}`] : []),
        ...(batch ? [] : ['m01/proof02 judge-a']),
      ];
      assert.deepEqual(
        fake.requests.map((req) => `${tagOf(req)} ${modelOf(req)}`).sort(),
        expectedSync.sort(),
      );
      if (imageTo === 'batch')
        assertImageContent(
          batched.find((r) => tagOfParams(r.params) === 'm01/proof01')!.params.messages[0].content,
        );
      else if (imageTo)
        assertImageContent(
          fake.requests.find((req) => tagOf(req) === 'm01/proof01')!.body.messages[0].content,
        );

      const log = logByKey(ws.log);
      assert.equal(log.get('m01/proof02')!.judge, 'judge-a');
      if (failure) {
        assert.deepEqual(rowKeys(ws.output), ['m01/proof02']);
        const lines = result.stderr
          .split('\n')
          .filter((line) => line.includes('failed m01/proof01: '));
        assert.equal(lines.length, 2, result.stderr);
        for (const line of lines) assert.match(line, mentioning(...failure.mentions(png)));
        assert.match(result.stderr, /2 selected: 1 scored, 0 skipped .*1 failed/);
        assert.deepEqual(
          [log.get('m01/proof01')!.status, log.get('m01/proof01')!.error?.class],
          ['failed', failure.name],
        );
      } else {
        assert.deepEqual(rowKeys(ws.output), ['m01/proof01', 'm01/proof02']);
        assert.equal(log.get('m01/proof01')!.judge, imageTo === 'batch' ? 'judge-a' : imageTo);
      }
    });
  }

  test('the dry-run shows the placeholders and lists the image files on stderr; it sends and writes nothing', async (t) => {
    const { http, ws, run } = await setup(t, JUMP, {
      models: 1,
      tasks: ['proof01', 'proof02'],
      judge: imageJudge('judge-a'),
    });
    const png = writeImageTranscript(ws);
    const before = snapshot(ws.dir);
    const result = await run(['--dry-run'], { apiKey: null });
    assert.equal(result.code, 0, result.stderr);
    assert.match(
      result.stdout,
      /Student: IMG-BEFORE my attempt:\n {4}\[image 1\]\n {4}IMG-AFTER is it right\?/,
    );
    assert.match(result.stdout, /Student: \[image 2\]/);
    assert.match(
      result.stderr,
      mentioning('dry-run: [image 1] is sent beside the prompt: ', png, 'image/png'),
    );
    assert.match(
      result.stderr,
      /dry-run: \[image 2\] is sent beside the prompt: inline base64 \(image\/gif, \d+ bytes\)/,
    );
    assert.deepEqual(http, []);
    assert.deepEqual(snapshot(ws.dir), before);
  });

  test('--dry-run --batch with a text-only primary counts the image transcript as judged synchronously', async (t) => {
    const { http, ws, run } = await setup(t, JUMP, {
      models: 1,
      tasks: ['proof01', 'proof02'],
      fallbacks: [imageJudge('judge-b')],
    });
    writeImageTranscript(ws);
    const result = await run(['--dry-run', ...BATCH], { apiKey: null });
    assert.equal(result.code, 0, result.stderr);
    assert.equal(
      result.stdout,
      `${expectedPrompt(ws, 'm01', 'proof02')}\n`,
      'the first request that would be batched',
    );
    assert.match(
      result.stderr,
      /would send 1 request\(s\) in 1 batch\(es\) to judge-a, and judge 1 transcript\(s\) synchronously/,
    );
    assert.deepEqual(http, []);
  });
});

// ---------------------------------------------------------------------------------------------
describe('splitIntoBatches and batchCustomId', () => {
  const items = (...bytes: number[]) => bytes.map((size, id) => ({ id, bytes: size }));
  const split = (list: { id: number; bytes: number }[], maxRequests: number, maxBytes: number) =>
    [...splitIntoBatches(list, { maxRequests, maxBytes })].map((batch) =>
      batch.map((item) => item.id),
    );

  const CASES: [string, number[], number, number, number[][]][] = [
    ['by count', [1, 1, 1, 1, 1], 2, 1000, [[0, 1], [2, 3], [4]]],
    [
      'by size, a batch filled exactly to maxBytes',
      [40, 60, 1, 50, 50, 100],
      10,
      100,
      [[0, 1], [2, 3], [4], [5]],
    ],
    ['by count and size together', [30, 30, 30, 30, 30], 2, 70, [[0, 1], [2, 3], [4]]],
    ['nothing to split', [], 2, 10, []],
    [
      'an item over maxBytes goes alone, and no batch is ever empty',
      [11, 5, 11],
      10,
      10,
      [[0], [1], [2]],
    ],
  ];
  for (const [label, bytes, maxRequests, maxBytes, expected] of CASES) {
    test(`splitIntoBatches: ${label}`, () => {
      assert.deepEqual(split(items(...bytes), maxRequests, maxBytes), expected);
    });
  }

  test('splitIntoBatches keeps order, loses nothing and respects both limits on a longer list', () => {
    const many = items(...Array.from({ length: 25 }, (_, i) => 1 + (i % 7)));
    const batches = [...splitIntoBatches(many, { maxRequests: 4, maxBytes: 12 })];
    assert.deepEqual(batches.flat(), many);
    for (const batch of batches) {
      assert.ok(batch.length >= 1 && batch.length <= 4);
      assert.ok(batch.reduce((sum, item) => sum + item.bytes, 0) <= 12);
    }
  });

  test('splitIntoBatches by default splits at the API limit of 100,000 requests', () => {
    assert.deepEqual(
      [...splitIntoBatches(items(...Array<number>(100_001).fill(1)))].map((batch) => batch.length),
      [100_000, 1],
    );
  });

  test('batchCustomId is stable, distinct per pair, and within the API limits', () => {
    const pairs: [string, string][] = [
      ['proof01', 'm01'],
      ['proof01', 'm02'],
      ['proof02', 'm01'],
      ['a_b', 'c'],
      ['a', 'b_c'],
      ['a\u0000b', 'c'],
      ['x'.repeat(300), 'model with spaces/and:colons'],
      ['証明', 'モデル'],
      ['', ''],
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
