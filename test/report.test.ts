// The analysis's statistics (report.ts), checked against small cases computed by hand.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { RUBRIC_FILE, makeWorkspace, mentioning, tempDir } from './helpers.ts';

const {
  addUnit,
  agreement,
  bootstrapIntervals,
  confusionMatrix,
  quadraticWeightedKappa,
  spearman,
  unitSums,
} = await import('../report/analysis.ts');
const { analyse } = await import('../report/analysis.ts');
const { main } = await import('../report.ts');
const { readJudgeCsv } = await import('../run-judge.ts');
const { scoringSheet } = await import('../report/sheet.ts');
const { isComplete, loadRubric, readHumanScores } = await import('../run-judge.ts');
const rubric = loadRubric(RUBRIC_FILE);
const DIMENSIONS = rubric.dimensions.map((dimension) => dimension.name);

const close = (actual: number | null, expected: number, what: string) =>
  assert.ok(
    actual !== null && Math.abs(actual - expected) < 1e-12,
    `${what}: ${actual}, expected ${expected}`,
  );

describe('agreement of two raters on one dimension: exact, within one, quadratic-weighted kappa', () => {
  test('a perfect judge: exact 1, within one 1, kappa 1', () => {
    const result = agreement(
      [
        [0, 0],
        [1, 1],
        [2, 2],
        [1, 1],
      ],
      [0, 1, 2],
    );
    assert.deepEqual([result.n, result.exact, result.within_one, result.kappa], [4, 1, 1, 1]);
  });

  test('a judge always one off: exact 0, within one 1', () => {
    const result = agreement(
      [
        [0, 1],
        [1, 2],
        [2, 1],
      ],
      [0, 1, 2],
    );
    assert.deepEqual([result.exact, result.within_one], [0, 1]);
  });

  test('a constant judge against varying humans: kappa 0 (observed = expected); both constant and equal: null', () => {
    const constant = quadraticWeightedKappa(
      [
        [0, 2],
        [1, 2],
        [2, 2],
      ],
      [0, 1, 2],
    );
    close(constant, 0, 'constant judge');
    assert.equal(
      quadraticWeightedKappa([[2, 2] as const, [2, 2] as const], [0, 1, 2]),
      null,
      'no expected disagreement',
    );
    assert.equal(quadraticWeightedKappa([], [0, 1, 2]), null, 'no pairs');
  });

  test('a score nobody used is still a label: it moves the others apart (11/16 without 2, 2/3 with it)', () => {
    // Labels 0, 1, 3 sit at positions 0, 1, 2; with the unused 2 they sit at 0, 1, 3 of 4, and the weights change.
    const pairs = [
      [0, 0],
      [1, 1],
      [3, 3],
      [0, 1],
      [1, 3],
    ] as const;
    close(quadraticWeightedKappa(pairs, [0, 1, 3]), 11 / 16, 'labels 0, 1, 3');
    close(quadraticWeightedKappa(pairs, [0, 1, 2, 3]), 2 / 3, 'labels 0..3');
  });

  test('the confusion matrix: rows the first rater, columns the second, in score order; an unknown score is refused', () => {
    const pairs = [
      [2, 1],
      [0, 0],
      [2, 2],
      [2, 1],
    ] as const;
    assert.deepEqual(confusionMatrix(pairs, [2, 0, 1]), [
      [1, 0, 0],
      [0, 0, 0],
      [0, 2, 1],
    ]);
    assert.throws(
      () => confusionMatrix([[3, 0]], [0, 1, 2]),
      /score 3 is not one of the labels 0, 1, 2/,
    );
  });
});

describe('bootstrapIntervals: percentile intervals over transcripts, the same for the same input', () => {
  // Ten transcripts, each with one (human, judge) pair: the judge agrees on eight. A unit's sums: agreed, 1.
  const units = unitSums(1);
  for (let i = 0; i < 10; i++) {
    addUnit(units, Float64Array.of(i < 8 ? 1 : 0));
  }
  const exact = (sums: Float64Array) => sums[0]! / 10;

  test('seeded: the same units give the same interval; it holds the point estimate and lies in [0, 1]', () => {
    const [first] = bootstrapIntervals(units, [exact]);
    const [again] = bootstrapIntervals(units, [exact]);
    assert.deepEqual(first, again);
    const [lo, hi] = first!.ci95!;
    assert.ok(lo <= 0.8 && 0.8 <= hi && lo >= 0 && hi <= 1, `[${lo}, ${hi}]`);
    assert.ok(hi - lo > 0, 'resampling ten transcripts varies the share');
    assert.deepEqual([first!.undefined_resamples, first!.resamples], [0, 2000]);
  });

  test('no transcripts: null of 0 resamples; undefined in over half the resamples: null, the count said', () => {
    assert.deepEqual(bootstrapIntervals(unitSums(1), [exact]), [
      { ci95: null, undefined_resamples: 0, resamples: 0 },
    ]);
    assert.deepEqual(bootstrapIntervals(units, [() => null]), [
      { ci95: null, undefined_resamples: 2000, resamples: 2000 },
    ]);
    // Undefined unless the resample drew two disagreements or more (p = 0.376 it drew fewer: about 752 of 2000).
    const [some] = bootstrapIntervals(units, [(sums) => (sums[0]! <= 8 ? 1 : null)]);
    assert.ok(some!.ci95 !== null);
    assert.ok(
      some!.undefined_resamples > 600 && some!.undefined_resamples < 900,
      `${some!.undefined_resamples}`,
    );
  });
});

describe('spearman: does the judge order the tutors as the humans do', () => {
  test('ties get their average rank: (1, 2, 2, 3) against (1, 3, 2, 4) is 3 / sqrt(10)', () => {
    close(spearman([1, 2, 2, 3], [1, 3, 2, 4]), 3 / Math.sqrt(10), 'with ties');
  });

  test('the same order 1, the reverse -1; fewer than three models or no spread: null', () => {
    close(spearman([1, 2, 3], [10, 20, 30]), 1, 'same order');
    close(spearman([1, 2, 3], [3, 2, 1]), -1, 'reversed');
    assert.equal(spearman([1, 2], [1, 2]), null);
    assert.equal(spearman([1, 1, 1], [1, 2, 3]), null);
  });
});

describe('the scoring sheet: one row per transcript, scores empty, blind to the judge', () => {
  test("`report.ts sheet`: the judge CSV's header and every discovered transcript in sorted order, nothing filled", async (t) => {
    const ws = makeWorkspace({ models: 2, tasks: ['proof02', 'proof01'] });
    t.after(() => ws.remove());
    let out = '';
    const io = {
      stdout: { write: (text: string) => (out += text) },
      stderr: process.stderr,
    } as never;
    assert.equal(
      await main(['sheet', '--transcripts', ws.transcripts, '--rubric', ws.rubric], io),
      0,
    );
    const empty = DIMENSIONS.map(() => '').join(',');
    assert.equal(
      out,
      [
        `task_id,model,${DIMENSIONS.join(',')},notes`,
        ...['m01', 'm02'].flatMap((m) => [1, 2].map((n) => `proof0${n},${m},${empty},`)),
      ]
        .map((line) => `${line}\n`)
        .join(''),
    );
  });

  test('--scorer NAME adds a scorer column filled with NAME', () => {
    const sheet = scoringSheet([{ task_id: 'p1', model: 'm1' }], rubric, 'alice');
    assert.match(sheet, /,notes,scorer\np1,m1,,+alice\n$/);
  });
});

describe('readHumanScores: every cell checked, a bad one named by file, line and column', () => {
  const header = ['scorer', 'model', 'task_id', ...DIMENSIONS, 'notes'].join(','); // any column order
  const full = DIMENSIONS.map(() => '2').join(',');
  const fileWith = (t: import('node:test').TestContext, text: string) => {
    const file = path.join(tempDir(t), 'human_scores.csv');
    fs.writeFileSync(file, text);
    return file;
  };

  test('rows in any column order; a multi-line note; an empty score is a row not yet complete', (t) => {
    const partial = ['', ...DIMENSIONS.slice(1).map(() => '1')].join(',');
    const file = fileWith(
      t,
      `${header}\nalice,m1,p1,${full},"two\nlines"\nbob,m1,p1,${partial},\n`,
    );
    const rows = readHumanScores(file, rubric);
    assert.deepEqual(
      rows.map((row) => [row.scorer, row.model, row.task_id, row.notes]),
      [
        ['alice', 'm1', 'p1', 'two\nlines'],
        ['bob', 'm1', 'p1', ''],
      ],
    );
    assert.deepEqual(
      rows.map((row) => isComplete(row, rubric)),
      [true, false],
    );
    assert.equal(rows[0]!.scores[DIMENSIONS[0]!], 2);
  });

  const bad: [string, (file: string) => string, string[]][] = [
    [
      "a score its dimension does not allow (after a two-line note: the line is the file's)",
      () => `${header}\nalice,m1,p1,${full},"a\nb"\nalice,m1,p2,7${full.slice(1)},\n`,
      ['line 4', `${DIMENSIONS[0]}: "7" is not an allowed score`],
    ],
    [
      'the same transcript twice by one scorer',
      () => `${header}\nal,m1,p1,${full},\nal,m1,p1,${full},\n`,
      ['line 3', 'scored twice by "al"'],
    ],
    [
      'a missing column',
      () => `task_id,model,notes\np1,m1,\n`,
      ['header: missing', DIMENSIONS[0]!],
    ],
    ['an empty task_id', () => `${header}\nal,m1,,${full},\n`, ['line 2', 'task_id is empty']],
  ];
  for (const [label, text, mentions] of bad) {
    test(`${label} → EvalInputError naming the file`, (t) => {
      const file = fileWith(t, text(''));
      assert.throws(() => readHumanScores(file, rubric), {
        name: 'EvalInputError',
        message: mentioning(file, ...mentions),
      });
    });
  }

  test('a missing file → EvalInputError "file not found"', (t) => {
    const file = path.join(tempDir(t), 'nope.csv');
    assert.throws(() => readHumanScores(file, rubric), {
      name: 'EvalInputError',
      message: mentioning(file, 'file not found'),
    });
  });
});

describe('readJudgeCsv: a judge CSV cell that is not an allowed score is an error naming it, never a crash', () => {
  for (const cell of ['9', '', 'x']) {
    test(`a score cell "${cell}" → EvalInputError naming the file, the line and the dimension`, (t) => {
      const file = path.join(tempDir(t), 'judge.csv');
      const rest = DIMENSIONS.slice(1)
        .map(() => '2')
        .join(',');
      fs.writeFileSync(
        file,
        `task_id,model,${DIMENSIONS.join(',')},notes\np1,m1,2,${rest},ok\np2,m1,${cell},${rest},ok\n`,
      );
      assert.throws(() => readJudgeCsv(file, rubric), {
        name: 'EvalInputError',
        message: mentioning(file, 'line 3', `${DIMENSIONS[0]}: "${cell}" is not an allowed score`),
      });
    });
  }
});

describe('readJudgeCsv: a transcript scored twice in the judge CSV is an error naming both lines', () => {
  test('the same (task_id, model) on lines 2 and 4 → EvalInputError naming both lines and the transcript', (t) => {
    const file = path.join(tempDir(t), 'judge.csv');
    const row = DIMENSIONS.map(() => '2').join(',');
    fs.writeFileSync(
      file,
      `task_id,model,${DIMENSIONS.join(',')},notes\np1,m1,${row},a\np2,m1,${row},b\np1,m1,${row},c\n`,
    );
    assert.throws(() => readJudgeCsv(file, rubric), {
      name: 'EvalInputError',
      message: mentioning(file, 'lines 2 and 4', 'm1/p1'),
    });
  });
});

describe('analyse: the judge against the humans, per dimension and per model; what is missing', () => {
  const all = (score: number) => Object.fromEntries(DIMENSIONS.map((name) => [name, score]));
  const judge = (model: string, task_id: string, score: number) => ({
    model,
    task_id,
    scores: all(score),
  });
  const human = (model: string, task_id: string, scorer: string, score: number) => ({
    model,
    task_id,
    scorer,
    notes: '',
    scores: all(score),
  });

  test('a judge that agrees with two agreeing scorers: kappa 1 against them and between them; n counts each row', () => {
    const judged = [judge('m1', 'p1', 0), judge('m1', 'p2', 1), judge('m1', 'p3', 2)];
    const humans = judged.flatMap((row) =>
      ['bob', 'alice'].map((scorer) =>
        human(row.model, row.task_id, scorer, row.scores[DIMENSIONS[0]!]!),
      ),
    );
    const report = analyse(judged, humans, rubric);
    const [first] = report.dimensions;
    assert.deepEqual(
      [report.pairs, first!.judge_vs_human.n, first!.judge_vs_human.kappa],
      [6, 6, 1],
    );
    assert.deepEqual(
      [first!.human_vs_human!.n, first!.human_vs_human!.kappa],
      [3, 1],
      'one scorer pair per transcript',
    );
    assert.ok(!('confusion' in first!.human_vs_human!), 'the ceiling has no confusion matrix');
    assert.deepEqual(first!.judge_vs_human.kappa_ci95, [1, 1]);
  });

  test('three scorers on a transcript: three pairs, the name sorting first as the first rater', () => {
    const humans = [
      human('m1', 'p1', 'carol', 2),
      human('m1', 'p1', 'alice', 0),
      human('m1', 'p1', 'bob', 1),
    ];
    const report = analyse([judge('m1', 'p1', 1)], humans, rubric);
    const ceiling = report.dimensions[0]!.human_vs_human!;
    assert.equal(ceiling.n, 3);
    assert.deepEqual(
      [ceiling.exact, ceiling.within_one],
      [0, 2 / 3],
      'alice-bob 0/1, alice-carol 0/2, bob-carol 1/2',
    );
  });

  test('missing: judge rows without a human row, and human rows without a judge row, listed; an incomplete row is none, and listed as incomplete', () => {
    const partial = { ...human('m1', 'p3', 'alice', 1), scores: { [DIMENSIONS[0]!]: 1 } };
    const report = analyse(
      [judge('m1', 'p1', 1), judge('m1', 'p3', 1)],
      [human('m1', 'p1', 'al', 1), human('m2', 'p9', 'al', 1), partial],
      rubric,
    );
    assert.deepEqual(report.missing, {
      no_human: ['m1/p3'],
      no_judge: ['m2/p9'],
      incomplete_human: ['alice: m1/p3'],
      stale_human: [],
      stale_judge: [],
    });
    assert.equal(report.pairs, 1);
  });

  test('models side by side: means per dimension, and Spearman 1 when three tutors are ordered alike (null with two)', () => {
    const judged = ['a', 'b', 'c'].map((model, i) => judge(model, 'p1', i));
    const humans = ['a', 'b', 'c'].map((model, i) => human(model, 'p1', 'al', Math.min(2, i + 1)));
    const report = analyse(judged, humans, rubric);
    assert.deepEqual(
      report.models.map((row) => [
        row.model,
        row.judge_mean[DIMENSIONS[0]!],
        row.human_mean[DIMENSIONS[0]!],
      ]),
      [
        ['a', 0, 1],
        ['b', 1, 2],
        ['c', 2, 2],
      ],
    );
    close(report.ranking[DIMENSIONS[0]!]!, Math.sqrt(3) / 2, 'ties in the human means'); // ranks 1,2,3 vs 1,2.5,2.5
    assert.equal(
      analyse(judged.slice(0, 2), humans.slice(0, 2), rubric).ranking[DIMENSIONS[0]!],
      null,
    );
  });

  test('`report.ts` prints exactly one JSON object; the audit log says which judge scored each row', async (t) => {
    const dir = tempDir(t);
    const scores = path.join(dir, 'judge.csv');
    const humans = path.join(dir, 'human.csv');
    const log = path.join(dir, 'log.jsonl');
    const row = (score: number) => DIMENSIONS.map(() => score).join(',');
    fs.writeFileSync(
      scores,
      `task_id,model,${DIMENSIONS.join(',')},notes\np1,m1,${row(2)},ok\np2,m1,${row(1)},ok\n`,
    );
    fs.writeFileSync(
      humans,
      `task_id,model,${DIMENSIONS.join(',')},notes,scorer\np1,m1,${row(2)},,al\np2,m1,${row(1)},,al\n`,
    );
    const entry = (task_id: string, judge: string, status = 'scored') =>
      JSON.stringify({ task_id, model: 'm1', judge, status });
    fs.writeFileSync(
      log,
      [entry('p1', 'judge-a'), entry('p2', 'judge-a'), entry('p2', 'judge-b')].join('\n') + '\n',
    );
    let out = '';
    const io = {
      stdout: { write: (text: string) => (out += text) },
      stderr: process.stderr,
    } as never;
    const args = [
      '--scores',
      scores,
      '--human-scores',
      humans,
      '--rubric',
      RUBRIC_FILE,
      '--log',
      log,
    ];
    assert.equal(await main([...args, '--format', 'json'], io), 0);
    const report = JSON.parse(out);
    assert.equal(report.pairs, 2);
    assert.deepEqual(
      report.judges,
      { 'judge-a': 1, 'judge-b': 1 },
      'the last scored entry of each transcript',
    );
    assert.deepEqual(Object.keys(report), [
      'pairs',
      'missing',
      'scope',
      'dimensions',
      'models',
      'ranking',
      'model_differences',
      'tutor_ranking',
      'human_sample',
      'self_preference',
      'alt_test_all',
      'judges',
    ]);

    // The same report as a table (the default) and as Markdown; a format it does not know is a usage error. With two
    // transcripts most resamples have one kind of score, kappa is undefined there, so no interval is printed.
    const printed = async (format: string[]) => {
      out = '';
      return [await main([...args, ...format], io), out] as const;
    };
    const [tableCode, table] = await printed([]);
    assert.equal(tableCode, 0);
    assert.match(
      table,
      /^2 \(transcript, scorer\) pairs; no human row: none; no judge row: none;\n {2}rows by judge: judge-a 1, judge-b 1\n/,
    );
    // Kappa is undefined in 1004 of 2000 resamples (both transcripts drawn alike): said in a note.
    assert.match(
      table,
      new RegExp(`^${DIMENSIONS[0]} +2 +1\\.00 +1\\.00 +1\\.00 -†¹ +0\\.00 \\[too few\\]$`, 'm'),
    );
    const note = `¹ ${DIMENSIONS[0]}: kappa undefined in 1004 of 2000 resamples (left out of its interval)`;
    assert.ok(table.split('\n').includes(note), table);
    const [, markdown] = await printed(['--format', 'markdown']);
    assert.match(
      markdown,
      /^\| dimension \| n \| exact \| within 1 \| kappa \[95% CI\] \| leniency \[95% CI\] \|\n\| --- \|/m,
    );
    assert.equal((await printed(['--format', 'xml']))[0], 2);
  });
});
