// A cache of paid answers: every usable answer is kept in the audit log by the key of its request;
// a run that would send a request an audit log in --output's folder holds takes the answer from
// there, says so, and pays nothing for it. Counted at the loopback fakes, through the real SDKs.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { FakeOpenAi } from '../fakes/openai.ts';
import { csvRows, judgeEntry, makeWorkspace, readLog, runMain, setup, tagOf } from './helpers.ts';
import type { LogEntry, Workspace } from './helpers.ts';

const PRICE = { input: 5, output: 25 };

/** A workspace whose judge is priced, so that each answer has a cost to reuse. */
const priced = { judge: judgeEntry('judge-a', { price_usd_per_mtok: PRICE }) };

/** A second output beside the first, and its log. */
function second(ws: Workspace, name = 'second'): { output: string; log: string; args: string[] } {
  const output = path.join(path.dirname(ws.output), `${name}.csv`);
  const log = path.join(path.dirname(ws.output), `${name}.jsonl`);
  return { output, log, args: ['--output', output, '--log', log] };
}

/** The rows' scores and notes by "model/task". */
const rowsOf = (file: string) => new Map(csvRows(file).map((row) => [row.key, row.record]));

/** Every answer of the lines, with its line's transcript. */
const answersOf = (lines: LogEntry[]) =>
  lines.flatMap((line) =>
    line.answers.map((answer) => ({ pair: `${line.model}/${line.task_id}`, answer })),
  );

describe('a second run with the same judge takes the answers the audit logs hold', () => {
  test('into a new --output: no request, the same rows; each answer marked cached with its original request id and cost, $0 now; the summary says how many', async (t) => {
    const { fake, ws, run } = await setup(t, {}, priced);
    const first = await run();
    assert.equal(first.code, 0, first.stderr);
    assert.equal(fake.requests.length, 6);
    const paid = readLog(ws.log);

    const again = second(ws);
    const result = await run(again.args);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.requests.length, 6, 'no request sent');
    assert.deepEqual(rowsOf(again.output), rowsOf(ws.output));

    const original = new Map(
      answersOf(paid).map(({ pair, answer }) => [
        pair,
        { answer, line: paid.find((l) => `${l.model}/${l.task_id}` === pair)! },
      ]),
    );
    const lines = readLog(again.log);
    assert.equal(lines.length, 6);
    let before = 0;
    for (const line of lines) {
      const pair = `${line.model}/${line.task_id}`;
      const then = original.get(pair)!;
      const [answer] = line.answers;
      assert.equal(line.status, 'scored');
      assert.equal(line.cost_usd, 0, 'nothing paid in this run');
      assert.deepEqual(Object.values(line.usage), [0, 0, 0, 0], 'no token read in this run');
      assert.deepEqual(answer!.cached, {
        run_id: then.line.run_id,
        cost_usd: then.answer.cost_usd,
      });
      assert.ok(then.answer.cost_usd! > 0);
      assert.equal(answer!.cost_usd, 0);
      assert.equal(answer!.request_id, then.answer.request_id);
      assert.equal(answer!.request_key, then.answer.request_key);
      assert.equal(answer!.text, then.answer.text);
      assert.equal(answer!.latency_ms, 0);
      before += then.answer.cost_usd!;
    }
    assert.ok(
      result.stderr.includes(
        `reused 6 answer(s) the audit logs in ${path.dirname(ws.output)} hold ($${before.toFixed(4)} when paid for, $0 now); --no-cache sends such requests again`,
      ),
      result.stderr,
    );
    assert.match(result.stderr, /cost \$0\.0000/);
  });

  test('each answer records its request: the key and the settings, as a person reads them', async (t) => {
    const { fake, ws, run } = await setup(t, {}, { models: 1, tasks: ['proof01'], ...priced });
    assert.equal((await run()).code, 0);
    const [answer] = readLog(ws.log)[0]!.answers;
    assert.match(answer!.request_key!, /^[0-9a-f]{64}$/);
    assert.deepEqual(answer!.request, {
      provider: 'anthropic',
      server: fake.url,
      model: 'judge-a',
      max_tokens: 512,
      temperature: null,
      thinking: null,
      effort: null,
      reasoning_effort: null,
      structured_output: false,
      cache_ttl: null,
      sample: 1,
    });
    assert.equal(answer!.cached, undefined);
  });

  test('--no-cache sends every request again', async (t) => {
    const { fake, ws, run } = await setup(t, {}, priced);
    assert.equal((await run()).code, 0);
    const result = await run([...second(ws).args, '--no-cache']);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.requests.length, 12);
    assert.doesNotMatch(result.stderr, /reused/);
    assert.ok(readLog(second(ws).log).every((line) => line.answers[0]!.cached === undefined));
  });

  test('--rescore judges again: it takes no answer from the audit logs', async (t) => {
    const { fake, run } = await setup(t, {}, priced);
    assert.equal((await run()).code, 0);
    const result = await run(['--rescore']);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.requests.length, 12);
    assert.doesNotMatch(result.stderr, /reused/);
  });
});

describe('never a stale answer, never a failure', () => {
  test('the key covers every input: an edited transcript, another max_tokens, another judge are sent; the rest is reused', async (t) => {
    const { fake, ws, run } = await setup(t, {}, priced);
    assert.equal((await run()).code, 0);

    // one transcript edited: its request alone is sent
    const edited = path.join(ws.transcripts, 'm01', 'proof02.json');
    const transcript = JSON.parse(fs.readFileSync(edited, 'utf8'));
    transcript.messages.push({ role: 'user', content: 'one more line' });
    fs.writeFileSync(edited, JSON.stringify(transcript));
    const one = await run(second(ws, 'edited').args);
    assert.equal(one.code, 0, one.stderr);
    assert.deepEqual(fake.requests.slice(6).map(tagOf), ['m01/proof02']);

    // another max_tokens: every request is another
    const models = JSON.parse(fs.readFileSync(ws.models, 'utf8'));
    models.judge.max_tokens = 600;
    fs.writeFileSync(ws.models, JSON.stringify(models));
    const settings = await run(second(ws, 'max600').args);
    assert.equal(settings.code, 0, settings.stderr);
    assert.equal(fake.requests.length, 7 + 6);

    // another judge: the same
    const other = await run([...second(ws, 'judgex').args, '--judge', 'anthropic/judge-x']);
    assert.equal(other.code, 0, other.stderr);
    assert.equal(fake.requests.length, 13 + 6);
  });

  test('an answer that failed is never reused: its request is sent again; the usable ones are taken', async (t) => {
    let garbage = true;
    const { fake, ws, run } = await setup(
      t,
      {
        responder: (request) => {
          const bad =
            garbage && tagOf(request) === 'm01/proof01' && request.body?.model === 'judge-a';
          return bad ? { text: 'no json here' } : undefined;
        },
      },
      priced,
    );
    assert.equal((await run()).code, 0); // judge-b, the fallback, scored m01/proof01
    assert.equal(fake.requests.length, 7);
    garbage = false;

    const result = await run(second(ws).args);
    assert.equal(result.code, 0, result.stderr);
    const sent = fake.requests.slice(7);
    assert.deepEqual(
      sent.map((request) => `${request.body.model} ${tagOf(request)}`),
      ['judge-a m01/proof01'],
      'the failed answer is asked again, of the primary judge',
    );
    assert.match(result.stderr, /reused 5 answer\(s\)/);
  });

  test('a logged answer that no longer parses (its text edited) is not taken: its request is sent', async (t) => {
    const { fake, ws, run } = await setup(
      t,
      {},
      { models: 1, tasks: ['proof01', 'proof02'], ...priced },
    );
    assert.equal((await run()).code, 0);
    const lines = fs.readFileSync(ws.log, 'utf8').split('\n');
    const entry = JSON.parse(lines[0]!);
    entry.answers[0].text = 'not an answer';
    lines[0] = JSON.stringify(entry);
    fs.writeFileSync(ws.log, lines.join('\n'));

    const result = await run(second(ws).args);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(fake.requests.slice(2).map(tagOf), [`${entry.model}/${entry.task_id}`]);
  });

  test('the cache is the audit log, as durable: a torn last line (a crash mid-write) is sent again, the others taken', async (t) => {
    const { fake, ws, run } = await setup(t, {}, priced);
    assert.equal((await run(['--concurrency', '1'])).code, 0);
    const text = fs.readFileSync(ws.log, 'utf8');
    const lastStart = text.lastIndexOf('\n', text.length - 2) + 1;
    fs.writeFileSync(ws.log, text.slice(0, lastStart + 40)); // the last line cut mid-way
    const torn = JSON.parse(text.slice(lastStart));

    const result = await run(second(ws).args);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(fake.requests.slice(6).map(tagOf), [`${torn.model}/${torn.task_id}`]);
  });

  test('--samples: each sample its own key; 3 then 3 sends nothing, then 4 sends the fourth alone', async (t) => {
    const { fake, ws, run } = await setup(t, {}, { models: 1, tasks: ['proof01'], ...priced });
    assert.equal((await run(['--samples', '3'])).code, 0);
    assert.equal(fake.requests.length, 3);
    const three = await run([...second(ws, 'three').args, '--samples', '3']);
    assert.equal(three.code, 0, three.stderr);
    assert.equal(fake.requests.length, 3);
    const samples = readLog(second(ws, 'three').log)[0]!.answers.map((a) => a.request!.sample);
    assert.deepEqual(samples.sort(), [1, 2, 3]);

    const four = await run([...second(ws, 'four').args, '--samples', '4']);
    assert.equal(four.code, 0, four.stderr);
    assert.equal(fake.requests.length, 4);
    assert.match(four.stderr, /reused 3 answer\(s\)/);
  });
});

describe('the cache with --batch and with an OpenAI judge', () => {
  test('--batch: transcripts whose answers are all held are taken, never batched', async (t) => {
    const { ws, run, http } = await setup(t, { clock: true }, priced);
    assert.equal((await run()).code, 0);
    const sentBefore = http.length;
    const result = await run([...second(ws).args, '--batch', '--poll-interval', '0.01']);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(http.slice(sentBefore), [], 'no batch made, no request');
    assert.equal(csvRows(second(ws).output).length, 6);
  });

  test("a batch's answers are kept by the key of their request too: a later run without --batch sends nothing", async (t) => {
    const { fake, ws, run, http } = await setup(t, { clock: true }, priced);
    const batched = await run(['--batch', '--poll-interval', '0.01']);
    assert.equal(batched.code, 0, batched.stderr);
    assert.ok(http.includes('POST /v1/messages/batches'), http.join('\n'));
    const [answer] = readLog(ws.log)[0]!.answers;
    assert.match(answer!.request_key!, /^[0-9a-f]{64}$/);
    assert.equal(answer!.request!.sample, 1);

    const result = await run(second(ws).args);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.requests.length, 0, 'no message sent');
    assert.match(result.stderr, /reused 6 answer\(s\)/);
    assert.deepEqual(rowsOf(second(ws).output), rowsOf(ws.output));
  });

  test('an OpenAI judge: the second run sends nothing to the server', async (t) => {
    const openAi = await FakeOpenAi.start();
    t.after(() => openAi.close());
    const entry = {
      provider: 'openai',
      model: 'gpt-test',
      base_url: openAi.url,
      temperature: 0,
      max_tokens: 300,
      structured_output: true,
      price_usd_per_mtok: { input: 1, output: 2 },
    };
    const ws = makeWorkspace({ models: 1, modelsJson: { judge: entry } });
    t.after(() => ws.remove());
    const env = { env: { OPENAI_API_KEY: undefined, OPENAI_BASE_URL: undefined } };
    assert.equal((await runMain(ws.args(), env)).code, 0);
    assert.equal(openAi.requests.length, 3);
    const result = await runMain(ws.args(...second(ws).args), env);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(openAi.requests.length, 3);
    const [answer] = readLog(second(ws).log)[0]!.answers;
    assert.equal(answer!.request!.provider, 'openai');
    assert.equal(answer!.request!.temperature, 0);
    assert.match(answer!.cached!.run_id, /^[0-9a-f-]{36}$/);
  });
});
