// The alternative annotator test (report/alt-test.ts) against the authors' procedure, their
// notebook's in Python with SciPy (test/reference/alt-test-reference.py) on the data sets of
// test/reference/alt-test-sets.json: 3 to 5 scorers, ties, missing cells, scorers under 30
// transcripts and under 15 (not tested), a set that passes, sets that cannot run. Every p-value,
// winning rate and advantage probability to 1e-9; also through analyse(), from the rows.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { referenceRun } from './python-reference.ts';

const { altTest, altTestAll, altTestPlan, benjaminiYekutieli, tTestBelow } =
  await import('../report/alt-test.ts');
const { analyse } = await import('../report/analysis.ts');
type AltTest = import('../report/alt-test.ts').AltTest;
type Rubric = import('../run-judge.ts').Rubric;

type AltSet = {
  name: string;
  epsilon: number;
  labels: number[];
  judge: [string, string, number][];
  humans: [string, string, string, number][];
};
const SETS = (
  JSON.parse(
    fs.readFileSync(path.join(import.meta.dirname, 'reference', 'alt-test-sets.json'), 'utf8'),
  ) as { sets: AltSet[] }
).sets;

// Printed by `/usr/bin/python3 test/reference/alt-test-reference.py` (SciPy 1.10.1), copied here.
const REFERENCE = {
  sets: [
    {
      scorers: 3,
      winning_rate: 0.3333333333333333,
      passes: false,
      advantage_probability: 0.8250000000000001,
      per_scorer: [
        {
          scorer: 'al',
          n: 40,
          rho_judge: 0.825,
          rho_scorer: 0.8,
          p: 0.040926154699188776,
          rejected: false,
        },
        {
          scorer: 'bo',
          n: 40,
          rho_judge: 0.8,
          rho_scorer: 0.9,
          p: 0.2826809208646191,
          rejected: false,
        },
        {
          scorer: 'cy',
          n: 40,
          rho_judge: 0.85,
          rho_scorer: 0.75,
          p: 0.008366892373598915,
          rejected: true,
        },
      ],
    },
    {
      scorers: 3,
      winning_rate: 0.0,
      passes: false,
      advantage_probability: 0.8664972060647105,
      per_scorer: [
        {
          scorer: 'al',
          n: 58,
          rho_judge: 0.8620689655172413,
          rho_scorer: 0.8103448275862069,
          p: 0.024607985778006353,
          rejected: false,
        },
        {
          scorer: 'bo',
          n: 59,
          rho_judge: 0.864406779661017,
          rho_scorer: 0.8813559322033898,
          p: 0.10723509750157949,
          rejected: false,
        },
        {
          scorer: 'cy',
          n: 63,
          rho_judge: 0.873015873015873,
          rho_scorer: 0.873015873015873,
          p: 0.06163615873958592,
          rejected: false,
        },
        { scorer: 'di', n: 12, rho_judge: 1.0, rho_scorer: 1.0, p: null, rejected: false },
      ],
    },
    {
      scorers: 5,
      winning_rate: 0.0,
      passes: false,
      advantage_probability: 0.7223295034510395,
      per_scorer: [
        {
          scorer: 'al',
          n: 31,
          rho_judge: 0.5806451612903226,
          rho_scorer: 0.8709677419354839,
          p: 0.763325297230915,
          rejected: false,
        },
        {
          scorer: 'bo',
          n: 29,
          rho_judge: 0.8275862068965517,
          rho_scorer: 0.6896551724137931,
          p: 0.0069257123399399795,
          rejected: false,
        },
        {
          scorer: 'cy',
          n: 28,
          rho_judge: 0.7142857142857143,
          rho_scorer: 0.8571428571428571,
          p: 0.32291552961836656,
          rejected: false,
        },
        {
          scorer: 'di',
          n: 24,
          rho_judge: 0.75,
          rho_scorer: 0.7916666666666666,
          p: 0.1363559261684155,
          rejected: false,
        },
        {
          scorer: 'ed',
          n: 23,
          rho_judge: 0.7391304347826086,
          rho_scorer: 0.9130434782608695,
          p: 0.4150563144711664,
          rejected: false,
        },
      ],
    },
    {
      scorers: 0,
      winning_rate: null,
      passes: null,
      advantage_probability: null,
      per_scorer: [
        { scorer: 'al', n: 10, rho_judge: 0.9, rho_scorer: 0.9, p: null, rejected: false },
        { scorer: 'bo', n: 10, rho_judge: 0.9, rho_scorer: 1.0, p: null, rejected: false },
        { scorer: 'cy', n: 10, rho_judge: 0.9, rho_scorer: 1.0, p: null, rejected: false },
      ],
    },
    {
      scorers: 3,
      winning_rate: 0.0,
      passes: false,
      advantage_probability: 0.45925925925925926,
      per_scorer: [
        {
          scorer: 'al',
          n: 45,
          rho_judge: 0.4444444444444444,
          rho_scorer: 0.9777777777777777,
          p: 0.9999868852469745,
          rejected: false,
        },
        {
          scorer: 'bo',
          n: 45,
          rho_judge: 0.4444444444444444,
          rho_scorer: 1.0,
          p: 0.9999987837691279,
          rejected: false,
        },
        {
          scorer: 'cy',
          n: 45,
          rho_judge: 0.4888888888888889,
          rho_scorer: 1.0,
          p: 0.9999904435641775,
          rejected: false,
        },
      ],
    },
    {
      scorers: 4,
      winning_rate: 1.0,
      passes: true,
      advantage_probability: 0.9596689121461619,
      per_scorer: [
        {
          scorer: 'al',
          n: 46,
          rho_judge: 0.9782608695652174,
          rho_scorer: 0.6304347826086957,
          p: 3.6684871965734373e-8,
          rejected: true,
        },
        {
          scorer: 'bo',
          n: 42,
          rho_judge: 0.9523809523809523,
          rho_scorer: 0.7142857142857143,
          p: 1.3535453674989047e-5,
          rejected: true,
        },
        {
          scorer: 'cy',
          n: 44,
          rho_judge: 0.9545454545454546,
          rho_scorer: 0.6590909090909091,
          p: 1.643547428581939e-6,
          rejected: true,
        },
        {
          scorer: 'di',
          n: 43,
          rho_judge: 0.9534883720930233,
          rho_scorer: 0.6511627906976745,
          p: 1.890690030998497e-6,
          rejected: true,
        },
      ],
    },
    {
      scorers: 2,
      winning_rate: null,
      passes: null,
      advantage_probability: null,
      per_scorer: [
        {
          scorer: 'al',
          n: 20,
          rho_judge: 0.9,
          rho_scorer: 0.6,
          p: 0.0031981141512261047,
          rejected: false,
        },
        {
          scorer: 'bo',
          n: 20,
          rho_judge: 0.9,
          rho_scorer: 0.75,
          p: 0.016988877641558417,
          rejected: false,
        },
      ],
    },
  ],
  together: [false, false, false, null, false, true, null],
};

const near = (actual: number | null, expected: number, what: string) => {
  assert.ok(
    actual !== null && Math.abs(actual - expected) < 1e-9,
    `${what}: ${actual}, expected ${expected}`,
  );
};

/** A set's transcripts as the test reads them: positions on its scale. */
function transcriptsOf(set: AltSet) {
  const positionOf = (score: number) => set.labels.indexOf(score);
  return set.judge.map(([model, task, score]) => {
    const scorers = set.humans
      .filter((row) => row[0] === model && row[1] === task)
      .map((row) => ({ scorer: row[2], position: positionOf(row[3]) }));
    return { judge: positionOf(score), scorers };
  });
}

/** The test's figures against the reference's. */
function matches(result: AltTest, expected: (typeof REFERENCE.sets)[number], name: string) {
  assert.equal(result.scorers, expected.scorers, `${name}: scorers`);
  if (expected.winning_rate === null) {
    assert.deepEqual(
      [result.winning_rate, result.passes, result.advantage_probability],
      [null, null, null],
    );
    assert.ok(result.reason !== null, `${name}: a reason`);
  } else {
    assert.equal(result.reason, null, `${name}: no reason`);
    near(result.winning_rate, expected.winning_rate, `${name}: winning rate`);
    assert.equal(result.passes, expected.passes, `${name}: passes`);
    near(result.advantage_probability, expected.advantage_probability!, `${name}: advantage`);
  }
  assert.equal(result.per_scorer.length, expected.per_scorer.length);
  result.per_scorer.forEach((entry, i) => {
    const want = expected.per_scorer[i]!;
    const who = `${name}, ${want.scorer}`;
    assert.deepEqual([entry.scorer, entry.n], [want.scorer, want.n], who);
    near(entry.rho_judge, want.rho_judge, `${who}: rho_judge`);
    near(entry.rho_scorer, want.rho_scorer, `${who}: rho_scorer`);
    if (want.p === null) {
      assert.equal(entry.p, null, `${who}: not tested`);
    } else {
      near(entry.p, want.p, `${who}: p`);
    }
    assert.equal(entry.rejected, want.rejected, `${who}: rejected`);
  });
}

describe('the alternative annotator test, against the authors’ procedure in SciPy', () => {
  SETS.forEach((set, i) => {
    test(`${set.name} (epsilon ${set.epsilon})`, () => {
      const result = altTest(transcriptsOf(set), set.epsilon);
      assert.equal(result.epsilon, set.epsilon);
      matches(result, REFERENCE.sets[i]!, set.name);
    });
  });

  test('every set tested together: Benjamini-Yekutieli over all their scorers', () => {
    const dimensions = SETS.map((set) => {
      return { name: set.name, alt_test: altTest(transcriptsOf(set), set.epsilon) };
    });
    const together = altTestAll(dimensions, 0.15);
    const passing = SETS.filter((_, i) => REFERENCE.together[i] === true).map((set) => set.name);
    const failing = SETS.filter((_, i) => REFERENCE.together[i] === false).map((set) => set.name);
    const untested = SETS.filter((_, i) => REFERENCE.together[i] === null).map((set) => set.name);
    assert.deepEqual(together.passing, passing);
    assert.deepEqual(together.not_passing, failing);
    assert.deepEqual(together.untested, untested);
    assert.equal(together.tests, 18);
    assert.equal(together.passes_all, false);
  });

  test('through analyse(): the rows, their labels as positions, each dimension its test', () => {
    SETS.forEach((set, i) => {
      const levels = Object.fromEntries(set.labels.map((label) => [String(label), 'a level']));
      const rubric = { dimensions: [{ name: 'x', description: 'x', scores: levels }] } as Rubric;
      const judged = set.judge.map(([model, task_id, x]) => ({ model, task_id, scores: { x } }));
      const humans = set.humans.map(([model, task_id, scorer, x]) => {
        return { model, task_id, scorer, scores: { x }, notes: '' };
      });
      const report = analyse(judged, humans, rubric, undefined, {
        margin: 0.1,
        epsilon: set.epsilon,
      });
      matches(report.dimensions[0]!.alt_test, REFERENCE.sets[i]!, `${set.name} via analyse`);
      const passes = REFERENCE.sets[i]!.passes === true;
      assert.deepEqual(report.alt_test_all.passes_all, passes, `${set.name}: passes_all`);
    });
  });

  const available = fs.existsSync('/usr/bin/python3');
  test(
    'the constants above are what the script prints (where SciPy is installed)',
    { skip: available ? false : 'no /usr/bin/python3' },
    () => {
      const run = referenceRun('alt-test-reference.py');
      assert.equal(run.status, 0, run.stderr);
      assert.deepEqual(JSON.parse(run.stdout), REFERENCE);
    },
  );
});

describe("the alternative annotator test's parts", () => {
  test('the t-test with no spread: below epsilon p 0, above it p 1, at it no evidence (p 1)', () => {
    assert.equal(tTestBelow([0, 0, 0, 0], 0.15), 0);
    assert.equal(tTestBelow([1, 1, 1, 1], 0.15), 1);
    assert.equal(tTestBelow([0, 0, 0], 0), 1);
    assert.equal(tTestBelow([0], 0.15), 1);
  });

  test('Benjamini-Yekutieli: the largest rank under its threshold, and every smaller p with it', () => {
    // m = 4, H_4 = 25/12: thresholds k/4 x 0.05 x 12/25 = 0.006, 0.012, 0.018, 0.024.
    assert.deepEqual(benjaminiYekutieli([0.02, 0.001, 0.013, 0.5], 0.05), [
      false,
      true,
      false,
      false,
    ]);
    assert.deepEqual(benjaminiYekutieli([0.017, 0.001, 0.013, 0.5], 0.05), [
      true,
      true,
      true,
      false,
    ]);
    assert.deepEqual(benjaminiYekutieli([0.3, 0.2], 0.05), [false, false]);
    assert.deepEqual(benjaminiYekutieli([], 0.05), []);
  });

  test('fewer than three scorers on 15 transcripts another scored too: no figures, the reason', () => {
    const scorers = (positions: number[]) => {
      return positions.map((position, i) => ({ scorer: ['al', 'bo', 'cy'][i]!, position }));
    };
    // al and bo on 15, cy on 14: cy listed, its figures said, but not tested.
    const transcripts = Array.from({ length: 15 }, (_, i) => {
      return { judge: 1, scorers: scorers(i < 14 ? [1, 2, 1] : [1, 2]) };
    });
    const result = altTest(transcripts);
    assert.equal(result.scorers, 2);
    assert.deepEqual(
      result.per_scorer.map((entry) => [entry.scorer, entry.n, entry.p === null]),
      [
        ['al', 15, false],
        ['bo', 15, false],
        ['cy', 14, true],
      ],
    );
    assert.equal(result.winning_rate, null);
    assert.equal(
      result.reason,
      '2 of the 3 scorer(s) on 15 or more transcripts another scored too: the test needs 3 or ' +
        'more, each on 15 or more',
    );
    assert.match(altTest([]).reason!, /^no transcript scored by two or more people/);
  });

  test("the plan's line: what it gives the test, and what would make it run", () => {
    const plan = (counts: number[]) => {
      return counts.map((count, i) => ({ scorer: ['al', 'bo', 'cy', 'di'][i]!, count }));
    };
    assert.equal(
      altTestPlan(plan([40, 40]), 2, 40, 100),
      'alternative annotator test: cannot run: 2 scorer(s), it needs 3 or more: name 1 more in ' +
        '--scorers',
    );
    assert.match(
      altTestPlan(plan([20, 20, 20]), 1, 60, 100),
      /cannot run: --overlap 1: .*give --overlap 2 or more$/,
    );
    // 3 scorers, overlap 2: 15 each takes 23 transcripts; 30 each takes 45.
    assert.equal(
      altTestPlan(plan([10, 10, 10]), 2, 15, 100),
      'alternative annotator test: cannot run: a scorer is tested on 15 transcripts or more, and ' +
        '0 of 3 are (al 10, bo 10, cy 10); --sample 23 or more gives each about 15',
    );
    assert.equal(
      altTestPlan(plan([20, 20, 20]), 2, 30, 100),
      'alternative annotator test: can run, with scorers under the 30 transcripts its authors ask ' +
        'for (al 20, bo 20, cy 20), so less likely to pass; --sample 45 or more gives each about 30',
    );
    assert.match(
      altTestPlan(plan([20, 20, 20]), 2, 30, 40),
      /all 40 transcripts with --overlap 3 give each about 30$/,
    );
    assert.equal(
      altTestPlan(plan([30, 31, 30]), 2, 46, 100),
      'alternative annotator test: can run: 3 scorers, each on 30 or more transcripts another ' +
        'scored too',
    );
  });
});
