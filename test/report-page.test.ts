// report.ts --html in a real headless Chromium: the page as a reader gets it, not its source text.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { TestContext } from 'node:test';
import { pathToFileURL } from 'node:url';
import { stringify } from 'csv-stringify/sync';
import { chromium } from 'playwright-core';
import type { BrowserContext, Page } from 'playwright-core';
import { DIMENSIONS, makeWorkspace, writeJson } from './helpers.ts';

const { main } = await import('../report.ts');

const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const TITLE = 'The judge against the human scores';
const MODELS = ['m01', 'm02'];

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

/** The page `report.ts --html` writes for a workspace with hostile notes, scorer and transcript. */
async function writePage(dir: string): Promise<string> {
  const ws = makeWorkspace();
  const scores = path.join(dir, 'judge.csv');
  const humans = path.join(dir, 'human.csv');
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

  const transcriptFile = path.join(ws.transcripts, 'm01', 'proof01.json');
  const transcript = JSON.parse(fs.readFileSync(transcriptFile, 'utf8'));
  transcript.messages.push({ role: 'user', content: TRANSCRIPT_PAYLOAD });
  writeJson(transcriptFile, transcript);

  const page = path.join(dir, 'report.html');
  const args = ['--scores', scores, '--human-scores', humans, '--rubric', ws.rubric];
  const paths = ['--transcripts', ws.transcripts, '--log', path.join(dir, 'no.log')];
  const io = { stdout: { write: () => true }, stderr: { write: () => true } };
  const code = await main([...args, ...paths, '--html', page], io as never);
  ws.remove();
  assert.equal(code, 0, 'report.ts --html failed');
  return page;
}

/** Chromium with a fresh profile; a missing one fails the suite with one line, never skips it. */
async function launchChromium(dir: string): Promise<BrowserContext> {
  if (!fs.existsSync(CHROMIUM)) {
    throw new Error('Chromium is not installed: apt-get install chromium (see README)');
  }
  const profile = path.join(dir, 'profile');
  return chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    args: CHROMIUM_ARGS,
    headless: true,
  });
}

describe('the --html page in headless Chromium', () => {
  let dir: string;
  let pageUrl: string;
  let browser: BrowserContext;

  before(async () => {
    dir = fs.mkdtempSync(path.join(fs.realpathSync(os.tmpdir()), 'rj-page-'));
    browser = await launchChromium(dir);
    pageUrl = pathToFileURL(await writePage(dir)).href;
  });

  after(async () => {
    await browser?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** A fresh tab on the page, and every URL it requested. */
  async function openPage(t: TestContext): Promise<{ page: Page; requests: string[] }> {
    const page = await browser.newPage();
    t.after(() => page.close());
    const requests: string[] = [];
    page.on('request', (request) => requests.push(request.url()));
    await page.goto(pageUrl, { waitUntil: 'load' });
    return { page, requests };
  }

  /** The section of one transcript, by its heading `model / task`. */
  function sectionOf(page: Page, heading: string) {
    return page.locator(`section:has(h3:text-is("${heading}"))`);
  }

  /** The first two cells' text of each row of the table right after the heading `title`. */
  function tableRows(page: Page, title: string): Promise<string[][]> {
    const rows = page.locator(`h2:text-is("${title}") + table > tbody > tr`);
    return rows.evaluateAll((trs) =>
      trs.slice(1).map((tr) => [...tr.children].slice(0, 2).map((cell) => cell.textContent ?? '')),
    );
  }

  test('agreement: a row per dimension; models: a row per model and dimension', async (t) => {
    const { page } = await openPage(t);

    const agreement = await tableRows(page, 'Agreement per dimension');
    assert.deepEqual(
      agreement.map((cells) => cells[0]),
      [...DIMENSIONS],
    );

    const models = await tableRows(page, 'Models side by side');
    const expected = MODELS.flatMap((model) => DIMENSIONS.map((name) => [model, name]));
    assert.deepEqual(models, expected);

    const grids = page.locator('h2:text-is("Agreement per dimension") + table table.grid');
    assert.equal(await grids.count(), DIMENSIONS.length, 'one confusion grid per dimension');
  });

  test('a <script> in a transcript, notes or scorer never runs and shows as text', async (t) => {
    const { page } = await openPage(t);

    assert.equal(await page.evaluate(() => (window as { __ran?: string }).__ran), undefined);
    assert.equal(await page.title(), TITLE);
    assert.equal(await page.locator('script, img').count(), 0, 'no script or img element');

    const first = sectionOf(page, 'm01 / proof01');
    const transcript = await first.locator('details pre').textContent();
    assert.ok(transcript?.includes(TRANSCRIPT_PAYLOAD), 'the transcript payload is text');
    const notes = await first.locator('p.notes').allTextContents();
    assert.ok(notes[0]?.includes(`judge notes ${ran('judge notes')}`), notes[0]);
    assert.ok(notes[1]?.includes(`notes ${ran('human notes')}`), notes[1]);
    const header = await first.locator('table tr').first().locator('th').allTextContents();
    assert.deepEqual(header, ['dimension', 'judge', 'alice', HOSTILE_SCORER]);
  });

  test("clicking a transcript's summary opens it and shows its text", async (t) => {
    const { page } = await openPage(t);
    const details = sectionOf(page, 'm01 / proof01').locator('details');
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
      const cells = section.locator(`tr:has(th:text-is("${dimension}")) > td`);
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
});
