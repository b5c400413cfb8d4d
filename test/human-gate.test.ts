// The human-scoring gate, on the plan: the rows of the human scores (a folder of sheets, by default evals/human/, or
// one CSV) are the assignments; a full run (no --task, no --model) starts once every row has every dimension scored,
// then judges every selected transcript, sampled or not; else it exits 2 before any call, listing the open
// assignments; --before-human-scoring runs anyway and says so. Every audit line records the state of human scoring.
// Rows judged on an older prompt are stale: listed, judged again, counted by the dry-run. Human rows are read
// strictly: a column twice, a judge CSV given as human scores, are refused; scorer names are trimmed. `main` runs
// in-process against the fake; the default folder is checked with the workspace as the current folder.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import type { TestContext } from 'node:test';
import { parse as parseCsv } from 'csv-parse/sync';
import { stringify as stringifyCsv } from 'csv-stringify/sync';
import {
  DIMENSIONS,
  allKeys,
  csvRows,
  readLog,
  runMain,
  runReport,
  setup,
  sha256,
  snapshot,
  tagOf,
  tempDir,
  wellFormedCsv,
  writeJson,
} from './helpers.ts';
import type { MainResult, Workspace } from './helpers.ts';
import type { FakeAnthropic, RecordedRequest } from '../fakes/anthropic.ts';

// Destructured, not imported by name: a renamed export then fails its own tests, not the whole file.
const { readHumanScores, loadRubric } = await import('../run-judge.ts');

// ---- Local helpers ---------------------------------------------------------------------------------------------------

const BATCH = ['--batch', '--poll-interval', '0.01'];
const HEADER = ['task_id', 'model', ...DIMENSIONS, 'notes', 'scorer'];
const SHEET_HEADER = [...HEADER, 'transcript_sha256'];
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

/** CSV text of `rows` in the columns of `header`. */
const csvOf = (rows: HumanCells[], header = HEADER) =>
  stringifyCsv([header, ...rows.map((row) => header.map((column) => row[column] ?? ''))]);

/** Writes a human scores CSV of `rows` in the columns of `header` into the workspace; returns its path. */
function writeHumanFile(ws: Workspace, rows: HumanCells[], header = HEADER): string {
  const file = path.join(ws.dir, 'people.csv');
  fs.writeFileSync(file, csvOf(rows, header));
  return file;
}

/** Writes one sheet per scorer (`<scorer>.csv`, the plan's format) into `dir` (default the workspace's human/). */
function writeSheets(ws: Workspace, sheets: Record<string, HumanCells[]>, dir = 'human'): string {
  const folder = path.join(ws.dir, dir);
  fs.mkdirSync(folder, { recursive: true });
  for (const [scorer, rows] of Object.entries(sheets)) {
    const filled = rows.map((row) => ({
      ...row,
      scorer,
      transcript_sha256: transcriptSha(ws, row.model!, row.task_id!),
    }));
    fs.writeFileSync(path.join(folder, `${scorer}.csv`), csvOf(filled, SHEET_HEADER));
  }
  return folder;
}
const transcriptFile = (ws: Workspace, model: string, task: string) =>
  path.join(ws.transcripts, model, `${task}.json`);
const transcriptSha = (ws: Workspace, model: string, task: string) =>
  sha256(fs.readFileSync(transcriptFile(ws, model, task)));

/** Edits a transcript's last message, so its prompt (and its file's hash) changes. */
function editTranscript(ws: Workspace, model: string, task: string): void {
  const file = transcriptFile(ws, model, task);
  const json = JSON.parse(fs.readFileSync(file, 'utf8'));
  json.messages.push({ role: 'assistant', content: 'EDITED-AFTER-JUDGING one more hint' });
  writeJson(file, json);
}

/** A path in the workspace where no human scores file is. */
const noHumanFile = (ws: Workspace) => path.join(ws.dir, 'not-scored-yet.csv');

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
  assertNoOverwriteAdvice(result.stderr);
}
/** A refusal never suggests a command that would overwrite a sheet (a shell redirection into a file). */
function assertNoOverwriteAdvice(stderr: string) {
  assert.doesNotMatch(stderr, /\s>>?\s*\S/, `no redirection suggested: ${stderr}`);
}
const includesAll = (text: string, parts: string[]) => {
  for (const part of parts) assert.ok(text.includes(part), `"${part}" in:\n${text}`);
};
/** The "scorer: model/task" (or "model/task") assignments the refusal lists, in order. */
const listedPairs = (stderr: string) => {
  const listed = /open: (.*?)(?:, \.\.\.)?; /.exec(stderr)?.[1];
  return listed === undefined ? [] : listed.split(', ');
};

type LogLine = ReturnType<typeof readLog>[number] & {
  before_human_scoring?: unknown;
  human_scoring?: unknown;
};
const logLines = (ws: Workspace) => readLog(ws.log) as LogLine[];
const statesLogged = (ws: Workspace) => logLines(ws).map((line) => line.human_scoring);

/** The workspace's args without its --human-scores pair: the default folder applies. */
function argsWithoutHumanScores(ws: Workspace, extra: string[] = []): string[] {
  const args = ws.args(...extra);
  const at = args.indexOf('--human-scores');
  args.splice(at, 2);
  return args;
}

// ---------------------------------------------------------------------------------------------
describe('no human scores: a full run exits 2 before any call and says how to make the plan', () => {
  test('no such file: names it, says it does not exist, the plan command (never a redirection) and the flag', async (t) => {
    const { fake, ws, gated } = await setup(t);
    const file = noHumanFile(ws);
    const before = snapshot(ws.dir);
    const result = await gated(file);
    assertRefused(result, fake, ws, before);
    includesAll(result.stderr, [
      `no human scores in ${file}`,
      'does not exist',
      'report.ts sheet --scorers',
      'never overwrites',
      '--before-human-scoring',
    ]);
  });

  const empty = [
    { label: 'a folder with no CSV in it', make: (ws: Workspace) => writeSheets(ws, {}) },
    {
      label: 'a sheet with its header only',
      make: (ws: Workspace) => writeHumanFile(ws, []),
    },
  ];
  for (const { label, make } of empty) {
    test(`${label}: none yet, refused the same way`, async (t) => {
      const { fake, ws, gated } = await setup(t);
      const source = make(ws);
      const before = snapshot(ws.dir);
      const result = await gated(source);
      assertRefused(result, fake, ws, before);
      includesAll(result.stderr, [`no human scores in ${source}`, 'no row in it yet']);
    });
  }
});

// ---------------------------------------------------------------------------------------------
describe('the gate on a sampled plan: the rows are the assignments', () => {
  test('complete (2 of 6 transcripts, one scored twice): the full run judges all 6, no override, all logged complete', async (t) => {
    const { fake, ws, gated } = await setup(t);
    const folder = writeSheets(ws, {
      alice: [scoredRow('m01', 'proof02'), scoredRow('m02', 'proof03')],
      bob: [scoredRow('m02', 'proof03', { proof_scaffolding: '2' })],
    });
    const result = await gated(folder);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.requests.length, 6);
    assert.deepEqual(wellFormedCsv(ws.output), allKeys(ws));
    assert.doesNotMatch(result.stderr, /before human scoring/i);
    assert.deepEqual(statesLogged(ws), Array(6).fill('complete'));
    assert.deepEqual(
      logLines(ws).map((line) => line.before_human_scoring),
      Array(6).fill(false),
    );
  });

  test('incomplete: exit 2, no request; names the folder, how many of how many are open, the first ten as scorer: model/task', async (t) => {
    const { fake, ws, gated } = await setup(t, {}, { models: 4 });
    const folder = writeSheets(ws, {
      alice: [
        blankRow('m01', 'proof01'),
        scoredRow('m01', 'proof02'),
        blankRow('m02', 'proof01'),
        blankRow('m03', 'proof03'),
        blankRow('m04', 'proof02'),
      ],
      bob: [
        blankRow('m01', 'proof01'),
        scoredRow('m02', 'proof01', { integrity_boundary: '' }),
        blankRow('m02', 'proof02'),
        blankRow('m03', 'proof01'),
        blankRow('m03', 'proof03'),
        blankRow('m04', 'proof03'),
      ],
    });
    const before = snapshot(ws.dir);
    const result = await gated(folder);
    assertRefused(result, fake, ws, before);
    includesAll(result.stderr, [
      `human scoring is not complete in ${folder}`,
      '10 of 11 assignment(s) open',
      '--before-human-scoring',
    ]);
    assert.deepEqual(listedPairs(result.stderr), [
      'alice: m01/proof01',
      'bob: m01/proof01',
      'alice: m02/proof01',
      'bob: m02/proof01',
      'bob: m02/proof02',
      'bob: m03/proof01',
      'alice: m03/proof03',
      'bob: m03/proof03',
      'alice: m04/proof02',
      'bob: m04/proof03',
    ]);
    assert.ok(!result.stderr.includes('...'), 'exactly ten open: nothing left out');
  });

  test('more than ten open: the first ten, then "..."', async (t) => {
    const { fake, ws, gated } = await setup(t, {}, { models: 4 });
    const rows = ws.pairs.map((pair) => blankRow(pair.model, pair.task_id));
    const folder = writeSheets(ws, { carol: rows });
    const before = snapshot(ws.dir);
    const result = await gated(folder);
    assertRefused(result, fake, ws, before);
    includesAll(result.stderr, ['12 of 12 assignment(s) open']);
    const listed = listedPairs(result.stderr);
    assert.equal(listed.length, 10);
    assert.equal(listed[0], 'carol: m01/proof01');
    assert.match(result.stderr, /carol: m04\/proof01, \.\.\./);
  });

  test('--before-human-scoring on an incomplete plan: judged, lines say before_human_scoring and incomplete', async (t) => {
    const { fake, ws, gated } = await setup(t);
    const folder = writeSheets(ws, { alice: [blankRow('m01', 'proof01')] });
    const result = await gated(folder, ['--before-human-scoring']);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.requests.length, 6);
    assert.deepEqual(statesLogged(ws), Array(6).fill('incomplete'));
    assert.deepEqual(
      logLines(ws).map((line) => line.before_human_scoring),
      Array(6).fill(true),
    );
  });
});

// ---------------------------------------------------------------------------------------------
describe('the default --human-scores is the folder evals/human/, every *.csv in it', () => {
  test('run-judge in the workspace: evals/human/ read (other files ignored); incomplete refused, complete judged', async (t) => {
    const { fake, ws } = await setup(t);
    const sheets = path.join(ws.dir, 'evals', 'human');
    fs.mkdirSync(sheets, { recursive: true });
    fs.writeFileSync(path.join(sheets, 'alice.html'), '<p>the scoring page, not a sheet</p>');
    fs.writeFileSync(path.join(sheets, 'README.txt'), 'not a sheet');
    fs.writeFileSync(path.join(sheets, 'bob.csv'), csvOf([blankRow('m02', 'proof01', 'bob')]));
    fs.writeFileSync(path.join(sheets, 'alice.csv'), csvOf([scoredRow('m01', 'proof01')]));

    // Run in the workspace, as a user runs it there: the default folder is relative to the current one.
    const cwd = process.cwd();
    process.chdir(ws.dir);
    t.after(() => process.chdir(cwd));
    const run = () => runMain(argsWithoutHumanScores(ws), { baseUrl: fake.url });

    const refused = await run();
    assert.equal(refused.code, 2, refused.stderr);
    includesAll(refused.stderr, ['evals/human/', '1 of 2 assignment(s) open: bob: m02/proof01']);
    assert.equal(fake.requests.length, 0);

    fs.writeFileSync(path.join(sheets, 'bob.csv'), csvOf([scoredRow('m02', 'proof01')]));
    const judged = await run();
    assert.equal(judged.code, 0, judged.stderr);
    assert.equal(fake.requests.length, 6);
    assert.deepEqual(statesLogged(ws), Array(6).fill('complete'));
  });

  test('one scorer on one transcript in two sheets of the folder: exit 2 naming the second sheet', async (t) => {
    const { fake, ws, gated } = await setup(t);
    const folder = writeSheets(ws, { alice: [scoredRow('m01', 'proof01')] });
    const again = path.join(folder, 'alice2.csv'); // read after alice.csv: sheets go in name order
    fs.writeFileSync(again, csvOf([scoredRow('m01', 'proof01', { scorer: 'alice' })]));
    const before = snapshot(ws.dir);
    const result = await gated(folder);
    assertRefused(result, fake, ws, before);
    includesAll(result.stderr, [`${again}: line 2: m01/proof01 scored twice by "alice"`]);
  });

  test('report.ts reads evals/human/ by default too, and still takes one file', async (t) => {
    const dir = tempDir(t);
    const rubric = path.join(dir, 'rubric.json');
    fs.copyFileSync(path.join(import.meta.dirname, '..', 'rubric.json'), rubric);
    const judge = path.join(dir, 'judge.csv');
    const judgeHeader = ['task_id', 'model', ...DIMENSIONS, 'notes'];
    const judgeRows = [
      scoredRow('m01', 'p1', { notes: 'j' }),
      scoredRow('m01', 'p2', { notes: 'j' }),
    ];
    fs.writeFileSync(judge, csvOf(judgeRows, judgeHeader));
    fs.mkdirSync(path.join(dir, 'evals', 'human'), { recursive: true });
    fs.writeFileSync(
      path.join(dir, 'evals', 'human', 'alice.csv'),
      csvOf([scoredRow('m01', 'p1', { scorer: 'alice' })]),
    );
    fs.writeFileSync(
      path.join(dir, 'evals', 'human', 'bob.csv'),
      csvOf([scoredRow('m01', 'p1', { scorer: 'bob' }), scoredRow('m01', 'p2', { scorer: 'bob' })]),
    );
    const single = path.join(dir, 'one.csv');
    fs.writeFileSync(single, csvOf([scoredRow('m01', 'p2', { scorer: 'carol' })]));

    const cwd = process.cwd();
    process.chdir(dir);
    t.after(() => process.chdir(cwd));
    const args = ['--format', 'json', '--scores', judge, '--rubric', rubric, '--log', 'none.jsonl'];
    const folder = await runReport(args);
    assert.equal(folder.code, 0, folder.stderr);
    assert.equal(JSON.parse(folder.stdout).pairs, 3, 'alice 1 + bob 2');
    const file = await runReport([...args, '--human-scores', single]);
    assert.equal(file.code, 0, file.stderr);
    assert.equal(JSON.parse(file.stdout).pairs, 1);
  });
});

// ---------------------------------------------------------------------------------------------
describe('what the sheets hold: any column order, scorer and transcript_sha256 optional; an empty cell is open', () => {
  // One model, two transcripts: m01/proof01 and m01/proof02.
  const WS = { models: 1, tasks: ['proof01', 'proof02'] };
  const reversed = [...HEADER].reverse();
  const cases: { label: string; rows: HumanCells[]; header?: string[]; open: string[] }[] = [
    {
      label: 'a row with one empty score is an open assignment',
      rows: [scoredRow('m01', 'proof01'), scoredRow('m01', 'proof02', { proof_scaffolding: '' })],
      open: ['m01/proof02'],
    },
    {
      label:
        "an incomplete row is open even beside another scorer's complete row of that transcript",
      rows: [
        scoredRow('m01', 'proof01', { scorer: 'alice', integrity_boundary: '' }),
        scoredRow('m01', 'proof01', { scorer: 'bob' }),
      ],
      open: ['alice: m01/proof01'],
    },
    {
      label: 'one complete row of one transcript (a sample) is a complete plan',
      rows: [scoredRow('m01', 'proof02', { scorer: 'dave', notes: 'a note' })],
      open: [],
    },
    {
      label: 'columns in another order, with a scorer column',
      header: reversed,
      rows: [
        scoredRow('m01', 'proof01', { scorer: 'alice' }),
        scoredRow('m01', 'proof02', { scorer: 'bob' }),
      ],
      open: [],
    },
    {
      label: 'no scorer column at all (an old sheet)',
      header: HEADER.filter((column) => column !== 'scorer'),
      rows: [scoredRow('m01', 'proof01'), scoredRow('m01', 'proof02')],
      open: [],
    },
    {
      // A hash the transcript does not have: it was edited since it was handed out.
      label: "the plan's columns, transcript_sha256 last, a transcript edited since",
      header: SHEET_HEADER,
      rows: [scoredRow('m01', 'proof01', { scorer: 'al', transcript_sha256: 'ab'.repeat(32) })],
      open: ['al: m01/proof01 (transcript edited since)'],
    },
  ];
  for (const { label, rows, header, open } of cases) {
    const outcome = open.length ? `refused, ${open.join(', ')} open` : 'the run judges both';
    test(`${label}: ${outcome}`, async (t) => {
      const { fake, ws, gated } = await setup(t, {}, WS);
      const file = writeHumanFile(ws, rows, header);
      const before = snapshot(ws.dir);
      const result = await gated(file);
      if (open.length) {
        assertRefused(result, fake, ws, before);
        includesAll(result.stderr, [`${open.length} of ${rows.length} assignment(s) open`, file]);
        assert.deepEqual(listedPairs(result.stderr), open);
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
  const twice = (column: string) => {
    const header = [...HEADER, column];
    return {
      label: `a header with "${column}" twice`,
      header,
      rows: [scoredRow('m01', 'proof01', { scorer: 'al' })],
      says: [`: header: column "${column}" appears twice`],
    };
  };
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
    twice('proof_scaffolding'),
    twice('scorer'),
    {
      label: 'one scorer twice on one transcript',
      rows: [
        scoredRow('m01', 'proof01', { scorer: 'al' }),
        scoredRow('m01', 'proof01', { scorer: 'al' }),
      ],
      says: [': line 3: m01/proof01 scored twice by "al"'],
    },
    {
      label: 'one scorer twice on one transcript, once with a trailing space ("al " is al)',
      rows: [
        scoredRow('m01', 'proof01', { scorer: 'al' }),
        scoredRow('m01', 'proof01', { scorer: ' al ' }),
      ],
      says: [': line 3: m01/proof01 scored twice by "al"'],
    },
    {
      label: 'a transcript_sha256 that is no sha256',
      header: SHEET_HEADER,
      rows: [scoredRow('m01', 'proof01', { transcript_sha256: 'abc' })],
      says: [': line 2: transcript_sha256: "abc"'],
    },
  ];
  for (const { label, rows, header, says } of unreadable) {
    test(`${label}: exit 2 naming the file and where; no call`, async (t) => {
      const { fake, ws, gated } = await setup(t, {}, WS);
      const file = writeHumanFile(ws, rows, header);
      const before = snapshot(ws.dir);
      const result = await gated(file);
      assertRefused(result, fake, ws, before);
      includesAll(result.stderr, [`${file}${says[0]}`, ...says.slice(1)]);
    });
  }

  test('an unreadable sheet does not stop --before-human-scoring or a spot check: a warning, lines say unreadable', async (t) => {
    const { fake, ws, gated } = await setup(t, {}, WS);
    const file = writeHumanFile(ws, badScore('3', 'outside the rubric').rows);

    const anyway = await gated(file, ['--before-human-scoring']);
    const judged = fake.requests.length;
    const spot = await gated(file, ['--rescore', '--task', 'proof01', '--model', 'm01']);

    assert.equal(anyway.code, 0, anyway.stderr);
    assert.equal(spot.code, 0, spot.stderr);
    includesAll(anyway.stderr, [`warning: ${file}: line 3: proof_scaffolding`, '"unreadable"']);
    assert.ok(judged > 0, 'the run judged');
    assert.equal(fake.requests.length, judged + 1, 'the spot check judged its transcript');
    assert.ok(
      statesLogged(ws).every((state) => state === 'unreadable'),
      'every line says so',
    );
  });

  test('a FIFO as --human-scores is refused at once (exit 2), never read (it would block)', async (t) => {
    const { fake, ws, gated } = await setup(t, {}, WS);
    const fifo = path.join(tempDir(t), 'people.fifo'); // not in ws.dir: snapshot() would read it
    assert.equal(spawnSync('mkfifo', [fifo]).status, 0, 'mkfifo');
    const before = snapshot(ws.dir);
    const result = await gated(fifo);
    assertRefused(result, fake, ws, before);
    includesAll(result.stderr, [`${fifo}: not a regular file or a folder`]);
  });

  test('scorer names are read trimmed: "alice " is alice', (t) => {
    const file = path.join(tempDir(t), 'h.csv');
    fs.writeFileSync(
      file,
      csvOf([
        scoredRow('m01', 'p1', { scorer: 'alice ' }),
        scoredRow('m01', 'p2', { scorer: '  bob' }),
      ]),
    );
    const rubric = loadRubric(path.join(import.meta.dirname, '..', 'rubric.json'));
    assert.deepEqual(
      readHumanScores(file, rubric).map((row) => row.scorer),
      ['alice', 'bob'],
    );
  });

  test('the blank sheet of `report.ts sheet` is read (every row open: refused); filled in, the run proceeds', async (t) => {
    const { fake, ws, gated } = await setup(t);
    const args = ['--transcripts', ws.transcripts, '--rubric', ws.rubric, '--scorer', 'alice'];
    const made = await runReport(['sheet', ...args]);
    assert.equal(made.code, 0, made.stderr);
    const sheet = made.stdout;
    const file = path.join(ws.dir, 'sheet.csv');
    fs.writeFileSync(file, sheet);
    const blank = await gated(file);
    assert.equal(blank.code, 2, blank.stderr);
    includesAll(blank.stderr, ['6 of 6 assignment(s) open', file, 'alice: m01/proof01']);
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
describe('a judge CSV given as human scores is refused, by run-judge and by report.ts', () => {
  /** A workspace where a spot check of m01 wrote three judge rows. */
  async function judgedOnce(t: TestContext) {
    const base = await setup(t);
    const spot = await base.run(['--model', 'm01']);
    assert.equal(spot.code, 0, spot.stderr);
    return base;
  }

  test('the --output file itself: exit 2 naming it, before any call', async (t) => {
    const { fake, ws, gated } = await judgedOnce(t);
    const requests = fake.requests.length;
    const csv = fs.readFileSync(ws.output, 'utf8');
    const result = await gated(ws.output);
    assert.equal(result.code, 2, result.stderr);
    includesAll(result.stderr, [`${ws.output} is the judge's score CSV`, '--human-scores']);
    assert.equal(fake.requests.length, requests);
    assert.equal(fs.readFileSync(ws.output, 'utf8'), csv);
  });

  test('a copy of it (in a sheets folder): exit 2 naming the copy, its line and the judge CSV', async (t) => {
    const { fake, ws, gated } = await judgedOnce(t);
    const requests = fake.requests.length;
    const folder = path.join(ws.dir, 'human');
    fs.mkdirSync(folder);
    const copy = path.join(folder, 'judge_scores.csv');
    fs.copyFileSync(ws.output, copy);
    const result = await gated(folder);
    assert.equal(result.code, 2, result.stderr);
    includesAll(result.stderr, [
      `${copy}: line 2: m01/proof01 has the judge's scores and notes from ${ws.output}`,
    ]);
    assert.equal(fake.requests.length, requests);
  });

  test('report.ts: --human-scores the --scores file, or a copy of it: exit 2 naming it', async (t) => {
    const { ws } = await judgedOnce(t);
    const copy = path.join(ws.dir, 'copy.csv');
    fs.copyFileSync(ws.output, copy);
    const args = ['--scores', ws.output, '--rubric', ws.rubric, '--log', ws.log];
    const same = await runReport([...args, '--human-scores', ws.output]);
    assert.equal(same.code, 2, same.stderr);
    includesAll(same.stderr, [`${ws.output} is the judge's score CSV`]);
    const copied = await runReport([...args, '--human-scores', copy]);
    assert.equal(copied.code, 2, copied.stderr);
    includesAll(copied.stderr, [`${copy}: line 2: m01/proof01 has the judge's scores and notes`]);
    assert.equal(copied.stdout, '');
  });

  test("a person's row with the judge's scores but their own notes is theirs (read)", async (t) => {
    const { ws } = await judgedOnce(t);
    const [header, ...rows] = parseCsv(fs.readFileSync(ws.output, 'utf8')) as string[][];
    const own = rows.map((row) => [...row.slice(0, -1), 'my own note']);
    const file = path.join(ws.dir, 'mine.csv');
    fs.writeFileSync(file, stringifyCsv([header, ...own]));
    const args = ['--scores', ws.output, '--rubric', ws.rubric, '--log', ws.log];
    const result = await runReport([...args, '--human-scores', file, '--format', 'json']);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(JSON.parse(result.stdout).pairs, 3);
  });
});

// ---------------------------------------------------------------------------------------------
describe('--before-human-scoring, and the state of human scoring in every audit-log line', () => {
  const modes = [
    {
      label: 'concurrently, one transcript failing (its failure line too)',
      args: [],
      failing: 'm02/proof03',
    },
    { label: 'through Message Batches', args: BATCH, failing: undefined },
  ];
  for (const { label, args, failing } of modes) {
    test(`${label}: no human scores needed; every line has before_human_scoring: true, human_scoring: none`, async (t) => {
      const responder = (req: RecordedRequest) =>
        tagOf(req) === failing ? { text: 'not JSON' } : undefined;
      const { ws, gated } = await setup(t, { responder });
      const result = await gated(noHumanFile(ws), [...args, '--before-human-scoring']);
      assert.equal(result.code, failing ? 1 : 0, result.stderr);
      assert.match(result.stderr, /before human scoring/);
      const lines = logLines(ws);
      assert.equal(lines.length, 6);
      assert.deepEqual(
        lines.map((line) => line.before_human_scoring),
        lines.map(() => true),
      );
      assert.deepEqual(statesLogged(ws), Array(6).fill('none'));
      assert.equal(lines.filter((line) => line.status === 'failed').length, failing ? 1 : 0);
      assert.equal(csvRows(ws.output).length, failing ? 5 : 6);
    });
  }

  test('a gated run with every human score: before_human_scoring: false, human_scoring: complete, nothing said', async (t) => {
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
    assert.deepEqual(statesLogged(ws), Array(6).fill('complete'));
  });

  test('spot checks record the state they ran in: none, then incomplete, then complete', async (t) => {
    const { ws, gated } = await setup(t);
    const folder = path.join(ws.dir, 'human');
    assert.equal((await gated(folder, ['--task', 'proof01', '--model', 'm01'])).code, 0);
    writeSheets(ws, { al: [blankRow('m01', 'proof02')] });
    assert.equal((await gated(folder, ['--task', 'proof02', '--model', 'm01'])).code, 0);
    writeSheets(ws, { al: [scoredRow('m01', 'proof02')] });
    assert.equal((await gated(folder, ['--task', 'proof03', '--model', 'm01'])).code, 0);
    assert.deepEqual(statesLogged(ws), ['none', 'incomplete', 'complete']);
  });

  test('a line records the state when it was written: a sheet saved complete mid-run shows a second later', async (t) => {
    let ws: Workspace | undefined;
    let offset = 0;
    const clock = { now: () => Date.now() + offset, sleep: () => Promise.resolve() };
    const responder = (_req: RecordedRequest, index: number) => {
      if (index === 1) {
        writeSheets(ws!, { al: [scoredRow('m01', 'proof02')] });
        offset += 1000; // the sheets are looked at once a second
      }
      return undefined;
    };
    const base = await setup(t, { responder });
    ws = base.ws;
    const folder = writeSheets(ws, { al: [blankRow('m01', 'proof02')] });
    const args = ['--model', 'm01', '--concurrency', '1', '--human-scores', folder];
    const result = await base.run(args, { clock });
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(statesLogged(ws), ['incomplete', 'complete', 'complete']);
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
      if (requests) {
        assert.deepEqual(
          logLines(ws)
            .map((line) => line.before_human_scoring)
            .sort(),
          Array(requests).fill(false),
        );
        assert.deepEqual(statesLogged(ws), Array(requests).fill('none'));
      }
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
      includesAll(result.stderr, ['does not exist', '--before-human-scoring']);
    });
  }
});

// ---------------------------------------------------------------------------------------------
describe('stale judge rows: judged on another prompt than today, listed up front and judged again', () => {
  test('an edited transcript: the dry-run counts it; the run lists it, judges it alone, replaces its row; old lines stay', async (t) => {
    const responder = (req: RecordedRequest, index: number) =>
      index >= 6
        ? { text: JSON.stringify({ scores: allTwo(), notes: 'judged again' }) }
        : undefined;
    const { fake, ws, run } = await setup(t, { responder });
    assert.equal((await run()).code, 0);
    editTranscript(ws, 'm01', 'proof02');

    const dry = await run(['--dry-run']);
    assert.equal(dry.code, 0, dry.stderr);
    includesAll(dry.stderr, ['1 stale row(s)', 'm01/proof02', 'for 1 transcript(s)']);
    assert.equal(fake.requests.length, 6);

    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    includesAll(result.stderr, ['1 stale row(s)', 'm01/proof02', 'judged again']);
    assert.equal(fake.requests.length, 7);
    assert.equal(tagOf(fake.requests[6]!), 'm01/proof02');
    assert.deepEqual(wellFormedCsv(ws.output), allKeys(ws), 'each pair once');
    const row = csvRows(ws.output).find((entry) => entry.key === 'm01/proof02')!;
    assert.equal(row.record.at(-1), 'judged again');
    const lines = logLines(ws);
    assert.equal(lines.length, 7, 'the old line stays');
    assert.equal(lines.filter((line) => pairOf(line) === 'm01/proof02').length, 2);

    const again = await run();
    assert.equal(again.code, 0, again.stderr);
    assert.doesNotMatch(again.stderr, /stale/, 'judged on the prompt of today: not stale any more');
    assert.equal(fake.requests.length, 7);
  });

  test("an edited reference key: both of that task's rows are stale (the dry-run lists them, the estimate counts 2)", async (t) => {
    const { ws, run } = await setup(t);
    assert.equal((await run()).code, 0);
    const file = path.join(ws.referenceKeys, 'proof03.json');
    const key = JSON.parse(fs.readFileSync(file, 'utf8'));
    key.red_flags.push('EDITED red flag');
    writeJson(file, key);
    const dry = await run(['--dry-run']);
    assert.equal(dry.code, 0, dry.stderr);
    includesAll(dry.stderr, ['2 stale row(s)', 'm01/proof03, m02/proof03', 'for 2 transcript(s)']);
  });

  test('a stale row whose re-judgement fails keeps its old row (replaced only by a new row)', async (t) => {
    const responder = (_req: RecordedRequest, index: number) =>
      index >= 6 ? { text: 'not JSON' } : undefined;
    const { ws, run } = await setup(t, { responder });
    assert.equal((await run()).code, 0);
    const before = csvRows(ws.output).find((entry) => entry.key === 'm01/proof02')!.record;
    editTranscript(ws, 'm01', 'proof02');
    const result = await run(['--no-fallback']);
    assert.equal(result.code, 1, result.stderr);
    includesAll(result.stderr, ['1 stale row(s)', 'failed m01/proof02']);
    assert.deepEqual(wellFormedCsv(ws.output), allKeys(ws), 'each pair once, none lost');
    const after = csvRows(ws.output).find((entry) => entry.key === 'm01/proof02')!.record;
    assert.deepEqual(after, before);
  });

  test('--limit 1 with two stale rows: the first is judged again, the other keeps its row until a later run', async (t) => {
    const { fake, ws, run } = await setup(t);
    assert.equal((await run()).code, 0);
    editTranscript(ws, 'm01', 'proof01');
    editTranscript(ws, 'm02', 'proof03');
    const first = await run(['--limit', '1']);
    assert.equal(first.code, 0, first.stderr);
    includesAll(first.stderr, ['2 stale row(s)', 'm01/proof01, m02/proof03']);
    assert.deepEqual(fake.requests.slice(6).map(tagOf), ['m01/proof01']);
    assert.deepEqual(wellFormedCsv(ws.output), allKeys(ws), 'no row lost');
    const second = await run();
    assert.equal(second.code, 0, second.stderr);
    includesAll(second.stderr, ['1 stale row(s)', 'm02/proof03']);
    assert.deepEqual(fake.requests.slice(7).map(tagOf), ['m02/proof03']);
    assert.deepEqual(wellFormedCsv(ws.output), allKeys(ws));
  });

  test('--rescore --limit 2 with a stale row past the limit: 2 judged again, the counts say so', async (t) => {
    const { fake, ws, run } = await setup(t);
    assert.equal((await run()).code, 0);
    editTranscript(ws, 'm02', 'proof03');

    const result = await run(['--rescore', '--limit', '2']);

    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.requests.length, 8);
    includesAll(result.stderr, [
      '--rescore: judging 2 scored transcript(s) again',
      '--limit 2: judging 2 transcript(s); 4 wait for a later run',
    ]);
    assert.doesNotMatch(result.stderr, /skipping/, 'with --rescore no row is skipped as scored');
    assert.deepEqual(wellFormedCsv(ws.output), allKeys(ws), 'each pair once');
  });

  test('a row the audit log has no prompt hash for is kept, and said to be unknown', async (t) => {
    const { fake, ws, run } = await setup(t);
    assert.equal((await run()).code, 0);
    fs.rmSync(ws.log);
    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    includesAll(result.stderr, ['6 row(s)', 'cannot be checked', 'kept as they are']);
    assert.equal(fake.requests.length, 6);
  });
});

const allTwo = () => Object.fromEntries(DIMENSIONS.map((dimension) => [dimension, 2]));
const pairOf = (line: LogLine) => `${line.model}/${line.task_id}`;

// ---------------------------------------------------------------------------------------------
describe('report.ts: stale and incomplete human rows are listed and left out of every figure', () => {
  /** A workspace judged by the fake, sheets for alice and bob, then one transcript edited after they scored it. */
  async function scoredThenEdited(t: TestContext) {
    const { ws, run } = await setup(t);
    assert.equal((await run()).code, 0);
    const everyPair = ws.pairs.map((pair) => scoredRow(pair.model, pair.task_id));
    const folder = writeSheets(ws, {
      alice: everyPair,
      bob: [scoredRow('m01', 'proof01'), scoredRow('m02', 'proof02', { error_diagnosis: '' })],
    });
    editTranscript(ws, 'm01', 'proof01');
    const args = ['--scores', ws.output, '--rubric', ws.rubric, '--log', ws.log];
    return {
      ws,
      folder,
      args: [...args, '--transcripts', ws.transcripts, '--human-scores', folder],
    };
  }

  test('JSON: missing lists incomplete_human and stale_human as "scorer: model/task"; pairs leave them out', async (t) => {
    const { args } = await scoredThenEdited(t);
    const result = await runReport([...args, '--format', 'json']);
    assert.equal(result.code, 0, result.stderr);
    const report = JSON.parse(result.stdout);
    // The edit also makes the judge's row of m01/proof01 stale: left out, listed as such.
    assert.deepEqual(report.missing, {
      no_human: [],
      no_judge: [],
      incomplete_human: ['bob: m02/proof02'],
      stale_human: ['alice: m01/proof01', 'bob: m01/proof01'],
      stale_judge: ['m01/proof01'],
    });
    assert.equal(report.pairs, 5, "alice's 5 rows of unedited transcripts");
    assert.equal(report.dimensions[0].judge_vs_human.n, 5);
    const m01 = report.models.find((row: { model: string }) => row.model === 'm01');
    assert.equal(m01.n_human, 2, 'the stale rows are in no model mean');
    assert.equal(report.dimensions[0].human_vs_human, null, 'no ceiling from stale rows');
  });

  test('text and Markdown list them beside the missing rows', async (t) => {
    const { args } = await scoredThenEdited(t);
    for (const format of ['table', 'markdown']) {
      const result = await runReport([...args, '--format', format]);
      assert.equal(result.code, 0, result.stderr);
      includesAll(result.stdout, [
        '5 (transcript, scorer) pairs',
        'incomplete human rows (left out): bob: m02/proof02',
        'stale human rows (transcript edited since scored; left out): alice: m01/proof01, bob: m01/proof01',
      ]);
    }
  });

  test('the page lists them in its run table and shows no scorer of theirs beside a transcript', async (t) => {
    const { ws, args } = await scoredThenEdited(t);
    const page = path.join(ws.dir, 'report.html');
    const result = await runReport([...args, '--html', page]);
    assert.equal(result.code, 0, result.stderr);
    const html = fs.readFileSync(page, 'utf8');
    includesAll(html, [
      'human rows not fully scored, left out (1)</th><td>bob: m02/proof02',
      'human rows of an edited transcript, left out (2)</th><td>alice: m01/proof01, bob: m01/proof01',
    ]);
    assert.doesNotMatch(html, /bob's notes|>bob</, 'no row of bob (stale or incomplete) is shown');
  });

  test('each figure says how many it rests on: n of the agreement, of the ceiling, matched transcripts per model', async (t) => {
    const { ws, args } = await scoredThenEdited(t);
    writeSheets(ws, { carol: [scoredRow('m02', 'proof01'), scoredRow('m02', 'proof02')] });
    const result = await runReport([...args, '--format', 'table']);
    assert.equal(result.code, 0, result.stderr);
    const lines = result.stdout.split('\n');
    /** The first line starting with `start` in the table titled `title`. */
    const rowOf = (title: string, start: string) =>
      lines.slice(lines.indexOf(`${title}:`)).find((line) => line.startsWith(start));
    // alice 5 + carol 2; alice and carol both scored m02/proof01 and m02/proof02: 2 ceiling pairs.
    const dimension = 'mathematical_correctness ';
    assert.match(rowOf('the judge against the people', dimension)!, /^\S+\s+7\s/);
    const ceilingTitle = 'against the human ceiling (how well two people agree)';
    assert.match(rowOf(ceilingTitle, dimension)!, /^\S+\s+2\s/);
    // The tutors' n matched: m01's proof02 and proof03 (its proof01 rows are stale), all of m02's.
    const tutors = 'the tutors on mathematical_correctness (Spearman of the means -)';
    assert.match(rowOf(tutors, 'm01 ')!, /^m01\s+2\s/);
    assert.match(rowOf(tutors, 'm02 ')!, /^m02\s+3\s/);
  });

  test('an old sheet without transcript_sha256 is read as it is: nothing stale', async (t) => {
    const { ws } = await scoredThenEdited(t);
    const file = writeHumanFile(ws, [scoredRow('m01', 'proof01', { scorer: 'al' })]);
    const args = ['--scores', ws.output, '--rubric', ws.rubric, '--log', ws.log];
    const result = await runReport([
      ...args,
      '--transcripts',
      ws.transcripts,
      '--human-scores',
      file,
      '--format',
      'json',
    ]);
    assert.equal(result.code, 0, result.stderr);
    const report = JSON.parse(result.stdout);
    assert.deepEqual(report.missing.stale_human, [], 'no hash: its row cannot be told stale');
    // Its transcript was edited after the judge scored it: the judge's row is left out instead.
    assert.deepEqual(report.missing.stale_judge, ['m01/proof01']);
    assert.equal(report.pairs, 0);
  });
});

describe('the plan made by report.ts sheet: a sheet lost or a row deleted is an open assignment', () => {
  /** A plan for alice and bob (each transcript to both) in the workspace, both sheets fully scored. */
  async function scoredPlan(t: TestContext) {
    const base = await setup(t);
    const ws = base.ws;
    const out = path.join(ws.dir, 'human');
    const paths = ['--transcripts', ws.transcripts, '--tasks', ws.tasks, '--out', out];
    const more = ['--reference-keys', ws.referenceKeys, '--rubric', ws.rubric];
    const planned = await runReport(['sheet', ...paths, ...more, '--scorers', 'alice,bob']);
    assert.equal(planned.code, 0, planned.stderr);
    for (const scorer of ['alice', 'bob']) {
      const sheet = path.join(out, `${scorer}.csv`);
      const records = parseCsv(fs.readFileSync(sheet), { columns: true }) as Record<
        string,
        string
      >[];
      for (const record of records) {
        for (const dimension of DIMENSIONS) record[dimension] = '1';
      }
      fs.writeFileSync(sheet, stringifyCsv(records, { header: true }));
    }
    return { ...base, out };
  }

  test('every sheet of the plan scored: the full run judges', async (t) => {
    const { fake, out, run } = await scoredPlan(t);
    const result = await run(['--human-scores', out]);
    assert.equal(result.code, 0, result.stderr);
    assert.ok(fake.requests.length > 0);
  });

  test("bob's sheet removed: refused, his assignments listed as having no row; no call", async (t) => {
    const { fake, out, run } = await scoredPlan(t);
    const bobs = parseCsv(fs.readFileSync(path.join(out, 'bob.csv')), { columns: true });
    fs.rmSync(path.join(out, 'bob.csv'));

    const result = await run(['--human-scores', out]);

    assert.equal(result.code, 2, result.stderr);
    assert.equal(fake.requests.length, 0);
    includesAll(result.stderr, [`${bobs.length} of`, 'bob: ', '(no row)']);
  });

  test("a row deleted from alice's sheet: refused, that assignment listed", async (t) => {
    const { fake, out, run } = await scoredPlan(t);
    const sheet = path.join(out, 'alice.csv');
    const records = parseCsv(fs.readFileSync(sheet), { columns: true }) as Record<string, string>[];
    const gone = records.shift()!;
    fs.writeFileSync(sheet, stringifyCsv(records, { header: true }));

    const result = await run(['--human-scores', out]);

    assert.equal(result.code, 2, result.stderr);
    assert.equal(fake.requests.length, 0);
    includesAll(result.stderr, [`alice: ${gone.model}/${gone.task_id} (no row)`]);
  });
});
