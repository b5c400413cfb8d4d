// The human-scoring gate: a full run (no --task, no --model) starts only once every selected transcript has a complete
// human row, else it exits 2 before any call; --before-human-scoring runs anyway and says so in its summary and in
// every audit-log line; filtered runs and the dry-run need no human scores. `main` runs in-process against the fake.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Writable } from 'node:stream';
import { describe, test } from 'node:test';
import type { TestContext } from 'node:test';
import { parse as parseCsv } from 'csv-parse/sync';
import { stringify as stringifyCsv } from 'csv-stringify/sync';
import {
  DIMENSIONS,
  allKeys,
  csvRows,
  readLog,
  setupRun,
  snapshot,
  tagOf,
  wellFormedCsv,
} from './helpers.ts';
import type { MainResult, Workspace, WorkspaceOptions } from './helpers.ts';
import type { FakeAnthropic, FakeOptions, RecordedRequest } from './fake-anthropic.ts';

// Destructured, not imported by name: a renamed export then fails its own tests, not the whole file.
const { main: reportMain } = await import('../report.ts');

// ---- Local helpers ---------------------------------------------------------------------------------------------------

const BATCH = ['--batch', '--poll-interval', '0.01'];
const HEADER = ['task_id', 'model', ...DIMENSIONS, 'notes', 'scorer'];
const isDimension = (column: string | undefined) =>
  (DIMENSIONS as readonly (string | undefined)[]).includes(column);
type HumanCells = Record<string, string>;

/** A human row scoring every dimension 1, with `cells` replacing some (an empty cell: not scored yet). */
const scoredRow = (model: string, task_id: string, cells: HumanCells = {}): HumanCells => ({
  task_id,
  model,
  notes: '',
  scorer: '',
  ...Object.fromEntries(DIMENSIONS.map((dimension) => [dimension, '1'])),
  ...cells,
});
/** A row of the blank sheet: no score yet. */
const blankRow = (model: string, task_id: string, scorer = '') =>
  scoredRow(model, task_id, {
    scorer,
    ...Object.fromEntries(DIMENSIONS.map((dimension) => [dimension, ''])),
  });

/** Writes a human scores CSV of `rows` in the columns of `header` into the workspace; returns its path. */
function writeHumanFile(ws: Workspace, rows: HumanCells[], header = HEADER): string {
  const file = path.join(ws.dir, 'people.csv');
  fs.writeFileSync(
    file,
    stringifyCsv([header, ...rows.map((row) => header.map((column) => row[column] ?? ''))]),
  );
  return file;
}
/** A path in the workspace where no human scores file is. */
const noHumanFile = (ws: Workspace) => path.join(ws.dir, 'not-scored-yet.csv');

/** A fake and a workspace; `gated` runs main with `humanFile` as --human-scores (given last: commander takes it). */
async function setup(t: TestContext, wsOpts: WorkspaceOptions = {}, fakeOpts: FakeOptions = {}) {
  const base = await setupRun(t, fakeOpts, wsOpts);
  const gated = (humanFile: string, extra: string[] = []) =>
    base.run([...extra, '--human-scores', humanFile]);
  return { ...base, gated };
}

/** The run was refused before anything: exit 2, no stack trace, no request, nothing written or changed. */
function assertRefused(
  result: MainResult,
  fake: FakeAnthropic,
  ws: Workspace,
  before: Map<string, string>,
) {
  assert.equal(result.code, 2, result.stderr);
  assert.equal(result.stdout, '');
  assert.doesNotMatch(result.stderr, /^\s+at /m, 'no stack trace');
  assert.equal(fake.requests.length, 0, 'no Messages request');
  assert.equal(fake.batches.length, 0, 'no batch');
  assert.deepEqual(snapshot(ws.dir), before, 'no CSV, log or lock; nothing changed');
  for (const file of [ws.output, ws.log, `${ws.output}.lock`])
    assert.equal(fs.existsSync(file), false, file);
}
const includesAll = (text: string, parts: string[]) => {
  for (const part of parts) assert.ok(text.includes(part), `"${part}" in:\n${text}`);
};
/** The "model/task" names the refusal lists, in order. */
const listedPairs = (stderr: string) => stderr.match(/\bm\d\d\/proof\d\d\b/g) ?? [];

type LogLine = ReturnType<typeof readLog>[number] & { before_human_scoring?: unknown };
const logLines = (ws: Workspace) => readLog(ws.log) as LogLine[];

// ---------------------------------------------------------------------------------------------
describe('a full run without human scores exits 2 before any call and says how to proceed', () => {
  test('no human scores file: names it, says it does not exist, how many lack scores, the sheet and the flag', async (t) => {
    const { fake, ws, gated } = await setup(t);
    const file = noHumanFile(ws);
    const before = snapshot(ws.dir);
    const result = await gated(file);
    assertRefused(result, fake, ws, before);
    includesAll(result.stderr, [
      file,
      'does not exist',
      '6 transcript(s)',
      'report.ts sheet',
      '--before-human-scoring',
    ]);
    assert.deepEqual(listedPairs(result.stderr), allKeys(ws), 'all six listed, in sorted order');
    assert.ok(!result.stderr.includes('...'), 'nothing left out');
  });

  const lists = [
    {
      label: '14 lacking (one scored, one incomplete): the first ten in sorted order, then "..."',
      models: 5,
      rows: [scoredRow('m01', 'proof02'), scoredRow('m02', 'proof01', { error_diagnosis: '' })],
      lacking: 14,
      listed: ['m01/proof01', 'm01/proof03', 'm02/proof01', 'm02/proof02', 'm02/proof03']
        .concat(['m03/proof01', 'm03/proof02', 'm03/proof03', 'm04/proof01', 'm04/proof02'])
        .join(', '),
      more: true,
    },
    {
      label: '11 lacking: the first ten, then "..."',
      models: 4,
      rows: [scoredRow('m02', 'proof02')],
      lacking: 11,
      listed: ['m01/proof01', 'm01/proof02', 'm01/proof03', 'm02/proof01', 'm02/proof03']
        .concat(['m03/proof01', 'm03/proof02', 'm03/proof03', 'm04/proof01', 'm04/proof02'])
        .join(', '),
      more: true,
    },
    {
      label: 'exactly 10 lacking: all ten, no "..."',
      models: 4,
      rows: [scoredRow('m02', 'proof01'), scoredRow('m03', 'proof03')],
      lacking: 10,
      listed: ['m01/proof01', 'm01/proof02', 'm01/proof03', 'm02/proof02', 'm02/proof03']
        .concat(['m03/proof01', 'm03/proof02', 'm04/proof01', 'm04/proof02', 'm04/proof03'])
        .join(', '),
      more: false,
    },
  ];
  for (const { label, models, rows, lacking, listed, more } of lists) {
    test(label, async (t) => {
      const { fake, ws, gated } = await setup(t, { models });
      const file = writeHumanFile(ws, rows);
      const before = snapshot(ws.dir);
      const result = await gated(file);
      assertRefused(result, fake, ws, before);
      includesAll(result.stderr, [`${lacking} transcript(s)`, file]);
      assert.equal(listedPairs(result.stderr).join(', '), listed);
      assert.equal(
        result.stderr.includes(`${listed}, ...`),
        more,
        'ends with "..." only when more lack',
      );
    });
  }
});

// ---------------------------------------------------------------------------------------------
describe('what counts as scored: a complete row, by any scorer, in any column order', () => {
  // One model, two transcripts: m01/proof01 and m01/proof02.
  const WS = { models: 1, tasks: ['proof01', 'proof02'] };
  const reversed = [...HEADER].reverse();
  const cases: { label: string; rows: HumanCells[]; header?: string[]; lacking: string[] }[] = [
    {
      label: 'a row with one empty score is incomplete: it does not count',
      rows: [scoredRow('m01', 'proof01'), scoredRow('m01', 'proof02', { proof_scaffolding: '' })],
      lacking: ['m01/proof02'],
    },
    {
      label: "a row of another model's transcript does not count",
      rows: [scoredRow('m01', 'proof01'), scoredRow('m02', 'proof02')],
      lacking: ['m01/proof02'],
    },
    {
      label: 'one complete row by any scorer is enough, with incomplete rows by others alongside',
      rows: [
        scoredRow('m01', 'proof01', { scorer: 'alice', integrity_boundary: '' }),
        scoredRow('m01', 'proof01', { scorer: 'bob' }),
        blankRow('m01', 'proof02', 'carol'),
        scoredRow('m01', 'proof02', { scorer: 'dave', notes: 'a note' }),
      ],
      lacking: [],
    },
    {
      label: 'columns in another order, with a scorer column',
      header: reversed,
      rows: [
        scoredRow('m01', 'proof01', { scorer: 'alice' }),
        scoredRow('m01', 'proof02', { scorer: 'bob' }),
      ],
      lacking: [],
    },
    {
      label: 'no scorer column at all',
      header: HEADER.filter((column) => column !== 'scorer'),
      rows: [scoredRow('m01', 'proof01'), scoredRow('m01', 'proof02')],
      lacking: [],
    },
  ];
  for (const { label, rows, header, lacking } of cases) {
    const outcome = lacking.length ? `refused, ${lacking.join(', ')} lacking` : 'the run proceeds';
    test(`${label}: ${outcome}`, async (t) => {
      const { fake, ws, gated } = await setup(t, WS);
      const file = writeHumanFile(ws, rows, header);
      const before = snapshot(ws.dir);
      const result = await gated(file);
      if (lacking.length) {
        assertRefused(result, fake, ws, before);
        includesAll(result.stderr, [
          `${lacking.length} transcript(s)`,
          `a complete row in ${file}`,
        ]);
        assert.deepEqual(listedPairs(result.stderr), lacking);
      } else {
        assert.equal(result.code, 0, result.stderr);
        assert.deepEqual(wellFormedCsv(ws.output), allKeys(ws));
        assert.equal(fake.requests.length, 2);
      }
    });
  }

  const badScore = (value: string, why: string) => ({
    label: `a score cell "${value}" (${why})`,
    rows: [scoredRow('m01', 'proof01'), scoredRow('m01', 'proof02', { proof_scaffolding: value })],
    says: [': line 3: proof_scaffolding: ', `"${value}"`],
  });
  const unreadable: { label: string; rows: HumanCells[]; header?: string[]; says: string[] }[] = [
    badScore('3', 'outside the rubric'),
    badScore('two', 'not a number'),
    badScore('1.0', 'not an integer as written'),
    {
      label: 'a header without a dimension',
      header: HEADER.filter((column) => column !== 'proof_scaffolding'),
      rows: [scoredRow('m01', 'proof01'), scoredRow('m01', 'proof02')],
      says: [': header: missing proof_scaffolding'],
    },
    {
      label: 'one scorer twice on one transcript',
      rows: [
        scoredRow('m01', 'proof01', { scorer: 'al' }),
        scoredRow('m01', 'proof01', { scorer: 'al' }),
      ],
      says: [': line 3: m01/proof01 scored twice by "al"'],
    },
  ];
  for (const { label, rows, header, says } of unreadable) {
    test(`${label}: exit 2 naming the file and where; no call`, async (t) => {
      const { fake, ws, gated } = await setup(t, WS);
      const file = writeHumanFile(ws, rows, header);
      const before = snapshot(ws.dir);
      const result = await gated(file);
      assertRefused(result, fake, ws, before);
      includesAll(result.stderr, [`${file}${says[0]}`, ...says.slice(1)]);
    });
  }

  test('the blank sheet of `report.ts sheet` is read (every row incomplete: refused); filled in, the run proceeds', async (t) => {
    const { fake, ws, gated } = await setup(t);
    let sheet = '';
    const stdout = new Writable({
      write(chunk, _encoding, done) {
        sheet += chunk;
        done();
      },
    });
    const args = [
      'sheet',
      '--transcripts',
      ws.transcripts,
      '--rubric',
      ws.rubric,
      '--scorer',
      'alice',
    ];
    assert.equal(await reportMain(args, { stdout, stderr: process.stderr }), 0);
    const file = path.join(ws.dir, 'sheet.csv');
    fs.writeFileSync(file, sheet);
    const blank = await gated(file);
    assert.equal(blank.code, 2, blank.stderr);
    includesAll(blank.stderr, ['6 transcript(s)', `a complete row in ${file}`]);
    assert.equal(fake.requests.length, 0);

    const [header, ...rows] = parseCsv(sheet) as string[][];
    const filled = rows.map((row) => row.map((cell, i) => (isDimension(header![i]) ? '2' : cell)));
    fs.writeFileSync(file, stringifyCsv([header, ...filled]));
    const result = await gated(file);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(wellFormedCsv(ws.output), allKeys(ws));
  });
});

// ---------------------------------------------------------------------------------------------
describe('--before-human-scoring: the run proceeds, and says so in its summary and in every audit-log line', () => {
  const modes = [
    {
      label: 'concurrently, one transcript failing (its failure line too)',
      args: [],
      failing: 'm02/proof03',
    },
    { label: 'through Message Batches', args: BATCH, failing: undefined },
  ];
  for (const { label, args, failing } of modes) {
    test(`${label}: no human scores needed; every log line has before_human_scoring: true`, async (t) => {
      const responder = (req: RecordedRequest) =>
        tagOf(req) === failing ? { text: 'not JSON' } : undefined;
      const { ws, gated } = await setup(t, {}, { responder });
      const result = await gated(noHumanFile(ws), [...args, '--before-human-scoring']);
      assert.equal(result.code, failing ? 1 : 0, result.stderr);
      assert.match(result.stderr, /before human scoring/);
      const lines = logLines(ws);
      assert.equal(lines.length, 6);
      assert.deepEqual(
        lines.map((line) => line.before_human_scoring),
        lines.map(() => true),
      );
      assert.equal(lines.filter((line) => line.status === 'failed').length, failing ? 1 : 0);
      assert.equal(csvRows(ws.output).length, failing ? 5 : 6);
    });
  }

  test('a gated run with every human score: before_human_scoring: false on every line, nothing said', async (t) => {
    const { ws, run } = await setup(t);
    const result = await run(); // the workspace's own human scores file: complete
    assert.equal(result.code, 0, result.stderr);
    assert.doesNotMatch(result.stderr, /before human scoring/i);
    const lines = logLines(ws);
    assert.equal(lines.length, 6);
    assert.deepEqual(
      lines.map((line) => line.before_human_scoring),
      lines.map(() => false),
    );
  });
});

// ---------------------------------------------------------------------------------------------
describe('which runs are gated', () => {
  const free = [
    { label: '--task alone', args: ['--task', 'proof02'], requests: 2 },
    { label: '--model alone', args: ['--model', 'm01'], requests: 3 },
    { label: '--task and --model', args: ['--task', 'proof03', '--model', 'm02'], requests: 1 },
    { label: '--dry-run of a full run', args: ['--dry-run'], requests: 0 },
    { label: '--dry-run --batch of a full run', args: ['--dry-run', ...BATCH], requests: 0 },
  ];
  for (const { label, args, requests } of free) {
    test(`${label}: needs no human scores file (exit 0)`, async (t) => {
      const { fake, ws, gated } = await setup(t);
      const result = await gated(noHumanFile(ws), args);
      assert.equal(result.code, 0, result.stderr);
      assert.equal(fake.requests.length, requests);
      assert.equal(fs.existsSync(noHumanFile(ws)), false, 'nor is one made');
      if (requests)
        assert.deepEqual(
          logLines(ws)
            .map((line) => line.before_human_scoring)
            .sort(),
          Array(requests).fill(false),
        );
    });
  }

  const gatedRuns = [
    { label: '--limit 1 (a trial of a full run, not a filter)', args: ['--limit', '1'] },
    { label: '--batch', args: BATCH },
    { label: '--rescore', args: ['--rescore'] },
    { label: '--samples 2', args: ['--samples', '2'] },
  ];
  for (const { label, args } of gatedRuns) {
    test(`a full run with ${label} is gated: exit 2, no call`, async (t) => {
      const { fake, ws, gated } = await setup(t);
      const before = snapshot(ws.dir);
      const result = await gated(noHumanFile(ws), args);
      assertRefused(result, fake, ws, before);
      includesAll(result.stderr, ['6 transcript(s)', '--before-human-scoring']);
    });
  }
});
