// Each input is read once a run: a transcript when it is judged, a task's files when its
// first transcript is, the rubric at the start; the audit line's input_sha256 is of those bytes.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { sha256 } from '../run-judge.ts';
import { readLog, rowCount, setup, withFsWrapped } from './helpers.ts';

/** How many times run-judge.ts read each file, by node:fs's read and open functions, while `fn` runs. */
async function countingReads<T>(
  fn: () => Promise<T>,
): Promise<{ result: T; reads: Map<string, number> }> {
  const reads = new Map<string, number>();
  let depth = 0;
  const counted = (original: (...args: unknown[]) => unknown) => {
    return (...args: unknown[]) => {
      const [file, options] = args;
      const flags =
        typeof options === 'object' ? (options as { flag?: string } | null)?.flag : options;
      const writing = typeof flags === 'string' && /[wa+]/.test(flags);
      // run-judge's reads only (the test's helpers read the rubric to write the human scores), each
      // counted where it starts: readFileSync opens through fs.openSync
      const ours = new Error().stack!.includes(`${path.sep}run-judge.ts:`);
      if (depth === 0 && typeof file === 'string' && !writing && ours) {
        const resolved = path.resolve(file);
        reads.set(resolved, (reads.get(resolved) ?? 0) + 1);
      }
      depth++;
      try {
        return original(...args);
      } finally {
        depth--;
      }
    };
  };
  const names = ['readFileSync', 'readFile', 'openSync', 'open'];
  const result = await withFsWrapped(names, counted, fn);
  return { result, reads };
}

describe('each input is read once a run, and the audit line hashes the bytes read', () => {
  test('3 tutors x 2 tasks: each transcript, task, reference key and the rubric read once', async (t) => {
    const { ws, run } = await setup(t, {}, { models: 3, tasks: ['proof01', 'proof02'] });
    const { result, reads } = await countingReads(() => run(['--concurrency', '4']));
    assert.equal(result.code, 0, result.stderr);
    assert.equal(rowCount(ws.output), 6);

    const inputs = [
      ...ws.pairs.map((pair) => path.join(ws.transcripts, pair.model, `${pair.task_id}.json`)),
      ...['proof01', 'proof02'].map((task) => path.join(ws.tasks, `${task}.json`)),
      ...['proof01', 'proof02'].map((task) => path.join(ws.referenceKeys, `${task}.json`)),
      ws.rubric,
    ];
    for (const file of inputs) {
      assert.equal(reads.get(path.resolve(file)) ?? 0, 1, `${file} read once`);
    }

    for (const entry of readLog(ws.log)) {
      const hashes = entry.input_sha256!;
      const bytes = (file: string) => sha256(fs.readFileSync(file));
      assert.equal(
        hashes.transcript,
        bytes(path.join(ws.transcripts, entry.model, `${entry.task_id}.json`)),
      );
      assert.equal(hashes.task, bytes(path.join(ws.tasks, `${entry.task_id}.json`)));
      assert.equal(
        hashes.reference_key,
        bytes(path.join(ws.referenceKeys, `${entry.task_id}.json`)),
      );
      assert.equal(hashes.rubric, bytes(ws.rubric));
      assert.equal(entry.rubric_sha256, hashes.rubric);
      assert.equal(entry.prompt_template_sha256, hashes.template);
    }
  });

  test('a transcript that cannot be read: its failed line records no input hashes, not a guess', async (t) => {
    const { ws, run } = await setup(t, {}, { models: 1, tasks: ['proof01'] });
    fs.writeFileSync(path.join(ws.transcripts, 'm01', 'proof01.json'), '{ not json');
    const result = await run([]);
    assert.notEqual(result.code, 0);
    const [entry] = readLog(ws.log);
    assert.equal(entry!.status, 'failed');
    assert.equal(entry!.input_sha256, null);
  });
});
