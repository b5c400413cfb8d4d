// report.ts import: transcripts from JSONL, written where the run reads them, all or nothing.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { loadTranscript, readTranscripts } from '../run-judge.ts';
import { runReport, snapshot, tempDir } from './helpers.ts';

/** A line of the file: a transcript of `model` on `task_id`. */
const line = (model: string, task_id: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    model,
    task_id,
    messages: [
      { role: 'user', content: `Help with ${task_id}? <script>window.__ran = 1</script>` },
      { role: 'assistant', content: 'What have you tried?' },
    ],
    ...extra,
  });

/** Writes the JSONL file and returns it with the folder to import into. */
function jsonl(dir: string, lines: string[]): { file: string; out: string } {
  const file = path.join(dir, 'export.jsonl');
  fs.writeFileSync(file, `${lines.join('\n')}\n`);
  return { file, out: path.join(dir, 'evals', 'transcripts') };
}

describe('report.ts import', () => {
  test('writes each line where the run reads it, and a second import changes nothing', async (t) => {
    const dir = tempDir(t);
    const metadata = { metadata: { source: 'inspect', score: 0.5 } };
    const statement = { problem_statement: 'Prove that sqrt(2) is irrational.' };
    const lines = [line('m1', 'proof01', metadata), line('m1', 'proof02'), line('m2', 'proof01')];
    lines.push(line('m2', 'proof02', statement));
    const { file, out } = jsonl(dir, lines);

    const first = await runReport(['import', file, '--out', out]);
    assert.equal(first.code, 0, first.stderr);
    assert.equal(
      first.stdout,
      `import: 4 transcript(s) written to ${out}; 0 already there with the same bytes\n`,
    );

    // The run's own listing and reader take every one, with the line's fields.
    const refs = readTranscripts(out);
    assert.deepEqual(
      refs.map((ref) => `${ref.model}/${ref.task_id}`),
      ['m1/proof01', 'm1/proof02', 'm2/proof01', 'm2/proof02'],
    );
    const read = refs.map((ref) => loadTranscript(ref));
    assert.deepEqual(read[0]!.metadata, {
      task_id: 'proof01',
      model: 'm1',
      source: 'inspect',
      score: 0.5,
    });
    assert.equal(read[3]!.problem_statement, statement.problem_statement);
    assert.equal(
      read[1]!.messages[0]!.content,
      'Help with proof02? <script>window.__ran = 1</script>',
    );

    const before = snapshot(out);
    const again = await runReport(['import', file, '--out', out]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(
      again.stdout,
      `import: 0 transcript(s) written to ${out}; 4 already there with the same bytes\n`,
    );
    assert.deepEqual(snapshot(out), before);
    const leftovers = fs.readdirSync(path.join(out, 'm1')).filter((name) => name.startsWith('.'));
    assert.deepEqual(leftovers, [], 'no temporary copy is left beside the transcripts');
  });

  test('a bad line is refused by its number, and nothing is written', async (t) => {
    const dir = tempDir(t);
    const bad = JSON.stringify({
      model: 'm1',
      task_id: 'proof03',
      messages: [{ role: 'tutor', content: 'hello' }],
    });
    const { file, out } = jsonl(dir, [line('m1', 'proof01'), '', line('m1', 'proof02'), bad]);

    const result = await runReport(['import', file, '--out', out]);
    assert.equal(result.code, 2);
    assert.match(result.stderr, /line 4: messages\[0\]\.role: .*"user"\|"assistant"\|"system"/);
    assert.match(result.stderr, /nothing written\n$/);
    assert.equal(result.stderr.split('\n').length, 2, 'one line, no stack trace');
    assert.equal(fs.existsSync(out), false, 'the good lines are not written either');
  });

  test('every bad line is named at once: not JSON, a field missing or misspelt, a wrong metadata', async (t) => {
    const dir = tempDir(t);
    const lines = [
      'not json',
      JSON.stringify({ model: 'm1', task_id: 'proof02' }),
      line('m1', 'proof03', { mesages: [] }),
      line('m1', 'proof04', { metadata: { model: 'm9' } }),
      line('m1', 'proof05', { messages: [] }),
      '[1, 2]',
    ];
    const { file, out } = jsonl(dir, lines);
    const result = await runReport(['import', file, '--out', out]);
    assert.equal(result.code, 2);
    const expected = [
      /line 1: not JSON/,
      /line 2: messages: must be an array of messages/,
      /line 3: mesages: not a field of a line/,
      /line 4: metadata\.model is "m9" but the path says "m1"/,
      /line 5: messages: is empty/,
      /line 6: \(top level\): /,
    ];
    for (const pattern of expected) assert.match(result.stderr, pattern);
    assert.equal(fs.existsSync(out), false);
  });

  test('a repeated line is skipped and counted; the same pair with other content is refused', async (t) => {
    const dir = tempDir(t);
    const same = jsonl(dir, [line('m1', 'proof01'), line('m1', 'proof02'), line('m1', 'proof01')]);
    const result = await runReport(['import', same.file, '--out', same.out]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /2 transcript\(s\) written .*; 1 repeated line\(s\) skipped\n$/);

    const other = tempDir(t);
    const differing = line('m1', 'proof01', { metadata: { note: 'another run' } });
    const clash = jsonl(other, [line('m1', 'proof01'), line('m1', 'proof02'), differing]);
    const refused = await runReport(['import', clash.file, '--out', clash.out]);
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /line 3: m1\/proof01 is line 1 too, with other content; keep one/);
    assert.equal(fs.existsSync(clash.out), false);
  });

  test('a transcript there with other bytes is never overwritten, and nothing else is written', async (t) => {
    const dir = tempDir(t);
    const { file, out } = jsonl(dir, [line('m1', 'proof01'), line('m1', 'proof02')]);
    const existing = path.join(out, 'm1', 'proof02.json');
    fs.mkdirSync(path.dirname(existing), { recursive: true });
    fs.writeFileSync(existing, '{"messages": [{"role": "user", "content": "the one we had"}]}\n');
    const before = snapshot(out);

    const result = await runReport(['import', file, '--out', out]);
    assert.equal(result.code, 2);
    assert.match(
      result.stderr,
      new RegExp(
        `line 2: ${existing.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} exists with other content, never overwritten`,
      ),
    );
    assert.deepEqual(snapshot(out), before, 'the file kept, m1/proof01 not written');
  });

  test('a model or task_id that is not one safe path segment is refused, nothing written outside', async (t) => {
    const dir = tempDir(t);
    const unsafe: [string, string, RegExp][] = [
      ['../outside', 'proof01', /model "\.\.\/outside" cannot be a folder: it holds \//],
      ['openai/gpt-4o', 'proof01', /model "openai\/gpt-4o" cannot be a folder/],
      ['m1', '..\\up', /task_id "\.\.\\\\up" cannot be a file name/],
      ['.hidden', 'proof01', /model "\.hidden" cannot be a folder: it starts with a dot/],
      ['m1', '.', /task_id "\." cannot be a file name: it starts with a dot/],
      ['node_modules', 'proof01', /model "node_modules" is never read as a tutor's folder/],
      ['m1', 'a\u0000b', /task_id "a\\u0000b" cannot be a file name/],
      ['m1', 'x'.repeat(238), /task_id is 238 bytes \(UTF-8\): at most 237/],
      ['', 'proof01', /model: is empty/],
    ];
    const { file, out } = jsonl(
      dir,
      unsafe.map(([model, task]) => line(model, task)),
    );
    const result = await runReport(['import', file, '--out', out]);
    assert.equal(result.code, 2);
    unsafe.forEach(([, , pattern], i) => {
      assert.match(result.stderr, new RegExp(`line ${i + 1}: ${pattern.source}`));
    });
    assert.deepEqual(fs.readdirSync(dir), ['export.jsonl'], 'nothing written anywhere');
  });

  test('an image comes inline; one by path is refused', async (t) => {
    const dir = tempDir(t);
    const png =
      'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
    const image = (block: unknown) => ({
      messages: [{ role: 'user', content: [{ type: 'text', text: 'my proof' }, block] }],
    });
    const inline = line(
      'm1',
      'proof01',
      image({ type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } }),
    );
    const byPath = line('m1', 'proof02', image({ type: 'image', path: 'proof.png' }));

    const { file, out } = jsonl(dir, [inline, byPath]);
    const refused = await runReport(['import', file, '--out', out]);
    assert.equal(refused.code, 2);
    assert.match(
      refused.stderr,
      /line 2: messages\[0\]\.content\[1\]: an image by path cannot come along; give it inline/,
    );

    fs.writeFileSync(file, `${inline}\n`);
    const result = await runReport(['import', file, '--out', out]);
    assert.equal(result.code, 0, result.stderr);
    const read = loadTranscript({
      model: 'm1',
      task_id: 'proof01',
      path: path.join(out, 'm1', 'proof01.json'),
    });
    assert.deepEqual(
      read.messages[0]!.content,
      image({ type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } })
        .messages[0]!.content,
    );
  });

  test('--dir STUDY imports into STUDY/evals/transcripts; a file that cannot be read is named', async (t) => {
    const dir = tempDir(t);
    const { file } = jsonl(dir, [line('m1', 'proof01')]);
    const study = path.join(dir, 'study');
    const result = await runReport(['import', file, '--dir', study]);
    assert.equal(result.code, 0, result.stderr);
    assert.ok(fs.existsSync(path.join(study, 'evals', 'transcripts', 'm1', 'proof01.json')));

    const missing = path.join(dir, 'nope.jsonl');
    const absent = await runReport(['import', missing, '--dir', study]);
    assert.equal(absent.code, 2);
    assert.match(
      absent.stderr,
      new RegExp(`^report: ${missing.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: file not found`),
    );

    const blank = path.join(dir, 'blank.jsonl');
    fs.writeFileSync(blank, '\n\n');
    const empty = await runReport(['import', blank, '--dir', study]);
    assert.equal(empty.code, 2);
    assert.match(
      empty.stderr,
      /blank\.jsonl: no transcript in it \(every line is blank\); nothing written/,
    );
  });
});
