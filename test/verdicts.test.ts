// The report's verdicts (report/verdicts.ts): the gap to the ceiling and leniency read on every
// dimension together, against test/reference/verdicts-reference.py (numpy, SciPy, scikit-learn) to
// 1e-9; Holm's procedure, the leniency test's edges, the verdicts' scope and sentences; stale judge
// rows left out of self-consistency and the family; and report.ts run on simulated studies, whose
// verdicts are those the calibration (calibrate/verdicts.ts) reads on the same studies.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { referenceRun, referenceSkip } from './python-reference.ts';
import { runReport, tempDir } from './helpers.ts';

const { analyse, reportCells, mulberry32 } = await import('../report/analysis.ts');
const { leniencyTest, namesInWords, verdictLines, verdictMarkdown, MIN_TRANSCRIPTS } =
  await import('../report/verdicts.ts');
const { analysisAudit } = await import('../report.ts');
const { noAudit } = await import('../report/inputs.ts');
const calibration = await import('../calibrate/verdicts.ts');
type Rubric = import('../run-judge.ts').Rubric;
type HumanRow = import('../run-judge.ts').HumanRow;
type ScoreRow = import('../run-judge.ts').ScoreRow;

const near = (actual: number | null | undefined, expected: number, what: string) => {
  assert.ok(
    actual !== null && actual !== undefined && Math.abs(actual - expected) < 1e-9,
    `${what}: ${actual}, expected ${expected}`,
  );
};

/** A rubric of the dimensions named, each scoring 0, 1 or 2. */
function rubricOf(names: string[]): Rubric {
  const dimensions = names.map((name) => {
    return { name, description: name, scores: { '0': 'low', '1': 'middle', '2': 'high' } };
  });
  return { dimensions } as Rubric;
}

// ---- Against the reference -----------------------------------------------------------------------

type VerdictSet = { judge: (string | number)[][]; humans: (string | number)[][] };
const SETS = JSON.parse(
  fs.readFileSync(path.join(import.meta.dirname, 'reference', 'verdict-sets.json'), 'utf8'),
) as Record<string, VerdictSet>;

/** A set's report: its rows are `model, task, (scorer,) score of x, y, z...`. */
function reportOf(set: VerdictSet) {
  const names = ['x', 'y', 'z'].slice(0, set.judge[0]!.length - 2);
  const scores = (cells: (string | number)[]) => {
    return Object.fromEntries(names.map((name, i) => [name, cells[i] as number]));
  };
  const judged: ScoreRow[] = set.judge.map(([model, task_id, ...cells]) => {
    return { model: String(model), task_id: String(task_id), scores: scores(cells), notes: '' };
  });
  const humans: HumanRow[] = set.humans.map(([model, task_id, scorer, ...cells]) => {
    const row = { model: String(model), task_id: String(task_id), scorer: String(scorer) };
    return { ...row, scores: scores(cells), notes: '' };
  });
  return analyse(judged, humans, rubricOf(names));
}

// Printed by `/usr/bin/python3 test/reference/verdicts-reference.py` (numpy 1.24.2, SciPy 1.10.1,
// scikit-learn 1.2.1), copied here.
const REFERENCE: Record<string, Figures[]> = {
  small: [
    {
      kappa_diff: 0.04753820033955858,
      ci95: [-1.3555878674634363, 0.25806451612903214],
      verdict: 'undetermined',
      reason: 'too_few',
      transcripts_to_decide: 81,
      leniency: 0.125,
      leniency_ci95: [-0.125, 0.4375],
      leniency_reading: null,
    },
  ],
  large_agreeing: [
    {
      kappa_diff: 0.0025719326281813393,
      ci95: [-0.06741732587485605, 0.05365853658536584],
      verdict: 'as_good',
      reason: null,
      transcripts_to_decide: null,
      leniency: 0.023333333333333334,
      leniency_ci95: [-0.013333333333333334, 0.06],
      leniency_reading: null,
    },
  ],
  large_disagreeing: [
    {
      kappa_diff: -0.8455089695926525,
      ci95: [-0.9487987083673759, -0.7488998216644353],
      verdict: 'below',
      reason: null,
      transcripts_to_decide: null,
      leniency: 0.6466666666666666,
      leniency_ci95: [0.5066666666666667, 0.7966666666666666],
      leniency_reading: 'lenient',
    },
  ],
  family: [
    {
      kappa_diff: 0.13218326425450877,
      ci95: [-0.03646776650117244, 0.5569620253164556],
      verdict: 'as_good',
      reason: null,
      transcripts_to_decide: null,
      leniency: -0.0611111111111111,
      leniency_ci95: [-0.1472222222222222, 0.022222222222222233],
      leniency_reading: null,
    },
    {
      kappa_diff: 0.19341454802259894,
      ci95: [-0.05551175788200012, 0.4186357503057045],
      verdict: 'undetermined',
      reason: null,
      transcripts_to_decide: 111,
      leniency: -0.10277777777777777,
      leniency_ci95: [-0.1888888888888889, -0.01944444444444444],
      leniency_reading: null,
    },
    {
      kappa_diff: 0.0897724240460489,
      ci95: [-1.3918918918918917, 0.608108108108108],
      verdict: 'undetermined',
      reason: null,
      transcripts_to_decide: 798,
      leniency: 0.016666666666666673,
      leniency_ci95: [-0.06111111111111111, 0.09722222222222224],
      leniency_reading: null,
    },
  ],
  family_holm: [
    {
      kappa_diff: 0.18033027522935785,
      ci95: [-0.06404381968928963, 0.5963302752293577],
      verdict: 'undetermined',
      reason: null,
      transcripts_to_decide: 126,
      leniency: 0.03333333333333334,
      leniency_ci95: [-0.055555555555555546, 0.11944444444444445],
      leniency_reading: null,
    },
    {
      kappa_diff: 0.05603780215179177,
      ci95: [-0.21879213905502493, 0.5194805194805193],
      verdict: 'undetermined',
      reason: null,
      transcripts_to_decide: 318,
      leniency: 0.10555555555555557,
      leniency_ci95: [0.030555555555555558, 0.18611111111111106],
      leniency_reading: 'lenient',
    },
    {
      kappa_diff: -0.18091133128299652,
      ci95: [-0.5194991365409399, 0.11601520830658456],
      verdict: 'undetermined',
      reason: null,
      transcripts_to_decide: 1881,
      leniency: 0.18888888888888886,
      leniency_ci95: [0.07777777777777778, 0.2972222222222223],
      leniency_reading: 'lenient',
    },
  ],
};

type Figures = {
  kappa_diff: number | null;
  ci95: number[] | null;
  verdict: string | null;
  reason: string | null;
  transcripts_to_decide: number | null;
  leniency: number;
  leniency_ci95: number[];
  leniency_reading: string | null;
};

describe('the verdicts against numpy, SciPy and scikit-learn: one dimension, and three read together', () => {
  for (const [name, expected] of Object.entries(REFERENCE)) {
    test(`${name}: the gap, its interval, the verdict, its reason, the transcripts to decide it, leniency and its reading`, () => {
      const report = reportOf(SETS[name]!);
      assert.equal(report.dimensions.length, expected.length);
      report.dimensions.forEach((dimension, d) => {
        const want = expected[d]!;
        const at = (what: string) => `${name} ${dimension.name} ${what}`;
        const gap = dimension.gap_to_ceiling!;
        near(gap.kappa_diff, want.kappa_diff!, at('gap'));
        near(gap.ci95![0], want.ci95![0]!, at('gap lower'));
        near(gap.ci95![1], want.ci95![1]!, at('gap upper'));
        assert.equal(gap.verdict, want.verdict, at('verdict'));
        assert.equal(gap.reason, want.reason, at('reason'));
        assert.equal(gap.transcripts_to_decide, want.transcripts_to_decide, at('to decide'));
        assert.equal(gap.margin, 0.1);
        near(dimension.leniency.mean_diff, want.leniency, at('leniency'));
        near(dimension.leniency.ci95![0], want.leniency_ci95[0]!, at('leniency lower'));
        near(dimension.leniency.ci95![1], want.leniency_ci95[1]!, at('leniency upper'));
        assert.equal(dimension.leniency.reading, want.leniency_reading, at('reading'));
      });
    });
  }

  test('read together, a dimension its own interval calls as good (x) waits for the others', () => {
    const together = reportOf(SETS.family_holm!).dimensions[0]!;
    const alone = SETS.family_holm!;
    const onlyX = {
      judge: alone.judge.map((row) => row.slice(0, 3)),
      humans: alone.humans.map((row) => row.slice(0, 4)),
    };
    assert.equal(reportOf(onlyX).dimensions[0]!.gap_to_ceiling!.verdict, 'as_good');
    assert.equal(together.gap_to_ceiling!.verdict, 'undetermined');
    assert.equal(together.gap_to_ceiling!.reason, null);
    assert.ok(together.gap_to_ceiling!.ci95![0] >= -0.1, 'its own interval clears the margin');
  });

  test(
    'the constants above are what the script prints (where numpy, SciPy and scikit-learn are installed)',
    { skip: referenceSkip() || false },
    () => {
      const run = referenceRun('verdicts-reference.py');
      assert.equal(run.status, 0, run.stderr);
      assert.deepEqual(JSON.parse(run.stdout), REFERENCE);
    },
  );
});

// ---- The pieces ------------------------------------------------------------------------------------

describe('the leniency test', () => {
  test('leniency: a t-test of the differences; one transcript, or equal differences on few, are no evidence', () => {
    assert.deepEqual(leniencyTest([1]), { p: 1, side: 'lenient' });
    assert.deepEqual(leniencyTest([1, 1, 1]), { p: 1, side: 'lenient' });
    const many = new Array<number>(MIN_TRANSCRIPTS).fill(-0.5);
    assert.deepEqual(leniencyTest(many), { p: 0, side: 'harsh' });
    assert.deepEqual(leniencyTest(new Array<number>(40).fill(0)), { p: 1, side: 'lenient' });
    // SciPy: ttest_1samp([1, 0, 0.5, 1, 0.5], 0).pvalue
    near(leniencyTest([1, 0, 0.5, 1, 0.5]).p, 0.03267792333680301, 'p');
  });
});

// ---- Whose agreement, in words -----------------------------------------------------------------------

describe('every verdict names its scope: the people and the transcripts', () => {
  test('names in a sentence: one, two, three or four, then a count and the first three', () => {
    assert.equal(namesInWords(['alice']), 'alice');
    assert.equal(namesInWords(['alice', 'bob']), 'alice and bob');
    assert.equal(namesInWords(['alice', 'bob', 'carol']), 'alice, bob and carol');
    assert.equal(namesInWords(['a', 'b', 'c', 'd', 'e']), '5 scorers (a, b, c, ...)');
    assert.equal(namesInWords(['a\nb']), 'a\\nb', 'a control character shown escaped');
  });

  test('the JSON scope: the scorers of the matched transcripts, and of those scored by two or more', () => {
    const report = JSON.parse(JSON.stringify(reportOf(SETS.family!)));
    assert.deepEqual(report.scope, {
      scorers: ['al', 'bo', 'cy'],
      transcripts: 60,
      ceiling: { scorers: ['al', 'bo', 'cy'], transcripts: 60 },
    });
  });

  test('as good on some: the text names those that are and those that are not, and whose agreement', () => {
    const printed = verdictLines(reportOf(SETS.family!));
    const lines = printed.join('\n').replace(/\n\s+/g, ' ');
    assert.match(
      lines,
      /^verdicts on the 3 dimension\(s\) together \(Holm, family-wise error 5%\):/,
    );
    assert.match(lines, /as good as al, bo and cy on x; no verdict on y, z \(undetermined\)/);
    assert.match(lines, /\(60 transcript\(s\) scored by two or more, margin 0\.1\)/);
    assert.match(
      lines,
      /neither lenient nor harsh shown on any of the 3 \(against al, bo and cy on\s+60/,
    );
    for (const line of printed) {
      assert.ok(line.length <= 100, `${line.length} columns: ${line}`);
    }
  });

  test('as good on all: "as good as ... on all N dimensions"', () => {
    const lines = verdictLines(reportOf(SETS.large_agreeing!)).join(' ');
    assert.match(lines, /as good as al and bo on all 1 dimensions \(150 transcript\(s\)/);
    const markdown = verdictMarkdown(reportOf(SETS.large_disagreeing!));
    assert.equal(
      markdown[2],
      '- gap to the ceiling: below al and bo on x (150 transcript(s) scored by two or more, margin 0.1)',
    );
    assert.equal(markdown[3], '- leniency: lenient on x (against al and bo on 150 transcript(s))');
  });

  test('too few: the reason in the cell, the sentence and the page; how many would decide it', () => {
    const report = reportOf(SETS.small!);
    const cells = reportCells(report).tables[1]!.rows[1]!;
    assert.equal(cells[4], 'too few (81)');
    const lines = verdictLines(report).join('\n').replace(/\n\s+/g, ' ');
    const sentence =
      'no verdict against al and bo on x (too few) ' +
      '(8 transcript(s) scored by two or more, margin 0.1; a verdict needs 30)';
    assert.ok(lines.includes(sentence), lines);
  });

  test('the text, Markdown and LaTeX say the verdicts together, with the reason and the scope', async (t) => {
    const args = setFiles(tempDir(t), SETS.small!);
    const text = (await runReport(args)).stdout;
    assert.match(text, /^verdicts on the 1 dimension\(s\) together/m);
    assert.match(text, /gap to the ceiling: no verdict against al and bo on x \(too few\)/);
    assert.match(text, /"too few": undetermined, under 30 transcripts/);
    const markdown = (await runReport([...args, '--format', 'markdown'])).stdout;
    assert.match(
      markdown,
      /^- leniency: neither lenient nor harsh shown on any of the 1 \(against al and bo on 8/m,
    );
    const latex = (await runReport([...args, '--format', 'latex'])).stdout;
    assert.match(latex, /^% verdicts on the 1 dimension\(s\) together/m);
    assert.match(latex, /too few \(81\)/);
  });

  test('no ceiling (the people always agree on one score): verdict null, reason no_ceiling, said so', () => {
    const judged = ['t1', 't2', 't3'].map((task_id, i) => ({
      model: 'm',
      task_id,
      scores: { x: i },
      notes: '',
    }));
    const humans = ['t1', 't2', 't3'].flatMap((task_id) => {
      return ['al', 'bo'].map((scorer) => ({
        model: 'm',
        task_id,
        scorer,
        scores: { x: 1 },
        notes: '',
      }));
    });
    const report = analyse(judged, humans, rubricOf(['x']));
    const gap = report.dimensions[0]!.gap_to_ceiling!;
    assert.deepEqual(
      [gap.kappa_diff, gap.ci95, gap.verdict, gap.reason],
      [null, null, null, 'no_ceiling'],
    );
    assert.equal(reportCells(report).tables[1]!.rows[1]![4], 'no ceiling');
    assert.match(
      verdictLines(report).join(' '),
      /no verdict against al and bo on x \(no ceiling\)/,
    );
  });
});

// ---- Stale judge rows ----------------------------------------------------------------------------------

describe('stale judge rows are left out of self-consistency and of the judge family', () => {
  test("a stale row's samples and its answer's family count for nothing", () => {
    const audit = noAudit();
    const row = (family: string, samples: Record<string, number>[]) => {
      const record = { judge: 'j', family, input_sha256: null, fallback: false, samples };
      const more = { cost_usd: null, timestamp: null, rubric_sha256: null, thinking: [] };
      return { ...record, ...more, before_human_scoring: false };
    };
    const key = (task: string) => `m\u0000${task}`;
    audit.rows.set(key('stale'), row('other', [{ x: 0 }, { x: 2 }]));
    audit.rows.set(key('kept'), row('mine', [{ x: 1 }, { x: 1 }]));
    const kept = { task_id: 'kept', model: 'm', scores: { x: 1 }, notes: '' };
    const run = {
      judge: { name: 'j', scores: 'j.csv', log: 'j.jsonl' },
      rows: [kept],
      audit,
      stale: ['m/stale'],
    };
    const read = analysisAudit(run);
    assert.deepEqual(read.samples, [[{ x: 1 }, { x: 1 }]]);
    assert.equal(read.family, 'mine', 'the first seen of a tie would be the stale row\'s "other"');
    assert.deepEqual(read.stale_judge, ['m/stale']);
  });
});

// ---- report.ts itself on simulated studies ----------------------------------------------------------------

describe('report.ts run on simulated studies reads each as the calibration does', () => {
  test('6 dimensions, at the margin and at no gap: the same verdicts, readings and transcripts to decide, study by study', async (t) => {
    const dir = tempDir(t);
    const names = ['d1', 'd2', 'd3', 'd4', 'd5', 'd6'];
    const rubricFile = path.join(dir, 'rubric.json');
    fs.writeFileSync(rubricFile, JSON.stringify(rubricOf(names)));
    const random = mulberry32(20261206);
    const settings = [
      { gap: -calibration.MARGIN, transcripts: 30, scorers: 3 },
      { gap: 0, transcripts: 120, scorers: 2 },
    ];
    const counts = { report: 0, calibration: 0 };
    for (const setting of settings) {
      const noise = calibration.judgeNoise(setting.gap);
      for (let s = 0; s < 5; s++) {
        const size = { ...setting, dimensions: names.length };
        const study = calibration.simulateStudy(random, size, noise);
        const report = await reportOnStudy(dir, names, study, rubricFile);

        const expected = calibration.studyVerdicts(study);
        const gaps = report.dimensions.map((d: { gap_to_ceiling: GapJson }) => d.gap_to_ceiling);
        const readings = report.dimensions.map((d: LeniencyJson) => d.leniency.reading);
        const at = `gap ${setting.gap}, study ${s}`;
        assert.deepEqual(
          gaps.map((gap: GapJson) => gap.verdict),
          expected.verdicts,
          at,
        );
        assert.deepEqual(readings, expected.readings, at);
        assert.deepEqual(
          gaps.map((gap: GapJson) => gap.transcripts_to_decide),
          expected.transcriptsToDecide,
          at,
        );
        counts.report += gaps.filter((gap: GapJson) => gap.verdict === 'as_good').length;
        counts.calibration += expected.verdicts.filter((verdict) => verdict === 'as_good').length;
      }
    }
    assert.equal(counts.report, counts.calibration);
    assert.ok(counts.report > 0, 'some dimensions read as good at no gap');
  });
});

type GapJson = { verdict: string | null; transcripts_to_decide: number | null };
type LeniencyJson = { leniency: { reading: string | null } };

/** report.ts's JSON on a simulated study, written as the judge CSV and one sheet of every scorer. */
async function reportOnStudy(
  dir: string,
  names: string[],
  study: { judge: number[]; scorers: number[][] }[],
  rubricFile: string,
) {
  const judge = [`task_id,model,${names.join(',')},notes`];
  const people = [`task_id,model,${names.join(',')},notes,scorer`];
  study[0]!.judge.forEach((_, i) => {
    judge.push(`t${i},m,${study.map((d) => d.judge[i]).join(',')},`);
    study[0]!.scorers[i]!.forEach((_, p) => {
      people.push(`t${i},m,${study.map((d) => d.scorers[i]![p]).join(',')},,s${p}`);
    });
  });
  const args = csvFiles(dir, judge, people, rubricFile);
  const run = await runReport([...args, '--format', 'json']);
  assert.equal(run.code, 0, run.stderr);
  return JSON.parse(run.stdout);
}

/** The report's arguments for a judge CSV and a human CSV (their lines given) and a rubric. */
function csvFiles(dir: string, judge: string[], people: string[], rubricFile: string): string[] {
  const scores = path.join(dir, 'scores.csv');
  const humans = path.join(dir, 'humans.csv');
  fs.writeFileSync(scores, `${judge.join('\n')}\n`);
  fs.writeFileSync(humans, `${people.join('\n')}\n`);
  const args = ['--scores', scores, '--human-scores', humans, '--rubric', rubricFile];
  return [...args, '--log', path.join(dir, 'none.jsonl'), '--transcripts', dir];
}

/** A reference set as the report's files: its arguments. */
function setFiles(dir: string, set: VerdictSet): string[] {
  const names = ['x', 'y', 'z'].slice(0, set.judge[0]!.length - 2);
  const rubricFile = path.join(dir, 'rubric.json');
  fs.writeFileSync(rubricFile, JSON.stringify(rubricOf(names)));
  const judge = [`task_id,model,${names.join(',')},notes`];
  const people = [`task_id,model,${names.join(',')},notes,scorer`];
  for (const [model, task, ...scores] of set.judge) {
    judge.push(`${task},${model},${scores.join(',')},`);
  }
  for (const [model, task, scorer, ...scores] of set.humans) {
    people.push(`${task},${model},${scores.join(',')},,${scorer}`);
  }
  return csvFiles(dir, judge, people, rubricFile);
}
