// The report's figures (report/analysis.ts) against scikit-learn, SciPy and NLTK: one convention
// (positions on the scale), matched transcripts, the gap to the ceiling, leniency, alpha, per model.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { referenceRun, referenceSkip } from './python-reference.ts';

const { agreement, analyse, intervalAlpha, judgesAgainstEachOther, reportCells } =
  await import('../report/analysis.ts');
const { compareJudges, juryOf } = await import('../report.ts');
const { noAudit } = await import('../report/inputs.ts');
const { ONE_OWN_TUTOR } = await import('../report/self-preference.ts');
type Rubric = import('../run-judge.ts').Rubric;
type HumanRow = import('../run-judge.ts').HumanRow;
type ScoreRow = import('../run-judge.ts').ScoreRow;

const near = (actual: number | null | undefined, expected: number, what: string) => {
  assert.ok(
    actual !== null && actual !== undefined && Math.abs(actual - expected) < 1e-9,
    `${what}: ${actual}, expected ${expected}`,
  );
};

/** A rubric of the dimensions named, each with its allowed scores. */
function rubricOf(scales: Record<string, number[]>): Rubric {
  const dimensions = Object.entries(scales).map(([name, scores]) => {
    const levels = Object.fromEntries(scores.map((score) => [String(score), `level ${score}`]));
    return { name, description: name, scores: levels };
  });
  return { dimensions } as Rubric;
}

const judgeRow = (model: string, task_id: string, scores: Record<string, number>): ScoreRow => {
  return { model, task_id, scores, notes: '' };
};
const humanRow = (
  model: string,
  task_id: string,
  scorer: string,
  scores: Record<string, number>,
): HumanRow => {
  return { model, task_id, scorer, scores, notes: '' };
};

// The data set of test/reference/analysis-reference.py: x scores 0..3, y scores {0, 2, 4}.
const SCALES = { x: [0, 1, 2, 3], y: [0, 2, 4] };
const JUDGE: [string, string, number, number][] = [
  ['a', 't1', 0, 0],
  ['a', 't2', 1, 2],
  ['a', 't3', 3, 4],
  ['a', 't4', 2, 2],
  ['b', 't1', 2, 2],
  ['b', 't2', 2, 4],
  ['b', 't3', 1, 0],
  ['c', 't1', 3, 4],
  ['c', 't2', 0, 2],
  ['c', 't3', 2, 2],
];
const HUMANS: [string, string, string, number, number][] = [
  ['a', 't1', 'al', 0, 0],
  ['a', 't1', 'bo', 1, 0],
  ['a', 't1', 'cy', 0, 4],
  ['a', 't2', 'al', 1, 2],
  ['a', 't2', 'bo', 2, 2],
  ['a', 't3', 'bo', 3, 4],
  ['b', 't1', 'al', 1, 2],
  ['b', 't1', 'cy', 2, 0],
  ['b', 't2', 'al', 3, 4],
  ['b', 't2', 'bo', 2, 4],
  ['b', 't2', 'cy', 3, 2],
  ['b', 't3', 'cy', 3, 0],
  ['c', 't1', 'al', 3, 2],
  ['c', 't1', 'bo', 2, 4],
  ['c', 't2', 'al', 1, 0],
  ['c', 't2', 'bo', 0, 0],
  ['c', 't3', 'al', 2, 4],
  ['c', 't3', 'bo', 3, 2],
  ['c', 't3', 'cy', 2, 2],
  ['c', 't9', 'al', 1, 2],
];

// Printed by `/usr/bin/python3 test/reference/analysis-reference.py` (scikit-learn 1.2.1
// cohen_kappa_score(weights='quadratic') on positions, SciPy 1.10.1 spearmanr, NLTK 3.8
// AnnotationTask(distance=interval_distance).alpha() on positions), copied here.
const REFERENCE = {
  dimensions: {
    x: {
      n: 19,
      exact: 0.5263157894736842,
      within_one: 0.9473684210526315,
      kappa: 0.7259615384615385,
      ceiling_n: 13,
      ceiling_kappa: 0.6614583333333334,
      kappa_diff: 0.12198115711252655,
      leniency: -0.3703703703703704,
      alpha_humans: 0.631578947368421,
      alpha_humans_and_judge: 0.6554054054054055,
      spearman: 0.8660254037844387,
      per_model: [
        ['a', 6, 0.6666666666666666, 1.0, 0.8604651162790697],
        ['b', 6, 0.3333333333333333, 0.8333333333333334, -0.23529411764705865],
        ['c', 7, 0.5714285714285714, 1.0, 0.817391304347826],
      ],
    },
    y: {
      n: 19,
      exact: 0.631578947368421,
      within_one: 0.9473684210526315,
      kappa: 0.5454545454545454,
      ceiling_n: 13,
      ceiling_kappa: 0.1165048543689321,
      kappa_diff: 0.3279395900755123,
      leniency: 0.2962962962962963,
      alpha_humans: 0.24705882352941178,
      alpha_humans_and_judge: 0.48842105263157887,
      spearman: 0.0,
      per_model: [
        ['a', 6, 0.8333333333333334, 0.8333333333333334, 0.5],
        ['b', 6, 0.6666666666666666, 1.0, 0.75],
        ['c', 7, 0.42857142857142855, 1.0, 0.33333333333333337],
      ],
    },
  },
  models: {
    a: {
      n_matched: 3,
      judge_mean: { x: 1.3333333333333333, y: 2.0 },
      human_mean: { x: 1.611111111111111, y: 2.444444444444444 },
      judge_mean_all: { x: 1.5, y: 2.0 },
    },
    b: {
      n_matched: 3,
      judge_mean: { x: 1.6666666666666667, y: 2.0 },
      human_mean: { x: 2.388888888888889, y: 1.4444444444444446 },
      judge_mean_all: { x: 1.6666666666666667, y: 2.0 },
    },
    c: {
      n_matched: 3,
      judge_mean: { x: 1.6666666666666667, y: 2.6666666666666665 },
      human_mean: { x: 1.777777777777778, y: 1.8888888888888886 },
      judge_mean_all: { x: 1.6666666666666667, y: 2.6666666666666665 },
    },
  },
  alpha: {
    'three raters, one unit with one value': -0.2857142857142858,
    'one step off everywhere': 0.125,
    perfect: 1.0,
  },
};
const ALPHA_CASES: Record<string, number[][]> = {
  'three raters, one unit with one value': [[0, 1, 2], [1, 1], [2, 2, 1], [0], [2, 0]],
  'one step off everywhere': [
    [0, 1],
    [1, 2],
    [2, 1],
    [1, 0],
  ],
  perfect: [
    [0, 0],
    [1, 1, 1],
    [2, 2],
  ],
};

function referenceReport() {
  const judged = JUDGE.map(([model, task, x, y]) => judgeRow(model, task, { x, y }));
  const humans = HUMANS.map(([model, task, scorer, x, y]) =>
    humanRow(model, task, scorer, { x, y }),
  );
  return analyse(judged, humans, rubricOf(SCALES));
}

describe('one convention: scores by their position on the scale, over matched transcripts', () => {
  test('within one is one step on the scale: on {0, 2, 4} 3/4 (by value it was exact, 1/4); on {0, 1, 3} 2/3', () => {
    const even = agreement(
      [
        [0, 2],
        [2, 4],
        [0, 4],
        [4, 4],
      ],
      [0, 2, 4],
    );
    assert.deepEqual([even.exact, even.within_one], [1 / 4, 3 / 4]);
    const uneven = agreement(
      [
        [0, 1],
        [1, 3],
        [0, 3],
      ],
      [0, 1, 3],
    );
    assert.deepEqual([uneven.exact, uneven.within_one], [0, 2 / 3]);
  });

  test('small cases as scikit-learn gives them: perfect 1, a constant judge 0, one step off 0', () => {
    // cohen_kappa_score(first, second, labels=[0, 1, 2], weights='quadratic'): 1.0, 0.0 and
    // -2.220446049250313e-16 (0 but for rounding; here the sums are integers, so exactly 0).
    const kappa = (pairs: [number, number][]) => agreement(pairs, [0, 1, 2]).kappa;
    const perfect: [number, number][] = [
      [0, 0],
      [1, 1],
      [2, 2],
      [1, 1],
    ];
    const constant: [number, number][] = [
      [0, 2],
      [1, 2],
      [2, 2],
    ];
    const oneOff: [number, number][] = [
      [0, 1],
      [1, 2],
      [2, 1],
    ];
    assert.equal(kappa(perfect), 1);
    assert.equal(kappa(constant), 0);
    assert.equal(kappa(oneOff), 0);
  });

  test('a reference data set: every figure as scikit-learn, SciPy and NLTK compute it', () => {
    const report = referenceReport();
    for (const dimension of report.dimensions) {
      const expected = REFERENCE.dimensions[dimension.name as 'x' | 'y'];
      const at = (what: string) => `${dimension.name} ${what}`;
      assert.equal(dimension.judge_vs_human.n, expected.n, at('n'));
      near(dimension.judge_vs_human.exact, expected.exact, at('exact'));
      near(dimension.judge_vs_human.within_one, expected.within_one, at('within one'));
      near(dimension.judge_vs_human.kappa, expected.kappa, at('kappa'));
      assert.equal(dimension.human_vs_human!.n, expected.ceiling_n, at('ceiling n'));
      near(dimension.human_vs_human!.kappa, expected.ceiling_kappa, at('ceiling kappa'));
      near(dimension.gap_to_ceiling!.kappa_diff, expected.kappa_diff, at('gap'));
      near(dimension.leniency.mean_diff, expected.leniency, at('leniency'));
      near(dimension.alpha.humans, expected.alpha_humans, at('alpha humans'));
      near(dimension.alpha.humans_and_judge, expected.alpha_humans_and_judge, at('alpha + judge'));
      near(report.ranking[dimension.name], expected.spearman, at('Spearman'));
      const perModel = dimension.per_model.map((row) => [
        row.model,
        row.n,
        row.exact,
        row.within_one,
        row.kappa,
      ]);
      assert.equal(perModel.length, expected.per_model.length);
      perModel.forEach((row, i) => {
        const want = expected.per_model[i]!;
        assert.deepEqual(row.slice(0, 2), want.slice(0, 2), at('per model'));
        row
          .slice(2)
          .forEach((value, j) => near(value as number, want[j + 2] as number, at('per model')));
      });
    }
    for (const row of report.models) {
      const expected = REFERENCE.models[row.model as 'a' | 'b' | 'c'];
      assert.equal(row.n_matched, expected.n_matched, row.model);
      for (const name of ['x', 'y'] as const) {
        near(row.judge_mean[name], expected.judge_mean[name], `${row.model} judge mean`);
        near(row.human_mean[name], expected.human_mean[name], `${row.model} human mean`);
        near(row.judge_mean_all[name], expected.judge_mean_all[name], `${row.model} all judged`);
      }
    }
  });

  test('every interval holds its point estimate and says how many resamples were undefined', () => {
    const report = referenceReport();
    for (const dimension of report.dimensions) {
      const holds = (value: number | null, ci: [number, number] | null, what: string) => {
        assert.ok(ci !== null && value !== null, `${dimension.name} ${what}: an interval`);
        assert.ok(ci[0] <= value + 1e-12 && value - 1e-12 <= ci[1], `${what} ${value} in ${ci}`);
      };
      holds(dimension.judge_vs_human.kappa, dimension.judge_vs_human.kappa_ci95, 'kappa');
      holds(dimension.gap_to_ceiling!.kappa_diff, dimension.gap_to_ceiling!.ci95, 'gap');
      holds(dimension.leniency.mean_diff, dimension.leniency.ci95, 'leniency');
      holds(dimension.alpha.humans, dimension.alpha.humans_ci95, 'alpha humans');
      holds(dimension.alpha.humans_and_judge, dimension.alpha.humans_and_judge_ci95, 'alpha + j');
      assert.equal(dimension.judge_vs_human.resamples, 2000);
      assert.ok(dimension.judge_vs_human.undefined_resamples < 1000);
    }
  });

  test('a model with rows the humans lack: its judge_mean over matched transcripts, judge_mean_all over all', () => {
    const a = referenceReport().models.find((row) => row.model === 'a')!;
    assert.deepEqual([a.n_judge, a.n_matched], [4, 3]);
    assert.deepEqual([a.judge_mean.x, a.judge_mean_all.x], [4 / 3, 1.5]);
  });

  test('model means equal as fractions tie in the Spearman, though their floating sums differ', () => {
    // Human means per transcript 1/2, 2/3, 1/3 sum to 0.49999999999999994 x 3; 0, 0, 3/2 to 0.5 x 3.
    const rows: HumanRow[] = [
      humanRow('a', 't1', 'al', { x: 0 }),
      humanRow('a', 't1', 'bo', { x: 1 }),
      humanRow('a', 't2', 'al', { x: 0 }),
      humanRow('a', 't2', 'bo', { x: 1 }),
      humanRow('a', 't2', 'cy', { x: 1 }),
      humanRow('a', 't3', 'al', { x: 0 }),
      humanRow('a', 't3', 'bo', { x: 0 }),
      humanRow('a', 't3', 'cy', { x: 1 }),
      humanRow('b', 't1', 'al', { x: 0 }),
      humanRow('b', 't2', 'al', { x: 0 }),
      humanRow('b', 't3', 'al', { x: 1 }),
      humanRow('b', 't3', 'bo', { x: 2 }),
      humanRow('c', 't1', 'al', { x: 2 }),
      humanRow('c', 't2', 'al', { x: 2 }),
      humanRow('c', 't3', 'al', { x: 2 }),
    ];
    const judged = ['a', 'b', 'c'].flatMap((model, i) => {
      return ['t1', 't2', 't3'].map((task) => judgeRow(model, task, { x: i }));
    });
    const report = analyse(judged, rows, rubricOf({ x: [0, 1, 2] }));
    const means = report.models.map((row) => row.human_mean.x);
    assert.notEqual(means[0], means[1], 'the two sums differ in floating point');
    // SciPy: spearmanr([0, 1, 2], [1/2, 1/2, 2]).correlation = 0.8660254037844387 (ranks 1.5, 1.5, 3).
    near(report.ranking.x, 0.8660254037844387, 'tied means');
  });
});

describe("the JSON's field names, which report-page and report-cli code against", () => {
  test('each dimension, its gap, leniency, alpha and per-model entries, and each model, in this order', () => {
    const report = JSON.parse(JSON.stringify(referenceReport()));
    const [dimension] = report.dimensions;
    assert.deepEqual(Object.keys(dimension), [
      'name',
      'labels',
      'judge_vs_human',
      'human_vs_human',
      'gap_to_ceiling',
      'alt_test',
      'leniency',
      'alpha',
      'per_model',
      'self_consistency',
    ]);
    assert.deepEqual(Object.keys(dimension.judge_vs_human), [
      'n',
      'exact',
      'within_one',
      'kappa',
      'confusion',
      'kappa_ci95',
      'undefined_resamples',
      'resamples',
      'few_pairs',
    ]);
    assert.deepEqual(Object.keys(dimension.gap_to_ceiling), [
      'kappa_diff',
      'ci95',
      'verdict',
      'reason',
      'margin',
      'transcripts_to_decide',
      'few_pairs',
      'undefined_resamples',
      'resamples',
    ]);
    assert.deepEqual(Object.keys(dimension.leniency), ['mean_diff', 'ci95', 'reading']);
    assert.deepEqual(Object.keys(dimension.alpha), [
      'humans',
      'humans_ci95',
      'humans_and_judge',
      'humans_and_judge_ci95',
    ]);
    assert.deepEqual(Object.keys(dimension.per_model[0]), [
      'model',
      'n',
      'exact',
      'within_one',
      'kappa',
      'kappa_ci95',
      'undefined_resamples',
      'resamples',
      'few_pairs',
    ]);
    assert.deepEqual(Object.keys(report.models[0]), [
      'model',
      'n_judge',
      'n_human',
      'n_matched',
      'judge_mean',
      'judge_ci95',
      'human_mean',
      'human_ci95',
      'judge_mean_all',
    ]);
  });
});

describe('the gap to the ceiling: judge kappa minus the humans, paired over transcripts with two scorers', () => {
  const scorers = ['al', 'bo'];
  const dataSet = (judgeScore: (human: number) => number, transcripts = 6) => {
    const judged: ScoreRow[] = [];
    const humans: HumanRow[] = [];
    for (let t = 0; t < transcripts; t++) {
      const score = t % 3;
      judged.push(judgeRow('m', `t${t}`, { x: judgeScore(score) }));
      for (const scorer of scorers) {
        humans.push(humanRow('m', `t${t}`, scorer, { x: score }));
      }
    }
    return analyse(judged, humans, rubricOf({ x: [0, 1, 2] }));
  };

  test('a judge that scores as the two agreeing scorers do, on 30: gap exactly 0, interval [0, 0], as good', () => {
    const gap = dataSet((score) => score, 30).dimensions[0]!.gap_to_ceiling!;
    assert.equal(gap.kappa_diff, 0);
    near(gap.ci95![0], 0, 'lower end'); // the root, within a rounding of 1 + delta to 1
    assert.equal(gap.ci95![1], 0);
    assert.equal(gap.verdict, 'as_good');
    assert.equal(gap.resamples, 30, 'its jackknife: one replicate a transcript');
  });

  test('a constant judge beside agreeing scorers, on 30: kappa 0 against 1, gap -1, below', () => {
    const gap = dataSet(() => 1, 30).dimensions[0]!.gap_to_ceiling!;
    assert.equal(gap.kappa_diff, -1);
    assert.deepEqual(gap.ci95, [-1, -1]);
    assert.equal(gap.verdict, 'below');
  });

  test('the same on 6 transcripts: under 30 transcripts scored by two, undetermined, "too few"', () => {
    const report = dataSet(() => 1);
    const gap = report.dimensions[0]!.gap_to_ceiling!;
    assert.deepEqual([gap.ci95, gap.verdict, gap.few_pairs], [[-1, -1], 'undetermined', true]);
    assert.equal(gap.reason, 'too_few');
    assert.equal(gap.transcripts_to_decide, 30, 'its spread 0: the least that gives a verdict');
    const ceiling = reportCells(report).tables[1]!.rows[1]!;
    assert.match(ceiling[3]!, /^-1\.00 \[too few\]/);
    assert.equal(ceiling[4], 'too few (30)');
  });

  test('two transcripts: a transcript left out leaves the ceiling undefined, so no interval, too few', () => {
    const gap = dataSet((score) => score, 2).dimensions[0]!.gap_to_ceiling!;
    assert.equal(gap.kappa_diff, 0);
    assert.deepEqual([gap.ci95, gap.verdict, gap.reason], [null, 'undetermined', 'too_few']);
    assert.deepEqual([gap.undefined_resamples, gap.resamples], [2, 2]);
  });

  test('one scorer per transcript: no ceiling, so no gap and no alpha among the humans', () => {
    const judged = [judgeRow('m', 't1', { x: 0 }), judgeRow('m', 't2', { x: 2 })];
    const humans = [humanRow('m', 't1', 'al', { x: 0 }), humanRow('m', 't2', 'al', { x: 1 })];
    const [dimension] = analyse(judged, humans, rubricOf({ x: [0, 1, 2] })).dimensions;
    assert.equal(dimension!.human_vs_human, null);
    assert.equal(dimension!.gap_to_ceiling, null);
    assert.deepEqual([dimension!.alpha.humans, dimension!.alpha.humans_ci95], [null, null]);
    assert.notEqual(dimension!.alpha.humans_and_judge, null);
  });
});

describe("leniency: the judge's mean minus the humans' over matched transcripts, in score units", () => {
  test('a judge one point above the mean of two scorers everywhere: 1, interval [1, 1], no reading on two', () => {
    const judged = [judgeRow('m', 't1', { x: 2 }), judgeRow('m', 't2', { x: 3 })];
    const humans = [
      humanRow('m', 't1', 'al', { x: 0 }),
      humanRow('m', 't1', 'bo', { x: 2 }),
      humanRow('m', 't2', 'al', { x: 2 }),
      humanRow('m', 't2', 'bo', { x: 2 }),
    ];
    const leniency = analyse(judged, humans, rubricOf({ x: [0, 1, 2, 3] })).dimensions[0]!.leniency;
    assert.deepEqual(leniency, { mean_diff: 1, ci95: [1, 1], reading: null });
  });
});

describe("Krippendorff's alpha, interval metric on positions, as NLTK computes it", () => {
  for (const [name, units] of Object.entries(ALPHA_CASES)) {
    test(`${name}: NLTK's figure`, () => {
      const expected = REFERENCE.alpha[name as keyof typeof REFERENCE.alpha];
      near(intervalAlpha(units, [0, 1, 2]), expected, name);
    });
  }

  test('perfect agreement is exactly 1; every score the same is 1 (as NLTK), no pairable value null', () => {
    assert.equal(intervalAlpha(ALPHA_CASES.perfect!, [0, 1, 2]), 1);
    assert.equal(
      intervalAlpha(
        [
          [2, 2],
          [2, 2, 2],
        ],
        [0, 1, 2],
      ),
      1,
    );
    assert.equal(intervalAlpha([[2], [1]], [0, 1, 2]), null);
  });

  test('humans who all give one score: alpha 1, and 1 in every resample', () => {
    const judged = [judgeRow('m', 't1', { x: 1 }), judgeRow('m', 't2', { x: 0 })];
    const humans = ['t1', 't2'].flatMap((task) => {
      return ['al', 'bo'].map((scorer) => humanRow('m', task, scorer, { x: 1 }));
    });
    const alpha = analyse(judged, humans, rubricOf({ x: [0, 1, 2] })).dimensions[0]!.alpha;
    assert.deepEqual([alpha.humans, alpha.humans_ci95], [1, [1, 1]]);
  });
});

describe('the reference figures come from the script beside them', () => {
  const script = path.join(import.meta.dirname, 'reference', 'analysis-reference.py');
  const available = referenceSkip() === false; // /usr/bin/python3 with nltk, scipy and sklearn

  test(
    'its output is the constants above (run only where NLTK, SciPy and scikit-learn are installed)',
    {
      skip: available ? false : 'no python3 with nltk, scipy and sklearn',
    },
    () => {
      const run = referenceRun(path.basename(script)); // as `python3 script` prints it
      assert.equal(run.status, 0, run.stderr);
      const printed = JSON.parse(run.stdout);
      assert.deepEqual(printed.alpha, REFERENCE.alpha);
      assert.deepEqual(printed.models, REFERENCE.models);
      for (const name of ['x', 'y'] as const) {
        const { per_model: perModel, ...figures } = printed.dimensions[name];
        const expected = REFERENCE.dimensions[name];
        assert.deepEqual(
          perModel.map((row: Record<string, unknown>) => [
            row.model,
            row.n,
            row.exact,
            row.within_one,
            row.kappa,
          ]),
          expected.per_model,
        );
        assert.deepEqual({ ...figures, per_model: expected.per_model }, expected);
      }
    },
  );
});

describe('no matched transcript: no figure, never a 0', () => {
  test('a judge row and a human row of different transcripts: n 0, exact and within one null, "-" in the table', () => {
    const rubric = rubricOf({ x: [0, 1, 2] });
    const judged = [judgeRow('m1', 'p1', { x: 2 })];
    const humans = [humanRow('m1', 'p2', 'alice', { x: 2 })];

    const report = analyse(judged, humans, rubric);
    const figures = report.dimensions[0]!.judge_vs_human;

    assert.equal(figures.n, 0);
    assert.equal(figures.exact, null);
    assert.equal(figures.within_one, null);
    assert.equal(figures.kappa, null);
    const row = reportCells(report).tables[0]!.rows[1]!;
    assert.deepEqual(row.slice(0, 5), ['x', '0', '-', '-', '-']);
  });
});

describe('judges against each other, juries and self-preference, against numpy and scikit-learn', () => {
  type JudgeSet = {
    tutor_families: Record<string, string>;
    judge_families: Record<string, string>;
    judges: Record<string, [string, string, number][]>;
    humans: [string, string, string, number][];
  };
  const set = JSON.parse(
    fs.readFileSync(path.join(import.meta.dirname, 'reference', 'judge-sets.json'), 'utf8'),
  ) as JudgeSet;
  const rubric = rubricOf({ x: [0, 1, 2, 3] });
  const humans = set.humans.map(([model, task, scorer, x]) => humanRow(model, task, scorer, { x }));
  const rowsOf = (name: string) => {
    return set.judges[name]!.map(([model, task, x]) => judgeRow(model, task, { x }));
  };
  const names = Object.keys(set.judges);
  // Printed by `/usr/bin/python3 test/reference/judges-reference.py`, copied here.
  const JUDGES = {
    against_first: {
      gpt: {
        kappa_diff: 0.040635064909403495,
        ci95: [-0.028426155531727115, 0.12466939962972756],
        exact: 0.5833333333333334,
        kappa: 0.8154657293497364,
        kappa_ci95: [0.7167807410903941, 0.8853046594982079],
      },
      llama: {
        kappa_diff: -0.014439272517875024,
        ci95: [-0.09442320738214949, 0.06921125863857136],
        exact: 0.4666666666666667,
        kappa: 0.7369546621043628,
        kappa_ci95: [0.6119402985074627, 0.8306451612903226],
      },
    },
    juries: {
      'opus,gpt': {
        kappa: 0.8654708520179373,
        kappa_ci95: [0.786215698787492, 0.924777117384844],
        leniency: -0.1,
        leniency_ci95: [-0.225, 0.03333333333333333],
        kappa_diff_from_first: 0.05542718389566659,
        exact_with_first: 0.8166666666666667,
      },
      'opus,gpt,llama': {
        kappa: 0.8510158013544018,
        kappa_ci95: [0.7610294117647058, 0.916285299698627],
        leniency: 0.15,
        leniency_ci95: [0.016666666666666666, 0.2916666666666667],
        kappa_diff_from_first: 0.040972133232131114,
        exact_with_first: 0.75,
      },
    },
    self_preference: {
      opus: {
        family: 'anthropic',
        own_n: 20,
        other_n: 40,
        own_tutors: 1,
        other_tutors: 2,
        own_leniency: 0.725,
        other_leniency: -0.2125,
        diff: 0.9375,
        ci95: null,
        verdict: 'undetermined',
        reason: ONE_OWN_TUTOR,
      },
      gpt: {
        family: 'openai',
        own_n: 20,
        other_n: 40,
        own_tutors: 1,
        other_tutors: 2,
        own_leniency: 0.075,
        other_leniency: 0.1625,
        diff: -0.08750000000000001,
        ci95: null,
        verdict: 'undetermined',
        reason: ONE_OWN_TUTOR,
      },
      llama: {
        family: 'meta',
        own_n: 20,
        other_n: 40,
        own_tutors: 1,
        other_tutors: 2,
        own_leniency: 0.3,
        other_leniency: 0.075,
        diff: 0.22499999999999998,
        ci95: null,
        verdict: 'undetermined',
        reason: ONE_OWN_TUTOR,
      },
    },
  };
  const tutorFamilies = new Map(Object.entries(set.tutor_families));
  const preferenceOf = (name: string, family: string | null, families = tutorFamilies) => {
    const audit = { judges: {}, samples: [], family };
    return analyse(rowsOf(name), humans, rubric, audit, { margin: 0.1, tutorFamilies: families })
      .self_preference;
  };

  test("each judge's kappa minus the first's, paired on the same resamples; its agreement with the first", () => {
    const against = judgesAgainstEachOther(names.map(rowsOf), humans, rubric);
    assert.deepEqual(against[0], [{ kappa_diff_from_first: null, agreement_with_first: null }]);
    names.slice(1).forEach((name, i) => {
      const expected = JUDGES.against_first[name as 'gpt' | 'llama'];
      const [figures] = against[i + 1]!;
      const diff = figures!.kappa_diff_from_first!;
      near(diff.kappa_diff, expected.kappa_diff, `${name} kappa diff`);
      near(diff.ci95![0], expected.ci95[0]!, `${name} diff lower`);
      near(diff.ci95![1], expected.ci95[1]!, `${name} diff upper`);
      const withFirst = figures!.agreement_with_first!;
      assert.equal(withFirst.n, 60);
      near(withFirst.exact, expected.exact, `${name} exact with the first`);
      near(withFirst.kappa, expected.kappa, `${name} kappa with the first`);
      near(withFirst.kappa_ci95![0], expected.kappa_ci95[0]!, `${name} kappa lower`);
      near(withFirst.kappa_ci95![1], expected.kappa_ci95[1]!, `${name} kappa upper`);
    });
  });

  for (const [name, expected] of Object.entries(JUDGES.self_preference)) {
    test(`self-preference of ${name} (${expected.family}): leniency on its own family's tutors minus on the others'; one tutor of its family, so undetermined`, () => {
      const preference = preferenceOf(name, set.judge_families[name]!)!;
      assert.equal(preference.family, expected.family);
      const [figures] = preference.dimensions;
      assert.deepEqual(
        [
          figures!.name,
          figures!.own_n,
          figures!.other_n,
          figures!.own_tutors,
          figures!.other_tutors,
        ],
        ['x', expected.own_n, expected.other_n, expected.own_tutors, expected.other_tutors],
      );
      near(figures!.own_leniency, expected.own_leniency, 'own leniency');
      near(figures!.other_leniency, expected.other_leniency, 'other leniency');
      near(figures!.diff, expected.diff, 'diff');
      assert.deepEqual(
        [figures!.ci95, figures!.verdict, figures!.reason],
        [expected.ci95, expected.verdict, expected.reason],
      );
    });
  }

  test('self-preference is null without the judge family, with no tutor of it, or with none other', () => {
    assert.equal(preferenceOf('opus', null), null);
    assert.equal(preferenceOf('opus', 'mistral'), null);
    const allAnthropic = new Map([...tutorFamilies.keys()].map((tutor) => [tutor, 'anthropic']));
    assert.equal(preferenceOf('opus', 'anthropic', allAnthropic), null);
  });

  const runOf = (name: string) => {
    return {
      judge: { name, scores: `${name}.csv`, log: '' },
      rows: rowsOf(name),
      audit: noAudit(),
    };
  };
  for (const [members, expected] of Object.entries(JUDGES.juries)) {
    test(`a jury of ${members.split(',').length} (${members}): the median, lower middle of an even count, and every figure a judge gets`, () => {
      const runs = members.split(',').map(runOf);
      const jury = juryOf(runs, rubric);
      assert.deepEqual(
        jury.members!.map((member) => member.judge.name),
        members.split(','),
      );
      const comparison = compareJudges([...runs, jury], humans, rubric);
      const entry = comparison.at(-1)!;
      assert.equal(entry.name, 'jury');
      assert.deepEqual((entry as { members?: string[] }).members, members.split(','));
      const [figures] = entry.dimensions;
      near(figures!.kappa, expected.kappa, 'jury kappa');
      near(figures!.kappa_ci95![0], expected.kappa_ci95[0]!, 'jury kappa lower');
      near(figures!.kappa_ci95![1], expected.kappa_ci95[1]!, 'jury kappa upper');
      near(figures!.leniency.mean_diff, expected.leniency, 'jury leniency');
      near(figures!.leniency.ci95![0], expected.leniency_ci95[0]!, 'jury leniency lower');
      near(figures!.leniency.ci95![1], expected.leniency_ci95[1]!, 'jury leniency upper');
      near(figures!.kappa_diff_from_first!.kappa_diff, expected.kappa_diff_from_first, 'vs first');
      near(figures!.agreement_with_first!.exact, expected.exact_with_first, 'exact with first');
      assert.ok(figures!.gap_to_ceiling !== null, 'the gap to the ceiling too');
    });
  }

  const available = fs.existsSync('/usr/bin/python3');
  test(
    'the constants above are what the script prints (where numpy and scikit-learn are installed)',
    { skip: available ? false : 'no /usr/bin/python3' },
    () => {
      const script = path.join(import.meta.dirname, 'reference', 'judges-reference.py');
      const run = referenceRun(path.basename(script)); // as `python3 script` prints it
      assert.equal(run.status, 0, run.stderr);
      assert.deepEqual(JSON.parse(run.stdout), JUDGES);
    },
  );
});
