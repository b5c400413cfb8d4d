// report.ts itself on simulated studies, written as files (the judge CSV and its audit log, the
// people's sheet, the rubric, models.json): its self-preference and alternative annotator test read
// each study as the functions `npm run calibrate` measures do (calibrate/self-preference.ts,
// calibrate/alt-test.ts), so the error rates measured there are the report's.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import type { TestContext } from 'node:test';
import { runReport, tempDir, writeJson } from './helpers.ts';

const { mulberry32 } = await import('../report/analysis.ts');
const { altTest } = await import('../report/alt-test.ts');
const { selfPreferenceFigures } = await import('../report/self-preference.ts');
const { scoredStudy } = await import('../calibrate/alt-test.ts');
const { DEFAULTS } = await import('../run-judge.ts');

/** One transcript as written: its tutor, the judge's score and each scorer's. */
type Row = { tutor: string; judge: number; people: { scorer: string; score: number }[] };

/** report.ts's JSON on the rows: a rubric of one dimension `x` scoring 0..top, the judge of family
 * anthropic by its audit log, each tutor's family from models.json. */
async function reportOn(t: TestContext, rows: Row[], top: number, families: Map<string, string>) {
  const { stdout } = await reportRun(t, rows, top, families, ['--format', 'json']);
  return JSON.parse(stdout);
}

/** report.ts on the rows, with `flags`; `names` the rubric's dimensions, each scored alike. */
async function reportRun(
  t: TestContext,
  rows: Row[],
  top: number,
  families: Map<string, string>,
  flags: string[],
  names = ['x'],
) {
  const dir = tempDir(t);
  const levels = Object.fromEntries(Array.from({ length: top + 1 }, (_, i) => [String(i), 'a']));
  const rubric = writeJson(path.join(dir, 'rubric.json'), {
    dimensions: names.map((name) => ({ name, description: name, scores: levels })),
  });
  const judge = [`task_id,model,${names.join(',')},notes`];
  const people = [`task_id,model,${names.join(',')},notes,scorer`];
  const log: string[] = [];
  const each = (score: number) => names.map(() => score).join(',');
  rows.forEach((row, i) => {
    judge.push(`t${i},${row.tutor},${each(row.judge)},`);
    for (const person of row.people) {
      people.push(`t${i},${row.tutor},${each(person.score)},,${person.scorer}`);
    }
    const scored = Object.fromEntries(names.map((name) => [name, row.judge]));
    const answers = [{ judge: 'judge-a', family: 'anthropic', scores: scored }];
    const line = { task_id: `t${i}`, model: row.tutor, status: 'scored', judge: 'judge-a' };
    log.push(JSON.stringify(Object.assign(line, { answers, attempts: [], cost_usd: 0.01 })));
  });
  const scores = path.join(dir, 'scores.csv');
  fs.writeFileSync(scores, `${judge.join('\n')}\n`);
  fs.writeFileSync(path.join(dir, 'scores.jsonl'), `${log.join('\n')}\n`);
  const humans = path.join(dir, 'humans.csv');
  fs.writeFileSync(humans, `${people.join('\n')}\n`);
  const models = JSON.parse(fs.readFileSync(DEFAULTS.models, 'utf8'));
  models.models = [...families].map(([name, family]) => ({ name, provider: family }));
  const modelsFile = writeJson(path.join(dir, 'models.json'), models);

  const args = ['--scores', scores, '--human-scores', humans, '--rubric', rubric];
  args.push('--models', modelsFile, '--transcripts', dir, ...flags);
  const run = await runReport(args);
  assert.equal(run.code, 0, run.stderr);
  return { stdout: run.stdout };
}

describe('report.ts on simulated studies reads each as the calibration does', () => {
  test('self-preference: six tutors, three a side, each its own leniency; the same verdicts, study by study', async (t) => {
    const random = mulberry32(20261206);
    const tutors = ['a1', 'a2', 'a3', 'o1', 'o2', 'o3'];
    const families = new Map(
      tutors.map((tutor) => [tutor, tutor[0] === 'a' ? 'anthropic' : 'openai']),
    );
    const verdicts: string[] = [];
    for (let s = 0; s < 6; s++) {
      // A tutor's leniency shifts the judge's score before it is rounded: the studies of
      // calibrate/self-preference.ts, as whole scores. The later studies add a family effect.
      const familyEffect = s < 3 ? 0 : 1;
      const rows: Row[] = [];
      for (const tutor of tutors) {
        const shift =
          0.6 * (random() - 0.5) + (families.get(tutor) === 'anthropic' ? familyEffect : 0);
        for (let i = 0; i < 12; i++) {
          const q = Math.floor(random() * 4);
          const at = (noise: number) => Math.min(3, Math.max(0, Math.round(q + noise)));
          const people = ['al', 'bo'].map((scorer) => ({ scorer, score: at(random() - 0.5) }));
          rows.push({ tutor, judge: at(shift + random() - 0.5), people });
        }
      }
      const report = await reportOn(t, rows, 3, families);

      const units = rows.map((row) => {
        const mean = row.people.reduce((sum, person) => sum + person.score, 0) / row.people.length;
        return {
          tutor: row.tutor,
          own: families.get(row.tutor) === 'anthropic',
          leniency: row.judge - mean,
        };
      });
      const expected = { name: 'x', ...selfPreferenceFigures(units) };
      assert.deepEqual(report.self_preference.dimensions[0], expected, `study ${s}`);
      verdicts.push(expected.verdict);
    }
    assert.ok(verdicts.includes('favours_own'), 'a family effect of a point is found');
    assert.ok(verdicts.includes('none_shown'));
  });

  test('the alternative annotator test: three scorers on 40 transcripts; the same test, study by study', async (t) => {
    const random = mulberry32(20261206);
    const passes: (boolean | null)[] = [];
    for (let s = 0; s < 4; s++) {
      // The worse judge of calibrate/alt-test.ts, then one nearer the people than they are.
      const transcripts = s < 2 ? scoredStudy(random) : scoredStudy(random, 0.3);
      const rows = transcripts.map((transcript, i) => {
        const people = transcript.scorers.map((entry) => {
          return { scorer: entry.scorer, score: entry.position };
        });
        return { tutor: `m${i % 2}`, judge: transcript.judge, people };
      });
      const families = new Map([
        ['m0', 'anthropic'],
        ['m1', 'openai'],
      ]);
      const report = await reportOn(t, rows, 4, families);

      const expected = altTest(transcripts);
      assert.deepEqual(report.dimensions[0].alt_test, expected, `study ${s}`);
      passes.push(expected.passes);
    }
    assert.deepEqual(passes, [false, false, true, true]);
  });

  test('the text, LaTeX and the page show the test beside the gap verdict, and every dimension together', async (t) => {
    // A judge nearer the people than they are, on two dimensions; one scorer's name hostile.
    const hostile = '<b>al</b>';
    const rows = scoredStudy(mulberry32(20261206), 0.3).map((transcript, i) => {
      const people = transcript.scorers.map((entry) => {
        return { scorer: entry.scorer === 'a' ? hostile : entry.scorer, score: entry.position };
      });
      return { tutor: `m${i % 2}`, judge: transcript.judge, people };
    });
    const families = new Map([
      ['m0', 'anthropic'],
      ['m1', 'openai'],
    ]);
    const names = ['x', 'y'];
    const run = (flags: string[]) => reportRun(t, rows, 4, families, flags, names);

    const { stdout: text } = await run([]);
    assert.match(text, /^the alternative annotator test at epsilon 0\.15 \(can the judge take/m);
    assert.match(text, /^dimension +scorers +transcripts +won \(rate\) +advantage +alt-test$/m);
    assert.match(text, /^x +3 +40 +3 \(1\.00\) +0\.\d\d +passes$/m);
    assert.match(
      text,
      /Benjamini-Yekutieli over their\s+6 scorer tests\): passes on all 2 dimensions/,
    );
    assert.match(text, /^alt-test \(--epsilon 0\.15\): each scorer left out in turn/m);
    for (const line of text.split('\n')) {
      assert.ok(line.length <= 100, `within 100 columns: ${line}`);
    }
    const { stdout: wide } = await run(['--wide']);
    assert.match(wide, / verdict +scorers +transcripts +won \(rate\) +advantage +alt-test +alpha/);
    const { stdout: latex } = await run(['--format', 'latex', '--epsilon', '0.2']);
    assert.match(latex, /& verdict & scorers & transcripts & won \(rate\) & advantage & alt-test/);
    assert.match(latex, /& 3 \(1\.00\) & 0\.\d\d & passes \\\\$/m);
    assert.match(latex, /alt-test \(--epsilon 0\.2\)/);

    const file = path.join(tempDir(t), 'page.html');
    await run(['--html', file]);
    const page = fs.readFileSync(file, 'utf8');
    const line =
      /<ul class="alt-test"><li><a href="#[^"]+">x<\/a>: alternative annotator test at epsilon 0\.15: passes \(the judge wins against 3 of 3 scorers; average advantage probability 0\.\d\d\)<\/li>/;
    assert.match(page, line);
    assert.match(page, /<p>alternative annotator test at epsilon 0\.15, every dimension together/);
    assert.ok(!page.includes(hostile), "the scorer's name escaped");
    assert.ok(page.includes('<td>&#60;b&#62;al&#60;/b&#62;</td>'), 'the scorer in its table');
    assert.equal(page.match(/<th><a href="[^"]+">p<\/a><\/th>/g)?.length, 2, 'a table a dimension');
  });
});
