// report/plan-sample.ts: the people's sample of a scoring plan, per tutor. `--sample` names each
// tutor's share (`--sample gpt=20,llama=10%,5%`: 20 of gpt's, 10% of llama's, 5% of the others'),
// and the plan says what such a sample supports: how wide each tutor's interval would be from
// people alone, and with a judge that tracks them. Pure functions.
import { EvalInputError, compareText } from '../run-judge.ts';
import { plannedHalfWidth } from './ppi.ts';
import type { ScaleRange } from './ppi.ts';

type Pair = { task_id: string; model: string };

/**
 * Each tutor's count of transcripts to score, when `--sample` names a tutor (`name=N` or
 * `name=P%`, comma-separated, and at most one plain `N` or `P%` for the tutors not named, spread
 * evenly over them); null when it names none (a plain share keeps its meaning: spread evenly over
 * the tutors and tasks). `lenient` (a plan brought up to date): a tutor gone is skipped, a count
 * above what a tutor has now is cut to it, a tutor new since is given the plain share or none.
 */
export function tutorShares(
  value: string | undefined,
  refs: readonly Pair[],
  lenient = false,
): Map<string, number> | null {
  if (value === undefined || !value.includes('=')) {
    return null;
  }

  // 1. The entries: named ones, and the plain one for the rest.
  const totals = new Map<string, number>();
  for (const ref of refs) {
    totals.set(ref.model, (totals.get(ref.model) ?? 0) + 1);
  }
  const tutors = [...totals.keys()].sort(compareText);
  const named = new Map<string, string>();
  let rest: string | undefined;
  for (const entry of value.split(',').map((part) => part.trim())) {
    const at = entry.lastIndexOf('=');
    if (at < 0) {
      if (rest !== undefined) {
        throw new EvalInputError(
          `--sample ${value}: two shares for the tutors not named (${rest}, ${entry}); give one`,
        );
      }
      rest = entry;
      continue;
    }
    const tutor = entry.slice(0, at).trim();
    if (named.has(tutor)) {
      throw new EvalInputError(`--sample ${value}: tutor ${tutor} is given twice; give it once`);
    }
    if (!totals.has(tutor) && !lenient) {
      throw new EvalInputError(
        `--sample ${value}: no transcripts of a tutor "${tutor}"; the tutors are ${tutors.join(', ')}`,
      );
    }
    named.set(tutor, entry.slice(at + 1).trim());
  }

  // 2. Each named tutor's count, of its own transcripts.
  const shares = new Map<string, number>();
  for (const [tutor, amount] of named) {
    const total = totals.get(tutor);
    if (total === undefined) {
      continue;
    }
    const count = countOf(amount, total, `--sample ${value}: ${tutor}=${amount}`, lenient);
    shares.set(tutor, Math.min(count, total));
  }

  // 3. The plain share, spread evenly over the tutors not named (the first in name order take
  // one more where it does not divide).
  const others = tutors.filter((tutor) => !named.has(tutor));
  if (rest === undefined && others.length > 0 && !lenient) {
    throw new EvalInputError(
      `--sample ${value}: tutor(s) ${others.join(', ')} have no share; name them too, or add a ` +
        `share for the rest (like --sample ${value},10%)`,
    );
  }
  if (rest !== undefined && others.length === 0 && !lenient) {
    throw new EvalInputError(
      `--sample ${value}: every tutor is named, so the share ${rest} for the rest is for none; ` +
        'leave it out',
    );
  }
  const left = others.reduce((sum, tutor) => sum + totals.get(tutor)!, 0);
  const spread =
    rest === undefined ? 0 : countOf(rest, left, `--sample ${value}: ${rest}`, lenient);
  spreadEvenly(Math.min(spread, left), others, totals, shares);
  return shares;
}

/** How many transcripts the shares add up to. */
export function shareTotal(shares: ReadonlyMap<string, number>): number {
  let total = 0;
  for (const count of shares.values()) {
    total += count;
  }
  return total;
}

/** `N` or `P%` of `total` (P% rounded, at least one); `what` names it in an error. */
function countOf(amount: string, total: number, what: string, lenient: boolean): number {
  const percent = /^(\d+(?:\.\d+)?)%$/.exec(amount);
  if (percent) {
    const share = Number(percent[1]);
    if (share <= 0 || share > 100) {
      throw new EvalInputError(`${what}: a share must be above 0% and at most 100%`);
    }
    return Math.max(1, Math.round((total * share) / 100));
  }
  const count = Number(amount);
  if (!/^\d+$/.test(amount) || count < 1) {
    throw new EvalInputError(
      `${what}: give a number of transcripts (like 12) or a share (like 25%)`,
    );
  }
  if (count > total && !lenient) {
    throw new EvalInputError(`${what}: there are only ${total} transcripts`);
  }
  return count;
}

/** `count` transcripts over `tutors`, one at a time to the one with the fewest that has more. */
function spreadEvenly(
  count: number,
  tutors: readonly string[],
  totals: ReadonlyMap<string, number>,
  shares: Map<string, number>,
): void {
  for (const tutor of tutors) {
    shares.set(tutor, 0);
  }
  for (let dealt = 0; dealt < count; dealt++) {
    let next: string | undefined;
    for (const tutor of tutors) {
      const open = shares.get(tutor)! < totals.get(tutor)!;
      if (open && (next === undefined || shares.get(tutor)! < shares.get(next)!)) {
        next = tutor;
      }
    }
    shares.set(next!, shares.get(next!)! + 1);
  }
}

/** The correlation with people a judge is assumed to reach, for the plan's second figure. */
const PLANNED_CORRELATION = 0.7;

/**
 * What the sample supports, as lines for the plan's summary: per count of transcripts a tutor,
 * roughly how wide (+/-) each tutor's 95% interval would be from people alone on each of the
 * rubric's scales, a spread of a quarter of the scale assumed; and with a judge that correlates
 * 0.7 with them, the judge scoring every transcript.
 */
export function sampleSupport(
  chosen: readonly Pair[],
  refs: readonly Pair[],
  scales: readonly ScaleRange[],
): string[] {
  const chosenOf = countsBy(chosen);
  const totalOf = countsBy(refs);
  const byCount = new Map<number, { tutor: string; total: number }[]>();
  for (const [tutor, total] of [...totalOf].sort((a, b) => compareText(a[0], b[0]))) {
    const count = chosenOf.get(tutor) ?? 0;
    byCount.set(count, [...(byCount.get(count) ?? []), { tutor, total }]);
  }

  const distinct = [...new Map(scales.map((scale) => [`${scale.low}-${scale.high}`, scale]))];
  const lines = [
    "  what the sample supports: roughly each tutor mean's 95% interval (people's scores assumed",
    '  to spread over a quarter of the scale):',
  ];
  for (const [count, tutors] of [...byCount].sort((a, b) => a[0] - b[0])) {
    const names = tutors.map((entry) => `${entry.tutor} (of ${entry.total})`);
    const who = tutors.length > 3 ? `${tutors.length} tutors` : names.join(', ');
    if (count < 2) {
      lines.push(`    ${count} a tutor, ${who}: no interval (people must score 2 or more)`);
      continue;
    }
    // The judge helps least where a tutor has the fewest transcripts besides the sample.
    const total = Math.min(...tutors.map((entry) => entry.total));
    const alone = distinct.map(([name, scale]) => {
      return `+/- ${halfWidth(count, total, scale, 0)} on ${name}`;
    });
    const judged = distinct.map(([name, scale]) => {
      return `+/- ${halfWidth(count, total, scale, PLANNED_CORRELATION)} on ${name}`;
    });
    lines.push(
      `    about ${count} transcripts a tutor, ${who}: ${alone.join(', ')} from people alone;`,
    );
    lines.push(
      `      ${judged.join(', ')} with a judge of every transcript that correlates ` +
        `${PLANNED_CORRELATION} with people`,
    );
  }
  return lines;
}

function halfWidth(count: number, total: number, scale: ScaleRange, correlation: number): string {
  return plannedHalfWidth(count, total - count, scale, correlation).toFixed(2);
}

function countsBy(refs: readonly Pair[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const ref of refs) {
    counts.set(ref.model, (counts.get(ref.model) ?? 0) + 1);
  }
  return counts;
}
