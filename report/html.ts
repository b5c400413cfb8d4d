// report/html.ts: the report as one self-contained HTML page (`report.ts --html FILE`), in the
// order a researcher reads it: the run and one verdict line per dimension; per dimension a forest
// plot (inline SVG), the per-model table, the confusion grid and the rubric's levels; then every
// transcript, the most disputed first, behind an index its filters narrow. Inline style and one
// small script of its own (the filters), nothing fetched; every name, note and transcript is
// escaped, so a transcript holding <script> shows it as text.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { EvalInputError, comparePairs, compareText, pairKey } from '../run-judge.ts';
import type { HumanRow, Rubric, ScoreRow } from '../run-judge.ts';
import { figure, groupBy, reportCells, undefinedShare, withInterval } from './analysis.ts';
import type { DimensionReport, ModelReport, Report } from './analysis.ts';
import { altTestAllWords, altTestScorerRows, altTestSentence } from './alt-test.ts';
import { escapeHtml } from './html-escape.ts';
import { TUTORS_CSS, tutorsSection } from './tutors-page.ts';
import type { TutorsView } from './tutors.ts';
import { pageScript } from './page-script.ts';
import { MIN_TRANSCRIPTS, namesInWords, verdictSentences } from './verdicts.ts';
import { listedTranscripts, transcriptTextOf } from './inputs.ts';
import type { Audit, TranscriptText } from './inputs.ts';

/** What the page says about the run, from the audit log; null where the log does not say. */
export type RunFacts = {
  /** Each judge that scored a row, with how many, and how many of those as a fallback. */
  judges: { name: string; rows: number; fallback_rows: number }[];
  rubric_sha256: string | null;
  prompt_template_sha256: string | null;
  last_judged: string | null;
  /** null: some answer's price is unknown, so the total is too. */
  total_cost_usd: number | null;
  human_scoring: string | null;
};

/** From the audit log, per transcript: which judge scored it, when, and its thinking text. */
export type JudgedBy = {
  judge: string;
  fallback: boolean;
  timestamp: string | null;
  thinking: string[];
};

/** A transcript with a judge or a human row, and those rows. */
type TranscriptRows = {
  model: string;
  task_id: string;
  judge: ScoreRow | undefined;
  humans: HumanRow[];
};

/** One transcript on the page: its rows, who judged it, its text or why it cannot be shown. */
export type TranscriptEntry = TranscriptRows & {
  judged_by: JudgedBy | undefined;
  transcript: TranscriptText;
};

/** Everything the page shows. */
export type PageInputs = {
  report: Report;
  rubric: Rubric;
  run: RunFacts;
  entries: TranscriptEntry[];
  /** The link to docs/analysis.md, relative to the page: each figure links to its definition. */
  docs?: string;
  /** The tutors compared through the people's sample (report/tutors.ts); none: no such section. */
  tutors?: TutorsView;
  /** What the page must say before anything (rows of a mock judge); none: nothing. */
  warning?: string;
};

/** The definitions of the figures, in the project's docs/analysis.md. */
const DEFINITIONS = '#how-the-figures-are-computed';

/** Writes the page: the run, the report, then every transcript with a judge or a human row. */
export function writeHtmlPage(
  file: string,
  inputs: {
    report: Report;
    rubric: Rubric;
    audit: Audit;
    judged: ScoreRow[];
    humans: HumanRow[];
    transcriptsDir: string;
    tutors?: TutorsView;
    warning?: string;
  },
): void {
  // 1. Every transcript with a row, with who judged it and its text from the transcripts folder.
  // Only a transcript the folder's listing holds is read: a row's model cell such as `../../x`, or
  // a link out of the folder, never brings another file into a page made to be shared.
  const judgedBy = judgedByOf(inputs.audit);
  const listed = listedTranscripts(inputs.transcriptsDir);
  const entries = transcriptEntries(inputs.judged, inputs.humans).map((rows) => {
    const key = pairKey(rows.task_id, rows.model);
    const ref = listed.refs.get(key);
    const transcript = ref ? transcriptTextOf(ref) : { unavailable: listed.missing(rows) };
    return { ...rows, judged_by: judgedBy.get(key), transcript };
  });

  // 2. The page; a path it cannot write is an input error naming the file, not a stack trace.
  const run = runFacts(inputs.audit);
  const analysisDoc = fileURLToPath(new URL('../docs/analysis.md', import.meta.url));
  const docs = encodeURI(path.relative(path.dirname(path.resolve(file)), analysisDoc));
  const tutors = inputs.tutors;
  const html = renderHtml({
    report: inputs.report,
    rubric: inputs.rubric,
    run,
    entries,
    docs,
    tutors,
    warning: inputs.warning,
  });
  try {
    fs.writeFileSync(file, html);
  } catch (error) {
    const reason = (error as Error).message;
    throw new EvalInputError(`${file}: cannot write the HTML page (${reason})`, { cause: error });
  }
}

/** The run's facts the audit log holds; what it does not hold is null ("unknown" on the page). */
export function runFacts(audit: Audit): RunFacts {
  const judges = [...audit.rows_by_judge].map(([name, rows]) => {
    return { name, rows, fallback_rows: audit.fallback_rows.get(name) ?? 0 };
  });

  // A log with no record of the human scoring says nothing; rows judged before it say so.
  let humanScoring = audit.human_scoring === null ? null : stateText(audit.human_scoring);
  if (audit.before_human_scoring_rows > 0) {
    const before = `${audit.before_human_scoring_rows} row(s) judged before human scoring`;
    humanScoring = humanScoring === null ? before : `${humanScoring}; ${before}`;
  }

  return {
    judges,
    rubric_sha256: hashesText(audit.rubric_sha256, 'rubrics'),
    prompt_template_sha256: hashesText(audit.prompt_template_sha256, 'templates'),
    last_judged: audit.last_judged,
    total_cost_usd: audit.total_cost_usd,
    human_scoring: humanScoring,
  };
}

/** The hashes the rows were judged with: one, several (said to be mixed), or null for none. */
function hashesText(hashes: string[], what: string): string | null {
  if (hashes.length === 0) {
    return null;
  }
  return hashes.length === 1 ? hashes[0]! : `mixed ${what}: ${hashes.join(', ')}`;
}

/** The log's record of the human scoring as text: a string as it is, anything else as JSON. */
function stateText(state: unknown): string {
  return typeof state === 'string' ? state : JSON.stringify(state);
}

/** Per transcript, who judged it, when, and its thinking, as the audit log says. */
function judgedByOf(audit: Audit): Map<string, JudgedBy> {
  const judgedBy = new Map<string, JudgedBy>();
  for (const [key, row] of audit.rows) {
    const judged = {
      judge: row.judge,
      fallback: row.fallback,
      timestamp: row.timestamp,
      thinking: row.thinking,
    };
    judgedBy.set(key, judged);
  }
  return judgedBy;
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

// ---- The page ----------------------------------------------------------------------------------

const PAGE_CSS = `body{font:14px/1.45 system-ui,sans-serif;color:#111;margin:24px auto;
padding:0 24px;max-width:1140px}
h2{margin-top:28px}
table{border-collapse:collapse;margin:6px 0 18px}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
td{white-space:nowrap}
th{background:#f3f4f6}
.wide{overflow-x:auto;max-width:100%}
.run th{white-space:nowrap}
.run td{white-space:normal;overflow-wrap:anywhere}
.verdicts li{margin:2px 0}
.as_good{color:#166534;font-weight:bold}
.below{color:#b91c1c;font-weight:bold}
.undetermined{color:#92400e;font-weight:bold}
.forest{display:block;width:100%;max-width:800px;height:auto;margin:8px 0}
.forest text{font:12px system-ui,sans-serif;fill:#111}
.forest .tick text{fill:#555;font-size:11px}
.forest text.panel{font-weight:bold}
.forest .tick line{stroke:#ddd}
.forest .zero line{stroke:#555;stroke-dasharray:3 2}
.forest .axis{stroke:#888}
.forest .interval line{stroke-width:2}
.forest .judge line{stroke:#1d4ed8}
.forest .judge circle{fill:#1d4ed8}
.forest .human line{stroke:#ea580c}
.forest .human rect{fill:#ea580c}
.forest .ceiling line{stroke:#6b7280}
.forest .ceiling rect{fill:#6b7280}
.forest .gap line{stroke:#111}
.forest .gap rect{fill:#111}
.grid td,.grid th{text-align:center;min-width:24px;padding:2px 6px}
.grid td.dark{color:#fff}
.grid td.diagonal{outline:2px solid #111;outline-offset:-3px;font-weight:bold}
.grid .total{background:#f3f4f6;font-weight:bold}
caption{caption-side:bottom;text-align:left;padding-top:4px;color:#444;font-size:13px;
white-space:normal}
figure{margin:8px 0}
figcaption{color:#444;font-size:13px}
.filters{display:flex;flex-wrap:wrap;gap:8px 16px;align-items:center;margin:8px 0}
ul.notes{color:#444;font-size:13px}
th a{color:inherit}
.index td{padding:1px 8px}
.differs{background:#fcd34d;font-weight:bold}
section.transcript{border-top:1px solid #ccc;margin-top:18px}
section.dimension{border-top:2px solid #999;margin-top:24px}
.notes{white-space:pre-wrap}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f6f6f6;padding:8px}
.rubric dt{font-weight:bold}
.rubric dd{margin:0 0 6px 2em}
@media (max-width:900px){td{white-space:normal}td:first-child{white-space:nowrap}
body{padding:0 12px}}`;

const TITLE = 'The judge against the human scores';

/** The page: the run and the verdicts, each dimension, the tables, then every transcript. */
export function renderHtml(page: PageInputs): string {
  const report = page.report;
  const docs = `${page.docs ?? 'docs/analysis.md'}${DEFINITIONS}`;
  const cells = reportCells(report);
  const entries = byDisagreement(page.entries, report);
  const dimensions = report.dimensions.map((dimension) => {
    return dimensionSection(dimension, report, page.rubric, docs);
  });
  const names = report.dimensions.map((dimension) => dimension.name);
  const transcripts = entries.map((entry) => transcriptSection(entry, names, report));
  const figureTables = cells.tables.slice(0, 4).map((table, i) => {
    const caption = figureCaption(i, report);
    return wide(htmlTable(withoutBlankColumns(table.rows), caption, docs));
  });
  const notes = cells.notes.map((note) => `<li>${escapeHtml(note)}</li>`).join('');
  const intro =
    '<p>The run and a verdict per dimension; then each dimension; then ' +
    '<a href="#transcripts">the transcripts</a>, the most disputed first. ' +
    `Each figure's name links to <a href="${docs}">its definition</a>.</p>`;
  const filters = transcriptFilters(entries, report);
  const index = transcriptIndex(entries, report);
  let tutors = '';
  if (page.tutors !== undefined) {
    const section = tutorsSection(page.tutors, report.dimensions, docs);
    tutors = `<h2 id="tutors">The tutors compared</h2>${section}`;
  }

  return `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>${TITLE}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>${PAGE_CSS}\n${TUTORS_CSS}</style></head><body><h1>${TITLE}</h1>
${warningBanner(page.warning)}${intro}
<h2>The run</h2>${runTable(page.run, report)}
<h2>Verdicts</h2>${verdictList(report, docs)}${altTestVerdicts(report)}
<h2>Agreement per dimension</h2>${figureTables.join('')}<ul class="notes">${notes}</ul>
${tutors}${dimensions.join('')}
<h2 id="transcripts">Transcripts</h2>${filters}${index}
<p><span class="differs">Highlighted</span>: a human's score that differs from the judge's.</p>
<div id="transcript-list">${transcripts.join('')}</div>
<script>${pageScript('report-filters.js')}</script></body></html>\n`;
}

/** The page's warning, first and framed in red, as text; nothing without one. */
function warningBanner(warning: string | undefined): string {
  if (warning === undefined) return '';
  const style = 'border:2px solid #b00020;padding:8px 12px;color:#b00020';
  return `<p class="warning" role="alert" style="${style}"><strong>Warning:</strong> ${escapeHtml(warning)}</p>\n`;
}

/** What each of the four figure tables shows, and its n. */
function figureCaption(table: number, report: Report): string {
  const pairs = report.dimensions.map((dimension) => dimension.judge_vs_human.n);
  const ceiling = report.dimensions.map((dimension) => dimension.human_vs_human?.n ?? 0);
  const margin = report.dimensions.find((dimension) => dimension.gap_to_ceiling !== null)
    ?.gap_to_ceiling?.margin;
  const range = (values: number[]) => {
    const low = Math.min(...values);
    const high = Math.max(...values);
    return low === high ? String(low) : `${low} to ${high}`;
  };
  if (table === 0) {
    return (
      `The judge against the people, per dimension, on ${range(pairs)} (transcript, scorer) ` +
      "pairs (n); leniency is the judge mean minus the people's, in score units. " +
      '† under 30 pairs.'
    );
  }
  if (table === 1) {
    const verdict = margin === undefined ? '' : `, and the verdict at margin ${margin}`;
    return (
      `Two people against each other (the human ceiling), on ${range(ceiling)} (scorer, scorer) ` +
      `pairs of the transcripts two or more scored; the judge's gap to it${verdict}.`
    );
  }
  if (table === 2) {
    return (
      'The alternative annotator test: each scorer left out in turn, is the judge at least as ' +
      'close to the others as that scorer, often enough? Its scorers, their transcripts, how ' +
      'many the judge wins against (the winning rate), its average advantage probability.'
    );
  }
  return (
    "Krippendorff's alpha among the people and with the judge as one more rater, over " +
    `${range(pairs)} pairs; the judge's self-consistency over repeated samples.`
  );
}

// ---- The run and the verdicts ------------------------------------------------------------------

/** The run as a two-column table: judges, hashes, the last judged row, the cost, human scoring. */
function runTable(run: RunFacts, report: Report): string {
  const judges = run.judges.map((judge) => {
    const fallback = judge.fallback_rows > 0 ? ` (${judge.fallback_rows} as a fallback)` : '';
    return `${judge.name}: ${judge.rows} row${judge.rows === 1 ? '' : 's'}${fallback}`;
  });
  const noHuman = report.missing.no_human;
  const noJudge = report.missing.no_judge;
  const incomplete = report.missing.incomplete_human;
  const stale = report.missing.stale_human;

  const rows = [
    ['judges', judges.join('; ') || 'unknown (no audit log)'],
    ['rubric sha256', run.rubric_sha256 ?? 'unknown'],
    ['prompt template sha256', run.prompt_template_sha256 ?? 'unknown'],
    ['last judged row', run.last_judged ?? 'unknown'],
    ['total cost', run.total_cost_usd === null ? 'unknown' : `$${run.total_cost_usd.toFixed(4)}`],
    ['human scoring (as the last run found it)', run.human_scoring ?? 'unknown'],
    ['pairs compared', `${report.pairs} (transcript, scorer) pairs`],
    [`no human row (${noHuman.length})`, noHuman.join(', ') || 'none'],
    [`no judge row (${noJudge.length})`, noJudge.join(', ') || 'none'],
    [
      `human rows not fully scored, left out (${incomplete.length})`,
      incomplete.join(', ') || 'none',
    ],
    [`human rows of an edited transcript, left out (${stale.length})`, stale.join(', ') || 'none'],
    [
      `judge rows of an edited input, left out (${report.missing.stale_judge.length})`,
      report.missing.stale_judge.join(', ') || 'none',
    ],
  ];
  const body = rows.map(([name, value]) =>
    tableRow('th', [name!], `<td>${escapeHtml(value!)}</td>`),
  );
  const caption =
    '<caption>The run, as the audit log records it, and what the figures leave out.</caption>';
  return `<table class="run">${caption}${body.join('')}</table>`;
}

/** The verdicts on every dimension together, then one line per dimension: the judge's kappa
 * against the human ceiling's, and the verdict, naming whose agreement it is about. */
function verdictList(report: Report, docs: string): string {
  const together = verdictSentences(report).map(escapeHtml);
  const family = together.length === 0 ? '' : `<p class="family">${together.join('<br>')}</p>`;
  const lines = report.dimensions.map((dimension) => {
    const link = `<a href="#${dimensionId(dimension.name)}">${escapeHtml(dimension.name)}</a>`;
    return `<li>${link}: ${verdictText(dimension, report, docs)}</li>`;
  });
  return `${family}<ul class="verdicts">${lines.join('')}</ul>`;
}

/** A dimension's verdict, against whom and on how many transcripts, and its gap to the ceiling,
 * in one line of HTML. */
function verdictText(dimension: DimensionReport, report: Report, docs: string): string {
  const gap = dimension.gap_to_ceiling;
  if (gap === null) {
    return 'no human ceiling: no matched transcript has two scorers';
  }
  const gapFigures = `${withInterval(gap.kappa_diff, gap.ci95)}${undefinedShare(gap)}`;
  const gapText = escapeHtml(`gap to the ceiling ${gapFigures}`);
  if (gap.verdict === null) {
    const why =
      gap.reason === 'no_ceiling'
        ? 'no verdict: no ceiling (the people gave one score: their kappa is undefined)'
        : 'no verdict: the gap has no interval';
    return `${why}; ${gapText}`;
  }
  const margin = figure(gap.margin);
  const people = namesInWords(report.scope.ceiling.scorers);
  const on = `on ${report.scope.ceiling.transcripts} transcripts`;
  const words = {
    as_good: `as good as ${people} ${on} (not below their ceiling by more than ${margin})`,
    below: `below ${people} ${on} (below their ceiling by more than ${margin})`,
    undetermined: `undetermined against ${people} ${on} (the interval holds −${margin})`,
  };
  const clears = gap.ci95 !== null && (gap.ci95[0] >= -gap.margin || gap.ci95[1] < -gap.margin);
  if (clears) {
    words.undetermined =
      `undetermined against ${people} ${on} (its own interval clears −${margin}, ` +
      'not yet with every dimension read together)';
  }
  if (gap.reason === 'too_few') {
    words.undetermined =
      `undetermined against ${people} ${on}: too few ` +
      `(a verdict needs ${MIN_TRANSCRIPTS} transcripts scored by two or more)`;
  }
  let more = '';
  if (gap.transcripts_to_decide !== null) {
    const count = gap.transcripts_to_decide;
    more = `; about ${count} transcripts scored by two or more in all would decide it`;
  }
  const word = `<a class="${gap.verdict}" href="${docs}">${escapeHtml(words[gap.verdict])}</a>`;
  return `<b>${word}</b>${escapeHtml(more)}; ${gapText}`;
}

/** The alternative annotator test of every dimension, each in a line, then all together. */
function altTestVerdicts(report: Report): string {
  const lines = report.dimensions.map((dimension) => {
    const link = `<a href="#${dimensionId(dimension.name)}">${escapeHtml(dimension.name)}</a>`;
    return `<li>${link}: ${escapeHtml(altTestSentence(dimension.alt_test))}</li>`;
  });
  const all = altTestAllWords(report.alt_test_all);
  const together = all === null ? '' : `<p>${escapeHtml(all)}</p>`;
  return `<ul class="alt-test">${lines.join('')}</ul>${together}`;
}

/** A dimension's alternative annotator test: its sentence, and each left-out scorer's test. */
function altTestPart(dimension: DimensionReport, docs: string): string {
  const test = dimension.alt_test;
  const sentence = `<p>${escapeHtml(altTestSentence(test))}</p>`;
  if (test.reason !== null) {
    return sentence;
  }
  const caption =
    `${dimension.name}: each scorer left out in turn, on the transcripts it and another scored; ` +
    `the judge wins when the test rejects that the scorer is closer by ${test.epsilon} or more ` +
    '(Benjamini-Yekutieli at q 0.05 over the scorers).';
  return sentence + wide(htmlTable(altTestScorerRows(test), caption, docs));
}

/** A dimension's figures under its heading: kappa, ceiling, leniency, alpha, the ranking. */
function figuresText(dimension: DimensionReport, report: Report): string {
  const judge = dimension.judge_vs_human;
  const ceiling = dimension.human_vs_human;
  const alpha = dimension.alpha;
  const leniency = dimension.leniency;
  const judgeKappa = withInterval(judge.kappa, judge.kappa_ci95) + undefinedShare(judge);
  let ceilingLine = 'no human ceiling';
  if (ceiling !== null) {
    const ceilingKappa = withInterval(ceiling.kappa, ceiling.kappa_ci95) + undefinedShare(ceiling);
    ceilingLine = `human ceiling kappa ${ceilingKappa} over ${ceiling.n} pairs`;
  }
  const lenient = withInterval(leniency.mean_diff, leniency.ci95);
  const lines = [
    `judge kappa ${judgeKappa} over ${judge.n} pairs`,
    ceilingLine,
    `leniency (judge mean minus human mean, score units) ${lenient}`,
    `Krippendorff's alpha: humans ${withInterval(alpha.humans, alpha.humans_ci95)}, ` +
      `humans and judge ${withInterval(alpha.humans_and_judge, alpha.humans_and_judge_ci95)}`,
    `Spearman of the tutors' means ${figure(report.ranking[dimension.name])}`,
  ];
  const items = lines.map((line) => `<li>${escapeHtml(line)}</li>`);
  return `<ul class="figures">${items.join('')}</ul>`;
}

// ---- One dimension: the forest plot, the models, the confusion grid, the rubric's levels -------

/** A dimension's section: its forest plot, its per-model table, its grid and its levels. */
function dimensionSection(
  dimension: DimensionReport,
  report: Report,
  rubric: Rubric,
  docs: string,
): string {
  const name = dimension.name;
  const matched = report.models.reduce((total, row) => total + row.n_matched, 0);
  const svg = forestPlot(forestPanels(dimension, report.models), `${name}: forest plot`);
  const plotCaption =
    `${name}: the judge's kappa (${dimension.judge_vs_human.n} pairs), the human ceiling ` +
    `(${dimension.human_vs_human?.n ?? 0} pairs) and the gap, then each tutor's judge and human ` +
    `means (${matched} matched transcripts), with 95% intervals.`;
  const plot = `<figure>${svg}<figcaption>${escapeHtml(plotCaption)}</figcaption></figure>`;
  const modelCaption =
    `${name} per tutor: agreement and both means over each tutor's matched transcripts ` +
    "(its n); all judged: the judge's mean over every transcript it scored.";
  const models = wide(
    htmlTable(withoutBlankColumns(modelRows(dimension, report)), modelCaption, docs),
  );
  const grid = confusionGrid(dimension);
  const levels = rubricLevels(rubric, name);

  const heading = `<h2 id="${dimensionId(name)}">${escapeHtml(name)}</h2>`;
  const gridTitle = '<h3>Confusion (rows: human; columns: judge; the diagonal agrees)</h3>';
  const figures = `<p>${verdictText(dimension, report, docs)}</p>${figuresText(dimension, report)}`;
  const alt = altTestPart(dimension, docs);
  const body = `${heading}${figures}${alt}${plot}${levels}<h3>Per tutor model</h3>${models}`;
  return `<section class="dimension">${body}${gridTitle}${grid}</section>\n`;
}

/** The plot's two panels: kappa (judge, ceiling), then each model's judge and human means. */
export function forestPanels(dimension: DimensionReport, models: ModelReport[]): ForestPanel[] {
  const judge = dimension.judge_vs_human;
  const ceiling = dimension.human_vs_human;
  const kappaRows = [oneMarkRow('judge vs human', 'judge', judge.kappa, judge.kappa_ci95)];
  if (ceiling !== null) {
    kappaRows.push(oneMarkRow('human vs human', 'ceiling', ceiling.kappa, ceiling.kappa_ci95));
  }
  const gap = dimension.gap_to_ceiling;
  if (gap !== null) {
    kappaRows.push(oneMarkRow('gap: judge − ceiling', 'gap', gap.kappa_diff, gap.ci95));
  }

  const name = dimension.name;
  const modelRows = models.map((row): ForestRow => {
    const judgeMean = row.judge_mean[name] ?? null;
    const humanMean = row.human_mean[name] ?? null;
    let text = `judge ${figure(judgeMean)} · human ${figure(humanMean)}`;
    if (row.n_matched === 0) {
      text = 'no matched transcript';
    }
    return {
      label: row.model,
      marks: [
        { who: 'judge', value: judgeMean, ci: row.judge_ci95[name] ?? null },
        { who: 'human', value: humanMean, ci: row.human_ci95[name] ?? null },
      ],
      text,
    };
  });

  const kappaValues = kappaRows.flatMap((row) => row.marks.flatMap(markValues));
  const lowest = Math.min(0, ...kappaValues);
  const kappaMin = Math.max(-2, Math.floor(lowest * 4) / 4);
  const lowLabel = dimension.labels[0] ?? 0;
  const highLabel = dimension.labels.at(-1) ?? 1;
  return [
    {
      title: 'quadratic-weighted kappa (0: chance, 1: perfect)',
      min: kappaMin,
      max: 1,
      rows: kappaRows,
    },
    {
      title: 'mean score per tutor',
      min: lowLabel,
      max: highLabel > lowLabel ? highLabel : lowLabel + 1,
      rows: modelRows,
    },
  ];
}

/** A row of one estimate, its figures as text on the right. */
function oneMarkRow(
  label: string,
  who: ForestMark['who'],
  value: number | null,
  ci: [number, number] | null,
): ForestRow {
  return { label, marks: [{ who, value, ci }], text: withInterval(value, ci) };
}

/** A mark's value and interval ends, those there are. */
function markValues(mark: ForestMark): number[] {
  const values: number[] = [];
  if (mark.value !== null) {
    values.push(mark.value);
  }
  if (mark.ci !== null) {
    values.push(mark.ci[0], mark.ci[1]);
  }
  return values;
}

/** The per-model table of a dimension: agreement, and both means over matched transcripts. */
function modelRows(dimension: DimensionReport, report: Report): string[][] {
  const name = dimension.name;
  const rows = report.models.map((row) => {
    const agreement = dimension.per_model.find((entry) => entry.model === row.model);
    return [
      row.model,
      String(row.n_matched),
      agreement === undefined ? '-' : String(agreement.n),
      figure(agreement?.exact),
      figure(agreement?.within_one),
      withInterval(agreement?.kappa, agreement?.kappa_ci95 ?? null),
      withInterval(row.judge_mean[name], row.judge_ci95[name] ?? null),
      withInterval(row.human_mean[name], row.human_ci95[name] ?? null),
      figure(row.judge_mean_all[name]),
    ];
  });
  const header = [
    'model',
    'matched transcripts',
    'pairs',
    'exact',
    'within one',
    'kappa [95% CI]',
    'judge mean [95% CI]',
    'human mean [95% CI]',
    'judge mean, all judged',
  ];
  return [header, ...rows];
}

/** A dimension's level descriptions, folded: one click away from its figures. */
export function rubricLevels(rubric: Rubric, name: string): string {
  const dimension = rubric.dimensions.find((candidate) => candidate.name === name);
  if (dimension === undefined) {
    return '';
  }
  const levels = Object.entries(dimension.scores).sort((a, b) => Number(a[0]) - Number(b[0]));
  const items = levels.map(([score, text]) => {
    return `<dt>${escapeHtml(score)}</dt><dd>${escapeHtml(text)}</dd>`;
  });
  const summary = `<summary>The rubric's levels of ${escapeHtml(name)}</summary>`;
  const description = `<p>${escapeHtml(dimension.description)}</p>`;
  return `<details class="rubric">${summary}${description}<dl>${items.join('')}</dl></details>`;
}

// ---- The forest plot: pure, intervals in, SVG out ----------------------------------------------

/** One estimate on a row: who made it, its value and 95% interval (either may be missing). */
export type ForestMark = {
  who: 'judge' | 'human' | 'ceiling' | 'gap';
  value: number | null;
  ci: readonly [number, number] | null;
};

/** One line of the plot: a label on the left, marks on the axis, the figures on the right. */
export type ForestRow = { label: string; marks: ForestMark[]; text: string };

/** A block of rows on one axis from `min` to `max`, with ticks. */
export type ForestPanel = { title: string; min: number; max: number; rows: ForestRow[] };

const PLOT = { width: 800, left: 180, right: 580, row: 24, title: 22, axis: 30 };

/** The panels as one inline SVG: per row each mark's interval as a line, its value as a dot. */
export function forestPlot(panels: ForestPanel[], label: string): string {
  let y = 0;
  const parts: string[] = [legend()];
  y += PLOT.title;

  // A panel without rows (no tutor with a matched transcript) is left out, not drawn empty.
  for (const panel of panels.filter((candidate) => candidate.rows.length > 0)) {
    const at = (value: number) => scaleX(value, panel.min, panel.max);
    parts.push(`<text class="panel" x="0" y="${y + 14}">${escapeHtml(panel.title)}</text>`);
    y += PLOT.title;

    const height = panel.rows.length * PLOT.row;
    parts.push(ticks(panel, y, height));
    for (const row of panel.rows) {
      parts.push(forestRow(row, y, at));
      y += PLOT.row;
    }
    parts.push(`<line class="axis" x1="${PLOT.left}" x2="${PLOT.right}" y1="${y}" y2="${y}"/>`);
    y += PLOT.axis;
  }

  const attributes = `class="forest" viewBox="0 0 ${PLOT.width} ${y}" role="img"`;
  const title = `<title>${escapeHtml(label)}</title>`;
  return `<svg xmlns="http://www.w3.org/2000/svg" ${attributes}>${title}${parts.join('')}</svg>`;
}

/** A value's x on the plot; one outside [min, max] is drawn at the nearer end. */
function scaleX(value: number, min: number, max: number): number {
  const share = (Math.min(max, Math.max(min, value)) - min) / (max - min);
  return round(PLOT.left + share * (PLOT.right - PLOT.left));
}

/** The key: which colour and shape is the judge's, the humans', the ceiling's. */
function legend(): string {
  const keys = [
    ['judge', '<circle cx="6" cy="10" r="5"/>', 'judge'],
    ['human', '<rect x="1" y="5" width="10" height="10"/>', 'humans (mean of scorers)'],
    ['ceiling', '<rect x="1" y="5" width="10" height="10"/>', 'human ceiling'],
    ['gap', '<rect x="1" y="5" width="10" height="10"/>', 'gap'],
  ];
  const items = keys.map(([who, shape, text], i) => {
    const x = PLOT.left + [0, 70, 255, 375][i]!;
    return (
      `<g class="${who}" transform="translate(${x},0)">${shape}` +
      `<text x="16" y="14">${text}</text></g>`
    );
  });
  return `<g class="legend">${items.join('')}</g>`;
}

/** A panel's vertical grid lines with their values under the axis. */
function ticks(panel: ForestPanel, y: number, height: number): string {
  const lines = axisTicks(panel.min, panel.max).map((value) => {
    const x = scaleX(value, panel.min, panel.max);
    const line = `<line x1="${x}" x2="${x}" y1="${y}" y2="${y + height}"/>`;
    const text =
      `<text x="${x}" y="${y + height + 16}" text-anchor="middle">` + `${tickText(value)}</text>`;
    // Zero inside the axis is the gap's verdict line: drawn darker.
    const kind = value === 0 && panel.min < 0 ? 'tick zero' : 'tick';
    return `<g class="${kind}">${line}${text}</g>`;
  });
  return lines.join('');
}

/** One row: the label, each mark (interval line and dot, or a dot alone), the figures. */
function forestRow(row: ForestRow, y: number, at: (value: number) => number): string {
  const middle = y + PLOT.row / 2;
  const parts = [`<text x="0" y="${middle + 4}">${escapeHtml(shorten(row.label, 26))}</text>`];
  const offsets = row.marks.length > 1 ? [-4, 4] : [0];

  row.marks.forEach((mark, i) => {
    const markY = middle + (offsets[i] ?? 0);
    parts.push(forestMark(mark, markY, at));
  });

  const text = `<text x="${PLOT.right + 12}" y="${middle + 4}">${escapeHtml(row.text)}</text>`;
  parts.push(text);
  const title = `<title>${escapeHtml(`${row.label}: ${row.text}`)}</title>`;
  return `<g class="row">${title}${parts.join('')}</g>`;
}

/** One estimate: its interval as a line (class `interval`) and its value as a dot or a square. */
function forestMark(mark: ForestMark, y: number, at: (value: number) => number): string {
  let line = '';
  if (mark.ci !== null) {
    line = `<line x1="${at(mark.ci[0])}" x2="${at(mark.ci[1])}" y1="${y}" y2="${y}"/>`;
  }
  let dot = '';
  if (mark.value !== null) {
    const x = at(mark.value);
    dot = mark.who === 'judge' ? `<circle cx="${x}" cy="${y}" r="4"/>` : squareAt(x, y);
  }
  const kind = mark.ci === null ? 'point' : 'interval';
  return `<g class="${kind} ${mark.who}">${line}${dot}</g>`;
}

/** A small square centred on (x, y). */
function squareAt(x: number, y: number): string {
  return `<rect x="${round(x - 3.5)}" y="${round(y - 3.5)}" width="7" height="7"/>`;
}

/** Evenly spaced round values from min to max: 4 to 10 of them, the step 1, 2, 2.5 or 5 × 10^k. */
export function axisTicks(min: number, max: number): number[] {
  const span = max - min;
  if (!(span > 0)) {
    return [min];
  }
  const steps = [1, 2, 2.5, 5].flatMap((base) => [-2, -1, 0, 1, 2].map((k) => base * 10 ** k));
  steps.sort((a, b) => a - b);
  const step = steps.find((candidate) => span / candidate <= 9) ?? span;

  const values: number[] = [];
  for (let i = Math.ceil(min / step - 1e-9); i * step <= max + 1e-9; i++) {
    values.push(round(i * step));
  }
  return values;
}

/** A tick's value, as short as it goes: 1, 0.5, 0.25, −0.5. */
function tickText(value: number): string {
  return String(round(value)).replace('-', '−');
}

/** A long label cut to `length` characters with an ellipsis (the row's title holds it whole). */
function shorten(label: string, length: number): string {
  return label.length > length ? `${label.slice(0, length - 1)}…` : label;
}

/** A coordinate to 2 decimals, so the SVG stays short. */
function round(value: number): number {
  // + 0 turns -0 into 0, which prints as "0".
  return Math.round(value * 100) / 100 + 0;
}

// ---- Tables and grids --------------------------------------------------------------------------

/** Rows of cells with no column whose every body cell is blank ("-", or "- -"): nothing to say. */
export function withoutBlankColumns(rows: string[][]): string[][] {
  const body = rows.slice(1);
  if (body.length === 0) {
    return rows;
  }
  const header = rows[0] ?? [];
  const kept = header.map((_, i) => i).filter((i) => body.some((row) => !isBlank(row[i] ?? '')));
  return rows.map((row) => kept.map((i) => row[i] ?? ''));
}

/** Whether a cell says nothing: only dashes, brackets, commas and spaces ("-", "- [-, -]"). */
function isBlank(cell: string): boolean {
  return /^[-\s[\],]*$/.test(cell);
}

/** A table of text cells, the first row its header, its caption under it; with `docs`, each
 * figure's header (all but the first column's) links to the definitions. */
function htmlTable(rows: string[][], caption: string, docs?: string): string {
  const names = rows[0] ?? [];
  const heads = names.map((name, i) => {
    if (docs === undefined || i === 0) {
      return `<th>${escapeHtml(name)}</th>`;
    }
    return `<th><a href="${docs}">${escapeHtml(name)}</a></th>`;
  });
  const body = rows.slice(1).map((row) => tableRow('td', row));
  const under = `<caption>${escapeHtml(caption)}</caption>`;
  return (
    `<table>${under}<thead><tr>${heads.join('')}</tr></thead>` +
    `<tbody>${body.join('')}</tbody></table>`
  );
}

/** A table in a box that scrolls sideways on a narrow screen rather than overflowing the page. */
function wide(table: string): string {
  return `<div class="wide">${table}</div>`;
}

/** A confusion matrix as a grid: counts shaded by share of the largest, the diagonal outlined,
 * each row's and column's total, and the overall total in the corner. */
export function confusionGrid(dimension: DimensionReport): string {
  const confusion = dimension.judge_vs_human.confusion;
  const largest = Math.max(1, ...confusion.flat());
  const labels = dimension.labels.map(String);

  const head = tableRow('th', ['human ↓ judge →', ...labels, 'total']);
  const rows = confusion.map((counts, i) => {
    const shaded = counts.map((count, j) => shadedCell(count, largest, i === j));
    const total = `<td class="total">${sumOf(counts)}</td>`;
    return tableRow('th', [labels[i]!], `${shaded.join('')}${total}`);
  });

  const columnTotals = labels.map((_, j) => sumOf(confusion.map((counts) => counts[j] ?? 0)));
  const totals = columnTotals.map((total) => `<td class="total">${total}</td>`);
  const all = `<td class="total">${sumOf(columnTotals)}</td>`;
  const footer = tableRow('th', ['total'], `${totals.join('')}${all}`);
  const n = sumOf(columnTotals);
  const agreed = sumOf(confusion.map((counts, i) => counts[i] ?? 0));
  const share = n > 0 ? ` (${Math.round((100 * agreed) / n)}%)` : '';
  const caption = `<caption>on the diagonal: ${agreed} of ${n}${share}</caption>`;
  return `<table class="grid">${caption}${head}${rows.join('')}${footer}</table>`;
}

/** A count as a cell shaded by count / largest; white text on the darker half. */
function shadedCell(count: number, largest: number, diagonal: boolean): string {
  const share = count / largest;
  const classes = [share > 0.5 ? 'dark' : '', diagonal ? 'diagonal' : ''].filter(Boolean);
  const attribute = classes.length > 0 ? ` class="${classes.join(' ')}"` : '';
  return `<td style="background:rgba(29,78,216,${share.toFixed(2)})"${attribute}>${count}</td>`;
}

// ---- The transcripts: an index by disagreement, then each one ----------------------------------

/** How far the humans are from the judge on a transcript: the steps on each dimension's scale
 * between a human's score and the judge's, summed over dimensions, averaged over its scorers;
 * null without a judge row or a human score. */
export function disagreement(entry: TranscriptRows, report: Report): number | null {
  if (entry.judge === undefined || entry.humans.length === 0) {
    return null;
  }

  const perScorer = entry.humans.map((row) => {
    let steps = 0;
    let compared = 0;
    for (const dimension of report.dimensions) {
      const human = row.scores[dimension.name];
      const judge = entry.judge?.scores[dimension.name];
      if (human === undefined || judge === undefined) {
        continue;
      }
      steps += Math.abs(dimension.labels.indexOf(human) - dimension.labels.indexOf(judge));
      compared++;
    }
    return compared > 0 ? steps : null;
  });

  const scored = perScorer.filter((steps) => steps !== null);
  return scored.length === 0 ? null : sumOf(scored) / scored.length;
}

/** The entries, the largest disagreement first; those without one last; ties by model, task. */
export function byDisagreement<T extends TranscriptRows>(entries: T[], report: Report): T[] {
  const keyed = entries.map((entry) => ({ entry, steps: disagreement(entry, report) }));
  keyed.sort((a, b) => {
    const byDistance = (b.steps ?? -1) - (a.steps ?? -1);
    return byDistance || comparePairs(a.entry, b.entry);
  });
  return keyed.map((item) => item.entry);
}

/** A transcript's anchor: `t-` then model and task, each character outside [A-Za-z0-9-] as _hex. */
export function transcriptId(entry: { model: string; task_id: string }): string {
  const safe = (text: string) => {
    return text.replace(/[^A-Za-z0-9-]/g, (char) => `_${char.codePointAt(0)!.toString(16)}_`);
  };
  return `t-${safe(entry.model)}.${safe(entry.task_id)}`;
}

/** A dimension's anchor (dimension names are identifiers). */
function dimensionId(name: string): string {
  return `d-${name}`;
}

/** The index: a link to each transcript, its judge and its disagreement, in page order. Each row
 * carries what the filters and the sort read: its tutor, task, disagreement overall and per
 * dimension, and its place in tutor-and-task order. */
function transcriptIndex(entries: TranscriptEntry[], report: Report): string {
  // Without a single human score (a run before human scoring) there is no disagreement column.
  const steps = entries.map((entry) => disagreement(entry, report));
  const anySteps = steps.some((value) => value !== null);
  const pairOrder = new Map([...entries].sort(comparePairs).map((entry, i) => [entry, i]));

  const columns = ['#', 'transcript', 'judge', 'scorers'];
  if (anySteps) {
    columns.push('disagreement');
  }
  const rows = entries.map((entry, i) => {
    const link = `<a href="#${transcriptId(entry)}">${escapeHtml(pairTitle(entry))}</a>`;
    const cells = [
      `<td>${i + 1}</td>`,
      `<td>${link}</td>`,
      `<td>${escapeHtml(judgeName(entry))}</td>`,
      `<td>${entry.humans.length}</td>`,
    ];
    if (anySteps) {
      cells.push(`<td>${figure(steps[i])}</td>`);
    }
    const perDimension = report.dimensions.map((dimension, d) => {
      const value = dimensionSteps(entry, dimension);
      return ` data-d${d}="${value === null ? '' : value}"`;
    });
    const data =
      ` data-target="${transcriptId(entry)}" data-model="${escapeHtml(entry.model)}"` +
      ` data-task="${escapeHtml(entry.task_id)}" data-steps="${steps[i] ?? ''}"` +
      ` data-order="${pairOrder.get(entry)}"${perDimension.join('')}`;
    return `<tr${data}>${cells.join('')}</tr>\n`;
  });

  let note = '<p>In page order.</p>';
  if (anySteps) {
    note =
      '<p>Disagreement: per dimension, how many steps of its scale lie between a human score and ' +
      "the judge's, summed over the dimensions and averaged over the transcript's scorers. " +
      'The largest first.</p>';
  }
  const caption =
    `<caption>Every transcript with a judge or a human row (${entries.length}); ` +
    'the filters above choose which are shown, here and below.</caption>';
  const head = `<thead>${tableRow('th', columns)}</thead>`;
  const table =
    `<table class="index" id="transcript-index">${caption}${head}` +
    `<tbody>${rows.join('')}</tbody></table>`;
  return `${note}${wide(table)}`;
}

/** How far the humans are from the judge on one dimension of a transcript: the steps of its scale
 * between each human's score and the judge's, averaged over its scorers; null without both. */
function dimensionSteps(entry: TranscriptRows, dimension: DimensionReport): number | null {
  const judge = entry.judge?.scores[dimension.name];
  const humans = entry.humans.flatMap((row) => {
    const score = row.scores[dimension.name];
    return score === undefined ? [] : [score];
  });
  if (judge === undefined || humans.length === 0) {
    return null;
  }
  const at = (score: number) => dimension.labels.indexOf(score);
  return sumOf(humans.map((score) => Math.abs(at(score) - at(judge)))) / humans.length;
}

/** The filters of the transcripts (tutor, task, a dimension they disagree on) and their order. */
function transcriptFilters(entries: TranscriptEntry[], report: Report): string {
  const options = (values: string[]) => {
    const distinct = [...new Set(values)].sort(compareText);
    return distinct.map((value) => {
      return `<option value="${escapeHtml(value)}">${escapeHtml(value)}</option>`;
    });
  };
  const models = options(entries.map((entry) => entry.model));
  const tasks = options(entries.map((entry) => entry.task_id));
  const dimensions = report.dimensions.map((dimension, d) => {
    return `<option value="${d}">${escapeHtml(dimension.name)}</option>`;
  });
  const select = (name: string, label: string, all: string, choices: string[]) => {
    const first = `<option value="">${all}</option>`;
    return `<label>${label} <select name="${name}">${first}${choices.join('')}</select></label>`;
  };
  const order = [
    '<option value="most">most disputed first</option>',
    '<option value="least">least disputed first</option>',
    '<option value="pair">by tutor, then task</option>',
  ];
  const parts = [
    select('model', 'tutor', 'every tutor', models),
    select('task', 'task', 'every task', tasks),
    select('dimension', 'disagreeing on', 'any dimension', dimensions),
    `<label>order <select name="order">${order.join('')}</select></label>`,
    `<output id="shown">${entries.length} of ${entries.length} transcripts shown</output>`,
  ];
  return `<form id="filters" class="filters">${parts.join(' ')}</form>`;
}

/** `model / task`, as a transcript is headed. */
function pairTitle(entry: { model: string; task_id: string }): string {
  return `${entry.model} / ${entry.task_id}`;
}

/** The judge that scored a transcript, as the audit log says; what is known otherwise. */
function judgeName(entry: TranscriptEntry): string {
  if (entry.judged_by !== undefined) {
    return entry.judged_by.fallback ? `${entry.judged_by.judge} (fallback)` : entry.judged_by.judge;
  }
  return entry.judge === undefined ? 'not judged' : 'unknown (not in the audit log)';
}

/** One transcript: who judged it, the scores side by side, the notes and thinking, the text. */
function transcriptSection(entry: TranscriptEntry, dimensions: string[], report: Report): string {
  const scorers = entry.humans.map((row) => row.scorer || 'human');
  const header = tableRow('th', ['dimension', 'judge', ...scorers]);
  const rows = dimensions.map((name) => scoreRow(name, entry));
  const caption =
    "<caption>Scores of this transcript: the judge's, then each scorer's " +
    `(${entry.humans.length}).</caption>`;
  const scores = wide(`<table>${caption}${header}${rows.join('')}</table>`);

  const notes = [notesParagraph('judge', entry.judge?.notes ?? '')];
  notes.push(thinkingDetails(entry.judged_by?.thinking ?? []));
  entry.humans.forEach((row, i) => notes.push(notesParagraph(scorers[i]!, row.notes)));

  let transcript: string;
  if (typeof entry.transcript === 'string') {
    const text = escapeHtml(entry.transcript);
    transcript =
      '<details class="transcript"><summary>Transcript</summary>' + `<pre>${text}</pre></details>`;
  } else {
    transcript = `<p><em>${escapeHtml(entry.transcript.unavailable)}</em></p>`;
  }

  const steps = disagreement(entry, report);
  const facts = [entry.judge === undefined ? 'not judged' : `judged by ${judgeName(entry)}`];
  if (entry.judged_by?.timestamp) {
    facts.push(`on ${entry.judged_by.timestamp}`);
  }
  facts.push(`disagreement ${figure(steps)}`);

  const id = transcriptId(entry);
  const back = ' <a href="#transcripts">(the index)</a>';
  const heading =
    `<h3>${escapeHtml(pairTitle(entry))}</h3>` + `<p>${escapeHtml(facts.join('; '))}${back}</p>`;
  const body = `${heading}${scores}${notes.join('')}${transcript}`;
  return `<section class="transcript" id="${id}">${body}</section>\n`;
}

/** The judge's thinking, folded under its notes; nothing when it did not think. */
function thinkingDetails(thinking: string[]): string {
  if (thinking.length === 0) {
    return '';
  }
  // With --samples k, one answer's thinking after another, each named.
  let joined = thinking[0]!;
  if (thinking.length > 1) {
    joined = thinking.map((text, i) => `— answer ${i + 1} —\n${text}`).join('\n\n');
  }
  const text = escapeHtml(joined);
  return (
    `<details class="thinking"><summary>The judge's thinking</summary>` +
    `<pre>${text}</pre></details>`
  );
}

/** One dimension's row: the judge's score, then each human's, highlighted where it differs. */
function scoreRow(dimension: string, entry: TranscriptEntry): string {
  const judgeScore = entry.judge?.scores[dimension];
  const humanCells = entry.humans.map((row) => {
    const score = row.scores[dimension];
    const differs = score !== undefined && judgeScore !== undefined && score !== judgeScore;
    return `<td${differs ? ' class="differs"' : ''}>${scoreText(score)}</td>`;
  });
  const link = `<a href="#${dimensionId(dimension)}">${escapeHtml(dimension)}</a>`;
  return `<tr><th>${link}</th><td>${scoreText(judgeScore)}</td>${humanCells.join('')}</tr>\n`;
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

// ---- Leaf helpers ------------------------------------------------------------------------------

/** One row of escaped text cells, each in `tag`, then `html` as it is. */
function tableRow(tag: 'td' | 'th', cells: string[], html = ''): string {
  const escaped = cells.map((cell) => `<${tag}>${escapeHtml(cell)}</${tag}>`);
  return `<tr>${escaped.join('')}${html}</tr>\n`;
}

function sumOf(values: readonly number[]): number {
  return values.reduce((total, value) => total + value, 0);
}
