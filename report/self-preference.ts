// report/self-preference.ts: does the judge favour tutors of its own family? Family is a property
// of tutors, not of transcripts, so the interval treats the tutor as the unit: each side's mean
// leniency with a cluster-robust (CR2) variance over its tutors, and a t interval with Welch-
// Satterthwaite degrees of freedom. Definitions and measured error rates: docs/analysis.md,
// "Self-preference". Pure functions.
import { studentTQuantile } from './distributions.ts';

/** One matched transcript as self-preference reads it: its tutor, whether the tutor is of the
 * judge's family, and the judge's leniency on it (its score minus the transcript's human mean). */
export type LeniencyUnit = { tutor: string; own: boolean; leniency: number };

/** `favours_own`: the interval is above 0; `none_shown`: it holds 0 or is below it;
 * `undetermined`: no interval can be had (see `reason`). */
export type PreferenceVerdict = 'favours_own' | 'none_shown' | 'undetermined';

/** Why a verdict is undetermined: either side with one tutor, or no spread between a side's
 * tutors to judge the difference by. */
export const ONE_OWN_TUTOR =
  "one tutor of this family: its self-preference cannot be told from the judge's leniency " +
  'toward that tutor';
export const ONE_OTHER_TUTOR =
  "one tutor of other families: the comparison cannot be told from the judge's leniency toward " +
  'that tutor';
export const NO_SPREAD =
  'every tutor of a side has the same mean leniency: no spread between tutors to judge the ' +
  'difference by';

/** One side's figures: transcripts, tutors, the transcript-weighted mean leniency, its CR2
 * variance and the Satterthwaite degrees of freedom of that variance. */
type Side = { n: number; tutors: number; mean: number | null; variance: number; df: number };

/**
 * Self-preference on one dimension: the mean leniency over the judge's own family's transcripts
 * and over the others', own minus other, its 95% interval with the tutor as the unit, and the
 * verdict. `units` in any order; a side without transcripts gives a null mean and difference.
 */
export function selfPreferenceFigures(units: readonly LeniencyUnit[], level = 0.95) {
  const own = sideOf(units.filter((unit) => unit.own));
  const other = sideOf(units.filter((unit) => !unit.own));
  const diff = own.mean === null || other.mean === null ? null : own.mean - other.mean;

  // 1. Either side with fewer than two tutors: the tutor's own leniency and the family's cannot be
  // told apart.
  let reason: string | null = null;
  if (own.tutors < 2) {
    reason = ONE_OWN_TUTOR;
  } else if (other.tutors < 2) {
    reason = ONE_OTHER_TUTOR;
  } else if (own.variance + other.variance === 0) {
    reason = NO_SPREAD;
  }

  // 2. The interval: diff +- t(df) * sqrt(V_own + V_other), df by Welch-Satterthwaite.
  let ci95: [number, number] | null = null;
  if (reason === null && diff !== null) {
    const variance = own.variance + other.variance;
    const df = variance ** 2 / (own.variance ** 2 / own.df + other.variance ** 2 / other.df);
    const half = studentTQuantile(1 - (1 - level) / 2, df) * Math.sqrt(variance);
    ci95 = [diff - half, diff + half];
  }

  let verdict: PreferenceVerdict = 'undetermined';
  if (ci95 !== null) {
    verdict = ci95[0] > 0 ? 'favours_own' : 'none_shown';
  }
  return {
    own_n: own.n,
    other_n: other.n,
    own_tutors: own.tutors,
    other_tutors: other.tutors,
    own_leniency: own.mean,
    other_leniency: other.mean,
    diff,
    ci95,
    verdict,
    reason,
  };
}

/**
 * One side's mean leniency over its transcripts, m = sum_j w_j L_j (w_j = n_j / N, L_j tutor j's
 * mean), and the CR2 (bias-reduced cluster-robust) variance of m with the tutor as the cluster:
 * V = sum_j w_j^2 (L_j - m)^2 / (1 - w_j). With equal n_j this is s^2 / G, s^2 the variance of the
 * tutors' means. Its degrees of freedom, by Satterthwaite with the tutors' means taken as
 * exchangeable (Bell and McCaffrey's working model): tr(B)^2 / tr(B^2), V = L' B L; G - 1 with
 * equal n_j.
 */
function sideOf(units: readonly LeniencyUnit[]): Side {
  const sums = new Map<string, { n: number; total: number }>();
  for (const unit of units) {
    const tutor = sums.get(unit.tutor) ?? { n: 0, total: 0 };
    tutor.n += 1;
    tutor.total += unit.leniency;
    sums.set(unit.tutor, tutor);
  }
  const n = units.length;
  const tutors = [...sums.values()];
  if (n === 0) {
    return { n, tutors: 0, mean: null, variance: 0, df: 0 };
  }

  const weights = tutors.map((tutor) => tutor.n / n);
  const means = tutors.map((tutor) => tutor.total / tutor.n);
  const mean = tutors.reduce((total, tutor) => total + tutor.total, 0) / n;
  if (tutors.length < 2) {
    return { n, tutors: tutors.length, mean, variance: 0, df: 0 };
  }

  // c_j = w_j^2 / (1 - w_j); V = r' C r with r = M L, M = I - 1 w'; B = M' C M.
  const c = weights.map((w) => (w * w) / (1 - w));
  let variance = 0;
  means.forEach((value, j) => {
    variance += c[j]! * (value - mean) ** 2;
  });
  const g = tutors.length;
  const b: number[][] = [];
  for (let k = 0; k < g; k++) {
    b.push([]);
    for (let l = 0; l < g; l++) {
      // (M' C M)_kl = sum_j c_j (delta_jk - w_k)(delta_jl - w_l)
      let entry = 0;
      for (let j = 0; j < g; j++) {
        entry += c[j]! * ((j === k ? 1 : 0) - weights[k]!) * ((j === l ? 1 : 0) - weights[l]!);
      }
      b[k]!.push(entry);
    }
  }
  let trace = 0;
  let traceOfSquare = 0;
  for (let k = 0; k < g; k++) {
    trace += b[k]![k]!;
    for (let l = 0; l < g; l++) {
      traceOfSquare += b[k]![l]! * b[l]![k]!;
    }
  }
  return { n, tutors: g, mean, variance, df: trace ** 2 / traceOfSquare };
}
