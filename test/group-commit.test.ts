// Group commit: rows and audit lines are made durable together, one fsync a file for everything
// written since the last (at most every 100 ms, and once at the end), not one fsync a row.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { readLog, rowCount, setup, withFsWrapped } from './helpers.ts';

/** Counts the fsyncs of the process (both forms) while `fn` runs. */
async function countingFsyncs<T>(fn: () => Promise<T>): Promise<{ result: T; fsyncs: number }> {
  let fsyncs = 0;
  const counted = (original: (...args: unknown[]) => unknown) => {
    return (...args: unknown[]) => {
      fsyncs++;
      return original(...args);
    };
  };
  const result = await withFsWrapped(['fsync', 'fsyncSync'], counted, fn);
  return { result, fsyncs };
}

describe('group commit: the rows and audit lines finished since the last flush share one fsync a file', () => {
  test('21 transcripts: every row and line written, in far fewer fsyncs than one a row', async (t) => {
    const { ws, run } = await setup(t, {}, { models: 7 });
    const started = performance.now();
    const { result, fsyncs } = await countingFsyncs(() => run(['--concurrency', '8']));
    const wallMs = performance.now() - started;
    assert.equal(result.code, 0, result.stderr);
    assert.equal(rowCount(ws.output), 21);
    assert.equal(readLog(ws.log).length, 21);

    // Each flush syncs at most the log and the CSV; flushes come at most every 100 ms, plus the
    // last one, and the set-up's few (the header, a lock). One fsync a row and a line would be 42.
    const bound = 2 * (Math.ceil(wallMs / 100) + 1) + 4;
    assert.ok(fsyncs <= bound, `${fsyncs} fsyncs in ${Math.round(wallMs)} ms (bound ${bound})`);
    assert.ok(fsyncs < 42, `${fsyncs} fsyncs: fewer than one a row and one a line`);
  });
});
