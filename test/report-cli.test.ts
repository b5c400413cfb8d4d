// report.ts as a command: judges side by side, the CI gate, the audit log it reads, and its messages.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import type { TestContext } from 'node:test';
import {
  REPO,
  RUBRIC_FILE,
  bundled,
  fallbackAndThinkingRun,
  mentioning,
  readLog,
  runReport,
  tempDir,
  writeJson,
} from './helpers.ts';

const { compareJudges } = await import('../report.ts');
const { judgeInputs, readAuditLog } = await import('../report/inputs.ts');
const { ONE_OWN_TUTOR } = await import('../report/self-preference.ts');
const { DEFAULTS, loadRubric, pairKey } = await import('../run-judge.ts');
const rubric = loadRubric(RUBRIC_FILE);
const DIMENSIONS = rubric.dimensions.map((dimension) => dimension.name);
const HEADER = `task_id,model,${DIMENSIONS.join(',')},notes`;

/** Every dimension the same score, as CSV cells. */
const same = (score: number) => DIMENSIONS.map(() => score).join(',');

/** One audit-log line as run-judge writes it, with the fields the report reads. */
function logLine(fields: Record<string, unknown>): string {
  const line = {
    task_id: 'p1',
    model: 'm1',
    status: 'scored',
    judge: 'judge-a',
    timestamp: '2026-12-01T10:00:00.000Z',
    cost_usd: 0.01,
    rubric_sha256: 'r1',
    attempts: [],
    answers: [],
  };
  return JSON.stringify(Object.assign(line, fields));
}

function writeLog(t: TestContext, lines: string[]): string {
  const file = path.join(tempDir(t), 'log.jsonl');
  fs.writeFileSync(file, lines.map((line) => `${line}\n`).join(''));
  return file;
}

/** report.ts's main with stdout and stderr captured, in no npm script. */
const run = (args: string[]) => runReport(args);

describe('the audit log as the report and the page header read it', () => {
  test('rows per judge in a Map, fallbacks, hashes, the last judged row, the total cost, thinking', (t) => {
    const log = writeLog(t, [
      logLine({ task_id: 'p1', timestamp: '2026-12-01T10:00:00.000Z', cost_usd: 0.5 }),
      logLine({
        task_id: 'p2',
        judge: 'judge-b',
        timestamp: '2026-12-01T12:00:00.000Z',
        cost_usd: 0.25,
        attempts: [{ judge: 'judge-a' }],
        answers: [
          { judge: 'judge-b', thinking: 'first, the base case', scores: { a: 1 } },
          { judge: 'judge-b', thinking: 'unused', scores: null },
        ],
        human_scoring: { state: 'complete' },
      }),
      logLine({ task_id: 'p3', status: 'failed', judge: null, cost_usd: 0.125 }),
      logLine({ task_id: 'p4', judge: 'constructor', timestamp: '2026-12-01T11:00:00.000Z' }),
    ]);
    const audit = readAuditLog(log);
    assert.deepEqual(
      [...audit.rows_by_judge],
      [
        ['judge-a', 1],
        ['judge-b', 1],
        ['constructor', 1],
      ],
    );
    assert.deepEqual([...audit.fallback_rows], [['judge-b', 1]]);
    assert.equal(audit.last_judged, '2026-12-01T12:00:00.000Z');
    assert.equal(audit.total_cost_usd, 0.5 + 0.25 + 0.125 + 0.01, 'every entry, failed ones too');
    assert.deepEqual(audit.rubric_sha256, ['r1']);
    assert.deepEqual(audit.human_scoring, { state: 'complete' });
    assert.deepEqual(audit.rows.get('m1\u0000p2')!.thinking, ['first, the base case']);
  });

  test('given the CSV, only its transcripts count: a row removed since is no row of a judge', (t) => {
    const log = writeLog(t, [
      logLine({ task_id: 'p1' }),
      logLine({ task_id: 'p2', judge: 'judge-b' }),
    ]);
    const csv = [{ task_id: 'p1', model: 'm1', scores: { a: 1 }, notes: '' }];
    const audit = readAuditLog(log, undefined, csv);
    assert.deepEqual([...audit.rows_by_judge], [['judge-a', 1]]);
    assert.deepEqual([...audit.rows.keys()], ['m1\u0000p1']);
  });

  test('an entry without a cost makes the total unknown (null), and so does no log', (t) => {
    const log = writeLog(t, [logLine({}), logLine({ task_id: 'p2', cost_usd: null })]);
    assert.equal(readAuditLog(log).total_cost_usd, null);
    assert.equal(readAuditLog(path.join(tempDir(t), 'none.jsonl')).total_cost_usd, null);
  });
});

/** A judge CSV with one row per (task, score), every dimension that score. */
function judgeCsv(dir: string, name: string, scores: Record<string, number>): string {
  const file = path.join(dir, name);
  const rows = Object.entries(scores).map(([task, score]) => `${task},m1,${same(score)},ok\n`);
  fs.writeFileSync(file, `${HEADER}\n${rows.join('')}`);
  return file;
}

/** A human-scores CSV, each scorer (`al` alone by default) giving the same scores. */
function humanCsv(dir: string, scores: Record<string, number>, scorers = ['al']): string {
  const file = path.join(dir, 'human.csv');
  const rows = scorers.flatMap((scorer) => {
    return Object.entries(scores).map(([task, score]) => `${task},m1,${same(score)},,${scorer}\n`);
  });
  fs.writeFileSync(file, `${HEADER},scorer\n${rows.join('')}`);
  return file;
}

/** Samples of one transcript judged three times, every dimension the given score in each. */
const samples = (...scores: number[]) =>
  scores.map((score) => Object.fromEntries(DIMENSIONS.map((name) => [name, score])));

describe('the audit log a real run writes (through the fake), as the report and the page read it', () => {
  test('a fallback row, the thinking behind a row, hashes, the last judged time, the cost', async (t) => {
    // judge-b's row is a fallback (judge-a's thinking there, behind no row, is not its row's).
    const ws = await fallbackAndThinkingRun(t);

    const audit = readAuditLog(ws.log, rubric);
    const entries = readLog(ws.log);
    assert.deepEqual([...audit.rows_by_judge].sort(), [
      ['judge-a', 1],
      ['judge-b', 1],
    ]);
    assert.deepEqual([...audit.fallback_rows], [['judge-b', 1]]);
    const thinking = audit.rows.get(pairKey('proof02', 'm01'))!.thinking;
    assert.equal(thinking.length, 1);
    assert.match(thinking[0]!, /fake thinking/);
    assert.deepEqual(audit.rows.get(pairKey('proof01', 'm01'))!.thinking, []);
    assert.deepEqual(audit.rubric_sha256, [entries[0]!.rubric_sha256]);
    assert.equal(
      audit.last_judged,
      entries
        .map((entry) => entry.timestamp)
        .sort()
        .at(-1),
    );
    const costs = entries.map((entry) => (entry as unknown as { cost_usd: number }).cost_usd);
    assert.ok(costs[0]! > costs[1]!, "the fallback's entry holds both paid answers");
    assert.equal(audit.total_cost_usd, costs[0]! + costs[1]!);
  });
});

describe('stale judge rows: an input of the prompt edited since judged, by the audit log hashes', () => {
  test('a task file edited after the run: its row is left out of every figure and listed in missing.stale_judge', async (t) => {
    const ws = await fallbackAndThinkingRun(t);
    const entry = readLog(ws.log).at(-1) as unknown as { input_sha256: Record<string, string> };
    assert.deepEqual(Object.keys(entry.input_sha256), [
      'transcript',
      'task',
      'reference_key',
      'rubric',
      'template',
    ]);
    const args = [
      ...['--scores', ws.output, '--log', ws.log, '--human-scores', ws.humanScores],
      ...['--rubric', ws.rubric, '--transcripts', ws.transcripts, '--tasks', ws.tasks],
      ...['--reference-keys', ws.referenceKeys, '--format', 'json'],
    ];
    const before = JSON.parse((await run(args)).stdout);
    assert.deepEqual(before.missing.stale_judge, []);

    fs.appendFileSync(path.join(ws.tasks, 'proof01.json'), '\n');
    const after = await run(args);
    assert.equal(after.code, 0, after.stderr);
    const report = JSON.parse(after.stdout);
    assert.deepEqual(report.missing.stale_judge, ['m01/proof01']);
    assert.deepEqual(report.missing.no_judge, [], 'listed as stale only');
    assert.equal(report.pairs, before.pairs - 1);
    const table = await run(args.slice(0, -2));
    assert.match(
      table.stdout,
      /stale judge rows \(an input edited since judged; left out\): m01\/proof01/,
    );
  });
});

describe('judges side by side: --scores more than once, on the transcripts all of them scored', () => {
  // People: p1..p5. opus: p1..p5, the same as people on p1..p4 and 0 against 2 on p5. sonnet: p1..p4
  // and p6 (no human row), against people (0, 1, 2, 1) it says (0, 2, 2, 1). Compared: p1..p4.
  // sonnet's kappa there, by hand: observed weighted disagreement (1/4)/4 = 1/16; human totals
  // (1, 2, 1), judge totals (1, 1, 2); expected (1/4 + 2 + 1/2 + 1 + 1 + 1/4)/16 = 5/16; 1 - 1/5.
  // Two scorers who agree (each pair counted twice leaves kappa as it is): the ceiling is 1, so
  // sonnet's gap is -0.2 and opus's 0; sonnet's leniency 5/4 - 1 = 0.25, opus's 0.
  function setUp(t: TestContext) {
    const dir = tempDir(t);
    const humans = humanCsv(dir, { p1: 0, p2: 1, p3: 2, p4: 1, p5: 2 }, ['al', 'bo']);
    const opus = judgeCsv(dir, 'opus-scores.csv', { p1: 0, p2: 1, p3: 2, p4: 1, p5: 0 });
    const sonnet = judgeCsv(dir, 'sonnet.csv', { p1: 0, p2: 2, p3: 2, p4: 1, p6: 1 });
    const opusLog = path.join(dir, 'opus-log.jsonl');
    const opusLines = [
      logLine({ task_id: 'p1', judge: 'o', cost_usd: 9 }), // replaced by the later entry of p1
      logLine({ task_id: 'p1', judge: 'o', cost_usd: 0.01 }),
      logLine({ task_id: 'p2', judge: 'o', cost_usd: 0.02, sample_scores: samples(1, 1, 1) }),
      logLine({ task_id: 'p3', judge: 'o', cost_usd: 0.03 }),
      logLine({ task_id: 'p4', judge: 'o', cost_usd: 0.04 }),
      logLine({ task_id: 'p5', judge: 'o', cost_usd: 0.5, sample_scores: samples(0, 2, 0) }),
    ];
    fs.writeFileSync(opusLog, opusLines.map((line) => `${line}\n`).join(''));
    // sonnet's log sits beside its CSV (sonnet.jsonl), found without --log; p3's cost is unknown.
    const sonnetLines = ['p1', 'p2', 'p3', 'p4', 'p6'].map((task_id) => {
      return logLine({ task_id, judge: 's', cost_usd: task_id === 'p3' ? null : 0.001 });
    });
    fs.writeFileSync(path.join(dir, 'sonnet.jsonl'), sonnetLines.map((l) => `${l}\n`).join(''));
    const args = [
      '--scores',
      `opus=${opus}`,
      '--scores',
      sonnet,
      '--log',
      `opus=${opusLog}`,
      '--human-scores',
      humans,
      '--rubric',
      RUBRIC_FILE,
    ];
    return { dir, opus, sonnet, opusLog, humans, args };
  }

  test('JSON `comparison`: each judge named, its files, kappa, self-consistency and cost on the same transcripts', async (t) => {
    const { dir, opus, sonnet, opusLog, args } = setUp(t);
    const { code, stdout } = await run([...args, '--format', 'json']);
    assert.equal(code, 0);
    const report = JSON.parse(stdout);

    // The report itself is the first judge's, on all its rows: p5's disagreement counts there.
    assert.equal(report.pairs, 10);
    assert.ok(report.dimensions[0].judge_vs_human.kappa < 1);
    assert.equal(report.dimensions[0].self_consistency.n, 2);

    const [first, second] = report.comparison;
    assert.deepEqual(
      [first.name, first.scores, first.log, second.name, second.scores, second.log],
      ['opus', opus, opusLog, 'sonnet', sonnet, path.join(dir, 'sonnet.jsonl')],
    );
    assert.deepEqual([first.n_transcripts, second.n_transcripts], [4, 4]);
    assert.deepEqual(Object.keys(first), [
      'name',
      'scores',
      'log',
      'n_transcripts',
      'scope',
      'cost_usd_per_transcript',
      'dimensions',
      'self_preference',
      'tutors',
      'alt_test_all',
    ]);
    assert.deepEqual(Object.keys(report).slice(-2), ['judges', 'comparison']);
    for (const dimension of first.dimensions) {
      assert.equal(dimension.kappa, 1, 'opus equals people on p1..p4');
      assert.deepEqual(
        [dimension.gap_to_ceiling.kappa_diff, dimension.gap_to_ceiling.ci95],
        [0, [0, 0]],
      );
      // [0, 0] on 4 transcripts is too few to tell, not certainty.
      assert.equal(dimension.gap_to_ceiling.verdict, 'undetermined');
      assert.deepEqual([dimension.leniency.mean_diff, dimension.leniency.ci95], [0, [0, 0]]);
      assert.deepEqual(dimension.self_consistency, { n: 1, unanimous: 1, mean_range: 0 });
    }
    for (const dimension of second.dimensions) {
      assert.ok(Math.abs(dimension.kappa - 0.8) < 1e-12, `sonnet kappa ${dimension.kappa}`);
      const gap = dimension.gap_to_ceiling.kappa_diff;
      assert.ok(Math.abs(gap + 0.2) < 1e-12, `sonnet gap ${gap}`);
      assert.equal(dimension.leniency.mean_diff, 0.25);
      assert.equal(dimension.self_consistency, null, 'sonnet had no samples');
    }
    assert.deepEqual(Object.keys(first.dimensions[0]), [
      'name',
      'n',
      'ceiling_n',
      'kappa',
      'kappa_ci95',
      'gap_to_ceiling',
      'alt_test',
      'leniency',
      'self_consistency',
      'kappa_diff_from_first',
      'agreement_with_first',
    ]);
    assert.deepEqual(
      first.dimensions.map((dimension: { name: string }) => dimension.name),
      DIMENSIONS,
    );

    // Cost per transcript: the last scored entry of each compared row; one unknown makes it unknown.
    assert.ok(Math.abs(first.cost_usd_per_transcript - 0.025) < 1e-12);
    assert.equal(second.cost_usd_per_transcript, null);
  });

  test('a stale human row (its transcript edited since) is left out of the comparison too', () => {
    const all = (score: number) => Object.fromEntries(DIMENSIONS.map((name) => [name, score]));
    const row = (task_id: string, score: number) => ({ task_id, model: 'm1', scores: all(score) });
    const judged = [row('p1', 0), row('p2', 1), row('p3', 2)];
    const human = (task_id: string, score: number, stale: boolean) => {
      return { task_id, model: 'm1', scores: all(score), notes: '', scorer: 'al', stale };
    };
    const humans = [human('p1', 0, false), human('p2', 1, false), human('p3', 0, true)];
    const runs = ['a', 'b'].map((name) => {
      const judge = { name, scores: `${name}.csv`, log: `${name}.jsonl` };
      return { judge, rows: judged.map((r) => ({ ...r, notes: '' })), audit: readAuditLog('none') };
    });
    const [first] = compareJudges(runs, humans, rubric);
    assert.equal(first!.n_transcripts, 2);
    assert.equal(
      first!.dimensions[0]!.kappa,
      1,
      "p3's stale 0 against the judge's 2 is not counted",
    );
  });

  test('the table: the judges of each dimension together, the cost or "unknown"', async (t) => {
    const { args } = setUp(t);
    const { code, stdout } = await run(args);
    assert.equal(code, 0);
    assert.match(stdout, /judges side by side, on the 4 transcript\(s\)/);
    const dimension = DIMENSIONS[0]!;
    const opus = `^opus +1\\.00 \\[too few\\] +0\\.00 \\[too few\\] +too few \\(30\\) +0\\.00 \\[too few\\]$`;
    const sonnet = `^sonnet +0\\.80 \\[[^\\]]+\\]† +-0\\.20 \\[[^\\]]+\\]† +too few \\(\\d+\\) +0\\.25 \\[[^\\]]+\\]†$`;
    // the alternative annotator test first: one scorer, so none
    const against = `^sonnet +- +-0\\.20 \\[[^\\]]+\\]† +0\\.\\d\\d \\[[^\\]]+\\]† / 0\\.\\d\\d +-$`;
    const block = stdout.split(`the judges on ${dimension}:\n`)[1]!;
    assert.match(block, new RegExp(opus, 'm'));
    assert.match(block, new RegExp(sonnet, 'm'));
    assert.match(block, new RegExp(against, 'm'));
    assert.match(stdout, /^opus +- +\$0\.0250$/m);
    assert.match(stdout, /^sonnet +- +unknown$/m);
  });

  test('unnamed logs pair by position; one judge has no comparison', async (t) => {
    const { opus, sonnet, opusLog, humans } = setUp(t);
    const base = ['--human-scores', humans, '--rubric', RUBRIC_FILE, '--format', 'json'];
    const both = await run([...base, '--scores', opus, '--scores', sonnet, '--log', opusLog]);
    const report = JSON.parse(both.stdout);
    assert.equal(report.comparison[0].name, 'opus-scores', 'the name is the file stem');
    assert.equal(report.comparison[0].log, opusLog);
    assert.ok(Math.abs(report.comparison[0].cost_usd_per_transcript - 0.025) < 1e-12);

    const one = JSON.parse((await run([...base, '--scores', opus, '--log', opusLog])).stdout);
    assert.ok(!('comparison' in one));
  });

  test('--min-kappa gates every judge given, each on its own report, naming it; --gate-judge one', async (t) => {
    const { args } = setUp(t);
    // On its own rows sonnet's kappa is 0.8 (p6 has no human row); opus's, with p5 off by two,
    // 1 - 8/12.8 = 0.375 (observed 2 pairs x 4; expected from the margins (2, 4, 4), (4, 4, 2)).
    const every = await run([...args, '--min-kappa', '0.7', '--format', 'json']);
    assert.equal(every.code, 1);
    const failures = JSON.parse(every.stdout).gate.failures;
    assert.deepEqual(
      failures.map((failure: { judge: string }) => failure.judge),
      DIMENSIONS.map(() => 'opus'),
    );
    assert.match(
      every.stderr,
      new RegExp(`^report: gate failed: opus ${DIMENSIONS[0]} kappa 0\\.375 `),
    );

    const sonnetOnly = await run([...args, '--min-kappa', '0.7', '--gate-judge', 'sonnet']);
    assert.equal(sonnetOnly.code, 0, sonnetOnly.stderr);
    assert.match(sonnetOnly.stdout, /\ngate passed: kappa at or above its threshold/);

    const nobody = await run([...args, '--min-kappa', '0.7', '--gate-judge', 'gpt']);
    assert.equal(nobody.code, 2);
    assert.match(
      nobody.stderr,
      mentioning('--gate-judge gpt', 'no judge of that name', 'opus, sonnet'),
    );
  });

  test('--jury adds the judge "jury": members in the order given, every figure, cost the sum or null', async (t) => {
    const { args, humans, opus, opusLog } = setUp(t);
    const { code, stdout } = await run([...args, '--jury', '--format', 'json']);
    assert.equal(code, 0);
    const comparison = JSON.parse(stdout).comparison;
    const jury = comparison.at(-1);
    assert.deepEqual(
      [jury.name, jury.members, jury.scores, jury.log],
      ['jury', ['opus', 'sonnet'], null, null],
    );
    assert.equal(jury.cost_usd_per_transcript, null, "sonnet's p3 cost is unknown");
    assert.deepEqual(Object.keys(jury.dimensions[0]), Object.keys(comparison[0].dimensions[0]));
    // Of two, the lower: opus (0, 1, 2, 1) and sonnet (0, 2, 2, 1) give opus's scores, kappa 1.
    assert.equal(jury.dimensions[0].kappa, 1);
    const table = await run([...args, '--jury']);
    assert.match(table.stdout, /^jury +1\.00 \[too few\]/m);
    assert.match(table.stdout, /^jury +opus, sonnet +unknown$/m);

    const alone = await run([
      '--scores',
      opus,
      '--log',
      opusLog,
      '--human-scores',
      humans,
      '--rubric',
      RUBRIC_FILE,
      '--jury',
    ]);
    assert.equal(alone.code, 2);
    assert.match(alone.stderr, mentioning('--jury needs two or more judges'));
  });

  test("any judge's CSV given as the human scores is refused, the second's too", async (t) => {
    const { opus, sonnet, opusLog } = setUp(t);
    const args = ['--scores', opus, '--scores', sonnet, '--log', opusLog, '--rubric', RUBRIC_FILE];
    const { code, stdout, stderr } = await run([...args, '--human-scores', sonnet]);
    assert.equal(code, 2);
    assert.equal(stdout, '');
    assert.match(stderr, mentioning(sonnet, "is the judge's score CSV"));
  });

  test('two judges of the same name, or a --log for no judge: a usage error saying what to do', async (t) => {
    const { dir, opus, humans } = setUp(t);
    const twin = path.join(dir, 'other');
    fs.mkdirSync(twin);
    fs.copyFileSync(opus, path.join(twin, 'opus-scores.csv'));
    const base = ['--human-scores', humans, '--rubric', RUBRIC_FILE];
    const same = await run([
      ...base,
      '--scores',
      opus,
      '--scores',
      path.join(twin, 'opus-scores.csv'),
    ]);
    assert.equal(same.code, 2);
    assert.match(
      same.stderr,
      /^report: --scores: two judges named "opus-scores"; name each as --scores NAME=file\n$/,
    );

    const stray = await run([...base, '--scores', opus, '--log', 'gpt=x.jsonl']);
    assert.equal(stray.code, 2);
    assert.match(stray.stderr, mentioning('--log gpt=x.jsonl', 'names no judge', 'opus-scores'));
  });
});

describe("self-preference: the judge's family from its audit log, the tutors' from --models", () => {
  test("the judge one point above people on its own family's tutor only: own 1, other 0, diff 1", async (t) => {
    const dir = tempDir(t);
    const humans = path.join(dir, 'human.csv');
    const people = ['p1', 'p2'].flatMap((task) => {
      return ['m1', 'm2'].map((model) => `${task},${model},${same(0)},,al\n`);
    });
    fs.writeFileSync(humans, `${HEADER},scorer\n${people.join('')}`);
    const scores = path.join(dir, 'judge.csv');
    const judged = ['p1', 'p2'].flatMap((task) => {
      return [`${task},m1,${same(1)},ok\n`, `${task},m2,${same(0)},ok\n`];
    });
    fs.writeFileSync(scores, `${HEADER}\n${judged.join('')}`);
    const lines = ['p1', 'p2'].flatMap((task_id) => {
      return ['m1', 'm2'].map((model) => {
        const answers = [{ judge: 'judge-a', family: 'anthropic', scores: {} }];
        return `${logLine({ task_id, model, answers })}\n`;
      });
    });
    fs.writeFileSync(path.join(dir, 'judge.jsonl'), lines.join(''));
    const models = JSON.parse(fs.readFileSync(DEFAULTS.models, 'utf8'));
    models.models = [
      { name: 'm1', provider: 'anthropic' },
      { name: 'm2', provider: 'local', family: 'meta' },
    ];
    const modelsFile = writeJson(path.join(dir, 'models.json'), models);
    const base = ['--scores', scores, '--human-scores', humans, '--rubric', RUBRIC_FILE];
    const { code, stdout, stderr } = await run([
      ...base,
      '--models',
      modelsFile,
      '--format',
      'json',
    ]);
    assert.equal(code, 0, stderr);
    const preference = JSON.parse(stdout).self_preference;
    assert.equal(preference.family, 'anthropic');
    assert.deepEqual(preference.dimensions[0], {
      name: DIMENSIONS[0],
      own_n: 2,
      other_n: 2,
      own_tutors: 1,
      other_tutors: 1,
      own_leniency: 1,
      other_leniency: 0,
      diff: 1,
      ci95: null,
      verdict: 'undetermined',
      reason: ONE_OWN_TUTOR,
    });

    const missing = await run([...base, '--models', path.join(dir, 'none.json')]);
    assert.equal(missing.code, 2);

    // --dir STUDY reads STUDY/models.json, not the project's (which names neither tutor)
    const study = await run([...base, '--dir', dir, '--format', 'json']);
    assert.equal(study.code, 0, study.stderr);
    const fromStudy = JSON.parse(study.stdout).self_preference;
    assert.equal(fromStudy.family, 'anthropic');
    assert.equal(fromStudy.dimensions[0].diff, 1);
  });
});

describe('the CI gate: --min-kappa, exit 1 naming each dimension below its threshold', () => {
  // The judge says (0, 2, 2, 1) where people say (0, 1, 2, 1): kappa 0.8 on every dimension (by hand
  // above); its interval's lower end is below 0.7.
  function setUp(t: TestContext) {
    const dir = tempDir(t);
    const humans = humanCsv(dir, { p1: 0, p2: 1, p3: 2, p4: 1 });
    const scores = judgeCsv(dir, 'judge.csv', { p1: 0, p2: 2, p3: 2, p4: 1 });
    const log = path.join(dir, 'none.jsonl');
    return ['--scores', scores, '--log', log, '--human-scores', humans, '--rubric', RUBRIC_FILE];
  }

  test('every kappa at or above the threshold: exit 0, the report printed, the verdict last', async (t) => {
    const args = setUp(t);
    const { code, stdout, stderr } = await run([...args, '--min-kappa', '0.8']);
    assert.equal(code, 0);
    assert.match(stdout, /^dimension +n +exact/m, 'the report is printed');
    assert.match(
      stdout,
      /\ngate passed: kappa at or above its threshold on every dimension checked\n$/,
    );
    assert.equal(stderr, '');
  });

  test('below the threshold: exit 1, each dimension named with its figure; the report printed anyway', async (t) => {
    const args = setUp(t);
    const { code, stdout, stderr } = await run([...args, '--min-kappa', '0.9']);
    assert.equal(code, 1);
    assert.match(stdout, /^dimension +n +exact/m);
    const failures = DIMENSIONS.map((name) => `${name} kappa 0.8 (threshold 0.9)`);
    assert.ok(stdout.endsWith(`\ngate failed: ${failures.join('; ')}\n`), stdout.slice(-300));
    assert.equal(stderr, `report: gate failed: ${failures.join('; ')}\n`);
  });

  test('per dimension: a named threshold over the plain one; the JSON `gate`', async (t) => {
    const args = setUp(t);
    const dimension = DIMENSIONS[1]!;
    const gateArgs = ['--min-kappa', '0.5', '--min-kappa', `${dimension}=0.85`, '--format', 'json'];
    const { code, stdout } = await run([...args, ...gateArgs]);
    assert.equal(code, 1);
    const report = JSON.parse(stdout);
    assert.equal(report.gate.passed, false);
    assert.equal(report.gate.failures.length, 1);
    const [failure] = report.gate.failures;
    assert.deepEqual([failure.dimension, failure.threshold], [dimension, 0.85]);
    assert.ok(Math.abs(failure.figure - 0.8) < 1e-12);
    assert.deepEqual(Object.keys(report).slice(-2), ['judges', 'gate']);

    const passed = await run([...args, '--min-kappa', `${dimension}=0.8`, '--format', 'json']);
    assert.equal(passed.code, 0);
    assert.deepEqual(JSON.parse(passed.stdout).gate, { passed: true, failures: [] });
  });

  test("--on lower: the interval's lower end is checked, not the kappa", async (t) => {
    const args = setUp(t);
    const json = JSON.parse((await run([...args, '--format', 'json'])).stdout);
    const lower = json.dimensions[0].judge_vs_human.kappa_ci95[0];
    assert.ok(lower < 0.7, `lower end ${lower}`);

    assert.equal((await run([...args, '--min-kappa', '0.7'])).code, 0);
    const { code, stdout } = await run([...args, '--min-kappa', '0.7', '--on', 'lower']);
    assert.equal(code, 1);
    const shown = String(Number(lower.toFixed(6)));
    const expected = `${DIMENSIONS[0]} kappa's 95% CI lower end ${shown} (threshold 0.7)`;
    assert.ok(stdout.includes(`\ngate failed: ${expected}; `), stdout.slice(-400));
  });

  test('a kappa equal to its threshold passes, though floating point puts it 1e-16 below', async (t) => {
    // People (0, 2, 0, 1, 2, 0), the judge (2, 0, 0, 0, 1, 1): observed (11/4)/6 = 11/24, expected
    // 50/4/36 = 25/72 by hand, so kappa is 1 - 1.32 = -0.32 exactly.
    const dir = tempDir(t);
    const humans = humanCsv(dir, { p1: 0, p2: 2, p3: 0, p4: 1, p5: 2, p6: 0 });
    const scores = judgeCsv(dir, 'judge.csv', { p1: 2, p2: 0, p3: 0, p4: 0, p5: 1, p6: 1 });
    const args = ['--scores', scores, '--human-scores', humans, '--rubric', RUBRIC_FILE];
    const base = [...args, '--log', path.join(dir, 'x'), '--format', 'json'];
    const kappa = JSON.parse((await run(base)).stdout).dimensions[0].judge_vs_human.kappa;
    assert.ok(kappa < -0.32 && kappa > -0.32 - 1e-12, `kappa ${kappa}`);
    assert.equal((await run([...base, '--min-kappa', '-0.32'])).code, 0);
    assert.equal((await run([...base, '--min-kappa', '-0.319999'])).code, 1);
  });

  test('a kappa that is unknown (null) fails the gate, named "unknown"', async (t) => {
    const dir = tempDir(t);
    const humans = humanCsv(dir, { p1: 2, p2: 2 });
    const scores = judgeCsv(dir, 'judge.csv', { p1: 2, p2: 2 });
    const args = ['--scores', scores, '--human-scores', humans, '--rubric', RUBRIC_FILE];
    const { code, stdout } = await run([...args, '--log', path.join(dir, 'x'), '--min-kappa', '0']);
    assert.equal(code, 1);
    assert.match(
      stdout,
      new RegExp(`\\ngate failed: ${DIMENSIONS[0]} kappa unknown \\(threshold 0\\); `),
    );
  });

  test('the process exits 1 on a failed gate, 0 on a passed one (what a CI job sees)', (t) => {
    const args = setUp(t);
    const report = path.join(REPO, 'report.ts');
    const exitOf = (threshold: string) => {
      const child = [...args, '--min-kappa', threshold];
      return spawnSync(process.execPath, [bundled(report).main, ...child]).status;
    };
    assert.deepEqual([exitOf('0.9'), exitOf('0.8')], [1, 0]);
  });

  test('Markdown ends with the verdict line, for a CI job summary', async (t) => {
    const args = setUp(t);
    const { code, stdout } = await run([...args, '--min-kappa', '0.9', '--format', 'markdown']);
    assert.equal(code, 1);
    assert.match(stdout, /\n\ngate failed: [^\n]+\n$/);
  });

  test('a dimension the rubric lacks, a figure that is no kappa, or a threshold given twice: a usage error', async (t) => {
    const args = setUp(t);
    const unknown = await run([...args, '--min-kappa', 'rigour=0.5']);
    assert.equal(unknown.code, 2);
    assert.match(
      unknown.stderr,
      mentioning('--min-kappa rigour=0.5', 'no dimension "rigour"', DIMENSIONS.join(', ')),
    );
    assert.equal(unknown.stdout, '', 'refused before any report');
    for (const bad of [['high'], ['1.5'], ['0.5', '0.6'], [`${DIMENSIONS[0]}=`]]) {
      const result = await run([...args, ...bad.flatMap((value) => ['--min-kappa', value])]);
      assert.equal(result.code, 2, bad.join(' '));
      assert.match(result.stderr, /^report: --min-kappa [^\n]+\n$/);
    }
    const onAlone = await run([...args, '--on', 'lower']);
    assert.equal(onAlone.code, 2);
    assert.match(onAlone.stderr, /give --min-kappa too/);
  });
});

describe('which log goes with which judge', () => {
  test('the default CSV reads the default log; another CSV its own .jsonl; --log by name or position', () => {
    assert.deepEqual(judgeInputs([], []), [
      { name: 'judge_scores', scores: DEFAULTS.output, log: DEFAULTS.log },
    ]);
    assert.deepEqual(judgeInputs(['a/opus.csv', 'sonnet=b/s.csv'], ['x.jsonl']), [
      { name: 'opus', scores: 'a/opus.csv', log: 'x.jsonl' },
      { name: 'sonnet', scores: 'b/s.csv', log: path.join('b', 's.jsonl') },
    ]);
    assert.deepEqual(
      judgeInputs(['a/opus.csv', 'sonnet=b/s.csv'], ['sonnet=y.jsonl']).map((judge) => judge.log),
      [path.join('a', 'opus.jsonl'), 'y.jsonl'],
    );
    assert.throws(() => judgeInputs(['a.csv'], ['x.jsonl', 'y.jsonl']), {
      message: '--log y.jsonl is log 2 of 1 judges',
    });
    assert.throws(() => judgeInputs(['a.csv'], ['a=x.jsonl', 'a=y.jsonl']), {
      message: mentioning('--log a=y.jsonl', 'already has a --log'),
    });
  });
});

describe('output a person reads: within 100 columns, --wide, notes, --format latex', () => {
  function setUp(t: TestContext) {
    const dir = tempDir(t);
    const people: Record<string, number> = {};
    const first: Record<string, number> = {};
    const second: Record<string, number> = {};
    for (let i = 1; i <= 40; i++) {
      people[`p${i}`] = i % 3;
      first[`p${i}`] = i % 7 === 0 ? (i + 1) % 3 : i % 3;
      second[`p${i}`] = i % 4 === 0 ? 2 : i % 3;
    }
    // p41..p45 judged, never scored by people: listed as a count and the first three.
    for (let i = 41; i <= 45; i++) {
      first[`p${i}`] = 1;
      second[`p${i}`] = 1;
    }
    const humans = humanCsv(dir, people, ['al', 'bo']);
    const a = judgeCsv(dir, 'a.csv', first);
    const b = judgeCsv(dir, 'b.csv', second);
    return [
      '--scores',
      a,
      '--scores',
      b,
      '--human-scores',
      humans,
      '--rubric',
      RUBRIC_FILE,
      '--jury',
    ];
  }

  test('every line of the text output within 100 columns; the missing list a count and three names', async (t) => {
    const { code, stdout } = await run(setUp(t));
    assert.equal(code, 0);
    const long = stdout.split('\n').filter((line) => line.length > 100);
    assert.deepEqual(long, []);
    assert.match(stdout, /; no human row: 5 \(m1\/p41, m1\/p42, m1\/p43, \.\.\.\);/);
    assert.match(
      stdout,
      /;\n  rows by judge: no audit log\n/,
      'the summary wrapped at 100 columns',
    );
    for (const title of [
      'the judge against the people:',
      'against the human ceiling',
      'reliability:',
    ]) {
      assert.ok(stdout.includes(title), title);
    }
    assert.match(stdout, /verdict at margin 0\.1 \(--margin\)/);
  });

  test('--wide: the dimensions in one table, wider than 100 columns', async (t) => {
    const { stdout } = await run([...setUp(t), '--wide']);
    const header = stdout.split('\n').find((line) => line.startsWith('dimension '))!;
    assert.ok(header.length > 100, header);
    assert.match(header, /kappa \[95% CI\].*ceiling kappa \[95% CI\].*alpha people/);
  });

  test('--format latex: the per-dimension table as a booktabs tabular, names escaped', async (t) => {
    const { code, stdout } = await run([...setUp(t), '--format', 'latex']);
    assert.equal(code, 0);
    // The first tabular (the tutors' estimates follow in a second one).
    const end = '\\end{tabular}';
    const lines = stdout
      .slice(0, stdout.indexOf(end) + end.length)
      .split('\n')
      .filter((line) => !line.startsWith('%'));
    assert.match(lines[0]!, /^\\begin\{tabular\}\{lrrr[lr]+\}$/);
    assert.deepEqual(
      [lines[1], lines[3], lines.at(-2), lines.at(-1)],
      ['\\toprule', '\\midrule', '\\bottomrule', '\\end{tabular}'],
    );
    assert.equal(lines.length, 4 + DIMENSIONS.length + 2);
    assert.match(lines[4]!, /^mathematical\\_correctness & 80 & /);
    const rows = lines.filter((line) => !line.startsWith('\\'));
    assert.ok(rows.every((line) => line.endsWith(' \\\\')));
  });
});

describe('LaTeX a paper can include whatever the names hold', () => {
  test('a tutor named with a newline and \\input: its note stays one comment line; minus is math', async (t) => {
    const dir = tempDir(t);
    const humans = humanCsv(dir, { p1: 1, p2: 2, p3: 2, p4: 1 });
    const scores = judgeCsv(dir, 'judge.csv', { p1: 0, p2: 1, p3: 2, p4: 1 });
    // a tutor of its own, scored by both: the per-tutor notes name it
    const evil = '"evil\n\\input{secrets}"';
    fs.appendFileSync(humans, `p1,${evil},${same(1)},,al\np2,${evil},${same(2)},,al\n`);
    fs.appendFileSync(scores, `p1,${evil},${same(1)},ok\np2,${evil},${same(1)},ok\n`);

    const { code, stdout, stderr } = await run([
      '--scores',
      scores,
      '--human-scores',
      humans,
      '--rubric',
      RUBRIC_FILE,
      '--format',
      'latex',
    ]);
    assert.equal(code, 0, stderr);
    assert.match(stdout, /evil\\n\\input\{secrets\}/, 'the name is in a note');
    const live = stdout.split('\n').filter((line) => line !== '' && !line.startsWith('%'));
    assert.ok(
      live.every((line) => !line.includes('input{secrets}')),
      `a live line holds the name:\n${live.join('\n')}`,
    );
    assert.match(stdout, /\$-\$0\.\d/, 'a negative figure written with a math minus');
    assert.doesNotMatch(stdout.replace(/^%.*$/gm, ''), /(^|[ &[(])-\d/m, 'no hyphen as minus');

    const text = await run(['--scores', scores, '--human-scores', humans, '--rubric', RUBRIC_FILE]);
    assert.match(text.stdout, /evil\\n\\input\{secrets\}/, 'the name in a text note');
    assert.doesNotMatch(text.stdout, /^\\input/m, 'a name split over two lines');
  });
});

describe("report.ts's messages and the files it refuses", () => {
  function setUp(t: TestContext) {
    const dir = tempDir(t);
    const humans = humanCsv(dir, { p1: 0, p2: 1 });
    const scores = judgeCsv(dir, 'judge.csv', { p1: 0, p2: 1 });
    return {
      dir,
      scores,
      args: ['--scores', scores, '--human-scores', humans, '--rubric', RUBRIC_FILE],
    };
  }

  test('a judge CSV that is not UTF-8 is refused, as run-judge refuses it, naming the file', async (t) => {
    const { scores, args } = setUp(t);
    const latin1 = Buffer.concat([fs.readFileSync(scores), Buffer.from('p\xe93,m1,', 'latin1')]);
    fs.writeFileSync(scores, Buffer.concat([latin1, Buffer.from(`${same(1)},ok\n`)]));
    const { code, stdout, stderr } = await run([...args, '--log', 'none.jsonl']);
    assert.equal(code, 2);
    assert.equal(stdout, '');
    assert.equal(stderr, `report: ${scores}: not valid UTF-8 text; save it as UTF-8\n`);
  });

  test('judges named `constructor` and `__proto__` are counted right, the JSON an object keyed by judge', async (t) => {
    const { args } = setUp(t);
    const log = writeLog(t, [
      logLine({ task_id: 'p1', judge: 'constructor' }),
      logLine({ task_id: 'p2', judge: '__proto__' }),
    ]);
    const { code, stdout } = await run([...args, '--log', log, '--format', 'json']);
    assert.equal(code, 0);
    const judges = JSON.parse(stdout).judges;
    assert.equal(Object.getPrototypeOf(judges), Object.prototype, 'a plain object');
    assert.deepEqual(Object.entries(judges), [
      ['constructor', 1],
      ['__proto__', 1],
    ]);
    const table = await run([...args, '--log', log]);
    assert.match(table.stdout, /rows by judge: constructor 1, __proto__ 1\n/);
  });

  test('a mistyped command (`sheets`) is an unknown command with a did-you-mean, on one line', async () => {
    const { code, stderr } = await run(['sheets']);
    assert.equal(code, 2);
    assert.equal(
      stderr,
      'report: unknown command "sheets" (did you mean "sheet"?); the commands are sheet, ' +
        'agreement (the default), view, import\n',
    );
  });

  test('under npm run, an unknown command that is a flag npm took gets the -- hint', async () => {
    const { code, stderr } = await runReport(['json'], { npm_lifecycle_event: 'report' });
    assert.equal(code, 2);
    assert.match(
      stderr,
      /unknown command "json".*put -- before the script's flags: npm run report -- --format json\n$/,
    );
  });

  test("--help lists the report's own flags, and names the plan's help", async () => {
    const { code, stdout } = await run(['--help']);
    assert.equal(code, 0);
    for (const flag of ['--format', '--scores', '--min-kappa', '--margin', '--jury', '--dir']) {
      assert.match(stdout, new RegExp(`^  ${flag} `, 'm'), flag);
    }
    assert.match(stdout, /report sheet --help/);
  });

  test('a usage error is one line, with the suggestion', async () => {
    const { code, stderr } = await run(['--scroes', 'x.csv']);
    assert.equal(code, 2);
    assert.equal(
      stderr,
      "report: unknown option '--scroes' (Did you mean --scores?) (see --help)\n",
    );
  });

  test('--version prints the version of package.json', async () => {
    const { version } = JSON.parse(
      fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8'),
    );
    const { code, stdout } = await run(['--version']);
    assert.deepEqual([code, stdout], [0, `${version}\n`]);
  });

  test('--html says where it wrote the page', async (t) => {
    const { dir, args } = setUp(t);
    const page = path.join(dir, 'report.html');
    const { code, stderr } = await run([...args, '--log', 'none.jsonl', '--html', page]);
    assert.equal(code, 0);
    assert.ok(fs.existsSync(page));
    assert.equal(stderr, `report: wrote the page to ${page}\n`);
  });

  test('--log given a folder: one line naming it, no stack trace', async (t) => {
    const { dir, args } = setUp(t);
    const { code, stderr } = await run([...args, '--log', dir]);
    assert.equal(code, 2);
    assert.equal(stderr, `report: --log ${dir}: a folder, not an audit log (.jsonl)\n`);
  });

  test('--scores or --rubric given a folder: one line naming it and what to do', async (t) => {
    const { dir, args } = setUp(t);
    for (const option of ['--scores', '--rubric']) {
      const { code, stderr } = await run([...args, option, dir]);
      assert.equal(code, 2);
      assert.equal(stderr, `report: ${dir}: a folder, not a file: name the file\n`);
    }
  });

  test("a row's samples without a dimension of the rubric: an error naming the line (a replaced entry is not read)", async (t) => {
    const { args } = setUp(t);
    const log = writeLog(t, [
      logLine({ sample_scores: [{ rigor: 1 }, { rigor: 2 }] }), // p1's first, replaced below
      logLine({ sample_scores: samples(1, 1) }),
      logLine({ task_id: 'p2', sample_scores: [{ rigor: 1 }, { rigor: 2 }] }),
    ]);
    const { code, stdout, stderr } = await run([...args, '--log', log]);
    assert.equal(code, 2);
    assert.equal(stdout, '');
    assert.equal(
      stderr,
      `report: ${log}: line 3: sample_scores[0].${DIMENSIONS[0]}: no score; is this log of another rubric?\n`,
    );
  });

  for (const [what, sampleScores, problem] of [
    ['a string', 'abc', 'sample_scores: Invalid input: expected array, received string'],
    ['nulls', [{}, null], 'sample_scores[1]: Invalid input: expected record, received null'],
    [
      'a null score',
      [{ rigor: null }],
      'sample_scores[0].rigor: Invalid input: expected number, received null',
    ],
  ] as const) {
    test(`an audit line whose sample_scores is ${what}: an error naming the file and line`, async (t) => {
      const { args } = setUp(t);
      const log = writeLog(t, [
        logLine({}),
        logLine({ task_id: 'p2', sample_scores: sampleScores }),
      ]);
      const { code, stderr } = await run([...args, '--log', log]);
      assert.equal(code, 2);
      assert.equal(stderr, `report: ${log}: line 2: ${problem}\n`);
    });
  }
});
