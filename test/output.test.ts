// Output stage: the CSV (formula escaping, header, reading it back, torn tails), resume and --rescore, crash safety,
// the lock, the audit log, and outputs that cannot be written.
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import type { TestContext } from 'node:test';
import { pathToFileURL } from 'node:url';
import {
  DEAD_BASE_URL,
  DIMENSIONS,
  EXPECTED_HEADER,
  REPO,
  SCRIPT,
  addTaskFiles,
  bundled,
  csvRows,
  goodScores,
  hold,
  judgeEntry,
  mentioning,
  readCsv,
  readLog,
  rowCount,
  runMain,
  setup,
  sha256,
  tagOf,
  tempDir,
  waitFor,
  allKeys,
  wellFormedCsv,
} from './helpers.ts';
import type { LogEntry, Workspace } from './helpers.ts';
import type { RecordedRequest } from '../fakes/anthropic.ts';
import type { ScoreRow } from '../run-judge.ts';

// Destructured, not imported by name: a renamed export then fails its own tests, not the whole file.
const { ScoreFile, acquireLock, guardCell, replaceFileDurably } = await import('../run-judge.ts');

/** Appends rows to a CSV through ScoreFile, as a run does (header once, each row flushed). */
function writeScores(file: string, rows: ScoreRow[], dimensions: string[]): void {
  const scores = ScoreFile.open(file, dimensions);
  try {
    for (const row of rows) scores.write(row);
  } finally {
    scores.close();
  }
}

// ---------------------------------------------------------------------------------------------
// Local helpers
// ---------------------------------------------------------------------------------------------

const modelOf = (req: RecordedRequest) => req.body?.model as string;
/** The "model/task" of each request since `from`, sorted. */
const judgedSince = (requests: RecordedRequest[], from: number) =>
  requests.slice(from).map(tagOf).sort();

/** The pid of a process that has exited and been reaped (`true`: a process with nothing to load). */
function deadPid(): number {
  const exited = spawnSync('true');
  assert.equal(exited.status, 0, `true ran: ${exited.error}`);
  return exited.pid!;
}

/** The pid of another live process (`sleep`: a process with nothing to load), killed after the test. */
async function livePid(t: TestContext): Promise<number> {
  const child = spawn('sleep', ['60'], { stdio: 'ignore' });
  t.after(() => child.kill('SIGKILL'));
  await new Promise((resolve, reject) => child.once('spawn', resolve).once('error', reject));
  return child.pid!;
}

/**
 * Runs `fn` while every read of `file` through node:fs (run-judge's included) calls `after` once the read returned;
 * reads made from inside `after` are not hooked.
 */
function afterReading<T>(file: string, after: () => void, fn: () => T): T {
  const fsModule = createRequire(import.meta.url)('node:fs') as typeof fs;
  const original = fsModule.readFileSync;
  let inside = false;
  fsModule.readFileSync = ((...args: Parameters<typeof original>) => {
    const result = original(...args);
    if (args[0] === file && !inside) {
      inside = true;
      try {
        after();
      } finally {
        inside = false;
      }
    }
    return result;
  }) as typeof original;
  syncBuiltinESMExports();
  try {
    return fn();
  } finally {
    fsModule.readFileSync = original;
    syncBuiltinESMExports();
  }
}

/** The pid of a zombie: a child that has exited but that its parent (a shell exec'd into sleep) never reaps. */
async function zombiePid(t: TestContext): Promise<number> {
  const parent = spawn('sh', ['-c', 'sleep 60 & echo $!; exec sleep 60'], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  t.after(() => parent.kill('SIGKILL'));
  let out = '';
  parent.stdout!.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  await waitFor(() => out.includes('\n'), 10_000, 'the shell to start its child');
  const pid = Number.parseInt(out, 10);
  // Killed only once the shell is sleep: a child that ended before the exec could be reaped by the shell.
  const parentIsSleep = () => fs.readFileSync(`/proc/${parent.pid}/comm`, 'utf8') === 'sleep\n';
  await waitFor(parentIsSleep, 10_000, 'the shell to exec sleep');
  process.kill(pid, 'SIGKILL');
  const state = () => fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0];
  await waitFor(() => state() === 'Z', 10_000, `process ${pid} to become a zombie`);
  return pid;
}

/** The number of file descriptors this process holds open. */
const openFds = () => fs.readdirSync('/proc/self/fd').length;

const row = (task_id: string, notes = 'ok', model = 'stub'): ScoreRow => ({
  task_id,
  model,
  scores: goodScores({ error_diagnosis: 1 }) as Record<string, number>,
  notes,
});
const dimensions = [...DIMENSIONS];
const header = (dims: readonly string[] = DIMENSIONS) =>
  `${['task_id', 'model', ...dims, 'notes'].join(',')}\n`;

// ---------------------------------------------------------------------------------------------
// Writing the CSV
// ---------------------------------------------------------------------------------------------

describe('guardCell: a notes cell a spreadsheet would run as a formula gets a leading quote', () => {
  const escaped: [string, string][] = [
    ['=', '=HYPERLINK("x")'],
    ['+', '+1+2'],
    ['-', '-2+3'],
    ['@', '@SUM(A1)'],
    ['tab', '\tcmd'],
    ['CR', '\r=1'],
    ['= after spaces', '   =1+1'],
    ['@ after a space', ' @SUM(A1)'],
    ["' (so that taking one guard off reads the cell back exactly)", "'already quoted"],
  ];
  for (const [label, notes] of escaped) {
    test(`a cell starting with ${label} is prefixed with '`, () => {
      assert.equal(guardCell(notes), `'${notes}`);
    });
  }

  test('text that only contains those characters later is untouched', () => {
    for (const notes of [
      'Good scaffolding; 2 = 2 later.',
      'a-b',
      'score 1+1',
      '',
      'email a@b.c',
      "it's fine",
    ]) {
      assert.equal(guardCell(notes), notes);
    }
  });
});

describe('ScoreFile: rows appended under a header taken from the rubric', () => {
  test('creates missing parent folders', (t) => {
    const file = path.join(tempDir(t), 'a', 'b', 'scores.csv');
    writeScores(file, [row('p1')], dimensions);
    assert.equal(fs.readFileSync(file, 'utf8'), `${header()}p1,stub,2,2,1,2,2,2,ok\n`);
  });

  test('the header is written once across two calls; rows follow in order, one line each', (t) => {
    const file = path.join(tempDir(t), 'scores.csv');
    writeScores(file, [row('p1')], dimensions);
    writeScores(file, [row('p2'), row('p3', 'fine', 'tutor')], dimensions);
    assert.equal(
      fs.readFileSync(file, 'utf8'),
      `${EXPECTED_HEADER}\np1,stub,2,2,1,2,2,2,ok\np2,stub,2,2,1,2,2,2,ok\np3,tutor,2,2,1,2,2,2,fine\n`,
    );
  });

  test('the columns are the rubric dimensions in the order given: header and scores follow it', (t) => {
    const file = path.join(tempDir(t), 'scores.csv');
    const reversed = [...DIMENSIONS].reverse();
    writeScores(file, [row('p1')], reversed);
    // error_diagnosis (scored 1) is the third dimension, so the fourth from the end.
    assert.equal(fs.readFileSync(file, 'utf8'), `${header(reversed)}p1,stub,2,2,2,1,2,2,ok\n`);
  });

  test('notes with commas, quotes, line breaks and non-ASCII text read back exactly', (t) => {
    const file = path.join(tempDir(t), 'scores.csv');
    const notes = [
      'He said "no", then\nleft, twice.\r\nEnd "quoted, too"',
      'a\rb',
      'ends with a break\n',
      '"',
      'naïve 😀',
    ];
    writeScores(file, [...notes.map((text, i) => row(`p${i}`, text)), row('plain')], dimensions);
    const records = readCsv(file);
    assert.equal(records.length, notes.length + 2);
    assert.deepEqual(records[1], ['p0', 'stub', '2', '2', '1', '2', '2', '2', notes[0]]);
    assert.deepEqual(
      records.slice(1).map((record) => record[8]),
      [...notes, 'ok'],
    );
  });

  test('formula-like notes are written with a leading quote', (t) => {
    const file = path.join(tempDir(t), 'scores.csv');
    writeScores(file, [row('p1', '=cmd|calc')], dimensions);
    assert.equal(readCsv(file)[1]![8], "'=cmd|calc");
  });

  const foreign: [string, string][] = [
    ['a file with a different header', 'task_id,model,old_dimension,notes\np0,stub,2,"x, y"\n'],
    [
      'a file with a different header and CRLF line endings',
      'task_id,model,old_dimension,notes\r\np0,stub,2,"x, y"\r\n',
    ],
    [
      'a foreign one-line file without a trailing newline (not cut off as a torn line)',
      'name,amount',
    ],
  ];
  for (const [label, content] of foreign) {
    test(`${label} → EvalConfigurationError naming it; the file is byte-identical`, (t) => {
      const file = path.join(tempDir(t), 'scores.csv');
      fs.writeFileSync(file, content);
      assert.throws(() => writeScores(file, [row('p1')], dimensions), {
        name: 'EvalConfigurationError',
        message: mentioning(file, 'header', 'another --output'),
      });
      assert.equal(fs.readFileSync(file, 'utf8'), content);
    });
  }

  test('a torn last line is cut off before the new rows are appended', (t) => {
    const file = path.join(tempDir(t), 'scores.csv');
    writeScores(file, [row('p1')], dimensions);
    const complete = fs.readFileSync(file, 'utf8');
    fs.appendFileSync(file, 'p2,stub,2,2,"half a no');
    writeScores(file, [row('p3')], dimensions);
    assert.equal(fs.readFileSync(file, 'utf8'), `${complete}p3,stub,2,2,1,2,2,2,ok\n`);
  });
});

// ---------------------------------------------------------------------------------------------
// Reading the CSV back (csv-parse with byte offsets)
// ---------------------------------------------------------------------------------------------

describe('reading the CSV: a torn tail is cut off at the last complete record', () => {
  // Complete rows whose notes hold quotes, commas, line breaks and multi-byte characters (byte offsets, not characters).
  const complete = `${header()}p1,stub,2,2,1,2,2,2,"café — ""q"", x\n😀 line"\np2,stub,0,1,2,2,2,2,naïve\n`;
  const tails: [string, string | Buffer][] = [
    ['cut inside a quoted multi-line notes field', 'p3,stub,2,2,2,2,2,2,"line one\nline t'],
    // A complete last row without its line break is a row, not a tear: see "the CSV repair works on bytes" below.
    [
      'cut inside a multi-byte character',
      Buffer.from([...Buffer.from('p3,stub,2,2,2,2,2,2,"caf'), 0xc3]),
    ],
    ['cut after a few cells', 'p3,stub,2,'],
  ];
  for (const [label, tail] of tails) {
    test(`${label}: the complete rows are kept, byte for byte`, (t) => {
      const file = path.join(tempDir(t), 'scores.csv');
      const torn = Buffer.concat([Buffer.from(complete), Buffer.from(tail)]);
      fs.writeFileSync(file, torn);
      const readOnly = ScoreFile.open(file, dimensions, { readOnly: true });
      assert.equal(readOnly.done.size, 2);
      assert.ok(fs.readFileSync(file).equals(torn), 'a read-only open (dry-run) changes nothing');
      const scores = ScoreFile.open(file, dimensions);
      scores.close();
      assert.equal(scores.torn, Buffer.byteLength(tail));
      assert.equal(scores.done.size, 2, 'the torn row does not count as scored');
      assert.equal(fs.readFileSync(file, 'utf8'), complete);
    });
  }

  test('a CSV saved with CRLF line endings (e.g. by a spreadsheet) stays readable after rows are appended', (t) => {
    const file = path.join(tempDir(t), 'scores.csv');
    fs.writeFileSync(file, `${EXPECTED_HEADER}\r\np1,stub,2,2,1,2,2,2,ok\r\n`);
    writeScores(file, [row('p2'), row('p3')], dimensions);
    const scores = ScoreFile.open(file, dimensions, { readOnly: true });
    assert.equal(scores.done.size, 3, 'every row is read back as its own pair');
  });

  test('a CRLF file torn between the CR and the LF of its last line (`..."ok"` then CR) is repaired, not refused', (t) => {
    const file = path.join(tempDir(t), 'scores.csv');
    const complete = `${EXPECTED_HEADER}\r\np1,stub,2,2,1,2,2,2,ok\r\n`;
    const tail = 'p2,stub,2,2,1,2,2,2,"ok"\r';
    fs.writeFileSync(file, complete + tail);
    const scores = ScoreFile.open(file, dimensions);
    scores.close();
    assert.equal(scores.torn, Buffer.byteLength(tail), 'the torn line is cut off');
    assert.equal(scores.done.size, 1, 'the torn row does not count as scored');
    assert.equal(
      fs.readFileSync(file, 'utf8'),
      complete,
      'the complete rows are kept, byte for byte',
    );
    writeScores(file, [row('p2')], dimensions);
    assert.equal(
      ScoreFile.open(file, dimensions, { readOnly: true }).done.size,
      2,
      'rows append after the repair',
    );
  });

  test('a torn header alone is replaced by the full header', (t) => {
    const file = path.join(tempDir(t), 'scores.csv');
    fs.writeFileSync(file, 'task_id,model,mathem');
    writeScores(file, [row('p1')], dimensions);
    assert.equal(fs.readFileSync(file, 'utf8'), `${header()}p1,stub,2,2,1,2,2,2,ok\n`);
  });
});

describe('reading the CSV: a file that is not a valid run-judge CSV is refused, untouched', () => {
  const first = 'p1,stub,2,2,2,2,2,2,ok\n';
  const malformed: { label: string; content: string; line: number }[] = [
    {
      label: 'a middle line with too few fields',
      content: `${header()}${first}p2,stub,2,ok\n${first}`,
      line: 3,
    },
    {
      // Line numbers count lines of the file, so a quoted note with a line break earlier shifts them.
      label: 'a short line after a note spanning two lines',
      content: `${header()}p1,stub,2,2,2,2,2,2,"one\ntwo"\np2,stub,2,ok\n`,
      line: 4,
    },
    {
      // Refusing must not repair first: the file is left exactly as it was.
      label: 'a short middle line in a file that also has a torn tail',
      content: `${header()}p2,stub,2,ok\n${first}p3,stub,2,2`,
      line: 2,
    },
  ];
  for (const { label, content, line } of malformed) {
    test(`${label} → EvalInputError naming the file and line ${line}; no byte changed, no descriptor left open`, (t) => {
      const file = path.join(tempDir(t), 'scores.csv');
      fs.writeFileSync(file, content);
      const fds = openFds();
      assert.throws(() => ScoreFile.open(file, dimensions), {
        name: 'EvalInputError',
        message: mentioning(file, `line ${line} `, 'fields'),
      });
      assert.equal(fs.readFileSync(file, 'utf8'), content);
      assert.equal(openFds(), fds, 'the refused file is closed again');
    });
  }

  test('a stray quote inside an unquoted cell → EvalInputError naming the file; no byte changed', (t) => {
    const file = path.join(tempDir(t), 'scores.csv');
    const content = `${header()}p1,stub,2,2,2,2,2,2,"a"b\n${first}`;
    fs.writeFileSync(file, content);
    assert.throws(() => ScoreFile.open(file, dimensions), {
      name: 'EvalInputError',
      message: mentioning(file),
    });
    assert.equal(fs.readFileSync(file, 'utf8'), content);
  });

  test('a transcript scored on two lines → EvalInputError naming both; no byte changed', (t) => {
    // --rescore would replace one copy and keep the other; report.ts refuses the same file.
    const file = path.join(tempDir(t), 'scores.csv');
    const content = `${header()}${first}p2,stub,1,1,1,1,1,1,ok\n${first}`;
    fs.writeFileSync(file, content);
    assert.throws(() => ScoreFile.open(file, dimensions), {
      name: 'EvalInputError',
      message: mentioning(file, 'lines 2 and 4', 'stub/p1'),
    });
    assert.equal(fs.readFileSync(file, 'utf8'), content);
  });
});

describe('the CSV repair works on bytes: complete rows are kept, a BOM and trailing blank lines are accepted', () => {
  const complete = `${header()}p1,stub,2,2,1,2,2,2,"café — ""q"", x\n😀 line"\np2,stub,0,1,2,2,2,2,naïve\n`;
  const lastRows: [string, string][] = [
    ['a plain last row without its final newline', 'p3,stub,2,2,2,2,2,2,ok'],
    ['a quoted last row ending right after its closing quote', 'p3,stub,2,2,2,2,2,2,"say ""hi"""'],
    [
      'a last row with multi-byte characters, without its final newline',
      'p3,stub,2,2,2,2,2,2,naïve 😀',
    ],
  ];
  for (const [label, last] of lastRows) {
    test(`${label} is a complete row: kept, and the next row appended lands on its own line`, (t) => {
      const file = path.join(tempDir(t), 'scores.csv');
      const content = complete + last;
      fs.writeFileSync(file, content);
      assert.equal(
        ScoreFile.open(file, dimensions, { readOnly: true }).done.size,
        3,
        'read-only: the row counts',
      );
      const scores = ScoreFile.open(file, dimensions);
      scores.close();
      assert.equal(scores.torn, 0, 'nothing is torn');
      assert.equal(scores.done.size, 3, 'the last row counts as scored');
      writeScores(file, [row('p4')], dimensions);
      const after = fs.readFileSync(file, 'utf8');
      assert.ok(after.startsWith(content), 'the last row is not cut off');
      assert.deepEqual(
        readCsv(file).map((record) => record[0]),
        ['task_id', 'p1', 'p2', 'p3', 'p4'],
        'the file parses strictly, each row on its own',
      );
      assert.ok(after.endsWith('\np4,stub,2,2,1,2,2,2,ok\n'), JSON.stringify(after.slice(-60)));
      assert.equal(ScoreFile.open(file, dimensions, { readOnly: true }).done.size, 4);
    });
  }

  test('a CRLF file whose last complete row lacks its CRLF keeps that row', (t) => {
    const file = path.join(tempDir(t), 'scores.csv');
    fs.writeFileSync(
      file,
      `${EXPECTED_HEADER}\r\np1,stub,2,2,1,2,2,2,ok\r\np2,stub,2,2,1,2,2,2,ok`,
    );
    const scores = ScoreFile.open(file, dimensions);
    scores.close();
    assert.deepEqual([scores.torn, scores.done.size], [0, 2]);
    writeScores(file, [row('p3')], dimensions);
    assert.equal(ScoreFile.open(file, dimensions, { readOnly: true }).done.size, 3);
  });

  const accepted: [string, string, number][] = [
    ['a UTF-8 BOM before the header', `\ufeff${header()}p1,stub,2,2,1,2,2,2,ok\n`, 1],
    ['a UTF-8 BOM before a header with no rows yet', `\ufeff${header()}`, 0],
    ['trailing blank lines', `${header()}p1,stub,2,2,1,2,2,2,ok\n\n\n`, 1],
    ['trailing blank CRLF lines', `${EXPECTED_HEADER}\r\np1,stub,2,2,1,2,2,2,ok\r\n\r\n\r\n`, 1],
  ];
  for (const [label, content, rows] of accepted) {
    test(`${label}: accepted (the header matches), its rows read; a row appended after it reads back`, (t) => {
      const file = path.join(tempDir(t), 'scores.csv');
      fs.writeFileSync(file, content);
      assert.equal(ScoreFile.open(file, dimensions, { readOnly: true }).done.size, rows);
      writeScores(file, [row('p9')], dimensions);
      assert.equal(
        ScoreFile.open(file, dimensions, { readOnly: true }).done.size,
        rows + 1,
        'every row, the new one too, is read back',
      );
      assert.doesNotMatch(
        fs.readFileSync(file, 'utf8'),
        /\n\r?\n/,
        'no blank line left between the rows',
      );
      if (content.includes('\r')) return; // the strict parser below would take CRLF as the only line break
      const records = readCsv(file);
      assert.equal(records.length, rows + 2, 'it parses strictly');
      assert.deepEqual(records.at(-1), ['p9', 'stub', '2', '2', '1', '2', '2', '2', 'ok']);
    });
  }

  /** A CSV whose second row's notes cell holds the bytes 0xff 0xfe: not UTF-8. */
  const notUtf8 = Buffer.concat([
    Buffer.from(`${header()}p1,stub,2,2,1,2,2,2,ok\np2,stub,2,2,1,2,2,2,bad `),
    Buffer.from([0xff, 0xfe]),
    Buffer.from(' bytes\np3,stub,2,2,1,2,2,2,ok\n'),
  ]);

  test('a CSV that is not valid UTF-8 → refused naming the file; no byte changed, no descriptor left open', (t) => {
    const file = path.join(tempDir(t), 'scores.csv');
    fs.writeFileSync(file, notUtf8);
    const fds = openFds();
    for (const readOnly of [true, false]) {
      assert.throws(() => ScoreFile.open(file, dimensions, { readOnly }), {
        name: /^Eval(Configuration|Input)Error$/,
        message: mentioning(file, 'UTF-8'),
      });
    }
    assert.ok(fs.readFileSync(file).equals(notUtf8), 'byte-identical');
    assert.equal(openFds(), fds, 'the refused file is closed again');
  });

  test('a run on a CSV that is not valid UTF-8: exit 2 naming the file, no request, the file byte-identical, no lock', async (t) => {
    const { fake, ws, run } = await setup(t);
    fs.mkdirSync(path.dirname(ws.output), { recursive: true });
    fs.writeFileSync(ws.output, notUtf8);
    const result = await run();
    assert.equal(result.code, 2, result.stderr);
    assert.ok(result.stderr.includes(`run-judge: ${ws.output}`), result.stderr);
    assert.doesNotMatch(result.stderr, /^\s+at /m, 'no stack trace');
    assert.equal(fake.requests.length, 0);
    assert.ok(fs.readFileSync(ws.output).equals(notUtf8), 'byte-identical');
    assert.equal(fs.existsSync(`${ws.output}.lock`), false);
  });

  test('a run on a CSV whose last complete row lacks its newline: that pair is skipped, new rows follow on their own lines', async (t) => {
    const { fake, ws, run } = await setup(t);
    assert.equal((await run(['--task', 'proof01'])).code, 0);
    const stripped = fs.readFileSync(ws.output, 'utf8').slice(0, -1);
    fs.writeFileSync(ws.output, stripped);
    const lastKey = csvRows(ws.output).at(-1)!.key;
    const before = fake.requests.length;
    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    assert.doesNotMatch(result.stderr, /torn/, 'a complete row is not reported as torn');
    assert.match(result.stderr, /skipping 2 transcript\(s\)/);
    assert.deepEqual(
      judgedSince(fake.requests, before),
      allKeys(ws).filter((key) => !key.endsWith('proof01')),
      `${lastKey} is not judged again`,
    );
    assert.ok(
      fs.readFileSync(ws.output, 'utf8').startsWith(`${stripped}\n`),
      'the row is kept, then ended',
    );
    assert.deepEqual(wellFormedCsv(ws.output), allKeys(ws));
  });
});

// ---------------------------------------------------------------------------------------------
// Resume, --rescore and torn tails through a whole run (in-process)
// ---------------------------------------------------------------------------------------------

describe('resume and --rescore', () => {
  test('a rerun skips every scored pair, says how many, sends no request and leaves the CSV as it was', async (t) => {
    const { fake, ws, run } = await setup(t);
    assert.equal((await run()).code, 0);
    const csv = fs.readFileSync(ws.output, 'utf8');
    const before = fake.requests.length;
    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.requests.length, before, 'no new request');
    assert.match(result.stderr, /skipping 6 transcript\(s\) already scored/);
    assert.match(result.stderr, /6 selected: 0 scored, 6 skipped/);
    assert.equal(fs.readFileSync(ws.output, 'utf8'), csv);
  });

  test('a rerun judges only the pairs that have no row yet', async (t) => {
    const { fake, ws, run } = await setup(t, {}, { models: 3 });
    assert.equal((await run(['--task', 'proof01'])).code, 0);
    assert.equal(fake.requests.length, 3);
    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /skipping 3 transcript\(s\)/);
    const rest = allKeys(ws).filter((key) => !key.endsWith('proof01'));
    assert.deepEqual(judgedSince(fake.requests, 3), rest);
    assert.deepEqual(wellFormedCsv(ws.output), allKeys(ws));
  });

  test('notes with commas, quotes and line breaks are read back exactly on resume: nothing is judged twice', async (t) => {
    const notes: Record<string, string> = {
      'm01/proof01': 'commas, many, of them',
      'm01/proof02': 'he said "no", then ""twice""',
      'm01/proof03': 'line one\nline two\n\nline four',
      'm02/proof01': 'windows\r\nline, "both"',
      'm02/proof02': 'ends with a line break\n',
      'm02/proof03': 'a lone \r and naïve 😀',
    };
    const { fake, ws, run } = await setup(t, {
      responder: (req) => ({ text: fake.validAnswer({}, notes[tagOf(req)!]) }),
    });
    assert.equal((await run(['--task', 'proof01'])).code, 0);
    assert.equal((await run()).code, 0);
    const csv = fs.readFileSync(ws.output, 'utf8');
    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /skipping 6 transcript\(s\)/);
    assert.deepEqual(
      fake.requests.map(tagOf).sort(),
      allKeys(ws),
      'each transcript judged exactly once',
    );
    assert.equal(fs.readFileSync(ws.output, 'utf8'), csv, 'the CSV is untouched');
    const cells = Object.fromEntries(csvRows(ws.output).map((r) => [r.key, r.record[8]]));
    assert.deepEqual(cells, notes);
  });

  test('--rescore --task proof01 replaces those rows only; the audit log keeps old and new answers', async (t) => {
    // Notes with quotes, a comma and a line break (a quoted cell), or ending with a carriage return (an unquoted cell):
    // the rewrite must keep the other rows as they were.
    const note = (round: number, key = 'm01/proof01') =>
      key.endsWith('proof03')
        ? `round ${round} ends with a CR\r`
        : `round ${round}: "quoted", a comma,\nline two`;
    let round = 1;
    const { fake, ws, run } = await setup(t, {
      responder: (req) => ({
        text: fake.validAnswer({ student_agency: round }, note(round, tagOf(req))),
      }),
    });
    assert.equal((await run()).code, 0);
    const otherBefore = csvRows(ws.output).filter((r) => r.record[0] !== 'proof01');
    round = 0;
    const before = fake.requests.length;
    const result = await run(['--rescore', '--task', 'proof01']);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /--rescore: judging 2 scored transcript\(s\) again/);
    assert.deepEqual(judgedSince(fake.requests, before), ['m01/proof01', 'm02/proof01']);
    assert.deepEqual(wellFormedCsv(ws.output), allKeys(ws), 'exactly one row per pair');
    const rows = csvRows(ws.output);
    for (const r of rows.filter((candidate) => candidate.record[0] === 'proof01')) {
      assert.equal(r.record[5], '0', 'the new student_agency score');
      assert.equal(r.record[8], note(0));
    }
    assert.deepEqual(
      rows.filter((r) => r.record[0] !== 'proof01'),
      otherBefore,
      'the other rows are kept as they were',
    );
    const entries = readLog(ws.log).filter((e) => e.task_id === 'proof01' && e.model === 'm01');
    assert.deepEqual(
      entries.map((e) => e.notes),
      [note(1), note(0)],
    );
    assert.notEqual(entries[0]!.run_id, entries[1]!.run_id);
    assert.match(entries[0]!.answers[0]!.text, /round 1/, 'the old raw answer is still in the log');
    assert.deepEqual(
      fs.readdirSync(path.dirname(ws.output)).filter((f) => f.endsWith('.tmp')),
      [],
      'no temp file left',
    );
  });
});

describe('--rescore replaces, never removes: an old row leaves only when its new row is written', () => {
  test('the API down: every old row is kept byte for byte, and the summary says which; exit 2', async (t) => {
    const { ws, run } = await setup(t, { clock: true });
    assert.equal((await run()).code, 0);
    const csv = fs.readFileSync(ws.output, 'utf8');
    const result = await run(['--rescore'], { baseUrl: DEAD_BASE_URL });
    assert.equal(result.code, 2, result.stderr);
    assert.equal(fs.readFileSync(ws.output, 'utf8'), csv, 'not one row removed');
    assert.match(
      result.stderr,
      /\n {2}--rescore: 6 transcript\(s\) kept their old row in .+judge_scores\.csv, not judged again \(failed or not reached\): m01\/proof01, m01\/proof02, /,
    );
  });

  test('a re-judgement that fails (unusable from every judge) keeps its old row; the others are replaced in place', async (t) => {
    let round = 1;
    const { fake, ws, run } = await setup(t, {
      responder: (req) => {
        if (round === 2 && tagOf(req) === 'm01/proof02') return { text: 'not json' };
        return { text: fake.validAnswer({}, `round ${round}`) };
      },
    });
    assert.equal((await run()).code, 0);
    const before = csvRows(ws.output);
    round = 2;
    const result = await run(['--rescore']);
    assert.equal(result.code, 1, result.stderr);
    const after = csvRows(ws.output);
    assert.deepEqual(
      after.map((r) => r.key),
      before.map((r) => r.key),
      'one row per pair, in the same order',
    );
    for (const r of after) {
      const expected = r.key === 'm01/proof02' ? 'round 1' : 'round 2';
      assert.equal(r.record[8], expected, r.key);
    }
    assert.match(result.stderr, /\n {2}failed m01\/proof02: /);
    assert.match(
      result.stderr,
      /--rescore: 1 transcript\(s\) kept their old row in .+: m01\/proof02\n/,
    );
  });

  test('kill -9 at several moments of a --rescore: each pair has its old row or its new one, never neither, never both', async (t) => {
    let round = 1;
    const {
      fake,
      ws,
      run,
      spawn: spawnCli,
    } = await setup(
      t,
      { latencyMs: 30, responder: () => ({ text: fake.validAnswer({}, `round ${round}`) }) },
      { models: 3 },
    );
    assert.equal((await run()).code, 0);
    round = 2;
    // Killed once 1 request is sent (nothing answered yet), then once 4 answers are logged.
    for (const [answers, requests] of [
      [0, 1],
      [4, 0],
    ]) {
      const sent = fake.requests.length;
      const logged = readLog(ws.log).length;
      const { child, done } = spawnCli(['--rescore', '--concurrency', '2']);
      await waitFor(
        () =>
          fake.requests.length >= sent + requests! && readLog(ws.log).length >= logged + answers!,
        20_000,
        `${requests} request(s) and ${answers} audit line(s)`,
      );
      child.kill('SIGKILL');
      assert.equal((await done).signal, 'SIGKILL');
      assert.deepEqual(wellFormedCsv(ws.output), allKeys(ws), `every pair once, after ${answers}`);
    }
    // The new rows wait in the journal; the next run swaps them in, says so, and judges nothing.
    assert.ok(fs.existsSync(`${ws.output}.replacing`), 'the killed run left its journal');
    const sent = fake.requests.length;
    const next = await run();
    assert.equal(next.code, 0, next.stderr);
    assert.match(
      next.stderr,
      /swapped into .+ the [1-9]\d* row\(s\) a stopped run had judged again/,
    );
    assert.equal(fake.requests.length, sent, 'nothing judged again');
    assert.equal(fs.existsSync(`${ws.output}.replacing`), false, 'the journal is gone');
    assert.deepEqual(wellFormedCsv(ws.output), allKeys(ws), 'every pair once');
    const notes = csvRows(ws.output).map((r) => r.record[8]);
    assert.ok(notes.includes('round 2'), `some rows were replaced: ${notes.join(', ')}`);
  });
});

describe('ScoreFile.replaceOnWrite: a marked row is swapped for its new one, every other byte kept', () => {
  test('a CRLF file with a quoted multi-line cell and no final line break: only the marked row changes', async (t) => {
    const file = path.join(tempDir(t), 'scores.csv');
    const first = 'p1,stub,2,2,1,2,2,2,"two\r\nlines, quoted"\r\n';
    const last = 'p3,stub,0,0,0,0,0,0,last';
    fs.writeFileSync(file, `${EXPECTED_HEADER}\r\n${first}p2,stub,1,1,1,1,1,1,old\r\n${last}`);
    const scores = ScoreFile.open(file, dimensions);
    t.after(() => scores.close());
    assert.equal(scores.replaceOnWrite(['stub\u0000p2', 'stub\u0000p3', 'stub\u0000nothing']), 2);
    const before = fs.readFileSync(file, 'utf8');
    scores.write(row('p2', 'new'));
    scores.write(row('p4', 'appended'));
    scores.write(row('p3', 'new last'));
    assert.equal(
      fs.readFileSync(file, 'utf8'),
      `${before}p4,stub,2,2,1,2,2,2,appended\n`,
      'until the commit, the old rows stay; a new pair is appended',
    );
    assert.equal(
      fs.readFileSync(`${file}.replacing`, 'utf8'),
      'p2,stub,2,2,1,2,2,2,new\np3,stub,2,2,1,2,2,2,new last\n',
      'the replacing rows wait in the journal',
    );
    scores.commitReplacements();
    assert.equal(
      fs.readFileSync(file, 'utf8'),
      `${EXPECTED_HEADER}\r\n${first}p2,stub,2,2,1,2,2,2,new\n` +
        'p3,stub,2,2,1,2,2,2,new last\np4,stub,2,2,1,2,2,2,appended\n',
    );
    assert.deepEqual(fs.readdirSync(path.dirname(file)), ['scores.csv'], 'no temp file left');
  });
});

describe('task and model cells read back as written: formula guards are put on, and taken off on resume', () => {
  // A model folder and a task id a spreadsheet would run as formulas, and a task id that starts with the guard itself.
  const guarded: Record<string, string> = {
    '-x': "'-x",
    '=t1': "'=t1",
    "'t2": "''t2",
    m01: 'm01',
    proof01: 'proof01',
  };

  test('the cells get a leading quote; a rerun skips them all; --rescore replaces their rows only', async (t) => {
    let round = 1;
    const { fake, ws, run } = await setup(
      t,
      {
        responder: () => ({ text: fake.validAnswer({ student_agency: round }, `round ${round}`) }),
      },
      { models: ['-x', 'm01'], tasks: ['=t1', "'t2", 'proof01'] },
    );
    addTaskFiles(ws, ['=t1', "'t2"]);
    const first = await run();
    assert.equal(first.code, 0, first.stderr);
    assert.deepEqual(fake.requests.map(tagOf).sort(), allKeys(ws), 'each judged once');
    const cells = readCsv(ws.output)
      .slice(1)
      .map((record) => `${record[1]}/${record[0]}`)
      .sort();
    assert.deepEqual(
      cells,
      ws.pairs.map((pair) => `${guarded[pair.model]}/${guarded[pair.task_id]}`).sort(),
    );

    const csv = fs.readFileSync(ws.output, 'utf8');
    const rerun = await run();
    assert.equal(rerun.code, 0, rerun.stderr);
    assert.match(rerun.stderr, /skipping 6 transcript\(s\)/);
    assert.equal(fake.requests.length, 6, 'no transcript judged twice');
    assert.equal(fs.readFileSync(ws.output, 'utf8'), csv, 'the CSV is untouched');

    round = 0;
    const rescore = await run(['--rescore', '--model=-x']);
    assert.equal(rescore.code, 0, rescore.stderr);
    assert.match(rescore.stderr, /--rescore: judging 3 scored transcript\(s\) again/);
    assert.deepEqual(judgedSince(fake.requests, 6), ['-x/=t1', "-x/'t2", '-x/proof01'].sort());
    const records = readCsv(ws.output).slice(1);
    assert.equal(records.length, 6, 'one row per pair');
    for (const record of records) {
      const round = record[1] === "'-x" ? '0' : '1';
      assert.deepEqual([record[5], record[8]], [round, `round ${round}`], record.join(','));
    }
  });
});

describe('a torn last line is cut off, said so, and its transcript judged again', () => {
  // Every note spans two lines and holds quotes and a comma, so a cut can fall inside a quoted field.
  const noteOf = (key: string) => `${key} said "hi", then\nline two`;
  /** Each case tears the CSV after a run; `last` is the last row's text (newline included), `key` its pair. */
  const cases: {
    label: string;
    tear: (last: string, key: string) => string;
    rejudged: (key: string) => string[];
  }[] = [
    { label: 'cut after a few cells', tear: (last) => last.slice(0, 15), rejudged: (key) => [key] },
    {
      label: 'cut inside its quoted multi-line notes field',
      tear: (last) => last.slice(0, last.indexOf('line two')),
      rejudged: (key) => [key],
    },
    {
      label: 'a torn row of a pair the workspace does not hold (nothing to judge)',
      tear: (last) => `${last}proof09,m09,2,2,2,2,2,2,"half a note\nstill open`,
      rejudged: () => [],
    },
  ];
  for (const { label, tear, rejudged } of cases) {
    test(`${label}: the CSV then parses strictly, with every pair once and the other rows unchanged`, async (t) => {
      const { fake, ws, run } = await setup(
        t,
        { responder: (req) => ({ text: fake.validAnswer({}, noteOf(tagOf(req)!)) }) },
        { models: 3 },
      );
      assert.equal((await run(['--concurrency', '1'])).code, 0);
      const text = fs.readFileSync(ws.output, 'utf8');
      const lastKey = csvRows(ws.output).at(-1)!.key;
      const [model, task] = lastKey.split('/');
      const start = text.lastIndexOf(`\n${task},${model},`) + 1;
      const kept = text.slice(0, start);
      fs.writeFileSync(ws.output, kept + tear(text.slice(start), lastKey));
      const before = fake.requests.length;

      // --no-cache: the torn row's request is sent, not taken from the audit log's answer
      const result = await run(['--no-cache']);
      assert.equal(result.code, 0, result.stderr);
      assert.ok(
        result.stderr.includes(`repaired ${ws.output}: removed a torn last line`),
        result.stderr,
      );
      const again = rejudged(lastKey);
      assert.match(result.stderr, new RegExp(`skipping ${9 - again.length} transcript\\(s\\)`));
      assert.deepEqual(
        judgedSince(fake.requests, before),
        again,
        'only the torn row is judged again',
      );
      assert.deepEqual(wellFormedCsv(ws.output), allKeys(ws));
      const after = fs.readFileSync(ws.output, 'utf8');
      assert.ok(after.startsWith(kept), 'the complete rows before the tear are unchanged');
      for (const r of csvRows(ws.output)) assert.equal(r.record[8], noteOf(r.key));
    });
  }

  test('a CSV holding only a torn header gets the full header, and every transcript is judged', async (t) => {
    const { fake, ws, run } = await setup(t);
    fs.mkdirSync(path.dirname(ws.output), { recursive: true });
    fs.writeFileSync(ws.output, 'task_id,model,mathem');
    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /repaired .*torn last line/);
    assert.equal(fake.requests.length, 6);
    assert.deepEqual(wellFormedCsv(ws.output), allKeys(ws));
  });
});

describe('a CSV run-judge cannot append to stops the run before any request, untouched', () => {
  const row1 = 'proof01,m01,2,2,2,2,2,2,ok\n';
  const cases: { label: string; content: string; mentions: string[] }[] = [
    {
      label: 'a malformed middle line (wrong field count)',
      content: `${header()}${row1}proof02,m01,2,ok\nproof03,m01,2,2,2,2,2,2,ok\n`,
      mentions: ['line 3 ', 'has 4 fields, expected 9'],
    },
    {
      label: 'a header that differs from the rubric',
      content: `task_id,model,old_dimension,notes\nproof01,m01,2,ok\n`,
      mentions: ['header', 'another --output'],
    },
  ];
  for (const { label, content, mentions } of cases) {
    test(`${label}: exit 2 naming the file and what is wrong; no request, no lock left`, async (t) => {
      const { fake, ws, run } = await setup(t);
      fs.mkdirSync(path.dirname(ws.output), { recursive: true });
      fs.writeFileSync(ws.output, content);
      const result = await run();
      assert.equal(result.code, 2, result.stderr);
      assert.match(result.stderr, mentioning(`run-judge: ${ws.output}`, ...mentions));
      assert.equal(fake.requests.length, 0);
      assert.equal(fs.readFileSync(ws.output, 'utf8'), content);
      assert.equal(fs.existsSync(`${ws.output}.lock`), false);
    });
  }
});

// ---------------------------------------------------------------------------------------------
// Crash safety (kill -9 needs a real process)
// ---------------------------------------------------------------------------------------------

describe('replaceFileDurably: a file replaced whole, or not at all', () => {
  test('a rename that fails leaves no temporary copy beside the file', (t) => {
    const target = path.join(tempDir(t), 'state.json');
    fs.mkdirSync(path.join(target, 'inside'), { recursive: true }); // a folder: the rename fails
    assert.throws(() => replaceFileDurably(target, '{}'));
    assert.deepEqual(fs.readdirSync(path.dirname(target)), ['state.json']);
  });
});

describe('crash safety', () => {
  test('kill -9 mid-run, then a rerun: the CSV parses after the kill, and only the missing pairs are judged again', async (t) => {
    const { fake, ws, run, spawn: spawnCli } = await setup(t, { latencyMs: 60 }, { models: 5 });
    const { child, done } = spawnCli(['--concurrency', '2']);
    await waitFor(() => rowCount(ws.output) >= 3, 20_000, 'some rows');
    child.kill('SIGKILL');
    assert.equal((await done).signal, 'SIGKILL');
    const afterKill = wellFormedCsv(ws.output);
    assert.ok(
      afterKill.length >= 3 && afterKill.length < 15,
      `rows after the kill: ${afterKill.length}`,
    );
    assert.ok(fs.existsSync(`${ws.output}.lock`), 'the killed run left its lock behind');

    const before = fake.requests.length;
    const result = await run(['--concurrency', '2']);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, new RegExp(`skipping ${afterKill.length} transcript\\(s\\)`));
    const missing = allKeys(ws).filter((key) => !afterKill.includes(key));
    assert.deepEqual(judgedSince(fake.requests, before), missing, 'only what was missing');
    assert.deepEqual(wellFormedCsv(ws.output), allKeys(ws));
    assert.equal(
      fs.existsSync(`${ws.output}.lock`),
      false,
      'the stale lock was taken over, then released',
    );
  });
});

// ---------------------------------------------------------------------------------------------
// One writer: the lock
// ---------------------------------------------------------------------------------------------

describe('acquireLock', () => {
  const lockIn = (t: TestContext) => {
    const dir = tempDir(t);
    const output = path.join(dir, 'out.csv');
    return { dir, output, lock: `${output}.lock`, takeover: `${output}.lock.takeover` };
  };

  test('a free lock is created holding this pid; release removes it', (t) => {
    const { dir, output, lock } = lockIn(t);
    const release = acquireLock(output);
    assert.equal(fs.readFileSync(lock, 'utf8'), `${process.pid}\n`);
    assert.deepEqual(fs.readdirSync(dir), ['out.csv.lock'], 'no temp file left');
    release();
    assert.deepEqual(fs.readdirSync(dir), []);
  });

  const staleCases: [string, (t: TestContext, takeover: string) => Promise<string>][] = [
    ['a lock holding a dead pid is taken over', async () => `${deadPid()}\n`],
    [
      'a lock holding a zombie (killed, not yet reaped) is taken over',
      async (t) => `${await zombiePid(t)}\n`,
    ],
    [
      'a takeover file left by a run that died does not block the takeover',
      async (_t, takeover) => {
        fs.writeFileSync(takeover, `${deadPid()}\n`);
        return `${deadPid()}\n`;
      },
    ],
    ...['not a pid\n', '0\n', '-1\n', ''].map((text): [string, () => Promise<string>] => [
      `a lock holding ${JSON.stringify(text)} (no process) is stale and taken over`,
      async () => text,
    ]),
  ];
  for (const [label, staleText] of staleCases) {
    test(`${label}: the lock then holds this pid; release leaves no lock, takeover or temp file`, async (t) => {
      const { dir, output, lock, takeover } = lockIn(t);
      fs.writeFileSync(lock, await staleText(t, takeover));
      const release = acquireLock(output);
      assert.equal(fs.readFileSync(lock, 'utf8'), `${process.pid}\n`);
      assert.deepEqual(fs.readdirSync(dir), ['out.csv.lock']);
      release();
      assert.deepEqual(fs.readdirSync(dir), []);
    });
  }

  test('a lock holding another live pid → EvalConfigurationError naming that pid and the lock; left alone', async (t) => {
    const { dir, output, lock } = lockIn(t);
    const pid = await livePid(t);
    fs.writeFileSync(lock, `${pid}\n`);
    assert.throws(() => acquireLock(output), {
      name: 'EvalConfigurationError',
      message: mentioning(`process ${pid}`, lock),
    });
    assert.equal(fs.readFileSync(lock, 'utf8'), `${pid}\n`);
    assert.deepEqual(fs.readdirSync(dir), ['out.csv.lock'], 'no temp file left');
  });

  test('while another live run holds the takeover file, the stale lock is left alone and the run gives up', async (t) => {
    const { output, lock, takeover } = lockIn(t);
    const dead = deadPid();
    const taker = await livePid(t);
    fs.writeFileSync(lock, `${dead}\n`);
    fs.writeFileSync(takeover, `${taker}\n`); // another run, taking the stale lock over right now
    assert.throws(() => acquireLock(output), {
      name: 'EvalConfigurationError',
      message: mentioning('locked by another run', lock),
    });
    assert.equal(
      fs.readFileSync(lock, 'utf8'),
      `${dead}\n`,
      'not removed without the takeover file',
    );
    assert.equal(
      fs.readFileSync(takeover, 'utf8'),
      `${taker}\n`,
      "the live taker's file is not removed",
    );
  });

  const refused: [string, (lock: string) => void, string[]][] = [
    [
      'a lock path that is a folder (cannot be read)',
      (lock) => fs.mkdirSync(lock),
      ['cannot be read'],
    ],
  ];
  for (const [label, prepare, mentions] of refused) {
    test(`${label} → EvalConfigurationError naming it at once; left in place`, (t) => {
      const { output, lock } = lockIn(t);
      prepare(lock);
      const before = fs.statSync(lock).isDirectory() ? 'dir' : fs.readFileSync(lock, 'utf8');
      assert.throws(() => acquireLock(output), {
        name: 'EvalConfigurationError',
        message: mentioning(lock, ...mentions),
      });
      assert.equal(fs.statSync(lock).isDirectory() ? 'dir' : fs.readFileSync(lock, 'utf8'), before);
    });
  }

  // A second run B (a live pid) follows the same takeover protocol, injected synchronously at the worst moment of this
  // run A: right after one of A's reads of the lock file. Whatever the interleaving, exactly one of them may win.
  const interleavings: [string, number, 'A' | 'B'][] = [
    [
      "after A read the stale pid, before A holds the takeover file: B takes over, A must not remove B's lock",
      1,
      'B',
    ],
    [
      'after A, holding the takeover file, re-read the stale pid: B is kept out and A takes over',
      2,
      'A',
    ],
  ];
  for (const [label, readNumber, winner] of interleavings) {
    test(`B acts ${label}`, async (t) => {
      const { output, lock, takeover } = lockIn(t);
      const dead = `${deadPid()}\n`;
      const b = await livePid(t);
      fs.writeFileSync(lock, dead);
      let reads = 0;
      let bWon = false;
      const runB = () => {
        const temp = `${lock}.${b}.tmp`;
        fs.writeFileSync(temp, `${b}\n`);
        const link = (target: string) => {
          try {
            fs.linkSync(temp, target);
            return true;
          } catch {
            return false;
          }
        };
        try {
          if (link(lock)) return true;
          if (fs.readFileSync(lock, 'utf8') !== dead || !link(takeover)) return false;
          try {
            if (fs.readFileSync(lock, 'utf8') === dead) fs.rmSync(lock);
          } finally {
            fs.rmSync(takeover);
          }
          return link(lock);
        } finally {
          fs.rmSync(temp, { force: true });
        }
      };
      const aWon = afterReading(
        lock,
        () => ++reads === readNumber && (bWon = runB()),
        () => {
          try {
            acquireLock(output)();
            return true;
          } catch (error) {
            assert.equal((error as Error).name, 'EvalConfigurationError', String(error));
            return false;
          }
        },
      );
      assert.ok(reads >= readNumber, `B was injected (A read the lock ${reads} times)`);
      assert.deepEqual({ aWon, bWon }, { aWon: winner === 'A', bWon: winner === 'B' });
      assert.equal(fs.existsSync(takeover), false, 'no takeover file left');
    });
  }

  test('eight processes racing to take over one stale lock: exactly one wins', async (t) => {
    const { output, lock } = lockIn(t);
    fs.writeFileSync(lock, `${deadPid()}\n`);
    // Each racer says "ready", blocks reading stdin until "go", tries the lock, says "won"/"lost" and, if it won,
    // holds the lock until its stdin closes: no racer can win after another has released.
    const script = `
      import * as fs from 'node:fs';
      const { acquireLock } = await import(${JSON.stringify(pathToFileURL(bundled(SCRIPT).module).href)});
      const read = () => { for (;;) try { return fs.readSync(0, Buffer.alloc(16)); } catch (e) { if (e.code !== 'EAGAIN') throw e; } };
      console.log('ready');
      read();
      let won = false;
      try { acquireLock(process.argv[1]); won = true; } catch {}
      console.log(won ? 'won' : 'lost');
      if (won) while (read() > 0);`;
    const said: string[] = Array(8).fill('');
    const racers = said.map((_, i) => {
      const child = spawn(process.execPath, ['--input-type=module', '-e', script, output], {
        stdio: ['pipe', 'pipe', 'inherit'],
      });
      t.after(() => child.kill('SIGKILL'));
      child.stdin!.on('error', () => {}); // a loser may be gone when its stdin is closed
      child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (said[i] += chunk));
      return { child, closed: new Promise((resolve) => child.once('close', resolve)) };
    });
    const words = () => said.map((out) => out.trim().split('\n'));
    await waitFor(() => words().every((w) => w[0] === 'ready'), 30_000, 'every racer to be ready');
    for (const { child } of racers) child.stdin!.write('go\n');
    await waitFor(() => words().every((w) => w.length === 2), 30_000, 'every racer to try');
    const outcomes = words().map((w) => w[1]);
    for (const { child } of racers) child.stdin!.end();
    await Promise.all(racers.map((racer) => racer.closed));
    assert.equal(outcomes.filter((w) => w === 'won').length, 1, outcomes.join(','));
    assert.equal(outcomes.filter((w) => w === 'lost').length, 7, outcomes.join(','));
  });
});

describe('one writer per output: a run and the lock', () => {
  test('a lock held by another live process stops the run with exit 2 naming its pid; the lock is left alone', async (t) => {
    const { fake, ws, run } = await setup(t);
    const pid = await livePid(t);
    fs.mkdirSync(path.dirname(ws.output), { recursive: true });
    fs.writeFileSync(`${ws.output}.lock`, `${pid}\n`);
    const result = await run();
    assert.equal(result.code, 2, result.stderr);
    assert.ok(result.stderr.includes(`process ${pid}`), result.stderr);
    assert.equal(fake.requests.length, 0);
    assert.equal(fs.readFileSync(`${ws.output}.lock`, 'utf8'), `${pid}\n`);
    assert.equal(fs.existsSync(ws.output), false, 'no CSV created');
  });

  // Two names of one CSV share its lock: a second run through a link is refused while the first runs.
  const otherNames: [string, (output: string) => string][] = [
    [
      'a symbolic link to the CSV',
      (output) => {
        fs.writeFileSync(output, `${header()}\n`);
        const link = path.join(path.dirname(output), 'link.csv');
        fs.symlinkSync(path.basename(output), link);
        return link;
      },
    ],
    [
      'a symbolic link to a CSV not created yet',
      (output) => {
        const link = path.join(path.dirname(output), 'link.csv');
        fs.symlinkSync(path.basename(output), link);
        return link;
      },
    ],
  ];
  for (const [label, otherName] of otherNames) {
    test(`${label}, its lock held by another live process: exit 2 naming its pid, nothing sent`, async (t) => {
      const { fake, ws, run } = await setup(t);
      const pid = await livePid(t);
      fs.mkdirSync(path.dirname(ws.output), { recursive: true });
      const output = otherName(ws.output);
      fs.writeFileSync(`${ws.output}.lock`, `${pid}\n`);
      const files = fs.readdirSync(path.dirname(ws.output)).sort();
      const result = await run(['--output', output]);
      assert.equal(result.code, 2, result.stderr);
      assert.ok(result.stderr.includes(`process ${pid}`), result.stderr);
      assert.equal(fake.requests.length, 0);
      assert.equal(fs.readFileSync(`${ws.output}.lock`, 'utf8'), `${pid}\n`);
      assert.deepEqual(fs.readdirSync(path.dirname(ws.output)).sort(), files, 'no file made');
    });
  }

  test('a stale lock from a dead process is taken over; the run succeeds and removes it', async (t) => {
    const { ws, run } = await setup(t);
    fs.mkdirSync(path.dirname(ws.output), { recursive: true });
    fs.writeFileSync(`${ws.output}.lock`, `${deadPid()}\n`);
    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    assert.equal(rowCount(ws.output), 6);
    assert.equal(fs.existsSync(`${ws.output}.lock`), false);
  });

  test('a second run on the same output while the first runs exits 2 naming the first; the first completes', async (t) => {
    // The first run (in this process) holds its first answer until the second (another process, refused at once)
    // has ended, so the first holds the lock meanwhile; its judge waits that long (a loaded machine starts the
    // second slowly), so the held request never times out into the fallback.
    const firstAnswer = hold();
    const {
      fake,
      ws,
      run,
      spawn: spawnCli,
    } = await setup(
      t,
      {
        responder: (_req, index) =>
          index === 0 ? { text: fake.validAnswer(), until: firstAnswer.until } : undefined,
      },
      { judge: judgeEntry('judge-a', { timeout_s: 300 }) },
    );
    const first = run(['--concurrency', '1']);
    await waitFor(() => fake.requests.length >= 1, 20_000, 'the first run to send a request');
    assert.equal(fs.readFileSync(`${ws.output}.lock`, 'utf8'), `${process.pid}\n`);
    const second = await spawnCli().done.finally(firstAnswer.release);
    assert.equal(second.code, 2, second.stderr);
    assert.ok(second.stderr.includes(`process ${process.pid}`), second.stderr);
    const firstResult = await first;
    assert.equal(firstResult.code, 0, firstResult.stderr);
    assert.equal(fake.requests.length, 6, 'the second run sent nothing');
    assert.deepEqual(wellFormedCsv(ws.output), allKeys(ws));
    assert.equal(fs.existsSync(`${ws.output}.lock`), false);
  });
});

// ---------------------------------------------------------------------------------------------
// The audit log
// ---------------------------------------------------------------------------------------------

describe("cost: each judgement's from its answers' usage at the judge's list prices; the run's in the summary", () => {
  const priced = (model: string, input: number, output: number) =>
    judgeEntry(model, { price_usd_per_mtok: { input, output } });
  const ONE = ['--task', 'proof01', '--model', 'm01'];

  test('input, cache writes (1.25x input), cache reads (0.1x input) and output: cost_usd in the log, tokens by kind', async (t) => {
    const usage = {
      input_tokens: 1000,
      cache_creation_input_tokens: 2000,
      cache_read_input_tokens: 10_000,
    };
    const { fake, ws, run } = await setup(
      t,
      {
        responder: () => ({
          text: fake.validAnswer(),
          usage: { ...usage, output_tokens: 400 } as never,
        }),
      },
      { judge: priced('judge-a', 5, 25), fallbacks: [priced('judge-b', 3, 15)] },
    );
    const result = await run(ONE);
    assert.equal(result.code, 0, result.stderr);
    const [entry] = readLog(ws.log) as (LogEntry & { cost_usd: number })[];
    const expected = ((1000 + 1.25 * 2000 + 0.1 * 10_000) * 5 + 400 * 25) / 1e6; // $0.0325
    assert.ok(Math.abs(entry!.cost_usd - expected) < 1e-12, `${entry!.cost_usd}`);
    assert.deepEqual(entry!.usage, { ...usage, output_tokens: 400 });
    assert.match(
      result.stderr,
      /tokens in 13000 \(uncached 1000, cache write 2000, cache read 10000\), out 400; cost \$0\.0325;/,
    );
  });

  test("a fallback: each answer at its own judge's prices, summed", async (t) => {
    const { ws, run } = await setup(
      t,
      { responder: (req) => (modelOf(req) === 'judge-a' ? { text: 'no JSON here' } : undefined) },
      { judge: priced('judge-a', 5, 25), fallbacks: [priced('judge-b', 3, 15)] },
    );
    assert.equal((await run(ONE)).code, 0);
    const [entry] = readLog(ws.log) as (LogEntry & { cost_usd: number })[];
    const expected = (100 * 5 + 20 * 25 + (100 * 3 + 20 * 15)) / 1e6; // both answered 100 in, 20 out
    assert.ok(Math.abs(entry!.cost_usd - expected) < 1e-12, `${entry!.cost_usd}`);
  });

  test('a judge without price_usd_per_mtok: cost_usd null in the log, "cost unknown" in the summary', async (t) => {
    const { ws, run } = await setup(t);
    const result = await run(ONE);
    assert.equal((readLog(ws.log)[0] as LogEntry & { cost_usd: unknown }).cost_usd, null);
    assert.match(result.stderr, /; cost unknown \(no price for judge-a in models\.json\);/);
  });
});

describe('audit log', () => {
  test('a body that cannot be read as a message is kept raw in its attempt (raw_text), and the fallback scores', async (t) => {
    const body = '{"id":"msg_1","content":[{"type":"text","text":"{\\"scores\\"';
    const { ws, run } = await setup(t, {
      responder: (req) =>
        modelOf(req) === 'judge-a' && tagOf(req) === 'm01/proof01'
          ? { kind: 'raw', status: 200, body }
          : undefined,
    });
    assert.equal((await run()).code, 0);
    const entry = readLog(ws.log).find((e) => e.model === 'm01' && e.task_id === 'proof01')!;
    assert.equal(entry.judge, 'judge-b');
    assert.deepEqual(
      entry.attempts.map((a) => [a.error, (a as { raw_text?: string }).raw_text]),
      [['EvalProviderError', body]],
    );
  });

  test("one line per transcript with every field, including an unparseable answer's raw text", async (t) => {
    const { fake, ws, run } = await setup(t, {
      responder: (req) =>
        tagOf(req) === 'm01/proof01' && modelOf(req) === 'judge-a'
          ? { text: 'I think it is good', usage: { input_tokens: 7, output_tokens: 3 } }
          : undefined,
    });
    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    const log = readLog(ws.log);
    assert.deepEqual(log.map((e) => `${e.model}/${e.task_id}`).sort(), allKeys(ws));
    const runIds = new Set(log.map((e) => e.run_id));
    assert.equal(runIds.size, 1);
    assert.match([...runIds][0]!, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    const rubricSha = sha256(fs.readFileSync(ws.rubric));
    for (const entry of log) {
      assert.ok(!Number.isNaN(Date.parse(entry.timestamp)), entry.timestamp);
      assert.equal(entry.status, 'scored');
      assert.deepEqual(entry.scores, goodScores());
      assert.equal(entry.notes, 'ok');
      assert.equal(entry.rubric_sha256, rubricSha);
      assert.equal(typeof entry.latency_ms, 'number');
      const req = fake.requests.find((r) => tagOf(r) === `${entry.model}/${entry.task_id}`)!;
      assert.equal(
        entry.prompt_sha256,
        sha256(req.body.messages[0].content),
        'the sha256 of the prompt sent',
      );
    }
    const fallback = log.find((e) => e.model === 'm01' && e.task_id === 'proof01')!;
    assert.equal(fallback.judge, 'judge-b');
    assert.deepEqual(
      fallback.attempts.map((a) => [a.judge, a.error, a.status]),
      [['judge-a', 'EvalJudgeResponseError', null]],
    );
    assert.match(fallback.attempts[0]!.message, /unusable answer/);
    assert.deepEqual(
      fallback.answers.map((a) => [a.judge, a.text, a.stop_reason]),
      [
        ['judge-a', 'I think it is good', 'end_turn'],
        ['judge-b', fake.validAnswer(), 'end_turn'],
      ],
    );
    assert.deepEqual(fallback.answers[0]!.usage, { input_tokens: 7, output_tokens: 3 });
    assert.match(fallback.answers[0]!.request_id!, /^req_fake_\d+$/);
    assert.equal(typeof fallback.answers[0]!.latency_ms, 'number');
    const usage = {
      input_tokens: 107,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
      output_tokens: 23,
    };
    assert.deepEqual(fallback.usage, usage, 'usage sums every answer, by kind');
    const direct = log.find((e) => e.model === 'm02' && e.task_id === 'proof03')!;
    assert.equal(direct.judge, 'judge-a');
    assert.deepEqual(direct.attempts, []);
    assert.equal(direct.answers.length, 1);
    assert.match(
      result.stderr,
      /tokens in 607 \(uncached 607, cache write 0, cache read 0\), out 123/,
      'five answers of 100/20 tokens, two for the fallback',
    );
  });

  test('a failed transcript is logged with its final error and every answer; it gets no row', async (t) => {
    const { fake, ws, run } = await setup(t, {
      responder: (req) => (tagOf(req) === 'm02/proof02' ? { text: 'no JSON here' } : undefined),
    });
    const result = await run();
    assert.equal(result.code, 1, result.stderr);
    const failed = readLog(ws.log).filter((e) => e.status === 'failed');
    assert.equal(failed.length, 1);
    const [entry] = failed;
    assert.equal(`${entry!.model}/${entry!.task_id}`, 'm02/proof02');
    assert.equal(entry!.judge, null);
    assert.equal(entry!.error?.class, 'EvalJudgesExhaustedError');
    assert.match(entry!.error!.message, /all 2 judges failed/);
    assert.equal(entry!.scores, undefined);
    assert.deepEqual(
      entry!.answers.map((a) => [a.judge, a.text]),
      [
        ['judge-a', 'no JSON here'],
        ['judge-b', 'no JSON here'],
      ],
    );
    assert.equal(entry!.attempts.length, 2);
    assert.match(entry!.prompt_sha256!, /^[0-9a-f]{64}$/);
    assert.ok(!csvRows(ws.output).some((r) => r.key === 'm02/proof02'));
    assert.equal(fake.requests.length, 7);
  });

  test('prompt_sha256 equals the sha256 of the prompt the dry-run prints', async (t) => {
    const { ws, run } = await setup(t);
    const dry = await run(['--dry-run', '--task', 'proof02', '--model', 'm01'], { apiKey: null });
    assert.equal(dry.code, 0, dry.stderr);
    assert.equal((await run(['--task', 'proof02', '--model', 'm01'])).code, 0);
    assert.equal(readLog(ws.log)[0]!.prompt_sha256, sha256(dry.stdout.slice(0, -1)));
  });

  test('the API key never appears in the log, CSV, stdout or stderr', async (t) => {
    const secret = 'sk-test-SECRET';
    const { fake, ws, run } = await setup(t, {
      responder: (req) =>
        tagOf(req) === 'm02/proof01'
          ? { kind: 'error', status: 500, type: 'api_error', message: 'boom' }
          : tagOf(req) === 'm01/proof02' && modelOf(req) === 'judge-a'
            ? { text: 'nope' }
            : undefined,
    });
    const result = await run([], { apiKey: secret });
    assert.equal(result.code, 1, result.stderr);
    assert.ok(
      fake.requests.every(
        (req) =>
          req.headers.authorization === `Bearer ${secret}` || req.headers['x-api-key'] === secret,
      ),
      'the key is sent, from api_key_env',
    );
    const outputs = {
      log: fs.readFileSync(ws.log, 'utf8'),
      CSV: fs.readFileSync(ws.output, 'utf8'),
      stdout: result.stdout,
      stderr: result.stderr,
    };
    for (const [what, text] of Object.entries(outputs))
      assert.ok(!text.includes('SECRET'), `${what} holds the key`);
    assert.equal(readLog(ws.log).filter((e) => e.status === 'failed').length, 1);
  });
});

describe('CSV formula injection', () => {
  test('notes starting with = + - @ tab or CR get a leading quote in the CSV; the log keeps them raw', async (t) => {
    // [pair, the judge's notes, whether the CSV cell gets a leading quote]
    const cases: [string, string, boolean][] = [
      ['m01/proof01', '=HYPERLINK("http://evil.example","click")', true],
      ['m01/proof02', '+1+2', true],
      ['m01/proof03', '-2+3', true],
      ['m02/proof01', '@SUM(A1:A2)', true],
      ['m02/proof02', '\tcmd', true],
      ['m02/proof03', '  =1+1', true],
      ['m03/proof01', '\r=1', true],
      ['m03/proof02', 'fine = not a formula', false],
      ['m03/proof03', 'plain', false],
    ];
    const notes = Object.fromEntries(cases.map(([key, raw]) => [key, raw]));
    const { fake, ws, run } = await setup(
      t,
      { responder: (req) => ({ text: fake.validAnswer({}, notes[tagOf(req)!]) }) },
      { models: 3 },
    );
    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    const cells = Object.fromEntries(csvRows(ws.output).map((r) => [r.key, r.record[8]]));
    assert.deepEqual(
      cells,
      Object.fromEntries(cases.map(([key, raw, escaped]) => [key, escaped ? `'${raw}` : raw])),
    );
    for (const entry of readLog(ws.log))
      assert.equal(entry.notes, notes[`${entry.model}/${entry.task_id}`]);
  });
});

// ---------------------------------------------------------------------------------------------
// Outputs that cannot be written
// ---------------------------------------------------------------------------------------------

describe('an output path that cannot be created', () => {
  test('report.ts --html pointed at a FIFO: refused at once (exit 2, naming it), never a hang', async (t) => {
    const { ws, run } = await setup(t);
    assert.equal((await run()).code, 0);
    const fifo = path.join(ws.dir, 'page.html');
    execFileSync('mkfifo', [fifo]);
    const inputs = ['--scores', ws.output, '--human-scores', ws.humanScores, '--rubric', ws.rubric];
    const paths = ['--log', ws.log, '--transcripts', ws.transcripts, '--html', fifo];
    const report = spawnSync(
      process.execPath,
      [bundled(path.join(REPO, 'report.ts')).main, ...inputs, ...paths],
      { encoding: 'utf8', timeout: 60_000 },
    );
    assert.equal(report.status, 2, `${report.signal ?? ''} ${report.stderr}`);
    assert.equal(report.stderr, `report: ${fifo}: not a regular file; choose a file path\n`);
  });

  /** The workspace's flags with one path flag's value replaced. */
  const withFlag = (args: string[], flag: string, value: string) =>
    args.map((arg, i) => (args[i - 1] === flag ? value : arg));

  // The parent of /dev/null/x.csv is an existing file (mkdir says EEXIST); one level deeper, ENOTDIR.
  const cases: [string, string][] = [
    ['--output', '/dev/null/x.csv'],
    ['--output', '/dev/null/sub/x.csv'],
    ['--log', '/dev/null/log.jsonl'],
    ['--log', '/dev/null/sub/log.jsonl'],
  ];
  for (const [flag, file] of cases) {
    test(`${flag} ${file} exits 2 naming the path, without a stack trace or a request; no lock left`, async (t) => {
      const { fake, ws } = await setup(t);
      const result = await runMain(withFlag(ws.args(), flag, file), { baseUrl: fake.url });
      assert.equal(result.code, 2, result.stderr);
      assert.ok(result.stderr.includes(`run-judge: ${file}`), result.stderr);
      assert.match(result.stderr, /cannot be created or written/);
      assert.doesNotMatch(result.stderr, /^\s+at /m, 'no stack trace');
      assert.equal(fake.requests.length, 0);
      const scoresDir = path.dirname(ws.output);
      const left = fs.existsSync(scoresDir) ? fs.readdirSync(scoresDir) : [];
      assert.deepEqual(
        left.filter((f) => /\.lock|\.tmp$/.test(f)),
        [],
        'no lock, takeover or temp file left',
      );
    });
  }
});

type WriteDone = (error: Error | null, written: number, buffer: Buffer) => void;

describe('a disk that fills up or fails: the run stops naming the file, and both files stay whole', () => {
  /** Runs `fn` while writes whose text `matches` fail with `code` after `skip` of them: half the bytes land first. */
  async function withFailingWrites<T>(
    matches: (text: string) => boolean,
    code: string,
    skip: number,
    fn: () => T,
  ) {
    const fsModule = createRequire(import.meta.url)('node:fs') as typeof fs;
    const original = fsModule.writeSync;
    const originalInPool = fsModule.write;
    let left = skip;
    const passes = (buffer: unknown) =>
      !Buffer.isBuffer(buffer) || !matches(buffer.toString()) || left-- > 0;
    const failure = () => Object.assign(new Error(`${code}: simulated`), { code });
    fsModule.writeSync = ((fd: number, buffer: Buffer, offset?: number) => {
      if (passes(buffer)) return original(fd, buffer, offset);
      if (!offset) return original(fd, buffer, 0, Math.floor(buffer.length / 2));
      throw failure();
    }) as typeof original;
    // The run's rows and audit lines are written in the thread pool, through fs.write.
    fsModule.write = ((fd: number, buffer: Buffer, offset: number, done: WriteDone) => {
      if (passes(buffer)) return originalInPool(fd, buffer, offset, done);
      if (!offset) return originalInPool(fd, buffer, 0, Math.floor(buffer.length / 2), null, done);
      process.nextTick(done, failure(), 0, buffer);
    }) as typeof originalInPool;
    syncBuiltinESMExports();
    try {
      return await fn();
    } finally {
      fsModule.writeSync = original;
      fsModule.write = originalInPool;
      syncBuiltinESMExports();
    }
  }
  const isAuditLine = (text: string) => text.startsWith('{"run_id"');
  const isRow = (text: string) => /^proof\d+,/.test(text);
  const cases: [string, (text: string) => boolean, string, 'output' | 'log'][] = [
    ['a CSV row hits ENOSPC', isRow, 'ENOSPC', 'output'],
    ['a CSV row hits EIO', isRow, 'EIO', 'output'],
    ['an audit line hits ENOSPC', isAuditLine, 'ENOSPC', 'log'],
  ];
  for (const [label, matches, code, which] of cases) {
    test(`${label}: exit 2 naming the file, no stack trace; the CSV and log parse; a rerun completes`, async (t) => {
      const { ws, run } = await setup(t);
      const result = await withFailingWrites(matches, code, 2, () => run(['--concurrency', '1']));
      assert.equal(result.code, 2, result.stderr);
      assert.ok(result.stderr.includes(`${ws[which]}: cannot be written (${code})`), result.stderr);
      assert.doesNotMatch(result.stderr, /^\s+at /m, 'no stack trace');
      assert.ok(rowCount(ws.output) < 6, 'the run stopped');
      const rows = wellFormedCsv(ws.output); // parses strictly: the half-written row was undone
      readLog(ws.log); // every line parses: the half-written line was undone
      assert.equal(fs.existsSync(`${ws.output}.lock`), false, 'the lock is released');
      const again = await run();
      assert.equal(again.code, 0, again.stderr);
      assert.doesNotMatch(again.stderr, /torn/, 'nothing was left torn');
      assert.deepEqual(wellFormedCsv(ws.output), allKeys(ws));
      assert.ok(rows.every((key) => allKeys(ws).includes(key)));
    });
  }

  const folderIn = (dir: string) => fs.mkdirSync(path.join(dir, 'out.csv'), { recursive: true })!;
  const special: [string, string, (ws: Workspace) => string][] = [
    ['--output', 'a folder', (ws) => folderIn(ws.dir)],
    ['--output', '/dev/full', () => '/dev/full'],
    ['--log', '/dev/full', () => '/dev/full'],
    ['--output', 'a FIFO', (ws) => fifoIn(ws.dir)],
  ];
  for (const [flag, label, pathOf] of special) {
    test(`${flag} naming ${label} is refused at once (exit 2, "not a regular file"); nothing is created beside it`, async (t) => {
      const { fake, ws } = await setup(t);
      const file = pathOf(ws);
      const beside = new Set(fs.readdirSync(path.dirname(file)));
      const args = ws.args().map((arg, i, all) => (all[i - 1] === flag ? file : arg));
      const result = await runMain(args, { baseUrl: fake.url });
      assert.equal(result.code, 2, result.stderr);
      assert.ok(result.stderr.includes(`run-judge: ${file}: not a regular file`), result.stderr);
      assert.equal(fake.requests.length, 0);
      assert.deepEqual(
        new Set(fs.readdirSync(path.dirname(file))),
        beside,
        'no lock or CSV created beside it',
      );
    });
  }
  function fifoIn(dir: string): string {
    const fifo = path.join(dir, 'out.fifo');
    assert.equal(spawnSync('mkfifo', [fifo]).status, 0, 'mkfifo');
    return fifo;
  }
});

describe('a torn audit line (a crash mid-write) is cut off on the next run, said so', () => {
  const tails: [string, string][] = [
    ['a short torn line', '{"run_id":"x","task'],
    [
      'a torn line longer than the 64 KiB read-back chunk',
      `{"run_id":"x","notes":"${'n'.repeat(200_000)}`,
    ],
  ];
  for (const [label, tail] of tails) {
    test(`${label}: removed, every line then parses, and the complete lines before it are unchanged`, async (t) => {
      const { ws, run } = await setup(t);
      assert.equal((await run(['--task', 'proof01'])).code, 0);
      const complete = fs.readFileSync(ws.log, 'utf8');
      fs.appendFileSync(ws.log, tail);
      const result = await run();
      assert.equal(result.code, 0, result.stderr);
      assert.ok(
        result.stderr.includes(
          `repaired ${ws.log}: removed a torn last line (${tail.length} bytes)`,
        ),
      );
      assert.ok(fs.readFileSync(ws.log, 'utf8').startsWith(complete));
      assert.equal(readLog(ws.log).length, 6);
    });
  }

  test('a log holding only a torn line is emptied, then written', async (t) => {
    const { ws, run } = await setup(t);
    fs.mkdirSync(path.dirname(ws.log), { recursive: true });
    fs.writeFileSync(ws.log, '{"run_id":');
    assert.equal((await run()).code, 0);
    assert.equal(readLog(ws.log).length, 6);
  });
});
