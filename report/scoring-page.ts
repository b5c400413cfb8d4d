// report/scoring-page.ts: one scorer's blind scoring page (`<out>/<scorer>.html`, written with the
// sheets): each assigned transcript, its turns as labelled messages (the tutor's system prompt
// hidden unless the plan shows it), then the task's expected behaviours and the private reference
// notes, folded; a form per transcript (scores, notes, unsure) saved in the browser as it is
// filled; and a download of the scorer's whole sheet: the sheet as it is now, which the page asks
// for, with the page's answers merged in, so a download never blanks a score given in the sheet or
// in another browser. Self-contained: inline style and script (report/pages/scoring-page.js),
// nothing fetched, no judge score. Every text is escaped (the script sets text as text); the data
// rides as JSON with `<` escaped.
import { FORMULA_START, allowedScores, rubricDimensions } from '../run-judge.ts';
import type { Rubric, TranscriptImage, TranscriptRef } from '../run-judge.ts';
import { escapeHtml } from './html-escape.ts';
import { pageScript } from './page-script.ts';

/** One message as the page shows it: who, the text, its images; `hidden` for a system prompt kept
 * back. */
export type PageTurn = { who: string; text: string; images: TranscriptImage[]; hidden?: boolean };

/** One transcript as its page shows it: the prompt's pieces (`promptValues`) and its turns. */
export type PageTranscript = {
  ref: TranscriptRef;
  transcript_sha256: string;
  inputs_sha256: string;
  values: Record<string, string>;
  turns: PageTurn[];
};

/**
 * What a sheet row's answers in the browser are for: `version`, the hash of what the judge is shown
 * for its transcript (`inputs_sha256`), keys them, so an answer given for another text or rubric is
 * never shown or downloaded; `earlier`, answers kept by pages of earlier releases (which name no
 * version) are for this one too. Null for a row of no assignment: the page holds no answer for it.
 */
export type RowVersion = { version: string; earlier: boolean } | null;

/** What one scorer's page is made of: the sheet (its columns, its rows' cells unguarded, each
 * row's version) and the page's transcripts, each with the index of its sheet row. */
export type PageInput = {
  scorer: string;
  rubric: Rubric;
  storageKey: string;
  /** Storage keys of pages written before in this place, whose answers the page reads too. */
  previousKeys: string[];
  header: string[];
  rows: Record<string, string>[];
  versions: RowVersion[];
  transcripts: (PageTranscript & { row: number })[];
};

/** The page: a list of the transcripts, one shown at a time with its form, and the download. */
export function scoringPage(input: PageInput): string {
  // 1. The data the script needs: the sheet's columns and rows, and what the rubric allows.
  const data = {
    scorer: input.scorer,
    plan: input.storageKey,
    previous: input.previousKeys,
    formula: FORMULA_START.source,
    header: input.header,
    dimensions: rubricDimensions(input.rubric),
    rows: input.rows,
    versions: input.versions,
  };

  // 2. A section per transcript, in the page's order, each with its form.
  const count = input.transcripts.length;
  const sections = input.transcripts.map((transcript, i) => {
    return transcriptSection(transcript, input.rubric, i, count);
  });
  const list = input.transcripts.map((transcript, i) => {
    const label = `${i + 1}. task ${transcript.ref.task_id}`;
    return `<li><a href="#t${i}" data-index="${i}">${escapeHtml(label)}</a></li>`;
  });
  const digits = [...new Set(input.rubric.dimensions.flatMap(allowedScores))].sort((a, b) => a - b);

  // 3. The page.
  const scorer = escapeHtml(input.scorer);
  const json = JSON.stringify(data).replace(/</g, '\\u003c');
  const keys = escapeHtml(digits.join(', '));
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Blind scoring: ${scorer}</title>
<style>${PAGE_CSS}</style></head><body>
<header><h1>Blind scoring: ${scorer}</h1>
<p id="left" role="status">${count} of ${count} left</p>
<button type="button" id="download">Download ${scorer}.csv</button>
<p id="unsaved" class="warning" hidden>Answers not downloaded yet</p>
<p id="sheet-status" role="status" hidden></p>
<p id="storage" class="warning" hidden>This browser does not keep your answers: download your CSV
before you close the page.</p>
</header>
<div class="help"><p class="hint">Your answers stay in this browser as you go. The download first
asks for your ${scorer}.csv as it is now (the plan's, or the one you saved over it) and adds your
answers to it, so no score in it is lost: save the download over it. Keys: ${keys} score the
dimension in focus (else the first left open). This page does not name the tutors;
${scorer}.csv does (its model column).</p>
<label class="import">Import ${scorer}.csv <input type="file" id="import"
accept=".csv,text/csv"></label>
<input type="file" id="current-sheet" accept=".csv,text/csv" hidden>
<p id="fresh" class="notice" hidden>This browser holds none of your answers yet: the page shows
${scorer}.csv as it was when the page was written. Scored since, in the sheet or another browser?
Import ${scorer}.csv to see those scores here.</p>
<p id="held" class="notice" hidden></p>
</div>
<div class="layout"><nav><ol>${list.join('')}</ol></nav>
<main>${sections.join('\n')}</main></div>
<script type="application/json" id="plan-data">${json}</script>
<script>${pageScript('scoring-page.js')}</script>
</body></html>
`;
}

/** One transcript: the task and the transcript, the folded notes, then the rubric as a form. */
function transcriptSection(
  transcript: PageTranscript & { row: number },
  rubric: Rubric,
  index: number,
  count: number,
): string {
  const values = transcript.values;
  const turns = transcript.turns.map((turn) => {
    if (turn.hidden === true) {
      return (
        `<p class="hidden-turn">The tutor's system prompt is hidden: ` +
        'it would tell the tutors apart.</p>'
      );
    }
    const images = turn.images.map((image) => {
      const source = `data:${image.source.media_type};base64,${image.source.data}`;
      const label = escapeHtml(image.label);
      const img = `<img alt="${label}" src="${escapeHtml(source)}">`;
      return `<figure>${img}<figcaption>${label}</figcaption></figure>`;
    });
    const role = turn.who === 'Student' ? 'student' : turn.who === 'Tutor' ? 'tutor' : 'other';
    return (
      `<div class="turn ${role}"><p class="who">${escapeHtml(turn.who)}</p>` +
      `<pre>${escapeHtml(turn.text)}</pre>${images.join('')}</div>`
    );
  });

  const privateNotes =
    '<summary>Private reference notes ' +
    '<small>(never shown to the tutor; read them after the transcript)</small></summary>';
  const reading = `<div class="reading">
<h3>Task</h3>
<dl><dt>Task</dt><dd>${escapeHtml(values.task_id!)}</dd>
<dt>Topic</dt><dd>${escapeHtml(values.topic!)}</dd>
<dt>Student level</dt><dd>${escapeHtml(values.student_level!)}</dd></dl>
${textBlock('Problem statement', values.problem_statement!)}
<h3>Transcript</h3>
<div class="turns">${turns.join('\n')}</div>
<details class="reference"><summary>Expected tutor behaviours</summary>
${textBlock('Expected tutor behaviours', values.expected_behaviors!)}</details>
<details class="reference">${privateNotes}
${textBlock('Proof skeleton', values.proof_skeleton!)}
${textBlock('Common misconceptions', values.common_misconceptions!)}
${textBlock('Red flags', values.red_flags!)}</details>
</div>`;

  const dimensions = rubric.dimensions.map((dimension) => {
    const levels = allowedScores(dimension).map((score) => {
      const level = escapeHtml(dimension.scores[String(score)]!);
      const name = escapeHtml(dimension.name);
      return (
        `<label class="level"><input type="radio" name="${name}" value="${score}">` +
        `<b>${score}</b> <span>${level}</span></label>`
      );
    });
    return `<fieldset><legend>${escapeHtml(dimension.name)}</legend>
<p class="description">${escapeHtml(dimension.description)}</p>${levels.join('')}</fieldset>`;
  });
  const form = `<form class="scores" data-row="${transcript.row}"
autocomplete="off"><h3>Rubric and your scores</h3>
${dimensions.join('\n')}
<label class="unsure"><input type="checkbox" name="unsure"> Unsure about these scores</label>
<label class="notes">Notes<textarea name="notes" rows="4"></textarea></label></form>`;

  const heading = `Transcript ${index + 1} of ${count} · task ${transcript.ref.task_id}`;
  return `<section class="transcript" id="t${index}" data-index="${index}">
<h2>${escapeHtml(heading)} <span class="state"></span></h2>
<div class="columns">${reading}${form}</div>
<p class="steps"><button type="button" class="prev">← Previous</button>
<button type="button" class="next">Next →</button></p></section>`;
}

/** A titled block of prompt text, its line breaks kept. */
function textBlock(title: string, text: string): string {
  return `<h4>${escapeHtml(title)}</h4><pre>${escapeHtml(text)}</pre>`;
}

const PAGE_CSS = `body{font:15px/1.5 system-ui,sans-serif;color:#111;margin:0;background:#fafafa}
header{position:sticky;top:0;z-index:1;display:flex;flex-wrap:wrap;gap:6px 18px;align-items:center;
padding:8px 20px;background:#fff;border-bottom:1px solid #ccc}
header h1{font-size:18px;margin:0}
header p,.help p{margin:0}
.help{display:flex;flex-wrap:wrap;gap:6px 18px;align-items:baseline;padding:8px 20px 0}
.hint{font-size:13px;color:#444;flex:1 1 420px;max-width:75em}
.notice{font-size:13px;flex-basis:100%;background:#fef9c3;padding:4px 8px}
#sheet-status{font-size:13px;flex-basis:100%}
#left{font-weight:bold}
.import{font-size:13px}
.warning{color:#991b1b;font-weight:bold}
button{font:inherit;padding:4px 12px;cursor:pointer}
.layout{display:grid;grid-template-columns:190px minmax(0,1fr);gap:20px;padding:12px 20px}
nav ol{list-style:none;padding:0;margin:0;position:sticky;top:70px}
nav a{display:block;padding:3px 6px;border-radius:4px;color:#1d4ed8;text-decoration:none}
nav a[aria-current=true]{background:#dbeafe;font-weight:bold}
nav a.done::after,h2 .state.done::after{content:" ✓";color:#15803d}
section h2{font-size:17px;margin:4px 0 8px}
.columns{display:grid;grid-template-columns:minmax(0,1fr) minmax(300px,420px);gap:20px;
align-items:start}
.reading{background:#fff;border:1px solid #ddd;padding:4px 14px 12px}
h3{font-size:15px;margin:14px 0 4px}
h4{font-size:13px;margin:8px 0 2px;color:#444}
dl{display:grid;grid-template-columns:auto 1fr;gap:2px 10px;margin:4px 0}
dt{color:#444}
dd{margin:0}
pre{white-space:pre-wrap;overflow-wrap:anywhere;font:13px/1.45 ui-monospace,monospace;
background:#f3f4f6;padding:6px 8px;margin:2px 0}
.turns{display:flex;flex-direction:column;gap:10px}
.turn{border-radius:8px;padding:4px 10px 8px;max-width:92%}
.turn pre{background:none;padding:0;font:14px/1.5 system-ui,sans-serif}
.turn .who{font-size:12px;font-weight:bold;text-transform:uppercase;letter-spacing:.04em;
margin:2px 0}
.turn.student{background:#eff6ff;border:1px solid #bfdbfe;align-self:flex-start}
.turn.student .who{color:#1e40af}
.turn.tutor{background:#fffbeb;border:1px solid #fde68a;align-self:flex-end}
.turn.tutor .who{color:#92400e}
.turn.other{background:#f3f4f6;border:1px solid #ddd}
.hidden-turn{font-size:13px;color:#555;font-style:italic;margin:0}
details.reference{margin:12px 0 0;border-top:1px solid #ddd;padding-top:6px}
details.reference summary{cursor:pointer;font-weight:bold}
img{max-width:100%}
form{background:#fff;border:1px solid #ddd;padding:4px 14px 12px;position:sticky;top:70px;
max-height:calc(100vh - 90px);overflow:auto}
fieldset{border:1px solid #ddd;margin:8px 0;padding:4px 10px 8px}
fieldset:focus-within{border-color:#2563eb;box-shadow:0 0 0 2px #bfdbfe}
legend{font-weight:bold}
.description{font-size:13px;color:#333;margin:2px 0 6px}
.level{display:grid;grid-template-columns:auto auto 1fr;gap:6px;align-items:start;font-size:13px;
padding:3px;border-radius:4px}
.level:has(input:checked){background:#dbeafe}
.unsure{display:block;margin:8px 0}
.notes{display:block;font-weight:bold}
textarea{display:block;width:100%;box-sizing:border-box;font:inherit}
.steps{display:flex;justify-content:space-between}
@media (max-width:900px){header{padding:6px 10px;gap:4px 10px}.help{padding:6px 10px 0}
header h1{font-size:15px}.layout{grid-template-columns:1fr;padding:8px 10px}
.columns{grid-template-columns:1fr}nav ol{position:static;display:flex;flex-wrap:wrap;gap:4px}
form{position:static;max-height:none}.turn{max-width:100%}}`;
