// The scoring plan (`report.ts sheet --scorers`): which transcripts people score, who scores each,
// and the sheets it writes, never over anyone's work.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import type { TestContext } from 'node:test';
import { parse as parseCsv } from 'csv-parse/sync';
import {
  REPO,
  RUBRIC_FILE,
  addTaskFiles,
  makeWorkspace,
  readCsv,
  runMain,
  runReport,
  sha256,
  snapshot,
  tempDir,
} from './helpers.ts';
import type { Workspace } from './helpers.ts';

const { planScoring, sampleMore, sampleSize } = await import('../report/sheet.ts');
const { mulberry32 } = await import('../report/analysis.ts');
const { SHEET_COLUMNS, isComplete, loadRubric, pairKey, readHumanScores, scoreColumns } =
  await import('../run-judge.ts');
const rubric = loadRubric(RUBRIC_FILE);

type Pair = { task_id: string; model: string };

/** Every (model, task) of a grid, `missing` left out. */
function grid(models: number, tasks: number, missing: string[] = []): Pair[] {
  const pairs: Pair[] = [];
  for (let m = 1; m <= models; m++) {
    for (let t = 1; t <= tasks; t++) {
      const pair = { model: `m${m}`, task_id: `t${t}` };
      if (!missing.includes(`m${m}/t${t}`)) {
        pairs.push(pair);
      }
    }
  }
  return pairs;
}

/** How many of `pairs` each name (model or task) has, every name of `all` counted. */
function counts(pairs: Pair[], all: Pair[], key: (pair: Pair) => string): number[] {
  const tally = new Map(all.map((pair) => [key(pair), 0]));
  for (const pair of pairs) {
    tally.set(key(pair), tally.get(key(pair))! + 1);
  }
  return [...tally.values()];
}

const spread = (values: number[]) => Math.max(...values) - Math.min(...values);
const label = (pair: Pair) => `${pair.model}/${pair.task_id}`;

/** A workspace with `models` × `tasks` transcripts and the plan's folder inside it. */
function workspace(t: TestContext, models: number, tasks: number): Workspace & { out: string } {
  const taskIds = Array.from({ length: tasks }, (_, i) => `proof${String(i + 1).padStart(2, '0')}`);
  const ws = makeWorkspace({ models, tasks: taskIds });
  addTaskFiles(
    ws,
    taskIds.filter((id) => !fs.existsSync(path.join(ws.tasks, `${id}.json`))),
  );
  t.after(() => ws.remove());
  return Object.assign(ws, { out: path.join(ws.dir, 'human') });
}

/** `sheet --scorers ...` on a workspace, into its plan folder. */
function plan(ws: Workspace & { out: string }, ...args: string[]) {
  const paths = ['--transcripts', ws.transcripts, '--tasks', ws.tasks];
  const more = ['--reference-keys', ws.referenceKeys, '--rubric', ws.rubric, '--out', ws.out];
  return runReport(['sheet', ...paths, ...more, ...args]);
}

/** A sheet's records as objects by column. */
function sheetRows(file: string): Record<string, string>[] {
  return parseCsv(fs.readFileSync(file), { columns: true });
}

describe('the sample: its size, and every model and task as evenly represented as it allows', () => {
  test('--sample N takes N; P% takes P% rounded, at least one; without it, all', () => {
    assert.equal(sampleSize('5', 12), 5);
    assert.equal(sampleSize('12', 12), 12);
    assert.equal(sampleSize('25%', 12), 3);
    assert.equal(sampleSize('30%', 12), 4, '3.6 rounds to 4');
    assert.equal(sampleSize('2.5%', 12), 1, 'at least one');
    assert.equal(sampleSize('100%', 12), 12);
    assert.equal(sampleSize(undefined, 12), 12);
  });

  test('a full grid: for every size and several seeds, models and tasks each within one', () => {
    const pairs = grid(4, 5);
    for (let size = 1; size <= pairs.length; size++) {
      for (const seed of [0, 1, 7, 123456]) {
        const chosen = planScoring(pairs, { scorers: ['a'], size, overlap: 1, seed }).chosen;
        const what = `size ${size}, seed ${seed}: ${chosen.map(label)}`;
        assert.equal(chosen.length, size, what);
        assert.equal(new Set(chosen.map(label)).size, size, `no transcript twice: ${what}`);
        assert.ok(spread(counts(chosen, pairs, (pair) => pair.model)) <= 1, `models: ${what}`);
        assert.ok(spread(counts(chosen, pairs, (pair) => pair.task_id)) <= 1, `tasks: ${what}`);
      }
    }
  });

  test('a model lacking tasks: every model is in the sample, the others take up its share', () => {
    // m1 has one transcript; m2 and m3 have all three tasks.
    const pairs = grid(3, 3, ['m1/t2', 'm1/t3']);
    for (const seed of [0, 1, 2, 3]) {
      const three = planScoring(pairs, { scorers: ['a'], size: 3, overlap: 1, seed }).chosen;
      assert.deepEqual(
        counts(three, pairs, (pair) => pair.model),
        [1, 1, 1],
        three.map(label).join(),
      );
      assert.deepEqual(
        counts(three, pairs, (pair) => pair.task_id),
        [1, 1, 1],
        three.map(label).join(),
      );

      const five = planScoring(pairs, { scorers: ['a'], size: 5, overlap: 1, seed }).chosen;
      assert.deepEqual(
        counts(five, pairs, (pair) => pair.model),
        [1, 2, 2],
        five.map(label).join(),
      );
      assert.ok(spread(counts(five, pairs, (pair) => pair.task_id)) <= 1, five.map(label).join());
    }
  });

  test('the same seed gives the same plan; other seeds give others', () => {
    const pairs = grid(3, 4);
    const options = { scorers: ['alice', 'bob', 'carol'], size: 6, overlap: 2, seed: 42 };
    assert.deepEqual(planScoring(pairs, options), planScoring(pairs, options));

    const samples = new Set<string>();
    const assignments = new Set<string>();
    for (const seed of [1, 2, 3, 4, 5]) {
      const each = planScoring(pairs, { scorers: options.scorers, size: 6, overlap: 2, seed });
      samples.add(each.chosen.map(label).join());
      assignments.add(JSON.stringify([...each.assignments]));
    }
    assert.ok(samples.size > 1, `five seeds, one sample: ${[...samples]}`);
    assert.ok(assignments.size > 1, 'five seeds, one assignment');
  });
});

describe('the assignment: each chosen transcript to K scorers, the work within one', () => {
  test('for every K up to the scorers, each transcript is in exactly K sheets, loads within one', () => {
    const pairs = grid(3, 4);
    const scorers = ['alice', 'bob', 'carol', 'dan'];
    for (const size of [1, 5, 7, 12]) {
      for (let overlap = 1; overlap <= scorers.length; overlap++) {
        const result = planScoring(pairs, { scorers, size, overlap, seed: size * 10 + overlap });
        const what = `size ${size}, K ${overlap}`;
        assert.deepEqual([...result.assignments.keys()], scorers, what);

        const sheetsOf = new Map(result.chosen.map((pair) => [label(pair), 0]));
        for (const assigned of result.assignments.values()) {
          assert.equal(new Set(assigned.map(label)).size, assigned.length, `no row twice: ${what}`);
          for (const pair of assigned) {
            sheetsOf.set(label(pair), sheetsOf.get(label(pair))! + 1);
          }
        }
        assert.deepEqual(new Set(sheetsOf.values()), new Set([overlap]), what);
        const loads = [...result.assignments.values()].map((assigned) => assigned.length);
        assert.ok(spread(loads) <= 1, `${what}: loads ${loads}`);
      }
    }
  });
});

describe("a plan's sample topped up after transcripts are added: the plan's own kept", () => {
  const keys = (pairs: Pair[]) => new Set(pairs.map((pair) => pairKey(pair.task_id, pair.model)));

  test('a tutor added, or a task for every tutor: only transcripts the plan lacks, each tutor within one, the size the rule gives now', () => {
    const before = grid(4, 8);
    const afters = [grid(5, 8), grid(4, 9), grid(5, 9, ['m5/t1', 'm5/t2'])];
    for (const [i, after] of afters.entries()) {
      for (const share of ['25%', '50%', '3%', '90%']) {
        for (const seed of [0, 1, 7, 123456]) {
          const options = { scorers: ['a'], overlap: 1, seed };
          const size = sampleSize(share, before.length);
          const planned = planScoring(before, Object.assign({ size }, options)).chosen;
          const rule = { size: sampleSize(share, after.length) };
          const added = sampleMore(after, keys(planned), rule, mulberry32(seed));
          const what = `after ${i}, ${share}, seed ${seed}: ${added.map(label)}`;
          const held = keys(planned);
          assert.ok(
            added.every((pair) => !held.has(pairKey(pair.task_id, pair.model))),
            what,
          );
          assert.equal(keys(added).size, added.length, `none twice: ${what}`);
          const all = [...planned, ...added];
          assert.equal(all.length, Math.max(size, rule.size), what);
          assert.ok(spread(counts(all, after, (pair) => pair.model)) <= 1, `tutors: ${what}`);
          if (i < 2) {
            assert.ok(spread(counts(all, after, (pair) => pair.task_id)) <= 1, `tasks: ${what}`);
          }
        }
      }
    }
  });

  test('per-tutor shares: each tutor brought to its share, never below what the plan holds; the same seed, the same draw', () => {
    const before = grid(3, 4);
    const planned = planScoring(before, { scorers: ['a'], size: 6, overlap: 1, seed: 3 }).chosen;
    const after = grid(4, 4);
    const shares = new Map([
      ['m1', 4],
      ['m2', 1],
      ['m4', 3],
    ]);
    const rule = { size: 0, shares };
    const added = sampleMore(after, keys(planned), rule, mulberry32(5));
    assert.deepEqual(
      counts([...planned, ...added], after, (pair) => pair.model),
      [4, 2, 2, 3],
    );
    assert.deepEqual(sampleMore(after, keys(planned), rule, mulberry32(5)), added);
  });
});

describe('report.ts sheet --scorers: one sheet and one page per scorer in --out', () => {
  test("each sheet: the judge CSV's columns, unsure, scorer, each transcript file's sha256; the summary says who has what", async (t) => {
    const ws = workspace(t, 2, 3);
    const result = await plan(ws, '--scorers', 'alice, bob ,carol', '--overlap', '2');
    assert.equal(result.code, 0, result.stderr);

    const names = fs.readdirSync(ws.out).sort();
    const files = ['alice', 'bob', 'carol'].flatMap((name) => [`${name}.csv`, `${name}.html`]);
    assert.deepEqual(names, [...files, 'plan.json'].sort());

    const header = [...scoreColumns(rubric), 'unsure', 'scorer', 'transcript_sha256'];
    const seen = new Map<string, string[]>();
    for (const scorer of ['alice', 'bob', 'carol']) {
      const file = path.join(ws.out, `${scorer}.csv`);
      const text = fs.readFileSync(file, 'utf8');
      assert.equal(text.split('\n')[0], header.join(','));
      const rows = sheetRows(file);
      assert.equal(rows.length, 4, `${scorer}: 6 transcripts × 2 among 3 scorers`);
      for (const row of rows) {
        const bytes = fs.readFileSync(path.join(ws.transcripts, row.model!, `${row.task_id}.json`));
        assert.equal(row.transcript_sha256, sha256(bytes));
        assert.equal(row.scorer, scorer);
        const scores = rubric.dimensions.map((dimension) => row[dimension.name]);
        assert.deepEqual(
          new Set([...scores, row.notes, row.unsure]),
          new Set(['']),
          'nothing filled',
        );
        const key = `${row.model}/${row.task_id}`;
        seen.set(key, [...(seen.get(key) ?? []), scorer]);
      }
    }
    assert.equal(seen.size, 6, 'every transcript (no --sample)');
    for (const [key, scorers] of seen) {
      assert.equal(scorers.length, 2, `${key}: ${scorers}`);
    }

    assert.match(result.stdout, /^plan: 6 of 6 transcripts \(all\), each for 2 scorer\(s\)$/m);
    for (const scorer of ['alice', 'bob', 'carol']) {
      assert.match(result.stdout, new RegExp(`^  ${scorer}: 4 transcripts: `, 'm'));
    }
    assert.match(result.stdout, /more than one scorer \(for the human ceiling\): 6 transcripts$/m);
  });

  test('the sheets are what the gate reads: readHumanScores takes transcript_sha256, every row open', async (t) => {
    const ws = workspace(t, 2, 3);
    assert.equal((await plan(ws, '--scorers', 'alice,bob', '--sample', '50%')).code, 0);

    const rows = ['alice', 'bob'].flatMap((scorer) => {
      return readHumanScores(path.join(ws.out, `${scorer}.csv`), rubric);
    });
    assert.equal(rows.length, 3, '50% of 6, each once');
    assert.deepEqual(new Set(rows.map((row) => row.scorer)), new Set(['alice', 'bob']));
    assert.ok(
      rows.every((row) => !isComplete(row, rubric) && Object.keys(row.scores).length === 0),
    );
  });

  test('--sample with a seed: the sheets hold that many, every model in them; another seed, another plan', async (t) => {
    const ws = workspace(t, 3, 4);
    const chosen = async (seed: string) => {
      fs.rmSync(ws.out, { recursive: true, force: true });
      const result = await plan(ws, '--scorers', 'alice,bob', '--sample', '6', '--seed', seed);
      assert.equal(result.code, 0, result.stderr);
      assert.match(
        result.stdout,
        new RegExp(`6 of 12 transcripts \\(a sample stratified by model and task, seed ${seed}\\)`),
      );
      const rows = ['alice', 'bob'].flatMap((name) => sheetRows(path.join(ws.out, `${name}.csv`)));
      return rows.map((row) => `${row.model}/${row.task_id}:${row.scorer}`).sort();
    };

    const first = await chosen('5');
    assert.equal(first.length, 6);
    const models = first.map((key) => key.split('/')[0]!);
    const perModel = ['m01', 'm02', 'm03'].map((model) => models.filter((m) => m === model).length);
    assert.deepEqual(perModel, [2, 2, 2], first.join());
    assert.deepEqual(await chosen('5'), first, 'the same seed, the same plan');
    assert.notDeepEqual(await chosen('6'), first);
  });

  test('the default folder is evals/human/ under the current folder', async (t) => {
    const ws = workspace(t, 1, 2);
    const cwd = process.cwd();
    process.chdir(ws.dir);
    t.after(() => process.chdir(cwd));
    const paths = ['--transcripts', ws.transcripts, '--tasks', ws.tasks];
    const more = ['--reference-keys', ws.referenceKeys, '--rubric', ws.rubric];
    const result = await runReport(['sheet', ...paths, ...more, '--scorers', 'alice']);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(fs.readdirSync(path.join(ws.dir, 'evals', 'human')).sort(), [
      'alice.csv',
      'alice.html',
      'plan.json',
    ]);
  });

  test('--sample above the transcripts: the folder read is named; the default one, with --dir to read a study', async (t) => {
    const ws = workspace(t, 1, 2);
    fs.cpSync(ws.transcripts, path.join(ws.dir, 'evals', 'transcripts'), { recursive: true });
    const cwd = process.cwd();
    process.chdir(ws.dir);
    t.after(() => process.chdir(cwd));
    const here = await runReport(['sheet', '--scorers', 'alice', '--sample', '9']);
    assert.equal(here.code, 2);
    assert.equal(
      here.stderr,
      'report: --sample 9: there are only 2 transcripts in evals/transcripts, the default ' +
        "folder here; a study's own: --dir STUDY\n",
    );
    const args = ['--scorers', 'alice', '--sample', '9'];
    const study = await runReport(['sheet', '--dir', ws.dir, ...args]);
    assert.equal(study.code, 2);
    const folder = path.join(ws.dir, 'evals', 'transcripts');
    assert.equal(study.stderr, `report: --sample 9: there are only 2 transcripts in ${folder}\n`);
    assert.equal(fs.existsSync(path.join(ws.dir, 'evals', 'human')), false, 'nothing written');
  });

  test('rerun with the same arguments on an untouched plan: the same files, byte for byte', async (t) => {
    const ws = workspace(t, 2, 3);
    const args = ['--scorers', 'alice,bob,carol', '--sample', '4', '--overlap', '2', '--seed', '9'];
    const first = await plan(ws, ...args);
    assert.equal(first.code, 0, first.stderr);
    const contents = () => {
      const names = fs.readdirSync(ws.out).sort();
      return names.map((name) => [name, fs.readFileSync(path.join(ws.out, name), 'utf8')]);
    };
    const before = contents();

    const second = await plan(ws, ...args);
    assert.equal(second.code, 0, second.stderr);
    assert.equal(second.stdout, first.stdout);
    assert.deepEqual(contents(), before);
  });

  test('a sheet holding a score or a note: exit 2 naming it, and nothing written at all', async (t) => {
    const ws = workspace(t, 2, 3);
    const args = ['--scorers', 'alice,bob', '--overlap', '2'];
    assert.equal((await plan(ws, ...args)).code, 0);
    const bob = path.join(ws.out, 'bob.csv');
    const alice = path.join(ws.out, 'alice.csv');
    const blank = fs.readFileSync(bob, 'utf8');

    const fill = (file: string, column: string, value: string) => {
      const lines = fs.readFileSync(file, 'utf8').split('\n');
      const header = lines[0]!.split(',');
      const cells = lines[1]!.split(',');
      cells[header.indexOf(column)] = value;
      lines[1] = cells.join(',');
      fs.writeFileSync(file, lines.join('\n'));
    };

    for (const [column, value] of [
      [rubric.dimensions[2]!.name, '1'],
      ['notes', 'half read'],
    ] as const) {
      fs.writeFileSync(bob, blank);
      fill(bob, column, value);
      fs.rmSync(alice, { force: true });
      const before = snapshot(ws.out);

      // Asked again, and asked for another plan: both refused before anything is written.
      for (const again of [args, ['--scorers', 'alice,bob', '--seed', '3']]) {
        const result = await plan(ws, ...again);
        assert.equal(result.code, 2, `${column}: ${result.stdout}`);
        assert.equal(result.stderr.trimEnd().split('\n').length, 1, result.stderr);
        assert.match(result.stderr, /holds scores, never overwritten/);
        assert.ok(result.stderr.includes(bob), result.stderr);
        assert.equal(result.stdout, '');
        assert.deepEqual(snapshot(ws.out), before, 'alice.csv not rewritten either');
      }
    }
  });

  test('a CSV in the folder that is not a sheet of this plan: exit 2 naming it, nothing written', async (t) => {
    const ws = workspace(t, 2, 3);
    assert.equal((await plan(ws, '--scorers', 'alice,bob,carol')).code, 0);
    const before = snapshot(ws.out);

    const result = await plan(ws, '--scorers', 'alice,bob');
    assert.equal(result.code, 2);
    assert.match(result.stderr, /carol\.csv: not a sheet of this plan/);
    assert.deepEqual(snapshot(ws.out), before);
  });

  test('bad arguments: a one-line error naming the flag, exit 2, nothing written', async (t) => {
    const ws = workspace(t, 2, 3);
    const cases: [string[], RegExp][] = [
      [['--scorers', ''], /--scorers "": a name is empty/],
      [['--scorers', 'alice,,bob'], /a name is empty/],
      [['--scorers', 'alice, '], /a name is empty/],
      [['--scorers', 'al/ice'], /"al\/ice" cannot be a file name/],
      [['--scorers', '..'], /"\.\." cannot be a file name/],
      [['--scorers', 'bob<b>'], /"bob<b>" cannot be a file name/],
      [['--scorers', 'a:b'], /"a:b" cannot be a file name/],
      [['--scorers', 'alice,bob,Alice'], /"Alice" is named twice/],
      [['--scorers', 'alice,bob', '--overlap', '3'], /--overlap 3: more than the 2 scorer/],
      [['--scorers', 'alice', '--overlap', '0'], /--overlap 0: give a whole number/],
      [['--scorers', 'alice', '--overlap', 'two'], /--overlap two: give a whole number/],
      [['--scorers', 'alice', '--sample', '0'], /--sample 0: give a number of transcripts/],
      [['--scorers', 'alice', '--sample', '7'], /--sample 7: there are only 6 transcripts/],
      [['--scorers', 'alice', '--sample', '0%'], /--sample 0%: a share must be above 0%/],
      [['--scorers', 'alice', '--sample', '101%'], /at most 100%/],
      [['--scorers', 'alice', '--sample', 'half'], /--sample half: give a number/],
      [['--scorers', 'alice', '--seed', '-1'], /--seed -1: give a whole number/],
      [['--scorers', 'alice', '--seed', '1.5'], /--seed 1.5: give a whole number/],
      [['--scorers', 'a,b,c', '--sample', '2'], /leave some of the 3 scorers with nothing/],
      [['--scorers', 'alice', '--scorer', 'bob'], /--scorer and --scorers: give one/],
      [['--sample', '3'], /--sample needs --scorers/],
      [['--overlap', '2'], /--overlap needs --scorers/],
    ];
    for (const [args, message] of cases) {
      const result = await plan(ws, ...args);
      assert.equal(result.code, 2, `${args.join(' ')}: ${result.stdout}`);
      assert.match(result.stderr, /^report: [^\n]+\n$/, `${args.join(' ')}: ${result.stderr}`);
      assert.match(result.stderr, message, args.join(' '));
      assert.equal(fs.existsSync(ws.out), false, `${args.join(' ')} wrote something`);
    }
  });

  test('--out naming a file: exit 2 naming it, the file untouched', async (t) => {
    const ws = workspace(t, 1, 2);
    fs.writeFileSync(ws.out, 'my notes');
    const result = await plan(ws, '--scorers', 'alice');
    assert.equal(result.code, 2);
    assert.equal(result.stderr, `report: --out ${ws.out}: not a folder\n`);
    assert.equal(fs.readFileSync(ws.out, 'utf8'), 'my notes');
  });

  test('a name too long for a file with its temporary suffix, or an --out too long: one line, exit 2, nothing written', async (t) => {
    const ws = workspace(t, 2, 3);
    const long = 'x'.repeat(245); // x….html fits in 255 bytes; x….html.<pid>.tmp does not
    const wide = 'é'.repeat(120); // 240 bytes in UTF-8, not 240 characters' worth of room
    for (const name of [long, wide]) {
      const result = await plan(ws, '--scorers', `alice,${name}`);
      assert.equal(result.code, 2, result.stdout);
      assert.match(result.stderr, /^report: [^\n]+\n$/);
      assert.match(result.stderr, /too long for a file name/);
      assert.equal(fs.existsSync(ws.out), false, 'nothing written, not even alice.csv');
    }
    const out = path.join(ws.dir, 'o'.repeat(300), 'human');
    const result = await plan(ws, '--scorers', 'alice', '--out', out);
    assert.equal(result.code, 2, result.stdout);
    assert.match(result.stderr, /^report: [^\n]+ too long for a file name[^\n]*\n$/);
    const accepted = await plan(ws, '--scorers', `alice,${'x'.repeat(200)}`);
    assert.equal(accepted.code, 0, accepted.stderr);
  });

  test('the same plan made again after a late transcript, taking a transcript off a page: refused naming the page until it is moved away; --update adds the transcript instead', async (t) => {
    const ws = workspace(t, 2, 3);
    const args = ['--scorers', 'alice,bob', '--sample', '50%', '--seed', '3'];
    assert.equal((await plan(ws, ...args)).code, 0);
    const before = snapshot(ws.out);
    const pairsOf = (scorer: string) =>
      sheetRows(path.join(ws.out, `${scorer}.csv`)).map((row) => `${row.model}/${row.task_id}`);

    // A late transcript: the sample of 7 is drawn again, and someone's page loses a transcript.
    const late = JSON.parse(
      fs.readFileSync(path.join(ws.transcripts, 'm01', 'proof01.json'), 'utf8'),
    );
    late.metadata.model = 'm03';
    fs.mkdirSync(path.join(ws.transcripts, 'm03'));
    fs.writeFileSync(path.join(ws.transcripts, 'm03', 'proof01.json'), JSON.stringify(late));
    const alice = pairsOf('alice');
    const refused = await plan(ws, ...args);
    assert.equal(refused.code, 2, refused.stdout);
    assert.match(refused.stderr, /^report: [^\n]+\n$/);
    assert.match(refused.stderr, /(alice|bob)\.html: this plan takes .* off the page/);
    assert.match(refused.stderr, /sheet --update/);
    assert.deepEqual(snapshot(ws.out), before, 'nothing written');

    // --update keeps every page's transcripts.
    const updated = await plan(ws, '--update');
    assert.equal(updated.code, 0, updated.stderr);
    assert.deepEqual(
      pairsOf('alice').filter((pair) => alice.includes(pair)),
      alice,
    );

    // The page moved away is the scorer's word that its answers are safe: planned anew.
    const page = /(alice|bob)\.html/.exec(refused.stderr)![0];
    fs.rmSync(path.join(ws.out, 'plan.json'));
    const bothPages = ['alice.html', 'bob.html'];
    for (const file of bothPages) fs.renameSync(path.join(ws.out, file), path.join(ws.dir, file));
    assert.ok(bothPages.includes(page));
    const anew = await plan(ws, ...args);
    assert.equal(anew.code, 0, anew.stderr);
  });

  test("the page's storage key is its folder's and scorer's: another seed or scorer list keeps it", async (t) => {
    const ws = workspace(t, 2, 2);
    const keyOf = () => {
      const html = fs.readFileSync(path.join(ws.out, 'alice.html'), 'utf8');
      const json = /<script type="application\/json" id="plan-data">(.*?)<\/script>/s.exec(html)!;
      return JSON.parse(json[1]!).plan as string;
    };
    assert.equal((await plan(ws, '--scorers', 'alice')).code, 0);
    const key = keyOf();
    assert.equal((await plan(ws, '--scorers', 'alice', '--seed', '9')).code, 0);
    assert.equal(keyOf(), key);
    const both = await plan(ws, '--scorers', 'alice,bob', '--overlap', '2');
    assert.equal(both.code, 0, both.stderr);
    assert.equal(keyOf(), key);
  });

  test('without --scorers, sheet still prints the blank sheet of every transcript to stdout', async (t) => {
    const ws = workspace(t, 2, 2);
    const result = await runReport([
      'sheet',
      '--transcripts',
      ws.transcripts,
      '--rubric',
      ws.rubric,
      '--scorer',
      'alice',
    ]);
    assert.equal(result.code, 0, result.stderr);
    const rows = parseCsv(result.stdout, { columns: true }) as Record<string, string>[];
    assert.equal(rows.length, 4);
    assert.ok(rows.every((row) => row.scorer === 'alice' && !('transcript_sha256' in row)));
    assert.equal(fs.existsSync(path.join(ws.dir, 'human')), false);
  });

  test('a model or task a spreadsheet would run as a formula is guarded in the sheet', async (t) => {
    const dir = tempDir(t);
    const ws = makeWorkspace({ models: ['=cmd', 'm02'], tasks: ['proof01'] });
    t.after(() => ws.remove());
    const out = path.join(dir, 'human');
    const paths = ['--transcripts', ws.transcripts, '--tasks', ws.tasks, '--reference-keys'];
    const more = [ws.referenceKeys, '--rubric', ws.rubric, '--out', out, '--scorers', 'alice'];
    const result = await runReport(['sheet', ...paths, ...more]);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(
      sheetRows(path.join(out, 'alice.csv')).map((row) => row.model),
      ["'=cmd", 'm02'],
    );
    const read = readHumanScores(path.join(out, 'alice.csv'), rubric);
    assert.deepEqual(
      read.map((row) => row.model),
      ['=cmd', 'm02'],
      'the reader takes the guard off',
    );
  });
});

describe('sheet --update: the plan after edits, every other row byte for byte', () => {
  /** A sheet's lines (the header first), split where a row ends. */
  const linesOf = (file: string) => fs.readFileSync(file, 'utf8').split(/(?<=\n)/);

  /** Fills a scorer's rows: every dimension 1, a note naming the row. */
  function score(file: string): void {
    const lines = linesOf(file);
    const header = lines[0]!.trim().split(',');
    const filled = lines.slice(1).map((line) => {
      const cells = line.trim().split(',');
      for (const dimension of rubric.dimensions) {
        cells[header.indexOf(dimension.name)] = '1';
      }
      cells[header.indexOf('notes')] = `"read, ${cells[1]}/${cells[0]}"`;
      return `${cells.join(',')}\n`;
    });
    fs.writeFileSync(file, lines[0] + filled.join(''));
  }

  const update = (ws: Workspace & { out: string }, ...args: string[]) => {
    const paths = ['--transcripts', ws.transcripts, '--tasks', ws.tasks];
    const more = ['--reference-keys', ws.referenceKeys, '--rubric', ws.rubric, '--out', ws.out];
    return runReport(['sheet', '--update', ...paths, ...more, ...args]);
  };

  test('an edited transcript: its rows emptied with the new hash, its text on the pages, every other row as it was', async (t) => {
    const ws = workspace(t, 2, 2);
    assert.equal((await plan(ws, '--scorers', 'alice,bob', '--overlap', '2')).code, 0);
    const sheets = ['alice', 'bob'].map((name) => path.join(ws.out, `${name}.csv`));
    sheets.forEach(score);
    const before = sheets.map(linesOf);
    const edited = path.join(ws.transcripts, 'm01', 'proof02.json');
    const transcript = JSON.parse(fs.readFileSync(edited, 'utf8'));
    transcript.messages[2].content = 'STUDENT-EDITED so where do I start?';
    fs.writeFileSync(edited, JSON.stringify(transcript));

    const result = await update(ws);
    assert.equal(result.code, 0, result.stderr);
    assert.match(
      result.stdout,
      /edited since issued, scores emptied: alice: m01\/proof02, bob: m01\/proof02$/m,
    );
    assert.match(result.stdout, /new transcripts assigned: none$/m);
    assert.match(result.stdout, /orphaned \(transcript removed; rows kept\): none$/m);
    for (const [i, file] of sheets.entries()) {
      const after = linesOf(file);
      assert.equal(after.length, before[i]!.length);
      for (const [j, line] of after.entries()) {
        if (!line.startsWith('m01,proof02') && !line.startsWith('proof02,m01')) {
          assert.equal(line, before[i]![j], `${file} line ${j + 1} byte for byte`);
        }
      }
      const rows = readHumanScores(file, rubric, { transcripts: ws.transcripts });
      const row = rows.find((one) => one.model === 'm01' && one.task_id === 'proof02')!;
      assert.deepEqual(row.scores, {});
      assert.equal(row.notes, '');
      assert.equal(row.transcript_sha256, sha256(fs.readFileSync(edited)));
      assert.equal(row.stale, undefined, 'the new hash');
      assert.equal(rows.filter((one) => isComplete(one, rubric)).length, 3);
      const page = fs.readFileSync(file.replace(/\.csv$/, '.html'), 'utf8');
      assert.ok(page.includes('STUDENT-EDITED'), 'the page shows the text now');
    }
  });

  test('an edited task file: the rows of its transcripts emptied, the others kept', async (t) => {
    const ws = workspace(t, 2, 2);
    assert.equal((await plan(ws, '--scorers', 'alice')).code, 0);
    const sheet = path.join(ws.out, 'alice.csv');
    score(sheet);
    const taskFile = path.join(ws.tasks, 'proof01.json');
    const task = JSON.parse(fs.readFileSync(taskFile, 'utf8'));
    task.topic = 'another topic';
    fs.writeFileSync(taskFile, JSON.stringify(task));

    const result = await update(ws);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /scores emptied: alice: m01\/proof01, alice: m02\/proof01$/m);
    const rows = readHumanScores(sheet, rubric);
    const open = rows.filter((row) => !isComplete(row, rubric)).map(label);
    assert.deepEqual(open.sort(), ['m01/proof01', 'm02/proof01']);

    const again = await update(ws);
    assert.match(again.stdout, /scores emptied: none$/m, 'issued anew: nothing to empty twice');
  });

  test('a new transcript the rule takes: assigned to as many scorers as the overlap, said with them; a removed one: kept, orphaned', async (t) => {
    const ws = workspace(t, 2, 2);
    const args = ['--scorers', 'alice,bob,carol', '--overlap', '2'];
    assert.equal((await plan(ws, ...args)).code, 0);
    const sheets = ['alice', 'bob', 'carol'].map((name) => path.join(ws.out, `${name}.csv`));
    sheets.forEach(score);
    const before = new Map(sheets.map((file) => [file, fs.readFileSync(file, 'utf8')]));
    fs.mkdirSync(path.join(ws.transcripts, 'm03'));
    const copied = JSON.parse(
      fs.readFileSync(path.join(ws.transcripts, 'm01', 'proof01.json'), 'utf8'),
    );
    copied.metadata.model = 'm03';
    fs.writeFileSync(path.join(ws.transcripts, 'm03', 'proof01.json'), JSON.stringify(copied));
    fs.rmSync(path.join(ws.transcripts, 'm02', 'proof02.json'));

    const result = await update(ws);
    assert.equal(result.code, 0, result.stderr);
    const added = /new transcripts assigned: m03\/proof01 for (\w+), (\w+)$/m.exec(result.stdout);
    assert.ok(added, result.stdout);
    assert.match(
      result.stdout,
      /orphaned \(transcript removed; rows kept\): \w+: m02\/proof02, \w+: m02\/proof02$/m,
    );
    for (const file of sheets) {
      const scorer = path.basename(file, '.csv');
      const text = fs.readFileSync(file, 'utf8');
      assert.ok(text.startsWith(before.get(file)!), `${scorer}: every row kept, byte for byte`);
      const rows = readHumanScores(file, rubric);
      const got = rows.some((row) => row.model === 'm03');
      assert.equal(got, scorer === added[1] || scorer === added[2], scorer);
    }
    const manifest = JSON.parse(fs.readFileSync(path.join(ws.out, 'plan.json'), 'utf8'));
    assert.equal(manifest.assignments.length, 10, '8 kept (2 orphaned), 2 new');
  });

  test('a sample: a new transcript only if the rule now takes it; coverage per tutor and task printed', async (t) => {
    const ws = workspace(t, 2, 2);
    const first = await plan(ws, '--scorers', 'alice', '--sample', '2');
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, /per tutor \(model\): m01 1, m02 1$/m);
    const result = await update(ws);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /new transcripts assigned: none$/m);
  });

  test("a 25% sample, then a tutor added: the tutor's share assigned, from its transcripts only; every row kept, every tutor within one", async (t) => {
    const ws = workspace(t, 4, 8);
    const first = await plan(ws, '--scorers', 'alice,bob', '--sample', '25%');
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, /per tutor \(model\): m01 2, m02 2, m03 2, m04 2$/m);
    const sheets = ['alice', 'bob'].map((name) => path.join(ws.out, `${name}.csv`));
    sheets.forEach(score);
    const before = new Map(sheets.map((file) => [file, fs.readFileSync(file, 'utf8')]));
    const planFile = path.join(ws.out, 'plan.json');
    const issued = JSON.parse(fs.readFileSync(planFile, 'utf8')).assignments;
    fs.cpSync(path.join(ws.transcripts, 'm01'), path.join(ws.transcripts, 'm05'), {
      recursive: true,
    });
    for (const name of fs.readdirSync(path.join(ws.transcripts, 'm05'))) {
      const file = path.join(ws.transcripts, 'm05', name);
      const transcript = JSON.parse(fs.readFileSync(file, 'utf8'));
      transcript.metadata.model = 'm05';
      fs.writeFileSync(file, JSON.stringify(transcript));
    }

    const result = await update(ws);
    assert.equal(result.code, 0, result.stderr);
    assert.match(
      result.stdout,
      /new transcripts assigned: m05\/proof\d\d for \w+, m05\/proof\d\d for \w+$/m,
    );
    assert.match(result.stdout, /scores emptied: none$/m);
    for (const file of sheets) {
      const text = fs.readFileSync(file, 'utf8');
      assert.ok(text.startsWith(before.get(file)!), `${file}: every row kept, byte for byte`);
    }
    const assignments = JSON.parse(fs.readFileSync(planFile, 'utf8')).assignments;
    assert.deepEqual(assignments.slice(0, issued.length), issued, 'every assignment kept');
    assert.equal(assignments.length, 10, '25% of 40');
    const perTutor = counts(assignments, grid(5, 1), (pair) => pair.model.replace('m0', 'm'));
    assert.deepEqual(perTutor, [2, 2, 2, 2, 2]);
    const loads = sheets.map((file) => readHumanScores(file, rubric).length);
    assert.deepEqual(loads, [5, 5]);

    const again = await update(ws);
    assert.match(again.stdout, /new transcripts assigned: none$/m, 'nothing more to add');
  });

  test('refused: no plan in --out, or a flag that would change the rule; nothing written', async (t) => {
    const ws = workspace(t, 1, 2);
    const none = await update(ws);
    assert.equal(none.code, 2);
    assert.match(none.stderr, /plan\.json not found: make the plan first/);
    assert.equal(fs.existsSync(ws.out), false);
    assert.equal((await plan(ws, '--scorers', 'alice')).code, 0);
    const before = snapshot(ws.out);
    const changed = await update(ws, '--sample', '1');
    assert.equal(changed.code, 2);
    assert.match(changed.stderr, /--update keeps the plan's own rule .*--sample cannot change it/);
    assert.deepEqual(snapshot(ws.out), before);
  });

  /** The workspace's rubric edited as `edit` says; the rubric now. */
  function editRubric(ws: Workspace, edit: (json: typeof rubric) => void): typeof rubric {
    const json = JSON.parse(fs.readFileSync(ws.rubric, 'utf8'));
    edit(json);
    fs.writeFileSync(ws.rubric, JSON.stringify(json));
    return loadRubric(ws.rubric);
  }

  /** A plan for alice of 2 tutors × 2 tasks, every row scored 1 with a note; her sheet. */
  async function scoredPlan(t: TestContext) {
    const ws = workspace(t, 2, 2);
    assert.equal((await plan(ws, '--scorers', 'alice')).code, 0);
    const sheet = path.join(ws.out, 'alice.csv');
    score(sheet);
    return { ws, sheet, text: fs.readFileSync(sheet, 'utf8') };
  }

  const keptAside = (ws: Workspace & { out: string }, n: number) => {
    return path.join(ws.out, 'before-update', `alice.${n}.csv`);
  };

  test('a dimension added: a new empty column after the last, every row open for it, every score and note kept, nothing to keep aside', async (t) => {
    const { ws, sheet } = await scoredPlan(t);
    const now = editRubric(ws, (json) => {
      json.dimensions.push({
        name: 'clarity',
        description: 'Judges whether the explanations are clear.',
        scores: { '0': 'Unclear.', '1': 'Clear.' },
      });
    });

    const result = await update(ws);
    assert.equal(result.code, 0, result.stderr);
    assert.match(
      result.stdout,
      /^ {2}rubric: dimension clarity added: a new empty column, 4 row\(s\) to score in it$/m,
    );
    assert.match(result.stdout, /scores emptied: none$/m);
    assert.doesNotMatch(result.stdout, /as it was/);
    assert.equal(fs.existsSync(path.join(ws.out, 'before-update')), false);
    const header = linesOf(sheet)[0]!.trim().split(',');
    const last = ['integrity_boundary', 'clarity', 'notes', ...SHEET_COLUMNS];
    assert.deepEqual(header.slice(-6), last);
    const rows = readHumanScores(sheet, now);
    assert.equal(rows.length, 4);
    for (const row of rows) {
      assert.deepEqual(row.scores, Object.fromEntries(rubric.dimensions.map((d) => [d.name, 1])));
      assert.equal(row.notes, `read, ${row.model}/${row.task_id}`);
      assert.equal(isComplete(row, now), false, 'open for clarity');
    }
    const page = fs.readFileSync(path.join(ws.out, 'alice.html'), 'utf8');
    assert.ok(page.includes('Judges whether the explanations are clear.'), 'the page asks it');

    const again = await update(ws);
    assert.doesNotMatch(again.stdout, /rubric:/, 'the plan holds the rubric now');
  });

  test('a dimension dropped: its column removed, its cells counted, the sheet as it was kept aside and named; every other cell kept', async (t) => {
    const { ws, sheet, text } = await scoredPlan(t);
    const now = editRubric(ws, (json) => {
      json.dimensions = json.dimensions.filter((d) => d.name !== 'student_agency');
    });

    const result = await update(ws);
    assert.equal(result.code, 0, result.stderr);
    assert.match(
      result.stdout,
      /^ {2}rubric: column student_agency removed \(no dimension of the rubric now\): 4 cell\(s\) held something$/m,
    );
    const aside = keptAside(ws, 1);
    assert.match(
      result.stdout,
      new RegExp(`each sheet that lost a cell, as it was: ${aside}$`, 'm'),
    );
    assert.equal(fs.readFileSync(aside, 'utf8'), text, 'byte for byte');
    assert.equal(linesOf(sheet)[0]!.includes('student_agency'), false);
    const rows = readHumanScores(sheet, now);
    assert.ok(rows.every((row) => isComplete(row, now) && row.notes.startsWith('read, ')));
    assert.equal(readHumanScores(ws.out, now).length, 4, 'the copy is no sheet of the plan');
  });

  test('a level dropped that a scorer used: those scores emptied and their rows open again, named; the others byte for byte; a second such edit keeps a second copy', async (t) => {
    const { ws, sheet } = await scoredPlan(t);
    const lines = linesOf(sheet);
    const column = lines[0]!.trim().split(',').indexOf('error_diagnosis');
    const used = lines.map((line, i) => {
      if (!/^proof01,m01,|^proof02,m02,/.test(line) || i === 0) return line;
      const cells = line.split(',');
      cells[column] = '2';
      return cells.join(',');
    });
    fs.writeFileSync(sheet, used.join(''));
    const now = editRubric(ws, (json) => {
      delete json.dimensions.find((d) => d.name === 'error_diagnosis')!.scores['2'];
    });

    const result = await update(ws);
    assert.equal(result.code, 0, result.stderr);
    assert.match(
      result.stdout,
      /^ {2}rubric: error_diagnosis has no level 2 now: 2 score\(s\) emptied, their rows open again: alice: m01\/proof01, alice: m02\/proof02$/m,
    );
    assert.match(result.stdout, /scores emptied: none$/m);
    assert.equal(fs.readFileSync(keptAside(ws, 1), 'utf8'), used.join(''));
    const after = linesOf(sheet);
    for (const [i, line] of after.entries()) {
      if (!/^proof01,m01,|^proof02,m02,/.test(line)) {
        assert.equal(line, used[i], `line ${i + 1} byte for byte`);
      }
    }
    const rows = readHumanScores(sheet, now);
    const open = rows.filter((row) => !isComplete(row, now));
    assert.deepEqual(open.map(label).sort(), ['m01/proof01', 'm02/proof02']);
    for (const row of open) {
      assert.equal(row.scores.error_diagnosis, undefined);
      assert.equal(Object.keys(row.scores).length, rubric.dimensions.length - 1, 'the rest kept');
      assert.equal(row.notes, `read, ${row.model}/${row.task_id}`);
    }

    editRubric(ws, (json) => {
      delete json.dimensions.find((d) => d.name === 'proof_scaffolding')!.scores['1'];
    });
    const second = await update(ws);
    assert.match(second.stdout, /proof_scaffolding has no level 1 now: 4 score\(s\) emptied/);
    assert.equal(fs.readFileSync(keptAside(ws, 1), 'utf8'), used.join(''), 'the first copy kept');
    assert.equal(fs.readFileSync(keptAside(ws, 2), 'utf8'), after.join(''));
  });

  test('a dimension reworded: every row emptied as for any edit, the cells counted and kept aside; a plan.json without its rubric: a dimension added empties every row, never refused', async (t) => {
    const { ws, sheet, text } = await scoredPlan(t);
    editRubric(ws, (json) => {
      json.dimensions[0]!.description += ' Reworded.';
    });
    const result = await update(ws);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /scores emptied: (alice: m0\d\/proof0\d(, )?){4}$/m);
    const cells = 4 * (rubric.dimensions.length + 1);
    assert.match(
      result.stdout,
      new RegExp(`edits emptied \\(scores, notes, unsure\\): ${cells}$`, 'm'),
    );
    assert.equal(fs.readFileSync(keptAside(ws, 1), 'utf8'), text);

    score(sheet);
    const planFile = path.join(ws.out, 'plan.json');
    const manifest = JSON.parse(fs.readFileSync(planFile, 'utf8'));
    delete manifest.rubric;
    fs.writeFileSync(planFile, JSON.stringify(manifest));
    const now = editRubric(ws, (json) => {
      json.dimensions.push(Object.assign({}, json.dimensions[0], { name: 'clarity' }));
    });
    const older = await update(ws);
    assert.equal(older.code, 0, older.stderr);
    assert.match(older.stdout, /rubric: dimension clarity added/);
    assert.match(older.stdout, /scores emptied: (alice: m0\d\/proof0\d(, )?){4}$/m);
    assert.ok(fs.existsSync(keptAside(ws, 2)));
    const rows = readHumanScores(sheet, now);
    assert.ok(rows.every((row) => Object.keys(row.scores).length === 0));
  });

  test('a bad cell in a row the update keeps: refused naming the file and line, nothing written', async (t) => {
    const { ws, sheet } = await scoredPlan(t);
    editRubric(ws, (json) => {
      json.dimensions.push(Object.assign({}, json.dimensions[0], { name: 'clarity' }));
    });
    const lines = linesOf(sheet);
    lines[2] = lines[2]!.replace(',1,', ',7,');
    fs.writeFileSync(sheet, lines.join(''));
    const before = snapshot(ws.out);
    const result = await update(ws);
    assert.equal(result.code, 2);
    assert.match(result.stderr, /alice\.csv: line 3: \w+: "7" is not an allowed score/);
    assert.deepEqual(snapshot(ws.out), before);
  });
});

describe('what a sample covers, and the unsure mark', () => {
  test('a 30% sample of 8 tasks of 3 tutors: per-task counts printed, the task left out named in a warning', async (t) => {
    const ws = workspace(t, 3, 8);
    const result = await plan(ws, '--scorers', 'alice', '--sample', '30%');
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /^plan: 7 of 24 transcripts/m);
    assert.match(result.stdout, /per tutor \(model\): m01 \d, m02 \d, m03 \d$/m);
    const perTask = /per task: (.*)$/m.exec(result.stdout)![1]!;
    assert.equal(perTask.split(', ').length, 7);
    assert.match(
      result.stderr,
      /^report: warning: the sample of 7 leaves out 1 of the 8 tasks, task proof\d\d: none of their transcripts is scored by people; raise --sample \(at least 8 to cover every one\)$/m,
    );
    fs.rmSync(ws.out, { recursive: true });
    const covered = await plan(ws, '--scorers', 'alice', '--sample', '8');
    assert.equal(covered.stderr, '', 'a sample as large as the tasks covers them all');
  });

  test('unsure: yes is read as unsure, empty or no as sure; anything else is refused naming the cell', (t) => {
    const dir = tempDir(t);
    const file = path.join(dir, 'alice.csv');
    const header = [...scoreColumns(rubric), 'unsure', 'scorer'].join(',');
    const scores = rubric.dimensions.map(() => '1').join(',');
    fs.writeFileSync(
      file,
      `${header}\nproof01,m01,${scores},,Yes,alice\nproof02,m01,${scores},,,alice\n`,
    );
    const rows = readHumanScores(file, rubric);
    assert.deepEqual(
      rows.map((row) => row.unsure),
      [true, undefined],
    );
    fs.writeFileSync(file, `${header}\nproof01,m01,${scores},,maybe,alice\n`);
    assert.throws(
      () => readHumanScores(file, rubric),
      /line 2: unsure: "maybe" is not yes, no or empty/,
    );
  });
});

describe('one study folder (--dir) and a rehearsal without a key (fake-api)', () => {
  /** A newcomer's study: the shipped eval set, rubric and models.json copied into a folder. */
  function study(t: TestContext): string {
    const dir = path.join(tempDir(t), 'study');
    for (const part of ['evals/transcripts', 'evals/tasks', 'evals/reference_keys']) {
      fs.cpSync(path.join(REPO, part), path.join(dir, part), { recursive: true });
    }
    for (const file of ['rubric.json', 'models.json']) {
      fs.copyFileSync(path.join(REPO, file), path.join(dir, file));
    }
    return dir;
  }

  test('the whole protocol against fake-api with --dir only: plan, scores, the full run, the report (--exclude-unsure too); scores a mix on the scale', async (t) => {
    const { startFakeApi } = await import('../fakes/serve.ts');
    const dir = study(t);
    const api = await startFakeApi({ rubric: path.join(dir, 'rubric.json'), seed: 0 });
    t.after(() => api.close());
    assert.match(api.banner, /export ANTHROPIC_BASE_URL=http:\/\/127\.0\.0\.1:\d+ /);

    // 1. The plan, in the study's evals/human/.
    const planned = await runReport([
      'sheet',
      '--dir',
      dir,
      '--scorers',
      'alice,bob',
      '--overlap',
      '2',
    ]);
    assert.equal(planned.code, 0, planned.stderr);
    const human = path.join(dir, 'evals', 'human');
    assert.deepEqual(fs.readdirSync(human).sort(), [
      'alice.csv',
      'alice.html',
      'bob.csv',
      'bob.html',
      'plan.json',
    ]);

    // 2. Before people score, the full run is refused; then they score (here by code).
    const env = { ANTHROPIC_API_KEY: 'fake-key' };
    const early = await runMain(['--dir', dir], { baseUrl: api.anthropic.url, env });
    assert.equal(early.code, 2, early.stderr);
    assert.match(early.stderr, /human scoring is not complete in .*study\/evals\/human\//);
    for (const scorer of ['alice', 'bob']) {
      const file = path.join(human, `${scorer}.csv`);
      const [header, ...rows] = readCsv(file);
      const filled = rows.map((row, i) => {
        return row.map((cell, c) =>
          rubric.dimensions.some((d) => d.name === header![c]) ? String((i + c) % 3) : cell,
        );
      });
      fs.writeFileSync(file, [header!, ...filled].map((cells) => `${cells.join(',')}\n`).join(''));
    }

    // 3. The full run, every path from --dir, its log beside its CSV.
    const run = await runMain(['--dir', dir], { baseUrl: api.anthropic.url, env });
    assert.equal(run.code, 0, run.stderr);
    const csv = path.join(dir, 'evals', 'scores', 'judge_scores.csv');
    const rows = readCsv(csv).slice(1);
    assert.equal(rows.length, 6);
    const scores = new Set(rows.flatMap((row) => row.slice(2, 2 + rubric.dimensions.length)));
    assert.ok(scores.size > 1, `a mix of levels: ${[...scores]}`);
    assert.ok([...scores].every((score) => ['0', '1', '2'].includes(score)));
    assert.ok(fs.existsSync(path.join(dir, 'evals', 'scores', 'judge_log.jsonl')));

    // 4. The report, from the same folder.
    const report = await runReport(['--dir', dir]);
    assert.equal(report.code, 0, report.stderr);
    assert.match(report.stdout, /^12 \(transcript, scorer\) pairs/m);

    // 5. A row marked unsure counts, unless --exclude-unsure.
    const alice = path.join(human, 'alice.csv');
    const [header, first, ...rest] = readCsv(alice);
    first![header!.indexOf('unsure')] = 'yes';
    fs.writeFileSync(
      alice,
      [header!, first!, ...rest].map((cells) => `${cells.join(',')}\n`).join(''),
    );
    assert.match((await runReport(['--dir', dir])).stdout, /^12 \(transcript, scorer\) pairs/m);
    const sure = await runReport(['--dir', dir, '--exclude-unsure']);
    assert.match(sure.stdout, /^11 \(transcript, scorer\) pairs/m);
  });

  test("the README's plan and gate message are what the shipped set gives", async (t) => {
    const readme = fs.readFileSync(path.join(REPO, 'README.md'), 'utf8');
    const command = /^npx tsx report\.ts sheet (.+)\n```\n```\n([^`]*)```/m.exec(readme);
    assert.ok(command, 'the plan command, then its output, in the README');
    const dir = study(t);
    const planned = await runReport(['sheet', '--dir', dir, ...command[1]!.split(' ')]);
    assert.equal(planned.code, 0, planned.stderr);
    const said = `${planned.stdout}${planned.stderr}`.replaceAll(`${dir}/`, '');
    assert.equal(said, command[2]);
    if (said.includes('leaves out')) {
      assert.doesNotMatch(readme, /every tutor and task/, 'the sample does not cover them all');
    }

    const gate = /^```\n(run-judge: human scoring is not complete[^\n]*\n)```/m.exec(readme);
    assert.ok(gate, "the gate's message, quoted in the README");
    const env = { ANTHROPIC_API_KEY: 'sk-readme' };
    const refused = await runMain(['--dir', dir, '--concurrency', '16'], { env });
    assert.equal(refused.code, 2, refused.stderr);
    assert.equal(refused.stderr.replaceAll(`${dir}/`, ''), gate[1]);
  });

  test('--dir: a flag given still wins', async (t) => {
    const dir = study(t);
    const out = path.join(path.dirname(dir), 'elsewhere');
    const result = await runReport(['sheet', '--dir', dir, '--scorers', 'alice', '--out', out]);
    assert.equal(result.code, 0, result.stderr);
    assert.ok(fs.existsSync(path.join(out, 'alice.csv')));
    assert.equal(fs.existsSync(path.join(dir, 'evals', 'human')), false);
  });
});
