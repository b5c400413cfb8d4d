// report.ts --html in a real headless Chromium: the page as a reader gets it, not its source text.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { TestContext } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { stringify } from 'csv-stringify/sync';
import type { Browser, Page } from 'playwright-core';
import { DIMENSIONS, launchChromium, makeWorkspace, writeJson } from './helpers.ts';

const { main } = await import('../report.ts');

const TITLE = 'The judge against the human scores';
const MODELS = ['m01', 'm02'];
const JUDGE = 'claude-opus-4-7';
const FALLBACK = 'claude-sonnet-4-5';

/** Each payload would mark the page if it ran: `window.__ran` names where it came from. */
const ran = (where: string) => `<script>window.__ran = '${where}'; document.title = 'ran'</script>`;
const TRANSCRIPT_PAYLOAD = `${ran('transcript')}<img src=x onerror="window.__ran = 'img'">`;
const HOSTILE_SCORER = `bob${ran('scorer')}`;

/** The judge's score of a transcript on every dimension: m01 2, m02 1, m02/proof01 0. */
const judgeScore = (model: string, task: string) =>
  model === 'm01' ? 2 : task === 'proof01' ? 0 : 1;

/** alice agrees with the judge; the hostile scorer is one lower on every second dimension. */
const humanScore = (model: string, task: string, scorer: number, dimension: number) =>
  Math.max(0, judgeScore(model, task) - ((scorer * dimension) % 2));

/** The thinking the audit log keeps for m01/proof01, with a payload that would mark the page. */
const THINKING = `The tutor states the lemma ${ran('thinking')} correctly.`;

/** An audit log line: a scored entry; `fallbackFrom` a judge that failed first. */
function auditLine(task_id: string, model: string, judge: string, fallbackFrom?: string) {
  const thinking = model === 'm01' && task_id === 'proof01' ? THINKING : null;
  const attempts = fallbackFrom === undefined ? [] : [{ judge: fallbackFrom, error: 'overloaded' }];
  const entry = {
    task_id,
    model,
    status: 'scored',
    judge,
    timestamp: `2026-12-01T10:00:0${task_id.at(-1)}Z`,
    cost_usd: 0.01,
    rubric_sha256: 'f00d',
    attempts,
    answers: [{ judge, text: '{}', thinking, scores: { x: 1 } }],
  };
  return JSON.stringify(entry);
}

/** A judged page: where `report.ts --html` wrote it, and its report as `--format json` prints it. */
type Written = { page: string; report: Report };
type Report = {
  dimensions: {
    name: string;
    judge_vs_human: { n: number; kappa_ci95: unknown };
    human_vs_human: { kappa_ci95: unknown } | null;
    gap_to_ceiling: {
      ci95: unknown;
      verdict: 'as_good' | 'below' | 'undetermined' | null;
    } | null;
  }[];
  models: { judge_ci95: Record<string, unknown>; human_ci95: Record<string, unknown> }[];
};

/** The page `report.ts --html` writes for a workspace with hostile notes, scorer and transcript;
 * m02/proof02 was scored by the fallback judge. */
async function writePage(dir: string): Promise<Written> {
  const ws = makeWorkspace();
  const scores = path.join(dir, 'judge.csv');
  const humans = path.join(dir, 'human.csv');
  const log = path.join(dir, 'judge.jsonl');
  const judgeRows = ws.pairs.map((p) => {
    const own = DIMENSIONS.map(() => judgeScore(p.model, p.task_id));
    return [p.task_id, p.model, ...own, `judge notes ${ran('judge notes')}`];
  });
  fs.writeFileSync(scores, stringify([['task_id', 'model', ...DIMENSIONS, 'notes'], ...judgeRows]));

  const humanRows = ws.pairs.flatMap((p) =>
    ['alice', HOSTILE_SCORER].map((scorer, i) => {
      const own = DIMENSIONS.map((_, j) => humanScore(p.model, p.task_id, i, j));
      return [p.task_id, p.model, ...own, `notes ${ran('human notes')}`, scorer];
    }),
  );
  const humanHeader = ['task_id', 'model', ...DIMENSIONS, 'notes', 'scorer'];
  fs.writeFileSync(humans, stringify([humanHeader, ...humanRows]));

  const lines = ws.pairs.map((p) => {
    if (p.model === 'm02' && p.task_id === 'proof02') {
      return auditLine(p.task_id, p.model, FALLBACK, JUDGE);
    }
    return auditLine(p.task_id, p.model, JUDGE);
  });
  fs.writeFileSync(log, `${lines.join('\n')}\n`);

  const transcriptFile = path.join(ws.transcripts, 'm01', 'proof01.json');
  const transcript = JSON.parse(fs.readFileSync(transcriptFile, 'utf8'));
  transcript.messages.push({ role: 'user', content: TRANSCRIPT_PAYLOAD });
  writeJson(transcriptFile, transcript);

  const page = path.join(dir, 'report.html');
  const args = ['--scores', scores, '--human-scores', humans, '--rubric', ws.rubric];
  const paths = ['--transcripts', ws.transcripts, '--log', log];
  let stdout = '';
  const io = {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: () => true },
  };
  const code = await main([...args, ...paths, '--format', 'json', '--html', page], io as never);
  ws.remove();
  assert.equal(code, 0, 'report.ts --html failed');
  return { page, report: JSON.parse(stdout) };
}

describe('the --html page in headless Chromium', () => {
  let dir: string;
  let pageUrl: string;
  let report: Report;
  let browser: Browser;
  let tab: Page;
  const shots = process.env.RJ_SCREENSHOTS; // a folder to keep the screenshots in, to look at

  before(async () => {
    dir = fs.mkdtempSync(path.join(fs.realpathSync(os.tmpdir()), 'rj-page-'));
    // Chromium starts while the report is written.
    const [launched, written] = await Promise.all([launchChromium(), writePage(dir)]);
    browser = launched;
    pageUrl = pathToFileURL(written.page).href;
    report = written.report;
  });

  after(async () => {
    await browser?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /**
   * The page freshly loaded, and every URL it requested. One tab serves every test, as a new tab
   * costs several loads of the page: each test loads it anew (what a test did to the last one, a
   * fold opened, a filter, a scroll, is gone; the page keeps nothing in storage).
   */
  async function openPage(
    t: TestContext,
    width = 1400,
  ): Promise<{ page: Page; requests: string[] }> {
    if (tab === undefined || tab.isClosed()) {
      tab = await browser.newPage();
    }
    const page = tab;
    await page.setViewportSize({ width, height: 900 });
    const requests: string[] = [];
    const record = (request: { url(): string }) => requests.push(request.url());
    page.on('request', record);
    t.after(() => page.off('request', record));
    await page.goto(pageUrl, { waitUntil: 'load' });
    return { page, requests };
  }

  /** The section of one transcript, by its heading `model / task`. */
  function sectionOf(page: Page, heading: string) {
    return page.locator(`section.transcript:has(h3:text-is("${heading}"))`);
  }

  /** The first cell's text of each body row of the (first) table after the heading `title`. */
  function firstCells(page: Page, title: string): Promise<string[]> {
    const rows = page.locator(`h2:text-is("${title}") + div table > tbody > tr`);
    return rows.evaluateAll((trs) => trs.map((tr) => tr.children[0]?.textContent ?? ''));
  }

  test('the run: each judge with its rows, the fallback marked, the cost; a verdict per dimension', async (t) => {
    const { page } = await openPage(t);
    const run = await page.locator('table.run tr').evaluateAll((trs) => {
      return trs.map((tr) => [...tr.children].map((cell) => cell.textContent ?? ''));
    });
    const facts = new Map(run.map((cells) => [cells[0], cells[1]]));
    assert.equal(facts.get('judges'), `${JUDGE}: 5 rows; ${FALLBACK}: 1 row (1 as a fallback)`);
    assert.equal(facts.get('rubric sha256'), 'f00d');
    assert.equal(facts.get('prompt template sha256'), 'unknown', 'this log records none');
    assert.equal(facts.get('last judged row'), '2026-12-01T10:00:03Z');
    assert.equal(facts.get('total cost'), '$0.0600');

    const verdicts = await page.locator('ul.verdicts > li').allTextContents();
    assert.deepEqual(
      verdicts.map((line) => line.split(':')[0]),
      [...DIMENSIONS],
    );
    // Each verdict names whose agreement it is about: the scorers and the transcripts.
    const words = {
      as_good: 'as good as .+ on \\d+ transcripts \\(not below their ceiling by more than 0.10\\)',
      below: 'below .+ on \\d+ transcripts \\(below their ceiling by more than 0.10\\)',
      undetermined:
        'undetermined against .+ on \\d+ transcripts(: too few| \\((the interval holds|its own interval clears))',
    };
    report.dimensions.forEach((dimension, i) => {
      const verdict = dimension.gap_to_ceiling?.verdict;
      assert.ok(verdict !== null && verdict !== undefined, `${dimension.name}: a verdict`);
      assert.match(
        verdicts[i]!,
        new RegExp(`^${dimension.name}: ${words[verdict]}.*; gap to the ceiling`),
      );
    });
    assert.deepEqual(await firstCells(page, 'Agreement per dimension'), [...DIMENSIONS]);
  });

  test('a forest plot per dimension: an interval per figure that has one, inside the plot', async (t) => {
    const { page } = await openPage(t);
    const plots = page.locator('section.dimension svg.forest');
    assert.equal(await plots.count(), DIMENSIONS.length);

    for (const [i, dimension] of report.dimensions.entries()) {
      const figures = [
        dimension.judge_vs_human.kappa_ci95,
        dimension.human_vs_human?.kappa_ci95,
        dimension.gap_to_ceiling?.ci95,
      ];
      for (const model of report.models) {
        figures.push(model.judge_ci95[dimension.name], model.human_ci95[dimension.name]);
      }
      const expected = figures.filter((ci) => ci !== null && ci !== undefined).length;
      assert.ok(expected >= 4, `${dimension.name}: the data give intervals (${expected})`);

      const plot = plots.nth(i);
      const intervals = plot.locator('g.interval');
      assert.equal(await intervals.count(), expected, dimension.name);
      const box = (await plot.boundingBox())!;
      assert.ok(box.width > 500 && box.height > 100, JSON.stringify(box));
      // Each interval found once, its box then asked of the browser directly (no query of the page
      // per interval), all at once.
      const handles = await intervals.elementHandles();
      const marks = await Promise.all(handles.map((handle) => handle.boundingBox()));
      for (const mark of marks) {
        assert.ok(mark !== null, `${dimension.name}: an interval laid out`);
        assert.ok(mark.x >= box.x && mark.x + mark.width <= box.x + box.width, dimension.name);
        assert.ok(mark.y >= box.y && mark.y + mark.height <= box.y + box.height, dimension.name);
      }
      const ticks = await plot.locator('g.tick text').allTextContents();
      assert.ok(ticks.includes('0') && ticks.includes('1') && ticks.includes('2'), `${ticks}`);
    }
  });

  test('a confusion grid per dimension: row and column totals add up to n; the diagonal outlined', async (t) => {
    const { page } = await openPage(t);
    const grids = page.locator('section.dimension table.grid');
    assert.equal(await grids.count(), DIMENSIONS.length);

    for (const [i, dimension] of report.dimensions.entries()) {
      const grid = grids.nth(i);
      const cells = await grid.locator('tr').evaluateAll((trs) => {
        return trs
          .slice(1)
          .map((tr) => [...tr.querySelectorAll('td')].map((td) => Number(td.textContent)));
      });
      const counts = cells.slice(0, -1);
      for (const row of counts) {
        const total = row.at(-1)!;
        assert.equal(
          row.slice(0, -1).reduce((a, b) => a + b, 0),
          total,
          'a row total',
        );
      }
      const footer = cells.at(-1)!;
      footer.slice(0, -1).forEach((total, j) => {
        assert.equal(
          counts.reduce((sum, row) => sum + row[j]!, 0),
          total,
          'a column total',
        );
      });
      assert.equal(footer.at(-1), dimension.judge_vs_human.n, 'the corner is n');

      const outlines = await grid.locator('td.diagonal').evaluateAll((tds) => {
        return tds.map((td) => getComputedStyle(td).outlineStyle);
      });
      assert.deepEqual(
        outlines,
        counts.map(() => 'solid'),
        'each diagonal cell outlined',
      );
    }
  });

  test("the rubric's levels are one click away, folded at first", async (t) => {
    const { page } = await openPage(t);
    const levels = page.locator('section.dimension details.rubric').first();
    const text = levels.locator('dl');
    assert.equal(await text.isVisible(), false);
    await levels.locator('summary').click();
    assert.equal(await text.isVisible(), true);
    assert.match((await text.textContent()) ?? '', /^0The tutor states a false claim/);
  });

  test('the index links every transcript, most disputed first; each link reaches its anchor', async (t) => {
    const { page } = await openPage(t);
    const links = page.locator('table.index a');
    const titles = await links.allTextContents();
    const headings = await page.locator('section.transcript > h3').allTextContents();
    assert.equal(titles.length, 6);
    assert.deepEqual(titles, headings, 'the index in page order');
    assert.equal(titles.at(-1), 'm02 / proof01', 'all 0: the one nobody disagrees on, last');

    const judges = await page.locator('table.index tr').evaluateAll((trs) => {
      return trs.slice(1).map((tr) => tr.children[2]?.textContent);
    });
    assert.equal(judges[titles.indexOf('m02 / proof02')], `${FALLBACK} (fallback)`);
    assert.equal(judges[titles.indexOf('m01 / proof01')], JUDGE);

    for (const i of [titles.length - 1, 0]) {
      await links.nth(i).click();
      const hash = await page.evaluate(() => location.hash);
      const target = page.locator(`section.transcript${hash.replace('.', '\\.')}`);
      assert.equal(await target.locator('h3').textContent(), titles[i]);
      const top = await target.evaluate((element) => element.getBoundingClientRect().top);
      const height = await page.evaluate(() => innerHeight);
      assert.ok(top > -2 && top < height, `scrolled to the anchor (top ${top})`);
      if (i === 0) {
        assert.ok(Math.abs(top) < 2, `the first at the top of the window (top ${top})`);
      }
    }

    await sectionOf(page, titles[0]!).locator('a:text-is("(the index)")').click();
    const index = page.locator('#transcripts');
    const top = await index.evaluate((element) => element.getBoundingClientRect().top);
    assert.ok(Math.abs(top) < 2, `back at the index (top ${top})`);
  });

  test("the judge's thinking is folded under its notes; a click shows it, as text", async (t) => {
    const { page } = await openPage(t);
    const section = sectionOf(page, 'm01 / proof01');
    const thinking = section.locator('details.thinking');
    assert.equal(await thinking.count(), 1);
    const previous = await thinking.evaluate(
      (element) => element.previousElementSibling?.textContent,
    );
    assert.match(previous ?? '', /^judge's notes:/, "right under the judge's notes");

    assert.equal(await thinking.evaluate((element) => (element as HTMLDetailsElement).open), false);
    assert.equal(await thinking.locator('pre').isVisible(), false);
    await thinking.locator('summary').click();
    assert.equal(await thinking.locator('pre').isVisible(), true);
    assert.equal(await thinking.locator('pre').textContent(), THINKING);
    assert.equal(await page.evaluate(() => (window as { __ran?: string }).__ran), undefined);

    assert.equal(await sectionOf(page, 'm01 / proof02').locator('details.thinking').count(), 0);
  });

  test('at 800 px the page does not scroll sideways; the plots shrink to fit', async (t) => {
    const { page } = await openPage(t, 800);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - innerWidth);
    assert.ok(overflow <= 0, `the page is ${overflow} px wider than the window`);
    const box = (await page.locator('svg.forest').first().boundingBox())!;
    assert.ok(box.x >= 0 && box.x + box.width <= 800, JSON.stringify(box));
  });

  test('a <script> in a transcript, notes or scorer never runs and shows as text', async (t) => {
    const { page } = await openPage(t);

    assert.equal(await page.evaluate(() => (window as { __ran?: string }).__ran), undefined);
    assert.equal(await page.title(), TITLE);
    assert.equal(await page.locator('img').count(), 0, 'no img element');
    const scripts = await page.locator('script').allTextContents();
    assert.equal(scripts.length, 1, "the page's own script alone");
    const own = fs.readFileSync(new URL('../report/pages/report-filters.js', import.meta.url));
    assert.equal(scripts[0], own.toString().trimEnd(), 'the checked file, as it is');

    const first = sectionOf(page, 'm01 / proof01');
    const transcript = await first.locator('details.transcript pre').textContent();
    assert.ok(transcript?.includes(TRANSCRIPT_PAYLOAD), 'the transcript payload is text');
    const notes = await first.locator('p.notes').allTextContents();
    assert.ok(notes[0]?.includes(`judge notes ${ran('judge notes')}`), notes[0]);
    assert.ok(notes[1]?.includes(`notes ${ran('human notes')}`), notes[1]);
    const header = await first.locator('table tr').first().locator('th').allTextContents();
    assert.deepEqual(header, ['dimension', 'judge', 'alice', HOSTILE_SCORER]);
  });

  test("clicking a transcript's summary opens it and shows its text", async (t) => {
    const { page } = await openPage(t);
    const details = sectionOf(page, 'm01 / proof01').locator('details.transcript');
    const text = details.locator('pre');

    assert.equal(await text.isVisible(), false, 'folded away at first');
    const folded = await text.boundingBox();
    assert.ok(folded === null || folded.height === 0, JSON.stringify(folded));

    await details.locator('summary').click();
    assert.equal(await details.evaluate((element) => (element as HTMLDetailsElement).open), true);
    assert.equal(await text.isVisible(), true, 'shown after the click');
    const box = await text.boundingBox();
    assert.ok(box !== null && box.height > 20 && box.width > 100, JSON.stringify(box));
  });

  test("a human score unlike the judge's is shaded apart from one that agrees", async (t) => {
    const { page } = await openPage(t);
    const cellsOf = (dimension: string) => {
      const section = sectionOf(page, 'm01 / proof01');
      const cells = section.locator(`tr:has(th > a:text-is("${dimension}")) > td`);
      return cells.evaluateAll((tds) =>
        tds.map((td) => ({ score: td.textContent, colour: getComputedStyle(td).backgroundColor })),
      );
    };

    const agreeing = await cellsOf(DIMENSIONS[0]);
    const differing = await cellsOf(DIMENSIONS[1]);
    const scores = (cells: { score: string | null }[]) => cells.map((cell) => cell.score);
    assert.deepEqual(scores(agreeing), ['2', '2', '2'], 'judge, alice, the second scorer');
    assert.deepEqual(scores(differing), ['2', '2', '1']);

    const colours = [...agreeing, ...differing].map((cell) => cell.colour);
    assert.equal(new Set(colours.slice(0, 5)).size, 1, `agreeing cells alike: ${colours}`);
    assert.notEqual(colours[5], colours[0], "the 1 against the judge's 2 stands out");
  });

  test('the page requests nothing but itself, even with a transcript opened', async (t) => {
    const { page, requests } = await openPage(t);
    for (const summary of await page.locator('summary').all()) {
      await summary.click();
    }
    await page.waitForLoadState('networkidle');
    assert.deepEqual(requests, [pageUrl]);
  });

  /** The index rows shown, each as `model / task`, and the transcript sections shown, in order. */
  async function shownTranscripts(page: Page) {
    const rows = page.locator('#transcript-index tbody tr:not([hidden])');
    const index = await rows.evaluateAll((trs) => trs.map((tr) => tr.children[1]!.textContent));
    const sections = page.locator('#transcript-list > section.transcript:not([hidden]) > h3');
    return { index, sections: await sections.allTextContents() };
  }

  for (const width of [1400, 800]) {
    test(`at ${width} px no table is cut off: each lies within the window, and at 1400 none scrolls`, async (t) => {
      const { page } = await openPage(t, width);
      const boxes = await page.locator('table').evaluateAll((tables) => {
        return tables.map((table) => {
          const box = table.getBoundingClientRect();
          const holder = table.closest('.wide');
          const scrolls = holder !== null && holder.scrollWidth > holder.clientWidth + 1;
          return {
            left: box.left,
            right: box.right,
            scrolls,
            text: (table as HTMLTableElement).rows[0]?.textContent,
          };
        });
      });
      for (const box of boxes) {
        assert.ok(
          box.left >= 0 && box.right <= width + 0.5,
          `${box.text}: ${box.left}..${box.right}`,
        );
        if (width === 1400) {
          assert.equal(box.scrolls, false, `${box.text}: scrolls at 1400 px`);
        }
      }
      const captions = await page.locator('table > caption, figure > figcaption').count();
      const tables = await page.locator('table').count();
      const plots = await page.locator('svg.forest, svg.tutors-plot').count();
      assert.equal(captions, tables + plots, 'a caption under every table and plot');
      if (shots !== undefined) {
        await page.screenshot({ path: path.join(shots, `report-${width}.png`), fullPage: true });
      }
    });
  }

  test('each figure links to its definition in docs/analysis.md', async (t) => {
    const { page } = await openPage(t);
    const hrefs = await page
      .locator('h2:text-is("Agreement per dimension") ~ div.wide th a')
      .evaluateAll((links) => links.map((link) => link.getAttribute('href')));
    assert.ok(hrefs.length >= 8, `${hrefs.length} links`);
    for (const href of hrefs) {
      assert.match(href!, /analysis\.md#how-the-figures-are-computed$/);
      const file = fileURLToPath(new URL(href!.split('#')[0]!, pageUrl));
      assert.ok(fs.existsSync(file), `${file}: the definitions are there`);
    }
  });

  test('the transcripts filter by tutor, task and a dimension they disagree on, and sort', async (t) => {
    const { page } = await openPage(t);
    const all = await shownTranscripts(page);
    assert.equal(all.index.length, 6);
    assert.deepEqual(all.sections, all.index, 'the sections in the index order');

    await page.selectOption('#filters select[name="model"]', 'm02');
    const m02 = await shownTranscripts(page);
    assert.deepEqual(m02.index, ['m02 / proof02', 'm02 / proof03', 'm02 / proof01']);
    assert.deepEqual(m02.sections, m02.index);
    assert.equal(await page.locator('#shown').textContent(), '3 of 6 transcripts shown');

    await page.selectOption('#filters select[name="order"]', 'least');
    assert.deepEqual(
      (await shownTranscripts(page)).index[0],
      'm02 / proof01',
      'least disputed first',
    );
    await page.selectOption('#filters select[name="order"]', 'pair');
    const byPair = await shownTranscripts(page);
    assert.deepEqual(byPair.index, ['m02 / proof01', 'm02 / proof02', 'm02 / proof03']);
    assert.deepEqual(byPair.sections, byPair.index);

    await page.selectOption('#filters select[name="task"]', 'proof01');
    assert.deepEqual((await shownTranscripts(page)).index, ['m02 / proof01']);

    // On the second dimension the second scorer is one below the judge, but where the judge gave 0.
    await page.selectOption('#filters select[name="model"]', '');
    await page.selectOption('#filters select[name="task"]', '');
    await page.selectOption('#filters select[name="dimension"]', '1');
    const disagreeing = await shownTranscripts(page);
    assert.equal(disagreeing.index.length, 5);
    assert.ok(!disagreeing.index.includes('m02 / proof01'));
    await page.selectOption('#filters select[name="dimension"]', '0');
    assert.deepEqual((await shownTranscripts(page)).index, [], 'nobody disagrees on the first');
    assert.equal(await page.evaluate(() => (window as { __ran?: string }).__ran), undefined);
  });
});

describe("the pages' scripts, inlined", () => {
  test('each checked file inlines as it is; an end tag, a script tag or a comment opening is refused, naming the file', async () => {
    const { inlineScript, pageScript } = await import('../report/page-script.ts');
    for (const name of fs.readdirSync(new URL('../report/pages/', import.meta.url))) {
      const text = fs.readFileSync(new URL(`../report/pages/${name}`, import.meta.url), 'utf8');
      assert.equal(pageScript(name), text.trimEnd(), name);
    }
    for (const unsafe of ['</script>', '</SCRIPT ', '<script>', '<!--']) {
      assert.throws(
        () => inlineScript('x.js', `const tag = '${unsafe}';`),
        (error: Error) => error.message.startsWith(`report/pages/x.js: "${unsafe.slice(0, -1)}`),
        unsafe,
      );
    }
    assert.equal(
      inlineScript('x.js', "const tag = '<' + '/script>';\n"),
      "const tag = '<' + '/script>';",
    );
  });
});
