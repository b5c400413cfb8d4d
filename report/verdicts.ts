// report/verdicts.ts: the report's verdicts and what they rest on. The gap to the human ceiling is
// read against the margin by a jackknife test over transcripts on Fisher's z scale of the two
// kappas, with Hall's skewness correction, and only on MIN_TRANSCRIPTS transcripts scored by two or
// more; leniency by a t-test of the per-transcript differences; both with Holm's procedure over the
// dimensions, so that a verdict holds for every dimension at once. Also how many transcripts would
// decide an undetermined gap, whose agreement a verdict speaks of (its scope), and the verdicts as
// sentences. Definitions: docs/analysis.md, "Verdicts". Pure functions.
import { oneLine } from '../run-judge.ts';
import { studentTCdf, studentTQuantile } from './distributions.ts';
// Holm's procedure and its family-wise error (5% two-sided: 2.5% each way, a 95% interval's).
import { FAMILY_ALPHA, holmRejects } from './ppi.ts';
import type { DimensionReport, Report, UnitSums } from './analysis.ts';

/** Fewer transcripts scored by two or more than this: the gap's verdict is `undetermined`, reason
 * `too_few` (below it the test's error rate exceeds its stated level in simulation). */
export const MIN_TRANSCRIPTS = 30;

/** The standard normal's 0.8 quantile (SciPy's norm.ppf(0.8)): `transcripts_to_decide` is the
 * count that decides a verdict with 80% chance. */
const Z_POWER = 0.8416212335729143;

/** Why a gap has no verdict either way: under MIN_TRANSCRIPTS (or a jackknife undefined), or no
 * ceiling to compare with (the people's kappa undefined). */
export type VerdictReason = 'too_few' | 'no_ceiling';

/** A gap's reading against the margin: not worse than the ceiling by more than it (`as_good`),
 * worse by more (`below`), or the data cannot tell (`undetermined`). */
export type Verdict = 'as_good' | 'below' | 'undetermined';

// ---- The jackknife -----------------------------------------------------------------------------

/** The delete-one jackknife of two kappas over the units (transcripts): each on every unit, and
 * each with one unit of each distinct row left out (`multiplicities`: the units of that row);
 * `undefined_count`: the units whose leaving out leaves either undefined. */
export type Jackknife = {
  n: number;
  judge: number;
  ceiling: number;
  multiplicities: number[];
  judgeLeftOut: number[];
  ceilingLeftOut: number[];
  undefined_count: number;
};

/** The jackknife of the judge's kappa and the ceiling's over the units of `units`; null when
 * either is undefined on them all. Units with the same row share their leave-one-out values. */
function jackknife(
  units: UnitSums,
  judgeKappa: (sums: Float64Array) => number | null,
  ceilingKappa: (sums: Float64Array) => number | null,
): Jackknife | null {
  // 1. The sums over every unit, and how many units share each distinct row.
  const multiplicities = new Array<number>(units.rowIndex.size).fill(0);
  for (const index of units.rowOf) {
    multiplicities[index]!++;
  }
  const sums = new Float64Array(units.width);
  for (let row = 0; row < multiplicities.length; row++) {
    for (let e = units.starts[row]!; e < units.starts[row + 1]!; e++) {
      sums[units.at[e]!]! += multiplicities[row]! * units.value[e]!;
    }
  }
  const judge = judgeKappa(sums);
  const ceiling = ceilingKappa(sums);
  if (judge === null || ceiling === null) {
    return null;
  }

  // 2. Each distinct row left out once.
  const judgeLeftOut: number[] = [];
  const ceilingLeftOut: number[] = [];
  let undefinedCount = 0;
  const without = new Float64Array(units.width);
  for (let row = 0; row < multiplicities.length; row++) {
    without.set(sums);
    for (let e = units.starts[row]!; e < units.starts[row + 1]!; e++) {
      without[units.at[e]!]! -= units.value[e]!;
    }
    const judgeWithout = units.count > 1 ? judgeKappa(without) : null;
    const ceilingWithout = units.count > 1 ? ceilingKappa(without) : null;
    if (judgeWithout === null || ceilingWithout === null) {
      undefinedCount += multiplicities[row]!;
    }
    judgeLeftOut.push(judgeWithout ?? NaN);
    ceilingLeftOut.push(ceilingWithout ?? NaN);
  }
  return {
    n: units.count,
    judge,
    ceiling,
    multiplicities,
    judgeLeftOut,
    ceilingLeftOut,
    undefined_count: undefinedCount,
  };
}

// ---- The test and its interval -----------------------------------------------------------------

/**
 * The gap on Fisher's z scale against a hypothesised gap δ: ψ = atanh(judge kappa) - atanh(ceiling
 * kappa + δ), 0 exactly when the gap is δ, and the spread, skewness and excess kurtosis of its linearised
 * jackknife pseudo-values w_J p_J - w_C p_C (p the kappas' pseudo-values n k - (n - 1) k_(i), w
 * the derivatives 1 / (1 - k^2) of atanh at the estimates). Kappa is a correlation-like figure, and
 * on this scale its spread depends little on its value. A kappa at ±1 makes ψ infinite (the
 * spread is then 0); both at the same end, ψ is 0.
 */
function zScale(jack: Jackknife, delta: number) {
  const hypothesised = jack.ceiling + delta;
  if (Math.abs(jack.judge) >= 1 || Math.abs(hypothesised) >= 1) {
    const judge = fisherZ(jack.judge);
    const ceiling = fisherZ(hypothesised);
    const psi = judge === ceiling ? 0 : judge - ceiling;
    return { psi, sd: 0, skewness: 0, kurtosis: 0 };
  }

  const n = jack.n;
  const judgeWeight = 1 / (1 - jack.judge ** 2);
  const ceilingWeight = 1 / (1 - hypothesised ** 2);
  const values = jack.multiplicities.map((_, row) => {
    const judge = jack.judge + (n - 1) * (jack.judge - jack.judgeLeftOut[row]!);
    const ceiling = jack.ceiling + (n - 1) * (jack.ceiling - jack.ceilingLeftOut[row]!);
    return judgeWeight * judge - ceilingWeight * ceiling;
  });
  let mean = 0;
  values.forEach((value, row) => {
    mean += jack.multiplicities[row]! * value;
  });
  mean /= n;
  let squares = 0;
  let cubes = 0;
  let fourths = 0;
  values.forEach((value, row) => {
    const deviation = value - mean;
    squares += jack.multiplicities[row]! * deviation ** 2;
    cubes += jack.multiplicities[row]! * deviation ** 3;
    fourths += jack.multiplicities[row]! * deviation ** 4;
  });
  const secondMoment = squares / n;
  const spread = secondMoment > 0;
  return {
    psi: fisherZ(jack.judge) - fisherZ(hypothesised),
    sd: Math.sqrt(squares / (n - 1)),
    skewness: spread ? cubes / n / secondMoment ** 1.5 : 0,
    kurtosis: spread ? fourths / n / secondMoment ** 2 - 3 : 0,
  };
}

/** atanh, ±Infinity at ±1 and beyond. */
function fisherZ(kappa: number): number {
  if (kappa >= 1) {
    return Infinity;
  }
  return kappa <= -1 ? -Infinity : Math.atanh(kappa);
}

/** Hall's (1992) transformation of a studentized mean, which removes its skewness to first order:
 * g(s) = s + γ s² / 3 + γ² s³ / 27 + γ / (6n), monotone in s. */
function hallTransform(s: number, skewness: number, n: number): number {
  if (skewness === 0) {
    return s;
  }
  return ((1 + (skewness * s) / 3) ** 3 - 1) / skewness + skewness / (6 * n);
}

/** The test of H0: the gap is δ: √n g(ψ / sd) on the z scale (±Infinity when the pseudo-values do
 * not vary), read as Student's t with `df` degrees of freedom: 2 / (2 / (n - 1) + max(0, κ) / n),
 * κ their excess kurtosis, Satterthwaite's degrees of freedom of a variance estimate whose own
 * variance heavy tails raise (n - 1 for normal pseudo-values). `p`: its two-sided p-value. */
function gapTestAt(jack: Jackknife, delta: number) {
  const z = zScale(jack, delta);
  const n = jack.n;
  let statistic = z.psi === 0 ? 0 : Math.sign(z.psi) * Infinity;
  if (z.sd > 0 && Number.isFinite(z.psi)) {
    statistic = Math.sqrt(n) * hallTransform(z.psi / z.sd, z.skewness, n);
  }
  const df = 2 / (2 / (n - 1) + Math.max(0, z.kurtosis) / n);
  const p = Math.min(1, 2 * studentTCdf(-Math.abs(statistic), df));
  return { statistic, df, p };
}

/** Student's t quantile, each (p, df) computed once: the same few are asked for again and again. */
function tQuantile(p: number, df: number): number {
  const key = `${p} ${df}`;
  let quantile = QUANTILES.get(key);
  if (quantile === undefined) {
    quantile = studentTQuantile(p, df);
    QUANTILES.set(key, quantile);
  }
  return quantile;
}

const QUANTILES = new Map<string, number>();

/**
 * The gap's 95% interval: the gaps δ its test keeps (p above 5%), found
 * from the estimate outwards: in steps of 0.01 to the first one rejected, then by bisection. At
 * most from -1 - ceiling to 1 - ceiling (the judge's kappa from -1 to 1).
 */
function gapInterval(jack: Jackknife, level = 0.95): [number, number] {
  const estimate = jack.judge - jack.ceiling;
  // A judge's kappa of ±1, or two kappas no transcript moves: the test rejects every other gap.
  const moves = (values: number[]) => values.some((value) => value !== values[0]);
  if (Math.abs(jack.judge) >= 1 || !(moves(jack.judgeLeftOut) || moves(jack.ceilingLeftOut))) {
    return [estimate, estimate];
  }
  const kept = (delta: number) => gapTestAt(jack, delta).p > 1 - level;
  const end = (limit: number, direction: number) => {
    let inside = estimate;
    let outside = limit;
    for (let delta = estimate + 0.01 * direction; direction * (limit - delta) > 0;) {
      if (!kept(delta)) {
        outside = delta;
        break;
      }
      inside = delta;
      delta += 0.01 * direction;
    }
    if (kept(outside)) {
      return outside;
    }
    for (let i = 0; i < 60; i++) {
      const middle = (inside + outside) / 2;
      if (kept(middle)) {
        inside = middle;
      } else {
        outside = middle;
      }
    }
    return inside;
  };
  return [end(-1 - jack.ceiling, -1), end(1 - jack.ceiling, 1)];
}

// ---- The gap to the ceiling --------------------------------------------------------------------

/** What the family's verdicts need of one gap: its test's two-sided p-value against -margin and
 * the side it points to, or why it has none. */
export type GapTest = {
  jackknife: Jackknife | null;
  reason: VerdictReason | null;
  /** two-sided p of H0: gap = -margin (1 without a test) */
  p: number;
  side: 'as_good' | 'below';
};

/** The two kappas of a gap, each read off a transcripts' sums: the judge's and the ceiling's. */
export type GapKappas = {
  judge: (sums: Float64Array) => number | null;
  ceiling: (sums: Float64Array) => number | null;
};

/** One dimension's gap: the jackknife over the transcripts scored by two or more (`units`, their
 * sums as the two kappa functions read them), its interval and its test against -margin. The
 * verdict here is the dimension's own; familyReadings reads every dimension's together. */
export function gapToCeiling(
  units: UnitSums,
  kappas: GapKappas,
  margin: number,
  pairs: number,
  fewPairs: number,
) {
  const test = gapTestOf(units, kappas, margin);
  const jack = test.jackknife;
  const defined = jack !== null && jack.undefined_count === 0 && jack.n > 1;
  const figures = {
    kappa_diff: jack === null ? null : jack.judge - jack.ceiling,
    ci95: defined ? gapInterval(jack) : null,
    verdict: familyVerdicts([test], []).gaps[0]!.verdict,
    reason: test.reason,
    margin,
    transcripts_to_decide: null as number | null,
    few_pairs: pairs < fewPairs,
    undefined_resamples: jack === null ? 0 : jack.undefined_count,
    resamples: units.count,
  };
  return { figures, test };
}

export type GapFigures = ReturnType<typeof gapToCeiling>['figures'];

/** The test of a gap against -margin; too few under MIN_TRANSCRIPTS transcripts or when a
 * transcript left out leaves a kappa undefined; no ceiling when a kappa is undefined. */
export function gapTestOf(units: UnitSums, kappas: GapKappas, margin: number): GapTest {
  const jack = jackknife(units, kappas.judge, kappas.ceiling);
  if (jack === null) {
    return { jackknife: null, reason: 'no_ceiling', p: 1, side: 'as_good' };
  }
  if (jack.n < MIN_TRANSCRIPTS || jack.undefined_count > 0) {
    return { jackknife: jack, reason: 'too_few', p: 1, side: 'as_good' };
  }
  const test = gapTestAt(jack, -margin);
  const side = test.statistic >= 0 ? 'as_good' : 'below';
  return { jackknife: jack, reason: null, p: test.p, side };
}

// ---- Leniency ----------------------------------------------------------------------------------

/** One transcript's leniency: the judge's score minus the mean of its scorers', computed as
 * (m judge - sum) / m so that equal differences are equal numbers. */
export function leniencyDifference(judge: number, humans: readonly number[]): number {
  const total = humans.reduce((sum, score) => sum + score, 0);
  return (humans.length * judge - total) / humans.length;
}

/** The t-test of H0: no leniency, over the per-transcript differences: its two-sided p-value and
 * the side the mean is on. Differences that do not vary are certain on MIN_TRANSCRIPTS or more
 * and no evidence under it. */
export function leniencyTest(differences: readonly number[]): {
  p: number;
  side: 'lenient' | 'harsh';
} {
  const n = differences.length;
  const mean = n === 0 ? 0 : differences.reduce((sum, value) => sum + value, 0) / n;
  const side = mean >= 0 ? 'lenient' : 'harsh';
  if (n < 2) {
    return { p: 1, side };
  }
  const squares = differences.reduce((sum, value) => sum + (value - mean) ** 2, 0);
  const sd = Math.sqrt(squares / (n - 1));
  if (sd <= 1e-12 * Math.max(1, Math.abs(mean))) {
    const certain = Math.abs(mean) > 1e-12 && n >= MIN_TRANSCRIPTS;
    return { p: certain ? 0 : 1, side };
  }
  const t = mean / (sd / Math.sqrt(n));
  return { p: Math.min(1, 2 * studentTCdf(-Math.abs(t), n - 1)), side };
}

// ---- Every dimension at once -------------------------------------------------------------------

/** Every dimension's gap verdict and leniency reading, read together: Holm's procedure over the
 * dimensions' two-sided p-values, each rejection a verdict on the side its statistic points to.
 * `level`: what Holm would ask of an undetermined gap now (alpha over the dimensions not yet
 * decided), at which transcriptsToDecide reads it. */
export function familyVerdicts(
  gaps: readonly (GapTest | null)[],
  leniencies: readonly { p: number; side: 'lenient' | 'harsh' }[],
) {
  const tested = gaps.filter((gap) => gap !== null);
  const gapRejected = holmRejects(tested.map((gap) => gap.p));
  const decided = gapRejected.filter(Boolean).length;
  const levelLeft = FAMILY_ALPHA / Math.max(1, tested.length - decided);
  let at = 0;
  const gapVerdicts = gaps.map((gap) => {
    if (gap === null) {
      return null;
    }
    const rejected = gapRejected[at++]!;
    if (gap.reason === 'no_ceiling') {
      return { verdict: null, reason: gap.reason, level: levelLeft };
    }
    if (rejected) {
      return { verdict: gap.side as Verdict, reason: null, level: levelLeft };
    }
    return { verdict: 'undetermined' as Verdict, reason: gap.reason, level: levelLeft };
  });

  const lenientRejected = holmRejects(leniencies.map((test) => test.p));
  const readings = leniencies.map((test, d) => (lenientRejected[d] ? test.side : null));
  return { gaps: gapVerdicts, readings };
}

/** What one dimension's verdicts rest on: its gap's test (null without a ceiling) and its
 * leniency's. */
export type DimensionTests = {
  gap: GapTest | null;
  leniency: { p: number; side: 'lenient' | 'harsh' };
};

/** The dimensions with their verdicts and leniency readings read together (familyVerdicts): the
 * same figures, the verdict, reason, transcripts_to_decide and reading replaced. */
export function familyReadings<
  D extends {
    gap_to_ceiling: GapFigures | null;
    leniency: { reading: 'lenient' | 'harsh' | null };
  },
>(dimensions: D[], tests: readonly DimensionTests[], margin: number): D[] {
  const family = familyVerdicts(
    tests.map((test) => test.gap),
    tests.map((test) => test.leniency),
  );
  return dimensions.map((dimension, d) => {
    const gap = dimension.gap_to_ceiling;
    const verdict = family.gaps[d] ?? null;
    const leniency = { ...dimension.leniency, reading: family.readings[d]! };
    if (gap === null || verdict === null) {
      return { ...dimension, leniency };
    }
    const jack = tests[d]!.gap!.jackknife;
    const open = verdict.verdict === 'undetermined' && jack !== null;
    const read = {
      ...gap,
      verdict: verdict.verdict,
      reason: verdict.reason,
      transcripts_to_decide: open ? transcriptsToDecide(jack, margin, verdict.level) : null,
    };
    return { ...dimension, gap_to_ceiling: read, leniency };
  });
}

/**
 * The transcripts scored by two or more, in all, at which the gap would be decided with 80%
 * chance if its estimate and spread held: on the z scale at -margin, the smallest N (at least
 * MIN_TRANSCRIPTS, more than now) whose test statistic, √N |g(ψ / sd)| with the pseudo-values'
 * skewness, reaches t(df_N, 1 - alpha / 2) + z(0.8), df_N the test's degrees of freedom on N
 * transcripts of the same kurtosis. Null when the gap sits on the margin, or the jackknife is
 * undefined.
 */
export function transcriptsToDecide(jack: Jackknife, margin: number, alpha: number) {
  const z = zScale(jack, -margin);
  if (jack.undefined_count > 0 || jack.n < 2 || Math.abs(z.psi) < 1e-9) {
    return null;
  }
  const least = Math.max(MIN_TRANSCRIPTS, jack.n + 1);
  const enough = (transcripts: number) => {
    if (z.sd === 0 || !Number.isFinite(z.psi)) {
      return true;
    }
    const statistic = Math.sqrt(transcripts) * hallTransform(z.psi / z.sd, z.skewness, transcripts);
    const df = 2 / (2 / (transcripts - 1) + Math.max(0, z.kurtosis) / transcripts);
    return Math.abs(statistic) >= tQuantile(1 - alpha / 2, df) + Z_POWER;
  };
  if (enough(least)) {
    return least;
  }
  // The smallest N that is enough: double until one is, then halve the gap.
  let low = least;
  let high = least * 2;
  while (!enough(high)) {
    low = high;
    high *= 2;
  }
  while (high - low > 1) {
    const middle = Math.floor((low + high) / 2);
    if (enough(middle)) {
      high = middle;
    } else {
      low = middle;
    }
  }
  return high;
}

// ---- Whose agreement ---------------------------------------------------------------------------

/** Whose agreement the figures speak of: the scorers of the matched transcripts and how many, and
 * of those scored by two or more (the ceiling's, and the gap's). */
export function verdictScope(matched: readonly { humans: readonly { scorer: string }[] }[]) {
  const scorersOf = (transcripts: readonly { humans: readonly { scorer: string }[] }[]) => {
    const names = new Set(
      transcripts.flatMap((transcript) => transcript.humans.map((h) => h.scorer)),
    );
    return [...names].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  };
  const double = matched.filter((transcript) => transcript.humans.length >= 2);
  return {
    scorers: scorersOf(matched),
    transcripts: matched.length,
    ceiling: { scorers: scorersOf(double), transcripts: double.length },
  };
}

export type VerdictScope = ReturnType<typeof verdictScope>;

/** Names as a sentence: "alice", "alice and bob", "alice, bob and carol"; past four, the count and
 * the first three. */
export function namesInWords(names: readonly string[]): string {
  const shown = names.map(oneLine);
  if (shown.length > 4) {
    return `${shown.length} scorers (${shown.slice(0, 3).join(', ')}, ...)`;
  }
  if (shown.length <= 1) {
    return shown[0] ?? 'no one';
  }
  return `${shown.slice(0, -1).join(', ')} and ${shown.at(-1)}`;
}

// ---- The verdicts in words ---------------------------------------------------------------------

/** A gap's verdict as a table cell: `as good`, `below`, `undetermined (60)` (60 transcripts
 * would decide it), `too few (30)`, `no ceiling`; `-` without one. */
export function verdictCell(gap: GapFigures): string {
  if (gap.verdict === null) {
    return gap.reason === 'no_ceiling' ? 'no ceiling' : '-';
  }
  if (gap.verdict === 'as_good') {
    return 'as good';
  }
  if (gap.verdict === 'below') {
    return 'below';
  }
  const word = gap.reason === 'too_few' ? 'too few' : 'undetermined';
  return gap.transcripts_to_decide === null ? word : `${word} (${gap.transcripts_to_decide})`;
}

/** The report's verdicts on every dimension at once, as sentences naming whose agreement they are
 * about: a title, the gap to the ceiling, leniency. Empty without a dimension. */
export function verdictSentences(report: Pick<Report, 'dimensions' | 'scope'>): string[] {
  const dimensions = report.dimensions;
  if (dimensions.length === 0) {
    return [];
  }
  return [
    `verdicts on the ${dimensions.length} dimension(s) together (Holm, family-wise error 5%):`,
    `gap to the ceiling: ${gapSentence(dimensions, report.scope)}`,
    `leniency: ${leniencySentence(dimensions, report.scope)}`,
  ];
}

/** The verdict sentences as text lines within 100 columns, the sentences indented under the
 * title. */
export function verdictLines(report: Pick<Report, 'dimensions' | 'scope'>): string[] {
  const [title, ...sentences] = verdictSentences(report);
  if (title === undefined) {
    return [];
  }
  const wrappedSentences = sentences.flatMap((sentence) => wrapWords(sentence, 98));
  return [title, ...wrappedSentences.map((line) => `  ${line}`)];
}

/** The verdict sentences as Markdown: the title, then a bullet each. */
export function verdictMarkdown(report: Pick<Report, 'dimensions' | 'scope'>): string[] {
  const [title, ...sentences] = verdictSentences(report);
  if (title === undefined) {
    return [];
  }
  return [title, '', ...sentences.map((sentence) => `- ${sentence}`)];
}

/** The gap verdicts in one sentence: "as good as alice and bob on all 6 dimensions (40
 * transcript(s) scored by two or more, margin 0.1)", or the dimensions of each verdict named, those
 * without one with why. */
function gapSentence(dimensions: readonly DimensionReport[], scope: VerdictScope): string {
  const gaps = dimensions.filter((dimension) => dimension.gap_to_ceiling !== null);
  if (gaps.length === 0) {
    return 'none: no matched transcript has two or more scorers';
  }
  const margin = gaps[0]!.gap_to_ceiling!.margin;
  const people = namesInWords(scope.ceiling.scorers);
  const list = (group: readonly DimensionReport[]) => {
    return group.map((dimension) => oneLine(dimension.name)).join(', ');
  };
  const why = (dimension: DimensionReport) => {
    const gap = dimension.gap_to_ceiling;
    if (gap === null) {
      return 'no ceiling';
    }
    if (gap.reason === 'too_few') {
      return 'too few';
    }
    return gap.reason === 'no_ceiling' ? 'no ceiling' : 'undetermined';
  };
  const asGood = gaps.filter((dimension) => dimension.gap_to_ceiling!.verdict === 'as_good');
  const below = gaps.filter((dimension) => dimension.gap_to_ceiling!.verdict === 'below');
  const open = dimensions.filter((dimension) => {
    const verdict = dimension.gap_to_ceiling?.verdict ?? null;
    return verdict !== 'as_good' && verdict !== 'below';
  });
  const tooFew = open.some((dimension) => why(dimension) === 'too few');
  const needs = tooFew ? `; a verdict needs ${MIN_TRANSCRIPTS}` : '';
  const on = `(${scope.ceiling.transcripts} transcript(s) scored by two or more, margin ${margin}${needs})`;
  if (asGood.length === dimensions.length) {
    return `as good as ${people} on all ${dimensions.length} dimensions ${on}`;
  }

  const parts: string[] = [];
  if (asGood.length > 0) {
    parts.push(`as good as ${people} on ${list(asGood)}`);
  }
  if (below.length > 0) {
    parts.push(`below ${people} on ${list(below)}`);
  }
  const reasons = [...new Set(open.map(why))];
  const unread = reasons.map((reason) => {
    return `${list(open.filter((dimension) => why(dimension) === reason))} (${reason})`;
  });
  if (unread.length > 0) {
    const shown = parts.length === 0 ? `no verdict against ${people} on` : 'no verdict on';
    parts.push(`${shown} ${unread.join(', ')}`);
  }
  return `${parts.join('; ')} ${on}`;
}

/** The leniency readings in one sentence, against whom and on how many transcripts. */
function leniencySentence(dimensions: readonly DimensionReport[], scope: VerdictScope): string {
  const people = namesInWords(scope.scorers);
  const on = `against ${people} on ${scope.transcripts} transcript(s)`;
  const reading = (word: string) => {
    const named = dimensions.filter((dimension) => dimension.leniency.reading === word);
    return named.map((dimension) => oneLine(dimension.name)).join(', ');
  };
  const lenient = reading('lenient');
  const harsh = reading('harsh');
  if (lenient === '' && harsh === '') {
    return `neither lenient nor harsh shown on any of the ${dimensions.length} (${on})`;
  }
  const parts = [];
  if (lenient !== '') {
    parts.push(`lenient on ${lenient}`);
  }
  if (harsh !== '') {
    parts.push(`harsh on ${harsh}`);
  }
  return `${parts.join('; ')} (${on})`;
}

/** Text broken at spaces into lines of at most `width` columns, the lines after the first
 * indented by two spaces. */
function wrapWords(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    const indent = lines.length === 0 ? '' : '  ';
    if (line !== '' && indent.length + line.length + 1 + word.length > width) {
      lines.push(`${indent}${line}`);
      line = word;
    } else {
      line = line === '' ? word : `${line} ${word}`;
    }
  }
  lines.push(`${lines.length === 0 ? '' : '  '}${line}`);
  return lines;
}

/** The notes under the tables on the verdicts: how to read them at this margin. */
export function verdictNotes(margin: number, dimensions: number): string[] {
  return [
    `verdict at margin ${margin} (--margin): "as good" when the gap's 95% CI is at or above ` +
      `-${margin}, "below"`,
    `  when it is under -${margin}, else "undetermined"; "too few": undetermined, under ` +
      `${MIN_TRANSCRIPTS} transcripts`,
    '  scored by two or more; (60): about 60 such transcripts in all would decide it (80% ' +
      'chance if the',
    `  gap and its spread held); verdicts and lenient/harsh hold for all ${dimensions} ` +
      'dimension(s) together',
    "  (Holm), so a dimension's own interval may clear the margin before its verdict does",
  ];
}
