// The tutors compared through the people's sample (report/ppi.ts): PPI++'s mean against ppi_py's
// (written again in Python in test/reference/ppi-reference.py), the report's interval, the
// differences and Holm's procedure against the same script, and small cases by hand.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { referenceRun, referenceSkip } from './python-reference.ts';

const { holmRejects, ppiMean, tutorDifferences, tutorMean, tutorRanking } =
  await import('../report/ppi.ts');
type PpiData = import('../report/ppi.ts').PpiData;
type TutorDifference = import('../report/ppi.ts').TutorDifference;

const near = (actual: number | null | undefined, expected: number, what: string) => {
  assert.ok(
    actual !== null && actual !== undefined && Math.abs(actual - expected) < 1e-9,
    `${what}: ${actual}, expected ${expected}`,
  );
};

const nearPair = (actual: readonly number[] | null, expected: number[], what: string) => {
  assert.ok(actual !== null, `${what}: null, expected ${expected}`);
  near(actual[0], expected[0]!, `${what} lower`);
  near(actual[1], expected[1]!, `${what} upper`);
};

type DataSet = {
  name: string;
  human: number[];
  judge: number[];
  judge_unlabeled: number[];
  weights?: number[];
  weights_unlabeled?: number[];
  scale: [number, number];
};

const SETS_FILE = path.join(import.meta.dirname, 'reference', 'ppi-sets.json');
const SETS = JSON.parse(fs.readFileSync(SETS_FILE, 'utf8')) as {
  sets: DataSet[];
  tutors: Record<string, DataSet>;
};

function dataOf(set: DataSet): PpiData {
  return {
    human: set.human,
    judge: set.judge,
    judgeUnlabeled: set.judge_unlabeled,
    weights: set.weights,
    weightsUnlabeled: set.weights_unlabeled,
  };
}

const scaleOf = (set: DataSet) => ({ low: set.scale[0], high: set.scale[1] });

describe('PPI++ by hand', () => {
  const data: PpiData = { human: [1, 2, 0, 2], judge: [2, 2, 1, 2], judgeUnlabeled: [2, 1, 2] };

  test('lambda 0 is the people mean; lambda 1 is the judge mean over the rest plus its error', () => {
    near(ppiMean(data, 0).estimate, 5 / 4, 'lambda 0');
    near(ppiMean(data, 1).estimate, 5 / 3 + (1 + 2 + 0 + 2 - 7) / 4, 'lambda 1');
  });

  test('a judge that gives one score everywhere is tuned to lambda 0', () => {
    const flat = { human: [0, 1, 2], judge: [1, 1, 1], judgeUnlabeled: [1, 1, 1, 1] };
    assert.equal(ppiMean(flat).lambda, 0);
  });

  test('under two human-scored transcripts, or none judged: no estimate, and why', () => {
    const one = tutorMean({ human: [1], judge: [2], judgeUnlabeled: [2, 2] }, { low: 0, high: 2 });
    assert.equal(one.figures.estimate, null);
    assert.match(one.figures.reason!, /1 human-scored transcript\(s\).*fewer than 2/);
    assert.equal(one.figures.judge_only_mean, 2);
    const none = tutorMean({ human: [], judge: [], judgeUnlabeled: [] }, { low: 0, high: 2 });
    assert.equal(none.figures.reason, 'no judged transcript');
  });

  test('three agreeing transcripts still give an interval wider than a point', () => {
    const same = { human: [1, 1, 1], judge: [1, 1, 1], judgeUnlabeled: [1, 2, 1, 0] };
    const figures = tutorMean(same, { low: 0, high: 2 }).figures;
    assert.ok(figures.ci95![1] - figures.ci95![0] > 0.5, `${figures.ci95}`);
  });

  test('Holm: step down from the smallest p, stop at the first kept', () => {
    assert.deepEqual(holmRejects([0.01, 0.04, 0.03]), [true, false, false]);
    assert.deepEqual(holmRejects([0.01, 0.02, 0.04]), [true, true, true]);
    assert.deepEqual(holmRejects([0.2, 0.001]), [false, true]);
  });

  test('the ranking marks an order not established', () => {
    const pair = (a: string, b: string, established: boolean): TutorDifference => {
      return { a, b, dimension: 'x', diff: 0, ci95: [0, 0], p: 0, established };
    };
    const differences = [pair('a', 'b', true), pair('a', 'c', true), pair('b', 'c', false)];
    const estimates = [
      { model: 'c', estimate: 0.5 },
      { model: 'a', estimate: 1.9 },
      { model: 'b', estimate: 0.7 },
      { model: 'd', estimate: null },
    ];
    const ranking = tutorRanking(estimates, differences);
    assert.deepEqual(ranking, { order: ['a', 'b', 'c'], established: [true, false] });
  });
});

describe('against ppi_py and the long way in Python (test/reference/ppi-reference.py)', () => {
  const skip = referenceSkip();
  const options = { skip: skip === false ? false : skip };

  test('each data set: ppi_py estimate, lambda and interval; the report figures', options, () => {
    const run = referenceRun('ppi-reference.py');
    assert.equal(run.status, 0, run.stderr);
    const reference = JSON.parse(run.stdout) as {
      sets: {
        name: string;
        ppi_py: { estimate: number; lambda: number; ci95: number[] };
        ppi_py_fixed: { estimate: number; ci95: number[] };
        report: Record<string, number | number[] | boolean>;
      }[];
    };
    assert.equal(reference.sets.length, SETS.sets.length);
    SETS.sets.forEach((set, i) => {
      const expected = reference.sets[i]!;
      const data = dataOf(set);
      const tuned = ppiMean(data);
      near(tuned.estimate, expected.ppi_py.estimate, `${set.name}: estimate`);
      near(tuned.lambda, expected.ppi_py.lambda, `${set.name}: lambda`);
      nearPair(tuned.ci95, expected.ppi_py.ci95, `${set.name}: ppi_py interval`);
      const fixed = ppiMean(data, 0.3);
      near(fixed.estimate, expected.ppi_py_fixed.estimate, `${set.name}: estimate at lambda 0.3`);
      nearPair(fixed.ci95, expected.ppi_py_fixed.ci95, `${set.name}: interval at lambda 0.3`);

      const figures = tutorMean(data, scaleOf(set)).figures;
      const report = expected.report;
      for (const key of ['estimate', 'lambda', 'lambda_tuned', 'df', 'width_ratio'] as const) {
        near(figures[key], report[key] as number, `${set.name}: ${key}`);
      }
      for (const key of ['human_only_mean', 'judge_only_mean'] as const) {
        near(figures[key], report[key] as number, `${set.name}: ${key}`);
      }
      for (const key of ['ci95', 'human_only_ci95', 'judge_only_ci95'] as const) {
        nearPair(figures[key], report[key] as number[], `${set.name}: ${key}`);
      }
      assert.equal(figures.judge_biased, report.judge_biased, `${set.name}: judge_biased`);
    });
  });

  test('three tutors: their differences, intervals and Holm', options, () => {
    const run = referenceRun('ppi-reference.py');
    const reference = JSON.parse(run.stdout) as {
      differences: { a: string; b: string; diff: number; ci95: number[]; p: number }[] &
        { established: boolean }[];
    };
    const tutors = Object.entries(SETS.tutors).map(([model, set]) => {
      return { model, interval: tutorMean(dataOf(set), scaleOf(set)).interval };
    });
    const differences = tutorDifferences('x', tutors);
    assert.equal(differences.length, reference.differences.length);
    differences.forEach((difference, i) => {
      const expected = reference.differences[i]!;
      assert.deepEqual([difference.a, difference.b], [expected.a, expected.b]);
      near(difference.diff, expected.diff, `${difference.a} - ${difference.b}`);
      nearPair(difference.ci95, expected.ci95, `${difference.a} - ${difference.b}: interval`);
      near(difference.p, expected.p, `${difference.a} - ${difference.b}: p`);
      assert.equal(difference.established, expected.established);
    });
  });
});
