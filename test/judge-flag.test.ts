// Judges named on the command line: `--judge PROVIDER/MODEL` (repeatable: the chain in order), each
// with models.json's settings for its model id or the defaults, and refused where the two disagree.
// Every call goes through the real SDKs to the loopback fakes.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { describe, test } from 'node:test';
import type { TestContext } from 'node:test';
import { FakeOpenAi } from '../fakes/openai.ts';
import type { FakeOpenAiOptions } from '../fakes/openai.ts';
import { CLI_KEY, csvRows, judgeEntry, readLog, setup, snapshot, tagOf } from './helpers.ts';

const OPENAI_KEY = 'sk-proj-flag-test-key-7';

async function startOpenAi(t: TestContext, opts: FakeOpenAiOptions = {}) {
  const fake = await FakeOpenAi.start(opts);
  t.after(() => fake.close());
  return fake;
}

/** The environment of a run against the OpenAI fake: none of the process's OpenAI settings. */
const openAiEnv = (extra: Record<string, string | undefined> = {}) => ({
  OPENAI_API_KEY: undefined,
  OPENAI_BASE_URL: undefined,
  ...extra,
});

describe('--judge anthropic/MODEL', () => {
  test("a model models.json does not name: the defaults (max_tokens 2048, the answer's schema, ANTHROPIC_API_KEY), said on stderr", async (t) => {
    const { fake, ws, run } = await setup(t, {}, { models: 1, tasks: ['proof01'] });
    const result = await run(['--judge', 'anthropic/judge-x']);
    assert.equal(result.code, 0, result.stderr);
    assert.match(
      result.stderr,
      /^run-judge: judges named by --judge: anthropic\/judge-x \(the defaults\)$/m,
    );
    assert.equal(fake.requests.length, 1);
    const request = fake.requests[0]!;
    assert.equal(request.body.model, 'judge-x');
    assert.equal(request.body.max_tokens, 2048);
    assert.equal(request.body.output_config.format.type, 'json_schema');
    assert.ok(String(request.headers.authorization).endsWith(CLI_KEY), 'ANTHROPIC_API_KEY sent');
    assert.match(result.stderr, /rows by judge: judge-x 1/);
    const [line] = readLog(ws.log);
    assert.equal(line!.judge, 'judge-x');
    assert.equal(line!.answers[0]!.provider, 'anthropic');
  });

  test("repeated, the chain in order: a named model models.json has an entry for takes that entry's settings", async (t) => {
    const { fake, run } = await setup(
      t,
      {
        responder: (request) => {
          return request.body?.model === 'judge-x' ? { text: 'no json here' } : undefined;
        },
      },
      { models: 1, tasks: ['proof01'] },
    );
    const result = await run(['--judge', 'anthropic/judge-x', '--judge', 'anthropic/judge-b']);
    assert.equal(result.code, 0, result.stderr);
    assert.match(
      result.stderr,
      /judges named by --judge: anthropic\/judge-x \(the defaults\), anthropic\/judge-b \(its entry in .*models\.json\)/,
    );
    const models = fake.requests.map((request) => request.body.model);
    assert.deepEqual(
      models,
      ['judge-x', 'judge-b'],
      'judge-a, the models.json primary, is not asked',
    );
    assert.equal(fake.requests[0]!.body.max_tokens, 2048);
    assert.equal(fake.requests[1]!.body.max_tokens, 512, "judge-b's entry");
    assert.match(result.stderr, /rows by judge: judge-b 1 \(fallback\)/);

    const primaryOnly = await run([
      '--judge',
      'anthropic/judge-x',
      '--judge',
      'anthropic/judge-b',
      '--no-fallback',
      '--rescore',
    ]);
    assert.equal(primaryOnly.code, 1, primaryOnly.stderr);
    assert.deepEqual(
      fake.requests.slice(2).map((request) => request.body.model),
      ['judge-x'],
    );
  });

  test("a price models.json gives the model id (a judge entry's prices by id) is the named judge's", async (t) => {
    const prices = { 'judge-a': { input: 1, output: 1 }, 'judge-x': { input: 5, output: 25 } };
    const { ws, run } = await setup(
      t,
      {},
      {
        models: 1,
        tasks: ['proof01'],
        judge: judgeEntry('judge-a', { price_usd_per_mtok: prices }),
      },
    );
    const result = await run(['--judge', 'anthropic/judge-x']);
    assert.equal(result.code, 0, result.stderr);
    const [line] = readLog(ws.log);
    const usage = line!.answers[0]!.usage!;
    const expected = (usage.input_tokens * 5 + usage.output_tokens * 25) / 1e6;
    assert.ok(Math.abs(line!.cost_usd! - expected) < 1e-12, `${line!.cost_usd} vs ${expected}`);
  });

  test('no models.json at all: the named judges alone, said so', async (t) => {
    const { ws, run } = await setup(t, {}, { models: 1, tasks: ['proof01'] });
    fs.rmSync(ws.models);
    const result = await run(['--judge', 'anthropic/judge-x']);
    assert.equal(result.code, 0, result.stderr);
    assert.ok(
      result.stderr.includes(`anthropic/judge-x (the defaults) (no ${ws.models})`),
      result.stderr,
    );
    assert.equal(csvRows(ws.output).length, 1);
  });

  test('the dry-run takes the named judges too: their prompt and estimate, no call', async (t) => {
    const { fake, ws, run } = await setup(t, {}, { models: 1, tasks: ['proof01'] });
    const before = snapshot(ws.dir);
    const result = await run(['--dry-run', '--judge', 'anthropic/judge-x'], { apiKey: null });
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /^dry-run: judges named by --judge: anthropic\/judge-x/m);
    assert.match(result.stderr, /no cost: judge-x has no price_usd_per_mtok/);
    assert.equal(fake.requests.length, 0);
    assert.deepEqual(snapshot(ws.dir), before);
  });
});

describe('--judge openai/MODEL and openai-compatible/MODEL', () => {
  test("openai/: Chat Completions with OPENAI_API_KEY as a bearer token, at OPENAI_BASE_URL; the defaults' max_completion_tokens", async (t) => {
    const openAi = await startOpenAi(t, { key: OPENAI_KEY });
    const { fake, ws, run } = await setup(t, {}, { models: 1, tasks: ['proof01'] });
    const env = openAiEnv({ OPENAI_API_KEY: OPENAI_KEY, OPENAI_BASE_URL: openAi.url });
    const result = await run(['--judge', 'openai/gpt-test'], { env });
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.requests.length, 0);
    assert.equal(openAi.requests.length, 1);
    const request = openAi.requests[0]!;
    assert.equal(request.headers.authorization, `Bearer ${OPENAI_KEY}`);
    assert.equal(request.body.model, 'gpt-test');
    assert.equal(request.body.max_completion_tokens, 2048);
    assert.equal(request.body.response_format.type, 'json_schema');
    const [line] = readLog(ws.log);
    assert.equal(line!.answers[0]!.provider, 'openai');
    assert.equal(line!.answers[0]!.family, 'openai');
  });

  test('openai-compatible/ with --judge-base-url: no key sent, the family read off the model id and said', async (t) => {
    const openAi = await startOpenAi(t);
    const { ws, run } = await setup(t, {}, { models: 1, tasks: ['proof01'] });
    const result = await run(
      ['--judge', 'openai-compatible/qwen2.5:7b', '--judge-base-url', openAi.url],
      { env: openAiEnv({ OPENAI_API_KEY: OPENAI_KEY }) },
    );
    assert.equal(result.code, 0, result.stderr);
    assert.match(
      result.stderr,
      /judges named by --judge: openai-compatible\/qwen2\.5:7b \(the defaults; family qwen, from its id\)/,
    );
    assert.equal(openAi.requests.length, 1);
    assert.equal(openAi.requests[0]!.headers.authorization, undefined, 'no key to another server');
    assert.equal(openAi.requests[0]!.body.model, 'qwen2.5:7b');
    const [line] = readLog(ws.log);
    assert.equal(line!.answers[0]!.family, 'qwen');
  });

  test('openai-compatible/ at OPENAI_BASE_URL, the variable of its provider', async (t) => {
    const openAi = await startOpenAi(t);
    const { run } = await setup(t, {}, { models: 1, tasks: ['proof01'] });
    const env = openAiEnv({ OPENAI_BASE_URL: openAi.url });
    const result = await run(['--judge', 'openai-compatible/llama3.3:70b'], { env });
    assert.equal(result.code, 0, result.stderr);
    assert.equal(openAi.requests.length, 1);
    assert.equal(tagOfChat(openAi.requests[0]!.body), 'm01/proof01');
  });

  test('openai-compatible/ with no server named: exit 2 before any call, saying what to pass', async (t) => {
    const { fake, run } = await setup(t, {}, { models: 1, tasks: ['proof01'] });
    const result = await run(['--judge', 'openai-compatible/qwen2.5:7b'], { env: openAiEnv() });
    assert.equal(result.code, 2, result.stderr);
    assert.equal(
      result.stderr,
      'run-judge: --judge openai-compatible/qwen2.5:7b needs its server: pass --judge-base-url URL ' +
        '(http://localhost:11434/v1 for a local Ollama) or set OPENAI_BASE_URL\n',
    );
    assert.equal(fake.requests.length, 0);
  });
});

describe('--judge and models.json cannot disagree silently', () => {
  const refusals = [
    {
      label: 'another provider than its entry',
      args: ['--judge', 'openai/judge-a'],
      env: {},
      message:
        /--judge openai\/judge-a: the entry for judge-a in .*models\.json has "provider": "anthropic"; name it anthropic\/judge-a, or change the entry/,
    },
    {
      label: "its entry's model_env set to another model id",
      args: ['--judge', 'anthropic/judge-a'],
      env: { JUDGE_MODEL: 'judge-z' },
      message:
        /--judge anthropic\/judge-a: JUDGE_MODEL=judge-z makes the entry for judge-a in .* judge with judge-z; unset JUDGE_MODEL, or name judge-z/,
    },
    {
      label: '--judge-base-url and the entry\'s "base_url" differ',
      args: ['--judge', 'openai-compatible/judge-o', '--judge-base-url', 'http://127.0.0.1:9/v1'],
      env: {},
      message:
        /--judge openai-compatible\/judge-o: --judge-base-url http:\/\/127\.0\.0\.1:9\/v1 and the entry for judge-o in .* \("base_url": "http:\/\/127\.0\.0\.1:8\/v1"\) disagree; drop one/,
    },
    {
      label: '--judge-base-url without an openai-compatible/ judge',
      args: ['--judge', 'anthropic/judge-a', '--judge-base-url', 'http://127.0.0.1:9/v1'],
      env: {},
      message:
        /--judge-base-url is the server of the openai-compatible\/ judges: name one with --judge openai-compatible\/MODEL/,
    },
  ];
  for (const { label, args, env, message } of refusals) {
    test(`${label}: exit 2 before any call, naming both`, async (t) => {
      const openEntry = {
        provider: 'openai',
        model: 'judge-o',
        base_url: 'http://127.0.0.1:8/v1',
        temperature: null,
        max_tokens: 100,
      };
      const { fake, ws, run } = await setup(
        t,
        {},
        {
          models: 1,
          tasks: ['proof01'],
          judge: judgeEntry('judge-a', { model_env: 'JUDGE_MODEL' }),
          fallbacks: [openEntry as never],
        },
      );
      const before = snapshot(ws.dir);
      const result = await run(args, { env });
      assert.equal(result.code, 2, result.stderr);
      assert.match(result.stderr, message);
      assert.equal(fake.requests.length, 0);
      assert.deepEqual(snapshot(ws.dir), before);
    });
  }

  test('a value that is not PROVIDER/MODEL: a usage error naming the providers', async (t) => {
    const { run } = await setup(t, {}, { models: 1, tasks: ['proof01'] });
    for (const value of ['gpt-4o', 'bedrock/claude', 'anthropic/']) {
      const result = await run(['--judge', value]);
      assert.equal(result.code, 2, result.stderr);
      assert.match(
        result.stderr,
        /must be PROVIDER\/MODEL, PROVIDER one of anthropic, openai, openai-compatible/,
      );
    }
  });

  test('models.json names the model id through model_env, set to it: that entry is used', async (t) => {
    const { fake, run } = await setup(
      t,
      {},
      {
        models: 1,
        tasks: ['proof01'],
        judge: judgeEntry('judge-a', { model_env: 'JUDGE_MODEL', max_tokens: 333 }),
      },
    );
    const result = await run(['--judge', 'anthropic/judge-z'], { env: { JUDGE_MODEL: 'judge-z' } });
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.requests[0]!.body.model, 'judge-z');
    assert.equal(fake.requests[0]!.body.max_tokens, 333);
  });
});

/** The "model/task" tag of a Chat Completions body: its first message's text. */
function tagOfChat(body: any): string | undefined {
  return tagOf({ body: { messages: body.messages } } as never);
}
