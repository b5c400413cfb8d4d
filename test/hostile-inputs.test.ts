// Inputs that could stop a run they do not concern, or hang a read: an unreadable plan.json in a
// spot check, a FIFO where a script reads plan.json or an audit log.
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

describe('no output is one of the inputs: --html, --output and --log over a file the script reads are refused', () => {
  test('report.ts --html naming the judge CSV it reads: exit 2, the CSV byte for byte', async (t) => {
    const { ws, run } = await setup(t);
    assert.equal((await run(['--before-human-scoring'])).code, 0);
    const csv = fs.readFileSync(ws.output);
    const rubric = ws.args()[ws.args().indexOf('--rubric') + 1]!;
    const folder = humanFolder(ws, () => {});
    const args = ['--rubric', rubric, '--scores', ws.output, '--human-scores', folder];
    const result = await runReport([...args, '--html', ws.output]);
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /--html .* is the --scores file .*, which is read/);
    assert.deepEqual(fs.readFileSync(ws.output), csv);
  });

  test("report.ts --html naming a scorer's sheet: exit 2, the sheet byte for byte", async (t) => {
    const { ws, run } = await setup(t);
    assert.equal((await run(['--before-human-scoring'])).code, 0);
    const rubric = ws.args()[ws.args().indexOf('--rubric') + 1]!;
    const folder = humanFolder(ws, () => {});
    const sheet = path.join(folder, 'al.csv');
    const before = fs.readFileSync(sheet);
    const args = ['--rubric', rubric, '--scores', ws.output, '--human-scores', folder];
    const result = await runReport([...args, '--html', sheet]);
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /is the --human-scores file/);
    assert.deepEqual(fs.readFileSync(sheet), before);
  });

  test('run-judge --log naming the rubric, or the CSV: exit 2 before any request, nothing written', async (t) => {
    const { fake, ws, run } = await setup(t);
    const rubric = ws.args()[ws.args().indexOf('--rubric') + 1]!;
    const before = fs.readFileSync(rubric);
    const onRubric = await run(['--before-human-scoring', '--log', rubric]);
    assert.equal(onRubric.code, 2, onRubric.stderr);
    assert.match(onRubric.stderr, /--log .* is the --rubric file/);
    assert.deepEqual(fs.readFileSync(rubric), before);

    assert.equal((await run(['--before-human-scoring', '--task', 'proof01'])).code, 0);
    const sent = fake.requests.length;
    const onCsv = await run(['--before-human-scoring', '--log', ws.output]);
    assert.equal(onCsv.code, 2, onCsv.stderr);
    assert.match(onCsv.stderr, /--log .* is the --output file/);
    assert.equal(fake.requests.length, sent, 'no request');
  });
});

describe('the --html page embeds only transcripts inside the transcripts folder', () => {
  test('a judge row whose model cell is ../outside, and a link out of the folder: neither file is read into the page', async (t) => {
    const { ws, run } = await setup(t);
    assert.equal((await run(['--before-human-scoring'])).code, 0);
    const transcripts = ws.args()[ws.args().indexOf('--transcripts') + 1]!;
    const source = fs.readFileSync(path.join(transcripts, 'm01', 'proof01.json'), 'utf8');
    // No metadata: nothing in the file itself tells it is not the row's transcript.
    const parsed = JSON.parse(source) as { metadata?: unknown; messages: { content: string }[] };
    delete parsed.metadata;
    parsed.messages[1]!.content = `SECRET-MARKER ${parsed.messages[1]!.content}`;
    const secret = JSON.stringify(parsed);
    fs.mkdirSync(path.join(ws.dir, 'outside'), { recursive: true });
    fs.writeFileSync(path.join(ws.dir, 'outside', 'proof01.json'), secret);
    const header = fs.readFileSync(ws.output, 'utf8').split('\n')[0]!;
    const scores = header
      .split(',')
      .slice(2, -1)
      .map(() => '1');
    fs.appendFileSync(ws.output, ['proof01', '../outside', ...scores, 'x'].join(',') + '\n');

    const rubric = ws.args()[ws.args().indexOf('--rubric') + 1]!;
    const page = path.join(ws.dir, 'page.html');
    const args = ['--rubric', rubric, '--scores', ws.output, '--transcripts', transcripts];
    const folder = humanFolder(ws, () => {});
    const result = await runReport([...args, '--human-scores', folder, '--html', page]);
    assert.equal(result.code, 0, result.stderr);
    const html = fs.readFileSync(page, 'utf8');
    assert.ok(!html.includes('SECRET-MARKER'), 'the file outside the folder is not in the page');

    // A link out of the folder: the listing refuses it, so no transcript is read into the page.
    fs.symlinkSync(path.join(ws.dir, 'outside'), path.join(transcripts, 'm09'));
    const linked = await runReport([...args, '--human-scores', folder, '--html', page]);
    assert.ok(!fs.readFileSync(page, 'utf8').includes('SECRET-MARKER'), linked.stderr);
  });
});

describe("control characters in a scorer's name are shown escaped in report.ts's table and Markdown", () => {
  for (const format of ['table', 'markdown']) {
    test(`--format ${format}: a scorer "a\\u001b[31mb\\rc" is printed with \\u001b and \\r escaped`, async (t) => {
      const { ws, run } = await setup(t);
      assert.equal((await run(['--before-human-scoring'])).code, 0);
      const folder = path.join(ws.dir, 'human');
      fs.mkdirSync(folder, { recursive: true });
      const header = ['task_id', 'model', ...DIMENSIONS, 'notes', 'scorer'].join(',');
      const blank = ['proof02', 'm01', ...DIMENSIONS.map(() => ''), '', '"a\u001b[31mb\rc"'];
      fs.writeFileSync(path.join(folder, 'al.csv'), `${header}\n${blank.join(',')}\n`);
      const rubric = ws.args()[ws.args().indexOf('--rubric') + 1]!;
      const args = ['--rubric', rubric, '--scores', ws.output, '--human-scores', folder];
      const result = await runReport([...args, '--format', format]);
      assert.equal(result.code, 0, result.stderr);
      assert.ok(!/[\u0000-\u0009\u000b-\u001f]/.test(result.stdout), JSON.stringify(result.stdout));
      assert.ok(result.stdout.includes('a\\u001b[31mb\\rc'), result.stdout);
    });
  }
});

describe('a row of an edited transcript: the gate says how to go on', () => {
  test('the refusal names `sheet --update --out` for the folder, which rewrites the page with the text as it is now', async (t) => {
    const { ws, run } = await setup(t);
    const folder = path.join(ws.dir, 'human');
    fs.mkdirSync(folder, { recursive: true });
    const header = ['task_id', 'model', ...DIMENSIONS, 'notes', 'scorer', 'transcript_sha256'];
    const row = ['proof02', 'm01', ...DIMENSIONS.map(() => '1'), '', 'al', '0'.repeat(64)];
    fs.writeFileSync(path.join(folder, 'al.csv'), `${header.join(',')}\n${row.join(',')}\n`);
    const result = await run(['--human-scores', folder]);
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /al: m01\/proof02 \(transcript edited since\)/);
    assert.ok(
      result.stderr.includes(`npx tsx report.ts sheet --update --out ${folder}`),
      result.stderr,
    );
  });
});

describe('a path too long for the file system is a one-line refusal naming it, not a stack trace', () => {
  test('--output under a 300-character folder name: exit 2, "cannot be created or written (ENAMETOOLONG)"', async (t) => {
    const { fake, ws, run } = await setup(t);
    const output = path.join(ws.dir, 'x'.repeat(300), 'scores.csv');
    const result = await run(['--before-human-scoring', '--output', output]);
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /cannot be created or written \(ENAMETOOLONG\)/);
    assert.doesNotMatch(result.stderr, /^\s+at /m, 'no stack trace');
    assert.equal(fake.requests.length, 0);
  });
});
