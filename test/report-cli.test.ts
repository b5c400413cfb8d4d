// report.ts as a command: judges side by side, the CI gate, the audit log it reads, and its messages.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import type { TestContext } from 'node:test';
import { RUBRIC_FILE, mentioning, tempDir } from './helpers.ts';

const { main, readAuditLog } = await import('../report.ts');
const { loadRubric } = await import('../run-judge.ts');
const rubric = loadRubric(RUBRIC_FILE);
const DIMENSIONS = rubric.dimensions.map((dimension) => dimension.name);
const HEADER = `task_id,model,${DIMENSIONS.join(',')},notes`;

/** Every dimension the same score, as CSV cells. */
const same = (score: number) => DIMENSIONS.map(() => score).join(',');

/** One audit-log line as run-judge writes it, with the fields the report reads. */
function logLine(fields: Record<string, unknown>): string {
  const line = {
    task_id: 'p1',
    model: 'm1',
    status: 'scored',
    judge: 'judge-a',
    timestamp: '2026-12-01T10:00:00.000Z',
    cost_usd: 0.01,
    rubric_sha256: 'r1',
    attempts: [],
    answers: [],
  };
  return JSON.stringify(Object.assign(line, fields));
}

function writeLog(t: TestContext, lines: string[]): string {
  const file = path.join(tempDir(t), 'log.jsonl');
  fs.writeFileSync(file, lines.map((line) => `${line}\n`).join(''));
  return file;
}

/** `main` with stdout and stderr captured. */
async function run(args: string[]) {
  let stdout = '';
  let stderr = '';
  const io = {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
  } as never;
  const code = await main(args, io);
  return { code, stdout, stderr };
}

describe('the audit log as the report and the page header read it', () => {
  test('rows per judge in a Map, fallbacks, hashes, the last judged row, the total cost, thinking', (t) => {
    const log = writeLog(t, [
      logLine({ task_id: 'p1', timestamp: '2026-12-01T10:00:00.000Z', cost_usd: 0.5 }),
      logLine({
        task_id: 'p2',
        judge: 'judge-b',
        timestamp: '2026-12-01T12:00:00.000Z',
        cost_usd: 0.25,
        attempts: [{ judge: 'judge-a' }],
        answers: [
          { judge: 'judge-b', thinking: 'first, the base case', scores: { a: 1 } },
          { judge: 'judge-b', thinking: 'unused', scores: null },
        ],
        human_scoring: { state: 'complete' },
      }),
      logLine({ task_id: 'p3', status: 'failed', judge: null, cost_usd: 0.125 }),
      logLine({ task_id: 'p4', judge: 'constructor', timestamp: '2026-12-01T11:00:00.000Z' }),
    ]);
    const audit = readAuditLog(log);
    assert.deepEqual(
      [...audit.rows_by_judge],
      [
        ['judge-a', 1],
        ['judge-b', 1],
        ['constructor', 1],
      ],
    );
    assert.deepEqual([...audit.fallback_rows], [['judge-b', 1]]);
    assert.equal(audit.last_judged, '2026-12-01T12:00:00.000Z');
    assert.equal(audit.total_cost_usd, 0.5 + 0.25 + 0.125 + 0.01, 'every entry, failed ones too');
    assert.deepEqual(audit.rubric_sha256, ['r1']);
    assert.deepEqual(audit.human_scoring, { state: 'complete' });
    assert.deepEqual(audit.rows.get('m1\u0000p2')!.thinking, ['first, the base case']);
  });

  test('an entry without a cost makes the total unknown (null), and so does no log', (t) => {
    const log = writeLog(t, [logLine({}), logLine({ task_id: 'p2', cost_usd: null })]);
    assert.equal(readAuditLog(log).total_cost_usd, null);
    assert.equal(readAuditLog(path.join(tempDir(t), 'none.jsonl')).total_cost_usd, null);
  });
});
