// Self-preference with the tutor as the unit (report/self-preference.ts) against the same interval
// computed the long way in Python (test/reference/tutor_interval.py: the CR2 sandwich with SciPy's
// matrix square roots, the degrees of freedom by polarization, SciPy's t) on
// test/reference/self-preference-sets.json, through analyse(); and its verdicts' edges.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { referenceRun } from './python-reference.ts';

const { analyse } = await import('../report/analysis.ts');
const { NO_SPREAD, ONE_OWN_TUTOR, selfPreferenceFigures } =
  await import('../report/self-preference.ts');
type Rubric = import('../run-judge.ts').Rubric;

type PreferenceSet = {
  name: string;
  judge_family: string;
  tutor_families: Record<string, string>;
  judge: [string, string, number][];
  humans: [string, string, string, number][];
};
const SETS = (
  JSON.parse(
    fs.readFileSync(
      path.join(import.meta.dirname, 'reference', 'self-preference-sets.json'),
      'utf8',
    ),
  ) as { sets: PreferenceSet[] }
).sets;

// Printed by `/usr/bin/python3 test/reference/self-preference-reference.py` (SciPy 1.10.1), copied.
const REFERENCE = [
  {
    own_n: 30,
    other_n: 30,
    own_tutors: 3,
    other_tutors: 3,
    own_leniency: 0.38333333333333336,
    other_leniency: -0.2,
    diff: 0.5833333333333334,
    ci95: [0.07119517838110556, 1.0954714882855612],
    verdict: 'favours_own',
    reason: null,
  },
  {
    own_n: 28,
    other_n: 18,
    own_tutors: 3,
    other_tutors: 2,
    own_leniency: 0.10714285714285714,
    other_leniency: 0.027777777777777776,
    diff: 0.07936507936507936,
    ci95: [-1.673816680073799, 1.8325468388039576],
    verdict: 'none_shown',
    reason: null,
  },
  {
    own_n: 16,
    other_n: 8,
    own_tutors: 2,
    other_tutors: 1,
    own_leniency: 0.0,
    other_leniency: -0.1875,
    diff: 0.1875,
    ci95: null,
    verdict: 'undetermined',
    reason:
      "one tutor of other families: the comparison cannot be told from the judge's leniency toward that tutor",
  },
];

const near = (actual: number | null, expected: number, what: string) => {
  assert.ok(
    actual !== null && Math.abs(actual - expected) < 1e-9,
    `${what}: ${actual}, expected ${expected}`,
  );
};

const RUBRIC = {
  dimensions: [{ name: 'x', description: 'x', scores: { 0: 'a', 1: 'b', 2: 'c', 3: 'd' } }],
} as unknown as Rubric;

function preferenceOf(set: PreferenceSet) {
  const judged = set.judge.map(([model, task_id, x]) => ({ model, task_id, scores: { x } }));
  const humans = set.humans.map(([model, task_id, scorer, x]) => {
    return { model, task_id, scorer, scores: { x }, notes: '' };
  });
  const audit = { judges: {}, samples: [], family: set.judge_family };
  const tutorFamilies = new Map(Object.entries(set.tutor_families));
  return analyse(judged, humans, RUBRIC, audit, { margin: 0.1, tutorFamilies }).self_preference;
}

describe('self-preference, the tutor the unit: against the interval computed the long way', () => {
  SETS.forEach((set, i) => {
    test(set.name, () => {
      const expected = REFERENCE[i]!;
      const figures = preferenceOf(set)!.dimensions[0]!;
      assert.deepEqual(
        [figures.own_n, figures.other_n, figures.own_tutors, figures.other_tutors],
        [expected.own_n, expected.other_n, expected.own_tutors, expected.other_tutors],
      );
      near(figures.own_leniency, expected.own_leniency, 'own leniency');
      near(figures.other_leniency, expected.other_leniency, 'other leniency');
      near(figures.diff, expected.diff, 'diff');
      if (expected.ci95 === null) {
        assert.equal(figures.ci95, null);
      } else {
        near(figures.ci95![0], expected.ci95[0]!, 'lower end');
        near(figures.ci95![1], expected.ci95[1]!, 'upper end');
      }
      assert.deepEqual([figures.verdict, figures.reason], [expected.verdict, expected.reason]);
    });
  });

  const available = fs.existsSync('/usr/bin/python3');
  test(
    'the constants above are what the script prints (where SciPy is installed)',
    { skip: available ? false : 'no /usr/bin/python3' },
    () => {
      const run = referenceRun('self-preference-reference.py');
      assert.equal(run.status, 0, run.stderr);
      assert.deepEqual(JSON.parse(run.stdout), REFERENCE);
    },
  );
});

describe("self-preference's verdicts at their edges", () => {
  const unit = (tutor: string, own: boolean, leniency: number) => ({ tutor, own, leniency });

  test("tutors of equal sizes: Welch's t interval on the tutors' means", () => {
    // Tutors' means: own 1, 0.5, 0.6 (s^2 = 0.07), other 0, 0.2, -0.1 (s^2 = 0.07 / 3): the
    // difference's variance 0.07 / 3 + 0.07 / 9, Welch's df (0.07/3 + 0.07/9)^2 / ((0.07/3)^2 / 2 +
    // (0.07/9)^2 / 2) = 3.2, whose 0.975 quantile is 3.0728289297133666 by SciPy.
    const means = { a: 1, b: 0.5, c: 0.6, d: 0, e: 0.2, f: -0.1 };
    const units = Object.entries(means).flatMap(([tutor, mean]) => {
      const own = 'abc'.includes(tutor);
      return [unit(tutor, own, mean - 0.5), unit(tutor, own, mean + 0.5)];
    });
    const figures = selfPreferenceFigures(units);
    const diff = 0.7 - 1 / 30;
    near(figures.diff, diff, 'diff');
    const half = 3.0728289297133666 * Math.sqrt(0.07 / 3 + 0.07 / 9);
    near(figures.ci95![0], diff - half, 'lower end');
    near(figures.ci95![1], diff + half, 'upper end');
    assert.equal(figures.verdict, 'favours_own');
  });

  test('one tutor of the family: undetermined, the reason said; an interval holding 0: none shown', () => {
    const one = selfPreferenceFigures([
      unit('a', true, 2),
      unit('a', true, 1),
      unit('d', false, 0),
      unit('e', false, 0.5),
    ]);
    assert.deepEqual([one.own_tutors, one.other_tutors, one.ci95], [1, 2, null]);
    assert.deepEqual([one.verdict, one.reason], ['undetermined', ONE_OWN_TUTOR]);

    const none = selfPreferenceFigures([
      unit('a', true, 1),
      unit('b', true, -1),
      unit('d', false, 0),
      unit('e', false, 0.5),
    ]);
    assert.deepEqual([none.verdict, none.reason], ['none_shown', null]);
  });

  test("no spread between either side's tutors: undetermined, not certain", () => {
    const flat = selfPreferenceFigures([
      unit('a', true, 1),
      unit('b', true, 1),
      unit('d', false, 0),
      unit('e', false, 0),
    ]);
    assert.deepEqual([flat.diff, flat.ci95, flat.verdict], [1, null, 'undetermined']);
    assert.equal(flat.reason, NO_SPREAD);
  });
});
