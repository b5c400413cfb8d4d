// Judges of the OpenAI API and OpenAI-compatible servers: the entry, the request as Chat Completions take
// it, the answer and its cost, each failure classified, a keyless local server, and a fallback across providers. Every
// call goes through the real openai SDK to a loopback fake (fakes/openai.ts), never the network.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import type { TestContext } from 'node:test';
import { FakeOpenAi } from '../fakes/openai.ts';
import type { FakeOpenAiOptions } from '../fakes/openai.ts';
import {
  RUBRIC_FILE,
  addTaskFiles,
  allowedScoresOf,
  assertAnswerSchema,
  csvRows,
  judgeEntry,
  jumpClock,
  makeWorkspace,
  readLog,
  runMain,
  setup,
  shippedRubricJson,
  writeJson,
} from './helpers.ts';
import type { JumpClock, MainOptions, Workspace } from './helpers.ts';

const { callJudge, buildJudgeRequest, createJudges, loadRubric, parseDuration } =
  await import('../run-judge.ts');

const rubric = loadRubric(RUBRIC_FILE);

const KEY = 'sk-proj-test-openai-key-42';

const PRICE = { input: 1.25, output: 10, cache_read: 0.125 };

/** An OpenAI judge entry of models.json at `url`, key in OPENAI_TEST_KEY; overrides replace fields (undefined drops). */
function openAiEntry(
  url: string,
  overrides: Record<string, unknown> = {},
): Record<string, unknown> {
  const entry: Record<string, unknown> = {
    provider: 'openai',
    model: 'gpt-test',
    api_key_env: 'OPENAI_TEST_KEY',
    base_url: url,
    temperature: null,
    max_tokens: 777,
    timeout_s: 5,
    structured_output: true,
    reasoning_effort: 'low',
    media: ['text', 'image'],
    retry: { max_retries: 2, budget_s: 5, base_delay_s: 0.05 },
    price_usd_per_mtok: PRICE,
  };
  for (const [key, value] of Object.entries(overrides)) {
    if (value === undefined) delete entry[key];
    else entry[key] = value;
  }
  return entry;
}

async function startOpenAi(t: TestContext, opts: FakeOpenAiOptions = {}): Promise<FakeOpenAi> {
  const fake = await FakeOpenAi.start(opts);
  t.after(() => fake.close());
  return fake;
}

/** A workspace of one transcript (m01/proof01) whose judge chain is `judge` then `fallbacks`. */
function workspace(t: TestContext, judge: unknown, fallbacks: unknown[] = []): Workspace {
  const ws = makeWorkspace({
    tasks: ['proof01'],
    modelsJson: {
      models: [{ name: 'm01', provider: 'local' }],
      judge,
      fallback_judges: fallbacks,
    },
    models: 1,
  });
  t.after(() => ws.remove());
  return ws;
}

/** The run's environment: the OpenAI test key, and none of the process's OpenAI settings. */
function openAiEnv(extra: Record<string, string | undefined> = {}): MainOptions['env'] {
  return { OPENAI_TEST_KEY: KEY, OPENAI_API_KEY: undefined, OPENAI_BASE_URL: undefined, ...extra };
}

const run = (ws: Workspace, args: string[] = [], opts: MainOptions = {}) =>
  runMain(ws.args(...args), { env: openAiEnv(), ...opts });

describe('an OpenAI judge in a run', () => {
  test('a judged row: Chat Completions with the strict answer schema, max_completion_tokens and reasoning_effort; the key sent as a bearer token and never written', async (t) => {
    const fake = await startOpenAi(t, { key: KEY });
    const ws = workspace(t, openAiEntry(fake.url, { family: 'gpt' }));
    const result = await run(ws);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(csvRows(ws.output).length, 1);

    assert.equal(fake.requests.length, 1);
    const request = fake.requests[0]!;
    assert.equal(request.path, '/v1/chat/completions');
    assert.equal(request.headers.authorization, `Bearer ${KEY}`);
    assert.equal(request.body.model, 'gpt-test');
    assert.equal(request.body.max_completion_tokens, 777);
    assert.equal(request.body.reasoning_effort, 'low');
    assert.equal('max_tokens' in request.body, false);
    assert.equal('temperature' in request.body, false, 'temperature null: not sent');
    assert.equal(request.body.messages[0].role, 'user');
    assert.match(request.body.messages[0].content, /You are an expert evaluator of proof tutoring/);

    // The same schema the Anthropic judge gets, strict: every property required, no others allowed.
    const format = request.body.response_format;
    assert.equal(format.type, 'json_schema');
    assert.equal(format.json_schema.strict, true);
    assert.equal(typeof format.json_schema.name, 'string');
    assertAnswerSchema(format.json_schema.schema, allowedScoresOf(shippedRubricJson()));
    const anthropic = buildJudgeRequest(
      { model: 'm', config: judgeEntry('m', { structured_output: true }) as never },
      'p',
      { rubric },
    ) as any;
    assert.deepEqual(format.json_schema.schema, anthropic.output_config.format.schema);

    const [entry] = readLog(ws.log) as any[];
    assert.equal(entry.status, 'scored');
    assert.equal(entry.answers[0].provider, 'openai');
    assert.equal(entry.answers[0].family, 'gpt');
    assert.equal(entry.answers[0].stop_reason, 'stop');
    assert.equal(entry.answers[0].request_id, 'req_oai_1');
    for (const file of [ws.log, ws.output]) {
      assert.ok(!fs.readFileSync(file, 'utf8').includes(KEY), `${file} never holds the key`);
    }
    assert.ok(!result.stderr.includes(KEY));
  });

  test('usage with cached tokens: uncached input, cache read and output recorded; the cost at the input, cache-read and output prices', async (t) => {
    const fake = await startOpenAi(t, { cachedTokens: 1024 });
    const ws = workspace(t, openAiEntry(fake.url));
    const result = await run(ws);
    assert.equal(result.code, 0, result.stderr);
    const [entry] = readLog(ws.log) as any[];
    const raw = entry.answers[0].usage_raw;
    assert.equal(raw.prompt_tokens_details.cached_tokens, 1024);
    assert.deepEqual(entry.answers[0].usage, {
      input_tokens: raw.prompt_tokens - 1024,
      output_tokens: 20,
      cache_read_input_tokens: 1024,
    });
    const expected = ((raw.prompt_tokens - 1024) * 1.25 + 1024 * 0.125 + 20 * 10) / 1e6;
    assert.ok(Math.abs(entry.cost_usd - expected) < 1e-12, `${entry.cost_usd} vs ${expected}`);
    assert.match(result.stderr, /cache read 1024/);
  });

  test('model_env picks the model id, and its price by model id applies', async (t) => {
    const fake = await startOpenAi(t);
    const prices = { 'gpt-other': { input: 2, output: 8 } };
    const entry = openAiEntry(fake.url, {
      model_env: 'RJ_OPENAI_MODEL',
      price_usd_per_mtok: prices,
    });
    const ws = workspace(t, entry);
    const result = await run(ws, [], { env: openAiEnv({ RJ_OPENAI_MODEL: 'gpt-other' }) });
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.requests[0]!.body.model, 'gpt-other');
    const [line] = readLog(ws.log) as any[];
    const usage = line.answers[0].usage;
    assert.ok(Math.abs(line.cost_usd - (usage.input_tokens * 2 + 20 * 8) / 1e6) < 1e-12);
  });

  const unusable: [string, object, RegExp][] = [
    ['an answer that is not JSON', { text: 'I think the tutor did well.' }, /not JSON/],
    [
      'a score the rubric does not allow',
      { text: '{"scores": {}, "notes": "x"}' },
      /does not match the rubric/,
    ],
    [
      'an answer cut off (finish_reason length)',
      { finishReason: 'length' },
      /cut off by max_tokens/,
    ],
    ['a refusal', { refusal: 'I cannot help with that.' }, /stop_reason "refusal"/],
  ];
  for (const [label, reply, reason] of unusable) {
    test(`${label} fails loudly: no row, the raw answer in the log`, async (t) => {
      const fake = await startOpenAi(t);
      fake.enqueue(reply);
      const ws = workspace(t, openAiEntry(fake.url));
      const result = await run(ws);
      assert.equal(result.code, 1, result.stderr);
      assert.match(result.stderr, /failed m01\/proof01: judge gpt-test: unusable answer/);
      assert.match(result.stderr, reason);
      assert.equal(fs.existsSync(ws.output) ? csvRows(ws.output).length : 0, 0);
      const [entry] = readLog(ws.log) as any[];
      assert.equal(entry.status, 'failed');
      assert.equal(entry.answers.length, 1);
    });
  }

  test('a tool call instead of text fails loudly: the call is the answer text in the log, its usage paid', async (t) => {
    const fake = await startOpenAi(t);
    const call = { name: 'submit_scores', arguments: fake.validAnswer() };
    fake.enqueue({
      text: null,
      toolCalls: [{ id: 'call_1', type: 'function', function: call }],
      finishReason: 'tool_calls',
    });
    const ws = workspace(t, openAiEntry(fake.url));
    const result = await run(ws);
    assert.equal(result.code, 1, result.stderr);
    assert.match(result.stderr, /unusable answer: .*stop_reason "tool_calls"/);
    const [entry] = readLog(ws.log) as any[];
    assert.equal(entry.status, 'failed');
    assert.match(entry.answers[0].text, /"tool_calls".*"submit_scores"/);
    assert.ok(entry.answers[0].usage.output_tokens > 0);
  });

  test('content as a list of text parts is read as their text; a part of another kind fails loudly, kept in the log', async (t) => {
    const fake = await startOpenAi(t);
    const answer = fake.validAnswer();
    const half = Math.floor(answer.length / 2);
    const parts = [
      { type: 'text', text: answer.slice(0, half) },
      { type: 'text', text: answer.slice(half) },
    ];
    fake.enqueue({ content: parts });
    const ws = workspace(t, openAiEntry(fake.url));
    const scored = await run(ws);
    assert.equal(scored.code, 0, scored.stderr);
    assert.equal(csvRows(ws.output).length, 1);
    assert.equal((readLog(ws.log) as any[])[0].answers[0].text, answer);

    fake.enqueue({ content: [{ type: 'audio', audio: { id: 'audio_1' } }] });
    const failed = await run(ws, ['--rescore']);
    assert.equal(failed.code, 1, failed.stderr);
    assert.match(failed.stderr, /unusable answer: .*content holds a part of type "audio"/);
    const entry = (readLog(ws.log) as any[])[1];
    assert.equal(entry.status, 'failed');
    assert.match(entry.answers[0].text, /"audio_1"/);
  });

  test('an image goes as a data URL after its label', async (t) => {
    const fake = await startOpenAi(t);
    const ws = workspace(t, openAiEntry(fake.url));
    const file = path.join(ws.transcripts, 'm01', 'proof01.json');
    const transcript = JSON.parse(fs.readFileSync(file, 'utf8'));
    const image = { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' };
    transcript.messages.push({
      role: 'user',
      content: [
        { type: 'text', text: 'my drawing' },
        { type: 'image', source: image },
      ],
    });
    writeJson(file, transcript);
    const result = await run(ws);
    assert.equal(result.code, 0, result.stderr);
    const parts = fake.requests[0]!.body.messages[0].content;
    assert.deepEqual(parts.at(-2), { type: 'text', text: '[image 1]' });
    assert.deepEqual(parts.at(-1), {
      type: 'image_url',
      image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' },
    });
  });
});

describe("an OpenAI judge's resets: what the pacing waits for", () => {
  /** m01/proof01..05 judged by `primary` (then `fallback`, if any) at --concurrency 1, on a jump clock. */
  async function pacedRun(t: TestContext, primary: FakeOpenAi, fallback?: FakeOpenAi) {
    const clock = jumpClock();
    for (const fake of [primary, fallback]) {
      if (fake) clock.waitFor(() => fake.settled());
    }
    const fallbacks = fallback ? [openAiEntry(fallback.url, { model: 'gpt-fallback' })] : [];
    const ws = makeWorkspace({
      models: 1,
      tasks: ['proof01', 'proof02', 'proof03', 'proof04', 'proof05'],
      modelsJson: {
        models: [{ name: 'm01', provider: 'local' }],
        judge: openAiEntry(primary.url),
        fallback_judges: fallbacks,
      },
    });
    t.after(() => ws.remove());
    addTaskFiles(ws, ['proof04', 'proof05']);
    const result = await run(ws, ['--concurrency', '1'], { clock });
    return { ws, result, clock };
  }

  for (const reset of ['24h0m0s', '1765000000']) {
    test(`none left until a reset ${reset} away (a daily limit, a Unix time read as seconds): not waited for, the fallback judges`, async (t) => {
      const told = { limit: 1, remaining: 0, reset };
      const headers = {
        'x-ratelimit-limit-requests': '1',
        'x-ratelimit-remaining-requests': '0',
        'x-ratelimit-reset-requests': reset,
      };
      // The first answer says none is left; then the server refuses, as the API does.
      const primary = await startOpenAi(t, {
        rateLimit: { requests: told, tokens: { limit: 1e6, remaining: 1e6, reset: '1s' } },
        responder: (_req, index) =>
          index === 0
            ? undefined
            : { kind: 'error', status: 429, type: 'requests', message: 'Rate limit', headers },
      });
      const fallback = await startOpenAi(t);
      const { ws, result, clock } = await pacedRun(t, primary, fallback);
      assert.equal(result.code, 0, result.stderr);
      assert.equal(csvRows(ws.output).length, 5);
      const judges = (readLog(ws.log) as any[]).map((entry) => entry.judge);
      assert.deepEqual(judges, ['gpt-test', ...Array(4).fill('gpt-fallback')]);
      assert.ok(clock.jumpedMs() < 60_000, `waited ${clock.jumpedMs()} ms on the run's clock`);
    });
  }

  test('none left until a reset of 0s: all of it is back at once, no wait', async (t) => {
    const told = { limit: 1, remaining: 0, reset: '0s' };
    const primary = await startOpenAi(t, {
      rateLimit: { requests: told, tokens: { limit: 1e6, remaining: 1e6, reset: '1s' } },
    });
    const { ws, result, clock } = await pacedRun(t, primary);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(csvRows(ws.output).length, 5);
    assert.equal(primary.requests.length, 5);
    assert.ok(clock.jumpedMs() < 1000, `waited ${clock.jumpedMs()} ms on the run's clock`);
  });
});

describe('an OpenAI judge: what stops the run, in one line', () => {
  test('a missing key names its variable before any call (exit 2)', async (t) => {
    const fake = await startOpenAi(t);
    const ws = workspace(t, openAiEntry(fake.url));
    const result = await run(ws, [], { env: openAiEnv({ OPENAI_TEST_KEY: undefined }) });
    assert.equal(result.code, 2);
    assert.match(result.stderr, /environment variable OPENAI_TEST_KEY is not set/);
    assert.equal(fake.requests.length, 0);
  });

  test('a 401 stops the run in one line naming the variable, never the key', async (t) => {
    const fake = await startOpenAi(t, { key: 'sk-the-right-one' });
    const ws = workspace(t, openAiEntry(fake.url));
    const result = await run(ws);
    assert.equal(result.code, 2, result.stderr);
    const lines = result.stderr.split('\n').filter((line) => /HTTP 401/.test(line));
    assert.equal(lines.length, 1, result.stderr);
    assert.match(lines[0]!, /HTTP 401 invalid_request_error: Incorrect API key provided/);
    assert.match(lines[0]!, /check the key in OPENAI_TEST_KEY/);
    assert.match(lines[0]!, /request req_oai_1/);
    assert.ok(!result.stderr.includes(KEY));
    assert.equal(fake.requests.length, 1);
  });

  test('a 404 for an unknown model names the model and the base URL', async (t) => {
    const fake = await startOpenAi(t, { models: ['gpt-real'] });
    const ws = workspace(t, openAiEntry(fake.url, { model: 'gpt-typo' }));
    const result = await run(ws);
    assert.equal(result.code, 2, result.stderr);
    assert.match(
      result.stderr,
      /HTTP 404 invalid_request_error: The model `gpt-typo` does not exist/,
    );
    const where = `check the model id gpt-typo, from "model" in models.json, and the server at ${fake.url} (from "base_url" in models.json)`;
    assert.ok(result.stderr.includes(where), result.stderr);
  });

  test('OPENAI_BASE_URL is the server when the entry names none; a 404 says so', async (t) => {
    const fake = await startOpenAi(t, { models: ['gpt-real'] });
    const ws = workspace(t, openAiEntry(fake.url, { base_url: undefined, model: 'gpt-typo' }));
    const result = await run(ws, [], { env: openAiEnv({ OPENAI_BASE_URL: fake.url }) });
    assert.equal(result.code, 2, result.stderr);
    assert.equal(fake.requests.length, 1);
    assert.ok(
      result.stderr.includes(`the server at ${fake.url} (from OPENAI_BASE_URL)`),
      result.stderr,
    );
  });
});

describe('a keyless local server (Ollama, vLLM)', () => {
  test('an entry without api_key_env needs no key and sends no Authorization header', async (t) => {
    const fake = await startOpenAi(t);
    const entry = openAiEntry(fake.url, {
      api_key_env: undefined,
      family: 'llama',
      model: 'llama3.3:70b',
    });
    const ws = workspace(t, entry);
    const result = await run(ws, [], { env: openAiEnv({ OPENAI_TEST_KEY: undefined }) });
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.requests[0]!.headers.authorization, undefined);
    const [line] = readLog(ws.log) as any[];
    assert.equal(line.answers[0].family, 'llama');
  });

  test('a 401 from a server that wants a key after all says to name one', async (t) => {
    const fake = await startOpenAi(t, { key: 'sk-local' });
    const ws = workspace(t, openAiEntry(fake.url, { api_key_env: undefined }));
    const result = await run(ws);
    assert.equal(result.code, 2);
    assert.match(
      result.stderr,
      /HTTP 401 .*the server wants a key: name its variable in "api_key_env"/,
    );
  });

  test('without api_key_env and without a server address, the OpenAI API is refused before any call', async (t) => {
    const ws = workspace(
      t,
      openAiEntry('http://127.0.0.1:9/v1', { api_key_env: undefined, base_url: undefined }),
    );
    const result = await run(ws);
    assert.equal(result.code, 2);
    assert.match(result.stderr, /has no "api_key_env": the OpenAI API needs a key/);
  });
});

describe('the fallback chain across providers', () => {
  test('an Anthropic primary overloaded (529) through its retries falls back to an OpenAI judge; the audit line names each provider and family', async (t) => {
    const openai = await startOpenAi(t);
    const overloaded = {
      kind: 'error' as const,
      status: 529,
      type: 'overloaded_error',
      message: 'Overloaded',
    };
    const base = await setup(
      t,
      { clock: true, responder: () => overloaded },
      {
        models: 1,
        tasks: ['proof01'],
        judge: judgeEntry('claude-primary', {
          retry: { max_retries: 2, budget_s: 5, base_delay_s: 0.05 },
        }),
        fallbacks: [openAiEntry(openai.url, { family: 'llama', model: 'llama3.3:70b' }) as never],
      },
    );
    (base.clock as JumpClock).waitFor(() => openai.settled());
    const result = await base.run([], { env: openAiEnv() });
    assert.equal(result.code, 0, result.stderr);
    assert.equal(base.fake.requests.length, 3, 'the primary and its 2 retries');
    assert.equal(openai.requests.length, 1);
    assert.match(result.stderr, /scored by fallback judge llama3\.3:70b after .*HTTP 529/);

    const [entry] = readLog(base.ws.log) as any[];
    assert.equal(entry.judge, 'llama3.3:70b');
    assert.deepEqual(
      entry.attempts.map((attempt: any) => [attempt.judge, attempt.status]),
      [['claude-primary', 529]],
    );
    assert.deepEqual(
      entry.answers.map((answer: any) => [answer.judge, answer.provider, answer.family]),
      [['llama3.3:70b', 'openai', 'llama']],
    );
  });

  test('an OpenAI primary that cannot be reached falls back to an Anthropic judge, family anthropic by default', async (t) => {
    const base = await setup(
      t,
      {},
      {
        models: 1,
        tasks: ['proof01'],
        judge: openAiEntry('http://127.0.0.1:9/v1') as never,
        fallbacks: [judgeEntry('claude-fallback')],
      },
    );
    const result = await base.run([], { env: openAiEnv() });
    assert.equal(result.code, 0, result.stderr);
    const [entry] = readLog(base.ws.log) as any[];
    assert.equal(entry.judge, 'claude-fallback');
    assert.deepEqual(
      entry.attempts.map((attempt: any) => attempt.judge),
      ['gpt-test'],
    );
    assert.match(entry.attempts[0].message, /connection failed/);
    assert.deepEqual(
      entry.answers.map((answer: any) => [answer.provider, answer.family]),
      [['anthropic', 'anthropic']],
    );
  });
});

describe('callJudge on an OpenAI judge: one request through the openai SDK', () => {
  const judgeAt = async (fake: FakeOpenAi, overrides: Record<string, unknown> = {}) => {
    const models = { judge: openAiEntry(fake.url, overrides) as never, fallback_judges: [] };
    const [judge] = await createJudges(models, { OPENAI_TEST_KEY: KEY });
    return judge!;
  };
  const call = (judge: Awaited<ReturnType<typeof judgeAt>>) =>
    callJudge(judge, buildJudgeRequest(judge, 'PROMPT', { rubric }));

  test("the rate-limit headers are read as the pacing reads Anthropic's: requests, and tokens as the input bucket", async (t) => {
    const rateLimit = {
      requests: { limit: 500, remaining: 499, reset: '120ms' },
      tokens: { limit: 30000, remaining: 29000, reset: '6m0s' },
    };
    const fake = await startOpenAi(t, { rateLimit });
    const judge = await judgeAt(fake);
    const before = Date.now();
    const answer = await call(judge);
    const after = Date.now();
    const requests = answer.rateLimit!.requests!;
    const tokens = answer.rateLimit!['input-tokens']!;
    assert.deepEqual([requests.limit, requests.remaining], [500, 499]);
    assert.deepEqual([tokens.limit, tokens.remaining], [30000, 29000]);
    assert.ok(requests.resetAt >= before + 120 && requests.resetAt <= after + 120);
    assert.ok(tokens.resetAt >= before + 360_000 && tokens.resetAt <= after + 360_000);
    assert.equal(answer.requestId, 'req_oai_1');
  });

  test('a 429 carries its retry-after and buckets; a 429 for a spent quota is a spend limit; a 500 a provider failure', async (t) => {
    const fake = await startOpenAi(t, {
      rateLimit: {
        requests: { limit: 10, remaining: 0, reset: '2s' },
        tokens: { limit: 100, remaining: 50, reset: '1s' },
      },
    });
    fake.enqueue(
      {
        kind: 'error',
        status: 429,
        type: 'requests',
        code: 'rate_limit_exceeded',
        message: 'Rate limit reached',
        headers: { 'retry-after': '2' },
      },
      {
        kind: 'error',
        status: 429,
        type: 'insufficient_quota',
        code: 'insufficient_quota',
        message: 'You exceeded your current quota',
      },
      { kind: 'error', status: 500, type: 'server_error', message: 'The server had an error' },
    );
    const judge = await judgeAt(fake);
    await assert.rejects(call(judge), (error: any) => {
      assert.equal(error.name, 'EvalProviderError');
      assert.equal(error.status, 429);
      assert.equal(error.retryAfterMs, 2000);
      assert.equal(error.spendLimit, false);
      assert.equal(error.requestId, 'req_oai_1');
      assert.equal(error.rateLimit.requests.remaining, 0);
      return true;
    });
    await assert.rejects(call(judge), { name: 'EvalProviderError', status: 429, spendLimit: true });
    await assert.rejects(call(judge), { name: 'EvalProviderError', status: 500 });
    assert.equal(fake.requests.length, 3, 'maxRetries 0: the SDK never resends');
  });

  test('a 400 rejecting response_format from a structured_output judge → EvalUnsupportedError naming the setting; a 422 an input error', async (t) => {
    const fake = await startOpenAi(t);
    fake.enqueue(
      {
        kind: 'error',
        status: 400,
        type: 'invalid_request_error',
        message:
          "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.",
      },
      { kind: 'error', status: 422, type: 'invalid_request_error', message: 'unprocessable' },
    );
    const judge = await judgeAt(fake);
    await assert.rejects(call(judge), {
      name: 'EvalUnsupportedError',
      message: /rejects "structured_output": true \(response_format json_schema\)/,
    });
    await assert.rejects(call(judge), { name: 'EvalInputError' });
  });

  test('a hang past timeout_s → EvalTimeoutError after one request; a 200 that is not a completion → EvalJudgeResponseError', async (t) => {
    const fake = await startOpenAi(t);
    fake.enqueue({ kind: 'hang' });
    // 1 s, not 0.5: the request must reach the fake before the deadline, however loaded the machine
    const judge = await judgeAt(fake, { timeout_s: 1 });
    await assert.rejects(call(judge), { name: 'EvalTimeoutError' });
    assert.equal(fake.requests.length, 1);

    fake.enqueue({ kind: 'raw', status: 200, body: '{"unexpected": true}' });
    await assert.rejects(call(judge), {
      name: 'EvalJudgeResponseError',
      rawText: '{"unexpected": true}',
      message: /not a chat completion/,
    });
  });

  test('reasoning a server returns is kept as thinking, never parsed; a number temperature is sent', async (t) => {
    const fake = await startOpenAi(t);
    fake.enqueue({ reasoning: 'Let me weigh the scaffolding first.' });
    const judge = await judgeAt(fake, { temperature: 0 });
    const answer = await call(judge);
    assert.equal(answer.thinking, 'Let me weigh the scaffolding first.');
    assert.equal(fake.requests[0]!.body.temperature, 0);
  });
});

describe('the OpenAI entry and its helpers', () => {
  test("parseDuration reads OpenAI's resets", () => {
    assert.equal(parseDuration('1s'), 1000);
    assert.equal(parseDuration('6m0s'), 360_000);
    assert.equal(parseDuration('20ms'), 20);
    assert.equal(parseDuration('1h2m3.5s'), 3_723_500);
    assert.equal(parseDuration('2'), 2000);
    for (const bad of ['', 'soon', '1d', '-1s']) {
      assert.ok(Number.isNaN(parseDuration(bad)), bad);
    }
  });

  const refused: [string, Record<string, unknown>, RegExp][] = [
    [
      'reasoning_effort in an Anthropic entry',
      { ...judgeEntry('claude-x'), reasoning_effort: 'low' },
      /reasoning_effort.*is for "provider": "openai" judges only/,
    ],
    [
      'effort in an OpenAI entry',
      openAiEntry('http://127.0.0.1:9/v1', { effort: 'low' }),
      /effort.*is for "provider": "anthropic" judges only/,
    ],
    [
      'an Anthropic entry without api_key_env',
      { ...judgeEntry('claude-x'), api_key_env: undefined },
      /api_key_env.*is required/,
    ],
    [
      'an unknown provider',
      { ...judgeEntry('claude-x'), provider: 'mistral' },
      /must be "anthropic", "openai" or "mock"/,
    ],
    [
      'a base_url that is not http(s)',
      openAiEntry('ftp://example.test/v1'),
      /base_url.*must be an http\(s\) URL/,
    ],
  ];
  for (const [label, entry, message] of refused) {
    test(`${label} is refused before any call (exit 2)`, async (t) => {
      const ws = workspace(t, entry);
      const result = await run(ws);
      assert.equal(result.code, 2, result.stderr);
      assert.match(result.stderr, message);
    });
  }
});
