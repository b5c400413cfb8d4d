// The tutors compared through the people's sample, as the report gives it (report/tutors.ts,
// report/tutors-page.ts): the JSON's `models[].ppi` and `model_differences` from the rows read,
// the text formats' headline, each judge's own estimates, the plan's per-tutor sample and what it
// supports, the sample's design from plan.json, and the page's plots in a real headless Chromium.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { TestContext } from 'node:test';
import { pathToFileURL } from 'node:url';
import { stringify } from 'csv-stringify/sync';
import type { Browser } from 'playwright-core';
import { launchChromium, makeWorkspace, runReport, tempDir, writeJson } from './helpers.ts';

const { tutorMean } = await import('../report/ppi.ts');
const { samplingDesign } = await import('../report/tutors.ts');
const { planScoring } = await import('../report/sheet.ts');
const { sampleSupport, tutorShares } = await import('../report/plan-sample.ts');
const { pairKey } = await import('../run-judge.ts');

const RUBRIC = {
  dimensions: ['x', 'y'].map((name) => ({
    name,
    description: name,
    scores: { '0': 'no', '1': 'partly', '2': 'yes' },
  })),
};

/** Tutor `a`: 12 tasks, 5 scored by people (two of them by two people, one row blank, one row
 * unsure); `b`: 12 tasks, 4 scored; `c`: 6 tasks, one scored; `d`: only a human row, never judged.
 * The judge is one point lenient on `a` where it can be. */
const JUDGED: [string, string, number, number][] = [];
const HUMANS: [string, string, string, number | '', number | '', string?][] = [];
for (let t = 0; t < 12; t++) {
  const human = (t * 7) % 3;
  JUDGED.push(['a', `t${t}`, Math.min(2, human + 1), human]);
  JUDGED.push(['b', `t${t}`, (t * 5) % 3, (t * 2) % 3]);
  if (t < 6) JUDGED.push(['c', `t${t}`, t % 3, 1]);
}
HUMANS.push(['a', 't0', 'al', 0, 0], ['a', 't0', 'bo', 1, 0], ['a', 't1', 'al', 1, 1]);
HUMANS.push(['a', 't2', 'al', 2, 2], ['a', 't2', 'bo', 2, 1], ['a', 't3', 'al', 0, 0]);
HUMANS.push(['a', 't4', 'al', 1, 2], ['a', 't5', 'al', '', ''], ['a', 't6', 'bo', 2, 2, 'yes']);
HUMANS.push(['b', 't0', 'al', 0, 1], ['b', 't1', 'al', 2, 2], ['b', 't2', 'bo', 1, 1]);
HUMANS.push(['b', 't3', 'bo', 0, 0], ['c', 't0', 'al', 1, 1], ['d', 't0', 'al', 2, 2]);

function writeStudy(t: TestContext, judged = JUDGED): { dir: string; args: string[] } {
  const dir = tempDir(t);
  const rubric = writeJson(path.join(dir, 'rubric.json'), RUBRIC);
  const scores = path.join(dir, 'judge.csv');
  const rows = judged.map(([model, task, x, y]) => [task, model, x, y, '']);
  fs.writeFileSync(scores, stringify([['task_id', 'model', 'x', 'y', 'notes'], ...rows]));
  const humans = path.join(dir, 'human.csv');
  const header = ['task_id', 'model', 'scorer', 'x', 'y', 'notes', 'unsure'];
  const human = HUMANS.map(([model, task, scorer, x, y, unsure]) => {
    return [task, model, scorer, x, y, '', unsure ?? ''];
  });
  fs.writeFileSync(humans, stringify([header, ...human]));
  const args = ['--scores', scores, '--human-scores', humans, '--rubric', rubric];
  return { dir, args: [...args, '--transcripts', path.join(dir, 'none')] };
}

/** The report's JSON for the study, with these flags. */
async function reportJson(t: TestContext, flags: string[] = []) {
  const study = writeStudy(t);
  const result = await runReport([...study.args, '--format', 'json', ...flags]);
  assert.equal(result.code, 0, result.stderr);
  return JSON.parse(result.stdout);
}

/** Tutor a's data on x as the rows give it, written out by hand: its judged transcripts with a
 * complete current human row (t0: the mean of 0 and 1; t6's row is unsure, t5's blank). */
function aOnX(excludeUnsure: boolean) {
  const labeled: Record<string, number> = { t0: 0.5, t1: 1, t2: 2, t3: 0, t4: 1 };
  if (!excludeUnsure) labeled.t6 = 2;
  const judgeOf = (task: string) => JUDGED.find((row) => row[0] === 'a' && row[1] === task)![2];
  const tasks = Object.keys(labeled);
  const others = JUDGED.filter((row) => row[0] === 'a' && !tasks.includes(row[1]));
  return {
    human: tasks.map((task) => labeled[task]!),
    judge: tasks.map(judgeOf),
    judgeUnlabeled: others.map((row) => row[2]),
  };
}

describe('the JSON: models[].ppi, model_differences, the sample', () => {
  test('each tutor and dimension from the rows: scorers averaged, blank and unsure rows out', async (t) => {
    for (const exclude of [false, true]) {
      const report = await reportJson(t, exclude ? ['--exclude-unsure'] : []);
      const a = report.models.find((row: { model: string }) => row.model === 'a').ppi.x;
      const expected = tutorMean(aOnX(exclude), { low: 0, high: 2 }).figures;
      assert.deepEqual(a, JSON.parse(JSON.stringify(expected)));
      for (const key of ['estimate', 'ci95', 'lambda', 'n_human', 'n_judged', 'human_only_ci95']) {
        assert.ok(key in a, key);
      }
      assert.equal(a.n_human, exclude ? 5 : 6);
      assert.equal(a.n_judged, 12);
      assert.equal(
        a.width_ratio,
        (a.ci95[1] - a.ci95[0]) / (a.human_only_ci95[1] - a.human_only_ci95[0]),
      );
    }
  });

  test('null with a reason: one human-scored transcript, or none judged', async (t) => {
    const report = await reportJson(t);
    const ppiOf = (model: string) => {
      return report.models.find((row: { model: string }) => row.model === model).ppi.y;
    };
    assert.equal(ppiOf('c').estimate, null);
    assert.match(ppiOf('c').reason, /^1 human-scored transcript\(s\) among its judged ones/);
    assert.equal(ppiOf('c').judge_only_mean, 1);
    assert.equal(ppiOf('d').estimate, null);
    assert.equal(ppiOf('d').reason, 'no judged transcript');
  });

  test('the pairs of tutors with an estimate, a - b, and the ranking; the sample counted', async (t) => {
    const report = await reportJson(t, ['--exclude-unsure']);
    const pairs = report.model_differences.map((entry: Record<string, unknown>) => {
      return [entry.a, entry.b, entry.dimension, Object.keys(entry).sort().join(',')];
    });
    const keys = 'a,b,ci95,diff,dimension,established,p';
    assert.deepEqual(pairs, [
      ['a', 'b', 'x', keys],
      ['a', 'b', 'y', keys],
    ]);
    const x = report.model_differences[0];
    const ppi = (model: string) =>
      report.models.find((row: { model: string }) => row.model === model).ppi.x;
    assert.equal(x.diff, ppi('a').estimate - ppi('b').estimate);
    assert.deepEqual(report.tutor_ranking.x.order.sort(), ['a', 'b']);
    assert.deepEqual(report.human_sample, {
      design: 'no_plan',
      design_text:
        "no plan.json beside the human scores: each tutor's human-scored transcripts are taken " +
        'as a simple random sample of its transcripts',
      transcripts_sampled: 13,
      transcripts_scored: 10,
      scored_not_judged: 1,
      left_out: { blank_rows: 1, unsure_rows: 1, stale_rows: 0, transcripts: 2 },
    });
  });
});

describe('the text formats: the tutors section opens with the estimates', () => {
  test('table: the PPI tables before the judge-and-people means, the notes say how', async (t) => {
    const study = writeStudy(t);
    const result = await runReport(study.args);
    assert.equal(result.code, 0, result.stderr);
    const out = result.stdout;
    const headline = out.indexOf(
      "the tutors' means from the judge and the people's sample (PPI++) on x:",
    );
    assert.ok(headline > 0, out);
    assert.ok(headline < out.indexOf('the tutors on x'), 'before the side-by-side table');
    assert.match(
      out,
      /\nmodel +n +N +PPI \[95% CI\] +lambda +width +judge only \[95% CI\] +people only \[95% CI\]\n/,
    );
    assert.match(out, /the tutors' differences on x; their order: [ab] [>~] [ab]:/);
    assert.match(out, /\nc +1 +6 +under 2 scored +- +- +1\.00 \[0\.06, 1\.94\] +-\n/);
    assert.match(out, /\nd +0 +0 +not judged +- +- +- +-\n/);
    const notes = out.replaceAll('\n  ', ' ');
    assert.match(
      notes,
      /left it \(assumed missing at random\): 1 transcript\(s\), from 1 blank row\(s\), 0 unsure/,
    );
    const section = out.slice(headline, out.indexOf('the tutors on x'));
    for (const line of section.split('\n')) {
      assert.ok(line.length <= 100, `within 100 columns: ${line}`);
    }
  });

  test('LaTeX: a second tabular of the tutors, PPI first', async (t) => {
    const study = writeStudy(t);
    const result = await runReport([...study.args, '--format', 'latex']);
    assert.equal(result.code, 0, result.stderr);
    const tabulars = result.stdout.split('\\begin{tabular}');
    assert.equal(tabulars.length, 3, result.stdout);
    assert.match(
      tabulars[2]!,
      /^\{[lr]+\}\n\\toprule\nmodel & dimension & n & N & PPI \[95\\% CI\] & lambda/,
    );
    assert.match(
      tabulars[2]!,
      /the judge (narrows the interval by \d+\\%|adds nothing here: lambda 0\.0)/,
    );
  });

  test('markdown: the same tables, as Markdown', async (t) => {
    const study = writeStudy(t);
    const result = await runReport([...study.args, '--format', 'markdown']);
    assert.match(result.stdout, /\| model \| n \| N \| PPI \[95% CI\] \| lambda \| width \|/);
  });
});

describe('several judges: each its own estimates, and the one that narrows most', () => {
  test('comparison[].tutors per judge, on its own rows; the report names the best', async (t) => {
    const study = writeStudy(t);
    const second = path.join(study.dir, 'second.csv');
    // The second judge agrees with the people on every transcript they scored of a.
    const rows = JUDGED.map(([model, task, x, y]) => {
      const human = HUMANS.find((row) => row[0] === model && row[1] === task && row[3] !== '');
      return [task, model, human ? Math.round(Number(human[3])) : x, y, ''];
    });
    fs.writeFileSync(second, stringify([['task_id', 'model', 'x', 'y', 'notes'], ...rows]));
    const args = [...study.args, '--scores', `second=${second}`];
    const json = JSON.parse((await runReport([...args, '--format', 'json'])).stdout);
    const names = json.comparison.map((judge: { name: string }) => judge.name);
    assert.deepEqual(names, ['judge', 'second']);
    for (const judge of json.comparison) {
      const a = judge.tutors.models.find((row: { model: string }) => row.model === 'a').ppi.x;
      assert.equal(a.n_judged, 12, 'every row of the judge, not only those all judges scored');
      assert.equal(typeof judge.tutors.narrows_by, 'number');
    }
    const text = (await runReport(args)).stdout;
    const best = [...json.comparison].sort((p, q) => q.tutors.narrows_by - p.tutors.narrows_by)[0];
    const share = Math.round(best.tutors.narrows_by * 100);
    assert.match(
      text,
      new RegExp(
        `the judge that narrows the tutors' intervals most: ${best.name}, by ${share}% on average`,
      ),
    );
  });
});

describe("the plan's sample per tutor, and what it supports", () => {
  const refs = ['a', 'b', 'c'].flatMap((model) => {
    const count = model === 'c' ? 10 : 40;
    return Array.from({ length: count }, (_, t) => ({ task_id: `t${t}`, model }));
  });

  test('--sample a=8,b=25%,3: a 8, b 10, the rest 3; a plain share keeps its meaning', () => {
    const shares = tutorShares('a=8,b=25%,3', refs)!;
    assert.deepEqual(
      [...shares],
      [
        ['a', 8],
        ['b', 10],
        ['c', 3],
      ],
    );
    assert.equal(tutorShares('10%', refs), null);
    const plan = planScoring(refs, { scorers: ['al'], size: 21, overlap: 1, seed: 4, shares });
    const counts = ['a', 'b', 'c'].map(
      (model) => plan.chosen.filter((ref) => ref.model === model).length,
    );
    assert.deepEqual(counts, [8, 10, 3]);
  });

  test('a plan brought up to date: a tutor gone is skipped, a count cut to what a tutor has', () => {
    const now = refs.filter((ref) => ref.model !== 'b');
    const shares = tutorShares('a=50,b=5,c=3', now, true)!;
    assert.deepEqual(
      [...shares],
      [
        ['a', 40],
        ['c', 3],
      ],
    );
    const added = tutorShares('a=5,2', [...now, { task_id: 't0', model: 'd' }], true)!;
    assert.deepEqual(
      [...added],
      [
        ['a', 5],
        ['c', 1],
        ['d', 1],
      ],
    );
  });

  test('refused: an unknown tutor, a tutor without a share, two plain shares, too many', () => {
    assert.throws(
      () => tutorShares('z=3,2', refs),
      /no transcripts of a tutor "z"; the tutors are a, b, c/,
    );
    assert.throws(() => tutorShares('a=3', refs), /tutor\(s\) b, c have no share/);
    assert.throws(() => tutorShares('a=3,2,4', refs), /two shares for the tutors not named/);
    assert.throws(() => tutorShares('c=11,2', refs), /c=11: there are only 10 transcripts/);
    assert.throws(() => tutorShares('a=3,b=3,c=3,5', refs), /every tutor is named/);
  });

  test('what 8 transcripts a tutor support on a 0-2 scale: about +/- 0.43 from people alone', () => {
    // By hand: SD 0.5 assumed; the report's prior (2/3)^2 with one degree of freedom:
    // ((7 * 0.25 + 0.4444) / 8 / 8) ^ 0.5 = 0.18517, times t(0.975, 8) = 2.30600: 0.4270.
    const chosen = refs.filter((ref) => ref.model !== 'c' && Number(ref.task_id.slice(1)) < 8);
    const lines = sampleSupport(
      chosen,
      refs.filter((ref) => ref.model !== 'c'),
      [{ low: 0, high: 2 }],
    );
    assert.match(
      lines[2]!,
      /about 8 transcripts a tutor, a \(of 40\), b \(of 40\): \+\/- 0\.43 on 0-2 from people alone;/,
    );
    assert.match(
      lines[3]!,
      /\+\/- 0\.3\d on 0-2 with a judge of every transcript that correlates 0\.7/,
    );
  });

  test('report.ts sheet prints it, and plans per tutor', async (t) => {
    const ws = makeWorkspace({ models: ['a', 'b', 'c'] });
    t.after(() => ws.remove());
    const out = path.join(ws.dir, 'plan');
    const files = ['--transcripts', ws.transcripts, '--tasks', ws.tasks, '--rubric', ws.rubric];
    const plan = ['sheet', '--scorers', 'al,bo', '--sample', 'a=2,b=2,c=1', '--out', out];
    const result = await runReport([...plan, ...files, '--reference-keys', ws.referenceKeys]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /per tutor \(model\): a 2, b 2, c 1/);
    assert.match(
      result.stdout,
      /\n {4}1 a tutor, c \(of 3\): no interval \(people must score 2 or more\)\n/,
    );
    // By hand: ((1 * 0.25 + 0.4444) / 2 / 2) ^ 0.5 = 0.41667, times t(0.975, 2) = 4.30265: 1.79.
    const support =
      /\n {4}about 2 transcripts a tutor, a \(of 3\), b \(of 3\): \+\/- 1\.79 on 0-2 from people alone;\n/;
    assert.match(result.stdout, support);
    const manifest = JSON.parse(fs.readFileSync(path.join(out, 'plan.json'), 'utf8'));
    assert.equal(manifest.rule.sample, 'a=2,b=2,c=1');
  });
});

describe("the sample's design from plan.json", () => {
  const rule = { scorers: ['al'], sample: '20%', overlap: 1, seed: 3, show_system_prompt: false };

  test('no plan, no rule, every transcript, one rate: unweighted, and said', () => {
    const same = ['a', 'b'].flatMap((model) => [0, 1, 2].map((t) => ({ task_id: `t${t}`, model })));
    assert.equal(samplingDesign(undefined, same).kind, 'no_plan');
    assert.equal(samplingDesign({ assignments: [] }, same).kind, 'no_rule');
    const all = { ...rule, sample: undefined };
    assert.equal(samplingDesign({ rule: all, assignments: [] }, same).kind, 'all');
    const design = samplingDesign({ rule, assignments: [] }, same);
    assert.equal(design.kind, 'one_rate');
    assert.equal(design.inclusion, undefined);
  });

  test("tutors of different tasks: each transcript's inclusion from the plan's sampler", () => {
    // a has 20 tasks; b and c the first 10: the sampler spreads tasks, so a's last 10 come first.
    const population = [
      ...Array.from({ length: 20 }, (_, t) => ({ task_id: `t${t}`, model: 'a' })),
      ...['b', 'c'].flatMap((model) =>
        Array.from({ length: 10 }, (_, t) => ({ task_id: `t${t}`, model })),
      ),
    ];
    const design = samplingDesign({ rule, assignments: [] }, population);
    assert.equal(design.kind, 'weighted');
    const of = (model: string, t: number) => design.inclusion!.get(pairKey(`t${t}`, model))!;
    // Every run draws 8 transcripts: 3 of a (the deal, its order random), so the probabilities sum
    // to 8 and a's to its expected share.
    const total = population.reduce(
      (sum, ref) => sum + of(ref.model, Number(ref.task_id.slice(1))),
      0,
    );
    assert.ok(Math.abs(total - 8) < 1e-9, `${total}`);
    const shared = Array.from({ length: 10 }, (_, t) => of('a', t));
    const own = Array.from({ length: 10 }, (_, t) => of('a', t + 10));
    const mean = (values: number[]) =>
      values.reduce((sum, value) => sum + value, 0) / values.length;
    assert.ok(mean(own) > 1.5 * mean(shared), `${mean(own)} against ${mean(shared)}`);
  });
});

describe('the page: the tutors compared, in headless Chromium', () => {
  let browser: Browser;
  before(async () => {
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
  });

  test('a plot per dimension: each tutor its PPI interval, the people-only one, the judge-only dot', async (t) => {
    const study = writeStudy(t);
    const file = path.join(study.dir, 'report.html');
    const result = await runReport([...study.args, '--html', file]);
    assert.equal(result.code, 0, result.stderr);
    const report = JSON.parse((await runReport([...study.args, '--format', 'json'])).stdout);

    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    await page.goto(pathToFileURL(file).href);
    assert.equal(await page.locator('h2#tutors').textContent(), 'The tutors compared');
    const plots = page.locator('section.tutors svg.tutors-plot');
    assert.equal(await plots.count(), 2);
    // The x axis runs over the scale 0-2 from 170 to 560 in the plot's own units.
    const at = (value: number) => Math.round((170 + (value / 2) * 390) * 100) / 100;
    for (const [d, name] of ['x', 'y'].entries()) {
      const plot = plots.nth(d);
      const a = report.models.find((row: { model: string }) => row.model === 'a').ppi[name];
      const square = plot.locator('g.ppi rect').first();
      const x = Number(await square.getAttribute('x')) + 3.5;
      assert.ok(Math.abs(x - at(a.estimate)) < 0.02, `${name}: the square at ${x}`);
      const line = plot.locator('g.ppi line').first();
      assert.equal(Number(await line.getAttribute('x1')), at(Math.max(0, a.ci95[0])));
      assert.equal(
        await plot.locator('g.people line').count(),
        2,
        'a and b have people-only intervals',
      );
      assert.equal(
        await plot.locator('g.judge circle').count(),
        3,
        'a, b and c have judge-only means',
      );
      const biased = await plot.locator('g.judge.biased').count();
      const expected = report.models.filter(
        (row: { ppi: Record<string, { judge_biased: boolean }> | null }) => {
          return row.ppi?.[name]?.judge_biased === true;
        },
      ).length;
      assert.equal(biased, expected);
      const box = await plot.boundingBox();
      assert.ok(box !== null && box.width > 600, 'drawn at the page width');
    }
    const firstRow = page
      .locator('section.tutors table')
      .first()
      .locator('tr')
      .nth(1)
      .locator('td');
    const a = report.models.find((row: { model: string }) => row.model === 'a').ppi.x;
    assert.equal(
      await firstRow.nth(1).textContent(),
      `${a.estimate.toFixed(2)} [${a.ci95[0].toFixed(2)}, ${a.ci95[1].toFixed(2)}]`,
    );

    const shots = process.env.RJ_SCREENSHOTS; // a folder to keep the screenshots in, to look at
    if (shots !== undefined) {
      await page.locator('section.tutors').screenshot({ path: path.join(shots, 'tutors.png') });
    }
    await page.close();
  });
});
