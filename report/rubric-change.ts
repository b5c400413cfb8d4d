// report/rubric-change.ts: what an edited rubric does to a plan's sheets (`sheet --update`): the
// dimensions added, dropped or reworded and the levels dropped since the sheets were made, and
// each sheet brought to the rubric now: a new dimension's column added empty, a column the rubric
// no longer has removed, a score of a dropped level emptied. What each change emptied is counted
// for the update to say; the update keeps the sheet as it was. Pure functions.
import { SHEET_COLUMNS, csvLine, pairLabel, scoreColumns, unguard } from '../run-judge.ts';
import type { Rubric } from '../run-judge.ts';

/** How the rubric now differs from the one the sheets were made with. */
export type RubricChange = {
  added: string[];
  dropped: string[];
  /** Per dimension kept with the same words, the levels (scores) it no longer has. */
  levelsDropped: Map<string, string[]>;
  /** Dimensions whose words changed: the description, a level's text, or a level added. */
  reworded: string[];
};

/** The change from `before` to `after`, dimension by dimension (their order aside). */
export function rubricChange(before: Rubric, after: Rubric): RubricChange {
  const change: RubricChange = { added: [], dropped: [], levelsDropped: new Map(), reworded: [] };
  const old = new Map(before.dimensions.map((dimension) => [dimension.name, dimension]));
  for (const dimension of after.dimensions) {
    const was = old.get(dimension.name);
    if (was === undefined) {
      change.added.push(dimension.name);
      continue;
    }
    const levels = Object.entries(dimension.scores);
    const sameWords = levels.every(([score, words]) => {
      return Object.hasOwn(was.scores, score) && was.scores[score] === words;
    });
    if (was.description !== dimension.description || !sameWords) {
      change.reworded.push(dimension.name);
      continue;
    }
    const gone = Object.keys(was.scores).filter((score) => !Object.hasOwn(dimension.scores, score));
    if (gone.length > 0) {
      change.levelsDropped.set(dimension.name, gone);
    }
  }
  const kept = new Set(after.dimensions.map((dimension) => dimension.name));
  change.dropped = before.dimensions.map((d) => d.name).filter((name) => !kept.has(name));
  return change;
}

/** A sheet as `sheet --update` holds it: its header line and each row as its bytes and cells. */
export type SheetLike = {
  head: string;
  header: string[];
  eol: string;
  records: { raw: string; cells?: Record<string, string> }[];
};

/** What bringing a sheet to the rubric did, each change counted in cells that held something. */
export type SheetChanges = {
  /** Per dimension added: the rows it is to be scored in. */
  added: Map<string, number>;
  /** Per column removed: its cells that held something. */
  removed: Map<string, number>;
  /** Per dimension and level dropped ("error_diagnosis 2"): the rows whose score it emptied. */
  levels: Map<string, string[]>;
};

/**
 * The sheet in the rubric's columns: a dimension missing goes after the one before it in the rubric
 * (else after `model`), empty; a column that is neither a column of the rubric's nor one of the
 * sheet's own is removed; a score of a level in `levelsDropped` is emptied. A row is written again
 * only where its cells changed; every other stays as its bytes.
 */
export function sheetToRubric<S extends SheetLike>(
  sheet: S,
  rubric: Rubric,
  levelsDropped: ReadonlyMap<string, string[]>,
): { sheet: S; changes: SheetChanges } {
  // 1. The columns now.
  const known = new Set([...scoreColumns(rubric), ...SHEET_COLUMNS]);
  const removed = sheet.header.filter((column) => !known.has(column));
  const header = sheet.header.filter((column) => known.has(column));
  const dimensions = rubric.dimensions.map((dimension) => dimension.name);
  const added = dimensions.filter((name) => !header.includes(name));
  for (const name of added) {
    const before = ['model', ...dimensions.slice(0, dimensions.indexOf(name))];
    const anchor = Math.max(...before.map((column) => header.indexOf(column)));
    header.splice(anchor + 1, 0, name);
  }
  const reshaped = removed.length > 0 || added.length > 0;

  // 2. Each row: its cells in those columns, a dropped level's score emptied, counted.
  const changes: SheetChanges = { added: new Map(), removed: new Map(), levels: new Map() };
  const records = sheet.records.map((record) => {
    if (record.cells === undefined) return record;
    const cells: Record<string, string> = {};
    for (const column of header) {
      cells[column] = record.cells[column] ?? '';
    }
    let changed = reshaped;
    for (const [name, levels] of levelsDropped) {
      const score = (cells[name] ?? '').trim();
      if (!levels.includes(score)) continue;
      cells[name] = '';
      changed = true;
      const key = `${name} ${score}`;
      const label = pairLabel({ task_id: unguard(cells.task_id!), model: unguard(cells.model!) });
      changes.levels.set(key, [...(changes.levels.get(key) ?? []), label]);
    }
    for (const name of added) {
      changes.added.set(name, (changes.added.get(name) ?? 0) + 1);
    }
    for (const column of removed) {
      const held = (record.cells[column] ?? '').trim() === '' ? 0 : 1;
      changes.removed.set(column, (changes.removed.get(column) ?? 0) + held);
    }
    if (!changed) return record;
    return { raw: csvLine(header.map((column) => cells[column]!)).slice(0, -1) + sheet.eol, cells };
  });

  // 3. The header line, its byte order mark kept.
  let head = sheet.head;
  if (reshaped) {
    const bom = head.startsWith('\ufeff') ? '\ufeff' : '';
    head = bom + csvLine(header).slice(0, -1) + sheet.eol;
  }
  return { sheet: Object.assign({}, sheet, { head, header, records }), changes };
}
