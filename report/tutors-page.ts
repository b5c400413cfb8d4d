// report/tutors-page.ts: the tutors compared, on the report's page (report/html.ts): per dimension
// a plot of the tutors' PPI intervals side by side with the judge-only means beside them (inline
// SVG, drawn here), the table, the order established and every pair's difference. Pure: the
// tutors' figures in, HTML out, every name escaped.
import { figure, withInterval } from './analysis.ts';
import { escapeHtml } from './html-escape.ts';
import type { TutorDifference, TutorMean } from './ppi.ts';
import { gainWords, rankingText, shortReason } from './tutors.ts';
import type { TutorsView } from './tutors.ts';

/** The section's style: the plot's marks (its own classes, so nothing of the page's forest plot
 * changes), the ranking line. */
export const TUTORS_CSS = `.tutors-plot{display:block;width:100%;max-width:800px;height:auto;margin:8px 0}
.tutors-plot text{font:12px system-ui,sans-serif;fill:#111}
.tutors-plot .tick line{stroke:#ddd}.tutors-plot .tick text{fill:#555;font-size:11px}
.tutors-plot .axis{stroke:#888}
.tutors-plot .ppi line{stroke:#047857;stroke-width:3}.tutors-plot .ppi rect{fill:#047857}
.tutors-plot .people line{stroke:#ea580c;stroke-width:1.5}.tutors-plot .people rect{fill:#ea580c}
.tutors-plot .judge line{stroke:#1d4ed8;stroke-width:1.5}.tutors-plot .judge circle{fill:#1d4ed8}
.tutors-plot .biased circle{stroke:#b91c1c;stroke-width:2}
.ranking{font-weight:bold}`;

/** This section's definitions in docs/analysis.md. */
const SECTION = '#the-tutors-compared-the-judge-corrected-by-the-peoples-sample';

/** The section: what it shows and how the sample was drawn, then each dimension. */
export function tutorsSection(
  view: TutorsView,
  dimensions: readonly { name: string; labels: readonly number[] }[],
  docs: string,
): string {
  const sample = view.human_sample;
  const left = sample.left_out;
  const intro =
    "<p>Each tutor's mean per dimension from both the judge and the people's sample (PPI++): the " +
    "judge's mean over all the tutor's transcripts, corrected by its error on the ones people " +
    "scored. Beside it the judge's mean alone (biased by its leniency) and the people's alone " +
    `(on few transcripts). <a href="${docs.replace(/#.*$/, SECTION)}">How it is computed</a>.</p>`;
  const sampleText =
    `Human sample: ${sample.design_text}; ${sample.transcripts_scored} transcript(s) scored and ` +
    `judged; left it (assumed missing at random): ${left.transcripts} transcript(s), from ` +
    `${left.blank_rows} blank row(s), ${left.unsure_rows} unsure, ${left.stale_rows} stale; ` +
    `${sample.scored_not_judged} scored but not judged.`;
  const parts = dimensions.map((dimension) => dimensionPart(view, dimension));
  return `<section class="tutors">${intro}<p>${escapeHtml(sampleText)}</p>${parts.join('')}</section>\n`;
}

/** One dimension: its plot on its scale, its table, the order and the differences. */
function dimensionPart(view: TutorsView, dimension: { name: string; labels: readonly number[] }) {
  const name = dimension.name;
  const tutors = view.models.map((row) => ({ model: row.model, entry: row.ppi?.[name] ?? null }));
  const low = Math.min(...dimension.labels);
  const high = Math.max(...dimension.labels);
  const axis = { min: low, max: high > low ? high : low + 1 };
  const svg = tutorsPlot(tutors, axis, `${name}: the tutors' means`);
  const caption =
    `${name}: each tutor's PPI mean and 95% interval (green), the people-only one (orange, ` +
    'below), the judge-only mean over all it judged (blue dot above; ringed red, and "bias" in ' +
    "the table, where it lies outside the PPI interval: the judge's bias on that tutor); the " +
    "axis is the dimension's scale.";
  const plot = `<figure>${svg}<figcaption>${escapeHtml(caption)}</figcaption></figure>`;
  const ranking = rankingText(view.tutor_ranking[name] ?? { order: [], established: [] });
  const order =
    `<p><span class="ranking">${escapeHtml(`Order: ${ranking}`)}</span> ` +
    "('>' established at family-wise error 5% over the pairs, Holm; '~' not established)</p>";
  const pairs = view.model_differences.filter((entry) => entry.dimension === name);
  return (
    `<h3>${escapeHtml(name)}</h3>${plot}${tableHtml(tutorRows(tutors), tutorCaption(name))}` +
    order +
    (pairs.length > 0 ? tableHtml(differenceRows(pairs), differenceCaption(name)) : '')
  );
}

/** The tutors' table: PPI first, then the judge alone and the people alone, the judge's gain. */
function tutorRows(tutors: { model: string; entry: TutorMean | null }[]): string[][] {
  const header = [
    'tutor',
    'PPI mean [95% CI]',
    'judge only (all judged)',
    'people only',
    'n human',
    'N judged',
    'lambda',
    'the judge',
  ];
  const rows = tutors.map(({ model, entry }) => {
    if (entry === null) {
      return [model, '-', '-', '-', '0', '0', '-', 'no judged transcript'];
    }
    const bias = entry.judge_biased === true ? ' bias' : '';
    return [
      model,
      entry.estimate === null ? shortReason(entry) : withInterval(entry.estimate, entry.ci95),
      withInterval(entry.judge_only_mean, entry.judge_only_ci95) + bias,
      withInterval(entry.human_only_mean, entry.human_only_ci95),
      String(entry.n_human),
      String(entry.n_judged),
      figure(entry.lambda),
      entry.estimate === null ? '-' : gainWords(entry),
    ];
  });
  return [header, ...rows];
}

function differenceRows(pairs: TutorDifference[]): string[][] {
  const rows = pairs.map((entry) => [
    `${entry.a} − ${entry.b}`,
    withInterval(entry.diff, entry.ci95),
    entry.established ? 'yes' : 'no',
  ]);
  return [['pair', 'difference [95% CI]', 'order established'], ...rows];
}

function tutorCaption(name: string): string {
  return (
    `${name} per tutor: the PPI mean first; the judge's mean over all it judged ("bias": outside ` +
    "the PPI interval); the people's over the n they scored; what the judge adds to the interval."
  );
}

function differenceCaption(name: string): string {
  return (
    `${name}: each pair of tutors, a minus b, with its 95% interval (the two samples ` +
    "independent); an order established at family-wise error 5% over the pairs (Holm's procedure)."
  );
}

/** A table with its caption under it, in a box that scrolls sideways on a narrow window. */
function tableHtml(rows: string[][], caption: string): string {
  const cells = (tag: string, row: string[]) =>
    `<tr>${row.map((cell) => `<${tag}>${escapeHtml(cell)}</${tag}>`).join('')}</tr>`;
  const body = rows.slice(1).map((row) => cells('td', row));
  const captioned = `<caption>${escapeHtml(caption)}</caption>`;
  return `<div class="wide"><table>${captioned}${cells('th', rows[0]!)}${body.join('')}</table></div>`;
}

// ---- The plot ------------------------------------------------------------------------------------

const PLOT = { width: 800, left: 170, right: 560, row: 34, top: 8, axis: 26 };

/** The tutors' rows: the judge-only mean above, the PPI interval in the middle, the people-only
 * one below; the figures on the right. */
export function tutorsPlot(
  tutors: { model: string; entry: TutorMean | null }[],
  axis: { min: number; max: number },
  label: string,
): string {
  const at = (value: number) => {
    const share =
      (Math.min(axis.max, Math.max(axis.min, value)) - axis.min) / (axis.max - axis.min);
    return round(PLOT.left + share * (PLOT.right - PLOT.left));
  };
  const height = PLOT.top + tutors.length * PLOT.row;
  const parts: string[] = [ticks(axis, height, at)];
  tutors.forEach(({ model, entry }, i) => {
    const middle = PLOT.top + i * PLOT.row + PLOT.row / 2;
    parts.push(`<text x="0" y="${middle + 4}">${escapeHtml(shorten(model, 24))}</text>`);
    if (entry !== null) {
      parts.push(
        interval('judge', entry.judge_only_mean, null, middle - 9, at, entry.judge_biased),
      );
      parts.push(interval('ppi', entry.estimate, entry.ci95, middle, at, false));
      parts.push(
        interval('people', entry.human_only_mean, entry.human_only_ci95, middle + 9, at, false),
      );
    }
    const text =
      entry?.estimate === null || entry === null
        ? 'no estimate'
        : withInterval(entry.estimate, entry.ci95);
    parts.push(`<text x="${PLOT.right + 14}" y="${middle + 4}">${escapeHtml(text)}</text>`);
  });
  parts.push(
    `<line class="axis" x1="${PLOT.left}" x2="${PLOT.right}" y1="${height}" y2="${height}"/>`,
  );
  const total = height + PLOT.axis;
  const attributes = `class="tutors-plot" viewBox="0 0 ${PLOT.width} ${total}" role="img"`;
  const title = `<title>${escapeHtml(label)}</title>`;
  return `<svg xmlns="http://www.w3.org/2000/svg" ${attributes}>${title}${parts.join('')}</svg>`;
}

/** One mark: its interval as a line, its value as a square (a dot for the judge). */
function interval(
  who: 'ppi' | 'people' | 'judge',
  value: number | null,
  ci: readonly [number, number] | null,
  y: number,
  at: (value: number) => number,
  biased: boolean | null,
): string {
  const line = ci === null ? '' : `<line x1="${at(ci[0])}" x2="${at(ci[1])}" y1="${y}" y2="${y}"/>`;
  let dot = '';
  if (value !== null) {
    const x = at(value);
    dot =
      who === 'judge'
        ? `<circle cx="${x}" cy="${y}" r="4"/>`
        : `<rect x="${round(x - 3.5)}" y="${round(y - 3.5)}" width="7" height="7"/>`;
  }
  const kind = biased === true ? `${who} biased` : who;
  return `<g class="${kind}">${line}${dot}</g>`;
}

/** Grid lines at every half point (every point on a wide scale), their values under the axis. */
function ticks(axis: { min: number; max: number }, height: number, at: (value: number) => number) {
  const step = axis.max - axis.min > 4 ? 1 : 0.5;
  const lines: string[] = [];
  for (let value = axis.min; value <= axis.max + 1e-9; value += step) {
    const x = at(value);
    lines.push(
      `<g class="tick"><line x1="${x}" x2="${x}" y1="${PLOT.top}" y2="${height}"/>` +
        `<text x="${x}" y="${height + 16}" text-anchor="middle">${round(value)}</text></g>`,
    );
  }
  return lines.join('');
}

function shorten(label: string, length: number): string {
  return label.length > length ? `${label.slice(0, length - 1)}…` : label;
}

function round(value: number): number {
  return Math.round(value * 100) / 100 + 0;
}
