// The fake's limiters (token buckets `buckets`, a fixed window `rateLimit`, and what they tell, `limiterHeaders`),
// driven through plain fetch: no SDK, no run-judge. Each test takes well under a second. The limiters run on a clock
// of the test's own, which moves only when the test moves it: exact figures however busy the machine (on the real
// clock a burst sent slowly refilled as it went, and 7 of 8 got through where 5 should).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { FakeAnthropic, IMAGE_TOKENS, countInputTokens } from '../fakes/anthropic.ts';
import type { FakeOptions } from '../fakes/anthropic.ts';

const DIMS = { dimensions: ['clarity'] };

async function startFake(t: TestContext, opts: FakeOptions): Promise<FakeAnthropic> {
  const fake = await FakeAnthropic.start({ ...DIMS, ...opts });
  t.after(() => fake.close());
  return fake;
}

interface Answered {
  status: number;
  headers: Headers;
  body: any;
  sentAt: number; // Date.now() before the request was sent
  doneAt: number; // Date.now() once the body was read
}

async function post(fake: FakeAnthropic, body: object): Promise<Answered> {
  const sentAt = Date.now();
  const res = await fetch(`${fake.url}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'judge', max_tokens: 64, ...body }),
  });
  return {
    status: res.status,
    headers: res.headers,
    body: await res.json(),
    sentAt,
    doneAt: Date.now(),
  };
}

/** A one-message request of `chars` characters: ceil(chars / 4) input tokens. */
const prompt = (chars: number) => ({ messages: [{ role: 'user', content: 'p'.repeat(chars) }] });
const header = (answer: Answered, name: string) =>
  answer.headers.get(`anthropic-ratelimit-${name}`);
const remaining = (answer: Answered, bucket: string) =>
  Number(header(answer, `${bucket}-remaining`));
/** Seconds from `now` on the fake's clock to the answer's `-reset`. */
const resetInS = (answer: Answered, bucket: string, now: number) =>
  (Date.parse(header(answer, `${bucket}-reset`)!) - now) / 1000;
/**
 * A clock of the test's own: it stands still until the test moves it, so nothing refills while a
 * busy machine sends the requests and the figures are exact.
 */
function testClock() {
  const clock = {
    ms: Date.parse('2026-01-01T00:00:00.000Z'),
    now: () => clock.ms,
  };
  return clock;
}
const cached = (text: string) => ({ type: 'text', text, cache_control: { type: 'ephemeral' } });

describe('fake-anthropic token buckets', () => {
  test('a burst beyond capacity: the excess gets 429 at once, with retry-after the refill time of one request', async (t) => {
    const fake = await startFake(t, {
      buckets: { requests: { capacity: 5, perSecond: 2 } },
      clock: testClock(),
    });
    const answers = await Promise.all(Array.from({ length: 8 }, () => post(fake, prompt(40))));
    const ok = answers.filter((a) => a.status === 200);
    const limited = answers.filter((a) => a.status === 429);
    assert.equal(ok.length, 5);
    assert.equal(limited.length, 3);
    assert.equal(fake.count429, 3);
    assert.equal(fake.requests.length, 8);
    assert.equal(fake.charged.requests, 5, 'a refused request takes nothing');
    for (const answer of limited) {
      assert.equal(answer.body.error.type, 'rate_limit_error');
      const retryAfter = Number(answer.headers.get('retry-after'));
      // The bucket is empty: one request refills in 1/2 s (2 a second).
      assert.equal(retryAfter, 0.5);
      assert.equal(remaining(answer, 'requests'), 0);
    }
  });

  test('a 429 is answered at once, not after the latency', async (t) => {
    // On the test's clock the bucket does not refill; the admitted request's answer takes a minute.
    const fake = await startFake(t, {
      latencyMs: 60_000,
      buckets: { requests: { capacity: 1, perSecond: 0.5 } },
      clock: testClock(),
    });
    const pending = post(fake, prompt(4)).catch(() => undefined); // admitted: cut by close()
    while (fake.requests.length < 1) await sleep(2);
    // a guard far below the latency and far above any machine's delay
    const guard = sleep(20_000, undefined, { ref: false });
    const refused = await Promise.race([post(fake, prompt(4)), guard]);
    assert.equal(refused?.status, 429, 'answered long before the admitted request');
    await fake.close();
    await pending;
  });

  test('a refused request takes nothing: a smaller one that fits still passes', async (t) => {
    const fake = await startFake(t, {
      buckets: { inputTokens: { capacity: 100, perSecond: 50 } },
      clock: testClock(),
    });
    const first = await post(fake, prompt(320)); // 80 tokens
    assert.equal(first.status, 200);
    assert.equal(remaining(first, 'input-tokens'), 20);
    assert.equal(
      header(first, 'tokens-limit'),
      null,
      'tokens-* only when both token buckets exist',
    );
    assert.equal(header(first, 'requests-limit'), null, 'headers only for the buckets configured');
    const refused = await post(fake, prompt(320));
    assert.equal(refused.status, 429);
    // 80 tokens wanted, 20 held, 50 a second
    assert.equal(Number(refused.headers.get('retry-after')), 1.2);
    const small = await post(fake, prompt(40)); // 10 tokens
    assert.equal(small.status, 200, 'the 429 took nothing from the bucket');
    assert.deepEqual(fake.charged, {
      requests: 2,
      inputTokens: 90,
      cacheReadTokens: 0,
      outputTokens: 40,
    });
  });

  test('every answer, 200 and 429, carries limit, remaining and reset for each bucket, consistent with each other', async (t) => {
    const buckets = {
      requests: { capacity: 4, perSecond: 1 },
      inputTokens: { capacity: 1000, perSecond: 500 },
      outputTokens: { capacity: 100, perSecond: 50 },
    };
    const clock = testClock();
    const fake = await startFake(t, { buckets, clock });
    const answers: Answered[] = [];
    for (let i = 0; i < 6; i++) answers.push(await post(fake, prompt(400))); // 100 input tokens, 20 output each
    assert.deepEqual(
      answers.map((a) => a.status),
      [200, 200, 200, 200, 429, 429],
    );
    assert.deepEqual(
      answers.map((a) => remaining(a, 'requests')),
      [3, 2, 1, 0, 0, 0],
    );
    const names = {
      requests: 'requests',
      inputTokens: 'input-tokens',
      outputTokens: 'output-tokens',
    } as const;
    for (const answer of answers) {
      for (const [key, bucket] of Object.entries(buckets)) {
        const name = names[key as keyof typeof names];
        assert.equal(header(answer, `${name}-limit`), String(bucket.capacity), name);
        const left = remaining(answer, name);
        assert.ok(
          Number.isInteger(left) && left >= 0 && left <= bucket.capacity,
          `${name} remaining ${left}`,
        );
        // reset is when the level is back at capacity
        assert.equal(
          resetInS(answer, name, clock.ms),
          (bucket.capacity - left) / bucket.perSecond,
          `${name}: remaining ${left} of ${bucket.capacity} at ${bucket.perSecond}/s`,
        );
      }
      // The tighter token bucket is output's (80 of 100 at most, against input's 900 of 1000 at most).
      assert.equal(header(answer, 'tokens-limit'), '100');
      assert.equal(header(answer, 'tokens-remaining'), header(answer, 'output-tokens-remaining'));
    }
    // 100 input and 20 output tokens an answer; a 429 takes none
    assert.deepEqual(
      answers.map((a) => remaining(a, 'input-tokens')),
      [900, 800, 700, 600, 600, 600],
    );
    assert.deepEqual(
      answers.map((a) => remaining(a, 'output-tokens')),
      [80, 60, 40, 20, 20, 20],
    );
    assert.ok(answers.slice(4).every((a) => a.headers.get('retry-after') !== null));
  });

  test('output tokens are taken when the answer is sent; a bucket driven below 1 refuses until it refills', async (t) => {
    const fake = await startFake(t, {
      buckets: { outputTokens: { capacity: 30, perSecond: 100 } },
      clock: testClock(),
      responder: (_req, i) =>
        i === 1 ? { text: 'long', usage: { input_tokens: 1, output_tokens: 45 } } : undefined,
    });
    const first = await post(fake, prompt(4));
    assert.equal(first.body.usage.output_tokens, 20);
    assert.equal(remaining(first, 'output-tokens'), 10, 'the answer took its 20 output tokens');
    const second = await post(fake, prompt(4)); // 10 held, 45 taken: the level goes negative
    assert.equal(second.status, 200);
    assert.equal(second.body.usage.output_tokens, 45, 'a scripted usage field wins');
    assert.equal(remaining(second, 'output-tokens'), 0);
    const third = await post(fake, prompt(4));
    assert.equal(third.status, 429);
    // 10 held after the first answer, 45 taken by the second: -35 held, 1 needed, 100 a second
    assert.equal(Number(third.headers.get('retry-after')), 0.36);
    assert.equal(fake.charged.outputTokens, 65);
  });

  test('the bucket refills continuously: half the refill time after a drain, about half the capacity is back', async (t) => {
    const clock = testClock();
    const fake = await startFake(t, {
      buckets: { requests: { capacity: 10, perSecond: 40 } }, // full in 0.25 s
      clock,
    });
    const burst = await Promise.all(Array.from({ length: 10 }, () => post(fake, prompt(4))));
    assert.ok(burst.every((a) => a.status === 200));
    assert.equal((await post(fake, prompt(4))).status, 429, 'drained');
    clock.ms += 125;
    const half = await post(fake, prompt(4)); // 5 back, this one takes 1
    assert.equal(half.status, 200, 'a fixed 250 ms window would still refuse here');
    assert.equal(remaining(half, 'requests'), 4);
    assert.equal(resetInS(half, 'requests', clock.ms), 0.15, 'full again once 6 refilled');
  });

  test('usage: characters / 4 rounded up over system and every text, 1,600 per image; no cache fields without cache_control', async (t) => {
    const fake = await startFake(t, {
      buckets: { inputTokens: { capacity: 10_000, perSecond: 1 } },
    });
    const body = {
      system: 'abc',
      messages: [
        { role: 'user', content: 'hello' },
        { role: 'assistant', content: [{ type: 'text', text: '1234567' }] },
        {
          role: 'user',
          content: [
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } },
            { type: 'text', text: 'xy' },
          ],
        },
      ],
    };
    const expected = Math.ceil((3 + 5 + 7 + 2) / 4) + IMAGE_TOKENS; // 17 characters: 5 tokens
    assert.equal(countInputTokens(body), expected);
    const answer = await post(fake, body);
    assert.equal(answer.status, 200);
    assert.deepEqual(answer.body.usage, {
      input_tokens: expected,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
      output_tokens: 20,
    });
    const systemBlocks = await post(fake, {
      system: [{ type: 'text', text: 'abcd' }],
      messages: [],
    });
    assert.equal(systemBlocks.body.usage.input_tokens, 1);
    assert.equal(fake.charged.inputTokens, expected + 1);
  });

  test('without buckets the usage stays the fixed default', async (t) => {
    const fake = await startFake(t, {});
    const answer = await post(fake, prompt(4000));
    assert.deepEqual(answer.body.usage, { input_tokens: 100, output_tokens: 20 });
    assert.equal(answer.headers.get('anthropic-ratelimit-requests-limit'), null);
  });

  test('the prompt cache: the first prefix up to the last cache_control is written, later ones read for free', async (t) => {
    const fake = await startFake(t, {
      buckets: { inputTokens: { capacity: 1000, perSecond: 0.1 } }, // no refill to speak of during the test
    });
    const withPrefix = (question: string) => ({
      system: [cached('s'.repeat(2000))], // 500 tokens
      messages: [{ role: 'user', content: question }],
    });
    const first = await post(fake, withPrefix('q'.repeat(400))); // 100 more
    assert.deepEqual(first.body.usage, {
      input_tokens: 100,
      cache_creation_input_tokens: 500,
      cache_read_input_tokens: 0,
      cache_creation: { ephemeral_5m_input_tokens: 500, ephemeral_1h_input_tokens: 0 },
      output_tokens: 20,
    });
    assert.equal(
      remaining(first, 'input-tokens'),
      400,
      'the cache write counts against the bucket',
    );
    const second = await post(fake, withPrefix('r'.repeat(200))); // another question, 50 tokens
    assert.deepEqual(second.body.usage, {
      input_tokens: 50,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 500,
      cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0 },
      output_tokens: 20,
    });
    assert.equal(remaining(second, 'input-tokens'), 350, 'the cache read is free');
    // The same text without cache_control is not cached: all 550 tokens are counted, more than the 350 held.
    const uncached = await post(fake, {
      system: [{ type: 'text', text: 's'.repeat(2000) }],
      messages: [{ role: 'user', content: 'r'.repeat(200) }],
    });
    assert.equal(uncached.status, 429);
    assert.ok(
      Number(uncached.headers.get('retry-after')) > 1900,
      '200 tokens short at 0.1 a second',
    );
    assert.deepEqual(fake.charged, {
      requests: 2,
      inputTokens: 650,
      cacheReadTokens: 500,
      outputTokens: 40,
    });
  });

  test('a request refused writes nothing to the prompt cache', async (t) => {
    const clock = testClock();
    const fake = await startFake(t, {
      buckets: { requests: { capacity: 1, perSecond: 5 } },
      clock,
    });
    assert.equal((await post(fake, prompt(4))).status, 200); // the bucket is empty for the next 200 ms
    const newPrefix = {
      system: [cached('n'.repeat(400))],
      messages: [{ role: 'user', content: 'q' }],
    };
    const refused = await post(fake, newPrefix);
    assert.equal(refused.status, 429);
    clock.ms += Number(refused.headers.get('retry-after')) * 1000;
    const admitted = await post(fake, newPrefix);
    assert.equal(admitted.status, 200);
    assert.equal(admitted.body.usage.cache_creation_input_tokens, 100);
    assert.equal(admitted.body.usage.cache_read_input_tokens, 0);
  });

  test('with several cache_control blocks, the longest prefix already written is read and the rest up to the last written', async (t) => {
    const fake = await startFake(t, {
      buckets: { inputTokens: { capacity: 10_000, perSecond: 1 } },
    });
    const system = [cached('a'.repeat(400))]; // 100 tokens
    await post(fake, { system, messages: [{ role: 'user', content: 'x' }] });
    const answer = await post(fake, {
      system,
      messages: [
        {
          role: 'user',
          content: [cached('b'.repeat(800)), { type: 'text', text: 'c'.repeat(40) }],
        },
      ],
    });
    assert.deepEqual(answer.body.usage, {
      input_tokens: 10,
      cache_creation_input_tokens: 200,
      cache_read_input_tokens: 100,
      cache_creation: { ephemeral_5m_input_tokens: 200, ephemeral_1h_input_tokens: 0 },
      output_tokens: 20,
    });
  });

  test('limiterHeaders retry-after: a 429 carries retry-after alone, and no answer any rate-limit header (a proxy)', async (t) => {
    let now = 1_000_000;
    const fake = await startFake(t, {
      buckets: { requests: { capacity: 2, perSecond: 4 } },
      limiterHeaders: 'retry-after',
      clock: { now: () => now },
    });
    const answers = [await post(fake, prompt(4)), await post(fake, prompt(4))];
    const refused = await post(fake, prompt(4));
    assert.deepEqual(
      [...answers, refused].map((a) => a.status),
      [200, 200, 429],
    );
    for (const answer of [...answers, refused]) {
      const named = [...answer.headers.keys()].filter((name) => name.includes('ratelimit'));
      assert.deepEqual(named, [], 'no rate-limit header');
    }
    assert.equal(answers[0]!.headers.get('retry-after'), null);
    assert.equal(refused.headers.get('retry-after'), '0.250', 'one request refills in 1/4 s');
    now += 250;
    assert.equal((await post(fake, prompt(4))).status, 200, 'the bucket still refills');
  });

  test('a fixed window (rateLimit): remaining counts down to the same reset, the excess gets 429 with retry-after until the window ends', async (t) => {
    let now = Date.parse('2026-01-01T00:00:00.000Z');
    const start = now;
    const fake = await startFake(t, {
      rateLimit: { limit: 3, windowMs: 1000 },
      clock: { now: () => now },
    });
    const answers: Answered[] = [];
    for (let i = 0; i < 4; i++) {
      answers.push(await post(fake, prompt(4)));
      now += 100;
    }
    assert.deepEqual(
      answers.map((a) => a.status),
      [200, 200, 200, 429],
    );
    assert.deepEqual(
      answers.map((a) => remaining(a, 'requests')),
      [2, 1, 0, 0],
    );
    for (const answer of answers) {
      assert.equal(header(answer, 'requests-limit'), '3');
      assert.equal(header(answer, 'requests-reset'), new Date(start + 1000).toISOString());
    }
    // Sent at 300 ms into the window, answered with what is left of it.
    assert.equal(answers[3]!.headers.get('retry-after'), '0.700');
    now = start + 1000;
    const next = await post(fake, prompt(4));
    assert.equal(next.status, 200, 'a new window');
    assert.equal(remaining(next, 'requests'), 2);
    assert.equal(header(next, 'requests-reset'), new Date(start + 2000).toISOString());
  });

  test('a fixed window with limiterHeaders retry-after: only the 429 says anything, and only retry-after', async (t) => {
    const fake = await startFake(t, {
      rateLimit: { limit: 1, windowMs: 60_000 },
      limiterHeaders: 'retry-after',
    });
    const admitted = await post(fake, prompt(4));
    const refused = await post(fake, prompt(4));
    assert.deepEqual([admitted.status, refused.status], [200, 429]);
    assert.equal(header(admitted, 'requests-remaining'), null);
    assert.equal(header(refused, 'requests-remaining'), null);
    const retryAfter = Number(refused.headers.get('retry-after'));
    assert.ok(retryAfter > 50 && retryAfter <= 60, `retry-after ${retryAfter}`);
  });

  test('a 1-hour breakpoint: its writes are reported as ephemeral_1h_input_tokens', async (t) => {
    const fake = await startFake(t, {
      buckets: { inputTokens: { capacity: 10_000, perSecond: 1 } },
    });
    const block = { ...cached('h'.repeat(400)), cache_control: { type: 'ephemeral', ttl: '1h' } };
    const answer = await post(fake, { messages: [{ role: 'user', content: [block] }] });
    assert.deepEqual(answer.body.usage.cache_creation, {
      ephemeral_5m_input_tokens: 0,
      ephemeral_1h_input_tokens: 100,
    });
    assert.equal(answer.body.usage.cache_creation_input_tokens, 100);
  });
});
