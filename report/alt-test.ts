// report/alt-test.ts: the Alternative Annotator Test (Calderon, Reichart and Dror, ACL 2025): can
// the judge take the place of the people who scored? Each scorer left out in turn, on each
// transcript that scorer and another scored, the judge and the left-out scorer are each compared
// with the remaining scorers; the judge "wins" against a scorer when its advantage is not worse by
// epsilon or more. Each scorer's test is the t-test the authors use; a scorer on fewer than 15
// transcripts is left out, as their notebook leaves out scorers under its minimum. Procedure,
// choices and measured error rates: docs/analysis.md, "The alternative annotator test". Pure
// functions.
import { compareText } from '../run-judge.ts';
import { studentTCdf } from './distributions.ts';

export const DEFAULT_EPSILON = 0.15;

/** The false discovery rate the Benjamini-Yekutieli procedure holds over the scorers' tests. */
export const ALT_TEST_Q = 0.05;

/** A scorer on fewer transcripts (that another scored too) is not tested: under 15 the t-test's
 * false passes exceed 5% where ties are common (docs/analysis.md). */
export const MIN_TRANSCRIPTS = 15;

/** The authors ask for this many transcripts a scorer; from MIN_TRANSCRIPTS to it the test runs,
 * said as under it. */
export const RECOMMENDED_TRANSCRIPTS = 30;

/** The test needs this many scorers tested, each on MIN_TRANSCRIPTS transcripts another scored. */
export const MIN_SCORERS = 3;

/** One transcript on one dimension: the judge's position on the scale and each scorer's. */
export type AltTranscript = { judge: number; scorers: { scorer: string; position: number }[] };

/** One scorer's test: its transcripts, how often the judge and the scorer are at least as close
 * to the remaining scorers as the other (ties count for both), the one-sided p-value of
 * rho_scorer - rho_judge >= epsilon (null: under MIN_TRANSCRIPTS, not tested), and whether
 * Benjamini-Yekutieli rejects it. */
export type ScorerTest = {
  scorer: string;
  n: number;
  rho_judge: number;
  rho_scorer: number;
  p: number | null;
  rejected: boolean;
};

/** The test on one dimension; its figures null, and `reason` saying why, when it cannot run. */
export type AltTest = {
  epsilon: number;
  scorers: number;
  winning_rate: number | null;
  passes: boolean | null;
  advantage_probability: number | null;
  per_scorer: ScorerTest[];
  reason: string | null;
};

/**
 * The test on one dimension's transcripts. Per scorer s, on each transcript s and at least one
 * other scored: the judge's and s's negative RMSE against the others' positions; W_judge = 1 when
 * the judge's is at least s's, W_s = 1 when s's is at least the judge's. rho = the means of W;
 * the one-sided t-test of the mean of W_s - W_judge against epsilon (H0: >= epsilon), for each
 * scorer on MIN_TRANSCRIPTS or more; the winning rate, the pass and the advantage over those.
 */
export function altTest(
  transcripts: readonly AltTranscript[],
  epsilon = DEFAULT_EPSILON,
  q = ALT_TEST_Q,
): AltTest {
  // 1. Each scorer's differences, over the transcripts two or more scored.
  const differences = new Map<string, Wins[]>();
  for (const transcript of transcripts) {
    if (transcript.scorers.length < 2) {
      continue;
    }
    for (const left of transcript.scorers) {
      const others = transcript.scorers.filter((entry) => entry !== left);
      const judgeError = squaredError(transcript.judge, others);
      const scorerError = squaredError(left.position, others);
      const wins = {
        judge: judgeError <= scorerError ? 1 : 0,
        scorer: scorerError <= judgeError ? 1 : 0,
      };
      const list = differences.get(left.scorer) ?? [];
      list.push(wins);
      differences.set(left.scorer, list);
    }
  }
  return altTestOfWins(differences, epsilon, q);
}

/** One transcript of a left-out scorer: whether the judge (1) and the scorer (1) are at least as
 * close to the remaining scorers as the other. */
export type Wins = { judge: number; scorer: number };

/** The test from each scorer's wins, transcript by transcript: the steps after the comparisons. */
export function altTestOfWins(
  differences: ReadonlyMap<string, readonly Wins[]>,
  epsilon: number,
  q = ALT_TEST_Q,
): AltTest {
  // 2. Each scorer's figures; its test when it has MIN_TRANSCRIPTS or more.
  const names = [...differences.keys()].sort(compareText);
  const all: ScorerTest[] = names.map((scorer) => {
    const wins = differences.get(scorer)!;
    const n = wins.length;
    const rhoJudge = wins.reduce((total, win) => total + win.judge, 0) / n;
    const rhoScorer = wins.reduce((total, win) => total + win.scorer, 0) / n;
    const d = wins.map((win) => win.scorer - win.judge);
    const p = n >= MIN_TRANSCRIPTS ? tTestBelow(d, epsilon) : null;
    return { scorer, n, rho_judge: rhoJudge, rho_scorer: rhoScorer, p, rejected: false };
  });
  const tested = all.filter((test) => test.p !== null);
  if (tested.length < MIN_SCORERS) {
    return {
      epsilon,
      scorers: tested.length,
      winning_rate: null,
      passes: null,
      advantage_probability: null,
      per_scorer: all,
      reason: tooFewScorers(names.length, tested.length),
    };
  }

  // 3. Benjamini-Yekutieli over the tested scorers; the winning rate and advantage over them.
  const rejected = benjaminiYekutieli(
    tested.map((test) => test.p!),
    q,
  );
  rejected.forEach((reject, i) => {
    tested[i]!.rejected = reject;
  });
  const won = tested.filter((test) => test.rejected).length;
  const winningRate = won / tested.length;
  const advantage = tested.reduce((total, test) => total + test.rho_judge, 0) / tested.length;
  return {
    epsilon,
    scorers: tested.length,
    winning_rate: winningRate,
    passes: winningRate >= 0.5,
    advantage_probability: advantage,
    per_scorer: all,
    reason: null,
  };
}

/** Why the test cannot run: too few scorers, or too few of them on MIN_TRANSCRIPTS. */
function tooFewScorers(scorers: number, tested: number): string {
  if (scorers === 0) {
    return 'no transcript scored by two or more people: the test needs 3 scorers or more';
  }
  const need = `the test needs ${MIN_SCORERS} or more, each on ${MIN_TRANSCRIPTS} or more`;
  return (
    `${tested} of the ${scorers} scorer(s) on ${MIN_TRANSCRIPTS} or more transcripts another ` +
    `scored too: ${need}`
  );
}

/** The sum of squared differences of `position` from each other scorer's: the negative RMSE
 * orders as its negative, the count being the judge's and the scorer's alike. */
function squaredError(position: number, others: { position: number }[]): number {
  return others.reduce((total, other) => total + (position - other.position) ** 2, 0);
}

/**
 * The one-sided one-sample t-test of H0: mean(d) >= epsilon against mean(d) < epsilon, as SciPy's
 * ttest_1samp(d, epsilon, alternative='less'): t = (mean - epsilon) / (s / sqrt(n)), p = P(T_{n-1}
 * <= t). With no spread t is -infinity (p 0) or +infinity (p 1); a mean equal to epsilon with no
 * spread gives no evidence (p 1).
 */
export function tTestBelow(d: readonly number[], epsilon: number): number {
  const n = d.length;
  if (n < 2) {
    return 1;
  }
  const mean = d.reduce((total, value) => total + value, 0) / n;
  const squares = d.reduce((total, value) => total + (value - mean) ** 2, 0);
  const t = (mean - epsilon) / Math.sqrt(squares / (n - 1) / n);
  if (Number.isNaN(t)) {
    return 1;
  }
  return studentTCdf(t, n - 1);
}

/**
 * The Benjamini-Yekutieli step-up procedure at false discovery rate q (valid under any dependence):
 * the p-values sorted, k the largest rank with p_(k) <= k / m * q / H_m (H_m = 1 + 1/2 + ... +
 * 1/m), the k smallest rejected. Returns each p-value's rejection, in the order given.
 */
export function benjaminiYekutieli(p: readonly number[], q: number): boolean[] {
  const m = p.length;
  let harmonic = 0;
  for (let i = 1; i <= m; i++) {
    harmonic += 1 / i;
  }
  const order = p.map((value, index) => ({ value, index })).sort((a, b) => a.value - b.value);
  let largest = -1;
  order.forEach((entry, i) => {
    if (entry.value <= ((i + 1) / m) * (q / harmonic)) {
      largest = i;
    }
  });
  const rejected = p.map(() => false);
  for (let i = 0; i <= largest; i++) {
    rejected[order[i]!.index] = true;
  }
  return rejected;
}

/** Every dimension tested together: Benjamini-Yekutieli over all their scorers' tests. */
export type AltTestAll = {
  epsilon: number;
  tests: number;
  passing: string[];
  not_passing: string[];
  untested: string[];
  passes_all: boolean;
};

/**
 * The claim on every dimension at once: the dimensions' scorer tests pooled under one
 * Benjamini-Yekutieli procedure, each dimension passing when half or more of its scorers are
 * rejected there. Dimensions whose test cannot run are `untested`; `passes_all` only when every
 * dimension passes.
 */
export function altTestAll(
  dimensions: readonly { name: string; alt_test: AltTest }[],
  epsilon: number,
  q = ALT_TEST_Q,
): AltTestAll {
  const tested = dimensions.filter((dimension) => dimension.alt_test.reason === null);
  const testsOf = (test: AltTest) => test.per_scorer.flatMap((scorer) => scorer.p ?? []);
  const pooled = tested.flatMap((dimension) => testsOf(dimension.alt_test));
  const rejected = benjaminiYekutieli(pooled, q);

  const passing: string[] = [];
  const notPassing: string[] = [];
  let at = 0;
  for (const dimension of tested) {
    const count = testsOf(dimension.alt_test).length;
    const won = rejected.slice(at, at + count).filter((reject) => reject).length;
    at += count;
    if (won / count >= 0.5) {
      passing.push(dimension.name);
    } else {
      notPassing.push(dimension.name);
    }
  }
  const untested = dimensions
    .filter((dimension) => dimension.alt_test.reason !== null)
    .map((dimension) => dimension.name);
  return {
    epsilon,
    tests: pooled.length,
    passing,
    not_passing: notPassing,
    untested,
    passes_all: tested.length > 0 && notPassing.length === 0 && untested.length === 0,
  };
}

/** The columns of the test's table, one row a dimension. */
export const ALT_TEST_HEADER = [
  'dimension',
  'scorers',
  'transcripts',
  'won (rate)',
  'advantage',
  'alt-test',
];

/** One dimension's row: its scorers, the range of their transcripts, how many the judge won
 * against (the winning rate), its average advantage probability, and the verdict; `-` and the
 * reason in short when the test cannot run. */
export function altTestCells(name: string, test: AltTest): string[] {
  if (test.winning_rate === null || test.advantage_probability === null) {
    return [name, String(test.scorers), '-', '-', '-', 'too few scorers'];
  }
  const sizes = test.per_scorer.filter((scorer) => scorer.p !== null).map((scorer) => scorer.n);
  const low = Math.min(...sizes);
  const high = Math.max(...sizes);
  const won = test.per_scorer.filter((scorer) => scorer.rejected).length;
  return [
    name,
    String(test.scorers),
    low === high ? String(low) : `${low}-${high}`,
    `${won} (${test.winning_rate.toFixed(2)})`,
    test.advantage_probability.toFixed(2),
    test.passes === true ? 'passes' : 'fails',
  ];
}

/** The test in one cell, for the judges side by side: `passes 2/3 (0.81)`, the scorers the judge
 * won against of those tested and its average advantage probability; `-` when it cannot run. */
export function altTestWords(test: AltTest): string {
  if (test.passes === null || test.advantage_probability === null) {
    return '-';
  }
  const won = test.per_scorer.filter((scorer) => scorer.rejected).length;
  const verdict = test.passes ? 'passes' : 'fails';
  return `${verdict} ${won}/${test.scorers} (${test.advantage_probability.toFixed(2)})`;
}

/** The note under the tables that says how to read the test, as one sentence. */
export function altTestNote(epsilon: number): string {
  return (
    `alt-test (--epsilon ${epsilon}): each scorer left out in turn, the judge "wins" against ` +
    `that scorer unless the others agree with the scorer more often than with the judge by ` +
    `${epsilon} or more of transcripts (one-sided test, Benjamini-Yekutieli at q 0.05 over the ` +
    'scorers); "passes" when it wins against half the scorers or more; advantage: how often ' +
    'the judge is at least as close to the others as the scorer, averaged over scorers (it ' +
    `ranks judges); a scorer on fewer than ${MIN_TRANSCRIPTS} transcripts is not tested; ` +
    `transcripts: the tested scorers' (the authors ask for ${RECOMMENDED_TRANSCRIPTS} or more)`
  );
}

/** Every dimension at once, in words: `passes on all 3 dimensions`, or which pass and which not. */
export function altTestAllWords(all: AltTestAll): string | null {
  const tested = all.passing.length + all.not_passing.length;
  if (tested === 0) {
    return null;
  }
  const head =
    `alternative annotator test at epsilon ${all.epsilon}, every dimension together ` +
    `(Benjamini-Yekutieli over their ${all.tests} scorer tests): `;
  let verdict: string;
  if (all.passes_all) {
    verdict = `passes on all ${tested} dimensions`;
  } else if (all.passing.length === 0) {
    verdict = `passes on none of the ${tested} dimensions tested`;
  } else {
    verdict = `passes on ${all.passing.join(', ')}; not on ${all.not_passing.join(', ')}`;
  }
  const untested =
    all.untested.length === 0 ? '' : `; not tested (too few scorers): ${all.untested.join(', ')}`;
  return head + verdict + untested;
}

/** The test on one dimension in a sentence, for the page's verdicts. */
export function altTestSentence(test: AltTest): string {
  const head = `alternative annotator test at epsilon ${test.epsilon}`;
  if (test.winning_rate === null || test.advantage_probability === null) {
    return `${head}: cannot run (${test.reason})`;
  }
  const won = test.per_scorer.filter((scorer) => scorer.rejected).length;
  const verdict = test.passes === true ? 'passes' : 'fails';
  return (
    `${head}: ${verdict} (the judge wins against ${won} of ${test.scorers} scorers; average ` +
    `advantage probability ${test.advantage_probability.toFixed(2)})`
  );
}

/** Each scorer's test as table rows, the header first: for the page. */
export function altTestScorerRows(test: AltTest): string[][] {
  const header = [
    'left-out scorer',
    'transcripts',
    'judge at least as close',
    'scorer at least as close',
    'p',
    'judge wins',
  ];
  const rows = test.per_scorer.map((scorer) => {
    return [
      scorer.scorer,
      String(scorer.n),
      scorer.rho_judge.toFixed(2),
      scorer.rho_scorer.toFixed(2),
      pValue(scorer.p),
      scorer.p === null ? 'not tested' : scorer.rejected ? 'yes' : 'no',
    ];
  });
  return [header, ...rows];
}

/** A p-value as a cell: three decimals, `< 0.001`, or `-` when not tested. */
function pValue(p: number | null): string {
  if (p === null) {
    return '-';
  }
  return p < 0.001 ? '< 0.001' : p.toFixed(3);
}

/**
 * What a scoring plan gives the test, in one line for `sheet`'s summary: whether it can run (3 or
 * more scorers, each transcript for 2 or more, each scorer on MIN_TRANSCRIPTS), whether every
 * scorer reaches the RECOMMENDED_TRANSCRIPTS the authors ask for, and what would: another scorer,
 * --overlap 2, a larger --sample. `assigned`: each scorer's transcripts; `size` of `total` chosen.
 */
export function altTestPlan(
  assigned: readonly { scorer: string; count: number }[],
  overlap: number,
  size: number,
  total: number,
): string {
  const head = 'alternative annotator test: ';
  const missing: string[] = [];
  if (assigned.length < MIN_SCORERS) {
    missing.push(
      `${assigned.length} scorer(s), it needs ${MIN_SCORERS} or more: name ` +
        `${MIN_SCORERS - assigned.length} more in --scorers`,
    );
  }
  if (overlap < 2) {
    missing.push(
      `--overlap ${overlap}: it compares each scorer with the others on the same transcripts; ` +
        'give --overlap 2 or more',
    );
  }
  if (missing.length > 0) {
    return `${head}cannot run: ${missing.join('; ')}`;
  }

  const tested = assigned.filter((entry) => entry.count >= MIN_TRANSCRIPTS).length;
  if (tested < MIN_SCORERS) {
    const remedy = sampleFor(MIN_TRANSCRIPTS, assigned.length, overlap, size, total);
    return (
      `${head}cannot run: a scorer is tested on ${MIN_TRANSCRIPTS} transcripts or more, and ` +
      `${tested} of ${assigned.length} are (${counted(assigned)}); ${remedy}`
    );
  }
  const few = assigned.filter((entry) => entry.count < RECOMMENDED_TRANSCRIPTS);
  if (few.length === 0) {
    const least = Math.min(...assigned.map((entry) => entry.count));
    return (
      `${head}can run: ${assigned.length} scorers, each on ${least} or more transcripts ` +
      'another scored too'
    );
  }
  const remedy = sampleFor(RECOMMENDED_TRANSCRIPTS, assigned.length, overlap, size, total);
  return (
    `${head}can run, with scorers under the ${RECOMMENDED_TRANSCRIPTS} transcripts its authors ` +
    `ask for (${counted(few)}), so less likely to pass; ${remedy}`
  );
}

/** Scorers and their counts, as `alice 12, bob 20`. */
function counted(assigned: readonly { scorer: string; count: number }[]): string {
  return assigned.map((entry) => `${entry.scorer} ${entry.count}`).join(', ');
}

/** What gives each of `scorers` about `target` transcripts: --sample N, or all with --overlap. */
function sampleFor(
  target: number,
  scorers: number,
  overlap: number,
  size: number,
  total: number,
): string {
  const needed = Math.ceil((target * scorers) / overlap);
  if (needed <= size) {
    return `a larger --sample gives each ${target} or more`;
  }
  if (needed <= total) {
    return `--sample ${needed} or more gives each about ${target}`;
  }
  const overlapNeeded = Math.ceil((target * scorers) / total);
  if (overlapNeeded <= scorers) {
    return `all ${total} transcripts with --overlap ${overlapNeeded} give each about ${target}`;
  }
  return `${total} transcripts cannot give each scorer ${target}`;
}
