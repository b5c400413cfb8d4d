// report/sheet.ts: the scoring plan (`report.ts sheet --scorers a,b,c`): which transcripts people
// score (all, or a sample stratified by model and task), who scores each (K scorers, the work
// spread evenly), one sheet and one blind scoring page per scorer. The plan is pure functions of
// the transcripts and a seed; `writeScoringPlan` reads the inputs, checks the folder, then writes.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parse as parseCsv } from 'csv-parse/sync';
import {
  DEFAULTS,
  EvalInputError,
  assignmentKey,
  comparePairs,
  compareText,
  csvLine,
  guardCell,
  humanRowOf,
  humanScoreFiles,
  loadPlanManifest,
  loadRubric,
  loadTaskFiles,
  loadTranscript,
  pairKey,
  pairLabel,
  promptValues,
  readCsvFile,
  readTranscripts,
  PLAN_FILE,
  replaceFileDurably,
  rubricDimensions,
  scoreColumns,
  sha256,
  transcriptImages,
  unguard,
  writablePath,
} from '../run-judge.ts';
import type {
  PlanManifest,
  ReferenceKey,
  Rubric,
  Task,
  Transcript,
  TranscriptImage,
  TranscriptRef,
} from '../run-judge.ts';
import { altTestPlan } from './alt-test.ts';
import { groupBy, mulberry32, wrapped } from './analysis.ts';
import { sampleSupport, shareTotal, tutorShares } from './plan-sample.ts';
import { scaleOf } from './ppi.ts';
import { holdsScores, readTranscriptBytes } from './inputs.ts';
import { rubricChange, sheetToRubric } from './rubric-change.ts';
import type { SheetChanges } from './rubric-change.ts';
import { scoringPage } from './scoring-page.ts';
import type { PageTranscript, PageTurn, RowVersion } from './scoring-page.ts';

type Pair = { task_id: string; model: string };

/** A sheet's row: a transcript, and the hash of its file as scored (plan sheets only). */
export type SheetRef = Pair & { transcript_sha256?: string };

/** What `sheet --scorers` was asked, as the command line gave it. */
export type PlanOptions = {
  scorers: string;
  sample?: string;
  overlap?: string;
  seed?: string;
  showSystemPrompt?: boolean;
  out: string;
  transcripts: string;
  tasks: string;
  referenceKeys: string;
  rubric: string;
};

/** What `sheet --update` reads besides the plan's folder: where the inputs are now. */
export type UpdateOptions = Pick<
  PlanOptions,
  'out' | 'transcripts' | 'tasks' | 'referenceKeys' | 'rubric'
>;

/** Where the plan's commands say what they did (stdout) and warn (stderr). */
export type PlanIO = { stdout: NodeJS.WritableStream; stderr: NodeJS.WritableStream };

type PlanRule = NonNullable<PlanManifest['rule']>;
type Assignment = PlanManifest['assignments'][number];

/**
 * `sheet --scorers`: the plan, its sheets and pages in `--out`, what was assigned on stdout. Every
 * argument and input is checked, and every sheet already there, before the first file is written.
 */
export function writeScoringPlan(options: PlanOptions, io: PlanIO): void {
  // 1. The arguments, before anything is read.
  const scorers = parseScorers(options.scorers);
  const overlap = parseOverlap(options.overlap, scorers.length);
  const seed = parseSeed(options.seed);

  // 2. The transcripts and the rubric; the sample's size once their number is known.
  const rubric = loadRubric(options.rubric);
  const refs = readTranscripts(options.transcripts);
  const shares = tutorShares(options.sample, refs);
  const size =
    shares === null
      ? sampleSize(options.sample, refs.length, options.transcripts)
      : shareTotal(shares);
  if (size * overlap < scorers.length) {
    throw new EvalInputError(
      `${size} transcript(s), each for ${overlap} scorer(s), leave some of the ${scorers.length} ` +
        'scorers with nothing to score: raise --sample or --overlap, or name fewer --scorers',
    );
  }
  const plan = planScoring(refs, { scorers, size, overlap, seed, shares });
  const rule: PlanRule = {
    scorers,
    sample: options.sample,
    overlap,
    seed,
    show_system_prompt: options.showSystemPrompt === true,
  };

  // 3. Each chosen transcript's hash and its page's content; all read before anything is written.
  const shown = pageTranscripts(plan.chosen, options, rubric, rule.show_system_prompt);

  // 4. Each scorer's sheet and page, and the plan itself, so the gate can tell a sheet lost or a
  // row deleted from one still to fill in.
  const files = new Map<string, string>();
  const assignments: Assignment[] = [];
  const issued = issuedVersions(previousPlan(options.out));
  for (const [scorer, assigned] of plan.assignments) {
    const rows = assigned.map((ref) => {
      const page = shown.get(pairKey(ref.task_id, ref.model))!;
      assignments.push(assignmentOf(scorer, page));
      return { task_id: ref.task_id, model: ref.model, transcript_sha256: page.transcript_sha256 };
    });
    const sheet = scoringSheet(rows, rubric, scorer);
    files.set(sheetFile(options.out, scorer), sheet);
    const page = pageOf(scorer, parseSheet(sheet), shown, rule, options.out, rubric, issued);
    files.set(pageFile(options.out, scorer), page);
  }
  files.set(path.join(options.out, PLAN_FILE), manifestText(rule, assignments, rubric));

  // 5. Nothing is written while a name is too long for the file system, any sheet there holds a
  // score, a CSV there is not in this plan, or a page there would lose a transcript.
  checkFileNames(options.out, [...files.keys()]);
  checkOutFolder(options.out, scorers);
  checkPages(options.out, plan.assignments);

  // 6. Each file whole or not at all (a temporary file renamed).
  writeFiles(options.out, files);

  // 7. What was assigned, and what the sample could not cover.
  io.stdout.write(planSummary(plan, refs.length, options, seed));
  const scales = rubric.dimensions.map((dimension) => scaleOf(dimension));
  io.stdout.write(`${sampleSupport(plan.chosen, refs, scales).join('\n')}\n`);
  for (const warning of coverageWarnings(refs, plan.chosen)) {
    io.stderr.write(`report: warning: ${warning}\n`);
  }
}

/**
 * `sheet --update`: the plan brought up to date with the transcripts, task files and rubric now.
 * An assignment whose inputs changed since it was issued gets its row emptied with the new hash;
 * a transcript the plan's rule now takes gets new assignments; a removed transcript's rows are kept
 * (orphaned). Every other row stays byte for byte; every page is written again, holding its sheet.
 */
export function updateScoringPlan(options: UpdateOptions, io: PlanIO): void {
  // 1. The plan, the rubric, the transcripts now, and each sheet as it is (checked as the gate
  // reads it, so a bad cell is named before anything is written).
  const manifestFile = path.join(options.out, PLAN_FILE);
  if (!fs.existsSync(manifestFile)) {
    throw new EvalInputError(
      `--update: ${manifestFile} not found: make the plan first with ` +
        `\`report.ts sheet --scorers alice,bob --out ${options.out}\``,
    );
  }
  const manifest = loadPlanManifest(manifestFile);
  const rubric = loadRubric(options.rubric);
  const refs = readTranscripts(options.transcripts);
  const refOf = new Map(refs.map((ref) => [pairKey(ref.task_id, ref.model), ref]));
  const scorers = [
    ...new Set([
      ...(manifest.rule?.scorers ?? []),
      ...manifest.assignments.map((entry) => entry.scorer),
    ]),
  ];
  const rule: PlanRule = manifest.rule ?? {
    scorers,
    overlap: 1,
    seed: 0,
    show_system_prompt: false,
  };
  const asWere = new Map(
    scorers.map((scorer) => [scorer, readPlanSheet(options.out, scorer, rubric)]),
  );

  // 1b. Each sheet in the rubric's columns now; a score of a level the plan's rubric had and this
  // one lacks emptied (a plan.json older than its rubric: the columns only).
  const change = manifest.rubric === undefined ? undefined : rubricChange(manifest.rubric, rubric);
  const reshaped = new Map(
    [...asWere].map(([scorer, sheet]) => {
      return [scorer, sheetToRubric(sheet, rubric, change?.levelsDropped ?? new Map())];
    }),
  );
  const sheets = new Map([...reshaped].map(([scorer, done]) => [scorer, done.sheet]));

  // 2. The transcripts the plan does not hold that its rule takes now (the plan's own kept as
  // they are); they get scorers below.
  const planned = new Set(manifest.assignments.map((entry) => pairKey(entry.task_id, entry.model)));
  const random = mulberry32(rule.seed + planned.size);
  let fresh: TranscriptRef[] = [];
  if (manifest.rule !== undefined && refs.length > 0) {
    const shares = tutorShares(manifest.rule.sample, refs, true);
    const size =
      shares === null
        ? Math.min(refs.length, ruleSize(manifest.rule.sample, refs.length))
        : shareTotal(shares);
    fresh = sampleMore(refs, planned, { size, shares: shares ?? undefined }, random);
  }
  const kept = manifest.assignments.filter((entry) =>
    refOf.has(pairKey(entry.task_id, entry.model)),
  );
  const needed = [...new Set(kept.map((entry) => pairKey(entry.task_id, entry.model)))];
  const current = pageTranscripts(
    [...needed.map((key) => refOf.get(key)!), ...fresh],
    options,
    rubric,
    rule.show_system_prompt,
  );

  // 2b. A rubric that only gained or lost dimensions or levels (its words the same) asks nothing
  // new of a score kept: what each page would show under the plan's rubric tells whether anything
  // else of its row changed.
  const reworded = change === undefined || change.reworded.length > 0;
  const asIssued =
    reworded || JSON.stringify(manifest.rubric) === JSON.stringify(rubric)
      ? undefined
      : pageTranscripts(
          needed.map((key) => refOf.get(key)!),
          options,
          manifest.rubric!,
          rule.show_system_prompt,
        );

  // 3. Each assignment: orphaned, edited since issued (its row emptied), lost (its row added back),
  // or as it was.
  const said = { edited: [] as string[], restored: [] as string[], orphaned: [] as string[] };
  const emptied = new Map(scorers.map((scorer) => [scorer, 0]));
  const blanked = new Set<SheetRecord>();
  const assignments: Assignment[] = [];
  for (const entry of manifest.assignments) {
    const label = `${entry.scorer}: ${pairLabel(entry)}`;
    const page = current.get(pairKey(entry.task_id, entry.model));
    if (page === undefined) {
      said.orphaned.push(label);
      assignments.push(entry);
      continue;
    }
    const sheet = sheets.get(entry.scorer)!;
    const index = sheet.records.findIndex((record) => isRowOf(record, entry));
    if (index < 0) {
      sheet.records.push(blankRecord(sheet, entry.scorer, page));
      said.restored.push(label);
    } else {
      const cells = sheet.records[index]!.cells!;
      const hash = (cells.transcript_sha256 ?? '').trim().toLowerCase();
      const issued = entry.inputs_sha256 ?? page.inputs_sha256;
      const before = asIssued?.get(pairKey(entry.task_id, entry.model))?.inputs_sha256;
      if (hash !== page.transcript_sha256 || issued !== (before ?? page.inputs_sha256)) {
        const given = [...rubricDimensions(rubric), 'notes', 'unsure'].filter((column) => {
          return (cells[column] ?? '').trim() !== '';
        });
        emptied.set(entry.scorer, emptied.get(entry.scorer)! + given.length);
        sheet.records[index] = blankRecord(sheet, entry.scorer, page);
        blanked.add(sheet.records[index]!);
        said.edited.push(label);
      }
    }
    assignments.push(assignmentOf(entry.scorer, page));
  }

  // 4. The new transcripts, each to the scorers with the least work.
  const loads = new Map(rule.scorers.map((scorer) => [scorer, 0]));
  for (const entry of kept) {
    loads.set(entry.scorer, (loads.get(entry.scorer) ?? 0) + 1);
  }
  const given = assignScorers(fresh, rule.scorers, rule.overlap, random, loads);
  const added = new Map<string, string[]>();
  for (const [scorer, refsGiven] of given) {
    for (const ref of refsGiven) {
      const page = current.get(pairKey(ref.task_id, ref.model))!;
      sheets.get(scorer)!.records.push(blankRecord(sheets.get(scorer)!, scorer, page));
      assignments.push(assignmentOf(scorer, page));
      const label = pairLabel(ref);
      added.set(label, [...(added.get(label) ?? []), scorer]);
    }
  }

  // 4b. Every row kept is read as the gate will read it, so a bad cell is named before anything is
  // written; a sheet that lost a cell holding something is kept as it was, beside the new one.
  const aside = new Map<string, string>();
  for (const [scorer, sheet] of sheets) {
    checkRows(asWere.get(scorer)!, sheet, blanked, rubric);
    const { changes } = reshaped.get(scorer)!;
    const lost =
      emptied.get(scorer)! +
      [...changes.removed.values()].reduce((sum, count) => sum + count, 0) +
      [...changes.levels.values()].reduce((sum, rows) => sum + rows.length, 0);
    if (lost > 0) {
      aside.set(keptAsideFile(options.out, scorer), sheetText(asWere.get(scorer)!));
    }
  }

  // 5. The sheets as they were where cells were lost, then every sheet, every page (holding its
  // sheet's scores), the plan; each file whole.
  const files = new Map(aside);
  const issued = issuedVersions(manifest);
  for (const [scorer, sheet] of sheets) {
    files.set(sheet.file, sheetText(sheet));
    files.set(
      pageFile(options.out, scorer),
      pageOf(scorer, sheet, current, rule, options.out, rubric, issued),
    );
  }
  files.set(manifestFile, manifestText(manifest.rule, assignments, rubric));
  writeFiles(options.out, files);

  // 6. What changed.
  const lines = [`update: ${assignments.length} assignment(s) in ${options.out}`];
  lines.push(...rubricLines(reshaped));
  const list = (names: string[]) => (names.length === 0 ? 'none' : names.join(', '));
  lines.push(`  edited since issued, scores emptied: ${list(said.edited)}`);
  const cellsEmptied = [...emptied.values()].reduce((sum, count) => sum + count, 0);
  if (cellsEmptied > 0) {
    lines.push(`  cells those edits emptied (scores, notes, unsure): ${cellsEmptied}`);
  }
  if (aside.size > 0) {
    lines.push(`  each sheet that lost a cell, as it was: ${[...aside.keys()].join(', ')}`);
  }
  const addedLabels = [...added].map((entry) => `${entry[0]} for ${entry[1].join(', ')}`);
  lines.push(`  new transcripts assigned: ${list(addedLabels)}`);
  if (said.restored.length > 0) {
    lines.push(`  rows missing from their sheet, added back empty: ${list(said.restored)}`);
  }
  lines.push(`  orphaned (transcript removed; rows kept): ${list(said.orphaned)}`);
  lines.push(
    `  pages written again: ${scorers.map((scorer) => pageFile(options.out, scorer)).join(', ')}`,
  );
  io.stdout.write(`${lines.join('\n')}\n`);
  if (manifest.rule === undefined) {
    io.stderr.write(
      `report: warning: ${manifestFile} predates --update and holds no sampling rule: no new ` +
        'transcript was assigned\n',
    );
  }
}

/**
 * A sheet of the plan's folder, with every row as its bytes; a lost sheet starts empty. Its score
 * columns may be another rubric's (brought to this one later); its cells are checked then.
 */
function readPlanSheet(out: string, scorer: string, rubric: Rubric): Sheet {
  const file = sheetFile(out, scorer);
  if (!fs.existsSync(file)) {
    return Object.assign(parseSheet(scoringSheet([], rubric, scorer)), { file });
  }
  readCsvFile(file); // text a CSV reader can read, else an error naming the file
  const sheet = Object.assign(parseSheet(fs.readFileSync(file, 'utf8')), { file });
  const twice = sheet.header.find((column, i) => sheet.header.indexOf(column) !== i);
  if (twice !== undefined) {
    throw new EvalInputError(`${file}: header: column "${twice}" appears twice; keep one`);
  }
  const missing = ['task_id', 'model', 'notes', 'transcript_sha256'].filter((column) => {
    return !sheet.header.includes(column);
  });
  if (missing.length > 0) {
    throw new EvalInputError(
      `${file}: no column ${missing.join(', ')}: the sheet does not match the plan; plan again ` +
        'in another --out',
    );
  }
  return sheet;
}

/**
 * Each row of `sheet` that `asWere` held and the update kept, read as the gate reads it (every
 * cell allowed, no transcript twice); an error names the file and the row's line as it was.
 */
function checkRows(asWere: Sheet, sheet: Sheet, blanked: Set<SheetRecord>, rubric: Rubric): void {
  let line = asWere.head.split('\n').length - (asWere.head.endsWith('\n') ? 1 : 0);
  const seen = new Set<string>();
  asWere.records.forEach((was, i) => {
    line += was.raw.replace(/\r?\n$/, '').split('\n').length;
    const record = sheet.records[i]!;
    if (record.cells === undefined || blanked.has(record)) return;
    const at = `${sheet.file}: line ${line}`;
    const row = humanRowOf(record.cells, rubric, at);
    if (seen.has(assignmentKey(row))) {
      throw new EvalInputError(`${at}: ${pairLabel(row)} scored twice by "${row.scorer}"`);
    }
    seen.add(assignmentKey(row));
  });
}

/** Where a sheet is kept as it was before an update: `before-update/<scorer>.<n>.csv`, the first n
 * free (a folder the plan's readers never look in: they read the sheets beside plan.json). */
function keptAsideFile(out: string, scorer: string): string {
  const folder = path.join(out, 'before-update');
  let n = 1;
  while (fs.existsSync(path.join(folder, `${scorer}.${n}.csv`))) {
    n++;
  }
  return path.join(folder, `${scorer}.${n}.csv`);
}

/** What the rubric's edit did to the sheets, a line a change: its cells counted over them all. */
function rubricLines(reshaped: Map<string, { changes: SheetChanges }>): string[] {
  const added = new Map<string, number>();
  const removed = new Map<string, number>();
  const levels = new Map<string, string[]>();
  for (const [scorer, { changes }] of reshaped) {
    for (const [name, rows] of changes.added) {
      added.set(name, (added.get(name) ?? 0) + rows);
    }
    for (const [name, cells] of changes.removed) {
      removed.set(name, (removed.get(name) ?? 0) + cells);
    }
    for (const [level, rows] of changes.levels) {
      const labels = rows.map((label) => `${scorer}: ${label}`);
      levels.set(level, [...(levels.get(level) ?? []), ...labels]);
    }
  }
  const lines: string[] = [];
  for (const [name, rows] of added) {
    lines.push(
      `  rubric: dimension ${name} added: a new empty column, ${rows} row(s) to score in it`,
    );
  }
  for (const [name, cells] of removed) {
    lines.push(
      `  rubric: column ${name} removed (no dimension of the rubric now): ${cells} cell(s) ` +
        'held something',
    );
  }
  for (const [level, rows] of levels) {
    const [name, score] = level.split(' ');
    lines.push(
      `  rubric: ${name} has no level ${score} now: ${rows.length} score(s) emptied, their rows ` +
        `open again: ${rows.join(', ')}`,
    );
  }
  return lines;
}

/** The assignment as plan.json records it: who, which transcript, and what the page showed. */
function assignmentOf(scorer: string, page: PageTranscript): Assignment {
  const { task_id, model } = page.ref;
  return { scorer, task_id, model, inputs_sha256: page.inputs_sha256 };
}

/** plan.json: the rule to plan again by, every assignment, the rubric the sheets are in. */
function manifestText(
  rule: PlanRule | undefined,
  assignments: Assignment[],
  rubric: Rubric,
): string {
  const manifest: PlanManifest = { rule, assignments, rubric };
  return `${JSON.stringify(manifest, null, 2)}\n`;
}

/** `--sample` as the plan's rule gave it, for the number of transcripts there are now. */
function ruleSize(sample: string | undefined, total: number): number {
  if (sample !== undefined && /^\d+$/.test(sample)) {
    return Number(sample);
  }
  return sampleSize(sample, total);
}

const sheetFile = (out: string, scorer: string) => path.join(out, `${scorer}.csv`);
const pageFile = (out: string, scorer: string) => path.join(out, `${scorer}.html`);

/** The folders, then each file whole or not at all (a temporary file renamed), in order. */
function writeFiles(out: string, files: Map<string, string>): void {
  checkFileNames(out, [...files.keys()]);
  for (const folder of new Set([out, ...[...files.keys()].map((file) => path.dirname(file))])) {
    writablePath(folder, () => fs.mkdirSync(folder, { recursive: true }));
  }
  for (const [file, content] of files) {
    writablePath(file, () => replaceFileDurably(file, content));
  }
}

// ---- The pages: what each transcript shows, and each scorer's page -----------------------------

/** Each transcript's page content and hashes, read once (task files once a task). */
function pageTranscripts(
  refs: TranscriptRef[],
  dirs: { tasks: string; referenceKeys: string },
  rubric: Rubric,
  showSystemPrompt: boolean,
): Map<string, PageTranscript> {
  const shown = new Map<string, PageTranscript>();
  const taskFiles = new Map<string, { task: Task; referenceKey: ReferenceKey }>();
  for (const ref of refs) {
    let files = taskFiles.get(ref.task_id);
    if (files === undefined) {
      files = loadTaskFiles(dirs, ref.task_id);
      taskFiles.set(ref.task_id, files);
    }
    const hash = sha256(readTranscriptBytes(ref));
    const transcript = loadTranscript(ref);
    const values = promptValues(files.task, files.referenceKey, transcript, rubric);
    const images = transcriptImages(transcript, ref.path);
    // What the judge is shown, so an edit of any of it (task, key, transcript, rubric) is seen.
    const inputs = sha256(JSON.stringify([values, images]));
    const turns = transcriptTurns(transcript, images, showSystemPrompt);
    const page = { ref, transcript_sha256: hash, inputs_sha256: inputs, values, turns };
    shown.set(pairKey(ref.task_id, ref.model), page);
  }
  return shown;
}

/** The transcript's messages as the page shows them: labelled, images in their turn. */
export function transcriptTurns(
  transcript: Transcript,
  images: TranscriptImage[],
  showSystemPrompt: boolean,
): PageTurn[] {
  const turns: PageTurn[] = [];
  if (transcript.problem_statement !== undefined && transcript.problem_statement.trim() !== '') {
    turns.push({
      who: 'Problem (as given to the student)',
      text: transcript.problem_statement,
      images: [],
    });
  }
  let next = 0;
  for (const message of transcript.messages) {
    const own: TranscriptImage[] = [];
    let text: string;
    if (typeof message.content === 'string') {
      text = message.content;
    } else {
      const parts = message.content.map((block) => {
        if ('text' in block) return block.text;
        own.push(images[next]!);
        next++;
        return own.at(-1)!.label;
      });
      text = parts.join('\n');
    }
    // The system prompt tells the tutors apart: hidden unless asked for (--show-system-prompt).
    if (message.role === 'system' && !showSystemPrompt) {
      if (turns.at(-1)?.hidden !== true) {
        turns.push({ who: 'System prompt', text: '', images: [], hidden: true });
      }
      continue;
    }
    const who = TURN_LABELS[message.role];
    turns.push({ who, text: text.trim(), images: own });
  }
  return turns;
}

const TURN_LABELS = {
  user: 'Student',
  assistant: 'Tutor',
  system: 'System prompt (given to the tutor)',
};

/**
 * One scorer's page: its sheet's rows (their scores embedded, and what each row's answers are for),
 * its transcripts in a seeded order. `issued` is what each assignment's page showed before this
 * write (plan.json as it was).
 */
function pageOf(
  scorer: string,
  sheet: Sheet,
  shown: Map<string, PageTranscript>,
  rule: PlanRule,
  out: string,
  rubric: Rubric,
  issued: Map<string, string | undefined>,
): string {
  const rows = sheet.records
    .filter((record) => record.cells !== undefined)
    .map((record) => {
      const cells: Record<string, string> = {};
      for (const column of sheet.header) {
        cells[column] = unguard(record.cells![column] ?? '');
      }
      return cells;
    });
  const onPage = rows
    .map((cells, row) => ({ row, page: shown.get(pairKey(cells.task_id!, cells.model!)) }))
    .filter((entry) => entry.page !== undefined)
    .sort((a, b) => comparePairs(a.page!.ref, b.page!.ref));
  const random = mulberry32(rule.seed + rule.scorers.indexOf(scorer) + 1);
  const transcripts = shuffled(onPage, random).map((entry) => {
    return Object.assign({}, entry.page!, { row: entry.row });
  });
  // Answers in the browser are kept per plan folder and scorer (the page adds the scorer), so a
  // page written again, however planned, finds them; and those a page written before kept.
  const storageKey = pageStorageKey(out);
  const before = writtenPage(pageFile(out, scorer));
  // A row on the page: answers for what it shows now. A transcript taken off the page: answers for
  // what it showed when issued.
  const earlier = earlierAnswers(before, scorer, issued);
  const versions = rows.map((cells): RowVersion => {
    const pair = pairKey(cells.task_id!, cells.model!);
    const page = shown.get(pair);
    const assignment = `${scorer}\n${pair}`;
    if (page === undefined && !issued.has(assignment)) return null;
    const version =
      page?.inputs_sha256 ?? issued.get(assignment) ?? `transcript ${cells.transcript_sha256}`;
    return { version, earlier: earlier(pair, version) };
  });
  const previousKeys = new Set<string>();
  for (const key of [before?.plan, ...(before?.previous ?? [])]) {
    if (typeof key === 'string' && key !== storageKey) {
      previousKeys.add(key);
    }
  }
  return scoringPage({
    scorer,
    rubric,
    storageKey,
    previousKeys: [...previousKeys],
    header: sheet.header,
    rows,
    versions,
    transcripts,
  });
}

/**
 * What each assignment's page showed (its `inputs_sha256`, undefined in a plan.json older than
 * that), by scorer and transcript.
 */
function issuedVersions(manifest: PlanManifest | undefined): Map<string, string | undefined> {
  const issued = new Map<string, string | undefined>();
  for (const entry of manifest?.assignments ?? []) {
    issued.set(`${entry.scorer}\n${pairKey(entry.task_id, entry.model)}`, entry.inputs_sha256);
  }
  return issued;
}

/**
 * Whether answers that a page of an earlier release kept (they name no version) are for a row: only
 * where such a page stood here and showed what the row shows now. A page of this release passes on
 * its own word, so that writing a page again changes nothing.
 */
function earlierAnswers(
  before: WrittenPage | undefined,
  scorer: string,
  issued: Map<string, string | undefined>,
): (pair: string, version: string) => boolean {
  if (before === undefined) return () => false;
  if (before.versions === undefined) {
    return (pair, version) => {
      const assignment = `${scorer}\n${pair}`;
      return issued.has(assignment) && (issued.get(assignment) ?? version) === version;
    };
  }
  const kept = new Set<string>();
  before.rows.forEach((cells, i) => {
    const row = before.versions![i] as { version?: unknown; earlier?: unknown } | null | undefined;
    if (row?.earlier === true) kept.add(`${pairKey(cells.task_id!, cells.model!)}\n${row.version}`);
  });
  return (pair, version) => kept.has(`${pair}\n${version}`);
}

/** The plan.json a plan made again replaces; none when there is none or it cannot be read. */
function previousPlan(out: string): PlanManifest | undefined {
  const file = path.join(out, PLAN_FILE);
  if (!fs.existsSync(file)) return undefined;
  try {
    return loadPlanManifest(file);
  } catch {
    return undefined; // the new plan replaces it; its pages' answers then count for nothing
  }
}

const pageStorageKey = (out: string) => sha256(JSON.stringify([path.resolve(out)])).slice(0, 16);

/**
 * What a page written before holds: its storage keys, its sheet's rows and their versions (none in a
 * page of an earlier release), the rows it shows.
 */
type WrittenPage = {
  plan?: unknown;
  previous?: unknown[];
  rows: Record<string, string>[];
  versions?: unknown[];
  shown: number[];
};

/** The page at `file` as the plan wrote it; undefined when there is none or it is not a page. */
function writtenPage(file: string): WrittenPage | undefined {
  let html: string;
  try {
    html = fs.readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  const json = /<script type="application\/json" id="plan-data">([\s\S]*?)<\/script>/.exec(html);
  if (json === null) return undefined;
  let data: { plan?: unknown; previous?: unknown; rows?: unknown; versions?: unknown };
  try {
    data = JSON.parse(json[1]!);
  } catch {
    return undefined;
  }
  if (!Array.isArray(data.rows)) return undefined;
  const shown = [...html.matchAll(/<form class="scores" data-row="(\d+)"/g)].map((match) => {
    return Number(match[1]);
  });
  const previous = Array.isArray(data.previous) ? data.previous : [];
  const versions = Array.isArray(data.versions) ? data.versions : undefined;
  return { plan: data.plan, previous, rows: data.rows, versions, shown };
}

// ---- A sheet on disk, row by row as its bytes ---------------------------------------------------

/** A sheet's header line, its rows each as its own bytes (line end included) and their cells. */
type Sheet = { file: string; head: string; header: string[]; eol: string; records: SheetRecord[] };

/** A row as written (`raw`), and its cells by column; a blank line has none. */
type SheetRecord = { raw: string; cells?: Record<string, string> };

/** A sheet's text split into records (quoted line breaks kept inside), each parsed. */
function parseSheet(text: string): Sheet {
  const raws: string[] = [];
  let start = 0;
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '"') {
      quoted = !quoted;
    } else if (text[i] === '\n' && !quoted) {
      raws.push(text.slice(start, i + 1));
      start = i + 1;
    }
  }
  if (start < text.length) {
    raws.push(text.slice(start));
  }
  const head = raws.shift() ?? '';
  const header = parseCsv(head, { bom: true })[0] ?? [];
  const records = raws.map((raw) => {
    if (raw.trim() === '') {
      return { raw };
    }
    const values: string[] = parseCsv(raw, { relax_column_count: true })[0] ?? [];
    const cells = Object.fromEntries(header.map((column, i) => [column, values[i] ?? '']));
    return { raw, cells };
  });
  return { file: '', head, header, eol: head.endsWith('\r\n') ? '\r\n' : '\n', records };
}

/** The sheet's text: its header and rows as they are, a last line without its end given one. */
function sheetText(sheet: Sheet): string {
  const raws = [sheet.head, ...sheet.records.map((record) => record.raw)];
  return raws
    .map((raw, i) => (i < raws.length - 1 && !raw.endsWith('\n') ? raw + sheet.eol : raw))
    .join('');
}

/** Whether a sheet row is this assignment's (its cells guarded as the sheet writes them). */
function isRowOf(record: SheetRecord, pair: Pair): boolean {
  if (record.cells === undefined) return false;
  return (
    unguard(record.cells.task_id ?? '') === pair.task_id &&
    unguard(record.cells.model ?? '') === pair.model
  );
}

/** A row to score in this sheet's columns and line ends: the transcript and its hash, no score. */
function blankRecord(sheet: Sheet, scorer: string, page: PageTranscript): SheetRecord {
  const values: Record<string, string> = {
    task_id: page.ref.task_id,
    model: page.ref.model,
    scorer,
    transcript_sha256: page.transcript_sha256,
  };
  const line = csvLine(sheet.header.map((column) => guardCell(values[column] ?? '')));
  const raw = line.slice(0, -1) + sheet.eol;
  return parseSheet(sheet.head + raw).records[0]!;
}

// ---- The plan: pure functions of the transcripts, the scorers and a seed -----------------------

/** The transcripts chosen (sorted), and each scorer's share of them (sorted), in scorer order. */
export type Plan<T extends Pair> = {
  chosen: T[];
  assignments: Map<string, T[]>;
  overlap: number;
};

/** The plan for these transcripts: `size` of them stratified (each tutor's count `shares` says,
 * when given), each given to `overlap` scorers. */
export function planScoring<T extends Pair>(
  refs: T[],
  options: {
    scorers: string[];
    size: number;
    overlap: number;
    seed: number;
    shares?: Map<string, number> | null;
  },
): Plan<T> {
  const random = mulberry32(options.seed);
  const chosen = stratifiedSample(refs, options.size, random, options.shares ?? undefined);
  const assignments = assignScorers(chosen, options.scorers, options.overlap, random);
  return { chosen, assignments, overlap: options.overlap };
}

/**
 * `size` transcripts, every model's count and every task's count as even as the transcripts allow
 * (within one of each other when every model has every task), the ties broken by `random`; with
 * `shares`, each model's count is its share there instead.
 */
export function stratifiedSample<T extends Pair>(
  refs: T[],
  size: number,
  random: () => number,
  shares?: ReadonlyMap<string, number>,
): T[] {
  // 1. A random order breaks every tie below; the models' order is their first in it. (The
  // transcripts are distinct objects: each ranked by itself, no key built in the sort below.)
  const order = shuffled(refs, random);
  const rank = new Map(order.map((ref, i) => [ref, i]));
  const rankOf = (ref: T) => rank.get(ref)!;
  const byModel = groupBy(order, (ref) => ref.model);

  // 2. Each model's share, dealt one at a time to the model with the smallest share that has more.
  const share = new Map([...byModel.keys()].map((model) => [model, shares?.get(model) ?? 0]));
  for (let dealt = 0; dealt < size && shares === undefined; dealt++) {
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
 * What a plan brought up to date adds to its sample (`planned`: the pairs it holds): each tutor's
 * count brought to the rule's on the transcripts there are now (its `shares` count, else `size`
 * dealt one at a time to the tutor with the fewest that has more, each starting from what the
 * plan holds of it), drawn from the tutor's transcripts the plan does not hold, the tasks chosen
 * least first, the ties broken by `random`. Nothing the plan holds is drawn again or taken away.
 */
export function sampleMore<T extends Pair>(
  refs: T[],
  planned: ReadonlySet<string>,
  rule: { size: number; shares?: ReadonlyMap<string, number> },
  random: () => number,
): T[] {
  // 1. A random order breaks every tie below; the tutors' order is their first in it.
  const order = shuffled(refs, random);
  const rank = new Map(order.map((ref, i) => [ref, i]));
  const isHeld = (ref: T) => planned.has(pairKey(ref.task_id, ref.model));
  const byModel = groupBy(order, (ref) => ref.model);
  const held = new Map([...byModel].map(([model, own]) => [model, own.filter(isHeld).length]));

  // 2. Each tutor's count now: at least what the plan holds of it, at most what it has.
  const target = new Map(held);
  for (const [model, own] of byModel) {
    if (rule.shares !== undefined) {
      const share = rule.shares.get(model) ?? 0;
      target.set(model, Math.min(own.length, Math.max(held.get(model)!, share)));
    }
  }
  let total = [...held.values()].reduce((sum, count) => sum + count, 0);
  for (; total < rule.size && rule.shares === undefined; total++) {
    let next: string | undefined;
    for (const [model, own] of byModel) {
      const open = target.get(model)! < own.length;
      if (open && (next === undefined || target.get(model)! < target.get(next)!)) {
        next = model;
      }
    }
    if (next === undefined) break;
    target.set(next, target.get(next)! + 1);
  }

  // 3. Each tutor (fewest transcripts first) draws the rest among the tasks chosen least so far.
  const taskCount = new Map<string, number>();
  const countOf = (ref: T) => taskCount.get(ref.task_id) ?? 0;
  for (const ref of order.filter(isHeld)) {
    taskCount.set(ref.task_id, countOf(ref) + 1);
  }
  const models = [...byModel.keys()].sort(
    (a, b) => byModel.get(a)!.length - byModel.get(b)!.length,
  );
  const added: T[] = [];
  for (const model of models) {
    const candidates = byModel
      .get(model)!
      .filter((ref) => !isHeld(ref))
      .sort((a, b) => countOf(a) - countOf(b) || rank.get(a)! - rank.get(b)!);
    for (const ref of candidates.slice(0, target.get(model)! - held.get(model)!)) {
      taskCount.set(ref.task_id, countOf(ref) + 1);
      added.push(ref);
    }
  }
  return added.sort(comparePairs);
}

/**
 * Each transcript to `overlap` different scorers, each time those with the least work (the least
 * recently given one first), so that the scorers' loads stay within one of each other (of what
 * `loads` says they have already, when given).
 */
export function assignScorers<T extends Pair>(
  chosen: T[],
  scorers: string[],
  overlap: number,
  random: () => number,
  loads?: Map<string, number>,
): Map<string, T[]> {
  // A plan brought up to date starts from the work each scorer has already.
  const load = new Map(scorers.map((scorer) => [scorer, loads?.get(scorer) ?? 0]));
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
 * A sheet people fill in, blind to the judge: the judge CSV's columns, then (a plan's sheet, its
 * rows hashed) `unsure`, then `scorer` when one is named, then `transcript_sha256`; a row per
 * transcript, the scores empty.
 */
export function scoringSheet(refs: SheetRef[], rubric: Rubric, scorer?: string): string {
  const hashed = scorer !== undefined && refs.every((ref) => ref.transcript_sha256 !== undefined);
  const header = scoreColumns(rubric);
  if (hashed) {
    header.push('unsure');
  }
  if (scorer !== undefined) {
    header.push('scorer');
  }
  if (hashed) {
    header.push('transcript_sha256');
  }
  const rows = refs.map((ref) => {
    const values: Record<string, string> = {
      task_id: ref.task_id,
      model: ref.model,
      scorer: scorer ?? '',
      transcript_sha256: ref.transcript_sha256 ?? '',
    };
    // Guarded like the judge CSV: people open the sheet in a spreadsheet, where =cmd() would run.
    return header.map((column) => guardCell(values[column] ?? ''));
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
    // <name>.html is written through <name>.html.<pid>.tmp, which must fit a file name too.
    const room = NAME_MAX - Buffer.byteLength(`.html${TEMP_SUFFIX}`);
    if (Buffer.byteLength(name) > room) {
      throw new EvalInputError(
        `--scorers: "${name}" is too long for a file name: at most ${room} bytes (UTF-8), ` +
          `it has ${Buffer.byteLength(name)}`,
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

/**
 * `--sample N` or `--sample P%` of `total` transcripts (P% rounded, at least one); else all.
 * `folder`, where they were found, is named when N is more than there are.
 */
export function sampleSize(value: string | undefined, total: number, folder?: string): number {
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
    throw new EvalInputError(
      `--sample ${value}: there are only ${total} transcripts${foundIn(folder)}`,
    );
  }
  return size;
}

/** " in FOLDER", and how to read a study's when it is the default (the script's folder). */
function foundIn(folder: string | undefined): string {
  if (folder === undefined) return '';
  if (path.normalize(folder) !== path.normalize(DEFAULTS.transcripts)) return ` in ${folder}`;
  return ` in ${folder}, the default folder here; a study's own: --dir STUDY`;
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

/** The longest a temporary file's suffix (`.<pid>.tmp`) can be: Linux pids reach 4194304. */
const TEMP_SUFFIX = '.4194304.tmp';
/** What nearly every file system allows: 255 bytes a name, 4095 a path (Linux's PATH_MAX). */
const NAME_MAX = 255;
const PATH_MAX = 4095;

/**
 * Refuses, before anything is written, a file whose name or path the file system would refuse,
 * counting the temporary copy each file is written through.
 */
function checkFileNames(out: string, files: string[]): void {
  for (const file of [out, ...files]) {
    const written = file === out ? path.resolve(file) : path.resolve(file) + TEMP_SUFFIX;
    const long = written.split(path.sep).find((part) => Buffer.byteLength(part) > NAME_MAX);
    if (long !== undefined || Buffer.byteLength(written) > PATH_MAX) {
      throw new EvalInputError(
        `${file}: too long for a file name (at most ${NAME_MAX} bytes a name, ${PATH_MAX} a path, ` +
          'with the temporary copy it is written through); choose a shorter --out (nothing written)',
      );
    }
  }
}

/**
 * Refuses a plan that takes a transcript off a scorer's page: the answers her browser keeps for it
 * (never in the sheet until downloaded) would no longer show. The script cannot see a browser, so
 * any page there counts; moving it away says its answers are safe.
 */
function checkPages(out: string, assignments: Map<string, TranscriptRef[]>): void {
  const refusals: string[] = [];
  for (const [scorer, assigned] of assignments) {
    const file = pageFile(out, scorer);
    const page = writtenPage(file);
    if (page === undefined) continue;
    const kept = new Set(assigned.map((ref) => pairKey(ref.task_id, ref.model)));
    const taken = page.shown
      .map((row) => page.rows[row])
      .filter((cells) => cells !== undefined && !kept.has(pairKey(cells.task_id!, cells.model!)))
      .map((cells) => pairLabel({ task_id: cells!.task_id!, model: cells!.model! }));
    if (taken.length > 0) {
      refusals.push(
        `${file}: this plan takes ${taken.length} transcript(s) off the page (${taken.join(', ')})`,
      );
    }
  }
  if (refusals.length > 0) {
    throw new EvalInputError(
      `${refusals.join('; ')}, and the answers a browser keeps for them would no longer show: ` +
        'download each sheet from its page over the sheet, then add transcripts with ' +
        `\`report.ts sheet --update --out ${out}\` (every page keeps its transcripts), or move ` +
        'the page away to plan anew (nothing written)',
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
  lines.push(`  per tutor (model): ${counts((ref) => ref.model)}`);
  lines.push(`  per task: ${counts((ref) => ref.task_id)}`);

  const overlapping = plan.overlap > 1 ? plan.chosen.length : 0;
  lines.push(
    `  scored by more than one scorer (for the human ceiling): ${overlapping} transcripts`,
  );
  const assigned = [...plan.assignments].map(([scorer, refs]) => {
    return { scorer, count: refs.length };
  });
  const altTest = altTestPlan(assigned, plan.overlap, plan.chosen.length, total);
  lines.push(`  ${wrapped(altTest.split(' '), ' ', 98).replaceAll('\n', '\n  ')}`);
  return `${lines.join('\n')}\n`;
}

/**
 * A tutor or task the sample leaves out, named: stratification spreads the sample as evenly as the
 * transcripts allow, but a sample smaller than the tutors or tasks cannot hold them all.
 */
export function coverageWarnings(refs: Pair[], chosen: Pair[]): string[] {
  const warnings: string[] = [];
  const strata = [
    { kind: 'tutor (model)', kinds: 'tutors', key: (ref: Pair) => ref.model },
    { kind: 'task', kinds: 'tasks', key: (ref: Pair) => ref.task_id },
  ];
  for (const stratum of strata) {
    const all = [...new Set(refs.map(stratum.key))].sort(compareText);
    const taken = new Set(chosen.map(stratum.key));
    const left = all.filter((name) => !taken.has(name));
    if (left.length === 0) continue;
    warnings.push(
      `the sample of ${chosen.length} leaves out ${left.length} of the ${all.length} ` +
        `${stratum.kinds}, ${stratum.kind} ${left.join(', ')}: none of their transcripts is ` +
        `scored by people; raise --sample (at least ${all.length} to cover every one)`,
    );
  }
  return warnings;
}
