// Pacing against every kind of limiter: a token bucket and a fixed window that send Anthropic's
// rate-limit headers, and limiters that answer a 429 with only `retry-after` (a proxy). Each run is
// in-process on the jump clock, the fake's latency on it too, so no wait is real and a window's
// answers, sent at one instant, may be read in any order; the time the run itself takes is real, so
// the counts vary a little with the machine's load: each is bounded with a margin.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { TestContext } from 'node:test';
import type { FakeOptions } from '../fakes/anthropic.ts';
import { judgeEntry, jumpClock, readLog, rowCount, setup } from './helpers.ts';

const MODELS = 20; // 60 transcripts: three tasks each
const RATE = 8; // every limiter lets 8 requests a second through
const MOST_PER_TRANSCRIPT = 0.25; // the target: rejected requests per transcript
const DEFAULT_RETRY = { max_retries: 5, budget_s: 30, base_delay_s: 1 }; // models.json's defaults
// No request times out into the fallback on a loaded machine (the run and the fake share one process).
const TIMEOUT_S = 300;

type Limiter = Pick<FakeOptions, 'buckets' | 'rateLimit' | 'limiterHeaders'>;

const TOKEN_BUCKET: Limiter = { buckets: { requests: { capacity: RATE, perSecond: RATE } } };
const FIXED_WINDOW: Limiter = { rateLimit: { limit: RATE, windowMs: 1000 } };
/**
 * Judges 60 transcripts at `concurrency` against `limiter` (20 ms latency, on the jump clock),
 * with a fallback judge and the default retry budget, and checks what every limiter must give: exit 0, every row by
 * the primary judge (a 429 asks to wait, so it is never a reason for the fallback), at most 0.25 rejected requests a
 * transcript, and no stall passed off as pacing. Returns the 429s met.
 */
async function pacedRun(t: TestContext, limiter: Limiter, concurrency: number): Promise<number> {
  const clock = jumpClock();
  const { fake, ws, run } = await setup(
    t,
    { ...limiter, latencyMs: 20, clock, latencyClock: clock },
    {
      models: MODELS,
      judge: judgeEntry('judge-a', { retry: DEFAULT_RETRY, timeout_s: TIMEOUT_S }),
    },
  );
  const result = await run(['--concurrency', String(concurrency)]);
  assert.equal(result.code, 0, result.stderr);
  const transcripts = ws.pairs.length;
  assert.equal(rowCount(ws.output), transcripts);
  const log = readLog(ws.log);
  const fallbacks = log.filter((entry) => entry.judge !== 'judge-a');
  assert.equal(fallbacks.length, 0, `no row went to the fallback judge:\n${result.stderr}`);
  assert.ok(
    fake.requests.every((request) => request.body?.model === 'judge-a'),
    'the fallback judge was never asked',
  );
  const perTranscript = fake.count429 / transcripts;
  assert.ok(
    perTranscript <= MOST_PER_TRANSCRIPT,
    `${fake.count429} rejected requests for ${transcripts} transcripts: ${perTranscript} a transcript`,
  );
  // The clock skips the pacer's own waits (and the latency on it): twice what the limiter needs would be a pace that
  // collapsed.
  const boundS = (transcripts - RATE) / RATE;
  const waitedS = clock.jumpedMs() / 1000;
  assert.ok(waitedS < 2 * boundS, `the pacer waited ${waitedS} s, the limiter needs ${boundS} s`);
  return fake.count429;
}

describe('pacing that learns from every limiter: at most 0.25 rejected requests a transcript, no fallback for a 429', () => {
  test('a token bucket with Anthropic headers, --concurrency 16', async (t) => {
    const rejected = await pacedRun(t, TOKEN_BUCKET, 16);
    assert.ok(rejected <= 2, `the headers predict the bucket: ${rejected} rejected`);
  });

  test('a fixed one-second window with Anthropic headers, --concurrency 16: what is left only goes down until the window ends', async (t) => {
    const rejected = await pacedRun(t, FIXED_WINDOW, 16);
    assert.ok(rejected <= 5, `the window is seen from its headers: ${rejected} rejected`);
  });

  test('a fixed one-second window with Anthropic headers, --concurrency 64', async (t) => {
    const rejected = await pacedRun(t, FIXED_WINDOW, 64);
    assert.ok(rejected <= 5, `the window is seen from its headers: ${rejected} rejected`);
  });

  test('a token bucket that answers 429 with only retry-after (a proxy), --concurrency 16', async (t) => {
    await pacedRun(t, { ...TOKEN_BUCKET, limiterHeaders: 'retry-after' }, 16);
  });

  test('a token bucket that answers 429 with only retry-after (a proxy), --concurrency 64', async (t) => {
    await pacedRun(t, { ...TOKEN_BUCKET, limiterHeaders: 'retry-after' }, 64);
  });

  test('a fixed one-second window that answers 429 with only retry-after, --concurrency 16', async (t) => {
    await pacedRun(t, { ...FIXED_WINDOW, limiterHeaders: 'retry-after' }, 16);
  });
});
