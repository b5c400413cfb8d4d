// report/distributions.ts: the distribution functions the report's tests and intervals need, to
// about 1e-13: Student's t (its CDF and quantile) through the regularized incomplete beta
// function. Checked against SciPy in test/distributions.test.ts. Pure functions.

/** ln Γ(x) for x > 0: Lanczos' approximation (g = 7, nine terms), relative error about 1e-15;
 * below 0.5 by the reflection formula. */
export function logGamma(x: number): number {
  if (x < 0.5) {
    return Math.log(Math.PI / Math.abs(Math.sin(Math.PI * x))) - logGamma(1 - x);
  }
  const z = x - 1;
  let series = LANCZOS[0]!;
  for (let i = 1; i < LANCZOS.length; i++) {
    series += LANCZOS[i]! / (z + i);
  }
  const t = z + LANCZOS_G + 0.5;
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(series);
}

const LANCZOS_G = 7;
const LANCZOS = [
  0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
  -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6,
  1.5056327351493116e-7,
];

/** The regularized incomplete beta function I_x(a, b), for a, b > 0 and x in [0, 1]: its
 * continued fraction (modified Lentz), on the side of x where it converges fast. */
export function regularizedBeta(x: number, a: number, b: number): number {
  if (x <= 0) {
    return 0;
  }
  if (x >= 1) {
    return 1;
  }
  const logFront =
    logGamma(a + b) - logGamma(a) - logGamma(b) + a * Math.log(x) + b * Math.log1p(-x);
  if (x < (a + 1) / (a + b + 2)) {
    return (Math.exp(logFront) * betaFraction(x, a, b)) / a;
  }
  return 1 - (Math.exp(logFront) * betaFraction(1 - x, b, a)) / b;
}

/** The continued fraction of I_x(a, b) (Numerical Recipes' betacf), to machine precision. */
function betaFraction(x: number, a: number, b: number): number {
  const tiny = 1e-300;
  let c = 1;
  let d = 1 - ((a + b) * x) / (a + 1);
  d = Math.abs(d) < tiny ? tiny : d;
  d = 1 / d;
  let fraction = d;
  for (let m = 1; m <= 10000; m++) {
    const m2 = 2 * m;
    // The even step, then the odd one.
    const even = (m * (b - m) * x) / ((a + m2 - 1) * (a + m2));
    d = 1 + even * d;
    d = Math.abs(d) < tiny ? tiny : d;
    c = 1 + even / c;
    c = Math.abs(c) < tiny ? tiny : c;
    d = 1 / d;
    fraction *= d * c;

    const odd = (-(a + m) * (a + b + m) * x) / ((a + m2) * (a + m2 + 1));
    d = 1 + odd * d;
    d = Math.abs(d) < tiny ? tiny : d;
    c = 1 + odd / c;
    c = Math.abs(c) < tiny ? tiny : c;
    d = 1 / d;
    const step = d * c;
    fraction *= step;
    if (Math.abs(step - 1) < 1e-16) {
      break;
    }
  }
  return fraction;
}

/** P(T <= t) for Student's t with `df` degrees of freedom (df > 0, not necessarily whole). */
export function studentTCdf(t: number, df: number): number {
  if (Number.isNaN(t) || !(df > 0)) {
    return NaN;
  }
  const tail = studentTTail(Math.abs(t), df);
  return t > 0 ? 1 - tail : tail;
}

/** P(T > t) for t >= 0: half of I_{df / (df + t^2)}(df / 2, 1 / 2). */
function studentTTail(t: number, df: number): number {
  if (t === Infinity) {
    return 0;
  }
  return 0.5 * regularizedBeta(df / (df + t * t), df / 2, 0.5);
}

/** The p-quantile of Student's t with `df` degrees of freedom, 0 < p < 1: the tail inverted by
 * bisection to the last bit. */
export function studentTQuantile(p: number, df: number): number {
  if (!(p > 0 && p < 1) || !(df > 0)) {
    return NaN;
  }
  if (p === 0.5) {
    return 0;
  }
  // The quantile of 1 - p is minus that of p: find the t > 0 whose tail is the smaller of the two.
  const tail = Math.min(p, 1 - p);
  let low = 0;
  let high = 1;
  while (studentTTail(high, df) > tail) {
    low = high;
    high *= 2;
  }
  for (let i = 0; i < 2000; i++) {
    const middle = (low + high) / 2;
    if (middle === low || middle === high) {
      break;
    }
    if (studentTTail(middle, df) > tail) {
      low = middle;
    } else {
      high = middle;
    }
  }
  const quantile = (low + high) / 2;
  return p > 0.5 ? quantile : -quantile;
}
