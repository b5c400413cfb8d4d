// Judge stage: the judges and their keys, the request, one call and how its failures are classified, the failure
// policy (`decide`), the retry layer on one judge, and the fallback chain across judges.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { createServer } from 'node:http';
import type { ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, test } from 'node:test';
import type { TestContext } from 'node:test';
import {
  DEAD_BASE_URL,
  RUBRIC_FILE,
  TEST_KEY,
  answerJson,
  csvRows,
  goodScores,
  jumpClock,
  judgeConfig,
  judgeEntry,
  keyEnv,
  mentioning,
  readLog,
  rowCount,
  rubricFile,
  setup,
  startFake,
  tagOf,
  assertAnswerSchema,
  allowedScoresOf,
} from './helpers.ts';
import type { FakeOptions, RecordedRequest, Reply } from '../fakes/anthropic.ts';
import type {
  Clock,
  Decision,
  EvalError as EvalErrorType,
  Judge,
  JudgeConfig,
  TranscriptImage,
} from '../run-judge.ts';

// Destructured, not imported by name: a renamed export then fails its own tests, not the whole file.
const {
  EvalConfigurationError,
  EvalDependencyError,
  EvalError,
  EvalInputError,
  EvalInterruptedError,
  EvalJudgeResponseError,
  EvalJudgesExhaustedError,
  EvalProviderError,
  EvalTimeoutError,
  EvalUnsupportedError,
  JudgeChain,
  buildJudgeRequest,
  callJudge,
  callJudgeWithRetries,
  createJudges,
  decide,
  loadRubric,
  loadSdk,
  pairKey,
  verdictFromAnswer,
} = await import('../run-judge.ts');
const { readAuditLog } = await import('../report/inputs.ts');
// The SDK as run-judge loads it (its CommonJS build), so `instanceof` compares the same classes.
const sdk = loadSdk();

// A safety net only (every call here passes its URL in the env it hands over): a client that ignored that env would
// find a closed loopback port, never the real API.
process.env.ANTHROPIC_BASE_URL = DEAD_BASE_URL;

const rubric = loadRubric(RUBRIC_FILE);

// ---- Local helpers ---------------------------------------------------------------------------------------------------

/** The judges of `configs` (primary first), whose requests go to `baseUrl`; `clock` (default the real one) times their waits. */
const judgesAt = (
  baseUrl: string,
  configs: JudgeConfig[],
  env = keyEnv(),
  fallback = true,
  clock?: Clock,
) =>
  createJudges(
    { judge: configs[0]!, fallback_judges: configs.slice(1) },
    { ...env, ANTHROPIC_BASE_URL: baseUrl },
    fallback,
    clock,
  );
/** One judge (judgeConfig with `overrides`) whose requests go to `baseUrl`. */
const judgeAt = async (
  baseUrl: string,
  overrides: Partial<JudgeConfig> = {},
  env = keyEnv(),
  clock?: Clock,
) => (await judgesAt(baseUrl, [judgeConfig(overrides)], env, true, clock))[0]!;
const callWith = (judge: Judge, prompt = 'PROMPT-TEXT') =>
  callJudge(judge, buildJudgeRequest(judge, prompt, { rubric }));
const retriedCall = (judge: Judge, prompt = 'PROMPT-TEXT') =>
  callJudgeWithRetries(judge, buildJudgeRequest(judge, prompt, { rubric }));

const modelOf = (req: RecordedRequest) => req.body?.model as string;
/**
 * For a suite whose deadline test waits out timeout_s (1 s) in real time: two tests at a time, so the tests after it run
 * meanwhile (each on its own fake, judges and clock).
 */
const TWO_AT_A_TIME = { concurrency: 2 };
const apiError = (
  status: number,
  type: string,
  message = `API-MESSAGE-${status}`,
  extra: object = {},
): Reply => ({
  kind: 'error',
  status,
  type,
  message,
  ...extra,
});
const rateLimited = (retryAfter?: string, extra: object = {}): Reply =>
  apiError(429, 'rate_limit_error', 'Number of requests has exceeded your per-minute rate limit', {
    ...(retryAfter === undefined ? {} : { headers: { 'retry-after': retryAfter } }),
    ...extra,
  });
const spendLimited = rateLimited('0.01', {
  message: 'You have reached your specified API usage limits',
  errorCode: 'enforced_spend_limit_reached',
});

/** An EvalProviderError as the call classifies it: an HTTP status and what the headers said. */
const providerError = (
  status: number,
  fields: { retryAfterMs?: number; spendLimit?: boolean } = {},
) => Object.assign(new EvalProviderError(`HTTP ${status}`), { status, ...fields });

/** A predicate for assert.rejects: the error is of the class named, and its fields match. */
const failure =
  (name: string, fields: Record<string, unknown> = {}, check: (error: any) => void = () => {}) =>
  (error: any) => {
    assert.equal(error?.name, name, `${error?.name}: ${error?.message}`);
    for (const [key, value] of Object.entries(fields)) {
      if (value instanceof RegExp) assert.match(error[key], value, key);
      else assert.deepEqual(error[key], value, key);
    }
    check(error);
    return true;
  };

/** A loopback server scripted per request, for what the fake cannot do: cut a body off, or stall mid-body. */
async function startRawServer(t: TestContext, handle: (body: any, res: ServerResponse) => void) {
  const requests: any[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || 'null');
      requests.push(body);
      handle(body, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(async () => {
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeAllConnections();
    await closed;
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests };
}

/** A complete Messages API answer (JSON text) holding `text`. */
const messageJson = (model: string, text = answerJson()) =>
  JSON.stringify({
    id: 'msg_raw_1',
    type: 'message',
    role: 'assistant',
    model,
    content: [{ type: 'text', text }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: 10, output_tokens: 5 },
  });

/** Sends the headers and the first half of a good answer (with its full content-length), then drops the connection. */
function cutOff(body: any, res: ServerResponse): void {
  const full = messageJson(body.model);
  const headers = {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(full)),
  };
  res.writeHead(200, { ...headers, 'request-id': 'req_raw_cut' });
  res.write(full.slice(0, Math.floor(full.length / 2)));
  setTimeout(() => res.socket?.destroy(), 20);
}

// ---- The judges: keys, temperature, clients ---------------------------------------------------------------------------

describe('createJudges: each judge checked and given its own client', () => {
  test('primary first, then each fallback; model_env replaces the model; each client gets its own key and settings', async () => {
    const configs = [
      judgeConfig({ model: 'base-model', model_env: 'RJ_JUDGE_MODEL', timeout_s: 1.2345 }),
      judgeConfig({ model: 'fallback-model', api_key_env: 'RJ_OTHER_KEY', timeout_s: undefined }),
    ];
    const env = keyEnv({ RJ_JUDGE_MODEL: 'env-model', RJ_OTHER_KEY: 'sk-other' });
    const judges = await judgesAt('http://127.0.0.1:1/base', configs, env);
    assert.deepEqual(
      judges.map(({ model, client }) => [
        model,
        client!.apiKey,
        client!.baseURL,
        client!.maxRetries,
        client!.timeout,
      ]),
      [
        ['env-model', TEST_KEY, 'http://127.0.0.1:1/base', 0, 1235], // whole milliseconds, as the SDK requires
        ['fallback-model', 'sk-other', 'http://127.0.0.1:1/base', 0, 300_000], // the default timeout, always set
      ],
    );
    assert.notEqual(judges[0]!.gate, judges[1]!.gate, 'each judge is paced on its own');
  });

  test('a blank model_env variable keeps the configured model', async () => {
    const [judge] = await judgesAt(
      DEAD_BASE_URL,
      [judgeConfig({ model_env: 'RJ_JUDGE_MODEL' })],
      keyEnv({ RJ_JUDGE_MODEL: ' ' }),
    );
    assert.equal(judge!.model, 'claude-test-judge');
  });

  test('fallback = false (--no-fallback) gives the primary judge only', async () => {
    const configs = [judgeConfig({ model: 'primary' }), judgeConfig({ model: 'fallback' })];
    assert.deepEqual(
      (await judgesAt(DEAD_BASE_URL, configs, keyEnv(), false)).map((judge) => judge.model),
      ['primary'],
    );
  });

  const missingKeys: [string, JudgeConfig[], string][] = [
    ['the primary judge', [judgeConfig({ api_key_env: 'RJ_MISSING_KEY' })], 'claude-test-judge'],
    [
      'a fallback judge',
      [judgeConfig(), judgeConfig({ model: 'fb-judge', api_key_env: 'RJ_MISSING_KEY' })],
      'fb-judge',
    ],
  ];
  for (const [which, configs, judge] of missingKeys) {
    test(`a missing key for ${which} → EvalConfigurationError naming the variable and the judge`, async () => {
      await assert.rejects(judgesAt(DEAD_BASE_URL, configs), {
        name: 'EvalConfigurationError',
        message: mentioning('RJ_MISSING_KEY', `judge ${judge}`, 'not set'),
      });
    });
  }

  const temperatures: [string, JudgeConfig[], string][] = [
    ['0 on the primary judge', [judgeConfig({ temperature: 0 })], 'claude-test-judge'],
    [
      '0.7 on a fallback judge',
      [judgeConfig(), judgeConfig({ model: 'fb-judge', temperature: 0.7 })],
      'fb-judge',
    ],
  ];
  for (const [which, configs, judge] of temperatures) {
    test(`a numeric temperature (${which}) is refused, naming the judge and saying why`, async () => {
      await assert.rejects(judgesAt(DEAD_BASE_URL, configs), {
        name: 'EvalConfigurationError',
        message: mentioning(`judge ${judge}`, '"temperature"', 'HTTP 400', '"temperature": null'),
      });
    });
  }

  test('temperature null or absent is accepted', async () => {
    const absent = judgeConfig();
    delete absent.temperature;
    assert.equal(
      (await judgesAt(DEAD_BASE_URL, [judgeConfig({ temperature: null }), absent])).length,
      2,
    );
  });

  const badKeys = [
    'sk-ant-SECRETPART\nline-two',
    'sk-ant-SECRETPART with-space',
    'sk-ant-SECRETPART\r\n',
    ' sk-ant-SECRETPART',
    'sk-ant-SECRETPART\tx',
  ];
  for (const key of badKeys) {
    test(`key ${JSON.stringify(key)} is refused naming the variable, never the value; nothing is sent`, async (t) => {
      const fake = await startFake(t);
      await assert.rejects(
        judgesAt(fake.url, [judgeConfig()], { RJ_TEST_KEY: key }),
        failure(
          'EvalConfigurationError',
          { message: mentioning('RJ_TEST_KEY', 'line breaks') },
          (error) => {
            assert.doesNotMatch(error.message, /SECRETPART/);
            assert.doesNotMatch(String(error.stack), /SECRETPART/);
          },
        ),
      );
      assert.equal(fake.requests.length, 0);
    });
  }

  test('a printable key with punctuation is accepted (the control case)', async () => {
    const [judge] = await judgesAt(DEAD_BASE_URL, [judgeConfig()], {
      RJ_TEST_KEY: 'sk-ant-api03-AbC_d-9~!',
    });
    assert.equal(judge!.client!.apiKey, 'sk-ant-api03-AbC_d-9~!');
  });
});

// ---- The request -----------------------------------------------------------------------------------------------------

/** The shipped rubric, but proof_scaffolding allows 0, 2 or 4 and integrity_boundary only 2: enums follow the rubric. */
function rubricWithGaps(t: TestContext) {
  const file = rubricFile(t, (json) => {
    json.dimensions.find((d) => d.name === 'proof_scaffolding')!.scores = {
      0: 'none',
      2: 'some',
      4: 'excellent',
    };
    json.dimensions.find((d) => d.name === 'integrity_boundary')!.scores = { 2: 'the only score' };
  });
  const gapped = loadRubric(file);
  const allowed = allowedScoresOf(gapped);
  return { rubric: gapped, allowed };
}

const PNG = { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } as const;
const GIF = { type: 'base64', media_type: 'image/gif', data: 'R0lGODlhAQABAIAAAP==' } as const;
const IMAGES: TranscriptImage[] = [
  { label: '[image 1]', file: '/x/photo.png', source: PNG },
  { label: '[image 2]', source: GIF },
];
const IMAGE_CONTENT = [
  { type: 'text', text: 'PROMPT-TEXT' },
  { type: 'text', text: '[image 1]' },
  { type: 'image', source: PNG },
  { type: 'text', text: '[image 2]' },
  { type: 'image', source: GIF },
];

describe('buildJudgeRequest: what is sent', () => {
  const judge = (overrides: Partial<JudgeConfig> = {}) => ({
    model: 'the-model',
    config: judgeConfig(overrides),
  });

  test('the model, max_tokens and the prompt as one user message; no sampling parameter, no output_config', () => {
    assert.deepEqual(buildJudgeRequest(judge({ max_tokens: 777 }), 'PROMPT-TEXT', { rubric }), {
      model: 'the-model',
      max_tokens: 777,
      messages: [{ role: 'user', content: 'PROMPT-TEXT' }],
    });
  });

  test('images: the prompt, then each label and its image block, in order', () => {
    const request = buildJudgeRequest(judge(), 'PROMPT-TEXT', { images: IMAGES });
    assert.deepEqual(request.messages, [{ role: 'user', content: IMAGE_CONTENT }]);
  });

  test('structured_output: output_config.format is a json_schema derived from the rubric', (t) => {
    const { rubric: gapped, allowed } = rubricWithGaps(t);
    const request = buildJudgeRequest(judge({ structured_output: true }), 'p', {
      rubric: gapped,
    }) as any;
    assert.equal(request.output_config.format.type, 'json_schema');
    assertAnswerSchema(request.output_config.format.schema, allowed);
  });

  test('"structured_output": false sends no output_config', () => {
    assert.equal(
      'output_config' in buildJudgeRequest(judge({ structured_output: false }), 'p', { rubric }),
      false,
    );
  });
});

// ---- One call --------------------------------------------------------------------------------------------------------

describe('callJudge: one request through the SDK', () => {
  test('sends the model after model_env, max_tokens and the prompt, no sampling keys; returns the raw answer', async (t) => {
    const fake = await startFake(t);
    const env = keyEnv({ RJ_JUDGE_MODEL: 'env-model' });
    const judge = await judgeAt(
      fake.url,
      { model: 'base-model', model_env: 'RJ_JUDGE_MODEL', max_tokens: 777 },
      env,
    );
    const answer = await callWith(judge);
    assert.equal(fake.requests.length, 1);
    const { body, headers } = fake.requests[0]!;
    assert.deepEqual(body, {
      model: 'env-model',
      max_tokens: 777,
      messages: [{ role: 'user', content: 'PROMPT-TEXT' }],
    });
    assert.equal(headers.authorization, `Bearer ${TEST_KEY}`, 'the key from api_key_env');
    assert.deepEqual(
      { ...answer, latencyMs: typeof answer.latencyMs },
      {
        judge: 'env-model',
        model: 'env-model',
        text: fake.validAnswer(),
        thinking: undefined,
        redactedThinking: undefined,
        stopReason: 'end_turn',
        requestId: 'req_fake_1',
        usage: { input_tokens: 100, output_tokens: 20 },
        rawUsage: { input_tokens: 100, output_tokens: 20 },
        latencyMs: 'number',
        rateLimit: undefined,
      },
    );
  });

  test('an absent temperature sends no temperature either', async (t) => {
    const fake = await startFake(t);
    const config = judgeConfig();
    delete config.temperature;
    const [judge] = await judgesAt(fake.url, [config]);
    await callWith(judge!);
    for (const key of ['temperature', 'top_p', 'top_k'])
      assert.ok(!(key in fake.requests[0]!.body), `${key} was sent`);
  });

  test('images reach the API as the prompt, then each label and image block, in order', async (t) => {
    const fake = await startFake(t);
    const judge = await judgeAt(fake.url, { media: ['text', 'image'] });
    await callJudge(judge, buildJudgeRequest(judge, 'PROMPT-TEXT', { images: IMAGES }));
    assert.deepEqual(fake.requests[0]!.body.messages, [{ role: 'user', content: IMAGE_CONTENT }]);
  });
});

describe('callJudge: each failure classified', () => {
  const stopping: [number, string, string, string][] = [
    [400, 'invalid_request_error', 'EvalInputError', ''],
    [413, 'request_too_large', 'EvalInputError', ''],
    [422, 'invalid_request_error', 'EvalInputError', ''],
    [401, 'authentication_error', 'EvalConfigurationError', '); check the key in RJ_TEST_KEY'],
    [402, 'billing_error', 'EvalConfigurationError', '); check the billing of the account'],
    [
      403,
      'permission_error',
      'EvalConfigurationError',
      '; check that the key in RJ_TEST_KEY may use claude-test-judge',
    ],
    [404, 'not_found_error', 'EvalConfigurationError', '); check ANTHROPIC_BASE_URL'], // a 404 not about a model
  ];
  for (const [status, type, name, advice] of stopping) {
    test(`HTTP ${status} → ${name} with the API's message and type, not the JSON body or the key`, async (t) => {
      const fake = await startFake(t);
      fake.enqueue(apiError(status, type));
      const judge = await judgeAt(fake.url);
      await assert.rejects(
        callWith(judge),
        failure(name, { judge: 'claude-test-judge' }, (error) => {
          assert.match(
            error.message,
            mentioning(
              `judge claude-test-judge: HTTP ${status} ${type}: API-MESSAGE-${status}`,
              advice,
            ),
          );
          assert.doesNotMatch(error.message, /\{"type":"error"/);
          assert.ok(!error.message.includes(TEST_KEY), 'the key is never printed');
          assert.ok(error.cause instanceof sdk.APIError, 'the cause is the SDK error');
        }),
      );
      assert.equal(fake.requests.length, 1);
    });
  }

  const modelNotFound: [string, Partial<JudgeConfig>, NodeJS.ProcessEnv, string][] = [
    ['models.json', {}, keyEnv(), 'claude-test-judge, from "model" in models.json'],
    [
      'model_env',
      { model_env: 'RJ_JUDGE_MODEL' },
      keyEnv({ RJ_JUDGE_MODEL: 'claude-typo' }),
      'claude-typo, from the variable RJ_JUDGE_MODEL',
    ],
  ];
  test('HTTP 404 not naming a model, the id from model_env: the advice names the variable first', async (t) => {
    const fake = await startFake(t);
    fake.enqueue(apiError(404, 'not_found_error', 'Not Found'));
    const env = keyEnv({ RJ_JUDGE_MODEL: 'claude-typo' });
    const judge = await judgeAt(fake.url, { model_env: 'RJ_JUDGE_MODEL' }, env);
    await assert.rejects(callWith(judge), {
      name: 'EvalConfigurationError',
      message:
        /; check the model id claude-typo, from the variable RJ_JUDGE_MODEL, and ANTHROPIC_BASE_URL if it is set$/,
    });
  });

  for (const [source, config, env, advice] of modelNotFound) {
    test(`HTTP 404 naming a model, its id from ${source}: the advice says where the id came from`, async (t) => {
      const fake = await startFake(t);
      fake.enqueue(apiError(404, 'not_found_error', 'model: not found'));
      const judge = await judgeAt(fake.url, config, env);
      await assert.rejects(callWith(judge), {
        message: new RegExp(`; check the model id ${advice}$`),
      });
    });
  }

  const provider: [number, string][] = [
    [408, 'timeout_error'],
    [409, 'conflict_error'],
    [429, 'rate_limit_error'],
    [500, 'api_error'],
    [529, 'overloaded_error'],
  ];
  for (const [status, type] of provider) {
    test(`HTTP ${status} → EvalProviderError with status, request id and the SDK cause; the SDK does not resend`, async (t) => {
      const fake = await startFake(t);
      fake.enqueue(apiError(status, type));
      const judge = await judgeAt(fake.url);
      await assert.rejects(
        callWith(judge),
        failure(
          'EvalProviderError',
          { status, requestId: 'req_fake_1', spendLimit: false },
          (error) => {
            assert.match(
              error.message,
              mentioning(`HTTP ${status} ${type}: API-MESSAGE-${status}`, 'req_fake_1'),
            );
            assert.doesNotMatch(error.message, /\{"type":"error"/);
            assert.ok(
              error.cause instanceof sdk.APIError && error.cause.status === status,
              'the cause is the SDK error',
            );
          },
        ),
      );
      assert.equal(fake.requests.length, 1, 'maxRetries 0: no resend');
    });
  }

  test('a 429 for a spend limit is marked spendLimit', async (t) => {
    const fake = await startFake(t);
    fake.enqueue(spendLimited);
    await assert.rejects(
      callWith(await judgeAt(fake.url)),
      failure('EvalProviderError', { status: 429, spendLimit: true }),
    );
  });

  test('a refused connection → EvalProviderError without a status (a next judge may help)', async (t) => {
    const fake = await startFake(t);
    const judge = await judgeAt(fake.url);
    await fake.close();
    await assert.rejects(
      callWith(judge),
      failure('EvalProviderError', {
        status: undefined,
        message: /judge claude-test-judge: connection failed/,
      }),
    );
  });

  test('a hang past timeout_s → EvalTimeoutError after exactly one request (never resubmitted)', async (t) => {
    const fake = await startFake(t);
    fake.enqueue({ kind: 'hang' });
    // Long enough for the request to reach the fake on a loaded machine (0.1 s was not: the deadline came first).
    const judge = await judgeAt(fake.url, { timeout_s: 1 });
    await assert.rejects(
      callWith(judge),
      failure(
        'EvalTimeoutError',
        { message: /judge claude-test-judge: request timed out/ },
        (error) => {
          // The SDK's own timeout or run-judge's deadline (which also covers the body) fires first: either is the SDK's.
          assert.ok(
            error.cause instanceof sdk.APIConnectionTimeoutError ||
              error.cause instanceof sdk.APIUserAbortError,
          );
        },
      ),
    );
    assert.equal(fake.requests.length, 1);
  });

  test('a 200 whose body is not a message → EvalJudgeResponseError keeping the raw body', async (t) => {
    const fake = await startFake(t);
    fake.enqueue({ kind: 'raw', status: 200, body: '{"unexpected": true}' });
    await assert.rejects(
      callWith(await judgeAt(fake.url)),
      failure('EvalJudgeResponseError', {
        rawText: '{"unexpected": true}',
        message: /not a message/,
      }),
    );
  });

  const schemaRejected = apiError(
    400,
    'invalid_request_error',
    'output_config.format: json_schema is not supported',
  );
  test('a 400 rejecting output_config from a structured_output judge → EvalUnsupportedError naming the setting', async (t) => {
    const fake = await startFake(t);
    fake.enqueue(schemaRejected);
    const judge = await judgeAt(fake.url, { structured_output: true });
    await assert.rejects(callJudge(judge, buildJudgeRequest(judge, 'p', { rubric })), {
      name: 'EvalUnsupportedError',
      message: mentioning(
        'judge claude-test-judge',
        '"structured_output": true',
        'json_schema is not supported',
      ),
    });
  });

  const inputErrors: [string, Partial<JudgeConfig>, Reply][] = [
    ['the same 400 from a judge without structured_output', {}, schemaRejected],
    [
      'another 400 from a structured_output judge',
      { structured_output: true },
      apiError(400, 'invalid_request_error'),
    ],
  ];
  for (const [label, overrides, reply] of inputErrors) {
    test(`${label} stays an EvalInputError`, async (t) => {
      const fake = await startFake(t);
      fake.enqueue(reply);
      const judge = await judgeAt(fake.url, overrides);
      await assert.rejects(callJudge(judge, buildJudgeRequest(judge, 'p', { rubric })), {
        name: 'EvalInputError',
      });
    });
  }
});

describe('callJudge: an answer cut off or stalled while its body is read', TWO_AT_A_TIME, () => {
  const cutOffs: [string, (body: any, res: ServerResponse) => void][] = [
    ['with content-length', cutOff],
    [
      'chunked (no content-length)',
      (body, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write(messageJson(body.model).slice(0, 40));
        setTimeout(() => res.socket?.destroy(), 20);
      },
    ],
  ];
  for (const [label, handle] of cutOffs) {
    test(`a body cut off mid-way (${label}) → EvalProviderError naming the connection, no status`, async (t) => {
      const server = await startRawServer(t, handle);
      await assert.rejects(
        callWith(await judgeAt(server.url)),
        failure('EvalProviderError', {
          status: undefined,
          judge: 'claude-test-judge',
          message: /^judge claude-test-judge: connection failed while reading the answer/,
        }),
      );
      assert.equal(server.requests.length, 1);
    });
  }

  test('headers and part of the body, then a stall → EvalTimeoutError (the deadline covers the body)', async (t) => {
    let droppedByServer = false;
    const server = await startRawServer(t, (body, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100000' });
      res.write(messageJson(body.model).slice(0, 40));
      // Long after the deadline, the server gives up itself, unless the client already closed the connection.
      const drop = setTimeout(() => ((droppedByServer = true), res.socket?.destroy()), 5000);
      res.on('close', () => clearTimeout(drop));
    });
    // 1 s, not 0.1: the request must reach the server before the deadline, however loaded the machine.
    await assert.rejects(callWith(await judgeAt(server.url, { timeout_s: 1 })), {
      name: 'EvalTimeoutError',
      message: /judge claude-test-judge: request timed out/,
    });
    assert.equal(droppedByServer, false, 'the client gave up on the stalled body by itself');
    assert.equal(server.requests.length, 1);
  });

  // A server that would stream 64 MB: the client must stop past 32 MB, and the server sees it stop reading.
  const huge: [string, Record<string, string>][] = [
    ['declared by content-length', { 'content-length': String(64 * 1024 * 1024) }],
    ['streamed without content-length', {}],
  ];
  for (const [label, headers] of huge) {
    test(`a body over 32 MB (${label}) → EvalProviderError, read no further than the cap`, async (t) => {
      let sent = 0;
      const server = await startRawServer(t, (_body, res) => {
        res.writeHead(200, { 'content-type': 'application/json', ...headers });
        const chunk = Buffer.alloc(1024 * 1024, 'x');
        const pump = () => {
          while (sent < 64 * 1024 * 1024 && !res.destroyed && res.write(chunk))
            sent += chunk.length;
        };
        res.on('drain', pump);
        res.write('{"pad":"');
        pump();
      });
      await assert.rejects(
        callWith(await judgeAt(server.url)),
        failure('EvalProviderError', {
          message: /^judge claude-test-judge: the answer is larger than 32 MB/,
        }),
      );
      assert.ok(sent < 48 * 1024 * 1024, `the server got to send only ${sent >> 20} MB`);
    });
  }

  const unreadable: [string, string, string, RegExp][] = [
    [
      'cut-off JSON',
      '{"id":"msg_1","content":[{"type":"te',
      'EvalProviderError',
      /cannot be read as JSON/,
    ],
    [
      'nested 100,000 levels deep',
      `${'['.repeat(1e5)}${']'.repeat(1e5)}`,
      'EvalJudgeResponseError',
      /not a message/,
    ],
  ];
  for (const [label, text, name, message] of unreadable) {
    test(`a 200 whose body is ${label} → a failure of that attempt keeping the raw text arrived (64 KiB at most)`, async (t) => {
      const fake = await startFake(t);
      fake.enqueue({ kind: 'raw', status: 200, body: text });
      await assert.rejects(
        callWith(await judgeAt(fake.url)),
        failure(name, { message, rawText: text.slice(0, 64 * 1024) }),
      );
    });
  }

  test('in a chain, a cut-off answer from the primary falls back to the next judge, which scores', async (t) => {
    const server = await startRawServer(t, (body, res) => {
      if (body.model === 'judge-primary') return cutOff(body, res);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(messageJson(body.model));
    });
    const judges = await judgesAt(server.url, [
      judgeConfig({ model: 'judge-primary' }),
      judgeConfig({ model: 'judge-fallback' }),
    ]);
    const chain = new JudgeChain({ operation: 'm01/p1' });
    const [judge, verdict] = await chain.run(
      judges,
      async (candidate) => verdictFromAnswer(await retriedCall(candidate), rubric),
      { describe: (candidate) => candidate.model },
    );
    assert.equal(judge.model, 'judge-fallback');
    assert.deepEqual(verdict, { scores: goodScores(), notes: 'fine' });
    assert.deepEqual(
      chain.attempts.map((error) => [error.name, error.judge]),
      [['EvalProviderError', 'judge-primary']],
    );
    assert.deepEqual(
      server.requests.map((body) => body.model),
      ['judge-primary', 'judge-fallback'],
      'the cut-off is not retried on the same judge',
    );
  });
});

// ---- The failure policy ----------------------------------------------------------------------------------------------

describe('decide: what one failed attempt means', () => {
  const policy = { max_retries: 3, budget_s: 30, base_delay_s: 1 };
  const retryContext = { attempt: 0, msLeft: 30_000, policy };
  const byClass: [EvalErrorType, string][] = [
    [new EvalConfigurationError('x'), 'stop-run'],
    [new EvalDependencyError('x'), 'stop-run'],
    [new EvalInterruptedError('x'), 'stop-run'],
    [new EvalInputError('x'), 'fail-transcript'],
    [new EvalUnsupportedError('x'), 'fail-transcript'],
    [new EvalJudgesExhaustedError('x'), 'next-judge'], // an inner chain's failure is one attempt of an outer chain
    [new EvalJudgeResponseError('x'), 'next-judge'],
    [new EvalTimeoutError('x'), 'next-judge'],
    [new EvalProviderError('connection failed'), 'next-judge'],
    ...[408, 409, 500, 503].map((status): [EvalErrorType, string] => [
      providerError(status),
      'next-judge',
    ]),
  ];
  for (const [error, action] of byClass) {
    const what = `${error.name}${error instanceof EvalProviderError && error.status ? ` ${error.status}` : ''}`;
    test(`${what} → ${action}, with or without retries left`, () => {
      assert.deepEqual(decide(error), { action });
      assert.deepEqual(decide(error, retryContext), { action });
    });
  }

  const retries: [string, EvalErrorType, typeof retryContext | undefined, Decision][] = [
    [
      '429 with retry-after',
      providerError(429, { retryAfterMs: 1234 }),
      retryContext,
      { action: 'retry', delayMs: 1234 },
    ],
    [
      '529 with retry-after 0',
      providerError(529, { retryAfterMs: 0 }),
      retryContext,
      { action: 'retry', delayMs: 0 },
    ],
    [
      '429 with retry-after exactly the budget left',
      providerError(429, { retryAfterMs: 5000 }),
      { ...retryContext, msLeft: 5000 },
      { action: 'retry', delayMs: 5000 },
    ],
    [
      '429 outside the retry layer (the chain asks)',
      providerError(429, { retryAfterMs: 10 }),
      undefined,
      { action: 'next-judge' },
    ],
    [
      '429 with no retry left (attempt = max_retries)',
      providerError(429, { retryAfterMs: 10 }),
      { ...retryContext, attempt: 3 },
      { action: 'next-judge' },
    ],
    [
      '429 whose retry-after exceeds the budget left',
      providerError(429, { retryAfterMs: 5001 }),
      { ...retryContext, msLeft: 5000 },
      { action: 'next-judge' },
    ],
    [
      '529 whose retry-after exceeds the budget left',
      providerError(529, { retryAfterMs: 60_000 }),
      retryContext,
      { action: 'next-judge' },
    ],
    [
      '429 for a spend limit',
      providerError(429, { retryAfterMs: 10, spendLimit: true }),
      retryContext,
      { action: 'next-judge' },
    ],
  ];
  for (const [label, error, retry, expected] of retries) {
    const outcome = 'delayMs' in expected ? `retry after ${expected.delayMs} ms` : expected.action;
    test(`${label} → ${outcome}`, () => {
      assert.deepEqual(decide(error, retry), expected);
    });
  }

  test('429 without retry-after: a jittered exponential backoff, base_delay_s x 2^attempt x [0.5, 1.5)', () => {
    for (let i = 0; i < 50; i++) {
      const decision = decide(providerError(429), { ...retryContext, attempt: 2 });
      assert.equal(decision.action, 'retry');
      const { delayMs } = decision as { delayMs: number };
      assert.ok(delayMs >= 2000 && delayMs < 6000, `delay ${delayMs} for attempt 2, base 1 s`);
    }
  });

  test('429 without retry-after whose backoff cannot fit in the budget left → next-judge', () => {
    assert.deepEqual(decide(providerError(429), { ...retryContext, attempt: 2, msLeft: 1999 }), {
      action: 'next-judge',
    });
  });
});

// ---- The retry layer on one judge ------------------------------------------------------------------------------------

describe('callJudgeWithRetries: 429 and 529 are retried on the same judge, within its budget', () => {
  const judgeWith = (
    url: string,
    retry: JudgeConfig['retry'],
    overrides: Partial<JudgeConfig> = {},
    clock?: Clock,
  ) => judgeAt(url, { retry, ...overrides }, keyEnv(), clock);
  const quick = { max_retries: 3, budget_s: 5, base_delay_s: 0.01 };

  test('429 with retry-after, then success: two requests to the same judge, the answer returned', async (t) => {
    const clock = jumpClock();
    const fake = await startFake(t, { clock });
    fake.enqueue(rateLimited('0.05'));
    const answer = await retriedCall(await judgeWith(fake.url, quick, {}, clock));
    assert.deepEqual(fake.requests.map(modelOf), ['claude-test-judge', 'claude-test-judge']);
    assert.ok(fake.requests[1]!.at >= fake.requests[0]!.at, 'the retry came after the 429');
    const waited = fake.requests[1]!.at - fake.requests[0]!.at;
    assert.ok(waited >= 50, `the retry waited out the retry-after: ${waited} ms`);
    assert.equal(answer.judge, 'claude-test-judge');
    assert.deepEqual(verdictFromAnswer(answer, rubric).scores, goodScores());
  });

  test('529 overloaded is retried on the same judge', async (t) => {
    const clock = jumpClock();
    const fake = await startFake(t, { clock });
    fake.enqueue(apiError(529, 'overloaded_error', 'Overloaded'));
    const answer = await retriedCall(await judgeWith(fake.url, quick, {}, clock));
    assert.equal(fake.requests.length, 2);
    assert.equal(answer.stopReason, 'end_turn');
  });

  test('a spend-limit 429 is not retried: thrown after exactly one request', async (t) => {
    const fake = await startFake(t);
    fake.enqueue(spendLimited);
    await assert.rejects(
      retriedCall(await judgeWith(fake.url, quick)),
      failure('EvalProviderError', { status: 429, spendLimit: true }),
    );
    assert.equal(fake.requests.length, 1);
  });

  test('a retry-after beyond the budget gives up at once: one request', async (t) => {
    const fake = await startFake(t);
    fake.enqueue(rateLimited('1')); // waited out, the retry would get the fake's good answer
    await assert.rejects(
      retriedCall(await judgeWith(fake.url, { ...quick, budget_s: 0.1 })),
      failure('EvalProviderError', { status: 429 }),
    );
    assert.equal(fake.requests.length, 1);
  });

  test('max_retries bounds the retries: the 429 past it is thrown after 1 + max_retries requests', async (t) => {
    const clock = jumpClock();
    const fake = await startFake(t, { responder: () => rateLimited('0.01'), clock });
    await assert.rejects(
      retriedCall(await judgeWith(fake.url, { ...quick, max_retries: 2 }, {}, clock)),
      failure('EvalProviderError', { status: 429 }),
    );
    assert.equal(fake.requests.length, 3);
  });

  test('max_retries 0 never retries', async (t) => {
    const fake = await startFake(t, { responder: () => rateLimited('0.01') });
    await assert.rejects(retriedCall(await judgeWith(fake.url, { ...quick, max_retries: 0 })), {
      name: 'EvalProviderError',
    });
    assert.equal(fake.requests.length, 1);
  });

  test('a 500 is not retried here: it goes back to the chain after one request', async (t) => {
    const fake = await startFake(t);
    fake.enqueue(apiError(500, 'api_error', 'boom'));
    await assert.rejects(
      retriedCall(await judgeWith(fake.url, quick)),
      failure('EvalProviderError', { status: 500 }),
    );
    assert.equal(fake.requests.length, 1);
  });

  test('a timeout is not retried: EvalTimeoutError after one request', async (t) => {
    const fake = await startFake(t);
    fake.enqueue({ kind: 'hang' });
    // 1 s, not 0.1: the request must reach the fake before the deadline, however loaded the machine.
    await assert.rejects(retriedCall(await judgeWith(fake.url, quick, { timeout_s: 1 })), {
      name: 'EvalTimeoutError',
    });
    assert.equal(fake.requests.length, 1);
  });
});

// ---- The fallback chain ----------------------------------------------------------------------------------------------

/** A `call` whose outcome per invoker is scripted: a value to return or an error to throw; it records each call. */
function scripted(outcomes: Record<string, unknown>) {
  const calls: string[] = [];
  const call = async (invoker: string): Promise<unknown> => {
    calls.push(invoker);
    const outcome = outcomes[invoker];
    if (outcome instanceof Error) throw outcome;
    return outcome;
  };
  return { calls, call };
}
const aTimeout = () => new DOMException('The operation was aborted due to timeout', 'TimeoutError');

describe('JudgeChain: the policy of each failure', () => {
  test('the first judge succeeds → [judge, result]; no attempt recorded; later judges not called', async () => {
    const chain = new JudgeChain({ operation: 'op' });
    const { calls, call } = scripted({ a: 'RESULT-A', b: 'RESULT-B' });
    assert.deepEqual(await chain.run(['a', 'b'], call), ['a', 'RESULT-A']);
    assert.deepEqual(calls, ['a']);
    assert.deepEqual(chain.attempts, []);
  });

  const recorded: [string, () => EvalErrorType][] = [
    ['EvalJudgeResponseError', () => new EvalJudgeResponseError('unusable')],
    ['EvalProviderError', () => providerError(529)],
    ['EvalTimeoutError', () => new EvalTimeoutError('timed out')],
    [
      'EvalJudgesExhaustedError (an inner chain)',
      () => new EvalJudgesExhaustedError('an earlier chain'),
    ],
  ];
  for (const [name, make] of recorded) {
    test(`${name} → recorded (naming the judge) and the next judge is tried`, async () => {
      const error = make();
      const chain = new JudgeChain({ operation: 'op' });
      const { calls, call } = scripted({ a: error, b: 'RESULT-B' });
      assert.deepEqual(await chain.run(['a', 'b'], call), ['b', 'RESULT-B']);
      assert.deepEqual(calls, ['a', 'b']);
      assert.deepEqual(chain.attempts, [error]);
      assert.equal(error.judge, 'a', 'describe names the judge of a failure that did not');
    });
  }

  const stopping: [string, () => Error][] = [
    ['EvalConfigurationError', () => new EvalConfigurationError('no key')],
    ['EvalInputError', () => new EvalInputError('HTTP 400')],
    ['EvalUnsupportedError', () => new EvalUnsupportedError('no structured output')],
    ['EvalDependencyError', () => new EvalDependencyError('missing module')],
    ['EvalInterruptedError', () => new EvalInterruptedError('Ctrl-C')],
    ['A defect (a TypeError, not an EvalError)', () => new TypeError('x is not a function')],
  ];
  for (const [name, make] of stopping) {
    test(`${name} stops the chain at once: propagates as itself, the next judge not called`, async () => {
      const error = make();
      const chain = new JudgeChain({ operation: 'op' });
      const { calls, call } = scripted({ a: error, b: 'RESULT-B' });
      await assert.rejects(chain.run(['a', 'b'], call), (thrown) => thrown === error);
      assert.deepEqual(calls, ['a']);
      assert.deepEqual(chain.attempts, []);
    });
  }

  test('attempts are recorded in order across several failing judges', async () => {
    const first = providerError(500);
    const second = new EvalJudgeResponseError('prose');
    const chain = new JudgeChain({ operation: 'op' });
    const { calls, call } = scripted({ a: first, b: second, c: 'RESULT-C' });
    assert.deepEqual(await chain.run(['a', 'b', 'c'], call), ['c', 'RESULT-C']);
    assert.deepEqual(calls, ['a', 'b', 'c']);
    assert.deepEqual(chain.attempts, [first, second]);
  });

  test('a stopping error after a recorded failure still propagates as itself', async () => {
    const stop = new EvalInputError('HTTP 413');
    const chain = new JudgeChain({ operation: 'op' });
    const { calls, call } = scripted({ a: providerError(500), b: stop, c: 'RESULT-C' });
    await assert.rejects(chain.run(['a', 'b', 'c'], call), (thrown) => thrown === stop);
    assert.deepEqual(calls, ['a', 'b']);
  });

  test('a generic TimeoutError (AbortSignal.timeout) counts as a timeout: recorded as EvalTimeoutError, next judge tried', async () => {
    const timeout = aTimeout();
    const chain = new JudgeChain({ operation: 'op' });
    const { call } = scripted({ a: timeout, b: 'RESULT-B' });
    assert.deepEqual(await chain.run(['a', 'b'], call), ['b', 'RESULT-B']);
    assert.equal(chain.attempts.length, 1);
    assert.ok(chain.attempts[0] instanceof EvalTimeoutError);
    assert.equal(chain.attempts[0].cause, timeout);
    assert.equal(chain.attempts[0].judge, 'a');
  });

  test('handle and raiseFinal, for a loop that cannot use run: the same policy', () => {
    const chain = new JudgeChain({ operation: 'op' });
    const recordedError = new EvalJudgeResponseError('prose');
    chain.handle(recordedError, 'a');
    assert.deepEqual(chain.attempts, [recordedError]);
    const stop = new EvalConfigurationError('HTTP 401');
    assert.throws(
      () => chain.handle(stop, 'b'),
      (thrown) => thrown === stop,
    );
    const defect = new RangeError('bug');
    assert.throws(
      () => chain.handle(defect, 'c'),
      (thrown) => thrown === defect,
    );
    assert.throws(
      () => chain.raiseFinal(),
      (thrown) => thrown === recordedError,
    );
  });
});

describe('JudgeChain: the failure when no judge succeeds', () => {
  test('one failed attempt and no more judges → that error re-raised as itself (the same object)', async () => {
    const error = providerError(529);
    const chain = new JudgeChain({ operation: 'op' });
    const { call } = scripted({ a: error });
    await assert.rejects(chain.run(['a'], call), (thrown) => thrown === error);
  });

  test('two or more → EvalJudgesExhaustedError: errors in order, cause the last, message naming each judge and why', async () => {
    const errors = [
      new EvalProviderError('HTTP 529 overloaded_error: busy', { judge: 'judge-A' }),
      new EvalTimeoutError('request timed out', { judge: 'judge-B' }),
      new EvalJudgeResponseError('unusable answer: empty answer', { judge: 'judge-C' }),
    ];
    const chain = new JudgeChain({ operation: 'stub/proof01' });
    const { call } = scripted({ 'judge-A': errors[0], 'judge-B': errors[1], 'judge-C': errors[2] });
    await assert.rejects(
      chain.run(['judge-A', 'judge-B', 'judge-C'], call),
      failure('EvalJudgesExhaustedError', { errors, cause: errors[2] }, (error) => {
        assert.equal(
          error.message,
          'stub/proof01: all 3 judges failed: ' +
            '(1) EvalProviderError: judge judge-A: HTTP 529 overloaded_error: busy; ' +
            '(2) EvalTimeoutError: judge judge-B: request timed out; ' +
            '(3) EvalJudgeResponseError: judge judge-C: unusable answer: empty answer',
        );
      }),
    );
  });

  test("the exhausted message names each judge tried even when a failure's own message does not", async () => {
    const chain = new JudgeChain({ operation: 'op' });
    const { call } = scripted({ 'judge-A': providerError(500), 'judge-B': aTimeout() });
    await assert.rejects(chain.run(['judge-A', 'judge-B'], call), {
      name: 'EvalJudgesExhaustedError',
      message:
        /\(1\) judge judge-A: EvalProviderError: HTTP 500; \(2\) judge judge-B: EvalTimeoutError: /,
    });
  });

  test('describe names the judges in the failures', async () => {
    const chain = new JudgeChain({ operation: 'op' });
    const { call } = scripted({ a: providerError(500), b: providerError(503) });
    await assert.rejects(
      chain.run(['a', 'b'], call, { describe: (invoker) => `model-${invoker}` }),
      {
        message: mentioning(
          'judge model-a: EvalProviderError: HTTP 500',
          'judge model-b: EvalProviderError: HTTP 503',
        ),
      },
    );
  });

  test('no invokers → EvalConfigurationError naming the operation', async () => {
    const chain = new JudgeChain({ operation: 'the-op' });
    const { calls, call } = scripted({});
    await assert.rejects(chain.run([], call), {
      name: 'EvalConfigurationError',
      message: /^the-op: no judge was attempted/,
    });
    assert.deepEqual(calls, []);
  });

  test('the judges skipped for their media are named: with no attempt, and after failed attempts', async () => {
    await assert.rejects(
      new JudgeChain({ operation: 'op' }).run([], scripted({}).call, { mediaSkips: ['m1', 'm2'] }),
      {
        name: 'EvalConfigurationError',
        message: mentioning('skipped for their media: m1, m2'),
      },
    );
    const chain = new JudgeChain({ operation: 'op' });
    chain.handle(providerError(500), 'a');
    chain.handle(providerError(503), 'b');
    assert.throws(() => chain.raiseFinal({ mediaSkips: ['m1'] }), {
      name: 'EvalJudgesExhaustedError',
      message: /all 2 judges failed: .*; skipped for their media: m1$/,
    });
  });
});

describe('the error classes', () => {
  const classes = [
    EvalConfigurationError,
    EvalInputError,
    EvalUnsupportedError,
    EvalDependencyError,
    EvalInterruptedError,
    EvalTimeoutError,
    EvalJudgeResponseError,
    EvalProviderError,
    EvalJudgesExhaustedError,
  ];
  test('share the EvalError base and the (message, {cause}) constructor, and are named after their class', () => {
    const cause = new Error('root');
    for (const Class of classes) {
      const error = new Class('msg', { cause });
      assert.ok(error instanceof EvalError && error instanceof Error, Class.name);
      assert.deepEqual([error.name, error.message, error.cause], [Class.name, 'msg', cause]);
    }
  });

  test('{judge} names the judge: the message starts "judge <model>: "', () => {
    for (const Class of classes.filter((Class) => Class !== EvalJudgesExhaustedError)) {
      const error = new Class('msg', { judge: 'jm' });
      assert.deepEqual([error.message, error.judge], ['judge jm: msg', 'jm'], Class.name);
    }
  });

  test('EvalJudgesExhaustedError constructs without errors: errors is [], cause as given', () => {
    const plain = new EvalJudgesExhaustedError('m');
    assert.deepEqual([plain.errors, plain.message, plain.cause], [[], 'm', undefined]);
    const cause = new Error('root');
    const withCause = new EvalJudgesExhaustedError('m', { cause });
    assert.deepEqual([withCause.errors, withCause.cause], [[], cause]);
  });
});

describe('structured outputs through the chain', () => {
  test('the local parser still refuses an out-of-range score; the unflagged fallback sends no output_config', async (t) => {
    const { rubric: gapped } = rubricWithGaps(t);
    const fake = await startFake(t, {
      responder: (req) =>
        modelOf(req) === 'judge-a'
          ? { text: answerJson(goodScores({ mathematical_correctness: 3 })) }
          : { text: answerJson(goodScores({ proof_scaffolding: 4 }), 'from b') },
    });
    const judges = await judgesAt(fake.url, [
      judgeConfig({ model: 'judge-a', structured_output: true }),
      judgeConfig({ model: 'judge-b' }),
    ]);
    const chain = new JudgeChain({ operation: 'op' });
    const [judge, verdict] = await chain.run(
      judges,
      async (candidate) =>
        verdictFromAnswer(
          await callJudge(candidate, buildJudgeRequest(candidate, 'p', { rubric: gapped })),
          gapped,
        ),
      { describe: (candidate) => candidate.model },
    );
    assert.equal(judge.model, 'judge-b');
    assert.deepEqual(verdict.scores, goodScores({ proof_scaffolding: 4 }));
    assert.equal(fake.requests[0]!.body.output_config.format.type, 'json_schema');
    assert.equal('output_config' in fake.requests[1]!.body, false);
    assert.deepEqual(
      chain.attempts.map((error) => [error.name, error.judge]),
      [['EvalJudgeResponseError', 'judge-a']],
    );
    assert.match(chain.attempts[0]!.message, /mathematical_correctness/);
  });

  test('a schema the API rejects stops the chain: no fallback call', async (t) => {
    const fake = await startFake(t);
    fake.enqueue(
      apiError(400, 'invalid_request_error', 'output_config.format: json_schema is not supported'),
    );
    const judges = await judgesAt(fake.url, [
      judgeConfig({ model: 'judge-a', structured_output: true }),
      judgeConfig({ model: 'judge-b' }),
    ]);
    const chain = new JudgeChain({ operation: 'op' });
    const attempt = (candidate: Judge) =>
      callJudge(candidate, buildJudgeRequest(candidate, 'p', { rubric }));
    await assert.rejects(chain.run(judges, attempt), { name: 'EvalUnsupportedError' });
    assert.deepEqual(fake.requests.map(modelOf), ['judge-a']);
  });
});

// ---- Full runs: retries and fallbacks as the CLI does them -----------------------------------------------------------

const ONE = ['--task', 'proof01', '--model', 'm01'];
const attemptsOf = (log: string) =>
  readLog(log)[0]!.attempts.map((a) => [a.judge, a.error, a.status]);

describe('retries and fallbacks in a run', TWO_AT_A_TIME, () => {
  test('429 then success on the same judge, after retry-after; the wait is not a failed attempt', async (t) => {
    const { fake, ws, run } = await setup(t, {
      responder: (_req, i) => (i === 0 ? rateLimited('0.05') : undefined),
      clock: true,
    });
    const result = await run(ONE);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(fake.requests.map(modelOf), ['judge-a', 'judge-a']);
    const [entry] = readLog(ws.log);
    assert.deepEqual([entry!.status, entry!.judge, entry!.attempts], ['scored', 'judge-a', []]);
    assert.doesNotMatch(result.stderr, /fallback/);
    assert.equal(rowCount(ws.output), 1);
  });

  test('529 overloaded is retried on the same judge', async (t) => {
    const overloaded = apiError(529, 'overloaded_error', 'Overloaded', {
      headers: { 'retry-after': '0.02' },
    });
    const { fake, ws, run } = await setup(t, {
      responder: (_req, i) => (i === 0 ? overloaded : undefined),
      clock: true,
    });
    const result = await run(ONE);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(fake.requests.map(modelOf), ['judge-a', 'judge-a']);
    assert.equal(readLog(ws.log)[0]!.judge, 'judge-a');
  });

  test("two entries of one model id (a free local judge, a priced hosted fallback): the fallback's row is priced and marked as its own", async (t) => {
    const price = { input: 5, output: 25 };
    const local = { input: 0, output: 0 };
    const judge = judgeEntry('judge-x', {
      family: 'local',
      base_url: DEAD_BASE_URL,
      price_usd_per_mtok: local,
    });
    const fallbacks = [judgeEntry('judge-x', { family: 'hosted', price_usd_per_mtok: price })];
    const chain = { models: 1, tasks: ['proof01'], judge, fallbacks };
    const { fake, ws, run } = await setup(t, {}, chain);
    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.requests.length, 1);
    assert.match(result.stderr, /scored by fallback judge judge-x after/);
    assert.match(result.stderr, /rows by judge: judge-x 1 \(fallback\)/);

    const [entry] = readLog(ws.log);
    assert.deepEqual(
      [entry!.judge, entry!.judge_family, entry!.fallback],
      ['judge-x', 'hosted', true],
    );
    assert.equal(entry!.answers[0]!.family, 'hosted');
    const usage = entry!.answers[0]!.usage!;
    const cost = (usage.input_tokens * price.input + usage.output_tokens * price.output) / 1e6;
    assert.ok(cost > 0);
    assert.ok(Math.abs(entry!.cost_usd! - cost) < 1e-12, `${entry!.cost_usd} is ${cost}`);
    assert.match(result.stderr, new RegExp(`cost \\$${cost.toFixed(4).replace('.', '\\.')};`));

    const row = readAuditLog(ws.log).rows.get(pairKey('proof01', 'm01'))!;
    assert.deepEqual([row.family, row.fallback], ['hosted', true]);
  });

  describe('a circuit breaker: judge-a overloaded (529) on 3 transcripts in a row sends later ones on after one try', () => {
    const overloaded = apiError(529, 'overloaded_error', 'Overloaded', {
      headers: { 'retry-after': '0.01' },
    });
    const retry = { max_retries: 2, budget_s: 5, base_delay_s: 0.01 };
    const breakerRun = async (
      t: TestContext,
      fallbacks?: ReturnType<typeof judgeEntry>[],
      answersOnly = 0,
    ) => {
      const calls = new Map<string, number>();
      const { fake, run } = await setup(
        t,
        {
          responder: (req) => {
            const tag = `${modelOf(req)} ${tagOf(req)}`;
            calls.set(tag, (calls.get(tag) ?? 0) + 1);
            return modelOf(req) === 'judge-a' && fake.requests.length !== answersOnly
              ? overloaded
              : undefined;
          },
          clock: true,
        },
        { models: 2, judge: judgeEntry('judge-a', { retry }), fallbacks },
      );
      const result = await run(['--concurrency', '1']);
      const triesOnA = [...calls].filter(([tag]) => tag.startsWith('judge-a')).map(([, n]) => n);
      return { result, triesOnA };
    };

    test('3 transcripts get every retry on judge-a, the 3 after one try each; all scored by judge-b; said once', async (t) => {
      const { result, triesOnA } = await breakerRun(t);
      assert.equal(result.code, 0, result.stderr);
      assert.deepEqual(triesOnA, [3, 3, 3, 1, 1, 1]);
      const said =
        /judge judge-a stayed overloaded \(529\) on 3 transcripts in a row: 3 later transcript\(s\) tried it once/;
      assert.match(result.stderr, said);
    });

    test('without a fallback judge the breaker never shortens the retries', async (t) => {
      const { result, triesOnA } = await breakerRun(t, []);
      assert.equal(result.code, 1, result.stderr);
      assert.deepEqual(triesOnA, [3, 3, 3, 3, 3, 3]);
      assert.doesNotMatch(result.stderr, /stayed overloaded/);
    });

    test('an answer from judge-a closes the breaker: the next transcript gets every retry again', async (t) => {
      // Requests 1-12: transcripts 1-3 (3 tries on judge-a, then judge-b); 13-14: transcript 4 (one try, judge-b);
      // 15: transcript 5, answered by judge-a; transcript 6 then meets overload again with the breaker closed.
      const { result, triesOnA } = await breakerRun(t, undefined, 15);
      assert.equal(result.code, 0, result.stderr);
      assert.deepEqual(triesOnA, [3, 3, 3, 1, 1, 3]);
    });
  });

  test('429 without retry-after backs off and retries on the same judge', async (t) => {
    const { fake, ws, run } = await setup(t, {
      responder: (_req, i) => (i < 2 ? rateLimited() : undefined),
      clock: true,
    });
    const result = await run(ONE);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(fake.requests.map(modelOf), ['judge-a', 'judge-a', 'judge-a']);
    assert.equal(readLog(ws.log)[0]!.judge, 'judge-a');
  });

  test('a 429 whose retry-after exceeds the budget falls back to judge-b at once, said once', async (t) => {
    // Waited out, the retry on judge-a would get the fake's good answer.
    const { fake, ws, run } = await setup(
      t,
      { responder: (_req, i) => (i === 0 ? rateLimited('1') : undefined) },
      {
        judge: judgeEntry('judge-a', {
          retry: { max_retries: 5, budget_s: 0.1, base_delay_s: 0.01 },
        }),
      },
    );
    const result = await run(ONE);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(fake.requests.map(modelOf), ['judge-a', 'judge-b']);
    assert.equal(readLog(ws.log)[0]!.judge, 'judge-b');
    assert.deepEqual(attemptsOf(ws.log), [['judge-a', 'EvalProviderError', 429]]);
    const said = result.stderr
      .split('\n')
      .filter((line) => line.includes('fallback') && !line.startsWith('  rows'));
    assert.deepEqual(said.length, 1, result.stderr);
    assert.match(
      said[0]!,
      /^m01\/proof01: scored by fallback judge judge-b after judge judge-a: HTTP 429 rate_limit_error/,
    );
  });

  test('429s beyond max_retries fall back after exactly 1 + max_retries requests', async (t) => {
    const { fake, ws, run } = await setup(
      t,
      {
        responder: (req) => (modelOf(req) === 'judge-a' ? rateLimited('0.01') : undefined),
        clock: true,
      },
      {
        judge: judgeEntry('judge-a', {
          retry: { max_retries: 3, budget_s: 5, base_delay_s: 0.01 },
        }),
      },
    );
    const result = await run(ONE);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(fake.requests.map(modelOf), [
      'judge-a',
      'judge-a',
      'judge-a',
      'judge-a',
      'judge-b',
    ]);
    assert.equal(readLog(ws.log)[0]!.judge, 'judge-b');
  });

  const fallsBackAfterOne: [
    string,
    Reply,
    Partial<Parameters<typeof judgeEntry>[1]>,
    [string, string, number | null],
  ][] = [
    ['a spend-limit 429 is not retried', spendLimited, {}, ['judge-a', 'EvalProviderError', 429]],
    [
      'a 500 is not retried on the same judge',
      apiError(500, 'api_error'),
      {},
      ['judge-a', 'EvalProviderError', 500],
    ],
    // timeout_s 1, not 0.1: judge-a's request must reach the fake before the deadline, however loaded the machine.
    [
      'a timeout is never resubmitted',
      { kind: 'hang' },
      { timeout_s: 1 },
      ['judge-a', 'EvalTimeoutError', null],
    ],
  ];
  for (const [label, reply, overrides, attempt] of fallsBackAfterOne) {
    test(`${label}: one request to judge-a, then judge-b scores`, async (t) => {
      const { fake, ws, run } = await setup(
        t,
        { responder: (req) => (modelOf(req) === 'judge-a' ? reply : undefined) },
        { judge: judgeEntry('judge-a', overrides) },
      );
      const result = await run(ONE);
      assert.equal(result.code, 0, result.stderr);
      assert.deepEqual(fake.requests.map(modelOf), ['judge-a', 'judge-b']);
      assert.equal(readLog(ws.log)[0]!.judge, 'judge-b');
      assert.deepEqual(attemptsOf(ws.log), [attempt]);
    });
  }

  test('a 429 without rate-limit headers pauses every request of that judge until retry-after', async (t) => {
    // The 429 is answered at once; the others take 50 ms, so their workers ask for the next request during the pause.
    const { fake, run } = await setup(t, {
      responder: (_req, i) => (i === 0 ? rateLimited('0.3') : { text: answerJson(), delayMs: 50 }),
      clock: true,
    });
    const result = await run(['--concurrency', '3']);
    assert.equal(result.code, 0, result.stderr);
    // The first two (the burst before any answer) start together; every later one waits out the 0.3 s pause.
    const [first, ...later] = fake.requests.slice(0, 1).concat(fake.requests.slice(2));
    const early = later.filter((req) => req.at - first!.at < 290).map(tagOf);
    assert.deepEqual(early, [], 'no request during the pause');
    assert.equal(fake.requests.length, 7, 'six transcripts and one retry');
    assert.ok(fake.requests.every((req) => modelOf(req) === 'judge-a'));
  });

  test('a 429 without rate-limit headers whose retry-after is beyond the budget pauses that judge: one request to it, judge-b scores all', async (t) => {
    const { fake, ws, run } = await setup(
      t,
      { responder: (req) => (modelOf(req) === 'judge-a' ? rateLimited('3600') : undefined) },
      {
        judge: judgeEntry('judge-a', {
          retry: { max_retries: 5, budget_s: 1, base_delay_s: 0.01 },
        }),
      },
    );
    const result = await run(['--concurrency', '1']);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(fake.requests.map(modelOf), ['judge-a', ...Array<string>(6).fill('judge-b')]);
    const log = readLog(ws.log);
    assert.equal(log.length, 6);
    for (const entry of log) {
      const key = `${entry.model}/${entry.task_id}`;
      assert.deepEqual([entry.status, entry.judge], ['scored', 'judge-b'], key);
      assert.deepEqual(
        entry.attempts.map((a) => [a.judge, a.error, a.status]),
        [['judge-a', 'EvalProviderError', 429]],
        key,
      );
    }
    assert.equal(rowCount(ws.output), 6);
  });

  const notAMessage: [string, string, string][] = [
    ['whose body is not JSON', 'this is not json', 'EvalProviderError'],
    [
      'whose content is [null]',
      JSON.stringify({ ...JSON.parse(messageJson('judge-a')), content: [null] }),
      'EvalJudgeResponseError',
    ],
  ];
  for (const [label, body, errorClass] of notAMessage) {
    test(`a 200 ${label} is that attempt's failure (${errorClass}): no crash, no stack trace; judge-b scores`, async (t) => {
      const { fake, ws, run } = await setup(t, {
        responder: (req) =>
          modelOf(req) === 'judge-a' ? { kind: 'raw', status: 200, body } : undefined,
      });
      const result = await run(ONE);
      assert.equal(result.code, 0, result.stderr);
      assert.doesNotMatch(result.stderr, /^\s+at /m, 'no stack trace');
      assert.deepEqual(fake.requests.map(modelOf), ['judge-a', 'judge-b']);
      const [entry] = readLog(ws.log);
      assert.deepEqual([entry!.status, entry!.judge], ['scored', 'judge-b']);
      assert.deepEqual(attemptsOf(ws.log), [['judge-a', errorClass, null]]);
      assert.match(
        result.stderr,
        /^m01\/proof01: scored by fallback judge judge-b after judge judge-a: /m,
      );
      assert.equal(rowCount(ws.output), 1);
    });
  }

  test('model_env (JUDGE_MODEL) replaces the judge model in requests and in the log', async (t) => {
    const { fake, ws, run } = await setup(
      t,
      {},
      { judge: judgeEntry('judge-a', { model_env: 'JUDGE_MODEL' }) },
    );
    const result = await run(ONE, { env: { JUDGE_MODEL: 'judge-override' } });
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(fake.requests.map(modelOf), ['judge-override']);
    assert.equal(readLog(ws.log)[0]!.judge, 'judge-override');
  });

  test("--no-fallback uses the primary judge only: its failure is the transcript's, said when it fails and in the summary", async (t) => {
    const { fake, ws, run } = await setup(t, {
      responder: (req) =>
        tagOf(req) === 'm01/proof01'
          ? apiError(500, 'api_error', 'Internal server error')
          : undefined,
    });
    const result = await run(['--no-fallback']);
    assert.equal(result.code, 1, result.stderr);
    assert.equal(fake.requests.length, 6);
    assert.ok(fake.requests.every((req) => modelOf(req) === 'judge-a'));
    assert.equal(rowCount(ws.output), 5);
    const reason = 'm01/proof01: judge judge-a: HTTP 500 api_error: Internal server error';
    const lines = result.stderr.split('\n').filter((line) => line.includes(reason));
    assert.deepEqual(
      lines.map((line) => line.slice(0, line.indexOf(reason))),
      ['failed ', '  failed '],
      result.stderr,
    );
  });
});

describe('rate-limit pacing in a run: every bucket the API reports, as token buckets', () => {
  /**
   * A run of 15 transcripts at --concurrency 15 against the fake's buckets (20 ms latency, on the jump clock); every
   * row must come from judge-a.
   */
  async function pacedRun(t: TestContext, buckets: FakeOptions['buckets'], only: string[] = []) {
    const clock = jumpClock();
    const { fake, ws, run } = await setup(
      t,
      { buckets, latencyMs: 20, clock, latencyClock: clock },
      { models: 5 },
    );
    const result = await run(['--concurrency', '15', ...only]);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(rowCount(ws.output), only.length ? 1 : 15);
    const log = readLog(ws.log);
    assert.ok(
      log.every((entry) => entry.judge === 'judge-a' && entry.attempts.length === 0),
      'all by the primary, none after a failed attempt',
    );
    const first = fake.requests[0]!.at;
    return {
      fake,
      seconds: (fake.requests.at(-1)!.at - first) / 1000,
      // The clock skips ahead only over waits (real time runs while the run works): the pacer's and the latency.
      waitedS: clock.jumpedMs() / 1000,
      inputTokens: log[0]!.answers[0]!.usage!.input_tokens,
    };
  }

  // How close a run keeps to the refill is measured by `npm run bench` (b), not here: these machines are shared.
  // A refill of 4 a second: the pacer sends what the answers say is left, then waits for the reset they tell (the
  // bucket full again), so it keeps to the refill on average. Its waits pass on the jump clock.
  test('requests: a bucket of 5 refilling 4 a second: no 429, the requests paced to the refill', async (t) => {
    const { fake, seconds, waitedS } = await pacedRun(t, {
      requests: { capacity: 5, perSecond: 4 },
    });
    const pacedS = (15 - 5) / 4;
    assert.equal(fake.count429, 0, 'the first burst and every request after fit the bucket');
    assert.ok(seconds >= pacedS - 0.1, `paced: the last request started after ${seconds} s`);
    assert.ok(waitedS < pacedS + 5, `no stall passed as pacing: the pacer waited ${waitedS} s`);
  });

  test('input tokens: a bucket of 3 prompts refilling 4 prompts a second binds, not requests; no 429', async (t) => {
    // Measured from the first answer: each prompt's input tokens, as the fake counts them.
    const probe = await pacedRun(t, {}, ['--task', 'proof01', '--model', 'm01']);
    const perPrompt = probe.inputTokens;
    const { fake, seconds, waitedS } = await pacedRun(t, {
      inputTokens: { capacity: 3 * perPrompt, perSecond: 4 * perPrompt },
    });
    const pacedS = (15 - 3) / 4;
    assert.ok(
      fake.count429 <= 1,
      `${fake.count429} rejected: the tokens a prompt takes are learned from the first answer`,
    );
    assert.ok(
      seconds >= pacedS - 0.1,
      `paced on tokens: the last request started after ${seconds} s`,
    );
    assert.ok(waitedS < pacedS + 5, `no stall passed as pacing: the pacer waited ${waitedS} s`);
  });
});

describe('rate-limit pacing never stalls when later answers carry no headers', () => {
  test('one answer says 2 of 3 remain, then three 500s without headers: what started refills; all six are tried', async (t) => {
    const clock = jumpClock();
    const headers = () => ({
      'anthropic-ratelimit-requests-limit': '3',
      'anthropic-ratelimit-requests-remaining': '2',
      'anthropic-ratelimit-requests-reset': new Date(clock.now() + 200).toISOString(),
    });
    const { fake, run } = await setup(
      t,
      {
        responder: (_req, i) =>
          i === 0
            ? { text: fake.validAnswer(), headers: headers() }
            : i <= 3
              ? apiError(500, 'api_error', 'down')
              : undefined,
        clock,
      },
      { fallbacks: [] },
    );
    // The stall guard: a run that waits for ever is interrupted (as by Ctrl-C) after 15 s, so it fails, not hangs.
    const guard = setTimeout(() => process.emit('SIGINT', 'SIGINT'), 15_000);
    const result = await run(['--concurrency', '1']).finally(() => clearTimeout(guard));
    assert.equal(result.code, 1, result.stderr);
    assert.equal(fake.requests.length, 6, 'every transcript was tried');
    assert.ok(
      clock.jumpedMs() < 5000,
      `no stall passed as a wait: the clock jumped ${clock.jumpedMs()} ms`,
    );
  });
});

describe('a configuration error stops the whole run', () => {
  test('a 401 while other transcripts are retrying 429s stops those retries too: exit 2, no request after', async (t) => {
    // Round 1: four transcripts, each asked to wait 0.2 s. Round 2: m01/proof01 gets a 401 while the others, asked to
    // wait again, sleep before their third request (they may retry 20 times within 30 s).
    let primaryRequests = 0;
    const { fake, ws, run } = await setup(
      t,
      {
        responder: (req) =>
          tagOf(req) === 'm01/proof01' && ++primaryRequests === 2
            ? apiError(401, 'authentication_error', 'invalid x-api-key')
            : rateLimited('0.2'),
        clock: true,
      },
      {
        judge: judgeEntry('judge-a', {
          retry: { max_retries: 20, budget_s: 30, base_delay_s: 0.05 },
        }),
      },
    );
    const result = await run(['--concurrency', '4']);
    assert.equal(result.code, 2, result.stderr);
    assert.match(
      result.stderr,
      /stopped: judge judge-a: HTTP 401 authentication_error: invalid x-api-key/,
    );
    assert.ok(
      fake.requests.every((req) => modelOf(req) === 'judge-a'),
      'no fallback judge after a configuration error',
    );
    const perTranscript = new Map<string, number>();
    for (const req of fake.requests)
      perTranscript.set(tagOf(req)!, (perTranscript.get(tagOf(req)!) ?? 0) + 1);
    assert.deepEqual([...perTranscript.keys()].sort(), [
      'm01/proof01',
      'm01/proof02',
      'm01/proof03',
      'm02/proof01',
    ]);
    assert.equal(perTranscript.get('m01/proof01'), 2);
    for (const [tag, count] of perTranscript)
      assert.ok(count <= 2, `${tag} kept retrying: ${count} requests`);
    assert.equal(rowCount(ws.output), 0);
  });
});

// ---- Rate-limit waits are bounded ------------------------------------------------------------------------------------

/** retry-after values that ask for no wait or for none that can be read: each is the normal backoff, never at once. */
const NO_WAIT_RETRY_AFTER: [string, string][] = [
  ['0', '0'],
  ['-3', '-3'],
  ['abc', 'abc'],
  ['an HTTP date in the past', new Date(Date.now() - 3_600_000).toUTCString()],
];

describe('rate-limit waits are bounded: a retry-after that is zero, negative, unreadable or past is the normal backoff', () => {
  test('decide: a 429 the parser gave no wait (retryAfterMs undefined) backs off base_delay_s x 2^attempt x [0.5, 1.5], never 0', () => {
    const policy = { max_retries: 5, budget_s: 60, base_delay_s: 0.2 };
    for (let attempt = 0; attempt < 5; attempt++) {
      const ideal = policy.base_delay_s * 1000 * 2 ** attempt;
      for (let i = 0; i < 20; i++) {
        const error = providerError(429, { retryAfterMs: undefined });
        const decision = decide(error, { attempt, msLeft: 60_000, policy });
        assert.equal(decision.action, 'retry');
        const { delayMs } = decision as { delayMs: number };
        assert.ok(
          delayMs > 0 && delayMs >= 0.5 * ideal && delayMs <= 1.5 * ideal,
          `attempt ${attempt}: ${delayMs} ms`,
        );
      }
    }
  });

  for (const [label, value] of NO_WAIT_RETRY_AFTER) {
    test(`callJudge: a 429 with retry-after ${label} carries no wait (retryAfterMs undefined), so decide backs off`, async (t) => {
      const fake = await startFake(t);
      fake.enqueue(rateLimited(value));
      const policy = { max_retries: 5, budget_s: 60, base_delay_s: 0.2 };
      let caught: EvalErrorType | undefined;
      await assert.rejects(
        callWith(await judgeAt(fake.url)),
        failure(
          'EvalProviderError',
          { status: 429, retryAfterMs: undefined },
          (error) => (caught = error),
        ),
      );
      const decision = decide(caught!, { attempt: 1, msLeft: 60_000, policy });
      assert.equal(decision.action, 'retry');
      const { delayMs } = decision as { delayMs: number };
      assert.ok(
        delayMs >= 200 && delayMs <= 600,
        `backoff for attempt 1, base 0.2 s: ${delayMs} ms`,
      );
    });
  }

  for (const [label, value] of NO_WAIT_RETRY_AFTER) {
    test(`a run: a 429 with retry-after ${label}, then a valid answer: scored by the primary after 2 requests`, async (t) => {
      const { fake, ws, run } = await setup(t, {
        responder: (_req, i) => (i === 0 ? rateLimited(value) : undefined),
        clock: true,
      });
      const result = await run(ONE);
      assert.equal(result.code, 0, result.stderr);
      assert.deepEqual(fake.requests.map(modelOf), ['judge-a', 'judge-a']);
      const [entry] = readLog(ws.log);
      assert.deepEqual([entry!.status, entry!.judge, entry!.attempts], ['scored', 'judge-a', []]);
      assert.equal(rowCount(ws.output), 1);
    });

    test(`a run: a 429 with retry-after ${label} is never retried at once: a backoff beyond the budget falls back to judge-b`, async (t) => {
      // base_delay_s 10 makes the first backoff 5-15 s, beyond the 1 s budget: only a retry at once would ask judge-a again.
      const { fake, ws, run } = await setup(
        t,
        { responder: (req) => (modelOf(req) === 'judge-a' ? rateLimited(value) : undefined) },
        {
          judge: judgeEntry('judge-a', {
            retry: { max_retries: 5, budget_s: 1, base_delay_s: 10 },
          }),
        },
      );
      const result = await run(ONE);
      assert.equal(result.code, 0, result.stderr);
      assert.deepEqual(fake.requests.map(modelOf), ['judge-a', 'judge-b']);
      assert.deepEqual(attemptsOf(ws.log), [['judge-a', 'EvalProviderError', 429]]);
      assert.equal(readLog(ws.log)[0]!.judge, 'judge-b');
    });
  }
});

describe('rate-limit waits are bounded: a rate-limit reset more than a minute away is not waited for', () => {
  const cases: [string, number][] = [
    ['90 s away (a server clock ahead of ours)', 90_000],
    ['an hour away', 3_600_000],
  ];
  for (const [label, aheadMs] of cases) {
    test(`every answer says 0 of 10 requests remain until a reset ${label}: 4 transcripts at --concurrency 1 all scored by the primary`, async (t) => {
      const { fake, ws, run } = await setup(
        t,
        {
          responder: () => ({
            text: fake.validAnswer(),
            headers: {
              'anthropic-ratelimit-requests-limit': '10',
              'anthropic-ratelimit-requests-remaining': '0',
              'anthropic-ratelimit-requests-reset': new Date(Date.now() + aheadMs).toISOString(),
            },
          }),
        },
        { models: 2, tasks: ['proof01', 'proof02'] },
      );
      // The stall guard: a run waiting for the reset is interrupted (as by Ctrl-C) after 15 s, so it fails, not hangs.
      const guard = setTimeout(() => process.emit('SIGINT', 'SIGINT'), 15_000);
      const result = await run(['--concurrency', '1']).finally(() => clearTimeout(guard));
      assert.equal(result.code, 0, result.stderr);
      assert.deepEqual(fake.requests.map(modelOf), Array<string>(4).fill('judge-a'));
      assert.equal(rowCount(ws.output), 4);
      assert.ok(
        readLog(ws.log).every((entry) => entry.judge === 'judge-a' && entry.attempts.length === 0),
        'all by the primary',
      );
    });
  }
});

// ---- The key is never printed or logged --------------------------------------------------------------------------------

describe('the API key is never printed or logged, even when the server echoes it', () => {
  const KEY = 'sk-ant-api03-ECHOEDSECRET';
  const FALLBACK_KEY = 'sk-ant-api03-FALLBACKSECRET';
  /** The key a request carried, read as a server, proxy or gateway that echoes it would read it. */
  const keyOf = (req: RecordedRequest) =>
    String(req.headers['x-api-key'] ?? req.headers.authorization?.replace(/^Bearer /, ''));
  /** Everything a run printed or wrote. */
  const outputsOf = (
    ws: { log: string; output: string },
    result: { stdout: string; stderr: string },
  ) => ({
    stdout: result.stdout,
    stderr: result.stderr,
    log: fs.readFileSync(ws.log, 'utf8'),
    CSV: fs.readFileSync(ws.output, 'utf8'),
  });
  /** No key's distinctive part anywhere; the marker where the key was echoed. */
  function assertRedacted(outputs: Record<string, string>, redactedIn: string[]) {
    for (const [what, text] of Object.entries(outputs)) {
      assert.doesNotMatch(text, /ECHOEDSECRET|FALLBACKSECRET/, `${what} holds a key`);
    }
    for (const what of redactedIn)
      assert.ok(outputs[what]!.includes('[redacted]'), `[redacted] in ${what}`);
  }
  const entryOf = (log: string, key: string) =>
    readLog(log).find((entry) => `${entry.model}/${entry.task_id}` === key)!;

  test('error answers (HTTP 500, HTTP 400) whose messages hold the key: stderr and the log show [redacted]', async (t) => {
    const { fake, ws, run } = await setup(t, {
      responder: (req) =>
        tagOf(req) === 'm01/proof01' && modelOf(req) === 'judge-a'
          ? apiError(500, 'api_error', `gateway rejected x-api-key ${keyOf(req)}`)
          : tagOf(req) === 'm01/proof02'
            ? apiError(400, 'invalid_request_error', `bad request for key ${keyOf(req)}`)
            : undefined,
    });
    const result = await run(['--model', 'm01'], { apiKey: KEY });
    assert.equal(result.code, 1, result.stderr);
    assert.ok(
      fake.requests.every((req) => keyOf(req) === KEY),
      'every request carried the key',
    );
    assertRedacted(outputsOf(ws, result), ['stderr', 'log']);
    assert.match(
      result.stderr,
      /^m01\/proof01: scored by fallback judge judge-b after .*x-api-key \[redacted\]/m,
    );
    assert.match(result.stderr, /^failed m01\/proof02: .*bad request for key \[redacted\]/m);
    assert.match(entryOf(ws.log, 'm01/proof01').attempts[0]!.message, /x-api-key \[redacted\]/);
    assert.match(entryOf(ws.log, 'm01/proof02').error!.message, /bad request for key \[redacted\]/);
  });

  test('a request-id header holding the key: logged as request_id with [redacted], and so shown in an error', async (t) => {
    const { fake, ws, run } = await setup(t, {
      responder: (req) => {
        const headers = { 'request-id': `req_${keyOf(req)}` };
        return modelOf(req) === 'judge-a'
          ? { ...apiError(500, 'api_error', 'Internal server error'), headers }
          : { text: fake.validAnswer(), headers };
      },
    });
    const result = await run(ONE, { apiKey: KEY });
    assert.equal(result.code, 0, result.stderr);
    assertRedacted(outputsOf(ws, result), ['stderr', 'log']);
    const [entry] = readLog(ws.log);
    assert.deepEqual(
      entry!.answers.map((answer) => [answer.judge, answer.request_id]),
      [['judge-b', 'req_[redacted]']],
    );
    assert.match(entry!.attempts[0]!.message, /req_\[redacted\]/);
  });

  test('a valid answer whose notes hold the key: the CSV notes cell and the log show [redacted]', async (t) => {
    const { fake, ws, run } = await setup(t, {
      responder: (req) => ({
        text: fake.validAnswer({}, `the tutor leaked ${keyOf(req)} in turn 3`),
      }),
    });
    const result = await run(ONE, { apiKey: KEY });
    assert.equal(result.code, 0, result.stderr);
    assertRedacted(outputsOf(ws, result), ['log', 'CSV']);
    assert.deepEqual(
      csvRows(ws.output).map((row) => row.record[8]),
      ['the tutor leaked [redacted] in turn 3'],
    );
    const [entry] = readLog(ws.log);
    assert.equal(entry!.notes, 'the tutor leaked [redacted] in turn 3');
    assert.match(entry!.answers[0]!.text, /the tutor leaked \[redacted\] in turn 3/);
  });

  // A key may begin another (a proxy's keys, say): the longer is redacted whole, not left with a tail.
  for (const [fallbackKey, how] of [
    [FALLBACK_KEY, 'its own'],
    [`${KEY}-FALLBACKSECRET`, 'the primary key and more'],
  ]) {
    test(`each configured key: the fallback judge's key (${how}), echoed in the primary's error, is redacted too`, async (t) => {
      const { fake, ws, run } = await setup(
        t,
        {
          responder: (req) =>
            modelOf(req) === 'judge-a'
              ? apiError(500, 'api_error', `keys seen: ${keyOf(req)} and ${fallbackKey}`)
              : undefined,
        },
        { fallbacks: [judgeEntry('judge-b', { api_key_env: 'RJ_FALLBACK_KEY' })] },
      );
      const result = await run(ONE, { apiKey: KEY, env: { RJ_FALLBACK_KEY: fallbackKey } });
      assert.equal(result.code, 0, result.stderr);
      assert.deepEqual(
        fake.requests.map((req) => [modelOf(req), keyOf(req)]),
        [
          ['judge-a', KEY],
          ['judge-b', fallbackKey],
        ],
      );
      assertRedacted(outputsOf(ws, result), ['stderr', 'log']);
      assert.match(result.stderr, /keys seen: \[redacted\] and \[redacted\]/);
    });
  }
});

// ---- Judge settings: thinking, effort, the cache's lifetime ---------------------------------------------------------

describe('judge settings: the request carries exactly what the entry says', () => {
  const judge = (overrides: Partial<JudgeConfig> = {}) => ({
    model: 'claude-opus-4-7',
    config: judgeConfig(overrides),
  });

  test('"thinking": "adaptive" is sent as thinking {type: "adaptive"}, and nothing else changes', () => {
    const plain = buildJudgeRequest(judge(), 'p', { rubric }) as any;
    const thinking = buildJudgeRequest(judge({ thinking: 'adaptive' }), 'p', { rubric }) as any;
    assert.deepEqual(thinking.thinking, { type: 'adaptive' });
    delete thinking.thinking;
    assert.deepEqual(thinking, plain);
  });

  test('"effort" is sent as output_config.effort, beside format when structured outputs are on', () => {
    const alone = buildJudgeRequest(judge({ effort: 'low' }), 'p', { rubric }) as any;
    assert.deepEqual(alone.output_config, { effort: 'low' });
    const both = buildJudgeRequest(judge({ effort: 'xhigh', structured_output: true }), 'p', {
      rubric,
    }) as any;
    assert.equal(both.output_config.effort, 'xhigh');
    assert.equal(both.output_config.format.type, 'json_schema');
  });

  test('an entry that says nothing sends no thinking, no output_config, no sampling key', () => {
    const request = buildJudgeRequest(judge(), 'p', { rubric }) as any;
    assert.deepEqual(Object.keys(request).sort(), ['max_tokens', 'messages', 'model']);
  });

  test('the cache: 5m marks the prompt {type: "ephemeral"}, 1h adds ttl "1h"; none without', () => {
    const lastBlock = (cache?: '5m' | '1h') => {
      const request = buildJudgeRequest(judge(), 'p', { cache }) as any;
      const content = request.messages[0].content;
      return Array.isArray(content) ? content.at(-1).cache_control : undefined;
    };
    assert.deepEqual(lastBlock('5m'), { type: 'ephemeral' });
    assert.deepEqual(lastBlock('1h'), { type: 'ephemeral', ttl: '1h' });
    assert.equal(lastBlock(), undefined);
  });

  test('through the SDK to the fake: thinking and effort arrive as sent', async (t) => {
    const fake = await startFake(t);
    const config = { thinking: 'adaptive', effort: 'medium' } as const;
    const called = await judgeAt(fake.url, config);
    await callWith(called);
    assert.deepEqual(fake.requests[0]!.body.thinking, { type: 'adaptive' });
    assert.deepEqual(fake.requests[0]!.body.output_config, { effort: 'medium' });
  });

  test('manual thinking {type: "enabled"} on claude-opus-4-7: the fake answers 400 as the API does', async (t) => {
    const fake = await startFake(t);
    const called = await judgeAt(fake.url, { model: 'claude-opus-4-7' });
    const request = buildJudgeRequest(called, 'p', { rubric }) as any;
    request.thinking = { type: 'enabled', budget_tokens: 2048 };
    await assert.rejects(callJudge(called, request), (error: Error) => {
      assert.equal(error.name, 'EvalInputError');
      assert.match(error.message, /HTTP 400 invalid_request_error: .*thinking\.type\.adaptive/);
      return true;
    });
  });
});

describe("judge settings: the judge's thinking is kept beside its answer, never parsed as it", () => {
  test('thinking blocks: their text in answer.thinking, the text alone is the answer', async (t) => {
    const fake = await startFake(t);
    fake.enqueue({ text: fake.validAnswer(), thinking: ['first I read', 'then I score'] });
    const answer = await callWith(await judgeAt(fake.url, { thinking: 'adaptive' }));
    assert.equal(answer.thinking, 'first I read\n\nthen I score');
    assert.equal(answer.text, fake.validAnswer());
    assert.equal(verdictFromAnswer(answer, rubric).notes, 'ok');
  });

  test('thinking asked for and none given back (adaptive thinking may skip it): no thinking field', async (t) => {
    const fake = await startFake(t);
    fake.enqueue({ text: fake.validAnswer(), thinking: false });
    const answer = await callWith(await judgeAt(fake.url, { thinking: 'adaptive' }));
    assert.equal(answer.thinking, undefined);
    assert.equal(verdictFromAnswer(answer, rubric).notes, 'ok');
  });

  test('redacted thinking blocks are counted, never read; the text is still the answer', async (t) => {
    const fake = await startFake(t);
    fake.enqueue({ text: fake.validAnswer(), thinking: ['visible'], redactedThinking: 2 });
    const answer = await callWith(await judgeAt(fake.url, { thinking: 'adaptive' }));
    assert.equal(answer.redactedThinking, 2);
    assert.equal(answer.thinking, 'visible');
    assert.equal(verdictFromAnswer(answer, rubric).notes, 'ok');
  });

  const thinkingOnly: [string, Reply][] = [
    ['thinking only', { text: '', thinking: ['I would give 2 everywhere'] }],
    ['redacted thinking only', { text: '', thinking: false, redactedThinking: 1 }],
  ];
  for (const [label, reply] of thinkingOnly) {
    test(`${label}, no text: unusable, saying so (never a score read from the thinking)`, async (t) => {
      const fake = await startFake(t);
      fake.enqueue(reply);
      const answer = await callWith(await judgeAt(fake.url, { thinking: 'adaptive' }));
      assert.throws(() => verdictFromAnswer(answer, rubric), {
        name: 'EvalJudgeResponseError',
        message: /unusable answer: the answer holds thinking only, no text to score/,
      });
    });
  }

  test('cut off by max_tokens after thinking: unusable, and the message says to raise max_tokens', async (t) => {
    const fake = await startFake(t);
    fake.enqueue({ text: '{"scores": {', thinking: ['long thoughts'], stopReason: 'max_tokens' });
    const answer = await callWith(await judgeAt(fake.url, { thinking: 'adaptive' }));
    assert.throws(() => verdictFromAnswer(answer, rubric), {
      name: 'EvalJudgeResponseError',
      message: /cut off by max_tokens: thinking counts against it; raise max_tokens/,
    });
  });
});

describe('usage: counts are known or the answer says its usage is unreadable (its cost unknown)', () => {
  const unreadable: [string, unknown][] = [
    ['missing', null],
    ['without output_tokens', { input_tokens: 100 }],
    ['a negative count', { input_tokens: -1, output_tokens: 20 }],
    ['a fraction', { input_tokens: 1.5, output_tokens: 20 }],
    [
      'a cache read of 1e20',
      { input_tokens: 100, output_tokens: 20, cache_read_input_tokens: 1e20 },
    ],
    ['a count as a string', { input_tokens: '100', output_tokens: 20 }],
    [
      'cache writes by lifetime that do not add up',
      {
        input_tokens: 1,
        output_tokens: 1,
        cache_creation_input_tokens: 10,
        cache_creation: { ephemeral_5m_input_tokens: 3, ephemeral_1h_input_tokens: 3 },
      },
    ],
  ];
  for (const [label, usage] of unreadable) {
    test(`usage ${label}: answer.usage undefined, the raw usage kept`, async (t) => {
      const fake = await startFake(t);
      fake.enqueue({ text: fake.validAnswer(), usage });
      const answer = await callWith(await judgeAt(fake.url));
      assert.equal(answer.usage, undefined);
      assert.deepEqual(answer.rawUsage, usage);
    });
  }

  test('cache writes split by lifetime are kept with the counts', async (t) => {
    const fake = await startFake(t);
    const usage = {
      input_tokens: 1,
      output_tokens: 2,
      cache_creation_input_tokens: 10,
      cache_read_input_tokens: 0,
      cache_creation: { ephemeral_5m_input_tokens: 4, ephemeral_1h_input_tokens: 6 },
    };
    fake.enqueue({ text: fake.validAnswer(), usage });
    const answer = await callWith(await judgeAt(fake.url));
    assert.deepEqual(answer.usage, {
      input_tokens: 1,
      output_tokens: 2,
      cache_creation_input_tokens: 10,
      cache_creation: { ephemeral_5m_input_tokens: 4, ephemeral_1h_input_tokens: 6 },
    });
  });
});
