// The dry-run checks every transcript a run would judge with the run's own schemas, and lists each
// that would fail with its reason; runs name the rows they cannot check.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { judgeEntry, setup, snapshot, writeJson } from './helpers.ts';
import type { Workspace } from './helpers.ts';

/** A transcript whose messages are empty: the transcript schema refuses it. */
function emptyMessages(ws: Workspace, model: string, taskId: string): string {
  return writeJson(path.join(ws.transcripts, model, `${taskId}.json`), { messages: [] });
}

/** The lines the dry-run prints under its count of failing transcripts. */
const listedLines = (stderr: string) => stderr.split('\n').filter((line) => line.startsWith('  '));

describe('the dry-run checks every transcript a run would judge', () => {
  test('each that would fail is named with its reason; the others are estimated; exit 1, nothing sent or written', async (t) => {
    const { ws, run, http } = await setup(t, {}, { models: 2 });
    const empty = emptyMessages(ws, 'm01', 'proof02');
    const notJson = path.join(ws.transcripts, 'm02', 'proof01.json');
    fs.writeFileSync(notJson, '{"messages": [');
    const moved = path.join(ws.transcripts, 'm02', 'proof03.json');
    const copied = JSON.parse(
      fs.readFileSync(path.join(ws.transcripts, 'm01', 'proof03.json'), 'utf8'),
    );
    writeJson(moved, copied);
    const before = snapshot(ws.dir);

    const result = await run(['--dry-run'], { apiKey: null });
    assert.equal(result.code, 1, result.stderr);
    assert.match(
      result.stderr,
      /^dry-run: 3 transcript\(s\) would fail without a call \(a run judges the others and records each of these as failed\):$/m,
    );
    assert.deepEqual(listedLines(result.stderr), [
      `  m01/proof02: ${empty}: messages: is empty (got [])`,
      `  m02/proof01: ${notJson}: invalid JSON: ${jsonError('{"messages": [')}`,
      `  m02/proof03: ${moved}: metadata.model is "m01" but the path says "m02"`,
    ]);
    assert.match(result.stderr, /^dry-run estimate: ~\d+ input tokens for 3 transcript\(s\)/m);
    assert.match(result.stdout, /test-tag m01\/proof01/, 'the first prompt is still printed');
    assert.deepEqual(http, []);
    assert.deepEqual(snapshot(ws.dir), before);
  });

  test('the first ten are listed, the rest counted; --verbose lists every one', async (t) => {
    const { ws, run } = await setup(t, {}, { models: 4 });
    const broken = ws.pairs.slice(0, 12);
    for (const pair of broken) emptyMessages(ws, pair.model, pair.task_id);

    const result = await run(['--dry-run'], { apiKey: null });
    assert.equal(result.code, 1, result.stderr);
    assert.match(result.stderr, /^dry-run: 12 transcript\(s\) would fail/m);
    const listed = listedLines(result.stderr);
    assert.equal(listed.length, 11, listed.join('\n'));
    assert.deepEqual(
      listed.slice(0, 10).map((line) => line.split(':')[0]!.trim()),
      broken.slice(0, 10).map((pair) => `${pair.model}/${pair.task_id}`),
    );
    assert.equal(listed[10], '  and 2 more (--verbose lists them all)');

    const verbose = await run(['--dry-run', '--verbose'], { apiKey: null });
    assert.equal(verbose.code, 1, verbose.stderr);
    assert.deepEqual(
      listedLines(verbose.stderr).map((line) => line.split(':')[0]!.trim()),
      broken.map((pair) => `${pair.model}/${pair.task_id}`),
    );
  });

  test('the first selected transcript unreadable: the prompt printed is the next one', async (t) => {
    const { ws, run } = await setup(t, {}, { models: 1, tasks: ['proof01', 'proof02'] });
    emptyMessages(ws, 'm01', 'proof01');
    const result = await run(['--dry-run'], { apiKey: null });
    assert.equal(result.code, 1, result.stderr);
    assert.match(result.stdout, /test-tag m01\/proof02/);
    assert.match(result.stderr, /printed the prompt for m01\/proof02; nothing was sent or written/);
  });

  test('a transcript with an image, and no judge of the chain that takes images: it would fail, naming the judges', async (t) => {
    const { ws, run } = await setup(t, {}, { models: 1, tasks: ['proof01', 'proof02'] });
    const file = path.join(ws.transcripts, 'm01', 'proof02.json');
    const transcript = JSON.parse(fs.readFileSync(file, 'utf8'));
    const gif = 'R0lGODlhAQABAAAAACw=';
    transcript.messages.push({
      role: 'user',
      content: [{ type: 'image', source: { type: 'base64', media_type: 'image/gif', data: gif } }],
    });
    writeJson(file, transcript);

    const result = await run(['--dry-run'], { apiKey: null });
    assert.equal(result.code, 1, result.stderr);
    assert.deepEqual(listedLines(result.stderr), [
      '  m01/proof02: no judge takes images (skipped: judge-a, judge-b)',
    ]);

    // A judge of the chain that takes images: nothing would fail.
    const models = JSON.parse(fs.readFileSync(ws.models, 'utf8'));
    models.fallback_judges = [judgeEntry('judge-b', { media: ['text', 'image'] })];
    writeJson(ws.models, models);
    const taken = await run(['--dry-run'], { apiKey: null });
    assert.equal(taken.code, 0, taken.stderr);
    assert.doesNotMatch(taken.stderr, /would fail/);
  });

  test('a transcript that already has a row is not judged: it never fails the dry-run, and is named as a row that cannot be checked', async (t) => {
    const { ws, run } = await setup(t, {}, { models: 1 });
    assert.equal((await run()).code, 0);
    const empty = emptyMessages(ws, 'm01', 'proof02');
    const result = await run(['--dry-run'], { apiKey: null });
    assert.equal(result.code, 0, result.stderr);
    assert.doesNotMatch(result.stderr, /would fail/);
    assert.match(
      result.stderr,
      new RegExp(
        `^dry-run: note: 1 row\\(s\\) in ${escaped(ws.output)} cannot be checked for changes since ` +
          'judged: m01/proof02 \\(its inputs cannot be read now\\); kept as they are$',
        'm',
      ),
    );
    assert.ok(fs.existsSync(empty));
  });
});

describe('a run names the rows it cannot check', () => {
  test('no audit log: the first ten rows named, the rest counted; --verbose names every one', async (t) => {
    const { ws, run, fake } = await setup(t, {}, { models: 4 });
    assert.equal((await run()).code, 0);
    fs.rmSync(ws.log);

    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    const labels = ws.pairs.map((pair) => `${pair.model}/${pair.task_id} (not in the audit log)`);
    assert.ok(
      result.stderr.includes(
        `note: 12 row(s) in ${ws.output} cannot be checked for changes since judged: ` +
          `${labels.slice(0, 10).join(', ')}, and 2 more (--verbose lists them all); kept as they are\n`,
      ),
      result.stderr,
    );

    const verbose = await run(['--verbose']);
    assert.ok(
      verbose.stderr.includes(`judged: ${labels.join(', ')}; kept as they are\n`),
      verbose.stderr,
    );
    assert.equal(fake.requests.length, 12, 'no row judged again');
  });
});

/** JSON.parse's own message for `text`. */
function jsonError(text: string): string {
  try {
    JSON.parse(text);
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error('valid JSON');
}

const escaped = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
