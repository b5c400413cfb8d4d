// Inputs that could stop a run they do not concern, or hang a read: an unreadable plan.json in a
// spot check, a FIFO where a script reads plan.json or an audit log (issue 26, cases 8 and 11).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { DIMENSIONS, readLog, runReport, setup } from './helpers.ts';
import type { Workspace } from './helpers.ts';

/** A folder of human scores: one sheet holding one complete row, and `plan` made by `makePlan`. */
function humanFolder(ws: Workspace, makePlan: (file: string) => void): string {
  const folder = path.join(ws.dir, 'human');
  fs.mkdirSync(folder, { recursive: true });
  const header = ['task_id', 'model', ...DIMENSIONS, 'notes', 'scorer'].join(',');
  const row = ['proof02', 'm01', ...DIMENSIONS.map(() => '1'), '', 'al'].join(',');
  fs.writeFileSync(path.join(folder, 'al.csv'), `${header}\n${row}\n`);
  makePlan(path.join(folder, 'plan.json'));
  return folder;
}

function mkfifo(file: string): void {
  assert.equal(spawnSync('mkfifo', [file]).status, 0, 'mkfifo');
}

describe('plan.json that cannot be read: a spot check goes on, the gate refuses, nothing hangs', () => {
  const plans: [string, (file: string) => void, RegExp][] = [
    ['not JSON', (file) => fs.writeFileSync(file, '{'), /plan\.json: invalid JSON/],
    ['a FIFO', mkfifo, /plan\.json: not a regular file \(a FIFO/],
  ];
  for (const [label, makePlan, said] of plans) {
    test(`${label}: a spot check judges with a warning, its line recording "unreadable"`, async (t) => {
      const { ws, run } = await setup(t);
      const folder = humanFolder(ws, makePlan);
      const result = await run(['--task', 'proof01', '--model', 'm01', '--human-scores', folder]);
      assert.equal(result.code, 0, result.stderr);
      assert.match(result.stderr, /^run-judge: warning: .*plan\.json/m);
      assert.match(result.stderr, said);
      assert.deepEqual(
        readLog(ws.log).map((line) => (line as { human_scoring?: unknown }).human_scoring),
        ['unreadable'],
      );
    });

    test(`${label}: a full run is refused naming plan.json (exit 2), no request`, async (t) => {
      const { fake, ws, run } = await setup(t);
      const folder = humanFolder(ws, makePlan);
      const result = await run(['--human-scores', folder]);
      assert.equal(result.code, 2, result.stderr);
      assert.match(result.stderr, said);
      assert.doesNotMatch(result.stderr, /^\s+at /m, 'no stack trace');
      assert.equal(fake.requests.length, 0);
    });
  }
});

describe('a FIFO where report.ts reads an audit log is refused, not read', () => {
  test('--log naming a FIFO: exit 2 naming it, no hang', async (t) => {
    const { ws, run } = await setup(t);
    assert.equal((await run(['--before-human-scoring'])).code, 0);
    const fifo = path.join(ws.dir, 'log.fifo');
    mkfifo(fifo);
    const rubric = ws.args()[ws.args().indexOf('--rubric') + 1]!;
    const args = ['--rubric', rubric, '--scores', ws.output, '--log', fifo];
    const result = await runReport([...args, '--human-scores', humanFolder(ws, () => {})]);
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /log\.fifo: not a regular file/);
  });
});
