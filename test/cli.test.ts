// The command line as a user meets it: dry-run, exit statuses, concurrency, what is printed where, --help and Ctrl-C.
// `main` runs in-process against the loopback fake; a real process only where it is the point: signals that must
// reach one (or exit it at once), npm's flag handling, the bin, and a script importing run-judge.ts.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { EventEmitter } from 'node:events';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import type { TestContext } from 'node:test';
import {
  DEAD_BASE_URL,
  EXPECTED_HEADER,
  REPO,
  SCRIPT,
  TSX_LOADER,
  bundled,
  csvRows,
  delay,
  hold,
  judgeEntry,
  readCsv,
  readLog,
  rowCount,
  route,
  runEnv,
  runMain,
  setup,
  shippedRubricJson,
  snapshot,
  startFake,
  tagOf,
  tempDir,
  waitFor,
  writeJson,
  allKeys,
  wellFormedCsv,
} from './helpers.ts';
import type { MainOptions, MainResult, Workspace, WorkspaceOptions } from './helpers.ts';
import type { RecordedRequest, Reply } from '../fakes/anthropic.ts';
import type { Clock, ReferenceKey, Task } from '../run-judge.ts';

// Destructured, not imported by name: a renamed export then fails its own tests, not the whole file.
const {
  buildJudgePrompt,
  guardOutputStreams,
  isEntryModule,
  loadJson,
  loadRubric,
  loadTranscript,
  systemClock,
} = await import('../run-judge.ts');

/** The warnings this process emits during the test (in-process, a listener leak is a MaxListenersExceededWarning). */
function warningsDuring(t: TestContext): string[] {
  const warnings: string[] = [];
  const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`);
  process.on('warning', onWarning);
  t.after(() => process.off('warning', onWarning));
  return warnings;
}

const modelOf = (req: RecordedRequest) => req.body?.model as string;
const apiError = (status: number, type: string, message: string): Reply => ({
  kind: 'error',
  status,
  type,
  message,
});
const rateLimited = (retryAfter: string): Reply => ({
  kind: 'error',
  status: 429,
  type: 'rate_limit_error',
  message: 'Number of requests has exceeded your per-minute rate limit',
  headers: { 'retry-after': retryAfter },
});
const lines = (text: string) => text.split('\n');
/** Any control character but the line feed that ends each line: a line run-judge prints must stay one line. */
const RAW_CONTROL = /[\x00-\x09\x0b-\x1f\x7f\u0085\u2028\u2029]/;
/** The summary's first line, e.g. `6 selected: 5 scored, 0 skipped (already in x.csv), 1 failed; tokens in 500 (...`. */
const summaryLine = (scored: number, failed: number, selected = 6) =>
  new RegExp(
    `^${selected} selected: ${scored} scored, 0 skipped \\(already in .+\\), ${failed} failed; ` +
      'tokens in \\d+ \\(uncached \\d+, cache write \\d+, cache read \\d+\\), out \\d+; cost (\\$\\d+\\.\\d{4}|unknown .*); wall time \\d+\\.\\d\\d s$',
    'm',
  );

/** Runs `main` with cwd = the repository and no paths given, as `npx tsx run-judge.ts ...` does there. */
async function runInRepo(t: TestContext, args: string[], opts: MainOptions): Promise<MainResult> {
  const cwd = process.cwd();
  process.chdir(REPO);
  t.after(() => process.chdir(cwd));
  return runMain(args, opts);
}

// ---------------------------------------------------------------------------------------------
describe("dry-run: an estimate of the run's input tokens and cost, with and without --batch", () => {
  const estimateOf = (stderr: string) => {
    const line = lines(stderr).find((candidate) => candidate.startsWith('dry-run estimate'))!;
    const [, tokens, count, input, ceiling, halfInput, halfCeiling] =
      /~(\d+) input tokens for (\d+) transcript.*list price \$([\d.]+) for the input, at most \$([\d.]+) .*half: \$([\d.]+), at most \$([\d.]+)$/.exec(
        line,
      ) ?? [];
    return {
      line,
      tokens: Number(tokens),
      count: Number(count),
      input,
      ceiling,
      halfInput,
      halfCeiling,
    };
  };
  const price = { input: 5, output: 25 };

  test('the prompts of the transcripts without a row, at ~4 characters a token; at most: every answer at max_tokens', async (t) => {
    const { fake, ws, run } = await setup(
      t,
      {},
      { judge: judgeEntry('judge-a', { price_usd_per_mtok: price }) },
    );
    assert.equal((await run(['--task', 'proof01'])).code, 0); // two of six now have a row
    const result = await run(['--dry-run']);
    const estimate = estimateOf(result.stderr);
    assert.equal(estimate.count, 4, estimate.line);
    assert.ok(estimate.tokens > 1000 && estimate.tokens < 40_000, estimate.line);
    const input = (estimate.tokens * price.input) / 1e6;
    assert.equal(estimate.input, input.toFixed(4));
    assert.equal(
      estimate.ceiling,
      (input + (4 * 512 * price.output) / 1e6).toFixed(4),
      'max_tokens 512 each',
    );
    assert.equal(estimate.halfInput, (input / 2).toFixed(4));
    assert.equal(estimate.halfCeiling, ((input + (4 * 512 * price.output) / 1e6) / 2).toFixed(4));
    assert.match(estimate.line, /^dry-run estimate, not a quote: /);
    assert.equal(fake.requests.length, 2, 'the dry-run sent nothing');
  });

  test('every row exists: the dry-run says a run would judge none, not "~0 input tokens for 0"; --samples 3 names --rescore', async (t) => {
    const { ws, run } = await setup(t);
    assert.equal((await run()).code, 0);
    const result = await run(['--dry-run']);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(
      result.stderr,
      `dry-run: 6 transcript(s) selected, 6 already scored in ${ws.output}; ` +
        'printed the prompt for m01/proof01; nothing was sent or written\n' +
        'dry-run: a run would judge none: every selected transcript has a row; --rescore would judge them again\n',
    );
    const samples = await run(['--dry-run', '--samples', '3']);
    assert.match(samples.stderr, /--rescore would judge them again with 3 samples\n$/);
  });

  test('a run with --samples 3 on an already-scored CSV says --rescore would judge them again with 3 samples', async (t) => {
    const { fake, run } = await setup(t);
    assert.equal((await run()).code, 0);
    const result = await run(['--samples', '3']);
    assert.equal(result.code, 0, result.stderr);
    assert.match(
      result.stderr,
      /skipping 6 transcript\(s\) already scored in .+ \(use --rescore to judge them again with 3 samples\)/,
    );
    assert.equal(fake.requests.length, 6, 'nothing judged again');
  });

  test('--batch --dry-run estimates the requests it would batch; a judge without a price gets tokens only', async (t) => {
    const { run } = await setup(t);
    const result = await run(['--dry-run', '--batch']);
    assert.equal(result.code, 0, result.stderr);
    assert.match(
      result.stderr,
      /^dry-run estimate: ~\d+ input tokens for 6 transcript\(s\) .*judge-a has no price_usd_per_mtok/m,
    );
  });

  test('--limit counts in the dry-run too, with or without --batch', async (t) => {
    const { run } = await setup(t);
    for (const args of [
      ['--dry-run', '--limit', '2'],
      ['--dry-run', '--batch', '--limit', '2'],
    ]) {
      const result = await run(args);
      assert.match(
        result.stderr,
        /^dry-run estimate: ~\d+ input tokens for 2 transcript\(s\)/m,
        args.join(' '),
      );
    }
    assert.match(
      (await run(['--dry-run', '--batch', '--limit', '2'])).stderr,
      /would send 2 request\(s\) in 1 batch/,
    );
  });
});

// ---------------------------------------------------------------------------------------------
describe('dry-run: one prompt on stdout, nothing sent, nothing written, no key needed', () => {
  test('the shipped data: exactly the prompt buildJudgePrompt makes; no request; nothing under evals/ or the repo root', async (t) => {
    const fake = await startFake(t);
    const scoresDir = path.join(REPO, 'evals/scores');
    const hadScores = fs.existsSync(scoresDir);
    const evalsBefore = snapshot(path.join(REPO, 'evals'));
    const rootBefore = fs.readdirSync(REPO).sort();

    const result = await runInRepo(t, ['--dry-run', '--task', 'proof01', '--model', 'stub'], {
      baseUrl: fake.url,
      apiKey: null,
    });

    assert.equal(result.code, 0, result.stderr);
    const expected = buildJudgePrompt(
      loadJson(path.join(REPO, 'evals/tasks/proof01.json')) as Task,
      loadJson(path.join(REPO, 'evals/reference_keys/proof01.json')) as ReferenceKey,
      loadTranscript({
        task_id: 'proof01',
        model: 'stub',
        path: path.join(REPO, 'evals/transcripts/stub/proof01.json'),
      }),
      loadRubric(path.join(REPO, 'rubric.json')),
    );
    assert.equal(result.stdout, `${expected}\n`);
    assert.equal(result.stdout.split('You are an expert evaluator').length - 1, 1, 'one prompt');
    assert.match(result.stdout, /Task ID: proof01\n/);
    assert.match(result.stdout, /Student: I need to prove sqrt\(2\) is irrational/);
    assert.match(result.stderr, /1 transcript\(s\) selected/);
    assert.equal(fake.requests.length, 0);
    assert.equal(fs.existsSync(scoresDir), hadScores, 'evals/scores neither created nor removed');
    assert.deepEqual(
      snapshot(path.join(REPO, 'evals')),
      evalsBefore,
      'nothing under evals/ changed',
    );
    assert.deepEqual(
      fs.readdirSync(REPO).sort(),
      rootBefore,
      'no output, log, lock or temp file at the repo root',
    );
  });

  test('with explicit paths, nothing is written into the workspace (no CSV, log or lock)', async (t) => {
    const { fake, ws, run } = await setup(t);
    const before = snapshot(ws.dir);
    const result = await run(['--dry-run', '--task', 'proof02', '--model', 'm02'], {
      apiKey: null,
    });
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /test-tag m02\/proof02/);
    assert.equal(fake.requests.length, 0);
    assert.deepEqual(snapshot(ws.dir), before);
    assert.equal(fs.existsSync(path.dirname(ws.output)), false);
  });

  test('a numeric temperature in models.json does not stop it (nothing is called)', async (t) => {
    const { fake, run } = await setup(
      t,
      {},
      { judge: judgeEntry('judge-a', { temperature: 0.5 }) },
    );
    const result = await run(['--dry-run', '--task', 'proof03', '--model', 'm01'], {
      apiKey: null,
    });
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /Task ID: proof03\n/);
    assert.equal(fake.requests.length, 0);
  });

  test('filters that match nothing exit 2, list the models and tasks that exist, and print no prompt', async (t) => {
    const { fake, run } = await setup(t);
    const result = await run(['--dry-run', '--model', 'stub'], { apiKey: null });
    assert.equal(result.code, 2);
    assert.equal(result.stdout, '');
    assert.match(
      result.stderr,
      /--model stub.*models \(folders\): m01, m02; tasks: proof01, proof02, proof03/,
    );
    assert.equal(fake.requests.length, 0);
  });

  const several: [string, string[], number, string][] = [
    ['no filter', [], 6, 'm01/proof01'],
    ['--task proof02 (two models)', ['--task', 'proof02'], 2, 'm01/proof02'],
  ];
  for (const [label, filters, count, first] of several) {
    test(`several selected (${label}): only the first in sorted order is printed, and the count is said`, async (t) => {
      const { fake, run } = await setup(t);
      const result = await run(['--dry-run', ...filters], { apiKey: null });
      assert.equal(result.code, 0, result.stderr);
      assert.equal(
        result.stdout.split('You are an expert evaluator').length - 1,
        1,
        'one prompt only',
      );
      assert.match(result.stdout, new RegExp(`test-tag ${first}\n`));
      assert.match(
        result.stderr,
        new RegExp(`\\b${count} transcript\\(s\\) selected; printed the prompt for ${first}`),
      );
      assert.equal(fake.requests.length, 0);
    });
  }
});

// ---------------------------------------------------------------------------------------------
describe('exit status 0: every selected transcript has a row', () => {
  test('one complete row each from the primary judge, no sampling parameter, stdout empty, lock removed', async (t) => {
    const { fake, ws, run } = await setup(t);
    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout, '');
    assert.deepEqual(wellFormedCsv(ws.output), allKeys(ws));
    assert.equal(fake.requests.length, 6);
    assert.ok(fake.requests.every((req) => modelOf(req) === 'judge-a'));
    assert.ok(
      fake.requests.every((req) => req.body.max_tokens === 512 && !('temperature' in req.body)),
    );
    for (const { record } of csvRows(ws.output))
      assert.deepEqual(record.slice(2, 8), ['2', '2', '2', '2', '2', '2']);
    assert.match(result.stderr, summaryLine(6, 0));
    assert.equal(fs.existsSync(`${ws.output}.lock`), false, 'lock removed after the run');
  });

  test('defaultLog: the default CSV, however written, keeps the default log; another CSV its own', async () => {
    const { DEFAULTS, defaultLog } = await import('../run-judge.ts');
    assert.equal(defaultLog(DEFAULTS.output), DEFAULTS.log);
    assert.equal(defaultLog(path.resolve(DEFAULTS.output)), DEFAULTS.log);
    assert.equal(defaultLog(`./${DEFAULTS.output}`), DEFAULTS.log);
    assert.equal(defaultLog('evals/scores/sonnet.csv'), path.join('evals/scores', 'sonnet.jsonl'));
  });

  test('without --log, a CSV of its own gets a log of its own beside it, where report.ts looks', async (t) => {
    const { fake, ws } = await setup(t);
    const sonnetCsv = path.join(path.dirname(ws.output), 'sonnet.csv');
    const args = ws.args('--output', sonnetCsv);
    args.splice(args.indexOf('--log'), 2);

    const result = await runMain(args, { baseUrl: fake.url });

    assert.equal(result.code, 0, result.stderr);
    assert.equal(readLog(path.join(path.dirname(ws.output), 'sonnet.jsonl')).length, 6);
    assert.equal(fs.existsSync(ws.log), false, "the default CSV's log is not shared");
  });
});

describe('--limit: a trial judges at most n of the selected transcripts without a row, in sorted order', () => {
  test('--limit 2 twice: the first two, then the next two; each run says how many wait; exit 0', async (t) => {
    const { fake, ws, run } = await setup(t);
    const first = await run(['--limit', '2', '--concurrency', '1']);
    assert.equal(first.code, 0, first.stderr);
    assert.deepEqual(wellFormedCsv(ws.output), allKeys(ws).slice(0, 2));
    assert.match(first.stderr, /--limit 2: judging 2 transcript\(s\); 4 wait for a later run/);
    const second = await run(['--limit', '2']);
    assert.deepEqual(wellFormedCsv(ws.output).sort(), allKeys(ws).slice(0, 4));
    assert.match(
      second.stderr,
      /skipping 2 transcript\(s\).*\n--limit 2: judging 2 transcript\(s\); 2 wait/,
    );
    assert.equal(fake.requests.length, 4);
  });

  test('--rescore --limit 1 replaces only the first row, in its place; the other rows stay', async (t) => {
    const { fake, ws, run } = await setup(t);
    assert.equal((await run()).code, 0);
    const before = csvRows(ws.output).map((row) => row.key);
    const result = await run(['--rescore', '--limit', '1']);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /--rescore: judging 1 scored transcript\(s\) again/);
    assert.equal(fake.requests.length, 7);
    assert.deepEqual(
      csvRows(ws.output).map((row) => row.key),
      before,
    );
  });
});

describe('transcripts that will fail, or will not be found, are said once', () => {
  test('a malformed transcript and a copied one (metadata.model disagrees): each fails without a call, saying why', async (t) => {
    const { fake, ws, run } = await setup(t);
    fs.writeFileSync(path.join(ws.transcripts, 'm01', 'proof02.json'), '{"messages": [');
    const copied = path.join(ws.transcripts, 'm02', 'proof03.json');
    fs.copyFileSync(path.join(ws.transcripts, 'm01', 'proof03.json'), copied);
    const result = await run(['--concurrency', '1']);
    assert.equal(result.code, 1, result.stderr);
    const failed = lines(result.stderr).filter((line) => line.startsWith('failed '));
    assert.equal(failed.length, 2, result.stderr);
    assert.match(failed[0]!, /^failed m01\/proof02: .*m01\/proof02\.json: invalid JSON/);
    assert.ok(failed[1]!.includes(`${copied}: metadata.model is "m01" but the path says "m02"`));
    assert.equal(fake.requests.length, 4, 'no call for either');
  });

  const misplaced: [string, (ws: Workspace) => string][] = [
    ['directly in the folder', (ws) => path.join(ws.transcripts, 'proof01.json')],
    ['two levels down', (ws) => path.join(ws.transcripts, 'm01', 'old', 'proof01.json')],
  ];
  for (const [label, where] of misplaced) {
    test(`only .json files ${label}: exit 2 showing the expected {model}/{task_id}.json and what was found`, async (t) => {
      const { fake, ws } = await setup(t);
      const found = where(ws);
      fs.rmSync(ws.transcripts, { recursive: true });
      fs.mkdirSync(path.dirname(found), { recursive: true });
      fs.writeFileSync(found, '{}');
      const result = await runMain(ws.args(), { baseUrl: fake.url });
      assert.equal(result.code, 2, result.stderr);
      const expected = path.join(ws.transcripts, '{model}', '{task_id}.json');
      assert.ok(
        result.stderr.includes(`no transcript at ${expected}; found ${found} instead`),
        result.stderr,
      );
    });

    test(`a .json file ${label} beside real transcripts: judged as usual, with one note naming it`, async (t) => {
      const { ws, run } = await setup(t);
      const found = where(ws);
      fs.mkdirSync(path.dirname(found), { recursive: true });
      fs.writeFileSync(found, '{}');
      const result = await run();
      assert.equal(result.code, 0, result.stderr);
      assert.ok(
        result.stderr.includes(`note: ${found} is not judged: transcripts are found at `),
        result.stderr,
      );
    });
  }

  test('a relative transcripts folder that does not exist: the message says paths are relative to the current folder, and what to do', async (t) => {
    const { ws } = await setup(t);
    const result = await runMain(ws.args('--transcripts', 'no/such/folder'));
    assert.equal(result.code, 2, result.stderr);
    assert.ok(
      result.stderr.includes(
        `no/such/folder: transcripts folder not found (paths are relative to the current folder, ${process.cwd()}: ` +
          'run from the project folder, or pass --dir STUDY)',
      ),
    );
  });

  test('run from another folder: the default rubric.json is not found, and the message says to run from the project folder or pass --dir', async (t) => {
    const cwd = process.cwd();
    process.chdir(tempDir(t));
    t.after(() => process.chdir(cwd));
    const result = await runMain(['--dry-run']);
    assert.equal(result.code, 2, result.stderr);
    assert.equal(
      result.stderr,
      `run-judge: rubric.json: file not found (paths are relative to the current folder, ${process.cwd()}: ` +
        'run from the project folder, or pass --dir STUDY)\n',
    );
  });
});

describe('progress in a CI log (stderr not a terminal) and the summary', () => {
  test('30 transcripts: a plain progress line at each 10% of the work, ending at 30/30; no control characters', async (t) => {
    const { run } = await setup(t, {}, { models: 10 });
    const result = await run(['--concurrency', '1']);
    assert.equal(result.code, 0, result.stderr);
    const progress = lines(result.stderr).filter((line) => line.startsWith('progress: '));
    assert.deepEqual(
      progress.map((line) => Number(/judged (\d+)\/30/.exec(line)?.[1])),
      [3, 6, 9, 12, 15, 18, 21, 24, 27, 30],
    );
    for (const line of progress)
      assert.match(line, /^progress: judged \d+\/30, failed 0, ([\d.]+|\?)\/s, ETA (\d+ s|\?)$/);
    assert.doesNotMatch(result.stderr, /\x1b|\r/);
  });

  test('a judgement taking longer than 10 s: a plain progress line every 10 s meanwhile (the clock mocked)', async (t) => {
    t.mock.timers.enable({ apis: ['setInterval'] }); // the ticker's clock only
    const answer = hold(); // the judgement stays in flight until the ticker has ticked
    const { fake, run } = await setup(t, {
      responder: () => ({ text: fake.validAnswer(), until: answer.until }),
    });
    const pending = run(['--task', 'proof01', '--model', 'm01']);
    await waitFor(() => fake.requests.length === 1, 10_000, 'the request');
    t.mock.timers.tick(20_000);
    answer.release();
    const result = await pending;
    assert.equal(result.code, 0, result.stderr);
    const ticks = lines(result.stderr).filter((line) => line.startsWith('progress: judged 0/1'));
    assert.equal(ticks.length, 2, result.stderr);
  });

  test('on a terminal, while nothing finishes (a wait for rate limits, a slow answer), the line is drawn again each second, its ETA counting the wait', async (t) => {
    t.mock.timers.enable({ apis: ['setInterval'] }); // the redraw's ticker only
    let offset = 0; // how far the run's clock is moved on
    const clock: Clock = {
      now: () => Date.now() + offset,
      sleep: (ms, signal) => new Promise((resolve) => setTimeout(resolve, ms, signal)),
    };
    const third = hold();
    const { fake, run } = await setup(t, {
      clock,
      responder: (_req, index) => ({
        text: fake.validAnswer(),
        until: index === 2 ? third.until : undefined,
      }),
    });
    const pending = run(['--model', 'm01', '--concurrency', '1'], { isTTY: true, clock });
    await waitFor(() => fake.requests.length === 3, 10_000, 'the third request');
    offset += 60_000; // a minute with nothing finished
    t.mock.timers.tick(1000);
    third.release();
    const result = await pending;
    assert.equal(result.code, 0, result.stderr);
    const drawn = result.stderr.split('\r\x1b[2K').filter((line) => line.startsWith('judged 2/3'));
    const etas = drawn.map((line) => Number(/ETA (\d+) s/.exec(line)?.[1] ?? NaN));
    assert.ok(
      etas.some((eta) => eta >= 20),
      `after a minute without an answer the ETA is at least 20 s: ${JSON.stringify(drawn)}`,
    );
  });

  test('the summary names the judges that scored rows and how many, a fallback judge named as such', async (t) => {
    const { run } = await setup(t, {
      responder: (req) =>
        tagOf(req) === 'm01/proof02' && modelOf(req) === 'judge-a'
          ? { text: 'no JSON' }
          : undefined,
    });
    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    assert.ok(
      result.stderr.includes('\n  rows by judge: judge-a 5, judge-b 1 (fallback)\n'),
      result.stderr,
    );
  });
});

describe('the count of what is left, and what to run, after a Ctrl-C (in-process)', () => {
  /** Runs with `args` and a Ctrl-C once its second request is sent, that answer held until then. */
  async function interrupted(
    t: TestContext,
    args: string[],
    before: (run: Run) => Promise<unknown>,
  ) {
    const second = hold();
    let start = Infinity;
    const { fake, run } = await setup(t, {
      responder: (_, index) => ({
        text: fake.validAnswer(),
        until: index === start + 1 ? second.until : undefined,
      }),
    });
    await before(run);
    start = fake.requests.length;
    const pending = run([...args, '--concurrency', '1']);
    await waitFor(() => fake.requests.length >= start + 2, 10_000, 'the second request');
    process.emit('SIGINT', 'SIGINT');
    second.release();
    return pending;
  }
  type Run = (args?: string[]) => Promise<MainResult>;

  test('--limit 4 stopped after 2: 2 are left, not the 2 more --limit deferred on purpose', async (t) => {
    const result = await interrupted(t, ['--limit', '4'], async () => {});
    assert.equal(result.code, 130, result.stderr);
    assert.match(
      result.stderr,
      /^interrupted: 6 selected: 2 scored/m,
      'the one in flight was finished',
    );
    assert.match(
      result.stderr,
      /\n {2}2 transcript\(s\) left without a row: run the same command again to continue\n/,
    );
  });

  test('--rescore stopped after 2: the 4 not judged again keep their old row, and the summary says so', async (t) => {
    const result = await interrupted(t, ['--rescore'], (run) => run());
    assert.equal(result.code, 130, result.stderr);
    assert.match(result.stderr, /^interrupted: 6 selected: 2 scored/m);
    assert.match(
      result.stderr,
      /\n {2}--rescore: 4 transcript\(s\) kept their old row in .+, not judged again \(failed or not reached\): m01\/proof03, m02\/proof01, m02\/proof02, m02\/proof03\n/,
    );
    assert.doesNotMatch(result.stderr, /left without a row/);
  });
});

describe('progress and usage: what the run counts', () => {
  test('a failed transcript is counted at once: the last progress line says 3/3 when all three fail', async (t) => {
    const { run } = await setup(t, { responder: () => ({ text: 'not JSON' }) }, { fallbacks: [] });
    const result = await run(['--model', 'm01']);
    assert.equal(result.code, 1, result.stderr);
    const last = lines(result.stderr)
      .filter((line) => line.startsWith('progress: '))
      .at(-1);
    assert.match(last ?? '', /^progress: judged 3\/3, failed 3, /);
  });

  test('usage counts that are not non-negative integers (strings, -1, 1.5): unreadable, left out of the totals and said so, kept raw', async (t) => {
    const usage = { input_tokens: '100', output_tokens: -1, cache_read_input_tokens: 1.5 };
    const { fake, ws, run } = await setup(t, {
      responder: () => ({ text: fake.validAnswer(), usage: usage as never }),
    });
    const result = await run(['--model', 'm01']);
    assert.equal(result.code, 0, result.stderr);
    assert.match(
      result.stderr,
      /tokens \(not counting 3 answer\(s\) whose usage was unreadable\) in 0 \(uncached 0, cache write 0, cache read 0\), out 0;/,
    );
    const [answer] = readLog(ws.log)[0]!.answers;
    assert.equal(answer!.usage, null);
    assert.deepEqual(answer!.usage_raw, usage);
  });
});

describe('--version, and the bin `npx run-judge` runs', () => {
  const { version, bin } = JSON.parse(fs.readFileSync(path.join(REPO, 'package.json'), 'utf8'));

  test("--version prints package.json's version on stdout and exits 0", async () => {
    const result = await runMain(['--version']);
    assert.deepEqual([result.code, result.stdout, result.stderr], [0, `${version}\n`, '']);
  });

  test("package.json's bin (what `npx run-judge` runs from a checkout) runs run-judge.ts in one process", () => {
    const result = spawnSync(process.execPath, [path.join(REPO, bin['run-judge']), '--version'], {
      encoding: 'utf8',
    });
    assert.deepEqual([result.status, result.stdout, result.stderr], [0, `${version}\n`, '']);
  });
});

// ---------------------------------------------------------------------------------------------
describe("npm's own flags: a flag of ours that npm took (no `--`) stops the run before anything, exit 2", () => {
  /**
   * A package whose scripts run both tools, as this project's package.json does; as plain node on their bundles (what
   * is under test is what npm hands the script, not tsx's start-up).
   */
  function npmPackage(t: TestContext): string {
    const dir = tempDir(t, 'rj-npm-');
    const run = (file: string) => `node ${bundled(file).main}`;
    const scripts = { judge: run(SCRIPT), report: run(path.join(REPO, 'report.ts')) };
    writeJson(path.join(dir, 'package.json'), { name: 'npm-flags', version: '1.0.0', scripts });
    return dir;
  }
  const npm = (dir: string, args: string[]) =>
    spawnSync('npm', ['run', ...args], { cwd: dir, encoding: 'utf8', env: runEnv() });

  test('`--dry-run` taken by npm: no request, nothing written, one line saying `npm run judge -- --dry-run`', async (t) => {
    const { fake, ws, run } = await setup(t);
    const before = snapshot(ws.dir);
    const env = { npm_lifecycle_event: 'judge', npm_config_dry_run: 'true' };
    const result = await run([], { env });
    assert.equal(result.code, 2, result.stderr);
    assert.equal(
      result.stderr,
      'run-judge: npm took --dry-run for itself, so this script never saw it; ' +
        "put -- before the script's flags: npm run judge -- --dry-run\n",
    );
    assert.equal(fake.requests.length, 0);
    assert.deepEqual(snapshot(ws.dir), before);
  });

  test('every flag it took is named with its argument, --no-fallback too', async (t) => {
    const { fake, run } = await setup(t);
    const env = {
      npm_lifecycle_event: 'judge',
      npm_config_task: 'true',
      npm_config_fallback: '',
      npm_config_concurrency: 'true',
    };
    const result = await run([], { env });
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /npm took --task, --concurrency, --no-fallback for itself/);
    assert.match(result.stderr, /npm run judge -- --task <id> --concurrency <n> --no-fallback\n$/);
    assert.equal(fake.requests.length, 0);
  });

  test('the same variables outside npm (no npm_lifecycle_event) are not flags: the run goes on', async (t) => {
    const { run } = await setup(t);
    const env = { npm_lifecycle_event: undefined, npm_config_task: 'true' }; // `npm test` sets the first
    const result = await run(['--dry-run'], { env });
    assert.equal(result.code, 0, result.stderr);
  });

  test("real npm: `npm run judge --dry-run` is refused; with `--`, the dry-run runs (npm's own variables are not ours)", (t) => {
    const dir = npmPackage(t);
    const swallowed = npm(dir, ['judge', '--dry-run', '--task', 'proof01']);
    assert.equal(swallowed.status, 2, swallowed.stderr);
    assert.match(swallowed.stderr, /npm run judge -- --task <id> --dry-run\n/);
    assert.ok(!fs.existsSync(path.join(dir, 'evals')), 'nothing written');

    const passed = npm(dir, ['judge', '--', '--dry-run', '--task', 'proof01', '--model', 'stub']);
    assert.equal(passed.status, 2, passed.stderr);
    assert.match(passed.stderr, /rubric\.json: file not found/, 'the flags reached the script');
    assert.doesNotMatch(passed.stderr, /npm took/);
  });

  test('real npm: report.ts refuses the same way (`npm run report --scores x.csv`)', (t) => {
    const dir = npmPackage(t);
    const swallowed = npm(dir, ['report', '--scores', 'x.csv']);
    assert.equal(swallowed.status, 2, swallowed.stderr);
    assert.match(
      swallowed.stderr,
      /report: npm took --scores for itself.*npm run report -- --scores <file>\n/,
    );
  });
});

// ---------------------------------------------------------------------------------------------
describe('exit status 1: some transcripts failed, the others were judged and written', () => {
  test('a transcript unusable from every judge fails; the five others get rows', async (t) => {
    const { fake, ws, run } = await setup(t, {
      responder: (req) =>
        tagOf(req) === 'm02/proof02' ? { text: `prose from ${modelOf(req)}` } : undefined,
    });
    const result = await run();
    assert.equal(result.code, 1, result.stderr);
    assert.deepEqual(
      wellFormedCsv(ws.output),
      allKeys(ws).filter((key) => key !== 'm02/proof02'),
    );
    assert.match(
      result.stderr,
      /^failed m02\/proof02: all 2 judges failed: \(1\) .*judge-a.*\(2\) .*judge-b/m,
    );
    assert.match(result.stderr, summaryLine(5, 1));
    const failing = fake.requests.filter((req) => tagOf(req) === 'm02/proof02').map(modelOf);
    assert.deepEqual(failing, ['judge-a', 'judge-b']);
    const entry = readLog(ws.log).find((e) => e.model === 'm02' && e.task_id === 'proof02')!;
    assert.equal(entry.status, 'failed');
    assert.equal(entry.judge, null);
    assert.deepEqual(
      entry.attempts.map((a) => [a.judge, a.error, a.status]),
      [
        ['judge-a', 'EvalJudgeResponseError', null],
        ['judge-b', 'EvalJudgeResponseError', null],
      ],
    );
    assert.deepEqual(
      entry.answers.map((a) => a.text),
      ['prose from judge-a', 'prose from judge-b'],
    );
    assert.equal(entry.error?.class, 'EvalJudgesExhaustedError');
  });

  test('a failed transcript is judged again on the next run, and only it', async (t) => {
    let broken = true;
    const { fake, ws, run } = await setup(t, {
      responder: (req) =>
        broken && tagOf(req) === 'm01/proof03'
          ? apiError(500, 'api_error', 'Internal server error')
          : undefined,
    });
    assert.equal((await run()).code, 1);
    assert.equal(rowCount(ws.output), 5);
    broken = false;
    const before = fake.requests.length;
    const result = await run();
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(fake.requests.slice(before).map(tagOf), ['m01/proof03']);
    assert.deepEqual(wellFormedCsv(ws.output), allKeys(ws));
  });

  test('metadata that disagrees with the path fails that transcript, naming the file and both values; no request for it', async (t) => {
    const { fake, ws, run } = await setup(t);
    const file = path.join(ws.transcripts, 'm01', 'proof02.json');
    const transcript = JSON.parse(fs.readFileSync(file, 'utf8'));
    transcript.metadata.model = 'someone-else';
    fs.writeFileSync(file, JSON.stringify(transcript));
    const result = await run();
    assert.equal(result.code, 1, result.stderr);
    assert.ok(
      result.stderr.includes(`${file}: metadata.model is "someone-else" but the path says "m01"`),
      result.stderr,
    );
    assert.equal(fake.requests.filter((req) => tagOf(req) === 'm01/proof02').length, 0);
    assert.equal(rowCount(ws.output), 5);
  });

  test('a 400 on one transcript stops its chain (no fallback judge) but not the run', async (t) => {
    const { fake, ws, run } = await setup(t, {
      responder: (req) =>
        tagOf(req) === 'm01/proof01'
          ? apiError(400, 'invalid_request_error', 'prompt is too long')
          : undefined,
    });
    const result = await run();
    assert.equal(result.code, 1, result.stderr);
    assert.deepEqual(fake.requests.filter((req) => tagOf(req) === 'm01/proof01').map(modelOf), [
      'judge-a',
    ]);
    assert.equal(fake.requests.length, 6);
    assert.match(
      result.stderr,
      /failed m01\/proof01: judge judge-a: HTTP 400 invalid_request_error: prompt is too long/,
    );
    assert.equal(rowCount(ws.output), 5);
    assert.equal(
      readLog(ws.log).find((e) => e.status === 'failed')?.error?.class,
      'EvalInputError',
    );
  });

  test('a transcript whose task file is missing fails naming the file; the others are scored', async (t) => {
    const { fake, ws, run } = await setup(t);
    const file = path.join(ws.transcripts, 'm01', 'proof04.json');
    const transcript = JSON.parse(
      fs.readFileSync(path.join(ws.transcripts, 'm01', 'proof01.json'), 'utf8'),
    );
    delete transcript.metadata;
    fs.writeFileSync(file, JSON.stringify(transcript));
    const result = await run();
    assert.equal(result.code, 1, result.stderr);
    assert.ok(
      result.stderr.includes(
        `failed m01/proof04: ${path.join(ws.tasks, 'proof04.json')}: file not found`,
      ),
    );
    assert.equal(fake.requests.length, 6);
    assert.equal(rowCount(ws.output), 6);
  });
});

describe('exit status 2: an API that cannot be reached stops the run after 3 transcripts, naming its address', () => {
  test('6 transcripts at --concurrency 1: 3 fail over both judges, then one "cannot reach" message; no row', async (t) => {
    const { ws } = await setup(t);
    const result = await runMain(ws.args('--concurrency', '1')); // the default base URL: a closed loopback port
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, summaryLine(0, 3, 6), 'the 3 without an answer are failures');
    const stopped =
      `stopped: cannot reach the API at ${DEAD_BASE_URL}: 3 transcript(s) got no answer ` +
      '(every attempt failed to connect; each is in the audit log), 3 not started;';
    assert.ok(result.stderr.includes(stopped), result.stderr);
    assert.equal(lines(result.stderr.trimEnd()).length, 2, result.stderr);
    assert.match(result.stderr, /check the network, or ANTHROPIC_BASE_URL/);
    assert.equal(rowCount(ws.output), 0);
    const log = readLog(ws.log);
    assert.equal(log.length, 3, 'the other three were never started');
    for (const entry of log) {
      assert.deepEqual(
        entry.attempts.map((a) => [a.judge, a.error, a.status]),
        [
          ['judge-a', 'EvalProviderError', null],
          ['judge-b', 'EvalProviderError', null],
        ],
      );
    }
  });

  test('the primary and the fallback at two addresses, neither reachable: the message names both', async (t) => {
    const other = 'http://127.0.0.1:1'; // a port fetch never connects to, as DEAD_BASE_URL's
    const judge = judgeEntry('judge-a', { base_url: DEAD_BASE_URL });
    const fallbacks = [judgeEntry('judge-b', { base_url: other })];
    const { ws } = await setup(t, {}, { judge, fallbacks });
    const result = await runMain(ws.args('--concurrency', '1'));
    assert.equal(result.code, 2, result.stderr);
    const stopped =
      `stopped: cannot reach the API at ${DEAD_BASE_URL} (judge-a) nor at ${other} (judge-b): ` +
      '3 transcript(s) got no answer';
    assert.ok(result.stderr.includes(stopped), result.stderr);
    assert.match(result.stderr, /; check the network, or "base_url" in models\.json\n/);
  });

  for (const concurrency of ['8', '64']) {
    test(`90 transcripts at --concurrency ${concurrency}: one message counting them, at most 5 lines, no warning`, async (t) => {
      const { ws } = await setup(t, {}, { models: 30 });
      const warnings = warningsDuring(t);
      const result = await runMain(ws.args('--concurrency', concurrency)); // the default base URL: a closed port
      await new Promise((resolve) => setImmediate(resolve)); // a warning is emitted on the next tick
      assert.deepEqual(warnings, [], 'no warning of any kind');
      assert.equal(result.code, 2, result.stderr);
      const printed = lines(result.stderr.trimEnd());
      assert.ok(printed.length <= 5, `${printed.length} lines:\n${result.stderr}`);
      assert.doesNotMatch(result.stderr, /MaxListenersExceededWarning|^\s*failed /m);
      const logged = readLog(ws.log).length;
      const counts = result.stderr.match(
        /stopped: cannot reach the API at \S+: (\d+) transcript\(s\) got no answer .*, (\d+) not started;/,
      );
      assert.ok(counts, result.stderr);
      assert.equal(Number(counts[1]), logged, 'those that got no answer are the audit lines');
      assert.equal(Number(counts[1]) + Number(counts[2]), 90);
      assert.equal(rowCount(ws.output), 0);
    });
  }

  test('fewer than 3 transcripts, none reached: each is a failure of its own, said once and in the summary', async (t) => {
    const { ws } = await setup(t);
    const result = await runMain(ws.args('--task', 'proof01'));
    assert.equal(result.code, 1, result.stderr);
    assert.match(result.stderr, summaryLine(0, 2, 2));
    assert.equal(result.stderr.match(/failed m01\/proof01: all 2 judges failed/g)?.length, 2);
    assert.doesNotMatch(result.stderr, /cannot reach/);
  });

  test('an HTTP error is an answer: a server failing every request with 500 is not "unreachable"', async (t) => {
    const { fake, ws, run } = await setup(t, {
      responder: () => apiError(500, 'api_error', 'down'),
    });
    const result = await run(['--concurrency', '1']);
    assert.equal(result.code, 1, result.stderr);
    assert.equal(readLog(ws.log).length, 6);
    assert.doesNotMatch(result.stderr, /cannot reach/);
    assert.equal(fake.requests.length, 12);
  });
});

// ---------------------------------------------------------------------------------------------
describe('exit status 2: a usage or configuration error stops the run before any request, writing nothing', () => {
  interface SetupErrorCase {
    label: string;
    args?: string[];
    opts?: MainOptions;
    wsOpts?: WorkspaceOptions;
    /** Changes the workspace before the run. */
    prepare?: (ws: Workspace) => void;
    /** What stderr must say; a function gets the workspace (for paths). */
    says: (ws: Workspace) => (string | RegExp)[];
  }
  const firstDimension = shippedRubricJson().dimensions[0]!;
  const writeRubric = (value: unknown) => (ws: Workspace) => writeJson(ws.rubric, value);
  const writeModels = (value: unknown) => (ws: Workspace) => writeJson(ws.models, value);
  const cases: SetupErrorCase[] = [
    { label: 'an unknown flag', args: ['--bogus'], says: () => [/unknown option '--bogus'/] },
    ...['0', '-1', '1.5', 'abc', '257', '100000'].map((value) => ({
      label: `--concurrency ${value} (open connections stay bounded: at most 256)`,
      args: ['--concurrency', value],
      says: () => [/--concurrency.*must be a positive integer up to 256/],
    })),
    {
      label: '--task matching nothing',
      args: ['--task', 'proof99'],
      says: () => [
        '--task proof99',
        'models (folders): m01, m02; tasks: proof01, proof02, proof03',
      ],
    },
    {
      label: '--task and --model matching nothing together',
      args: ['--model', 'anthropic', '--task', 'proof01'],
      says: () => ['--task proof01 --model anthropic', 'models (folders): m01, m02'],
    },
    {
      label: 'a missing key',
      opts: { apiKey: null },
      says: () => ['ANTHROPIC_API_KEY is not set'],
    },
    {
      label: 'a numeric temperature on a fallback judge',
      wsOpts: { fallbacks: [judgeEntry('judge-b', { temperature: 0.2 })] },
      says: () => [
        'judge judge-b: "temperature": 0.2 is set',
        'set "temperature": null in models.json',
      ],
    },
    {
      label: 'a rubric with no dimension',
      prepare: writeRubric({ dimensions: [] }),
      says: (ws) => [`${ws.rubric}: dimensions: is empty`],
    },
    {
      label: 'a rubric that is not JSON',
      prepare: writeRubric('{"dimensions": ['),
      says: (ws) => [`${ws.rubric}: invalid JSON`],
    },
    {
      label: 'a rubric repeating a dimension name',
      prepare: writeRubric({ dimensions: [firstDimension, firstDimension] }),
      says: (ws) => [
        `${ws.rubric}: dimensions[1].name: duplicate dimension name "mathematical_correctness"`,
      ],
    },
    {
      label: 'a CSV whose header differs from the rubric columns',
      prepare: (ws) => writeJson(ws.output, 'task_id,model,score,notes\nproof01,m01,2,old\n'),
      says: (ws) => [
        `${ws.output}: its header "task_id,model,score,notes" differs from the rubric's columns`,
      ],
    },
    {
      label: 'a models.json that is not JSON',
      prepare: writeModels('{"judge": '),
      says: (ws) => [`${ws.models}: invalid JSON`],
    },
    {
      label: 'a models.json without a judge',
      prepare: writeModels({ models: [], fallback_judges: [judgeEntry('judge-b')] }),
      says: (ws) => [`${ws.models}: judge: `],
    },
    {
      label: 'a misspelt judge key ("temprature")',
      prepare: writeModels({
        judge: judgeEntry('judge-a', { temprature: 0 }),
        fallback_judges: [],
      }),
      says: (ws) => [`${ws.models}: judge: unknown key "temprature" (did you mean "temperature"?)`],
    },
  ];
  for (const { label, args = [], opts = {}, wsOpts = {}, prepare, says } of cases) {
    test(`${label}: exit 2, no request, no file written or changed`, async (t) => {
      const { fake, ws, run } = await setup(t, {}, wsOpts);
      prepare?.(ws);
      const before = snapshot(ws.dir);
      const result = await run(args, opts);
      assert.equal(result.code, 2, result.stderr);
      for (const part of says(ws)) {
        if (typeof part === 'string')
          assert.ok(result.stderr.includes(part), `${part}\nin: ${result.stderr}`);
        else assert.match(result.stderr, part);
      }
      assert.doesNotMatch(result.stderr, /^\s+at /m, 'no stack trace');
      assert.equal(result.stdout, '');
      assert.equal(fake.requests.length, 0);
      assert.deepEqual(
        snapshot(ws.dir),
        before,
        'no CSV, log or lock; an existing CSV is left as it was',
      );
    });
  }

  test('a usage error prints one line ending "(see --help)", not the whole help, a did-you-mean on it too', async (t) => {
    const { run } = await setup(t);
    const usageErrors = [['--bogus'], ['--concurrency', '0'], ['--limit', 'x'], ['--rescor']];
    for (const args of usageErrors) {
      const result = await run(args);
      assert.equal(result.code, 2);
      assert.equal(lines(result.stderr.trimEnd()).length, 1, result.stderr);
      assert.match(result.stderr, /^run-judge: .* \(see --help\)\n$/);
      for (const helpOnly of ['Usage:', '--reference-keys', 'Exit status']) {
        assert.ok(
          !result.stderr.includes(helpOnly),
          `the help's "${helpOnly}" is not printed:\n${result.stderr}`,
        );
      }
      assert.equal(result.stdout, '');
    }
  });
});

describe('exit status 2: a 401 (a bad key) stops the run once the requests in flight are answered', () => {
  test('no fallback judge, no request after the ones in flight, no row, the key never printed', async (t) => {
    const { fake, ws, run } = await setup(t, {
      latencyMs: 50,
      responder: () => apiError(401, 'authentication_error', 'invalid x-api-key'),
    });
    const result = await run(['--concurrency', '3'], { apiKey: 'sk-test-SECRET' });
    assert.equal(result.code, 2, result.stderr);
    assert.equal(
      fake.requests.length,
      2,
      'only the first 2 of the slow start, in flight before any answer (SLOW_START)',
    );
    assert.ok(
      fake.requests.every((req) => modelOf(req) === 'judge-a'),
      'no fallback judge for a configuration error',
    );
    assert.match(
      result.stderr,
      /^stopped: judge judge-a: HTTP 401 authentication_error: invalid x-api-key/m,
    );
    assert.equal(rowCount(ws.output), 0);
    assert.ok(!result.stderr.includes('SECRET'));
  });
});

// ---------------------------------------------------------------------------------------------
describe('concurrency: at most --concurrency requests in flight, rows written as they come', () => {
  const cases: [number, number][] = [
    [8, 8],
    [1, 2],
  ];
  for (const [concurrency, models] of cases) {
    test(`--concurrency ${concurrency} on ${models * 3} transcripts: ${concurrency} in flight at most (and reached); every row`, async (t) => {
      // Counted at the fake, from a request's arrival to its answer's end. The first two answers tell the limits (a
      // judge that knows none starts slowly); the rest are held until `concurrency` are in flight, so reaching it
      // does not depend on how fast the machine sends them.
      const answers = hold();
      const { fake, ws, run, intercept } = await setup(
        t,
        {
          buckets: { requests: { capacity: 1000, perSecond: 1000 } },
          responder: (_req, index) =>
            index < 2 ? undefined : { text: fake.validAnswer(), until: answers.until },
        },
        { models },
      );
      let open = 0;
      let most = 0;
      intercept((req, res) => {
        if (route(req) !== 'POST /v1/messages') return false;
        open++;
        most = Math.max(most, open);
        res.on('close', () => open--);
        return false; // the fake answers it
      });

      let finished = false;
      const running = run(['--concurrency', String(concurrency)]).finally(() => (finished = true));
      await waitFor(
        () => most >= concurrency || finished,
        10_000,
        'the requests in flight',
      ).finally(answers.release);
      const result = await running;

      assert.equal(result.code, 0, result.stderr);
      assert.equal(fake.requests.length, models * 3);
      assert.equal(most, concurrency);
      assert.deepEqual(wellFormedCsv(ws.output), allKeys(ws));
      assert.equal(
        lines(fs.readFileSync(ws.output, 'utf8')).length,
        models * 3 + 2,
        'header, one line each, final newline',
      );
    });
  }

  test('--concurrency 32 on 90 transcripts: 32 judgements wait on the one stop signal at once, no listener warning', async (t) => {
    // The first two answers tell the limits; the rest are held until 32 are in flight, each waiting on the run's
    // signal: past the 10 listeners an emitter has before Node warns of a leak (a MaxListenersExceededWarning).
    const answers = hold();
    const { fake, ws, run } = await setup(
      t,
      {
        buckets: { requests: { capacity: 1000, perSecond: 1000 } },
        responder: (_req, index) =>
          index < 2 ? undefined : { text: fake.validAnswer(), until: answers.until },
      },
      { models: 30 },
    );
    const warnings = warningsDuring(t);

    const running = run(['--concurrency', '32']);
    await waitFor(() => fake.requests.length >= 34, 10_000, '32 requests in flight').finally(
      answers.release,
    );
    const result = await running;
    await new Promise((resolve) => setImmediate(resolve)); // a warning is emitted on the next tick

    assert.deepEqual(warnings, [], 'no warning of any kind');
    assert.equal(result.code, 0, result.stderr);
    assert.equal(rowCount(ws.output), 90);
  });

  test('rows are appended as judgements finish, not at the end of the run', async (t) => {
    // The slow answer is held until five rows are on disk (or the wait gives up), not for a guessed time.
    const slow = hold();
    const { fake, ws, run } = await setup(t, {
      responder: (req) =>
        tagOf(req) === 'm01/proof01'
          ? { text: fake.validAnswer({}, 'slow'), until: slow.until }
          : undefined,
    });
    let finished = false;
    const running = run(['--concurrency', '2']).finally(() => (finished = true));
    await waitFor(() => rowCount(ws.output) >= 5 || finished, 10_000, 'five rows').finally(
      slow.release,
    );
    assert.equal(
      finished,
      false,
      'five rows are on disk while the slow judgement is still in flight',
    );
    assert.deepEqual(
      csvRows(ws.output)
        .map((row) => row.key)
        .sort(),
      allKeys(ws).filter((key) => key !== 'm01/proof01'),
    );
    const result = await running;
    assert.equal(result.code, 0, result.stderr);
    assert.equal(
      csvRows(ws.output).at(-1)!.key,
      'm01/proof01',
      'the slow one comes last, in completion order',
    );
  });
});

// ---------------------------------------------------------------------------------------------
describe('output streams: stdout stays clean, stderr holds plain one-line messages and the summary', () => {
  test('stderr that is not a terminal holds no ESC or CR; stdout of a run is empty; the summary has its shape', async (t) => {
    const { run } = await setup(t, {
      latencyMs: 20,
      responder: (req, i) =>
        i === 0
          ? rateLimited('0.05')
          : tagOf(req) === 'm02/proof03'
            ? { text: 'prose' }
            : undefined,
      clock: true,
    });
    const result = await run();
    assert.equal(result.code, 1, result.stderr);
    assert.equal(result.stdout, '');
    assert.ok(!result.stderr.includes('\x1b'), 'no ESC');
    assert.ok(!result.stderr.includes('\r'), 'no carriage return');
    assert.match(result.stderr, summaryLine(5, 1));
    assert.match(
      result.stderr,
      /^ {2}failed m02\/proof03: all 2 judges failed: .*judge judge-a: unusable answer/m,
    );
  });

  test('on a terminal, stderr draws a live progress line (which a plain stream never gets)', async (t) => {
    const { run } = await setup(t);
    const result = await run([], { isTTY: true });
    assert.equal(result.code, 0, result.stderr);
    assert.ok(result.stderr.includes('\r\x1b[2K'), JSON.stringify(result.stderr));
    assert.match(result.stderr, /judged \d\/6, failed 0/);
    assert.equal(result.stdout, '');
  });

  describe('every line run-judge prints is one line', () => {
    // A judge answer's text can reach stderr through the JSON parser's message; an API error's message directly.
    const cases: { label: string; reply: (judge: string) => Reply; escaped: string[] }[] = [
      {
        label: 'judge answers with newlines, tabs and escape characters (cut-off JSON, then prose)',
        reply: (judge) => ({
          text:
            judge === 'judge-a'
              ? '{"scores": {\n\t"mathematical_correctness": 2,'
              : 'no\n\x1b[31mx\ty',
        }),
        escaped: ['no\\n\\u001b[31mx\\ty'],
      },
      {
        label: 'API error messages with newlines, carriage returns and escape characters',
        reply: () => apiError(500, 'api_error', 'boom\nsecond line\r\n\x1b[31mred'),
        escaped: ['boom\\nsecond line\\r\\n\\u001b[31mred'],
      },
    ];
    for (const { label, reply, escaped } of cases) {
      test(`${label}: one "failed" line and one summary line, control characters shown escaped`, async (t) => {
        const { run } = await setup(t, {
          responder: (req) => (tagOf(req) === 'm01/proof01' ? reply(modelOf(req)) : undefined),
        });
        const result = await run(['--model', 'm01']);
        assert.equal(result.code, 1, result.stderr);
        assert.doesNotMatch(result.stderr, RAW_CONTROL, JSON.stringify(result.stderr));
        const failed = lines(result.stderr).filter((line) =>
          line.startsWith('failed m01/proof01: '),
        );
        const summary = lines(result.stderr).filter((line) =>
          line.startsWith('  failed m01/proof01: '),
        );
        assert.equal(failed.length, 1, result.stderr);
        assert.equal(summary.length, 1, result.stderr);
        for (const part of escaped) {
          assert.ok(failed[0]!.includes(part), `${part} in ${failed[0]}`);
          assert.ok(summary[0]!.includes(part), `${part} in ${summary[0]}`);
        }
        assert.equal(
          lines(result.stderr).filter((line) => line.includes('m01/proof01')).length,
          2,
          result.stderr,
        );
      });
    }
  });

  describe('a failed transcript is printed once when it fails and once in the summary, its label once on each', () => {
    const cases: { label: string; reply: (req: RecordedRequest) => Reply; reason: RegExp }[] = [
      {
        label: 'every judge answers HTTP 500',
        reply: () => apiError(500, 'api_error', 'Internal server error'),
        reason:
          /^all 2 judges failed: \(1\) EvalProviderError: judge judge-a: HTTP 500 .*\(2\) .*judge judge-b: HTTP 500/,
      },
      {
        label: 'every judge answers prose',
        reply: () => ({ text: 'I think it is good' }),
        reason:
          /^all 2 judges failed: \(1\) .*judge judge-a: unusable answer: .*\(2\) .*judge judge-b: unusable answer/,
      },
      {
        label: 'the primary judge answers HTTP 400',
        reply: () => apiError(400, 'invalid_request_error', 'prompt is too long'),
        reason: /^judge judge-a: HTTP 400 invalid_request_error: prompt is too long/,
      },
    ];
    for (const { label, reply, reason } of cases) {
      test(label, async (t) => {
        const { run } = await setup(t, {
          responder: (req) => (tagOf(req) === 'm01/proof02' ? reply(req) : undefined),
        });
        const result = await run();
        assert.equal(result.code, 1, result.stderr);
        const mentions = lines(result.stderr).filter((line) => line.includes('m01/proof02'));
        assert.deepEqual(
          mentions.map((line) => line.slice(0, line.indexOf('m01/proof02'))),
          ['failed ', '  failed '],
          result.stderr,
        );
        for (const line of mentions) {
          assert.equal(line.split('m01/proof02: ').length - 1, 1, `the label once: ${line}`);
          assert.match(line.slice(line.indexOf('m01/proof02: ') + 'm01/proof02: '.length), reason);
        }
        assert.match(result.stderr, summaryLine(5, 1));
      });
    }
  });

  describe('a transcript the fallback judge scored is reported once, naming that judge and why the primary failed', () => {
    const cases: { label: string; primary: Reply; why: string }[] = [
      {
        label: 'an unusable answer',
        primary: { text: 'I think it is good' },
        why: 'unusable answer: the answer is not JSON',
      },
      {
        label: 'an HTTP 500',
        primary: apiError(500, 'api_error', 'Internal server error'),
        why: 'HTTP 500 api_error',
      },
    ];
    for (const { label, primary, why } of cases) {
      test(`after ${label} from the primary`, async (t) => {
        const { ws, run } = await setup(t, {
          responder: (req) =>
            tagOf(req) === 'm01/proof01' && modelOf(req) === 'judge-a' ? primary : undefined,
        });
        const result = await run();
        assert.equal(result.code, 0, result.stderr);
        const mentions = lines(result.stderr).filter((line) => line.includes('m01/proof01'));
        assert.equal(mentions.length, 1, result.stderr);
        assert.ok(
          mentions[0]!.startsWith(
            `m01/proof01: scored by fallback judge judge-b after judge judge-a: ${why}`,
          ),
          mentions[0],
        );
        assert.doesNotMatch(result.stderr, /attempt failed|^ *failed /m);
        assert.match(result.stderr, summaryLine(6, 0));
        assert.deepEqual(wellFormedCsv(ws.output), allKeys(ws));
      });
    }
  });
});

// ---------------------------------------------------------------------------------------------
describe('--help', () => {
  test('explains every flag and the exit statuses on stdout, exit 0', async () => {
    const { code, stdout: help, stderr } = await runMain(['--help']);
    assert.equal(code, 0);
    const flags = [
      '--task',
      '--model',
      '--dry-run',
      '--concurrency',
      '--rescore',
      '--batch',
      '--poll-interval',
    ];
    flags.push(
      '--no-fallback',
      '--transcripts',
      '--tasks',
      '--reference-keys',
      '--rubric',
      '--models',
      '--output',
      '--log',
    );
    for (const flag of flags) assert.ok(help.includes(flag), flag);
    assert.match(help, /Exit status/);
    assert.equal(stderr, '');
  });

  test('a reader of stdout that has gone (`--help | head -0`): both scripts exit 0, no stack trace', async () => {
    const scripts = [SCRIPT, path.join(REPO, 'report.ts')];
    const results = await Promise.all(scripts.map((script) => helpWithStdout(script, 'gone')));
    assert.deepEqual(results, [
      { code: 0, stderr: '' },
      { code: 0, stderr: '' },
    ]);
  });

  test('a stdout that cannot be written (a full disk: /dev/full): both scripts say so in one line, exit 2', async () => {
    const scripts = [SCRIPT, path.join(REPO, 'report.ts')];
    const results = await Promise.all(scripts.map((script) => helpWithStdout(script, 'full')));
    const lost =
      'cannot write to stdout (ENOSPC: no space left on device, write): the rest of its output is lost\n';
    assert.deepEqual(results, [
      { code: 2, stderr: `run-judge: ${lost}` },
      { code: 2, stderr: `report: ${lost}` },
    ]);
  });

  describe('guardOutputStreams: what a failed write to stdout or stderr makes of the exit status', () => {
    /** A process whose streams fail as the test says; stderr's lines are kept. */
    const fakeProcess = () => {
      const said: string[] = [];
      const stderr = Object.assign(new EventEmitter(), {
        write: (text: string) => said.push(text),
      });
      const proc = Object.assign(new EventEmitter(), {
        stdout: new EventEmitter(),
        stderr,
        exitCode: undefined as number | undefined,
      });
      guardOutputStreams('run-judge', proc as unknown as NodeJS.Process);
      const exitWith = (code: number) => {
        proc.exitCode = code;
        proc.emit('exit', code);
        return proc.exitCode;
      };
      return { proc, said, exitWith };
    };
    const failure = (code: string) => Object.assign(new Error(`${code}: failed, write`), { code });

    for (const status of [0, 1]) {
      test(`stdout full, main's status ${status}: 2, said in one line though two writes failed`, () => {
        const { proc, said, exitWith } = fakeProcess();
        proc.stdout.emit('error', failure('ENOSPC'));
        proc.stdout.emit('error', failure('ENOSPC'));
        assert.equal(exitWith(status), 2);
        assert.deepEqual(said, [
          'run-judge: cannot write to stdout (ENOSPC: failed, write): the rest of its output is lost\n',
        ]);
      });
    }

    test("a signal's 130 or 143, or a 2 already, stays", () => {
      for (const status of [2, 130, 143]) {
        const { proc, exitWith } = fakeProcess();
        proc.stdout.emit('error', failure('ENOSPC'));
        assert.equal(exitWith(status), status);
      }
    });

    test('stderr full: 2, with nowhere to say it; nothing thrown', () => {
      const { proc, said, exitWith } = fakeProcess();
      proc.stderr.emit('error', failure('ENOSPC'));
      assert.equal(exitWith(0), 2);
      assert.deepEqual(said, []);
    });

    test('a reader gone (EPIPE) from either: the status stays, nothing said', () => {
      const { proc, said, exitWith } = fakeProcess();
      proc.stdout.emit('error', failure('EPIPE'));
      proc.stderr.emit('error', failure('EPIPE'));
      assert.equal(exitWith(0), 0);
      assert.deepEqual(said, []);
    });
  });
});

/**
 * `script --help` as `npx tsx` starts it, its stdout's reader gone before it writes (as `| head -0` leaves it), or its
 * stdout a device that is always full.
 */
function helpWithStdout(
  script: string,
  stdout: 'gone' | 'full',
): Promise<{ code: number | null; stderr: string }> {
  const full = stdout === 'full' ? fs.openSync('/dev/full', 'w') : undefined;
  const child = spawn(process.execPath, ['--import', TSX_LOADER, script, '--help'], {
    cwd: REPO,
    stdio: ['ignore', full ?? 'pipe', 'pipe'],
  });
  if (full === undefined) {
    child.stdout!.destroy(); // node takes far longer to start than this takes: no write has happened yet
  } else {
    fs.closeSync(full); // the child has its own copy
  }
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stderr }));
  });
}

/**
 * A real process gets `signal` while two judgements are in flight (20 transcripts, 2 at a time, the first two answered
 * at once, the rest held until the run has taken the signal): it finishes them, writes them, prints the summary and
 * what is left, and exits by itself with the signal's status; a rerun judges exactly the rest.
 */
async function firstSignalFinishesInFlight(t: TestContext, signal: 'SIGINT' | 'SIGTERM') {
  const answers = hold();
  const { fake, ws, run, spawn } = await setup(
    t,
    {
      responder: (_, index) => ({
        text: fake.validAnswer(),
        until: index < 2 ? undefined : answers.until,
      }),
    },
    { models: 10, tasks: ['proof01', 'proof02'] },
  );
  const { child, done, stderr } = spawn(['--concurrency', '2']);
  await waitFor(
    () => rowCount(ws.output) >= 2 && fake.requests.length >= 4,
    20_000,
    'two rows, two in flight',
  );
  child.kill(signal);
  await waitFor(() => stderr().includes('stopping:'), 20_000, 'the signal taken');
  answers.release();
  const result = await done;
  assert.equal(result.signal, null, `exited by itself, not killed by ${signal}: ${result.stderr}`);
  assert.equal(result.code, signal === 'SIGINT' ? 130 : 143, result.stderr);
  assert.match(result.stderr, /stopping: finishing the judgements in flight/);
  const rows = wellFormedCsv(ws.output);
  assert.equal(rows.length, 4, 'the two answered and the two in flight');
  assert.equal(fake.requests.length, 4, 'no judgement started after the signal');
  assert.match(
    result.stderr,
    new RegExp(`^interrupted: 20 selected: ${rows.length} scored, 0 skipped`, 'm'),
  );
  const left = `  ${20 - rows.length} transcript(s) left without a row: run the same command again to continue`;
  assert.ok(result.stderr.includes(left), result.stderr);
  assert.equal(readLog(ws.log).length, rows.length);
  assert.equal(fs.existsSync(`${ws.output}.lock`), false);

  const before = fake.requests.length;
  const rerun = await run(['--concurrency', '8']);
  assert.equal(rerun.code, 0, rerun.stderr);
  assert.equal(fake.requests.length - before, 20 - rows.length);
  assert.deepEqual(wellFormedCsv(ws.output), allKeys(ws));
}

// ---------------------------------------------------------------------------------------------
describe('SIGINT (a real process)', () => {
  test('the first finishes the judgements in flight, writes them, prints the summary, exits 130; a rerun completes', async (t) => {
    await firstSignalFinishesInFlight(t, 'SIGINT');
  });

  test('a second exits at once with 130, not waiting for the answers in flight; what was written stays complete', async (t) => {
    // The fake never answers and the judge waits 60 s: only the second SIGINT can end the run before the kill at 20 s.
    const { fake, ws, spawn } = await setup(
      t,
      { responder: () => ({ kind: 'hang' }) },
      { judge: judgeEntry('judge-a', { timeout_s: 60 }), fallbacks: [] },
    );
    const { child, done, stderr } = spawn(['--concurrency', '2'], { timeoutMs: 20_000 });
    await waitFor(() => fake.requests.length >= 2, 15_000, 'requests in flight');
    child.kill('SIGINT');
    // A press within 0.3 s of the first, as the child saw it, counts as the same press: 0.4 s from when it took it.
    await waitFor(() => stderr().includes('stopping:'), 15_000, 'the first SIGINT to be taken');
    await delay(400);
    assert.equal(child.exitCode, null, 'the first SIGINT waits for the judgements in flight');
    child.kill('SIGINT');
    const result = await done;
    assert.equal(result.signal, null, 'exited by itself, not killed by the test');
    assert.equal(result.code, 130, result.stderr);
    assert.equal(rowCount(ws.output), 0);
    wellFormedCsv(ws.output);
    assert.deepEqual(readLog(ws.log), []);
    assert.equal(fs.existsSync(`${ws.output}.lock`), false, 'the exit handler removed the lock');
  });
});

describe('the first SIGINT or SIGTERM never cuts a judgement in flight short (in-process)', () => {
  // The signal goes to run-judge's listener in this process: one must be there (in a real process, a signal with no
  // listener kills it), and process.exit (what a signal that exits at once calls) is recorded instead of exiting.
  const signal = (name: 'SIGINT' | 'SIGTERM') =>
    assert.ok(process.emit(name, name), `run-judge listens for ${name}`);
  const recordExits = (t: TestContext) => t.mock.method(process, 'exit', () => undefined as never);

  test('after a 401 has stopped the run, one SIGINT does not exit at once: the judgement in flight is written, exit 2', async (t) => {
    // m01/proof01 gets a 401 at once; m01/proof02's answer is held until the SIGINT is sent; m01/proof03 never starts.
    const exits = recordExits(t);
    const slow = hold();
    const { fake, ws, run } = await setup(
      t,
      {
        responder: (req) =>
          tagOf(req) === 'm01/proof01'
            ? apiError(401, 'authentication_error', 'invalid x-api-key')
            : { text: fake.validAnswer({}, 'slow'), until: slow.until },
      },
      { models: 1 },
    );
    const running = run(['--concurrency', '2']);
    try {
      // The 401's transcript is logged (failed) before the run is stopped: from then on, the run is stopping.
      const logged = () => fs.existsSync(ws.log) && fs.readFileSync(ws.log, 'utf8').includes('\n');
      await waitFor(logged, 20_000, 'the 401 to be logged');
      assert.equal(rowCount(ws.output), 0, 'the slow answer is still in flight');
      signal('SIGINT');
    } finally {
      slow.release();
    }
    const result = await running;
    assert.equal(exits.mock.callCount(), 0, 'the SIGINT did not exit at once');
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /^stopping: /m, 'the SIGINT was taken');
    assert.match(
      result.stderr,
      /^stopped: judge judge-a: HTTP 401 authentication_error: invalid x-api-key/m,
    );
    assert.deepEqual(
      wellFormedCsv(ws.output),
      ['m01/proof02'],
      'the judgement in flight is written',
    );
    assert.deepEqual(
      fake.requests.map(tagOf).sort(),
      ['m01/proof01', 'm01/proof02'],
      'nothing started after the 401',
    );
    assert.deepEqual(
      readLog(ws.log).map((entry) => [`${entry.model}/${entry.task_id}`, entry.status]),
      [
        ['m01/proof01', 'failed'],
        ['m01/proof02', 'scored'],
      ],
    );
    assert.equal(fs.existsSync(`${ws.output}.lock`), false);
  });

  test("a judgement in flight finishes its chain: the primary's unusable answer goes to the fallback, which scores; exit 130", async (t) => {
    // Every primary answer is unusable and held until the SIGINT is sent; the fallback answers validly at once.
    const exits = recordExits(t);
    const primary = hold();
    const { fake, ws, run } = await setup(
      t,
      {
        responder: (req) =>
          modelOf(req) === 'judge-a'
            ? { text: 'I think it is good', until: primary.until }
            : { text: fake.validAnswer() },
      },
      { models: 2, tasks: ['proof01', 'proof02'] },
    );
    const running = run(['--concurrency', '2']);
    try {
      await waitFor(() => fake.requests.length >= 2, 20_000, 'the first two requests');
      assert.equal(rowCount(ws.output), 0, 'no answer yet');
      signal('SIGINT');
    } finally {
      primary.release();
    }
    const result = await running;
    assert.equal(exits.mock.callCount(), 0, 'the SIGINT did not exit at once');
    assert.equal(result.code, 130, result.stderr);
    assert.deepEqual(
      fake.requests.map((req) => `${tagOf(req)} ${modelOf(req)}`).sort(),
      ['m01/proof01 judge-a', 'm01/proof01 judge-b', 'm01/proof02 judge-a', 'm01/proof02 judge-b'],
      'the two in flight went on to the fallback; the other two were never requested',
    );
    assert.deepEqual(wellFormedCsv(ws.output), ['m01/proof01', 'm01/proof02']);
    for (const entry of readLog(ws.log)) {
      assert.deepEqual(
        [entry.status, entry.judge, entry.attempts.length],
        ['scored', 'judge-b', 1],
        entry.task_id,
      );
    }
    assert.equal(readLog(ws.log).length, 2);
    assert.match(result.stderr, /^interrupted: 4 selected: 2 scored, 0 skipped/m);
  });

  /**
   * The run's clock, which the test moves on: `apart(ms, first, second)` runs `first`, then `second` exactly `ms` later
   * on that clock, with no real wait (real time stands still for the clock between the two).
   */
  const steppedClock = () => {
    let aheadMs = 0;
    let stoppedAt: number | undefined;
    const now = () => stoppedAt ?? Date.now() + aheadMs;
    const apart = (ms: number, first: () => void, second: () => void) => {
      stoppedAt = now();
      first();
      stoppedAt += ms;
      aheadMs += ms; // never back: Date.now() + aheadMs is at least stoppedAt from here on
      second();
      stoppedAt = undefined;
    };
    const clock: Clock = { now, sleep: systemClock.sleep };
    return { clock, apart };
  };

  test('a second SIGTERM, even 0.5 s on, is the same signal: the judgements in flight are still written, exit 143', async (t) => {
    // Both answers are held until the second SIGTERM is sent, 0.5 s after the first on the run's clock.
    const exits = recordExits(t);
    const answers = hold();
    const { clock, apart } = steppedClock();
    const { fake, ws, run } = await setup(
      t,
      { responder: () => ({ text: fake.validAnswer(), until: answers.until }) },
      { models: 2, tasks: ['proof01', 'proof02'] },
    );
    let finished = false;
    const running = run(['--concurrency', '2'], { clock }).finally(() => (finished = true));
    try {
      await waitFor(() => fake.requests.length >= 2, 20_000, 'two requests in flight');
      apart(
        500,
        () => signal('SIGTERM'),
        () => signal('SIGTERM'),
      );
      await delay(100); // a run that cut its requests would end within a few turns
      assert.equal(finished, false, 'the SIGTERMs wait for the judgements in flight');
    } finally {
      answers.release();
    }
    const result = await running;
    assert.equal(exits.mock.callCount(), 0, 'neither SIGTERM exited at once');
    assert.equal(result.code, 143, result.stderr);
    assert.equal(fake.requests.length, 2, 'nothing started after the first SIGTERM');
    assert.equal(wellFormedCsv(ws.output).length, 2, 'both judgements in flight were written');
    assert.equal(readLog(ws.log).length, 2);
    assert.match(result.stderr, /^interrupted: 4 selected: 2 scored, 0 skipped/m);
  });

  for (const [afterMs, exitsAtOnce] of [
    [300, false],
    [301, true],
  ] as const) {
    const what = exitsAtOnce ? 'a second press: exits at once with 130' : 'the same press';
    test(`a second SIGINT ${afterMs} ms after the first (on the run's clock) is ${what}`, async (t) => {
      // A terminal's Ctrl-C reaches the run twice (directly and relayed by tsx) within moments.
      const exits = recordExits(t);
      const answers = hold();
      const { clock, apart } = steppedClock();
      const { fake, ws, run } = await setup(
        t,
        { responder: () => ({ text: fake.validAnswer(), until: answers.until }) },
        { models: 1, tasks: ['proof01'] },
      );
      const running = run([], { clock });
      try {
        await waitFor(() => fake.requests.length >= 1, 20_000, 'a request in flight');
        apart(
          afterMs,
          () => signal('SIGINT'),
          () => signal('SIGINT'),
        );
      } finally {
        answers.release();
      }
      const result = await running;
      assert.deepEqual(
        exits.mock.calls.map((call) => call.arguments),
        exitsAtOnce ? [[130]] : [],
      );
      // process.exit is recorded, not carried out: the run goes on and writes what is in flight
      assert.equal(result.code, 130, result.stderr);
      assert.equal(wellFormedCsv(ws.output).length, 1);
    });
  }
});

describe('SIGTERM (a real process) is the first Ctrl-C', () => {
  test('it finishes the judgements in flight, writes them, prints the summary, exits 143; a rerun completes', async (t) => {
    await firstSignalFinishesInFlight(t, 'SIGTERM');
  });

  test('a SIGINT after a SIGTERM exits at once, not waiting for the answers in flight; what was written stays complete', async (t) => {
    // The fake never answers and the judge waits 60 s: only an immediate exit ends the run before the kill at 20 s.
    const { fake, ws, spawn } = await setup(
      t,
      { responder: () => ({ kind: 'hang' }) },
      { judge: judgeEntry('judge-a', { timeout_s: 60 }), fallbacks: [] },
    );
    const { child, done } = spawn(['--concurrency', '2'], { timeoutMs: 20_000 });
    await waitFor(() => fake.requests.length >= 2, 15_000, 'requests in flight');
    child.kill('SIGTERM');
    await delay(400);
    assert.equal(child.exitCode, null, 'the SIGTERM waits for the judgements in flight');
    child.kill('SIGINT');
    const result = await done;
    assert.equal(result.signal, null, 'exited by itself, not killed by the test');
    assert.ok([130, 143].includes(result.code!), `exit ${result.code}: ${result.stderr}`);
    assert.equal(rowCount(ws.output), 0);
    wellFormedCsv(ws.output);
    assert.deepEqual(readLog(ws.log), []);
    assert.equal(fs.existsSync(`${ws.output}.lock`), false, 'the exit handler removed the lock');
  });
});

describe('importing run-judge.ts runs nothing', () => {
  const file = path.join(REPO, 'run-judge.ts');
  const moduleUrl = pathToFileURL(file).href;

  test('the entry check is false for another file, a missing argv[1] or a file that does not exist', () => {
    for (const argv1 of [
      path.join(REPO, 'test', 'cli.test.ts'),
      undefined,
      path.join(REPO, 'no-such-file.ts'),
    ]) {
      assert.equal(isEntryModule(moduleUrl, argv1), false, String(argv1));
    }
  });

  test('the entry check is true for run-judge.ts itself, by absolute or relative path', () => {
    assert.equal(isEntryModule(moduleUrl, file), true);
    assert.equal(isEntryModule(moduleUrl, path.relative(process.cwd(), file)), true);
  });

  test('a script that imports run-judge.ts prints nothing, writes nothing and exits 0', (t) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rj-import-'));
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
    const script = path.join(dir, 'import-only.mjs');
    // run-judge.ts as plain node runs it, bundled: the module's own code, without tsx's start-up.
    const bundleUrl = pathToFileURL(bundled(SCRIPT).module).href;
    fs.writeFileSync(
      script,
      `const m = await import(${JSON.stringify(bundleUrl)});\nprocess.stdout.write(typeof m.main);\n`,
    );
    const env = { ...process.env, ANTHROPIC_BASE_URL: 'http://127.0.0.1:9', ANTHROPIC_API_KEY: '' };
    const result = spawnSync(process.execPath, [script, '--task', 'proof01'], {
      cwd: dir,
      env,
      encoding: 'utf8',
    });
    assert.equal(result.status, 0, result.stderr);
    assert.deepEqual([result.stdout, result.stderr], ['function', '']);
    assert.deepEqual(fs.readdirSync(dir), ['import-only.mjs']);
  });
});
