// The blind scoring page (`report.ts sheet --scorers`) in a real headless Chromium: read, score,
// reload, download, and the download read back by the gate's reader.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';
import type { TestContext } from 'node:test';
import { pathToFileURL } from 'node:url';
import { parse as parseCsv } from 'csv-parse/sync';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import {
  RUBRIC_FILE,
  launchChromium,
  makeWorkspace,
  runReport,
  setup,
  writeJson,
} from './helpers.ts';
import type { Workspace } from './helpers.ts';

const { csvLine, guardCell, isComplete, loadRubric, readHumanScores } =
  await import('../run-judge.ts');

/** A payload that would mark the page if it ran. */
const PAYLOAD = `<script>window.__ran = 'transcript'</script><img src=x onerror="window.__ran = 'img'">`;
/** Notes a CSV must quote (comma, quote, line break) and one a spreadsheet would run. */
const TRICKY_NOTES = 'ok, "mostly"\nsecond line';
const FORMULA_NOTES = '=HYPERLINK("x")';

/** A 1×1 PNG. */
const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';

type Sheet = { scorer: string; file: string; url: string; rows: Record<string, string>[] };

/** The plan: alice and bob both score all 4 transcripts; m01/proof01 holds the payload. */
function writePlan(dir: string): { ws: Workspace; out: string } {
  const ws = makeWorkspace({ models: 2, tasks: ['proof01', 'proof02'] });
  const transcriptFile = path.join(ws.transcripts, 'm01', 'proof01.json');
  const transcript = JSON.parse(fs.readFileSync(transcriptFile, 'utf8'));
  transcript.messages.push({ role: 'user', content: PAYLOAD });
  writeJson(transcriptFile, transcript);
  return { ws, out: path.join(dir, 'human') };
}

// One Chromium and one browser profile for the whole file, as a scorer has: a launch costs far more
// than a tab. A page keeps its answers per plan folder, and each test plans into folders of its own,
// so no test sees another's answers. The witness tab keeps the window open (a tab costs less than a
// window) and tells when the pages' answers are in the browser's storage (`stored`).
let chromium: Browser;
let browser: BrowserContext;
let witness: Page;
before(async () => {
  chromium = await launchChromium();
  browser = await chromium.newContext({ acceptDownloads: true });
  browser.setDefaultTimeout(10_000); // a broken page fails in seconds, not minutes
  witness = await browser.newPage();
  const blank = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'rj-witness-')), 'blank.html');
  fs.writeFileSync(blank, '<!doctype html><title>witness</title>');
  await witness.goto(pathToFileURL(blank).href);
});
after(async () => {
  await chromium?.close();
});

/**
 * Waits until every answer `page` has stored is what another tab of the same origin reads. A tab
 * writes its storage to the browser asynchronously, so a reload or a new tab a moment after a click
 * (as no person is that quick) could be served before the write arrives, under load.
 */
async function stored(page: Page): Promise<void> {
  const entries = await page.evaluate(() => Object.entries(localStorage));
  assert.ok(entries.length > 0, 'the page stored its answers');
  await witness.waitForFunction((expected) => {
    return expected.every(([key, value]) => localStorage.getItem(key) === value);
  }, entries);
}

/** Clicks the download button and chooses `sheet` in the file chooser it opens. */
async function chooseSheet(page: Page, sheet: string): Promise<void> {
  const chooser = page.waitForEvent('filechooser');
  await page.locator('#download').click();
  await (await chooser).setFiles(sheet);
}

/** A new tab, in front, closed after the test. */
async function newTab(t: TestContext): Promise<Page> {
  const page = await browser.newPage();
  t.after(() => page.close());
  return page;
}

/**
 * Scores every dimension of the transcript on show `score` with the page's digit keys (each scores
 * the dimension in focus, else the first left open): a far cheaper step than a click a radio where
 * scoring is only the set-up. The tests of the form itself click each radio, as a person would.
 */
async function scoreByKeys(page: Page, score: string, dimensions: number): Promise<void> {
  await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
  for (let i = 0; i < dimensions; i++) {
    await page.keyboard.press(score);
  }
  const section = page.locator('section.transcript:not([hidden])');
  const checked = section.locator(`input[type=radio][value="${score}"]:checked`);
  assert.equal(await checked.count(), dimensions, 'each dimension scored by its key');
}

describe('the blind scoring page in headless Chromium', () => {
  let dir: string;
  let ws: Workspace;
  let rubric: ReturnType<typeof loadRubric>;
  const sheets = new Map<string, Sheet>();

  let plans = 0;

  before(async () => {
    dir = fs.mkdtempSync(path.join(fs.realpathSync(os.tmpdir()), 'rj-scoring-'));
    ws = writePlan(dir).ws;
    rubric = loadRubric(ws.rubric);
  });

  // Each test its plan in a folder of its own: the pages start with no answer kept for it.
  beforeEach(async () => {
    const out = path.join(dir, `human-${plans++}`);
    const paths = ['--transcripts', ws.transcripts, '--tasks', ws.tasks];
    const more = ['--reference-keys', ws.referenceKeys, '--rubric', ws.rubric, '--out', out];
    const args = ['--scorers', 'alice,bob', '--overlap', '2'];
    const result = await runReport(['sheet', ...paths, ...more, ...args]);
    assert.equal(result.code, 0, result.stderr);
    for (const scorer of ['alice', 'bob']) {
      const file = path.join(out, `${scorer}.csv`);
      const rows = readHumanScores(file, rubric).map((row) => ({
        task_id: row.task_id,
        model: row.model,
      }));
      const url = pathToFileURL(path.join(out, `${scorer}.html`)).href;
      sheets.set(scorer, { scorer, file, url, rows: rows as Record<string, string>[] });
    }
  });

  after(async () => {
    ws?.remove();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** A fresh tab on a scorer's page of this test's plan (no answer kept yet), and every URL it
   * requested. */
  async function openPage(
    t: TestContext,
    scorer = 'alice',
  ): Promise<{ page: Page; requests: string[] }> {
    const page = await newTab(t);
    const requests: string[] = [];
    page.on('request', (request) => requests.push(request.url()));
    await page.goto(sheets.get(scorer)!.url, { waitUntil: 'load' });
    return { page, requests };
  }

  /** The transcript on show: its task id (the heading says it), model hidden from the scorer. */
  const shown = (page: Page) => page.locator('section.transcript:not([hidden])');

  /** Scores the transcript on show: each dimension `score(i)`, then notes; clicks as a person would. */
  async function scoreShown(page: Page, score: (dimension: number) => number, notes?: string) {
    const section = shown(page);
    for (const [i, dimension] of rubric.dimensions.entries()) {
      await section.locator(`input[name="${dimension.name}"][value="${score(i)}"]`).check();
    }
    if (notes !== undefined) {
      await section.locator('textarea[name="notes"]').fill(notes);
    }
  }

  /** The (model, task) of the transcript on show, from the sheet row its form is for. */
  async function shownPair(page: Page, scorer = 'alice'): Promise<Record<string, string>> {
    const row = Number(await shown(page).locator('form').getAttribute('data-row'));
    return sheets.get(scorer)!.rows[row]!;
  }

  /**
   * Clicks the download button and chooses `sheet` as the scorer's sheet now; the downloaded file's
   * path and text.
   */
  async function download(
    page: Page,
    scorer = 'alice',
    sheet = sheets.get(scorer)!.file,
  ): Promise<{ file: string; text: string }> {
    const started = page.waitForEvent('download');
    await chooseSheet(page, sheet);
    const file = path.join(dir, `download-${Date.now()}-${Math.random()}.csv`);
    const got = await started;
    assert.equal(got.suggestedFilename(), `${scorer}.csv`);
    await got.saveAs(file);
    return { file, text: fs.readFileSync(file, 'utf8') };
  }

  test('every transcript scored through the form: the download is the sheet filled in, read back by the gate', async (t) => {
    const { page } = await openPage(t);
    const sheet = sheets.get('alice')!;
    assert.equal(await page.locator('section.transcript').count(), 4, 'every form in the page');
    assert.equal(await shown(page).count(), 1, 'one transcript shown at a time');
    assert.equal(await page.locator('#left').textContent(), '4 of 4 left');
    assert.equal(
      await shown(page).locator('button.prev').isDisabled(),
      true,
      'nothing before the first',
    );

    // Each transcript scored in page order with Next; scores differ by transcript and dimension.
    const expected = new Map<string, { scores: number[]; notes: string }>();
    for (let i = 0; i < 4; i++) {
      const pair = await shownPair(page);
      const scores = rubric.dimensions.map((_, d) => (i + d) % 3);
      const notes = [TRICKY_NOTES, FORMULA_NOTES, '', 'fine'][i]!;
      await scoreShown(page, (d) => scores[d]!, notes);
      expected.set(`${pair.model}/${pair.task_id}`, { scores, notes });
      assert.equal(
        await page.locator('#left').textContent(),
        i === 3 ? 'All 4 scored: download your CSV' : `${3 - i} of 4 left`,
      );
      if (i < 3) {
        await shown(page).locator('button.next').click();
      }
    }
    assert.equal(
      await shown(page).locator('button.next').isDisabled(),
      true,
      'nothing after the last',
    );

    const { file, text } = await download(page);

    // Byte for byte the sheet's format: its header, its rows in its order, guarded and quoted cells.
    const original = fs.readFileSync(sheet.file, 'utf8');
    const lines = original.split('\n');
    const hashes = lines.slice(1, -1).map((line) => line.split(',').at(-1)!);
    const rebuilt = sheet.rows.map((row, i) => {
      const own = expected.get(`${row.model}/${row.task_id}`)!;
      const cells = [
        row.task_id!,
        row.model!,
        ...own.scores.map(String),
        own.notes,
        '',
        'alice',
        hashes[i]!,
      ];
      return csvLine(cells.map(guardCell));
    });
    assert.equal(text, `${lines[0]}\n${rebuilt.join('')}`);
    assert.ok(text.includes(`"ok, ""mostly""\nsecond line"`), 'quoted like csv-stringify');
    assert.ok(text.includes(`"'=HYPERLINK(""x"")"`), 'the formula guarded');

    // The gate's reader: every row complete, the scores as clicked.
    const rows = readHumanScores(file, rubric);
    assert.equal(rows.length, 4);
    for (const row of rows) {
      const own = expected.get(`${row.model}/${row.task_id}`)!;
      assert.ok(isComplete(row, rubric));
      assert.equal(row.scorer, 'alice');
      assert.deepEqual(Object.values(row.scores), own.scores);
      assert.equal(row.notes, own.notes, 'notes read back as typed, the formula guard taken off');
    }
  });

  test('reloaded mid-way, the answers are still there; downloaded then, the rest stays open', async (t) => {
    const { page } = await openPage(t);
    const first = await shownPair(page);
    await scoreShown(page, () => 2, 'first read');
    await shown(page).locator('button.next').click();
    const second = await shownPair(page);
    const section = shown(page);
    await section.locator(`input[name="${rubric.dimensions[0]!.name}"][value="1"]`).check();
    assert.equal(await page.locator('#left').textContent(), '3 of 4 left');

    await stored(page);
    await page.reload({ waitUntil: 'load' });
    assert.equal(await page.locator('#left').textContent(), '3 of 4 left');
    assert.deepEqual(await shownPair(page), second, 'opens at the first transcript not done');
    const checked = await shown(page)
      .locator('input:checked')
      .evaluateAll((inputs) => {
        return inputs.map(
          (input) => `${(input as HTMLInputElement).name}=${(input as HTMLInputElement).value}`,
        );
      });
    assert.deepEqual(checked, [`${rubric.dimensions[0]!.name}=1`]);
    await page.locator('nav a').first().click();
    assert.deepEqual(await shownPair(page), first);
    assert.equal(await shown(page).locator('textarea').inputValue(), 'first read');
    assert.equal(await shown(page).locator('input:checked').count(), rubric.dimensions.length);

    const rows = readHumanScores((await download(page)).file, rubric);
    const complete = rows.filter((row) => isComplete(row, rubric));
    assert.deepEqual(
      complete.map((row) => `${row.model}/${row.task_id}`),
      [`${first.model}/${first.task_id}`],
    );
    const partial = rows.find(
      (row) => row.model === second.model && row.task_id === second.task_id,
    )!;
    assert.deepEqual(partial.scores, { [rubric.dimensions[0]!.name]: 1 });
  });

  test("two scorers' pages in one browser keep their answers apart", async (t) => {
    const { page } = await openPage(t);
    await scoreShown(page, () => 1);
    const bob = await newTab(t);
    await bob.goto(sheets.get('bob')!.url, { waitUntil: 'load' });
    assert.equal(await bob.locator('#left').textContent(), '4 of 4 left');
    assert.equal(await bob.locator('input:checked').count(), 0);
    await stored(page);
    await page.reload({ waitUntil: 'load' });
    assert.equal(await page.locator('#left').textContent(), '3 of 4 left');
  });

  test("bob's sheet chosen for alice's download, or a file that is no sheet: refused, saying why, nothing downloaded", async (t) => {
    const { page } = await openPage(t);
    await scoreShown(page, () => 1);
    let downloads = 0;
    page.on('download', () => downloads++);
    const status = page.locator('#sheet-status');
    await chooseSheet(page, sheets.get('bob')!.file);
    await status.filter({ hasText: 'nothing downloaded' }).waitFor();
    assert.equal(
      await status.textContent(),
      'bob.csv: rows of bob, not alice: choose alice.csv; nothing downloaded',
    );
    const other = path.join(dir, 'other.csv');
    fs.writeFileSync(other, 'task_id,model,notes\nproof01,m01,x\n');
    await chooseSheet(page, other);
    await status.filter({ hasText: 'other.csv' }).waitFor();
    assert.match(
      (await status.textContent())!,
      /^other\.csv: not alice's sheet of this plan \(no column [\w, ]+\); nothing downloaded$/,
    );
    assert.equal(downloads, 0);
    assert.equal(await page.locator('#unsaved').isVisible(), true);
  });

  test('each transcript shows what the judge is shown: the task, the reference notes, the transcript, every level', async (t) => {
    const { page } = await openPage(t);
    const key = JSON.parse(fs.readFileSync(path.join(ws.referenceKeys, 'proof01.json'), 'utf8'));
    const task = JSON.parse(fs.readFileSync(path.join(ws.tasks, 'proof01.json'), 'utf8'));
    const section = page.locator('section.transcript:has(dd:text-is("proof01"))').first();
    const text = (await section.textContent()) ?? '';
    for (const part of [
      task.topic,
      task.problem_statement,
      key.proof_skeleton[0],
      key.red_flags[0],
    ]) {
      assert.ok(text.includes(part.trim()), `shows ${part}`);
    }
    for (const dimension of rubric.dimensions) {
      const radios = section.locator(`input[name="${dimension.name}"]`);
      assert.equal(await radios.count(), Object.keys(dimension.scores).length, dimension.name);
      for (const level of Object.values(dimension.scores)) {
        assert.ok(text.includes(level), `${dimension.name}: ${level}`);
      }
    }
    const labels = await page.locator('nav a, section h2').allTextContents();
    assert.ok(
      labels.every((label) => !/m0[12]/.test(label)),
      `blind to the tutor: ${labels}`,
    );
  });

  test('a <script> in a transcript shows as text and never runs; the page requests nothing else', async (t) => {
    const { page, requests } = await openPage(t);
    const withPayload = page.locator('section.transcript', {
      hasText: "window.__ran = 'transcript'",
    });
    assert.equal(await withPayload.count(), 1);
    await page.locator(`nav a[href="#${await withPayload.getAttribute('id')}"]`).click();
    const transcript = await withPayload.locator('.turns').textContent();
    assert.ok(transcript?.includes(PAYLOAD), 'the payload is text');
    assert.equal(await page.evaluate(() => (window as { __ran?: string }).__ran), undefined);
    assert.equal(await page.locator('img').count(), 0);
    assert.equal(await page.locator('script').count(), 2, 'the data and the page script only');
    await page.waitForLoadState('networkidle');
    assert.deepEqual([...new Set(requests)], [sheets.get('alice')!.url]);
  });

  test('a model folder holding <!--<script> leaves the page whole; an image shows, from the page itself', async (t) => {
    const hostile = '<!--<script>';
    const other = makeWorkspace({ models: [`${hostile}m`], tasks: ['proof01'] });
    t.after(() => other.remove());
    const transcriptFile = path.join(other.transcripts, `${hostile}m`, 'proof01.json');
    const transcript = JSON.parse(fs.readFileSync(transcriptFile, 'utf8'));
    const image = { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } };
    transcript.messages.push({
      role: 'user',
      content: [{ type: 'text', text: 'my drawing' }, image],
    });
    writeJson(transcriptFile, transcript);
    const out = path.join(other.dir, 'human');
    const scorer = 'eve';
    const paths = ['--transcripts', other.transcripts, '--tasks', other.tasks];
    const more = ['--reference-keys', other.referenceKeys, '--rubric', other.rubric, '--out', out];
    const result = await runReport(['sheet', ...paths, ...more, '--scorers', scorer]);
    assert.equal(result.code, 0, result.stderr);

    const page = await newTab(t);
    await page.goto(pathToFileURL(path.join(out, `${scorer}.html`)).href, { waitUntil: 'load' });
    assert.equal(await page.locator('h1').textContent(), `Blind scoring: ${scorer}`);
    const img = page.locator('figure img');
    assert.equal(await img.getAttribute('alt'), '[image 1]');
    assert.equal(await img.evaluate((element) => (element as HTMLImageElement).naturalWidth), 1);
    assert.ok((await page.locator('.turn.student').last().textContent())?.includes('[image 1]'));
    await scoreShown(page, () => 0);
    assert.equal(await page.locator('#left').textContent(), 'All 1 scored: download your CSV');
    const eveSheet = path.join(out, `${scorer}.csv`);
    const rows = readHumanScores((await download(page, scorer, eveSheet)).file, rubric);
    assert.deepEqual(
      rows.map((row) => [row.model, row.scorer, isComplete(row, rubric)]),
      [[`${hostile}m`, scorer, true]],
    );
  });

  test('form → CSV → gate: half scored, the full run refuses before any call; all scored, it judges every transcript', async (t) => {
    const { fake, ws: run, run: judge } = await setup(t);
    const out = path.join(run.dir, 'human');
    const paths = ['--transcripts', run.transcripts, '--tasks', run.tasks];
    const more = ['--reference-keys', run.referenceKeys, '--rubric', run.rubric, '--out', out];
    const planned = await runReport(['sheet', ...paths, ...more, '--scorers', 'alice']);
    assert.equal(planned.code, 0, planned.stderr);

    const page = await newTab(t); // a plan folder of its own: no answer kept for it yet
    await page.goto(pathToFileURL(path.join(out, 'alice.html')).href, { waitUntil: 'load' });
    const count = await page.locator('section.transcript').count();
    assert.equal(count, run.pairs.length);
    const sheet = path.join(out, 'alice.csv');

    for (let i = 0; i < count; i++) {
      await scoreByKeys(page, '1', rubric.dimensions.length);
      if (i === 2) {
        const half = (await download(page, 'alice', sheet)).file;
        const refused = await judge(['--human-scores', half]);
        assert.equal(refused.code, 2, refused.stderr);
        assert.ok(refused.stderr.includes(half), refused.stderr);
        assert.equal(fake.requests.length, 0, 'no call before human scoring is done');
      }
      if (i < count - 1) {
        await shown(page).locator('button.next').click();
      }
    }

    fs.copyFileSync((await download(page, 'alice', sheet)).file, sheet);
    const result = await judge(['--human-scores', sheet]);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.requests.length, run.pairs.length, 'every transcript judged');
  });
});

describe('the page in daily use: blind by default, keys, unsure, leaving, --update and import', () => {
  let dir: string;
  let rubric: ReturnType<typeof loadRubric>;
  const shots = process.env.RJ_SCREENSHOTS; // a folder to keep the screenshots in, to look at

  before(async () => {
    dir = fs.mkdtempSync(path.join(fs.realpathSync(os.tmpdir()), 'rj-daily-'));
  });
  after(async () => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** A workspace of 2 tutors × 2 tasks and a plan for `scorers` in its folder `human`. */
  async function planned(t: TestContext, scorers: string, ...args: string[]) {
    const ws = makeWorkspace({ models: 2, tasks: ['proof01', 'proof02'] });
    t.after(() => ws.remove());
    rubric = loadRubric(ws.rubric);
    const out = path.join(ws.dir, 'human');
    const paths = ['--transcripts', ws.transcripts, '--tasks', ws.tasks, '--out', out];
    const more = ['--reference-keys', ws.referenceKeys, '--rubric', ws.rubric];
    const sheet = (...extra: string[]) => runReport(['sheet', ...paths, ...more, ...extra]);
    const result = await sheet('--scorers', scorers, ...args);
    assert.equal(result.code, 0, result.stderr);
    return { ws, out, sheet };
  }

  /** A page of this test's plan (a folder of its own: no answer kept for it yet) in a new tab. */
  async function open(t: TestContext, file: string, width = 1400): Promise<Page> {
    const page = await newTab(t);
    await page.setViewportSize({ width, height: 900 });
    await page.goto(pathToFileURL(file).href, { waitUntil: 'load' });
    return page;
  }

  /** `file` in a fresh browser profile of its own, its storage empty, closed after the test. */
  async function openFresh(t: TestContext, file: string): Promise<Page> {
    const fresh = await chromium.newContext({ acceptDownloads: true });
    fresh.setDefaultTimeout(10_000);
    t.after(() => fresh.close());
    const page = await fresh.newPage();
    await page.setViewportSize({ width: 1400, height: 900 });
    await page.goto(pathToFileURL(file).href, { waitUntil: 'load' });
    return page;
  }

  const shown = (page: Page) => page.locator('section.transcript:not([hidden])');

  /** Downloads, choosing `sheet` as the scorer's sheet now; the downloaded file. */
  async function download(page: Page, sheet: string): Promise<string> {
    const started = page.waitForEvent('download');
    await chooseSheet(page, sheet);
    const file = path.join(dir, `download-${Date.now()}-${Math.random()}.csv`);
    await (await started).saveAs(file);
    return file;
  }

  /** The sheet's rows as the gate reads them, by model/task. */
  const rowsOf = (file: string) => {
    const rows = readHumanScores(file, rubric);
    return new Map(rows.map((row) => [`${row.model}/${row.task_id}`, row]));
  };

  test('blind by default: no system prompt, the transcript before the folded reference notes, turns as Student and Tutor messages; its help and keys seen at 1400, 800 and 360 px', async (t) => {
    const { ws, out, sheet } = await planned(t, 'alice');
    const page = await open(t, path.join(out, 'alice.html'));
    const html = fs.readFileSync(path.join(out, 'alice.html'), 'utf8');
    assert.ok(!html.includes('You are a math tutor'), 'no system prompt anywhere in the page');
    assert.ok(!html.includes('test-tag m0'), 'nor the tag the test tutors carry there');
    const section = shown(page);
    assert.equal(await section.locator('.hidden-turn').count(), 1);
    const whos = await section.locator('.turn .who').allTextContents();
    assert.deepEqual([...new Set(whos)].sort(), [
      'Problem (as given to the student)',
      'Student',
      'Tutor',
    ]);
    const order = await section.evaluate((element) => {
      const turns = element.querySelector('.turns')!;
      const notes = element.querySelector('details.reference')!;
      return turns.compareDocumentPosition(notes) & Node.DOCUMENT_POSITION_FOLLOWING;
    });
    assert.ok(order, 'the transcript comes before the notes');
    assert.equal(await section.locator('details.reference[open]').count(), 0, 'folded');
    assert.equal(
      await section.locator('details.reference').last().locator('h4').first().isVisible(),
      false,
    );
    await section.locator('details.reference summary').last().click();
    assert.equal(
      await section.locator('details.reference').last().locator('h4').first().isVisible(),
      true,
    );

    const hint = page.locator('.hint');
    for (const width of [1400, 800, 360]) {
      await page.setViewportSize({ width, height: 900 });
      const help = await hint.boundingBox();
      assert.ok(
        (await hint.isVisible()) && help !== null && help.x >= 0 && help.x + help.width <= width,
        `the download help and keys shown whole at ${width} px`,
      );
      assert.match((await hint.textContent())!, /download first\s+asks for your alice\.csv/);
      assert.match((await hint.textContent())!, /Keys: 0, 1, 2 score the\s+dimension in focus/);
      assert.match((await hint.textContent())!, /alice\.csv does \(its model column\)/);
      await page.evaluate(() => window.scrollTo(0, document.body.scrollHeight));
      const box = await page.locator('#left').boundingBox();
      assert.ok(
        box !== null && box.y >= 0 && box.y + box.height <= 900,
        `progress in view at ${width} px`,
      );
      const download = await page.locator('#download').boundingBox();
      assert.ok(download !== null && download.y >= 0, `the download in view at ${width} px`);
      const fits = await page.evaluate(
        () => document.documentElement.scrollWidth <= window.innerWidth,
      );
      assert.ok(fits, `nothing wider than the window at ${width} px`);
      if (shots !== undefined) {
        await page.evaluate(() => window.scrollTo(0, 0));
        await page.screenshot({ path: path.join(shots, `page-${width}.png`), fullPage: true });
      }
    }

    const other = path.join(ws.dir, 'shown');
    // A later --out wins: the same inputs planned into another folder.
    const shownPlan = await sheet('--out', other, '--scorers', 'alice', '--show-system-prompt');
    assert.equal(shownPlan.code, 0, shownPlan.stderr);
    const withPrompt = fs.readFileSync(path.join(other, 'alice.html'), 'utf8');
    assert.ok(withPrompt.includes('You are a math tutor'), '--show-system-prompt keeps it');
    assert.ok(withPrompt.includes('System prompt (given to the tutor)'));
  });

  test('digits choose the scores, unsure is recorded, leaving with answers not downloaded asks first', async (t) => {
    const { out } = await planned(t, 'alice');
    const page = await open(t, path.join(out, 'alice.html'));
    await page.locator('h1').click(); // a person's first click; then only keys
    for (const [i] of rubric.dimensions.entries()) {
      await page.keyboard.press(String(i % 3));
    }
    const checked = await shown(page)
      .locator('input[type=radio]:checked')
      .evaluateAll((inputs) => {
        return inputs.map((input) => (input as HTMLInputElement).value);
      });
    assert.deepEqual(
      checked,
      rubric.dimensions.map((_, i) => String(i % 3)),
    );
    assert.equal(await page.locator('#left').textContent(), '3 of 4 left');
    await page.keyboard.press('9'); // no such score: nothing changes
    assert.equal(
      await shown(page).locator('input[type=radio]:checked').count(),
      rubric.dimensions.length,
    );
    await shown(page).locator('input[name=unsure]').check();
    assert.equal(
      await page.locator('#unsaved').isVisible(),
      true,
      'says the answers are not downloaded',
    );

    const file = await download(page, path.join(out, 'alice.csv'));
    assert.equal(await page.locator('#unsaved').isVisible(), false);
    const rows = readHumanScores(file, rubric);
    assert.equal(rows.filter((one) => one.unsure === true).length, 1);
    const header = fs.readFileSync(file, 'utf8').split('\n')[0]!;
    assert.ok(header.split(',').includes('unsure'));
    assert.equal(rows.filter((one) => isComplete(one, rubric)).length, 1);

    // One more answer, not downloaded: closing the page asks first.
    await shown(page).locator('button.next').click();
    await page.keyboard.press('1');
    const asked = new Promise<string>((resolve) => {
      page.once('dialog', (dialog) => {
        resolve(dialog.type());
        void dialog.accept();
      });
    });
    await page.close({ runBeforeUnload: true });
    assert.equal(await asked, 'beforeunload');
  });

  test('edit → --update → the page shows the new text and only that row open; its download holds every row, the orphaned one too', async (t) => {
    const { ws, out, sheet } = await planned(t, 'alice');
    const html = path.join(out, 'alice.html');
    const page = await open(t, html);
    for (let i = 0; i < 4; i++) {
      await scoreByKeys(page, '2', rubric.dimensions.length);
      await shown(page).locator('textarea').fill(`note ${i}, "quoted"`);
      if (i < 3) await shown(page).locator('button.next').click();
    }
    const sheetFile = path.join(out, 'alice.csv');
    fs.copyFileSync(await download(page, sheetFile), sheetFile);
    const scored = rowsOf(sheetFile);

    const edited = path.join(ws.transcripts, 'm01', 'proof02.json');
    const transcript = JSON.parse(fs.readFileSync(edited, 'utf8'));
    transcript.messages[2].content = 'STUDENT-EDITED where do I begin?';
    fs.writeFileSync(edited, JSON.stringify(transcript));
    fs.rmSync(path.join(ws.transcripts, 'm02', 'proof01.json'));
    const updated = await sheet('--update');
    assert.equal(updated.code, 0, updated.stderr);
    assert.match(updated.stdout, /scores emptied: alice: m01\/proof02$/m);
    assert.match(
      updated.stdout,
      /orphaned \(transcript removed; rows kept\): alice: m02\/proof01$/m,
    );

    // A fresh browser's view: only what the page itself holds.
    const again = await openFresh(t, html);
    assert.equal(await page.isClosed(), false);
    assert.equal(
      await again.locator('section.transcript').count(),
      3,
      'the removed one is not shown',
    );
    assert.equal(await again.locator('#left').textContent(), '1 of 3 left');
    assert.ok(
      (await shown(again).textContent())!.includes('STUDENT-EDITED'),
      'opens at the open one, its new text',
    );
    const after = rowsOf(await download(again, sheetFile));
    assert.equal(after.size, 4, 'every row of the sheet');
    for (const [key, row] of after) {
      if (key === 'm01/proof02') {
        assert.deepEqual(row.scores, {});
      } else {
        assert.deepEqual(row.scores, scored.get(key)!.scores, key);
        assert.equal(row.notes, scored.get(key)!.notes, key);
      }
    }
  });

  test('a sheet filled in by hand, the page written before: imported, the page shows every score and downloads them', async (t) => {
    const { out } = await planned(t, 'bob');
    const sheetFile = path.join(out, 'bob.csv');
    const lines = fs.readFileSync(sheetFile, 'utf8').split('\n');
    const header = lines[0]!.split(',');
    const filled = lines.slice(1, -1).map((line, i) => {
      const cells = line.split(',');
      for (const dimension of rubric.dimensions)
        cells[header.indexOf(dimension.name)] = String(i % 3);
      cells[header.indexOf('notes')] = `"by hand, ${i}"`;
      return cells.join(',');
    });
    fs.writeFileSync(sheetFile, `${[lines[0], ...filled].join('\r\n')}\r\n`); // as a spreadsheet saves it
    const byHand = rowsOf(sheetFile);

    const page = await open(t, path.join(out, 'bob.html'));
    assert.equal(
      await page.locator('#left').textContent(),
      '4 of 4 left',
      'the page was written blank',
    );
    await page.locator('#import').setInputFiles(sheetFile);
    await page.locator('#sheet-status').filter({ hasText: 'taken' }).waitFor();
    assert.equal(
      await page.locator('#sheet-status').textContent(),
      `bob.csv: 4 row(s) taken; ${4 * (rubric.dimensions.length + 1)} answer(s) in it this page had not seen, shown here`,
    );
    assert.equal(await page.locator('#left').textContent(), 'All 4 scored: download your CSV');
    const downloaded = rowsOf(await download(page, sheetFile));
    assert.deepEqual(
      [...downloaded].map(([key, row]) => [key, row.scores, row.notes]),
      [...byHand].map(([key, row]) => [key, row.scores, row.notes]),
    );
  });

  /** Each dimension of the transcript on show scored `score`, the ones in `skip` left open. */
  async function scoreAll(page: Page, score: string, skip: string[] = []) {
    if (skip.length === 0) {
      await scoreByKeys(page, score, rubric.dimensions.length);
      return;
    }
    for (const dimension of rubric.dimensions) {
      if (skip.includes(dimension.name)) continue;
      await shown(page).locator(`input[name="${dimension.name}"][value="${score}"]`).check();
    }
  }

  /** The model/task of the transcript on show, read from its page's embedded sheet row. */
  async function shownKey(page: Page): Promise<string> {
    return shown(page)
      .locator('form')
      .evaluate((form) => {
        const data = JSON.parse(document.getElementById('plan-data')!.textContent!);
        const cells = data.rows[Number((form as HTMLElement).dataset.row)];
        return `${cells.model}/${cells.task_id}`;
      });
  }

  test('one page in two tabs, a transcript scored in each, the first closed: reopened, both answers are there; each tab sees the other', async (t) => {
    const { out } = await planned(t, 'alice');
    const html = path.join(out, 'alice.html');
    const first = await open(t, html);
    const second = await newTab(t);
    await second.goto(pathToFileURL(html).href, { waitUntil: 'load' });

    // Each tab brought to the front before it is used, as a person does: a tab behind gets no
    // animation frames, and each click on it waited 2 s for one.
    await first.bringToFront();
    await scoreAll(first, '2');
    const firstKey = await shownKey(first);
    await second.bringToFront();
    await second.locator('nav a').nth(1).click();
    const secondKey = await shownKey(second);
    assert.notEqual(firstKey, secondKey);
    await scoreAll(second, '1');
    await second.locator('textarea').nth(1).fill('from the second tab');
    // The other tab's answer reaches this one through the storage event, not a reload.
    assert.equal(await second.locator('#left').textContent(), '2 of 4 left');
    await first.locator('#left').filter({ hasText: '2 of 4 left' }).waitFor();
    await stored(first);
    await first.close();

    const again = await newTab(t);
    await again.goto(pathToFileURL(html).href, { waitUntil: 'load' });
    assert.equal(await again.locator('#left').textContent(), '2 of 4 left');
    const rows = rowsOf(await download(again, path.join(out, 'alice.csv')));
    const all = (score: number) =>
      Object.fromEntries(rubric.dimensions.map((d) => [d.name, score]));
    assert.deepEqual(rows.get(firstKey)!.scores, all(2));
    assert.deepEqual(rows.get(secondKey)!.scores, all(1));
    assert.equal(rows.get(secondKey)!.notes, 'from the second tab');
  });

  test('scored in the page, not downloaded, a late transcript added and the plan made again: the page still shows every answer', async (t) => {
    const { ws, out, sheet } = await planned(t, 'alice');
    const html = path.join(out, 'alice.html');
    const page = await open(t, html);
    await scoreAll(page, '2');
    const scored = await shownKey(page);
    await stored(page);
    await page.close();

    const transcript = JSON.parse(
      fs.readFileSync(path.join(ws.transcripts, 'm01', 'proof01.json'), 'utf8'),
    );
    transcript.metadata.model = 'm03';
    fs.mkdirSync(path.join(ws.transcripts, 'm03'));
    writeJson(path.join(ws.transcripts, 'm03', 'proof01.json'), transcript);
    const again = await sheet('--scorers', 'alice', '--seed', '7');
    assert.equal(again.code, 0, again.stderr + again.stdout);

    const reopened = await newTab(t);
    await reopened.goto(pathToFileURL(html).href, { waitUntil: 'load' });
    assert.equal(await reopened.locator('section.transcript').count(), 5);
    assert.equal(await reopened.locator('#left').textContent(), '4 of 5 left');
    const rows = rowsOf(await download(reopened, path.join(out, 'alice.csv')));
    assert.equal(Object.keys(rows.get(scored)!.scores).length, rubric.dimensions.length);
  });

  /** Every dimension scored `score`. */
  const all = (score: number) => Object.fromEntries(rubric.dimensions.map((d) => [d.name, score]));

  /** Each transcript of the page scored `score` with the keys, in page order. */
  async function scoreEvery(page: Page, score: string): Promise<void> {
    const count = await page.locator('section.transcript').count();
    for (let i = 0; i < count; i++) {
      await page.locator('nav a').nth(i).click();
      await scoreAll(page, score);
    }
  }

  /** The sheet with one row's cells set by hand, as a spreadsheet would save it. */
  function editRow(file: string, key: string, cells: Record<string, string>): void {
    const records = parseCsv(fs.readFileSync(file, 'utf8'), { columns: true }) as Record<
      string,
      string
    >[];
    const header = Object.keys(records[0]!);
    const lines = records.map((record) => {
      if (`${record.model}/${record.task_id}` === key) Object.assign(record, cells);
      return csvLine(header.map((column) => record[column]!));
    });
    fs.writeFileSync(file, csvLine(header) + lines.join(''));
  }

  test('moving between browsers and scoring in the sheet too: no download blanks or undoes a score given elsewhere; where both changed, the page keeps its answer and names it', async (t) => {
    const { out } = await planned(t, 'alice');
    const html = path.join(out, 'alice.html');
    const sheetFile = path.join(out, 'alice.csv');
    const first = rubric.dimensions[0]!.name;

    // Browser A: the first two transcripts scored 2, downloaded over the sheet.
    const a = await open(t, html);
    await scoreAll(a, '2');
    const one = await shownKey(a);
    await shown(a).locator('button.next').click();
    await scoreAll(a, '2');
    const two = await shownKey(a);
    fs.copyFileSync(await download(a, sheetFile), sheetFile);
    assert.equal(await a.locator('#fresh').isVisible(), false, 'A holds answers');

    // Browser B, fresh: the page as written, which it says; the third transcript scored 1. Its
    // download asks for the sheet and keeps A's scores.
    const b = await openFresh(t, html);
    assert.equal(await b.locator('#left').textContent(), '4 of 4 left');
    assert.equal(await b.locator('#fresh').isVisible(), true, 'says it holds no answer yet');
    await b.locator('nav a').nth(2).click();
    await scoreAll(b, '1');
    const three = await shownKey(b);
    fs.copyFileSync(await download(b, sheetFile), sheetFile);
    assert.equal(await b.locator('#left').textContent(), '1 of 4 left', "A's scores shown in B");
    let rows = rowsOf(sheetFile);
    assert.deepEqual(rows.get(one)!.scores, all(2));
    assert.deepEqual(rows.get(two)!.scores, all(2));
    assert.deepEqual(rows.get(three)!.scores, all(1));

    // By hand in the sheet: the first transcript re-scored and noted; the second re-scored, and
    // in A re-scored another way as well.
    editRow(sheetFile, one, { [first]: '0', notes: 'by hand' });
    editRow(sheetFile, two, { [first]: '0' });
    await a.bringToFront();
    await a.locator('nav a').nth(1).click();
    await shown(a).locator(`input[name="${first}"][value="1"]`).check();
    await a.locator('nav a').nth(3).click();
    await scoreAll(a, '0');
    const four = await shownKey(a);

    // A's download: B's scores and the hand's are in it, A's new ones too; the one cell both
    // changed keeps A's answer, named.
    rows = rowsOf(await download(a, sheetFile));
    assert.deepEqual(rows.get(one)!.scores, { ...all(2), [first]: 0 });
    assert.equal(rows.get(one)!.notes, 'by hand');
    assert.deepEqual(rows.get(two)!.scores, { ...all(2), [first]: 1 });
    assert.deepEqual(rows.get(three)!.scores, all(1));
    assert.deepEqual(rows.get(four)!.scores, all(0));
    const [, task] = /\/(.*)$/.exec(two)!;
    assert.match(
      (await a.locator('#sheet-status').textContent())!,
      new RegExp(
        `this page's kept: transcript 2 \\(task ${task}\\) ${first}: 1 \\(the sheet: 0\\)`,
      ),
    );
    assert.equal(await a.locator('#left').textContent(), 'All 4 scored: download your CSV');
    await a.locator('nav a').nth(0).click();
    assert.equal(await shown(a).locator('textarea').inputValue(), 'by hand', 'the page shows it');
  });

  test('after a rubric edit, then a task-file edit, --update empties the rows: the page in the same browser leaves them open and never downloads the old answers', async (t) => {
    const { ws, out, sheet } = await planned(t, 'alice');
    const html = path.join(out, 'alice.html');
    const sheetFile = path.join(out, 'alice.csv');
    const page = await open(t, html);
    await scoreEvery(page, '2');
    assert.equal(await page.locator('#left').textContent(), 'All 4 scored: download your CSV');
    fs.copyFileSync(await download(page, sheetFile), sheetFile);
    await stored(page);
    await page.close();

    // The first dimension reworded: every row was scored under the old words.
    const json = JSON.parse(fs.readFileSync(ws.rubric, 'utf8'));
    json.dimensions[0].description += ' Reworded.';
    fs.writeFileSync(ws.rubric, JSON.stringify(json));
    const updated = await sheet('--update');
    assert.equal(updated.code, 0, updated.stderr);
    assert.match(updated.stdout, /scores emptied: (alice: m0\d\/proof0\d(, )?){4}$/m);
    const again = await open(t, html);
    assert.equal(await again.locator('#left').textContent(), '4 of 4 left');
    assert.equal(await again.locator('input:checked').count(), 0, 'no old answer shown');
    assert.equal(await again.locator('#unsaved').isVisible(), false);
    let rows = rowsOf(await download(again, sheetFile));
    assert.deepEqual(
      [...rows.values()].map((row) => row.scores),
      [{}, {}, {}, {}],
    );

    // Scored again under the new words, then a task file edited: its two rows open again.
    await scoreEvery(again, '1');
    fs.copyFileSync(await download(again, sheetFile), sheetFile);
    await stored(again);
    await again.close();
    const taskFile = path.join(ws.tasks, 'proof01.json');
    const task = JSON.parse(fs.readFileSync(taskFile, 'utf8'));
    task.topic = 'another topic';
    fs.writeFileSync(taskFile, JSON.stringify(task));
    const edited = await sheet('--update');
    assert.match(edited.stdout, /scores emptied: alice: m01\/proof01, alice: m02\/proof01$/m);
    const third = await open(t, html);
    assert.equal(await third.locator('#left').textContent(), '2 of 4 left');
    rows = rowsOf(await download(third, sheetFile));
    for (const [key, row] of rows) {
      assert.deepEqual(row.scores, key.endsWith('proof01') ? {} : all(1), key);
    }
  });

  test('an answer given in the page, not downloaded, for a transcript --update then takes off the page: the page says it keeps it, and its download holds it', async (t) => {
    const { ws, out, sheet } = await planned(t, 'alice');
    const html = path.join(out, 'alice.html');
    const page = await open(t, html);
    await scoreAll(page, '2');
    await shown(page).locator('textarea').fill('given, not downloaded');
    const key = await shownKey(page);
    await stored(page);
    await page.close();

    const [model, task] = key.split('/');
    fs.rmSync(path.join(ws.transcripts, model!, `${task}.json`));
    const updated = await sheet('--update');
    assert.equal(updated.code, 0, updated.stderr);
    assert.match(
      updated.stdout,
      new RegExp(`orphaned \\(transcript removed; rows kept\\): alice: ${key}$`, 'm'),
    );

    const again = await open(t, html);
    assert.equal(await again.locator('section.transcript').count(), 3);
    assert.equal(await again.locator('#left').textContent(), '3 of 3 left');
    assert.match(
      (await again.locator('#held').textContent())!,
      new RegExp(
        `^1 answer\\(s\\) given here for a transcript since taken off this page \\(task ${task}\\): your download keeps them\\.$`,
      ),
    );
    assert.equal(await again.locator('#unsaved').isVisible(), true, 'not downloaded yet');
    const rows = rowsOf(await download(again, path.join(out, 'alice.csv')));
    assert.deepEqual(rows.get(key)!.scores, all(2));
    assert.equal(rows.get(key)!.notes, 'given, not downloaded');
    assert.equal(await again.locator('#unsaved').isVisible(), false);
  });

  test("an answer kept by an earlier release's page (its data names no version): shown once the page is written again for the same text, never after a rubric edit", async (t) => {
    const { ws, out, sheet } = await planned(t, 'alice');
    const html = path.join(out, 'alice.html');

    // The page as an earlier release wrote it, and an answer it kept: one entry per transcript and
    // its file's hash.
    const text = fs.readFileSync(html, 'utf8');
    const json = /<script type="application\/json" id="plan-data">(.*?)<\/script>/s.exec(text)!;
    const data = JSON.parse(json[1]!);
    delete data.versions;
    const earlier = JSON.stringify(data).replace(/</g, '\\u003c');
    fs.writeFileSync(
      html,
      text.replace(json[1]!, () => earlier),
    );
    const cells = data.rows[0];
    const key = `${cells.model}/${cells.task_id}`;
    const id = JSON.stringify([cells.task_id, cells.model, cells.transcript_sha256]);
    const scores = Object.fromEntries(rubric.dimensions.map((d) => [d.name, '1']));
    const answer = JSON.stringify({ scores, notes: 'an earlier page', unsure: false });
    const entry = `run-judge-scoring:${data.plan}:alice:${id}`;
    await witness.evaluate((kept) => localStorage.setItem(kept.entry, kept.answer), {
      entry,
      answer,
    });

    assert.equal((await sheet('--update')).code, 0);
    const again = await open(t, html);
    assert.equal(await again.locator('#left').textContent(), '3 of 4 left');
    const rows = rowsOf(await download(again, path.join(out, 'alice.csv')));
    assert.deepEqual(rows.get(key)!.scores, all(1));
    assert.equal(rows.get(key)!.notes, 'an earlier page');
    assert.equal((await sheet('--update')).code, 0);
    await again.reload({ waitUntil: 'load' });
    assert.equal(await again.locator('#left').textContent(), '3 of 4 left', 'written again: kept');
    await again.close();

    const reworded = JSON.parse(fs.readFileSync(ws.rubric, 'utf8'));
    reworded.dimensions[0].description += ' Reworded.';
    fs.writeFileSync(ws.rubric, JSON.stringify(reworded));
    assert.equal((await sheet('--update')).code, 0);
    const edited = await open(t, html);
    assert.equal(await edited.locator('#left').textContent(), '4 of 4 left');
  });

  test('a dimension of one level: open until its radio is checked, never downloaded unchecked, restored on a reload', async (t) => {
    const json = JSON.parse(fs.readFileSync(RUBRIC_FILE, 'utf8'));
    const lone = json.dimensions[1];
    lone.scores = { '1': 'The tutor breaks the proof into subgoals.' };
    const ws = makeWorkspace({
      models: 2,
      tasks: ['proof01', 'proof02'],
      rubricText: JSON.stringify(json),
    });
    t.after(() => ws.remove());
    rubric = loadRubric(ws.rubric);
    const out = path.join(ws.dir, 'human');
    const paths = ['--transcripts', ws.transcripts, '--tasks', ws.tasks, '--out', out];
    const more = ['--reference-keys', ws.referenceKeys, '--rubric', ws.rubric];
    const made = await runReport(['sheet', ...paths, ...more, '--scorers', 'alice']);
    assert.equal(made.code, 0, made.stderr);

    const page = await open(t, path.join(out, 'alice.html'));
    assert.equal(await page.locator('#left').textContent(), '4 of 4 left');
    await scoreAll(page, '1', [lone.name]);
    const key = await shownKey(page);
    assert.equal(await page.locator('#left').textContent(), '4 of 4 left', 'its radio unchecked');
    const open1 = rowsOf(await download(page, path.join(out, 'alice.csv'))).get(key)!;
    assert.equal(open1.scores[lone.name], undefined, 'no score nobody gave');
    assert.equal(Object.keys(open1.scores).length, rubric.dimensions.length - 1);

    await shown(page).locator(`input[name="${lone.name}"]`).check();
    assert.equal(await page.locator('#left').textContent(), '3 of 4 left');
    await stored(page);
    await page.reload({ waitUntil: 'load' });
    await page.locator('nav a').first().click();
    assert.equal(await page.locator('#left').textContent(), '3 of 4 left');
    const done = rowsOf(await download(page, path.join(out, 'alice.csv'))).get(key)!;
    assert.equal(done.scores[lone.name], 1);
    assert.ok(isComplete(done, rubric));
    if (shots !== undefined) {
      await page.screenshot({ path: path.join(shots, 'page-one-level.png'), fullPage: true });
    }
  });
});
