// report-sheet.ts: the scoring plan (`report.ts sheet --scorers a,b,c`): which transcripts people
// score (all, or a sample stratified by model and task), who scores each (K scorers, the work
// spread evenly), one sheet and one blind scoring page per scorer. The plan is pure functions of
// the transcripts and a seed; `writeScoringPlan` reads the inputs, checks the folder, then writes.
import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  EvalInputError,
  comparePairs,
  compareText,
  csvLine,
  guardCell,
  humanScoreFiles,
  loadRubric,
  loadTaskFiles,
  loadTranscript,
  pairKey,
  promptValues,
  readTranscripts,
  PLAN_FILE,
  replaceFileDurably,
  rubricDimensions,
  scoreColumns,
  sha256,
  transcriptImages,
  writablePath,
} from './run-judge.ts';
import type { PlanManifest, ReferenceKey, Rubric, Task, TranscriptRef } from './run-judge.ts';
import { groupBy, mulberry32 } from './report-analysis.ts';
import { holdsScores, readTranscriptBytes } from './report-inputs.ts';
import { scoringPage } from './scoring-page.ts';
import type { PageTranscript } from './scoring-page.ts';

type Pair = { task_id: string; model: string };

/** A sheet's row: a transcript, and the hash of its file as scored (plan sheets only). */
export type SheetRef = Pair & { transcript_sha256?: string };

/** What `sheet --scorers` was asked, as the command line gave it. */
export type PlanOptions = {
  scorers: string;
  sample?: string;
  overlap?: string;
  seed?: string;
  out: string;
  transcripts: string;
  tasks: string;
  referenceKeys: string;
  rubric: string;
};

/**
 * `sheet --scorers`: the plan, its sheets and pages in `--out`, what was assigned on stdout. Every
 * argument and input is checked, and every sheet already there, before the first file is written.
 */
export function writeScoringPlan(options: PlanOptions, stdout: NodeJS.WritableStream): void {
  // 1. The arguments, before anything is read.
  const scorers = parseScorers(options.scorers);
  const overlap = parseOverlap(options.overlap, scorers.length);
  const seed = parseSeed(options.seed);

  // 2. The transcripts and the rubric; the sample's size once their number is known.
  const rubric = loadRubric(options.rubric);
  const refs = readTranscripts(options.transcripts);
  const size = sampleSize(options.sample, refs.length);
  if (size * overlap < scorers.length) {
    throw new EvalInputError(
      `${size} transcript(s), each for ${overlap} scorer(s), leave some of the ${scorers.length} ` +
        'scorers with nothing to score: raise --sample or --overlap, or name fewer --scorers',
    );
  }
  const plan = planScoring(refs, { scorers, size, overlap, seed });

  // 3. Each chosen transcript's hash and its page's content; all read before anything is written.
  const shown = new Map<string, PageTranscript>();
  const taskFiles = new Map<string, { task: Task; referenceKey: ReferenceKey }>();
  for (const ref of plan.chosen) {
    let files = taskFiles.get(ref.task_id);
    if (files === undefined) {
      files = loadTaskFiles(options, ref.task_id);
      taskFiles.set(ref.task_id, files);
    }
    const hash = sha256(readTranscriptBytes(ref));
    const transcript = loadTranscript(ref);
    const values = promptValues(files.task, files.referenceKey, transcript, rubric);
    const images = transcriptImages(transcript, ref.path);
    shown.set(pairKey(ref.task_id, ref.model), { ref, transcript_sha256: hash, values, images });
  }

  // 4. Each scorer's sheet and page.
  const files = new Map<string, string>();
  for (const [scorer, assigned] of plan.assignments) {
    const rows = assigned.map((ref) => {
      return {
        task_id: ref.task_id,
        model: ref.model,
        transcript_sha256: shown.get(pairKey(ref.task_id, ref.model))!.transcript_sha256,
      };
    });
    const sheet = scoringSheet(rows, rubric, scorer);
    const pageOrder = shuffled(assigned, mulberry32(seed + scorers.indexOf(scorer) + 1));
    const transcripts = pageOrder.map((ref) => shown.get(pairKey(ref.task_id, ref.model))!);
    files.set(path.join(options.out, `${scorer}.csv`), sheet);
    const page = scoringPage({ scorer, rubric, sheet, rows, transcripts });
    files.set(path.join(options.out, `${scorer}.html`), page);
  }
  // The plan itself, so the gate can tell a sheet lost or a row deleted from one still to fill in.
  files.set(path.join(options.out, PLAN_FILE), planManifest(plan));

  // 5. Nothing is written while any sheet there holds a score, or a CSV there is not in this plan.
  checkOutFolder(options.out, scorers);

  // 6. Each file whole or not at all (a temporary file renamed).
  writablePath(options.out, () => fs.mkdirSync(options.out, { recursive: true }));
  for (const [file, content] of files) {
    writablePath(file, () => replaceFileDurably(file, content));
  }

  // 7. What was assigned.
  stdout.write(planSummary(plan, refs.length, options, seed));
}

/** The plan's assignments as the gate reads them back (`readPlanManifest` in run-judge.ts). */
function planManifest(plan: Plan<Pair>): string {
  const assignments: PlanManifest['assignments'] = [];
  for (const [scorer, assigned] of plan.assignments) {
    for (const ref of assigned) {
      assignments.push({ scorer, task_id: ref.task_id, model: ref.model });
    }
  }
  const manifest: PlanManifest = { assignments };
  return `${JSON.stringify(manifest, null, 2)}\n`;
}

// ---- The plan: pure functions of the transcripts, the scorers and a seed -----------------------

/** The transcripts chosen (sorted), and each scorer's share of them (sorted), in scorer order. */
export type Plan<T extends Pair> = {
  chosen: T[];
  assignments: Map<string, T[]>;
  overlap: number;
};

/** The plan for these transcripts: `size` of them stratified, each given to `overlap` scorers. */
export function planScoring<T extends Pair>(
  refs: T[],
  options: { scorers: string[]; size: number; overlap: number; seed: number },
): Plan<T> {
  const random = mulberry32(options.seed);
  const chosen = stratifiedSample(refs, options.size, random);
  const assignments = assignScorers(chosen, options.scorers, options.overlap, random);
  return { chosen, assignments, overlap: options.overlap };
}

/**
 * `size` transcripts, every model's count and every task's count as even as the transcripts allow
 * (within one of each other when every model has every task), the ties broken by `random`.
 */
export function stratifiedSample<T extends Pair>(
  refs: T[],
  size: number,
  random: () => number,
): T[] {
  // 1. A random order breaks every tie below; the models' order is their first in it.
  const order = shuffled(refs, random);
  const rank = new Map(order.map((ref, i) => [pairKey(ref.task_id, ref.model), i]));
  const rankOf = (ref: T) => rank.get(pairKey(ref.task_id, ref.model))!;
  const byModel = groupBy(order, (ref) => ref.model);

  // 2. Each model's share, dealt one at a time to the model with the smallest share that has more.
  const share = new Map([...byModel.keys()].map((model) => [model, 0]));
  for (let dealt = 0; dealt < size; dealt++) {
    let next: string | undefined;
    for (const [model, own] of byModel) {
      const open = share.get(model)! < own.length;
      if (open && (next === undefined || share.get(model)! < share.get(next)!)) {
        next = model;
      }
    }
    share.set(next!, share.get(next!)! + 1);
  }

  // 3. Each model takes its share among the tasks chosen least so far (fewest tasks first).
  const taskCount = new Map<string, number>();
  const countOf = (ref: T) => taskCount.get(ref.task_id) ?? 0;
  const models = [...byModel.keys()].sort(
    (a, b) => byModel.get(a)!.length - byModel.get(b)!.length,
  );
  const chosen: T[] = [];
  for (const model of models) {
    const candidates = [...byModel.get(model)!].sort(
      (a, b) => countOf(a) - countOf(b) || rankOf(a) - rankOf(b),
    );
    for (const ref of candidates.slice(0, share.get(model)!)) {
      taskCount.set(ref.task_id, countOf(ref) + 1);
      chosen.push(ref);
    }
  }
  return chosen.sort(comparePairs);
}

/**
 * Each transcript to `overlap` different scorers, each time those with the least work (the least
 * recently given one first), so that the scorers' loads stay within one of each other.
 */
export function assignScorers<T extends Pair>(
  chosen: T[],
  scorers: string[],
  overlap: number,
  random: () => number,
): Map<string, T[]> {
  const load = new Map(scorers.map((scorer) => [scorer, 0]));
  const lastGiven = new Map(scorers.map((scorer) => [scorer, -1]));
  const assigned = new Map<string, T[]>(scorers.map((scorer) => [scorer, []]));
  const preference = shuffled(scorers, random);

  // In a random order, so that no scorer gets all of one task or one model by the sort order.
  shuffled(chosen, random).forEach((ref, step) => {
    const byLoad = [...preference].sort((a, b) => {
      return load.get(a)! - load.get(b)! || lastGiven.get(a)! - lastGiven.get(b)!;
    });
    for (const scorer of byLoad.slice(0, overlap)) {
      load.set(scorer, load.get(scorer)! + 1);
      lastGiven.set(scorer, step);
      assigned.get(scorer)!.push(ref);
    }
  });

  for (const refs of assigned.values()) {
    refs.sort(comparePairs);
  }
  return assigned;
}

/** A copy in a random order (Fisher–Yates). */
function shuffled<T>(items: readonly T[], random: () => number): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    const item = copy[i]!;
    copy[i] = copy[j]!;
    copy[j] = item;
  }
  return copy;
}

// ---- The sheet ----------------------------------------------------------------------------------

/**
 * A sheet people fill in, blind to the judge: the judge CSV's columns, then `scorer` when one is
 * named, then `transcript_sha256` when the rows carry it; a row per transcript, the scores empty.
 */
export function scoringSheet(refs: SheetRef[], rubric: Rubric, scorer?: string): string {
  const hashed = refs.length > 0 && refs.every((ref) => ref.transcript_sha256 !== undefined);
  const header = scoreColumns(rubric);
  if (scorer !== undefined) {
    header.push('scorer');
  }
  if (hashed) {
    header.push('transcript_sha256');
  }
  const emptyScores = rubricDimensions(rubric).map(() => '');

  const rows = refs.map((ref) => {
    const row = [ref.task_id, ref.model, ...emptyScores, ''];
    if (scorer !== undefined) {
      row.push(scorer);
    }
    if (hashed) {
      row.push(ref.transcript_sha256!);
    }
    // Guarded like the judge CSV: people open the sheet in a spreadsheet, where =cmd() would run.
    return row.map(guardCell);
  });

  return [header, ...rows].map(csvLine).join('');
}

// ---- The arguments ------------------------------------------------------------------------------

/** `--scorers a,b,c`: each name trimmed, a usable file name, none twice (case aside). */
export function parseScorers(value: string): string[] {
  const names = value.split(',').map((name) => name.trim());
  const seen = new Set<string>();
  for (const name of names) {
    if (name === '') {
      throw new EvalInputError(`--scorers "${value}": a name is empty; give names like alice,bob`);
    }
    // Each name becomes <name>.csv and <name>.html, on any system, and the page's download name.
    if (/[/\\<>:"|?*\x00-\x1f\x7f]/.test(name) || name.startsWith('.')) {
      throw new EvalInputError(
        `--scorers: "${name}" cannot be a file name (no / \\ < > : " | ? *, control ` +
          'characters or leading .)',
      );
    }
    if (seen.has(name.toLowerCase())) {
      throw new EvalInputError(`--scorers: "${name}" is named twice`);
    }
    seen.add(name.toLowerCase());
  }
  return names;
}

/** `--overlap K`: how many scorers score each chosen transcript, 1 to the number of scorers. */
export function parseOverlap(value: string | undefined, scorers: number): number {
  if (value === undefined) {
    return 1;
  }
  const overlap = Number(value);
  if (!/^\d+$/.test(value) || overlap < 1) {
    throw new EvalInputError(`--overlap ${value}: give a whole number of scorers, 1 or more`);
  }
  if (overlap > scorers) {
    throw new EvalInputError(
      `--overlap ${value}: more than the ${scorers} scorer(s) named in --scorers`,
    );
  }
  return overlap;
}

/** `--seed S`: a whole number from 0 to 4294967295; 0 unless given. */
export function parseSeed(value: string | undefined): number {
  if (value === undefined) {
    return 0;
  }
  const seed = Number(value);
  if (!/^\d+$/.test(value) || seed > 0xffffffff) {
    throw new EvalInputError(`--seed ${value}: give a whole number from 0 to 4294967295`);
  }
  return seed;
}

/** `--sample N` or `--sample P%` of `total` transcripts (P% rounded, at least one); else all. */
export function sampleSize(value: string | undefined, total: number): number {
  if (value === undefined) {
    return total;
  }
  const percent = /^(\d+(?:\.\d+)?)%$/.exec(value);
  if (percent) {
    const share = Number(percent[1]);
    if (share <= 0 || share > 100) {
      throw new EvalInputError(`--sample ${value}: a share must be above 0% and at most 100%`);
    }
    return Math.max(1, Math.round((total * share) / 100));
  }
  const size = Number(value);
  if (!/^\d+$/.test(value) || size < 1) {
    throw new EvalInputError(
      `--sample ${value}: give a number of transcripts (like 12) or a share (like 25%)`,
    );
  }
  if (size > total) {
    throw new EvalInputError(`--sample ${value}: there are only ${total} transcripts`);
  }
  return size;
}

// ---- Checking what is on disk -------------------------------------------------------------------

/**
 * Refuses the folder when a sheet in it holds any score or note (people's work), or when it holds a
 * CSV this plan does not write (every CSV in the folder is read as the plan).
 */
function checkOutFolder(dir: string, scorers: string[]): void {
  const stat = fs.statSync(dir, { throwIfNoEntry: false });
  if (stat === undefined) {
    return;
  }
  if (!stat.isDirectory()) {
    throw new EvalInputError(`--out ${dir}: not a folder`);
  }

  // The sheets as the gate and the report read the folder.
  const planned = new Set(scorers.map((scorer) => path.join(dir, `${scorer}.csv`)));
  const sheets = humanScoreFiles(dir);
  const foreign = sheets.filter((file) => !planned.has(file));
  if (foreign.length > 0) {
    const listed = foreign.join(', ');
    throw new EvalInputError(
      `${listed}: not a sheet of this plan, and every CSV in ${dir} counts as the plan; ` +
        'move it away or choose another --out (nothing written)',
    );
  }

  const filled = sheets.filter(holdsScores);
  if (filled.length > 0) {
    throw new EvalInputError(
      `${filled.join(', ')}: holds scores, never overwritten; move it away or choose another ` +
        '--out (nothing written)',
    );
  }
}

/** What the plan assigned: its size and design, then each scorer's count and files. */
function planSummary(
  plan: Plan<TranscriptRef>,
  total: number,
  options: PlanOptions,
  seed: number,
): string {
  const sampled =
    plan.chosen.length < total ? `a sample stratified by model and task, seed ${seed}` : 'all';
  const lines = [
    `plan: ${plan.chosen.length} of ${total} transcripts (${sampled}), each for ${plan.overlap} scorer(s)`,
  ];
  for (const [scorer, assigned] of plan.assignments) {
    const sheet = path.join(options.out, `${scorer}.csv`);
    const page = path.join(options.out, `${scorer}.html`);
    lines.push(`  ${scorer}: ${assigned.length} transcripts: ${sheet}, ${page}`);
  }

  const counts = (key: (ref: Pair) => string) => {
    const groups = [...groupBy(plan.chosen, key)].sort((a, b) => compareText(a[0], b[0]));
    return groups.map((group) => `${group[0]} ${group[1].length}`).join(', ');
  };
  lines.push(`  per model: ${counts((ref) => ref.model)}`);
  lines.push(`  per task: ${counts((ref) => ref.task_id)}`);

  const overlapping = plan.overlap > 1 ? plan.chosen.length : 0;
  lines.push(
    `  scored by more than one scorer (for the human ceiling): ${overlapping} transcripts`,
  );
  return `${lines.join('\n')}\n`;
}
