// The analysis's statistics (report.ts), checked against small cases computed by hand.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { RUBRIC_FILE, makeWorkspace, mentioning, tempDir } from './helpers.ts';

const { agreement, bootstrapCi, confusionMatrix, quadraticWeightedKappa, spearman } = await import('../report.ts');
const { isComplete, main, readHumanScores, scoringSheet } = await import('../report.ts');
const { loadRubric } = await import('../run-judge.ts');
const rubric = loadRubric(RUBRIC_FILE);
const DIMENSIONS = rubric.dimensions.map((dimension) => dimension.name);

const close = (actual: number | null, expected: number, what: string) =>
  assert.ok(actual !== null && Math.abs(actual - expected) < 1e-12, `${what}: ${actual}, expected ${expected}`);

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
    assert.throws(() => confusionMatrix([[3, 0]], [0, 1, 2]), /score 3 is not one of the labels 0, 1, 2/);
  });
});

describe('bootstrapCi: a percentile interval over transcripts, the same for the same input', () => {
  // Ten transcripts, each with one (human, judge) pair: the judge agrees on eight.
  const units = Array.from({ length: 10 }, (_, i) => [[i % 3, i < 8 ? i % 3 : (i + 1) % 3] as const]);
  const exact = (sample: (readonly [number, number])[]) => agreement(sample, [0, 1, 2]).exact;

  test('seeded: the same units give the same interval; it holds the point estimate and lies in [0, 1]', () => {
    const [first, again] = [bootstrapCi(units, exact), bootstrapCi(units, exact)];
    assert.deepEqual(first, again);
    const [lo, hi] = first!;
    assert.ok(lo <= 0.8 && 0.8 <= hi && lo >= 0 && hi <= 1, `[${lo}, ${hi}]`);
    assert.ok(hi - lo > 0, 'resampling ten transcripts varies the share');
  });

  test('no transcripts, or a statistic undefined in most resamples: null', () => {
    assert.equal(bootstrapCi([], exact), null);
    assert.equal(
      bootstrapCi(units, () => null),
      null,
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
    const io = { stdout: { write: (text: string) => (out += text) }, stderr: process.stderr } as never;
    assert.equal(await main(['sheet', '--transcripts', ws.transcripts, '--rubric', ws.rubric], io), 0);
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
    const file = fileWith(t, `${header}\nalice,m1,p1,${full},"two\nlines"\nbob,m1,p1,${partial},\n`);
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
    ['a missing column', () => `task_id,model,notes\np1,m1,\n`, ['header: missing', DIMENSIONS[0]!]],
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
