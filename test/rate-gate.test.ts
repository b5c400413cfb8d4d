// The pacer's picture of a fixed window (issue 26 case 7): what is left in one window only goes down.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RateGate } from '../run-judge.ts';
import type { Clock } from '../run-judge.ts';

/** A clock whose sleeps pass at once, moving its time on. */
function steppingClock(): Clock & { at: number } {
  const clock = {
    at: 0,
    now: () => clock.at,
    sleep: async (ms: number) => {
      clock.at += ms;
    },
  };
  return clock;
}

const WINDOW_END = 1000;
const told = (remaining: number) => ({
  requests: { limit: 8, remaining, resetAt: WINDOW_END },
});

describe('a fixed window as the pacer sees it', () => {
  test('8 a window, its answers read out of order, the last read telling an older count: the 9th request waits for the next window', async () => {
    const clock = steppingClock();
    const gate = new RateGate(clock);
    const signal = new AbortController().signal;
    const acquire = async () => {
      const cost = gate.estimate();
      await gate.acquire(Infinity, signal, 'judge-a', cost);
      return cost;
    };

    // The first answer tells the window: 7 left of 8 until it ends.
    const first = await acquire();
    clock.at = 10;
    gate.observe(told(7), first);

    // The other 7 go; their answers come together and are read newest count first, so the last one
    // read, with nothing left in flight, says 6 left: an older count than the 0 read before it.
    const costs = [];
    for (let i = 0; i < 7; i++) costs.push(await acquire());
    assert.ok(clock.at < 100, `the 7 left went within the window, by ${clock.at} ms`);
    clock.at = 200;
    for (let i = 6; i >= 0; i--) gate.observe(told(6 - i), costs[i]!);

    await acquire();
    assert.ok(clock.at >= WINDOW_END, `the 9th went at ${clock.at} ms, in the full window`);
  });
});
