// A judge that needs no server: `--judge mock/NAME`, or a `mock` entry in models.json, answers in
// process from the transcript's hash and NAME on the rubric's scale; its rows and audit lines say
// so, and the report warns of them in every format. Tested with no network at all.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import type { TestContext } from 'node:test';
import {
  csvRows,
  makeWorkspace,
  readLog,
  runMain,
  runReport,
  shippedRubricJson,
  snapshot,
} from './helpers.ts';
import type { Workspace, WorkspaceOptions } from './helpers.ts';

const NOTES = (name: string) =>
  `mock judge ${name}: made-up scores from the transcript's hash, not a judgement`;

/**
 * Runs `fn` with every way out of the process closed: fetch and a socket's connect throw, and are
 * counted. A mock judge must never reach for either.
 */
async function offline<T>(t: TestContext, fn: () => Promise<T>): Promise<T> {
  const attempts: string[] = [];
  const fetch = globalThis.fetch;
  const connect = net.Socket.prototype.connect;
  globalThis.fetch = (async (input: unknown) => {
    attempts.push(`fetch ${String(input)}`);
    throw new Error('no network in this test');
  }) as typeof fetch;
  net.Socket.prototype.connect = function (...args: unknown[]) {
    attempts.push(`connect ${JSON.stringify(args[0])}`);
    throw new Error('no network in this test');
  } as typeof connect;
  try {
    return await fn();
  } finally {
    globalThis.fetch = fetch;
    net.Socket.prototype.connect = connect;
    t.diagnostic(`network attempts: ${attempts.length}`);
    assert.deepEqual(attempts, [], 'no network');
  }
}

function workspace(t: TestContext, opts: WorkspaceOptions = {}): Workspace {
  const ws = makeWorkspace(opts);
  t.after(() => ws.remove());
  return ws;
}

/** run-judge on a workspace with no key and no server address at all. */
const judge = (ws: Workspace, args: string[]) =>
  runMain(ws.args(...args), { apiKey: null, env: { OPENAI_API_KEY: undefined } });

/** The scores of each row, by "model/task". */
function rowScores(file: string): Map<string, string> {
  return new Map(csvRows(file).map((row) => [row.key, row.record.slice(2, -1).join(',')]));
}

describe('--judge mock/NAME: answers in process, with no network', () => {
  test('every transcript scored on the rubric scale, notes saying it is a mock; no key, no request; the summary says so', async (t) => {
    const ws = workspace(t);
    const result = await offline(t, () => judge(ws, ['--judge', 'mock/alpha']));
    assert.equal(result.code, 0, result.stderr);
    assert.match(
      result.stderr,
      /judges named by --judge: mock\/alpha \(the defaults: a mock judge, made-up scores\)/,
    );
    assert.match(result.stderr, /cost \$0\.0000/);
    assert.match(result.stderr, /rows by judge: alpha 6/);
    assert.match(
      result.stderr,
      /^ {2}alpha is a mock judge: its rows are made-up scores for a rehearsal, not judgements$/m,
    );

    const rows = csvRows(ws.output);
    assert.equal(rows.length, 6);
    const allowed = shippedRubricJson().dimensions.map((d) => Object.keys(d.scores));
    for (const row of rows) {
      assert.equal(row.record.at(-1), NOTES('alpha'));
      row.record.slice(2, -1).forEach((score, i) => assert.ok(allowed[i]!.includes(score), score));
    }

    const lines = readLog(ws.log);
    assert.equal(lines.length, 6);
    for (const line of lines) {
      assert.equal(line.status, 'scored');
      assert.equal(line.judge, 'alpha');
      assert.equal(line.notes, NOTES('alpha'));
      assert.equal(line.cost_usd, 0);
      const [answer] = line.answers;
      assert.equal(answer!.provider, 'mock');
      assert.equal(answer!.family, 'mock');
      assert.match(answer!.request_id!, /^mock_[0-9a-f]{24}$/);
      assert.deepEqual(answer!.usage, { input_tokens: 0, output_tokens: 0 });
    }
  });

  test('deterministic: the same NAME gives the same scores in a new output; another NAME others', async (t) => {
    const ws = workspace(t);
    await offline(t, async () => {
      assert.equal((await judge(ws, ['--judge', 'mock/alpha'])).code, 0);
      const again = path.join(ws.dir, 'again.csv');
      assert.equal(
        (await judge(ws, ['--judge', 'mock/alpha', '--output', again, '--log', `${again}.jsonl`]))
          .code,
        0,
      );
      const other = path.join(ws.dir, 'other.csv');
      assert.equal(
        (await judge(ws, ['--judge', 'mock/beta', '--output', other, '--log', `${other}.jsonl`]))
          .code,
        0,
      );

      assert.deepEqual(rowScores(again), rowScores(ws.output));
      assert.notDeepEqual(rowScores(other), rowScores(ws.output));
    });
  });

  test('a 1-5 dimension is scored on 1-5', async (t) => {
    const rubric = shippedRubricJson();
    rubric.dimensions[0]!.scores = { '1': 'a', '2': 'b', '3': 'c', '4': 'd', '5': 'e' };
    const ws = workspace(t, { models: 4, rubricText: JSON.stringify(rubric) });
    const result = await offline(t, () => judge(ws, ['--judge', 'mock/alpha']));
    assert.equal(result.code, 0, result.stderr);
    const firsts = csvRows(ws.output).map((row) => Number(row.record[2]));
    assert.ok(
      firsts.every((score) => score >= 1 && score <= 5),
      firsts.join(','),
    );
    assert.ok(new Set(firsts).size > 1, `12 transcripts, one score: ${firsts.join(',')}`);
  });

  test('the dry-run: its prompt, and a cost of $0', async (t) => {
    const ws = workspace(t);
    const before = snapshot(ws.dir);
    const result = await offline(t, () => judge(ws, ['--dry-run', '--judge', 'mock/alpha']));
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /cost \$0: alpha is a mock judge, which calls nothing$/m);
    assert.deepEqual(snapshot(ws.dir), before);
  });

  test('--batch with a mock primary judge is refused before anything, saying why', async (t) => {
    const ws = workspace(t);
    const before = snapshot(ws.dir);
    const result = await offline(t, () => judge(ws, ['--batch', '--judge', 'mock/alpha']));
    assert.equal(result.code, 2, result.stderr);
    assert.equal(
      result.stderr,
      'run-judge: --batch: the primary judge alpha is a mock judge, which answers in process; run without --batch\n',
    );
    assert.deepEqual(snapshot(ws.dir), before);
  });
});

describe('a mock entry in models.json', () => {
  test('{"provider": "mock", "model": NAME} judges as --judge mock/NAME does', async (t) => {
    const ws = workspace(t, {
      modelsJson: { judge: { provider: 'mock', model: 'alpha' } },
    });
    const result = await offline(t, () => judge(ws, []));
    assert.equal(result.code, 0, result.stderr);
    const flagged = path.join(ws.dir, 'flag.csv');
    const named = await offline(t, () =>
      judge(ws, ['--judge', 'mock/alpha', '--output', flagged, '--log', `${flagged}.jsonl`]),
    );
    assert.equal(named.code, 0, named.stderr);
    assert.match(named.stderr, /mock\/alpha \(its entry in /);
    assert.deepEqual(rowScores(flagged), rowScores(ws.output));
  });

  test('a key that means nothing to a mock judge is refused, naming it', async (t) => {
    const ws = workspace(t, {
      modelsJson: { judge: { provider: 'mock', model: 'alpha', max_tokens: 100 } },
    });
    const result = await offline(t, () => judge(ws, []));
    assert.equal(result.code, 2, result.stderr);
    assert.match(
      result.stderr,
      /judge\.max_tokens: is not for a mock judge: it answers in process and calls nothing/,
    );
  });

  test('an entry of a real provider still needs max_tokens', async (t) => {
    const ws = workspace(t, {
      modelsJson: {
        judge: { provider: 'anthropic', model: 'x', api_key_env: 'ANTHROPIC_API_KEY' },
      },
    });
    const result = await runMain(ws.args('--dry-run'));
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /judge\.max_tokens: is required/);
  });
});

describe('the report warns of rows from a mock judge, in every format', () => {
  const reportArgs = (ws: Workspace, ...extra: string[]) => [
    ...['--scores', ws.output, '--log', ws.log, '--human-scores', ws.humanScores],
    ...['--rubric', ws.rubric, '--transcripts', ws.transcripts, '--tasks', ws.tasks],
    ...['--reference-keys', ws.referenceKeys, '--models', ws.models],
    ...extra,
  ];
  const warning =
    '6 of the 6 row(s) of judge judge_scores come from a mock judge: made-up scores, not ' +
    'judgements; these figures rehearse the protocol and measure nothing';

  test('text, Markdown, LaTeX, JSON and the page each say it first; stderr too', async (t) => {
    const ws = workspace(t);
    assert.equal((await offline(t, () => judge(ws, ['--judge', 'mock/alpha']))).code, 0);

    const text = await runReport(reportArgs(ws));
    assert.equal(text.code, 0, text.stderr);
    assert.ok(text.stdout.startsWith(`warning: ${warning}\n\n`), text.stdout.slice(0, 300));
    assert.ok(text.stderr.includes(`report: warning: ${warning}\n`), text.stderr);

    const markdown = await runReport(reportArgs(ws, '--format', 'markdown'));
    assert.ok(markdown.stdout.startsWith(`> **Warning:** ${warning}\n\n`));

    const latex = await runReport(reportArgs(ws, '--format', 'latex'));
    assert.ok(
      latex.stdout.startsWith(
        '\\noindent\\textbf{Warning:} 6 of the 6 row(s) of judge judge\\_scores',
      ),
    );

    const json = await runReport(reportArgs(ws, '--format', 'json'));
    assert.equal(JSON.parse(json.stdout).warning, warning);

    const page = path.join(ws.dir, 'report.html');
    const html = await runReport(reportArgs(ws, '--html', page));
    assert.equal(html.code, 0, html.stderr);
    const body = fs.readFileSync(page, 'utf8');
    assert.match(
      body,
      /<h1>[^<]*<\/h1>\n<p class="warning" role="alert"[^>]*><strong>Warning:<\/strong> 6 of the 6 row/,
    );
  });

  test('rows of a real judge: no warning in any format', async (t) => {
    const ws = workspace(t);
    assert.equal((await offline(t, () => judge(ws, ['--judge', 'mock/alpha']))).code, 0);
    // the same rows, as if a real judge had written these notes
    const csv = fs.readFileSync(ws.output, 'utf8').replaceAll(NOTES('alpha'), 'fine tutoring');
    fs.writeFileSync(ws.output, csv);
    for (const format of ['table', 'markdown', 'latex', 'json']) {
      const result = await runReport(reportArgs(ws, '--format', format));
      assert.equal(result.code, 0, result.stderr);
      assert.doesNotMatch(result.stdout + result.stderr, /mock judge|"warning"/, format);
    }
  });
});
