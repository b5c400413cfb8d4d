// report/distributions.ts against SciPy: Student's t CDF and quantile, ln Gamma, the regularized
// incomplete beta, each to 1e-9 (test/reference/distributions-reference.py).
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { describe, test } from 'node:test';
import { referenceRun } from './python-reference.ts';

const { logGamma, regularizedBeta, studentTCdf, studentTQuantile } =
  await import('../report/distributions.ts');

// Printed by `/usr/bin/python3 test/reference/distributions-reference.py` (SciPy 1.10.1), copied.
const REFERENCE = {
  cdf: [
    [-2.1, 29, 0.022270979018145235],
    [0.3, 4, 0.6104392858612702],
    [-0.7, 2.37, 0.2731593426925207],
    [5, 1, 0.9371670418109989],
    [-12, 30, 2.7900927075996303e-13],
    [1.96, 1000, 0.9748634075221256],
    [-3.3, 7.5, 0.005945817281130586],
    [0, 3, 0.5],
  ],
  quantile: [
    [0.975, 4, 2.7764451051977987],
    [0.975, 29, 2.045229642132703],
    [0.025, 12, -2.178812829663418],
    [0.999, 29, 3.396240288341516],
    [0.95, 60, 1.6706488646505926],
    [0.975, 10000, 1.960201239890626],
  ],
  log_gamma: [
    [0.5, 0.5723649429247],
    [1, 0.0],
    [10.3, 13.482036786138359],
    [171.2, 707.60092684767],
    [0.01, 4.599479878042022],
  ],
  beta: [
    [0.3, 2.5, 0.5, 0.01892712407194565],
    [0.9, 14.5, 0.5, 0.08307466551442909],
    [0.05, 1, 1, 0.05],
    [0.5, 30, 40, 0.8857998873233516],
  ],
};

const near = (actual: number, expected: number, what: string) => {
  assert.ok(Math.abs(actual - expected) < 1e-9, `${what}: ${actual}, expected ${expected}`);
};

describe("Student's t and the functions under it, against SciPy", () => {
  test('the CDF at whole and fractional degrees of freedom, in both tails', () => {
    for (const [t, df, expected] of REFERENCE.cdf) {
      near(studentTCdf(t!, df!), expected!, `P(T_${df} <= ${t})`);
    }
    assert.equal(studentTCdf(Infinity, 3), 1);
    assert.equal(studentTCdf(-Infinity, 3), 0);
    assert.ok(Number.isNaN(studentTCdf(1, 0)));
  });

  test('the quantile, and that it inverts the CDF', () => {
    for (const [p, df, expected] of REFERENCE.quantile) {
      const quantile = studentTQuantile(p!, df!);
      near(quantile, expected!, `the ${p} quantile of T_${df}`);
      near(studentTCdf(quantile, df!), p!, `the CDF at the ${p} quantile of T_${df}`);
    }
    assert.equal(studentTQuantile(0.5, 7), 0);
    assert.ok(Number.isNaN(studentTQuantile(1, 7)));
  });

  test('ln Gamma and the regularized incomplete beta', () => {
    for (const [x, expected] of REFERENCE.log_gamma) {
      near(logGamma(x!), expected!, `ln Gamma(${x})`);
    }
    for (const [x, a, b, expected] of REFERENCE.beta) {
      near(regularizedBeta(x!, a!, b!), expected!, `I_${x}(${a}, ${b})`);
    }
    assert.equal(regularizedBeta(0, 2, 3), 0);
    assert.equal(regularizedBeta(1, 2, 3), 1);
  });

  const available = fs.existsSync('/usr/bin/python3');
  test(
    'the constants above are what the script prints (where SciPy is installed)',
    { skip: available ? false : 'no /usr/bin/python3' },
    () => {
      const run = referenceRun('distributions-reference.py');
      assert.equal(run.status, 0, run.stderr);
      assert.deepEqual(JSON.parse(run.stdout), REFERENCE);
    },
  );
});
