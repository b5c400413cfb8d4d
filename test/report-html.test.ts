// report.ts --html: one self-contained page, every untrusted string (transcript, notes, names) escaped.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { stringify } from 'csv-stringify/sync';
import { RUBRIC_FILE, fallbackAndThinkingRun, makeWorkspace, mentioning } from './helpers.ts';
import { readLog, sha256, tempDir, writeJson } from './helpers.ts';

const { analyse } = await import('../report/analysis.ts');
const { main } = await import('../report.ts');
const { readJudgeCsv } = await import('../run-judge.ts');
const { escapeHtml } = await import('../report/html-escape.ts');
const { pageScript } = await import('../report/page-script.ts');
const pageModule = await import('../report/html.ts');
const { axisTicks, byDisagreement, confusionGrid, disagreement } = pageModule;
const { forestPanels, forestPlot, renderHtml, rubricLevels, runFacts } = pageModule;
const { noAudit } = await import('../report/inputs.ts');
const { transcriptEntries, transcriptId, withoutBlankColumns } = pageModule;
const { loadRubric } = await import('../run-judge.ts');
type ScoreRow = import('../run-judge.ts').ScoreRow;
type HumanRow = import('../run-judge.ts').HumanRow;
type RunFacts = import('../report/html.ts').RunFacts;
const rubric = loadRubric(RUBRIC_FILE);
const DIMENSIONS = rubric.dimensions.map((dimension) => dimension.name);
const FIRST = DIMENSIONS[0]!;
const SECOND = DIMENSIONS[1]!;

const HOSTILE = `<b>&"'`;
const ESCAPED = '&#60;b&#62;&#38;&#34;&#39;';
const SCRIPT = '<script>alert(1)</script>';
const all = (score: number) => Object.fromEntries(DIMENSIONS.map((name) => [name, score]));
const judge = (model: string, task_id: string, score: number, notes = '') => ({
  model,
  task_id,
  notes,
  scores: all(score),
});
const human = (
  model: string,
  task_id: string,
  scorer: string,
  scores: Record<string, number>,
  notes = '',
) => ({
  model,
  task_id,
  scorer,
  notes,
  scores,
});
/** Every tag of the page: text is escaped, so each `<` left in it opens markup the page itself wrote. */
const tagsOf = (html: string) => html.match(/<[^>]*>/g) ?? [];
/** A dimension's name in a transcript's score table: a link to its section. */
const link = (name: string) => `<a href="#d-${name}">${name}</a>`;

/** A small page: a hostile model, scorer, notes and transcript; alice agrees with the judge, the hostile scorer not. */
function hostilePage() {
  const judged = [
    judge(`m${HOSTILE}`, 'p1', 2, `judge says ${HOSTILE} ${SCRIPT}`),
    judge('m2', 'p1', 1),
  ];
  const humans = [
    human(`m${HOSTILE}`, 'p1', 'alice', all(2)),
    human(`m${HOSTILE}`, 'p1', HOSTILE, { ...all(2), [FIRST]: 1 }, `human note ${HOSTILE}`),
    human('m2', 'p1', '', all(1)),
  ];
  const texts: Record<string, string> = {
    [`m${HOSTILE}`]: `Student: ${SCRIPT} <img src=x onerror=alert(2)>`,
  };
  const entries = transcriptEntries(judged, humans).map((entry) => ({
    ...entry,
    judged_by: {
      judge: `judge-${HOSTILE}`,
      fallback: false,
      timestamp: '2026-12-01T10:00:00Z',
      thinking: [`thinking ${SCRIPT}`],
    },
    transcript: texts[entry.model] ?? { unavailable: `transcript not shown: ${HOSTILE}` },
  }));
  const report = analyse(judged, humans, rubric);
  const run = unknownRun();
  run.judges.push({ name: `judge-${HOSTILE}`, rows: 2, fallback_rows: 0 });
  return renderHtml({ report, rubric, run, entries });
}

/** A run the audit log says nothing of. */
function unknownRun(): RunFacts {
  return {
    judges: [],
    rubric_sha256: null,
    prompt_template_sha256: null,
    last_judged: null,
    total_cost_usd: null,
    human_scoring: null,
  };
}

/** The page of a report with no transcripts: its tables, plots and grids alone. */
function pageOf(judged: ScoreRow[], humans: HumanRow[]): string {
  const report = analyse(judged, humans, rubric);
  return renderHtml({ report, rubric, run: unknownRun(), entries: [] });
}

describe('renderHtml: the report as one self-contained page', () => {
  test('escapeHtml: & < > " \' become entities, so text can never open a tag or close an attribute', () => {
    assert.equal(
      escapeHtml(`${SCRIPT}&"'`),
      '&#60;script&#62;alert(1)&#60;/script&#62;&#38;&#34;&#39;',
    );
  });

  test("a hostile transcript, notes, scorer, model and judge name appear only escaped; the page's one script is its own", () => {
    const html = hostilePage();
    const scripts = html.match(/<script[^>]*>[\s\S]*?<\/script>/gi) ?? [];
    assert.equal(scripts.length, 1, 'one script tag');
    assert.equal(
      scripts[0],
      `<script>${pageScript('report-filters.js')}</script>`,
      'the checked file',
    );
    assert.ok(!scripts[0]!.includes('alert') && !scripts[0]!.includes('&#'), 'no page text in it');
    assert.ok(!html.includes(HOSTILE), 'no raw hostile name or note');
    assert.ok(
      html.includes(`&#60;script&#62;alert(1)&#60;/script&#62;`),
      'the script shows as text',
    );
    for (const where of [
      `m${ESCAPED} / p1`,
      `<th>${ESCAPED}</th>`,
      `human note ${ESCAPED}`,
      `judge-${ESCAPED}: 2 rows`,
      `thinking &#60;script&#62;alert(1)`,
    ]) {
      assert.ok(html.includes(where), `escaped: ${where}`);
    }
    assert.ok(!tagsOf(html).some((tag) => /onerror|<img/i.test(tag)), 'the transcript made no tag');
  });

  test('nothing external: no link, no src, no href but to an anchor or the definitions, no url() or @import', () => {
    const html = hostilePage();
    for (const tag of tagsOf(html)) {
      const external = /^<(link|img|iframe|object|embed)|\s(src=|href="(?!#|docs\/analysis\.md#))/i;
      assert.ok(!external.test(tag), tag);
      assert.ok(!/^<script\s/i.test(tag), `a script with attributes: ${tag}`);
    }
    assert.ok(
      !/url\(|@import|https?:/i.test(html.slice(0, html.indexOf('</style>'))),
      'nothing fetched by the style',
    );
    assert.match(html, /^<!doctype html>\n<html lang="en"><head><meta charset="utf-8">/);
  });

  test('a human score that differs from the judge is highlighted, an agreeing one not; "human" for no scorer', () => {
    const html = hostilePage();
    const row = (name: string) =>
      new RegExp(`<tr><th>${link(name)}</th><td>2</td><td>2</td><td class="differs">1</td></tr>`);
    assert.match(html, row(FIRST), 'judge 2, alice 2, the hostile scorer 1');
    assert.match(
      html,
      new RegExp(`<tr><th>${link(SECOND)}</th><td>2</td><td>2</td><td>2</td></tr>`),
      'all agree',
    );
    assert.match(
      html,
      /<th>dimension<\/th><th>judge<\/th><th>human<\/th>/,
      'm2 has one human row, no scorer',
    );
  });

  test('the transcript is folded away in <details>; a missing one is an escaped note in its place', () => {
    const html = hostilePage();
    assert.match(
      html,
      /<details class="transcript"><summary>Transcript<\/summary><pre>Student: &#60;script&#62;[^<]*<\/pre><\/details>/,
    );
    assert.match(
      html,
      /<h3>m2 \/ p1<\/h3>(?:(?!<section)[\s\S])*<em>transcript not shown: &#60;b&#62;/,
    );
    assert.equal(html.match(/<details class="transcript">/g)?.length, 1);
  });

  test("the judge's thinking is folded right under its notes, escaped; none without thinking", () => {
    const html = hostilePage();
    const notes = `<p class="notes"><b>judge's notes:</b> judge says ${ESCAPED} [^<]*</p>`;
    const thinking = `<details class="thinking"><summary>The judge's thinking</summary><pre>thinking &#60;script&#62;`;
    assert.match(html, new RegExp(`${notes}${thinking}`));
    assert.equal(html.match(/<details class="thinking">/g)?.length, 2, 'one per judged transcript');
    assert.doesNotMatch(pageOf([judge('m1', 'p1', 1)], []), /class="thinking"/);

    const judged = [judge('m1', 'p1', 1)];
    const entry = transcriptEntries(judged, [])[0]!;
    const judged_by = {
      judge: 'j',
      fallback: false,
      timestamp: null,
      thinking: ['first', 'second'],
    };
    const entries = [{ ...entry, judged_by, transcript: 'text' }];
    const report = analyse(judged, [], rubric);
    const samples = renderHtml({ report, rubric, run: unknownRun(), entries });
    assert.match(samples, /<pre>— answer 1 —\nfirst\n\n— answer 2 —\nsecond<\/pre>/, 'each named');
  });

  test('a confusion grid: counts shaded by count / max count, the diagonal outlined, totals', () => {
    const judged = [judge('m1', 'p1', 2), judge('m1', 'p2', 2), judge('m1', 'p3', 0)];
    const humans = judged.map((row) => human(row.model, row.task_id, 'al', all(2)));
    const report = analyse(judged, humans, rubric);
    const grid = confusionGrid(report.dimensions[0]!);
    assert.match(
      grid,
      /<tr><th>human ↓ judge →<\/th><th>0<\/th><th>1<\/th><th>2<\/th><th>total<\/th><\/tr>/,
    );
    const shade = (share: string, count: number, diagonal = false) => {
      const classes = [share > '0.50' ? 'dark' : '', diagonal ? 'diagonal' : ''].filter(Boolean);
      const attribute = classes.length > 0 ? ` class="${classes.join(' ')}"` : '';
      return `<td style="background:rgba\\(29,78,216,${share}\\)"${attribute}>${count}</td>`;
    };
    const total = (count: number) => `<td class="total">${count}</td>`;
    const zeros = `${shade('0.00', 0, true)}${shade('0.00', 0)}${shade('0.00', 0)}${total(0)}`;
    assert.match(grid, new RegExp(`<tr><th>0</th>${zeros}</tr>`), 'a row nobody gave, total 0');
    const twos = `${shade('0.50', 1)}${shade('0.00', 0)}${shade('1.00', 2, true)}${total(3)}`;
    assert.match(grid, new RegExp(`<tr><th>2</th>${twos}</tr>`), 'human 2: judge 0 once, 2 twice');
    const columns = `${total(1)}${total(0)}${total(2)}${total(3)}`;
    assert.match(grid, new RegExp(`<tr><th>total</th>${columns}</tr>`), 'column totals, then n');
    assert.equal(grid.match(/class="[^"]*diagonal/g)?.length, 3, 'one diagonal cell per score');
    assert.match(grid, /<caption>on the diagonal: 2 of 3 \(67%\)<\/caption>/);
  });

  test('axisTicks: 4 to 10 round values from min to max, ends included when round', () => {
    assert.deepEqual(axisTicks(0, 2), [0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2]);
    assert.deepEqual(axisTicks(0, 1), [0, 0.2, 0.4, 0.6, 0.8, 1]);
    assert.deepEqual(axisTicks(-0.5, 1), [-0.4, -0.2, 0, 0.2, 0.4, 0.6, 0.8, 1]);
    assert.deepEqual(axisTicks(0, 4), [0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4]);
    assert.deepEqual(axisTicks(1, 10), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    assert.deepEqual(axisTicks(3, 3), [3]);
  });

  test("forestPlot: a line per interval, a dot per value, on the panel's axis; labels escaped", () => {
    const panels = [
      {
        title: 'kappa',
        min: 0,
        max: 1,
        rows: [
          {
            label: 'judge',
            marks: [{ who: 'judge' as const, value: 0.5, ci: [0.25, 1] as const }],
            text: 'a',
          },
          {
            label: HOSTILE,
            marks: [{ who: 'ceiling' as const, value: 0.75, ci: null }],
            text: HOSTILE,
          },
        ],
      },
      {
        title: 'means',
        min: 0,
        max: 2,
        rows: [
          {
            label: 'm1',
            marks: [
              { who: 'judge' as const, value: 2, ci: [1, 2] as const },
              { who: 'human' as const, value: null, ci: null },
            ],
            text: 'b',
          },
        ],
      },
    ];
    const svg = forestPlot(panels, 'plot');
    assert.match(
      svg,
      /^<svg xmlns="http:\/\/www.w3.org\/2000\/svg" class="forest" viewBox="0 0 800 \d+"/,
    );
    assert.equal(svg.match(/<g class="interval /g)?.length, 2, 'two intervals');
    assert.equal(svg.match(/<g class="point /g)?.length, 2, 'a value alone, and nothing at all');
    // The axis runs from x 180 to 580: 0.25 of [0, 1] is 280, 1 is 580; 1 of [0, 2] is 380.
    assert.match(
      svg,
      /<g class="interval judge"><line x1="280" x2="580" y1="\d+" y2="\d+"\/><circle cx="380"/,
    );
    assert.match(svg, /<g class="interval judge"><line x1="380" x2="580" [^>]*\/><circle cx="580"/);
    assert.match(svg, /<g class="point ceiling"><rect x="476.5"/);
    assert.match(svg, /<g class="point human"><\/g>/, 'no figure: nothing drawn');
    assert.ok(!svg.includes(HOSTILE) && svg.includes(`>${ESCAPED}</text>`), 'escaped');
    const tickLabels = [...svg.matchAll(/<g class="tick[^"]*">.*?<text[^>]*>([^<]*)<\/text>/g)];
    assert.equal(tickLabels.length, 6 + 9, 'ticks of both panels');
    const empty = forestPlot([{ title: 'nothing', min: 0, max: 1, rows: [] }, panels[1]!], 'plot');
    assert.ok(!empty.includes('nothing'), 'a panel without rows is left out');
    assert.ok(!svg.includes('tick zero'), 'an axis from 0: no zero line');
    const below = forestPlot([{ title: 'gap', min: -0.5, max: 1, rows: panels[0]!.rows }], 'p');
    assert.equal(below.match(/<g class="tick zero"><line x1="313.33"/g)?.length, 1, 'zero marked');
  });

  test('forestPanels: kappa and ceiling, then a row per model with its judge and human means', () => {
    const judged = [judge('m1', 'p1', 2), judge('m1', 'p2', 1), judge('m2', 'p1', 0)];
    const humans = [
      human('m1', 'p1', 'al', all(2)),
      human('m1', 'p1', 'bo', all(1)),
      human('m1', 'p2', 'al', all(1)),
      human('m2', 'p1', 'al', all(0)),
    ];
    const report = analyse(judged, humans, rubric);
    const dimension = report.dimensions[0]!;
    const panels = forestPanels(dimension, report.models);
    // The kappa axis reaches down to the lowest figure, in quarters, and at least to 0.
    const ends = [dimension.gap_to_ceiling!.kappa_diff!, ...(dimension.gap_to_ceiling!.ci95 ?? [])];
    const kappaMin = Math.min(0, Math.floor(Math.min(...ends) * 4) / 4);
    assert.deepEqual(
      panels.map((panel) => [panel.min, panel.max, panel.rows.map((row) => row.label)]),
      [
        [kappaMin, 1, ['judge vs human', 'human vs human', 'gap: judge − ceiling']],
        [0, 2, ['m1', 'm2']],
      ],
    );
    const m1 = panels[1]!.rows[0]!;
    assert.deepEqual(
      m1.marks.map((mark) => [mark.who, mark.value]),
      [
        ['judge', report.models[0]!.judge_mean[FIRST]],
        ['human', report.models[0]!.human_mean[FIRST]],
      ],
    );
    const withoutCeiling = analyse(
      judged,
      humans.filter((row) => row.scorer === 'al'),
      rubric,
    );
    const kappaRows = forestPanels(withoutCeiling.dimensions[0]!, withoutCeiling.models)[0]!.rows;
    assert.deepEqual(
      kappaRows.map((row) => row.label),
      ['judge vs human'],
      'no ceiling, no row',
    );

    const judgeOnly = analyse([...judged, judge('m3', 'p1', 1)], humans, rubric);
    const m3 = forestPanels(judgeOnly.dimensions[0]!, judgeOnly.models)[1]!.rows[2]!;
    assert.equal(m3.label, 'm3');
    assert.equal(m3.text, 'no matched transcript');
    assert.deepEqual(
      m3.marks.map((mark) => [mark.value, mark.ci]),
      [
        [null, null],
        [null, null],
      ],
    );
  });

  test('withoutBlankColumns: a column of only "-" (or "- -") goes; one figure keeps it', () => {
    const rows = [
      ['a', 'b', 'c', 'd'],
      ['1', '-', '- -', '-'],
      ['2', '-', '- [-, -]', '0.50 -'],
    ];
    assert.deepEqual(withoutBlankColumns(rows), [
      ['a', 'd'],
      ['1', '-'],
      ['2', '0.50 -'],
    ]);
    assert.deepEqual(withoutBlankColumns([['a', 'b']]), [['a', 'b']], 'no body: kept');
    const html = hostilePage();
    assert.doesNotMatch(html, /samples unanimous/, 'no samples: the column is gone');
    assert.match(html, /<th>disagreement<\/th>/);
    const judged = [judge('m1', 'p1', 1)];
    const entries = transcriptEntries(judged, []).map((entry) => {
      return { ...entry, judged_by: undefined, transcript: 'text' };
    });
    const report = analyse(judged, [], rubric);
    const before = renderHtml({ report, rubric, run: unknownRun(), entries });
    assert.doesNotMatch(before, /disagreement<\/th>/, 'before human scoring: no such column');
    assert.match(before, /<td>unknown \(not in the audit log\)<\/td><td>0<\/td><\/tr>/);
  });

  test('disagreement: steps on the scale, summed over dimensions, averaged over scorers', () => {
    const report = analyse([judge('m1', 'p1', 2)], [], rubric);
    const entry = (humans: HumanRow[], judged: ScoreRow | null = judge('m1', 'p1', 2)) => ({
      model: 'm1',
      task_id: 'p1',
      judge: judged ?? undefined,
      humans,
    });
    const near = { ...all(2), [FIRST]: 1 };
    assert.equal(disagreement(entry([human('m1', 'p1', 'al', all(2))]), report), 0);
    assert.equal(disagreement(entry([human('m1', 'p1', 'al', near)]), report), 1);
    const far = human('m1', 'p1', 'bo', all(0));
    assert.equal(disagreement(entry([human('m1', 'p1', 'al', near), far]), report), (1 + 12) / 2);
    const partial = human('m1', 'p1', 'al', { [FIRST]: 0 });
    assert.equal(disagreement(entry([partial]), report), 2, 'only the dimensions scored');
    assert.equal(disagreement(entry([]), report), null, 'no human row');
    assert.equal(disagreement(entry([far], null), report), null, 'no judge row');
  });

  test('byDisagreement: the largest first, those without a figure last, ties by model then task', () => {
    const report = analyse([judge('m1', 'p1', 2)], [], rubric);
    const entry = (model: string, task_id: string, score: number | null) => ({
      model,
      task_id,
      judge: score === null ? undefined : judge(model, task_id, 2),
      humans: score === null ? [] : [human(model, task_id, 'al', all(score))],
    });
    const entries = [
      entry('a', 'p1', 2),
      entry('b', 'p1', null),
      entry('b', 'p2', 0),
      entry('a', 'p2', null),
      entry('c', 'p1', 1),
      entry('a', 'p3', 0),
    ];
    const order = byDisagreement(entries, report).map((row) => `${row.model}/${row.task_id}`);
    assert.deepEqual(order, ['a/p3', 'b/p2', 'c/p1', 'a/p1', 'a/p2', 'b/p1']);
  });

  test('transcriptId: a safe anchor, different for every (model, task), even look-alikes', () => {
    const ids = [
      transcriptId({ model: 'm1', task_id: 'p1' }),
      transcriptId({ model: 'm1.p1', task_id: '' }),
      transcriptId({ model: 'm1', task_id: 'p 1' }),
      transcriptId({ model: 'm1', task_id: 'p_1' }),
      transcriptId({ model: `m${HOSTILE}`, task_id: 'p1' }),
    ];
    assert.equal(ids[0], 't-m1.p1');
    assert.equal(new Set(ids).size, ids.length, ids.join(' '));
    for (const id of ids) {
      assert.match(id, /^t-[A-Za-z0-9_.-]*$/);
    }
  });

  test("rubricLevels: the dimension's description and each level's text, folded, escaped", () => {
    const levels = rubricLevels(rubric, FIRST);
    const dimension = rubric.dimensions[0]!;
    assert.match(levels, /^<details class="rubric"><summary>/);
    assert.ok(levels.includes(`<p>${escapeHtml(dimension.description)}</p>`));
    for (const [score, text] of Object.entries(dimension.scores)) {
      assert.ok(levels.includes(`<dt>${score}</dt><dd>${escapeHtml(text)}</dd>`), score);
    }
    const hostile = { dimensions: [{ name: 'x', description: SCRIPT, scores: { '0': HOSTILE } }] };
    assert.ok(!rubricLevels(hostile, 'x').includes('<script'));
    assert.equal(rubricLevels(rubric, 'no_such_dimension'), '');
  });

  test("runFacts: the audit log's judges with their fallbacks, hashes, cost, human scoring", () => {
    const audit = {
      rows: new Map(),
      rows_by_judge: new Map([
        ['opus', 5],
        ['__proto__', 1],
      ]),
      fallback_rows: new Map([['__proto__', 1]]),
      rubric_sha256: ['aaa', 'bbb'],
      prompt_template_sha256: ['ccc'],
      last_judged: '2026-12-01T10:00:00Z',
      total_cost_usd: 0.25,
      human_scoring: { complete: 5, incomplete: 1 },
      before_human_scoring_rows: 2,
    };
    assert.deepEqual(runFacts(audit), {
      judges: [
        { name: 'opus', rows: 5, fallback_rows: 0 },
        { name: '__proto__', rows: 1, fallback_rows: 1 },
      ],
      rubric_sha256: 'mixed rubrics: aaa, bbb',
      prompt_template_sha256: 'ccc',
      last_judged: '2026-12-01T10:00:00Z',
      total_cost_usd: 0.25,
      human_scoring: '{"complete":5,"incomplete":1}; 2 row(s) judged before human scoring',
    });
    assert.deepEqual(runFacts(noAudit()), unknownRun(), 'an old log or none: all unknown');
  });

  test('the run: each judge with its rows and fallbacks; what the log does not say is "unknown"', () => {
    const report = analyse([judge('m1', 'p1', 2)], [], rubric);
    const run = {
      judges: [
        { name: 'opus', rows: 5, fallback_rows: 0 },
        { name: 'sonnet', rows: 1, fallback_rows: 1 },
      ],
      rubric_sha256: 'abc123',
      prompt_template_sha256: null,
      last_judged: '2026-12-01T10:00:00Z',
      total_cost_usd: null,
      human_scoring: 'complete',
    };
    const page = renderHtml({ report, rubric, run, entries: [] });
    const cell = (name: string, value: string) => `<tr><th>${name}</th><td>${value}</td></tr>`;
    for (const [name, value] of [
      ['judges', 'opus: 5 rows; sonnet: 1 row (1 as a fallback)'],
      ['rubric sha256', 'abc123'],
      ['prompt template sha256', 'unknown'],
      ['last judged row', '2026-12-01T10:00:00Z'],
      ['total cost', 'unknown'],
      ['human scoring (as the last run found it)', 'complete'],
    ]) {
      assert.ok(page.includes(cell(name!, value!)), `${name}: ${value}`);
    }
    const priced = renderHtml({
      report,
      rubric,
      run: { ...run, total_cost_usd: 1.5 },
      entries: [],
    });
    assert.ok(priced.includes(cell('total cost', '$1.5000')));
  });

  test('transcriptEntries: each transcript with a judge or a human row once, sorted by model then task', () => {
    const entries = transcriptEntries(
      [judge('b', 'p2', 1), judge('a', 'p9', 1)],
      [
        human('b', 'p1', 'al', all(1)),
        human('b', 'p2', 'al', all(1)),
        human('b', 'p2', 'bo', all(1)),
      ],
    );
    assert.deepEqual(
      entries.map((entry) => [
        entry.model,
        entry.task_id,
        entry.judge?.scores[FIRST],
        entry.humans.length,
      ]),
      [
        ['a', 'p9', 1, 0],
        ['b', 'p1', undefined, 1],
        ['b', 'p2', 1, 2],
      ],
    );
  });
});

describe('`report.ts --html FILE`: the page written beside the usual output', () => {
  /** A workspace (m01, m02 x proof01..03) with judge and human CSVs; m01/proof01 hostile, m02/proof03 missing. */
  function setup(t: import('node:test').TestContext) {
    const ws = makeWorkspace();
    t.after(() => ws.remove());
    const dir = tempDir(t);
    const scores = path.join(dir, 'judge.csv');
    const humans = path.join(dir, 'human.csv');
    const score = (model: string, task: string) =>
      model === 'm01' ? 2 : task === 'proof01' ? 0 : 1;
    const guarded = `'=${HOSTILE}`; // run-judge's formula guard, which the page takes off
    fs.writeFileSync(
      scores,
      stringify([
        ['task_id', 'model', ...DIMENSIONS, 'notes'],
        ...ws.pairs.map((p) => [
          p.task_id,
          p.model,
          ...DIMENSIONS.map(() => score(p.model, p.task_id)),
          guarded,
        ]),
      ]),
    );
    const rows = ws.pairs.flatMap((p) =>
      ['alice', HOSTILE].map((scorer, i) => {
        const own = DIMENSIONS.map((_, j) =>
          Math.max(0, score(p.model, p.task_id) - ((i * j) % 2)),
        );
        return [p.task_id, p.model, ...own, `notes by ${scorer}`, scorer];
      }),
    );
    fs.writeFileSync(
      humans,
      stringify([['task_id', 'model', ...DIMENSIONS, 'notes', 'scorer'], ...rows]),
    );
    const file = path.join(ws.transcripts, 'm01', 'proof01.json');
    const transcript = JSON.parse(fs.readFileSync(file, 'utf8'));
    transcript.messages.push({ role: 'user', content: `${SCRIPT} ${HOSTILE}` });
    writeJson(file, transcript);
    fs.rmSync(path.join(ws.transcripts, 'm02', 'proof03.json'));
    const args = [
      '--scores',
      scores,
      '--human-scores',
      humans,
      '--rubric',
      ws.rubric,
      '--transcripts',
      ws.transcripts,
    ];
    return { args: [...args, '--log', path.join(dir, 'no.log')], dir };
  }
  const run = async (args: string[]) => {
    let stdout = '';
    let stderr = '';
    const io = {
      stdout: { write: (text: string) => (stdout += text) },
      stderr: { write: (text: string) => (stderr += text) },
    };
    return { code: await main(args, io as never), stdout, stderr };
  };

  test('writes the page, with every transcript, and still prints the table', async (t) => {
    const { args, dir } = setup(t);
    const page = path.join(dir, 'report.html');
    const { code, stdout } = await run([...args, '--html', page]);
    assert.equal(code, 0);
    assert.match(stdout, /^12 \(transcript, scorer\) pairs; no human row: none/);
    const html = fs.readFileSync(page, 'utf8');
    assert.equal(html.match(/<section class="transcript"/g)?.length, 6, 'one per transcript');
    assert.equal(html.match(/<script/gi)?.length, 1, "the page's own script alone");
    assert.ok(!html.includes(HOSTILE));
    assert.match(html, /<b>judge's notes:<\/b> =&#60;b&#62;/, 'one formula guard taken off');
    assert.match(
      html,
      /<pre>[^<]*Student: &#60;script&#62;alert\(1\)&#60;\/script&#62; &#60;b&#62;/,
    );
    assert.match(
      html,
      /<em>transcript not shown: [^<]*proof03\.json: file not found in the transcripts folder<\/em>/,
    );
    // The second scorer is 3 steps off the judge, but on m02/proof01 (all 0, nothing lower): last.
    const headings = [...html.matchAll(/<section class="transcript" id="[^"]*"><h3>(.*?)<\/h3>/g)];
    assert.deepEqual(
      headings.map((match) => match[1]),
      [
        'm01 / proof01',
        'm01 / proof02',
        'm01 / proof03',
        'm02 / proof02',
        'm02 / proof03',
        'm02 / proof01',
      ],
    );
  });

  test("a judge run's own audit log fills the page: judges, fallback, hashes, cost, thinking", async (t) => {
    const ws = await fallbackAndThinkingRun(t);

    const page = path.join(tempDir(t), 'report.html');
    const inputs = ['--scores', ws.output, '--human-scores', ws.humanScores, '--rubric', ws.rubric];
    const paths = ['--transcripts', ws.transcripts, '--log', ws.log, '--html', page];
    const { code, stderr } = await run([...inputs, ...paths]);
    assert.equal(code, 0, stderr);

    const log = readLog(ws.log);
    const html = fs.readFileSync(page, 'utf8');
    const fact = (name: string) => {
      return html.match(new RegExp(`<tr><th>${name}</th><td>([^<]*)</td>`))?.[1];
    };
    const judges = fact('judges')!.split('; ').sort();
    assert.deepEqual(judges, ['judge-a: 1 row', 'judge-b: 1 row (1 as a fallback)']);
    assert.equal(fact('rubric sha256'), sha256(fs.readFileSync(ws.rubric)));
    const templates = new Set(log.map((entry) => entry.prompt_template_sha256));
    assert.equal(templates.size, 1, 'one template a run');
    assert.match(fact('prompt template sha256') ?? '', /^[0-9a-f]{64}$/);
    assert.equal(fact('prompt template sha256'), [...templates][0]);
    const timestamps = log.map((entry) => entry.timestamp).sort();
    assert.equal(fact('last judged row'), timestamps.at(-1));
    const total = log.reduce((sum, entry) => sum + entry.cost_usd!, 0);
    assert.equal(fact('total cost'), `$${total.toFixed(4)}`);

    const section = (id: string) => html.slice(html.indexOf(`id="${id}"`)).split('</section>')[0]!;
    const fallback = section('t-m01.proof01');
    assert.match(fallback, /judged by judge-b \(fallback\); on /);
    assert.doesNotMatch(fallback, /class="thinking"/, "judge-a's thinking there scored nothing");
    const thought = log.find((entry) => entry.judge === 'judge-a')!.answers[0]!.thinking!;
    assert.match(thought, /fake thinking/);
    const thinking = `<details class="thinking"><summary>The judge's thinking</summary><pre>`;
    assert.ok(section('t-m01.proof02').includes(`${thinking}${escapeHtml(thought)}</pre>`));
  });

  test('a page it cannot write is an input error naming the file, exit 2, no stack trace', async (t) => {
    const { args, dir } = setup(t);
    const page = path.join(dir, 'no-such-folder', 'report.html');
    const { code, stderr } = await run([...args, '--html', page]);
    assert.equal(code, 2);
    assert.match(stderr, mentioning(`report: ${page}: cannot write the HTML page`));
    assert.ok(!/\n\s+at /.test(stderr), stderr);
  });

  test('readJudgeCsv keeps the notes, one leading formula guard taken off', (t) => {
    const file = path.join(tempDir(t), 'judge.csv');
    const row = (task: string, notes: string) => [task, 'm1', ...DIMENSIONS.map(() => 1), notes];
    fs.writeFileSync(
      file,
      stringify([
        ['task_id', 'model', ...DIMENSIONS, 'notes'],
        row('p1', "'=1+1"),
        row('p2', "''x"),
      ]),
    );
    assert.deepEqual(
      readJudgeCsv(file, rubric).map((r) => r.notes),
      ['=1+1', "'x"],
    );
  });
});
