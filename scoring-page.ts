// scoring-page.ts: one scorer's blind scoring page (`<out>/<scorer>.html`, written with the
// sheets): each assigned transcript with what the judge is shown (the task, the private reference
// notes, the transcript, the rubric), a form per transcript saved in the browser as it is filled,
// and a button that downloads the scorer's sheet filled in. Self-contained: inline style and
// script, nothing fetched, no judge score. Every text is escaped; the data rides as JSON with `<`
// escaped.
import { FORMULA_START, allowedScores, csvLine, guardCell, pairKey, sha256 } from './run-judge.ts';
import type { Rubric, TranscriptImage, TranscriptRef } from './run-judge.ts';
import { escapeHtml } from './html-escape.ts';

/** One transcript as its page shows it: the prompt's pieces (`promptValues`) and its images. */
export type PageTranscript = {
  ref: TranscriptRef;
  transcript_sha256: string;
  values: Record<string, string>;
  images: TranscriptImage[];
};

/** What one scorer's page is made of: the sheet (its rows in sheet order) and the page's order. */
export type PageInput = {
  scorer: string;
  rubric: Rubric;
  sheet: string;
  rows: { task_id: string; model: string; transcript_sha256: string }[];
  transcripts: PageTranscript[];
};

/** The page: a list of the transcripts, one shown at a time with its form, and the download. */
export function scoringPage(input: PageInput): string {
  // 1. The data the script needs: the sheet's fixed cells, already guarded and quoted by csvLine.
  const rowOf = new Map(input.rows.map((row, i) => [pairKey(row.task_id, row.model), i]));
  const data = {
    scorer: input.scorer,
    plan: sha256(`${input.sheet}\n${JSON.stringify(input.rubric)}`).slice(0, 16),
    formula: FORMULA_START.source,
    header: input.sheet.slice(0, input.sheet.indexOf('\n') + 1),
    dimensions: input.rubric.dimensions.map((dimension) => dimension.name),
    rows: input.rows.map((row) => {
      return {
        before: csvCells([row.task_id, row.model]),
        after: csvCells([input.scorer, row.transcript_sha256]),
      };
    }),
  };

  // 2. A section per transcript, in the page's order, each with its form.
  const count = input.transcripts.length;
  const sections = input.transcripts.map((transcript, i) => {
    const row = rowOf.get(pairKey(transcript.ref.task_id, transcript.ref.model))!;
    return transcriptSection(transcript, input.rubric, i, count, row);
  });
  const list = input.transcripts.map((transcript, i) => {
    const label = `${i + 1}. task ${transcript.ref.task_id}`;
    return `<li><a href="#t${i}" data-index="${i}">${escapeHtml(label)}</a></li>`;
  });

  // 3. The page.
  const scorer = escapeHtml(input.scorer);
  const json = JSON.stringify(data).replace(/</g, '\\u003c');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Blind scoring: ${scorer}</title>
<style>${PAGE_CSS}</style></head><body>
<header><h1>Blind scoring: ${scorer}</h1>
<p id="left" role="status">${count} of ${count} left</p>
<button type="button" id="download">Download ${scorer}.csv</button>
<p class="hint">Your answers stay in this browser as you go. When done, download ${scorer}.csv
and send it back: it takes the place of the blank ${scorer}.csv of the plan.</p>
<p id="storage" class="warning" hidden>This browser does not keep your answers: download your CSV
before you close the page.</p>
</header>
<div class="layout"><nav><ol>${list.join('')}</ol></nav>
<main>${sections.join('\n')}</main></div>
<script type="application/json" id="plan-data">${json}</script>
<script>${PAGE_SCRIPT}</script>
</body></html>
`;
}

/** Cells as the sheet writes them (guarded, quoted), without the line's end. */
function csvCells(cells: string[]): string {
  return csvLine(cells.map(guardCell)).slice(0, -1);
}

/** One transcript: what the judge reads on the left, the rubric as a form on the right. */
function transcriptSection(
  transcript: PageTranscript,
  rubric: Rubric,
  index: number,
  count: number,
  row: number,
): string {
  const values = transcript.values;
  const images = transcript.images.map((image) => {
    const source = `data:${image.source.media_type};base64,${image.source.data}`;
    const label = escapeHtml(image.label);
    const img = `<img alt="${label}" src="${escapeHtml(source)}">`;
    return `<figure>${img}<figcaption>${label}</figcaption></figure>`;
  });

  const reading = `<div class="reading">
<h3>Task context</h3>
<dl><dt>Task</dt><dd>${escapeHtml(values.task_id!)}</dd>
<dt>Topic</dt><dd>${escapeHtml(values.topic!)}</dd>
<dt>Student level</dt><dd>${escapeHtml(values.student_level!)}</dd></dl>
${textBlock('Problem statement', values.problem_statement!)}
${textBlock('Expected tutor behaviours', values.expected_behaviors!)}
<h3>Private reference notes <small>(never shown to the tutor)</small></h3>
${textBlock('Proof skeleton', values.proof_skeleton!)}
${textBlock('Common misconceptions', values.common_misconceptions!)}
${textBlock('Red flags', values.red_flags!)}
<h3>Transcript</h3>
<pre class="transcript-text">${escapeHtml(values.transcript!)}</pre>${images.join('')}
</div>`;

  const dimensions = rubric.dimensions.map((dimension) => {
    const levels = allowedScores(dimension).map((score) => {
      const level = escapeHtml(dimension.scores[String(score)]!);
      const name = escapeHtml(dimension.name);
      return `<label class="level"><input type="radio" name="${name}" value="${score}"><b>${score}</b> <span>${level}</span></label>`;
    });
    return `<fieldset><legend>${escapeHtml(dimension.name)}</legend>
<p class="description">${escapeHtml(dimension.description)}</p>${levels.join('')}</fieldset>`;
  });
  const form = `<form class="scores" data-row="${row}" autocomplete="off"><h3>Rubric and your scores</h3>
${dimensions.join('\n')}
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
header p{margin:0}
#left{font-weight:bold}
.hint{font-size:13px;color:#444;flex:1 1 300px}
.warning{color:#991b1b;flex-basis:100%}
button{font:inherit;padding:4px 12px;cursor:pointer}
.layout{display:grid;grid-template-columns:190px minmax(0,1fr);gap:20px;padding:12px 20px}
nav ol{list-style:none;padding:0;margin:0;position:sticky;top:64px}
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
.transcript-text{background:#fffbeb}
img{max-width:100%}
form{background:#fff;border:1px solid #ddd;padding:4px 14px 12px;position:sticky;top:64px;
max-height:calc(100vh - 90px);overflow:auto}
fieldset{border:1px solid #ddd;margin:8px 0;padding:4px 10px 8px}
legend{font-weight:bold}
.description{font-size:13px;color:#333;margin:2px 0 6px}
.level{display:grid;grid-template-columns:auto auto 1fr;gap:6px;align-items:start;font-size:13px;
padding:3px;border-radius:4px}
.level:has(input:checked){background:#dbeafe}
.notes{display:block;font-weight:bold}
textarea{display:block;width:100%;box-sizing:border-box;font:inherit}
.steps{display:flex;justify-content:space-between}
@media (max-width:900px){header{position:static}.layout{grid-template-columns:1fr}
.columns{grid-template-columns:1fr}nav ol{position:static;display:flex;flex-wrap:wrap;gap:4px}
form{position:static;max-height:none}}`;

/** The page's behaviour: answers kept in localStorage per scorer and plan, one transcript shown. */
const PAGE_SCRIPT = String.raw`(() => {
  const data = JSON.parse(document.getElementById('plan-data').textContent);
  const formula = new RegExp(data.formula);
  const key = 'run-judge-scoring:' + data.plan + ':' + data.scorer;
  const sections = Array.from(document.querySelectorAll('section.transcript'));
  const forms = sections.map((section) => section.querySelector('form.scores'));
  const links = Array.from(document.querySelectorAll('nav a'));
  const formOfRow = new Map(forms.map((form) => [Number(form.dataset.row), form]));

  let saved = {};
  let storable = true;
  try {
    saved = JSON.parse(localStorage.getItem(key) || '{}') || {};
  } catch (error) {
    storable = false;
  }

  const answerOf = (form) => {
    const scores = {};
    for (const name of data.dimensions) {
      const value = form.elements.namedItem(name).value;
      if (value !== '') scores[name] = value;
    }
    return { scores: scores, notes: form.elements.namedItem('notes').value };
  };
  const complete = (form) => Object.keys(answerOf(form).scores).length === data.dimensions.length;

  const restore = (form) => {
    const answer = saved[form.dataset.row];
    if (!answer) return;
    for (const input of form.querySelectorAll('input[type=radio]')) {
      input.checked = answer.scores !== undefined && answer.scores[input.name] === input.value;
    }
    form.elements.namedItem('notes').value = answer.notes || '';
  };

  const save = (form) => {
    saved[form.dataset.row] = answerOf(form);
    if (!storable) return;
    try {
      localStorage.setItem(key, JSON.stringify(saved));
    } catch (error) {
      storable = false;
      document.getElementById('storage').hidden = false;
    }
  };

  const update = () => {
    let left = 0;
    forms.forEach((form, i) => {
      const done = complete(form);
      if (!done) left++;
      links[i].classList.toggle('done', done);
      sections[i].querySelector('h2 .state').classList.toggle('done', done);
    });
    const status = document.getElementById('left');
    status.textContent = left === 0
      ? 'All ' + forms.length + ' scored: download your CSV'
      : left + ' of ' + forms.length + ' left';
  };

  let current = 0;
  const show = (index) => {
    current = Math.max(0, Math.min(sections.length - 1, index));
    sections.forEach((section, i) => {
      section.hidden = i !== current;
    });
    links.forEach((link, i) => link.setAttribute('aria-current', String(i === current)));
    sections[current].querySelector('button.prev').disabled = current === 0;
    sections[current].querySelector('button.next').disabled = current === sections.length - 1;
    window.scrollTo(0, 0);
  };

  const cell = (text) => {
    const guarded = formula.test(text) ? "'" + text : text;
    return /[",\r\n]/.test(guarded) ? '"' + guarded.replace(/"/g, '""') + '"' : guarded;
  };
  const sheet = () => {
    const lines = data.rows.map((row, i) => {
      const answer = answerOf(formOfRow.get(i));
      const scores = data.dimensions.map((name) => answer.scores[name] || '');
      return [row.before, scores.join(','), cell(answer.notes), row.after].join(',') + '\n';
    });
    return data.header + lines.join('');
  };

  forms.forEach((form) => {
    // A reload may restore other choices than those saved: the saved answers rule.
    form.reset();
    restore(form);
    const changed = () => {
      save(form);
      update();
    };
    form.addEventListener('input', changed);
    form.addEventListener('change', changed);
    form.addEventListener('submit', (event) => event.preventDefault());
  });
  links.forEach((link, i) => link.addEventListener('click', (event) => {
    event.preventDefault();
    show(i);
  }));
  document.querySelectorAll('button.prev').forEach((button) => {
    button.addEventListener('click', () => show(current - 1));
  });
  document.querySelectorAll('button.next').forEach((button) => {
    button.addEventListener('click', () => show(current + 1));
  });
  document.getElementById('download').addEventListener('click', () => {
    const link = document.createElement('a');
    link.href = URL.createObjectURL(new Blob([sheet()], { type: 'text/csv' }));
    link.download = data.scorer + '.csv';
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 60000);
  });

  if (!storable) document.getElementById('storage').hidden = false;
  update();
  const firstOpen = forms.findIndex((form) => !complete(form));
  show(firstOpen < 0 ? 0 : firstOpen);
})();`;
