// report.ts view: every judge run of a study, in a real headless Chromium (the page as written by
// --out, and as served), checked against the study's own CSVs and audit logs read here.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { TestContext } from 'node:test';
import { pathToFileURL } from 'node:url';
import { parse } from 'csv-parse/sync';
import type { Browser, Page } from 'playwright-core';
import { runView } from '../report/view.ts';
import { REPO, TSX_LOADER, launchChromium, runReport } from './helpers.ts';
import {
  FAILED_PAIR,
  FALLBACK_PAIR,
  PAYLOAD,
  PAYLOAD_PAIR,
  STALE_PAIR,
  writeStudy,
} from './view-study.ts';

type Row = Record<string, string>;
type LogLine = {
  task_id: string;
  model: string;
  status: string;
  cost_usd: number | null;
  prompt_sha256: string | null;
  answers: { text: string }[];
  error?: { class: string; message: string };
};

const SCORES = ['evals', 'scores'];
const rubric = JSON.parse(fs.readFileSync(path.join(REPO, 'rubric.json'), 'utf8')) as {
  dimensions: { name: string; scores: Record<string, string> }[];
};
const DIMENSIONS = rubric.dimensions.map((dimension) => dimension.name);

/** A CSV's rows by `model/task_id`. */
function csvByPair(file: string): Map<string, Row> {
  const rows = parse(fs.readFileSync(file), { columns: true }) as Row[];
  return new Map(rows.map((row) => [`${row.model}/${row.task_id}`, row]));
}

/** An audit log's lines, in order. */
function logLines(file: string): LogLine[] {
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  return lines.filter((line) => line !== '').map((line) => JSON.parse(line) as LogLine);
}

/** The steps between two rows' scores, summed over the dimensions (the scale is 0, 1, 2). */
function steps(a: Row, b: Row): number {
  return DIMENSIONS.reduce((total, name) => total + Math.abs(Number(a[name]) - Number(b[name])), 0);
}

describe('report.ts view', () => {
  let dir: string;
  let study: string;
  let pageUrl: string;
  let browser: Browser;
  let first: Map<string, Row>;
  let second: Map<string, Row>;
  let firstLog: LogLine[];

  before(async () => {
    dir = fs.mkdtempSync(path.join(fs.realpathSync(os.tmpdir()), 'rj-view-'));
    const [launched, written] = await Promise.all([launchChromium(), writeStudy(dir)]);
    browser = launched;
    study = written;
    const page = path.join(dir, 'view.html');
    const result = await runReport(['view', '--dir', study, '--out', page]);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stderr, `view: wrote 2 run(s), 6 transcript(s) to ${page}\n`);
    pageUrl = pathToFileURL(page).href;
    first = csvByPair(path.join(study, ...SCORES, 'judge_scores.csv'));
    second = csvByPair(path.join(study, ...SCORES, 'second.csv'));
    firstLog = logLines(path.join(study, ...SCORES, 'judge_log.jsonl'));
  });

  after(async () => {
    await browser?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** The page freshly loaded at `width`, failing the test on any error of its script. */
  async function openPage(t: TestContext, url = pageUrl, width = 1400): Promise<Page> {
    const page = await browser.newPage({ viewport: { width, height: 900 } });
    t.after(() => page.close());
    const errors: string[] = [];
    page.on('pageerror', (error) => errors.push(error.message));
    page.on('console', (message) => {
      if (message.type() === 'error') errors.push(message.text());
    });
    t.after(() => assert.deepEqual(errors, [], 'the page ran without an error'));
    await page.goto(url, { waitUntil: 'load' });
    return page;
  }

  /** The list's transcripts, as `model/task_id`, in the page's order. */
  async function listed(page: Page): Promise<string[]> {
    const links = await page.locator('#transcripts td.pair a').allTextContents();
    return links.map((text) => text.replace(' / ', '/'));
  }

  /** Sets a filter of the list by its name. */
  async function filter(page: Page, name: string, value: string): Promise<void> {
    await page.locator(`#filters select[name="${name}"]`).selectOption(value);
  }

  /** Opens a transcript from the list by `model/task_id`. */
  async function open(page: Page, pair: string): Promise<void> {
    await page.locator('#transcripts td.pair a', { hasText: pair.replace('/', ' / ') }).click();
    await page.locator('#transcript h2').waitFor();
  }

  test('lists the runs with what their logs record: judges, fallbacks, failures, cost, settings', async (t) => {
    const page = await openPage(t);
    const rows = await page.locator('table.runs tbody tr').evaluateAll((trs) => {
      return trs.map((tr) => {
        const cells = [...tr.querySelectorAll('td')];
        return Object.fromEntries(cells.map((td) => [td.dataset.label, td.textContent ?? '']));
      });
    });
    assert.deepEqual(
      rows.map((row) => row.run?.split('/')[0]),
      ['judge_scores', 'second'],
    );
    const [one, two] = rows as Record<string, string>[];

    // Every line's cost counts, the failed transcript's too.
    const cost = firstLog.reduce((total, line) => total + (line.cost_usd ?? 0), 0);
    assert.equal(one!.cost, `$${cost.toFixed(4)}`);
    assert.equal(one!.judges, 'claude-opus-4-7 (4); claude-sonnet-4-6 (1, 1 as a fallback)');
    assert.equal(one!.family, 'anthropic');
    const counts = (row: Record<string, string>) =>
      [row.rows, row.stale, row.failed, row.fallbacks].map(Number);
    assert.deepEqual(counts(one!), [first.size, 1, 1, 1]);
    assert.deepEqual(counts(two!), [second.size, 1, 1, 0]);
    assert.match(one!.settings!, /^samples 1; thinking kept in 5 answers/);
    assert.match(one!.settings!, /claude-opus-4-7: anthropic, thinking adaptive, temperature/);
    assert.match(two!.settings!, /^samples 3;/);
    assert.match(two!.settings!, /claude-opus-5-5: anthropic, thinking adaptive.*JUDGE_MODEL sets/);
    assert.equal(two!.cost, 'unknown', 'opus-5-5 has no price in this models.json');
    assert.match(one!.judged!, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ → \d\d:\d\d:\d\dZ \(1 session\)$/);
  });

  test('opens a transcript: its turns, the prompt sent, every answer raw and parsed, the people', async (t) => {
    const page = await openPage(t);
    await open(page, FALLBACK_PAIR);
    assert.equal(await page.locator('#transcript h2').textContent(), 'stub / proof01');

    const file = path.join(study, 'evals', 'transcripts', `${FALLBACK_PAIR}.json`);
    const transcript = JSON.parse(fs.readFileSync(file, 'utf8'));
    const turns = await page.locator('.turn pre').allTextContents();
    const said = transcript.messages.map((message: { content: string }) => message.content.trim());
    assert.deepEqual(turns.slice(1), said, 'each message, the system prompt too');

    // The answers as the log holds them: opus's unusable one, then sonnet's.
    const lines = firstLog.filter((line) => `${line.model}/${line.task_id}` === FALLBACK_PAIR);
    const raw = await page.locator('.run-a pre.raw').allTextContents();
    assert.deepEqual(
      raw,
      lines.at(-1)!.answers.map((answer) => answer.text),
    );
    const panel = page.locator('.panel.run-a');
    assert.match(
      (await panel.textContent()) ?? '',
      /claude-sonnet-4-6 \(a fallback: an earlier judge failed\)/,
    );
    assert.match(
      (await panel.textContent()) ?? '',
      /the rebuilt prompt is the one sent \(same sha256\)/,
    );

    // The prompt rebuilt is, byte for byte, the one whose hash the log recorded.
    await page.locator('details.prompt > summary').click();
    const prompt = await page.locator('details.prompt pre').textContent();
    const hash = createHash('sha256')
      .update(prompt ?? '')
      .digest('hex');
    assert.equal(hash, lines.at(-1)!.prompt_sha256);

    // The scores side by side: the run's row, then alice's and bob's.
    const table = await page.locator('table.scores tbody tr').evaluateAll((trs) => {
      return trs.map((tr) => [...tr.children].map((cell) => cell.textContent ?? ''));
    });
    const people = ['alice', 'bob'].map((name) => {
      const sheet = path.join(study, 'evals', 'human', `${name}.csv`);
      return csvByPair(sheet).get(FALLBACK_PAIR)!;
    });
    const expected = DIMENSIONS.map((name) => [
      name,
      first.get(FALLBACK_PAIR)![name]!,
      ...people.map((row) => row[name]!),
    ]);
    assert.deepEqual(table, expected);
  });

  test('a stale row and a failed transcript say so', async (t) => {
    const page = await openPage(t);
    await open(page, STALE_PAIR);
    const stale = (await page.locator('.panel.run-a').textContent()) ?? '';
    assert.match(stale, /Stale: an input of its prompt .* changed since it was judged/);
    assert.match(stale, /the prompt sent differs from the one rebuilt now/);

    await page.locator('a', { hasText: 'every transcript' }).click();
    await open(page, FAILED_PAIR);
    const failed = (await page.locator('.panel.run-a').textContent()) ?? '';
    assert.match(failed, /failed: no row \(its last entry failed\)/);
    const last = firstLog.filter((line) => `${line.model}/${line.task_id}` === FAILED_PAIR).at(-1)!;
    assert.ok(failed.includes(`${last.error!.class}: ${last.error!.message}`), 'the error logged');
  });

  test('filters by tutor, task, dimension, judge, disagreement and state', async (t) => {
    const page = await openPage(t);
    const all = [...new Set([...first.keys(), FAILED_PAIR])].sort();
    assert.deepEqual([...(await listed(page))].sort(), all);

    await filter(page, 'model', 'stub');
    assert.deepEqual([...(await listed(page))].sort(), [
      'stub/proof01',
      'stub/proof02',
      'stub/proof03',
    ]);
    await filter(page, 'task', 'proof02');
    assert.deepEqual(await listed(page), ['stub/proof02']);
    assert.equal(await page.locator('#shown').textContent(), '1 of 6 transcripts shown');
    await filter(page, 'model', '');
    await filter(page, 'task', '');

    await filter(page, 'judge', 'claude-sonnet-4-6');
    assert.deepEqual(await listed(page), [FALLBACK_PAIR]);
    await filter(page, 'judge', '');
    await filter(page, 'status', 'failed');
    assert.deepEqual(await listed(page), [FAILED_PAIR]);
    await filter(page, 'status', 'stale');
    assert.deepEqual(await listed(page), [STALE_PAIR]);
    await filter(page, 'status', '');

    // Disagreeing with the people on one dimension: some scorer's score there differs from A's.
    const sheets = ['alice', 'bob'].map((name) =>
      csvByPair(path.join(study, 'evals', 'human', `${name}.csv`)),
    );
    const disputedOn = (d: number) =>
      [...first].flatMap(([pair, row]) => {
        const differs = sheets.some((sheet) => {
          const human = sheet.get(pair);
          return human !== undefined && human[DIMENSIONS[d]!] !== row[DIMENSIONS[d]!];
        });
        return differs ? [pair] : [];
      });
    // A dimension where the filter chooses: some transcripts disputed, not all.
    const d = DIMENSIONS.findIndex((_, i) => disputedOn(i).length < first.size);
    assert.ok(d >= 0 && disputedOn(d).length > 0, 'a dimension where the filter chooses');
    const disputed = disputedOn(d);
    await filter(page, 'dimension', String(d));
    await filter(page, 'disagreement', 'people');
    assert.deepEqual([...(await listed(page))].sort(), disputed.sort());
    const strips = await page.locator('#transcripts tbody td[data-label="A"] .strip').first();
    assert.equal(await strips.locator('span').count(), 1, 'the strips show the dimension chosen');
  });

  test('compares two runs side by side, the rows whose scores differ first', async (t) => {
    const page = await openPage(t);
    await page.locator('input[name="run-b"][value="1"]').check();
    const both = [...first.keys()].filter((pair) => second.has(pair));
    const expected = new Map(
      both.map((pair) => [pair, steps(first.get(pair)!, second.get(pair)!)]),
    );
    assert.ok([...expected.values()].some((value) => value === 0) || both.length > 1);

    const order = await listed(page);
    const shown = await page
      .locator('#transcripts tbody td[data-label="A–B steps"]')
      .allTextContents();
    const figures = shown.map((text) => (text === '–' ? -1 : Number(text)));
    order.forEach((pair, i) => {
      assert.equal(figures[i], expected.get(pair) ?? -1, `${pair}: the steps between the CSVs`);
    });
    const sorted = [...figures].sort((a, b) => b - a);
    assert.deepEqual(figures, sorted, 'the most different first');

    await filter(page, 'disagreement', 'runs');
    const differing = both.filter((pair) => expected.get(pair)! > 0);
    assert.deepEqual([...(await listed(page))].sort(), differing.sort());

    // One transcript: both panels, and B's scores that differ from A's marked.
    const pair = differing[0]!;
    await open(page, pair);
    const panels = await page.locator('.panel h3').allTextContents();
    assert.deepEqual(panels, ['Transcript', 'Run A: judge_scores', 'Run B: second']);
    const marked = await page.locator('table.scores tbody tr').evaluateAll((trs) => {
      return trs.flatMap((tr) =>
        tr.children[2]?.classList.contains('differs') ? [tr.children[0]!.textContent] : [],
      );
    });
    const differs = DIMENSIONS.filter((name) => first.get(pair)![name] !== second.get(pair)![name]);
    assert.deepEqual(marked, differs);
  });

  test("shows a transcript's <script> as text, and runs no script of the data", async (t) => {
    const page = await openPage(t);
    await open(page, PAYLOAD_PAIR);
    const turns = await page.locator('.turn pre').allTextContents();
    assert.equal(turns.at(-1), `Is this right? ${PAYLOAD}`);
    const notes = await page.locator('#transcript p.facts').allTextContents();
    assert.ok(notes.includes(`bob's notes: bob's notes ${PAYLOAD}`), notes.join('\n'));
    await page.locator('details.prompt > summary').click();
    assert.match(
      (await page.locator('details.prompt pre').textContent()) ?? '',
      /<script>window\.__ran/,
    );
    assert.equal(await page.evaluate(() => (window as { __ran?: string }).__ran), undefined);
    assert.equal(await page.locator('img[src="x"]').count(), 0);
  });

  test('at 360 px nothing is wider than the screen', async (t) => {
    const page = await openPage(t, pageUrl, 360);
    const width = () => page.evaluate(() => document.documentElement.scrollWidth);
    assert.equal(await width(), 360);
    await page.locator('input[name="run-b"][value="1"]').check();
    assert.equal(await width(), 360);
    await open(page, STALE_PAIR);
    assert.equal(await width(), 360);
  });

  test('served on 127.0.0.1: read again at each load, other hosts refused, stopped on request', async (t) => {
    let stop = () => {};
    const stopped = new Promise<void>((resolve) => (stop = resolve));
    let stdout = '';
    const io = {
      stdout: { write: (text: string) => (stdout += text) },
      stderr: { write: () => true },
    };
    const options = {
      dir: study,
      transcripts: path.join(study, 'evals', 'transcripts'),
      tasks: path.join(study, 'evals', 'tasks'),
      referenceKeys: path.join(study, 'evals', 'reference_keys'),
      rubric: path.join(study, 'rubric.json'),
      humanScores: path.join(study, 'evals', 'human'),
      models: path.join(study, 'models.json'),
    };
    const serving = runView(options, io as never, () => stopped);
    t.after(stop);
    while (!stdout.includes('http')) await new Promise((resolve) => setImmediate(resolve));
    const url = /(http:\/\/127\.0\.0\.1:\d+\/)/.exec(stdout)![1]!;
    assert.match(
      stdout,
      /^view: 2 run\(s\), 6 transcript\(s\) of .* at http:\/\/127\.0\.0\.1:\d+\/ \(Ctrl-C stops it\)\n$/,
    );

    const page = await openPage(t, url);
    assert.equal(await page.locator('table.runs tbody tr').count(), 2);

    // A third run copied in shows at the next load; a stray .jsonl is named, the others shown.
    const scores = path.join(study, ...SCORES);
    fs.copyFileSync(path.join(scores, 'second.csv'), path.join(scores, 'third.csv'));
    fs.copyFileSync(path.join(scores, 'second.jsonl'), path.join(scores, 'third.jsonl'));
    fs.writeFileSync(path.join(scores, 'stray.jsonl'), '{"hello": 1}\n');
    t.after(() => {
      for (const name of ['third.csv', 'third.jsonl', 'stray.jsonl'])
        fs.rmSync(path.join(scores, name));
    });
    await page.reload();
    assert.equal(await page.locator('table.runs tbody tr').count(), 3);
    assert.match(
      (await page.locator('ul.notes-list').textContent()) ?? '',
      /run stray not shown: .*stray\.jsonl: line 1: /,
    );

    const get = (headers: Record<string, string>, method = 'GET', route = '/') =>
      new Promise<number>((resolve, reject) => {
        const options = { method, headers, agent: false };
        const request = http.request(new URL(route, url), options, (response) => {
          response.resume();
          resolve(response.statusCode ?? 0);
        });
        request.on('error', reject);
        request.end();
      });
    const port = new URL(url).port;
    assert.equal(await get({ host: `localhost:${port}` }), 200);
    assert.equal(await get({ host: `evil.example:${port}` }), 403, 'a rebound name is refused');
    assert.equal(await get({}, 'POST'), 405);
    assert.equal(await get({}, 'GET', '/judge_scores.csv'), 404);

    stop();
    assert.equal(await serving, 0);
    await assert.rejects(get({}), /ECONNREFUSED/);
  });

  test('the command: served until SIGTERM as a process; usage errors exit 2 with one line', async (t) => {
    const child = spawn(
      process.execPath,
      ['--import', TSX_LOADER, path.join(REPO, 'report.ts'), 'view', '--dir', study],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    t.after(() => child.kill('SIGKILL'));
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', () => stdout.includes('\n') && resolve());
      child.once('close', () => reject(new Error(`exited: ${stderr}`)));
    });
    const url = /(http:\/\/127\.0\.0\.1:\d+\/)/.exec(stdout)![1]!;
    const page = await openPage(t, url);
    assert.equal(await page.locator('table.runs tbody tr').count(), 2);
    child.kill('SIGTERM');
    assert.equal(await exited, 0, stderr);
    assert.match(stderr, /view: stopped\n$/);

    const both = await runReport([
      'view',
      '--dir',
      study,
      '--out',
      path.join(dir, 'x.html'),
      '--port',
      '0',
    ]);
    assert.deepEqual(
      [both.code, both.stderr],
      [2, 'report: --out writes the page, --port serves it: give one of them\n'],
    );
    const port = await runReport(['view', '--dir', study, '--port', 'eighty']);
    assert.deepEqual(
      [port.code, port.stderr],
      [2, 'report: --port eighty: give a port from 1 to 65535, or 0 for any free one\n'],
    );
    const empty = path.join(dir, 'empty-study');
    fs.mkdirSync(empty);
    fs.copyFileSync(path.join(REPO, 'rubric.json'), path.join(empty, 'rubric.json'));
    const none = await runReport(['view', '--dir', empty, '--out', path.join(dir, 'y.html')]);
    assert.equal(none.code, 2);
    assert.match(
      none.stderr,
      /^report: .*empty-study\/evals\/scores: no such folder; give the folder of the judge CSVs/,
    );
    const input = await runReport([
      'view',
      '--dir',
      study,
      '--out',
      path.join(study, ...SCORES, 'second.csv'),
    ]);
    assert.equal(input.code, 2);
    assert.match(
      input.stderr,
      /--out .*second\.csv is the --scores-dir file .*second\.csv, which is read/,
    );
  });
});
