// The analysis's statistics (report.ts), checked against small cases computed by hand.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

const { agreement, bootstrapCi, confusionMatrix, quadraticWeightedKappa, spearman } = await import('../report.ts');

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
