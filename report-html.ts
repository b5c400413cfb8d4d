// report-html.ts: the report as one self-contained HTML page (`report.ts --html FILE`): the tables,
// each confusion matrix as a shaded grid and each interval as a bar, then every transcript with its
// scores side by side, the notes and its text. Inline style, no script, nothing fetched; every
// name, note and transcript is escaped, so a transcript holding <script> shows it as text.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { EvalError, EvalInputError } from './run-judge.ts';
import { comparePairs, loadTranscript, pairKey, transcriptToText } from './run-judge.ts';
import type { HumanRow, ScoreRow, TranscriptRef } from './run-judge.ts';
import { groupBy, reportCells } from './report-analysis.ts';
import type { DimensionReport, ModelReport, Report } from './report-analysis.ts';

/** A transcript with a judge or a human row, and those rows. */
type TranscriptRows = {
  model: string;
  task_id: string;
  judge: ScoreRow | undefined;
  humans: HumanRow[];
};

/** One transcript on the page: its rows, and its text or why it cannot be shown. */
export type TranscriptEntry = TranscriptRows & { transcript: string | { unavailable: string } };

/** Writes the page: the report, then every transcript with a judge or a human row. */
export function writeHtmlPage(
  file: string,
  report: Report,
  judged: ScoreRow[],
  humans: HumanRow[],
  transcriptsDir: string,
): void {
  // 1. Every transcript with a row, with its text from the transcripts folder.
  const entries = transcriptEntries(judged, humans).map((rows) => {
    const transcriptPath = path.join(transcriptsDir, rows.model, `${rows.task_id}.json`);
    const ref = { task_id: rows.task_id, model: rows.model, path: transcriptPath };
    return { ...rows, transcript: transcriptTextOf(ref) };
  });

  // 2. The page; a path it cannot write is an input error naming the file, not a stack trace.
  const html = renderHtml(report, entries);
  try {
    fs.writeFileSync(file, html);
  } catch (error) {
    const reason = (error as Error).message;
    throw new EvalInputError(`${file}: cannot write the HTML page (${reason})`, { cause: error });
  }
}

/** Every transcript with a judge or a human row, sorted by model then task, with those rows. */
export function transcriptEntries(judged: ScoreRow[], humans: HumanRow[]): TranscriptRows[] {
  const judgeOf = new Map(judged.map((row) => [pairKey(row.task_id, row.model), row]));
  const humansOf = groupBy(humans, (row) => pairKey(row.task_id, row.model));

  const transcripts = new Map<string, { model: string; task_id: string }>();
  for (const row of [...judged, ...humans]) {
    transcripts.set(pairKey(row.task_id, row.model), { model: row.model, task_id: row.task_id });
  }

  const sorted = [...transcripts.values()].sort(comparePairs);
  return sorted.map((ref) => {
    const key = pairKey(ref.task_id, ref.model);
    return {
      model: ref.model,
      task_id: ref.task_id,
      judge: judgeOf.get(key),
      humans: humansOf.get(key) ?? [],
    };
  });
}

/** A transcript's text; one missing or unreadable is a note in its place, never a crash. */
function transcriptTextOf(ref: TranscriptRef): TranscriptEntry['transcript'] {
  try {
    return transcriptToText(loadTranscript(ref));
  } catch (error) {
    if (!(error instanceof EvalError)) {
      throw error;
    }
    // Cut short: a schema error can run long.
    return { unavailable: `transcript not shown: ${error.message.slice(0, 300)}` };
  }
}

// ---- The page ----------------------------------------------------------------------------------

const PAGE_CSS = `body{font:14px/1.45 system-ui,sans-serif;color:#111;margin:24px;max-width:1140px}
table{border-collapse:collapse;margin:6px 0 18px}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:left}
td{white-space:nowrap}
th{background:#f3f4f6}
.grid td,.grid th{text-align:center;min-width:24px;padding:2px 6px}
.grid td.dark{color:#fff}
.bars{display:grid;grid-template-columns:auto auto 150px auto;gap:3px 6px;
align-items:center;font-size:12px}
.bar{position:relative;height:10px;background:#e5e7eb}
.bar i,.bar b{position:absolute;top:0;bottom:0}
.bar i{background:#93c5fd}
.bar.human i{background:#fdba74}
.bar b{top:-3px;bottom:-3px;width:2px;margin-left:-1px;background:#000}
.differs{background:#fcd34d;font-weight:bold}
section{border-top:1px solid #ccc;margin-top:18px}
.notes{white-space:pre-wrap}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f6f6f6;padding:8px}`;

/** The report as one page: its tables with grids and bars, then every transcript's entry. */
export function renderHtml(report: Report, entries: TranscriptEntry[]): string {
  const cells = reportCells(report);
  const title = 'The judge against the human scores';
  const agreement = agreementTable(report, cells.agreement);
  const models = modelsTable(report, cells.models);
  const names = report.dimensions.map((dimension) => dimension.name);
  const sections = entries.map((entry) => transcriptSection(entry, names));

  return `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>${title}</title>
<style>${PAGE_CSS}</style></head><body><h1>${title}</h1><p>${escapeHtml(cells.summary)}</p>
<h2>Agreement per dimension</h2>${agreement}
<h2>Models side by side</h2>${models}
<h2>Transcripts</h2><p><span class="differs">Highlighted</span>: a human's score that differs from the judge's.</p>
${sections.join('')}</body></html>\n`;
}

/** The agreement table, each dimension's confusion matrix as a grid in one more column. */
function agreementTable(report: Report, rows: string[][]): string {
  const grids = report.dimensions.map(confusionGrid);
  return tableWithColumn(rows, 'confusion (rows: human; columns: judge)', grids);
}

/** The models table, each mean and its interval as a bar in one more column. */
function modelsTable(report: Report, rows: string[][]): string {
  const bars = report.models.flatMap((row) => {
    return report.dimensions.map((dimension) => intervalBars(row, dimension));
  });
  return tableWithColumn(rows, 'means and 95% intervals', bars);
}

/** A table of text cells (the header first) and one more column: `title`, then HTML a row. */
function tableWithColumn(rows: string[][], title: string, html: string[]): string {
  const header = tableRow('th', rows[0] ?? [], `<th>${title}</th>`);
  const body = rows.slice(1).map((row, i) => tableRow('td', row, `<td>${html[i]}</td>`));
  return `<table>${header}${body.join('')}</table>`;
}

/** A dimension's confusion matrix as a grid, each count shaded by its share of the largest. */
function confusionGrid(dimension: DimensionReport): string {
  const confusion = dimension.judge_vs_human.confusion;
  const largest = Math.max(1, ...confusion.flat());

  const head = tableRow('th', ['human ↓ judge →', ...dimension.labels.map(String)]);
  const rows = confusion.map((counts, i) => {
    const shaded = counts.map((count) => shadedCell(count, largest));
    return tableRow('th', [String(dimension.labels[i])], shaded.join(''));
  });
  return `<table class="grid">${head}${rows.join('')}</table>`;
}

/** A count as a cell shaded by count / largest; white text on the darker half. */
function shadedCell(count: number, largest: number): string {
  const share = count / largest;
  const dark = share > 0.5 ? ' class="dark"' : '';
  return `<td style="background:rgba(29,78,216,${share.toFixed(2)})"${dark}>${count}</td>`;
}

/** A model's judge and human means on one dimension, each as a bar with its interval. */
function intervalBars(row: ModelReport, dimension: DimensionReport): string {
  const name = dimension.name;
  const judge = intervalBar('judge', row.judge_mean[name], row.judge_ci95[name], dimension.labels);
  const human = intervalBar('human', row.human_mean[name], row.human_ci95[name], dimension.labels);
  return `<div class="bars">${judge}${human}</div>`;
}

/** A mean as a mark, its interval as a span, on the dimension's whole scale (not the data's). */
function intervalBar(
  who: 'judge' | 'human',
  mean: number | null | undefined,
  ci: [number, number] | null | undefined,
  labels: number[],
): string {
  const lowest = labels[0]!;
  const highest = labels.at(-1)!;
  const at = (value: number) => ((value - lowest) / (highest - lowest || 1)) * 100;

  let span = '';
  if (ci) {
    span = `<i style="left:${at(ci[0]).toFixed(1)}%;right:${(100 - at(ci[1])).toFixed(1)}%"></i>`;
  }
  let mark = '';
  if (mean !== null && mean !== undefined) {
    mark = `<b style="left:${at(mean).toFixed(1)}%"></b>`;
  }

  const bar = `<div class="bar ${who}">${span}${mark}</div>`;
  return `<span>${who}</span><span>${lowest}</span>${bar}<span>${highest}</span>`;
}

/** One transcript: the scores side by side, the notes, then the text folded away. */
function transcriptSection(entry: TranscriptEntry, dimensions: string[]): string {
  const scorers = entry.humans.map((row) => row.scorer || 'human');
  const header = tableRow('th', ['dimension', 'judge', ...scorers]);
  const rows = dimensions.map((name) => scoreRow(name, entry));
  const scores = `<table>${header}${rows.join('')}</table>`;

  const notes = [notesParagraph('judge', entry.judge?.notes ?? '')];
  entry.humans.forEach((row, i) => notes.push(notesParagraph(scorers[i]!, row.notes)));

  let transcript: string;
  if (typeof entry.transcript === 'string') {
    const text = escapeHtml(entry.transcript);
    transcript = `<details><summary>Transcript</summary><pre>${text}</pre></details>`;
  } else {
    transcript = `<p><em>${escapeHtml(entry.transcript.unavailable)}</em></p>`;
  }

  const heading = `<h3>${escapeHtml(`${entry.model} / ${entry.task_id}`)}</h3>`;
  return `<section>${heading}${scores}${notes.join('')}${transcript}</section>\n`;
}

/** One dimension's row: the judge's score, then each human's, highlighted where it differs. */
function scoreRow(dimension: string, entry: TranscriptEntry): string {
  const judgeScore = entry.judge?.scores[dimension];
  const humanCells = entry.humans.map((row) => {
    const score = row.scores[dimension];
    const differs = score !== undefined && judgeScore !== undefined && score !== judgeScore;
    return `<td${differs ? ' class="differs"' : ''}>${scoreText(score)}</td>`;
  });
  return tableRow('th', [dimension], `<td>${scoreText(judgeScore)}</td>${humanCells.join('')}`);
}

/** A score as text; an en dash for one not given. */
function scoreText(score: number | undefined): string {
  return score === undefined ? '–' : String(score);
}

/** Someone's notes as a paragraph; nothing when they wrote none. */
function notesParagraph(who: string, notes: string): string {
  if (notes === '') {
    return '';
  }
  return `<p class="notes"><b>${escapeHtml(who)}'s notes:</b> ${escapeHtml(notes)}</p>`;
}

/** One row of escaped text cells, each in `tag`, then `html` as it is. */
function tableRow(tag: 'td' | 'th', cells: string[], html = ''): string {
  const escaped = cells.map((cell) => `<${tag}>${escapeHtml(cell)}</${tag}>`);
  return `<tr>${escaped.join('')}${html}</tr>\n`;
}

/** Untrusted text (transcripts, notes, every name) as HTML text: `<script>` shows, never runs. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);
}
