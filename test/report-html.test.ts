// report.ts --html: one self-contained page, every untrusted string (transcript, notes, names) escaped.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { stringify } from 'csv-stringify/sync';
import { RUBRIC_FILE, makeWorkspace, mentioning, tempDir, writeJson } from './helpers.ts';

const { analyse } = await import('../report-analysis.ts');
const { main, readJudgeScores } = await import('../report.ts');
const { escapeHtml, renderHtml, transcriptEntries } = await import('../report-html.ts');
const { loadRubric } = await import('../run-judge.ts');
const rubric = loadRubric(RUBRIC_FILE);
const DIMENSIONS = rubric.dimensions.map((dimension) => dimension.name);
const FIRST = DIMENSIONS[0]!;
const SECOND = DIMENSIONS[1]!;

const HOSTILE = `<b>&"'`;
const ESCAPED = '&#60;b&#62;&#38;&#34;&#39;';
const SCRIPT = '<script>alert(1)</script>';
const all = (score: number) => Object.fromEntries(DIMENSIONS.map((name) => [name, score]));
const judge = (model: string, task_id: string, score: number, notes = '') => ({
  model,
  task_id,
  notes,
  scores: all(score),
});
const human = (
  model: string,
  task_id: string,
  scorer: string,
  scores: Record<string, number>,
  notes = '',
) => ({
  model,
  task_id,
  scorer,
  notes,
  scores,
});
/** Every tag of the page: text is escaped, so each `<` left in it opens markup the page itself wrote. */
const tagsOf = (html: string) => html.match(/<[^>]*>/g) ?? [];

/** A small page: a hostile model, scorer, notes and transcript; alice agrees with the judge, the hostile scorer not. */
function hostilePage() {
  const judged = [
    judge(`m${HOSTILE}`, 'p1', 2, `judge says ${HOSTILE} ${SCRIPT}`),
    judge('m2', 'p1', 1),
  ];
  const humans = [
    human(`m${HOSTILE}`, 'p1', 'alice', all(2)),
    human(`m${HOSTILE}`, 'p1', HOSTILE, { ...all(2), [FIRST]: 1 }, `human note ${HOSTILE}`),
    human('m2', 'p1', '', all(1)),
  ];
  const texts: Record<string, string> = {
    [`m${HOSTILE}`]: `Student: ${SCRIPT} <img src=x onerror=alert(2)>`,
  };
  const entries = transcriptEntries(judged, humans).map((entry) => ({
    ...entry,
    transcript: texts[entry.model] ?? { unavailable: `transcript not shown: ${HOSTILE}` },
  }));
  return renderHtml(
    analyse(judged, humans, rubric, { judges: { [`judge-${HOSTILE}`]: 2 }, samples: [] }),
    entries,
  );
}

describe('renderHtml: the report as one self-contained page', () => {
  test('escapeHtml: & < > " \' become entities, so text can never open a tag or close an attribute', () => {
    assert.equal(
      escapeHtml(`${SCRIPT}&"'`),
      '&#60;script&#62;alert(1)&#60;/script&#62;&#38;&#34;&#39;',
    );
  });

  test('a hostile transcript, notes, scorer, model and judge name appear only escaped; the page has no script', () => {
    const html = hostilePage();
    assert.ok(!/<script/i.test(html), 'no script tag at all');
    assert.ok(!html.includes(HOSTILE), 'no raw hostile name or note');
    assert.ok(
      html.includes(`&#60;script&#62;alert(1)&#60;/script&#62;`),
      'the script shows as text',
    );
    for (const where of [
      `m${ESCAPED} / p1`,
      `<th>${ESCAPED}</th>`,
      `human note ${ESCAPED}`,
      `judge-${ESCAPED} 2`,
    ]) {
      assert.ok(html.includes(where), `escaped: ${where}`);
    }
    assert.ok(!tagsOf(html).some((tag) => /onerror|<img/i.test(tag)), 'the transcript made no tag');
  });

  test('nothing external: no link, no src or href, no url() or @import; the style is inline', () => {
    const html = hostilePage();
    for (const tag of tagsOf(html))
      assert.ok(!/^<(link|script|img|iframe|object|embed)|\s(src|href)=/i.test(tag), tag);
    assert.ok(
      !/url\(|@import|https?:/i.test(html.slice(0, html.indexOf('</style>'))),
      'nothing fetched by the style',
    );
    assert.match(html, /^<!doctype html>\n<html lang="en"><head><meta charset="utf-8">/);
  });

  test('a human score that differs from the judge is highlighted, an agreeing one not; "human" for no scorer', () => {
    const html = hostilePage();
    const row = (name: string) =>
      new RegExp(`<tr><th>${name}</th><td>2</td><td>2</td><td class="differs">1</td></tr>`);
    assert.match(html, row(FIRST), 'judge 2, alice 2, the hostile scorer 1');
    assert.match(
      html,
      new RegExp(`<tr><th>${SECOND}</th><td>2</td><td>2</td><td>2</td></tr>`),
      'all agree',
    );
    assert.match(
      html,
      /<th>dimension<\/th><th>judge<\/th><th>human<\/th>/,
      'm2 has one human row, no scorer',
    );
  });

  test('the transcript is folded away in <details>; a missing one is an escaped note in its place', () => {
    const html = hostilePage();
    assert.match(
      html,
      /<details><summary>Transcript<\/summary><pre>Student: &#60;script&#62;[^<]*<\/pre><\/details>/,
    );
    assert.match(
      html,
      /<h3>m2 \/ p1<\/h3>(?:(?!<section>)[\s\S])*<em>transcript not shown: &#60;b&#62;/,
    );
    assert.equal(html.match(/<details>/g)?.length, 1);
  });

  test('each confusion matrix is a grid shaded by count / max count; each interval a bar on the scale min..max', () => {
    const judged = [judge('m1', 'p1', 2), judge('m1', 'p2', 2), judge('m1', 'p3', 0)];
    const humans = judged.map((row) => human(row.model, row.task_id, 'al', all(2)));
    const html = renderHtml(analyse(judged, humans, rubric), []);
    assert.match(html, /<tr><th>human ↓ judge →<\/th><th>0<\/th><th>1<\/th><th>2<\/th><\/tr>/);
    const shade = (share: string, count: number) =>
      `<td style="background:rgba\\(29,78,216,${share}\\)"[^>]*>${count}</td>`;
    assert.match(
      html,
      new RegExp(`<tr><th>2</th>${shade('0.50', 1)}${shade('0.00', 0)}${shade('1.00', 2)}</tr>`),
    );
    assert.match(
      html,
      /<span>judge<\/span><span>0<\/span><div class="bar judge"><i [^>]*><\/i><b style="left:66.7%">/,
    );
    assert.match(
      html,
      /<div class="bar human"><i style="left:100.0%;right:0.0%"><\/i><b style="left:100.0%">/,
    );
  });

  test('transcriptEntries: each transcript with a judge or a human row once, sorted by model then task', () => {
    const entries = transcriptEntries(
      [judge('b', 'p2', 1), judge('a', 'p9', 1)],
      [
        human('b', 'p1', 'al', all(1)),
        human('b', 'p2', 'al', all(1)),
        human('b', 'p2', 'bo', all(1)),
      ],
    );
    assert.deepEqual(
      entries.map((entry) => [
        entry.model,
        entry.task_id,
        entry.judge?.scores[FIRST],
        entry.humans.length,
      ]),
      [
        ['a', 'p9', 1, 0],
        ['b', 'p1', undefined, 1],
        ['b', 'p2', 1, 2],
      ],
    );
  });
});

describe('`report.ts --html FILE`: the page written beside the usual output', () => {
  /** A workspace (m01, m02 x proof01..03) with judge and human CSVs; m01/proof01 hostile, m02/proof03 missing. */
  function setup(t: import('node:test').TestContext) {
    const ws = makeWorkspace();
    t.after(() => ws.remove());
    const dir = tempDir(t);
    const scores = path.join(dir, 'judge.csv');
    const humans = path.join(dir, 'human.csv');
    const score = (model: string, task: string) =>
      model === 'm01' ? 2 : task === 'proof01' ? 0 : 1;
    const guarded = `'=${HOSTILE}`; // run-judge's formula guard, which the page takes off
    fs.writeFileSync(
      scores,
      stringify([
        ['task_id', 'model', ...DIMENSIONS, 'notes'],
        ...ws.pairs.map((p) => [
          p.task_id,
          p.model,
          ...DIMENSIONS.map(() => score(p.model, p.task_id)),
          guarded,
        ]),
      ]),
    );
    const rows = ws.pairs.flatMap((p) =>
      ['alice', HOSTILE].map((scorer, i) => {
        const own = DIMENSIONS.map((_, j) =>
          Math.max(0, score(p.model, p.task_id) - ((i * j) % 2)),
        );
        return [p.task_id, p.model, ...own, `notes by ${scorer}`, scorer];
      }),
    );
    fs.writeFileSync(
      humans,
      stringify([['task_id', 'model', ...DIMENSIONS, 'notes', 'scorer'], ...rows]),
    );
    const file = path.join(ws.transcripts, 'm01', 'proof01.json');
    const transcript = JSON.parse(fs.readFileSync(file, 'utf8'));
    transcript.messages.push({ role: 'user', content: `${SCRIPT} ${HOSTILE}` });
    writeJson(file, transcript);
    fs.rmSync(path.join(ws.transcripts, 'm02', 'proof03.json'));
    const args = [
      '--scores',
      scores,
      '--human-scores',
      humans,
      '--rubric',
      ws.rubric,
      '--transcripts',
      ws.transcripts,
    ];
    return { args: [...args, '--log', path.join(dir, 'no.log')], dir };
  }
  const run = async (args: string[]) => {
    let stdout = '';
    let stderr = '';
    const io = {
      stdout: { write: (text: string) => (stdout += text) },
      stderr: { write: (text: string) => (stderr += text) },
    };
    return { code: await main(args, io as never), stdout, stderr };
  };

  test('writes the page, with every transcript, and still prints the table', async (t) => {
    const { args, dir } = setup(t);
    const page = path.join(dir, 'report.html');
    const { code, stdout } = await run([...args, '--html', page]);
    assert.equal(code, 0);
    assert.match(stdout, /^12 \(transcript, scorer\) pairs; no human row: none/);
    const html = fs.readFileSync(page, 'utf8');
    assert.equal(html.match(/<section>/g)?.length, 6, 'one entry per transcript');
    assert.ok(!/<script/i.test(html) && !html.includes(HOSTILE));
    assert.match(html, /<b>judge's notes:<\/b> =&#60;b&#62;/, 'one formula guard taken off');
    assert.match(
      html,
      /<pre>[^<]*Student: &#60;script&#62;alert\(1\)&#60;\/script&#62; &#60;b&#62;/,
    );
    assert.match(html, /<em>transcript not shown: [^<]*proof03\.json: file not found<\/em>/);
    assert.deepEqual(
      [...html.matchAll(/<h3>(.*?)<\/h3>/g)].map((match) => match[1]),
      ['m01', 'm02'].flatMap((model) =>
        ['proof01', 'proof02', 'proof03'].map((task) => `${model} / ${task}`),
      ),
    );
  });

  test('a page it cannot write is an input error naming the file, exit 2, no stack trace', async (t) => {
    const { args, dir } = setup(t);
    const page = path.join(dir, 'no-such-folder', 'report.html');
    const { code, stderr } = await run([...args, '--html', page]);
    assert.equal(code, 2);
    assert.match(stderr, mentioning(`report: ${page}: cannot write the HTML page`));
    assert.ok(!/\n\s+at /.test(stderr), stderr);
  });

  test('readJudgeScores keeps the notes, one leading formula guard taken off', (t) => {
    const file = path.join(tempDir(t), 'judge.csv');
    const row = (task: string, notes: string) => [task, 'm1', ...DIMENSIONS.map(() => 1), notes];
    fs.writeFileSync(
      file,
      stringify([
        ['task_id', 'model', ...DIMENSIONS, 'notes'],
        row('p1', "'=1+1"),
        row('p2', "''x"),
      ]),
    );
    assert.deepEqual(
      readJudgeScores(file, rubric).map((r) => r.notes),
      ['=1+1', "'x"],
    );
  });
});
