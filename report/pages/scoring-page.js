// @ts-check
// The scoring page's program (report/scoring-page.ts inlines it).
//
// Answers: each transcript's answer is kept in localStorage as it is given, one entry per
// transcript and version (the hash of what the judge is shown for it: the task, the reference
// notes, the transcript, the rubric), so an answer is only ever shown, counted or downloaded for
// what it was given for, and two tabs never write over each other's entries (another tab's answer
// arrives by the storage event). An entry also keeps what this browser knows the sheet held for
// its row: the page's own copy when the entry began, the sheet last read, the last download.
//
// The sheet: the page cannot read the sheet beside it, which may have moved on since the page was
// written (scored by hand, or from another browser). So a download first asks for the scorer's
// sheet as it is now and merges, cell by cell: where the sheet holds what this browser knew of it,
// the page's answer; where the page holds what the sheet was known to hold, the sheet's; where both
// changed, the page's, said. A blank never replaces a score. Import is the same merge, without the
// download.

/**
 * What an answer is for: `version` keys its entry; `earlier`, answers kept by pages of earlier
 * releases (which name no version) are for it too. Null for a row of no assignment, which is
 * taken from the sheet as it is.
 * @typedef {{ version: string, earlier: boolean } | null} RowVersion
 */

/**
 * What the page is written with (report/scoring-page.ts): the sheet's columns and rows, as text,
 * and each row's version.
 * @typedef {{
 *   scorer: string,
 *   plan: string,
 *   previous: string[],
 *   formula: string,
 *   header: string[],
 *   dimensions: string[],
 *   rows: Record<string, string>[],
 *   versions: RowVersion[],
 * }} PageData
 */

/**
 * A row's answer, by sheet column: each dimension's score, `notes`, `unsure` ('yes' or '');
 * '' where none is given.
 * @typedef {Record<string, string>} Cells
 */

/**
 * A row's entry in localStorage: the answer, and what the sheet held as this browser knew it.
 * @typedef {{ cells: Cells, page: Cells, read?: Cells, sent?: Cells }} Entry
 */

(() => {
  /**
   * The element of this id, of this class: the page is written with each, so a missing one is a
   * page this program was not written for.
   * @template {Element} T
   * @param {string} id
   * @param {{ new (): T }} type
   * @returns {T}
   */
  const element = (id, type) => {
    const found = document.getElementById(id);
    if (!(found instanceof type)) throw new Error(`the page has no ${type.name} #${id}`);
    return found;
  };
  /**
   * The first element under `root` matching `selector`, of this class.
   * @template {Element} T
   * @param {ParentNode} root
   * @param {string} selector
   * @param {{ new (): T }} type
   * @returns {T}
   */
  const inside = (root, selector, type) => {
    const found = root.querySelector(selector);
    if (!(found instanceof type)) throw new Error(`the page has no ${type.name} ${selector}`);
    return found;
  };

  /** @type {PageData} */
  const data = JSON.parse(element('plan-data', HTMLScriptElement).text);
  const formula = new RegExp(data.formula);
  const fields = data.dimensions.concat(
    ['notes'],
    data.header.includes('unsure') ? ['unsure'] : [],
  );
  const key = 'run-judge-scoring:' + data.plan + ':' + data.scorer;
  const plans = [data.plan].concat(data.previous);
  const sections = Array.from(document.querySelectorAll('section')).filter((section) => {
    return section.classList.contains('transcript');
  });
  const forms = sections.map((section) => inside(section, 'form.scores', HTMLFormElement));
  const links = Array.from(document.querySelectorAll('nav a'));
  const formOfRow = new Map(forms.map((form) => [Number(form.dataset.row), form]));
  /** @param {Record<string, string>} cells */
  const pairOf = (cells) => cells.task_id + '\n' + cells.model;
  const rowOfPair = new Map(data.rows.map((cells, row) => [pairOf(cells), row]));
  /** @param {number} row */
  const cellsOf = (row) => data.rows[row] ?? {};

  // ---- Answers as cells ------------------------------------------------------------------------

  /**
   * A sheet row's answer: its scores and notes as written, `unsure` as 'yes' or ''.
   * @param {Record<string, string>} cells
   * @returns {Cells}
   */
  const answerOfCells = (cells) => {
    /** @type {Cells} */
    const answer = {};
    for (const name of data.dimensions) {
      answer[name] = (cells[name] || '').trim();
    }
    answer.notes = cells.notes || '';
    if (fields.includes('unsure')) {
      answer.unsure = (cells.unsure || '').trim().toLowerCase() === 'yes' ? 'yes' : '';
    }
    return answer;
  };
  /** The row the sheet was written with, as an answer. @param {number} row */
  const written = (row) => answerOfCells(cellsOf(row));

  /**
   * A dimension's radios; by name, as a lone radio is no RadioNodeList (its value is not an
   * answer).
   * @param {HTMLFormElement} form
   * @param {string} name
   */
  const radiosOf = (form, name) =>
    Array.from(form.querySelectorAll('input')).filter((input) => {
      return input.type === 'radio' && input.name === name;
    });
  /** @param {HTMLFormElement} form */
  const notesOf = (form) => inside(form, 'textarea[name=notes]', HTMLTextAreaElement);
  /** @param {HTMLFormElement} form */
  const unsureOf = (form) => inside(form, 'input[name=unsure]', HTMLInputElement);
  /**
   * @param {HTMLFormElement} form
   * @returns {Cells}
   */
  const formCells = (form) => {
    /** @type {Cells} */
    const answer = {};
    for (const name of data.dimensions) {
      const checked = radiosOf(form, name).find((radio) => radio.checked);
      answer[name] = checked ? checked.value : '';
    }
    answer.notes = notesOf(form).value;
    if (fields.includes('unsure')) answer.unsure = unsureOf(form).checked ? 'yes' : '';
    return answer;
  };
  /**
   * Sets the form to the answer exactly.
   * @param {HTMLFormElement} form
   * @param {Cells} answer
   */
  const setForm = (form, answer) => {
    for (const name of data.dimensions) {
      for (const radio of radiosOf(form, name)) radio.checked = radio.value === answer[name];
    }
    notesOf(form).value = answer.notes || '';
    unsureOf(form).checked = answer.unsure === 'yes';
  };
  /** @param {HTMLFormElement} form */
  const complete = (form) => {
    const answer = formCells(form);
    return data.dimensions.every((name) => answer[name] !== '');
  };

  // Answers of rows with no form: transcripts a later plan took off this page.
  /** @type {Map<number, Cells>} */
  const held = new Map();
  /** @param {number} row */
  const answerOfRow = (row) => {
    const form = formOfRow.get(row);
    return form ? formCells(form) : (held.get(row) ?? written(row));
  };
  /**
   * @param {number} row
   * @param {Cells} answer
   */
  const setRow = (row, answer) => {
    const form = formOfRow.get(row);
    if (form) setForm(form, answer);
    else held.set(row, answer);
  };

  /**
   * The page's answer and the sheet's, cell by cell, given what the sheet was known to hold.
   * @param {Cells} page
   * @param {Cells} sheet
   * @param {Cells[]} known
   */
  const merge = (page, sheet, known) => {
    /** @type {Cells} */
    const cells = {};
    /** @type {string[]} */
    const taken = [];
    /** @type {{ field: string, page: string, sheet: string }[]} */
    const kept = [];
    for (const field of fields) {
      const mine = page[field] || '';
      const theirs = sheet[field] || '';
      const seen = known.map((cellsKnown) => cellsKnown[field] || '');
      if (mine === theirs) {
        cells[field] = mine;
      } else if (mine === '' && data.dimensions.includes(field)) {
        // A blank never replaces a score.
        cells[field] = theirs;
        taken.push(field);
      } else if (seen.includes(theirs)) {
        // The sheet as this browser knew it: the page's answer is the later.
        cells[field] = mine;
      } else if (mine === '' || seen.includes(mine)) {
        // Given in the sheet since (by hand, or from another browser).
        cells[field] = theirs;
        taken.push(field);
      } else {
        cells[field] = mine;
        if (theirs !== '') kept.push({ field: field, page: mine, sheet: theirs });
      }
    }
    return { cells: cells, taken: taken, kept: kept };
  };

  // ---- The browser's storage -------------------------------------------------------------------

  let storable = true;
  /** @param {string} name */
  const stored = (name) => {
    if (!storable) return null;
    try {
      return localStorage.getItem(name);
    } catch (error) {
      storable = false;
      return null;
    }
  };
  /**
   * @param {string} name
   * @param {string} value
   */
  const store = (name, value) => {
    if (!storable) return;
    try {
      localStorage.setItem(name, value);
    } catch (error) {
      storable = false;
      element('storage', HTMLElement).hidden = false;
    }
  };
  /**
   * An entry as stored; null for anything else.
   * @param {string | null} text
   * @returns {Entry | null}
   */
  const entryOf = (text) => {
    if (text === null) return null;
    try {
      /** @type {{ cells?: unknown, page?: unknown } | null} */
      const value = JSON.parse(text);
      const isCells = (/** @type {unknown} */ cells) => typeof cells === 'object' && cells !== null;
      if (value === null || !isCells(value.cells) || !isCells(value.page)) return null;
      return /** @type {Entry} */ (value);
    } catch (error) {
      return null;
    }
  };
  /**
   * The entry name of a row's answer under a plan folder's key.
   * @param {string} plan
   * @param {number} row
   */
  const entryName = (plan, row) => {
    const cells = cellsOf(row);
    const version = data.versions[row];
    const id = JSON.stringify([cells.task_id, cells.model, version ? version.version : '']);
    return 'run-judge-scoring:' + plan + ':' + data.scorer + ':answer:' + id;
  };
  const rowOfEntry = new Map(data.rows.map((_, row) => [entryName(data.plan, row), row]));

  /** @type {Map<number, Entry>} */
  const entries = new Map();
  /**
   * What the sheet held for the row, as far as this browser knows.
   * @param {number} row
   */
  const knownOf = (row) => {
    const entry = entries.get(row);
    const known = entry ? [entry.page, entry.read, entry.sent] : [];
    return known.filter((cells) => cells !== undefined);
  };
  /**
   * Keeps a row's answer, and what the sheet is known to have held.
   * @param {number} row
   * @param {{ read?: Cells, sent?: boolean }} [sheet]
   */
  const keep = (row, sheet = {}) => {
    if (!data.versions[row]) return;
    const cells = answerOfRow(row);
    const entry = entries.get(row) ?? { cells: cells, page: written(row) };
    entry.cells = cells;
    if (sheet.read) entry.read = sheet.read;
    if (sheet.sent) entry.sent = cells;
    entries.set(row, entry);
    store(entryName(data.plan, row), JSON.stringify(entry));
  };

  /**
   * An answer a page of an earlier release kept for the row, as cells; a score it lacks is blank.
   * @param {number} row
   * @param {Record<string, any>[]} objects
   * @returns {Cells | null}
   */
  const earlierAnswer = (row, objects) => {
    const cells = cellsOf(row);
    const id = [cells.task_id, cells.model, cells.transcript_sha256];
    let answer = objects.map((object) => object[id.join('\n')]).find((one) => one);
    try {
      answer = JSON.parse(stored(key + ':' + JSON.stringify(id)) || 'null') || answer;
    } catch (error) {
      // not an answer an earlier page wrote
    }
    if (!answer || typeof answer !== 'object') return null;
    /** @type {Cells} */
    const result = {};
    for (const name of data.dimensions) result[name] = String((answer.scores || {})[name] || '');
    result.notes = String(answer.notes || '');
    if (fields.includes('unsure')) result.unsure = answer.unsure === true ? 'yes' : '';
    return result;
  };

  // Each row from the sheet as written, then the browser's answer for its version over it (the
  // same merge as a sheet's, the page's copy standing for the sheet).
  const objects = plans.map((plan) => {
    try {
      const object = JSON.parse(stored('run-judge-scoring:' + plan + ':' + data.scorer) || '{}');
      return object && typeof object === 'object' ? object : {};
    } catch (error) {
      return {};
    }
  });
  let found = 0;
  forms.forEach((form) => form.reset());
  data.rows.forEach((_, row) => {
    const version = data.versions[row];
    setRow(row, written(row));
    if (!version) return;
    const names = plans.map((plan) => entryName(plan, row));
    const entry = names.map((name) => entryOf(stored(name))).find((one) => one !== null);
    if (entry) {
      entries.set(row, entry);
      setRow(row, merge(entry.cells, written(row), knownOf(row)).cells);
      found++;
      return;
    }
    const earlier = version.earlier ? earlierAnswer(row, objects) : null;
    if (earlier) {
      setRow(row, merge(earlier, written(row), []).cells);
      found++;
    }
  });

  // ---- What the header says --------------------------------------------------------------------

  /**
   * A row as the scorer knows it: its place on the page, else its task.
   * @param {number} row
   */
  const labelOf = (row) => {
    const form = formOfRow.get(row);
    const task = cellsOf(row).task_id;
    if (!form) return 'task ' + task + ' (no longer on this page)';
    return 'transcript ' + (forms.indexOf(form) + 1) + ' (task ' + task + ')';
  };
  /** Whether the page holds an answer the sheet is not known to hold. */
  const unsaved = () => {
    return data.rows.some((_, row) => {
      if (!data.versions[row]) return false;
      const answer = answerOfRow(row);
      const known = knownOf(row).concat([written(row)]);
      return fields.some((field) => !known.some((cells) => (cells[field] || '') === answer[field]));
    });
  };
  /** @param {string} text */
  const say = (text) => {
    const status = element('sheet-status', HTMLElement);
    status.hidden = false;
    status.textContent = text;
  };
  const update = () => {
    let left = 0;
    forms.forEach((form, i) => {
      const done = complete(form);
      if (!done) left++;
      links[i]?.classList.toggle('done', done);
      sections[i]?.querySelector('h2 .state')?.classList.toggle('done', done);
    });
    element('left', HTMLElement).textContent =
      left === 0
        ? 'All ' + forms.length + ' scored: download your CSV'
        : left + ' of ' + forms.length + ' left';
    element('unsaved', HTMLElement).hidden = !unsaved();
    const away = Array.from(held.keys()).filter((row) => {
      return fields.some((field) => (held.get(row) ?? {})[field] !== written(row)[field]);
    });
    const note = element('held', HTMLElement);
    note.hidden = away.length === 0;
    note.textContent =
      away.length +
      ' answer(s) given here for a transcript since taken off this page (' +
      away.map((row) => 'task ' + cellsOf(row).task_id).join(', ') +
      '): your download keeps them.';
  };

  // ---- A sheet read: imported, or merged into a download ---------------------------------------

  /**
   * A CSV's records (RFC 4180: quoted cells may hold commas, quotes and line breaks).
   * @param {string} text
   */
  const parseCsv = (text) => {
    /** @type {string[][]} */
    const records = [];
    /** @type {string[]} */
    let record = [];
    let field = '';
    let quoted = false;
    text = text.replace(/^\uFEFF/, '');
    for (let i = 0; i < text.length; i++) {
      const c = text[i];
      if (quoted) {
        if (c === '"' && text[i + 1] === '"') {
          field += '"';
          i++;
        } else if (c === '"') {
          quoted = false;
        } else {
          field += c;
        }
      } else if (c === '"') {
        quoted = true;
      } else if (c === ',') {
        record.push(field);
        field = '';
      } else if (c === '\n' || c === '\r') {
        if (c === '\r' && text[i + 1] === '\n') i++;
        record.push(field);
        records.push(record);
        record = [];
        field = '';
      } else {
        field += c;
      }
    }
    if (field !== '' || record.length > 0) {
      record.push(field);
      records.push(record);
    }
    return records.filter((cells) => cells.some((value) => value.trim() !== ''));
  };
  /** @param {string} text */
  const unguard = (text) => text.replace(/^'/, '');
  /** @param {string} text */
  const guard = (text) => {
    const guarded = formula.test(text) ? "'" + text : text;
    return /[",\r\n]/.test(guarded) ? '"' + guarded.replace(/"/g, '""') + '"' : guarded;
  };
  /** @param {Record<string, string>} cells */
  const lineOf = (cells) => data.header.map((column) => guard(cells[column] || '')).join(',');

  /**
   * The scorer's sheet, its rows as cells; a refusal when it is not her sheet of this plan.
   * @param {string} name
   * @param {string} text
   * @returns {Record<string, string>[] | string}
   */
  const readSheet = (name, text) => {
    const records = parseCsv(text);
    const header = records[0] ?? [];
    const missing = data.header.filter((column) => !header.includes(column));
    if (missing.length > 0) {
      return (
        name +
        ': not ' +
        data.scorer +
        "'s sheet of this plan (no column " +
        missing.join(', ') +
        ')'
      );
    }
    const rows = records.slice(1).map((values) => {
      /** @type {Record<string, string>} */
      const cells = {};
      header.forEach((column, i) => {
        cells[column] = unguard(values[i] || '');
      });
      return cells;
    });
    const others = rows.map((cells) => (cells.scorer || '').trim());
    const other = others.find((scorer) => scorer !== '' && scorer !== data.scorer);
    if (other !== undefined) {
      return (
        name + ': rows of ' + other + ', not ' + data.scorer + ': choose ' + data.scorer + '.csv'
      );
    }
    return rows;
  };

  /**
   * The sheet and the page's answers merged, the forms showing the result: the sheet's rows in
   * its order, each of the page's rows with its answer, rows the sheet lacks last.
   * @param {string} name
   * @param {Record<string, string>[]} sheet
   * @param {boolean} sending
   */
  const mergeSheet = (name, sheet, sending) => {
    /** @type {Set<number>} */
    const used = new Set();
    const lines = [];
    let taken = 0;
    let older = 0;
    /** @type {string[]} */
    const kept = [];
    for (const cells of sheet) {
      const row = rowOfPair.get(pairOf(cells));
      if (row === undefined || used.has(row) || !data.versions[row]) {
        lines.push(lineOf(cells));
        continue;
      }
      used.add(row);
      const hash = (cells.transcript_sha256 || '').trim().toLowerCase();
      const stale = hash !== '' && hash !== (cellsOf(row).transcript_sha256 || '');
      const theirs = stale ? answerOfCells({}) : answerOfCells(cells);
      if (stale) older++;
      const known = knownOf(row).concat([written(row)]);
      const result = merge(answerOfRow(row), theirs, known);
      setRow(row, result.cells);
      keep(row, { read: theirs, sent: sending });
      taken += result.taken.length;
      for (const one of result.kept) {
        kept.push(
          labelOf(row) + ' ' + one.field + ': ' + one.page + ' (the sheet: ' + one.sheet + ')',
        );
      }
      lines.push(lineOf(Object.assign({}, cellsOf(row), result.cells)));
    }
    data.rows.forEach((cells, row) => {
      if (used.has(row) || !data.versions[row]) return;
      if (sending) keep(row, { sent: true });
      lines.push(lineOf(Object.assign({}, cells, answerOfRow(row))));
    });

    let said = name + ': ' + used.size + ' row(s) taken';
    if (taken > 0) said += '; ' + taken + ' answer(s) in it this page had not seen, shown here';
    if (older > 0) {
      said += '; ' + older + ' row(s) scored an older text of their transcript, left open';
    }
    if (kept.length > 0) {
      said += "; where the sheet holds another answer, this page's kept: " + kept.join(', ');
    }
    const text = data.header.join(',') + '\n' + lines.map((line) => line + '\n').join('');
    return { text: text, said: said };
  };

  // ---- The page's controls ---------------------------------------------------------------------

  let current = 0;
  /** @param {number} index */
  const show = (index) => {
    current = Math.max(0, Math.min(sections.length - 1, index));
    sections.forEach((section, i) => {
      section.hidden = i !== current;
    });
    links.forEach((link, i) => link.setAttribute('aria-current', String(i === current)));
    const section = sections[current];
    if (section) {
      inside(section, 'button.prev', HTMLButtonElement).disabled = current === 0;
      inside(section, 'button.next', HTMLButtonElement).disabled = current === sections.length - 1;
    }
    window.scrollTo(0, 0);
  };

  forms.forEach((form) => {
    const row = Number(form.dataset.row);
    const changed = () => {
      keep(row);
      update();
    };
    form.addEventListener('input', changed);
    form.addEventListener('change', changed);
    form.addEventListener('submit', (event) => event.preventDefault());
  });
  links.forEach((link, i) =>
    link.addEventListener('click', (event) => {
      event.preventDefault();
      show(i);
    }),
  );
  document.querySelectorAll('button.prev').forEach((button) => {
    button.addEventListener('click', () => show(current - 1));
  });
  document.querySelectorAll('button.next').forEach((button) => {
    button.addEventListener('click', () => show(current + 1));
  });

  /**
   * The sheet chosen in `input`, merged into the page; `sending`, the result downloaded too. What
   * was done, or why nothing was, in the status.
   * @param {HTMLInputElement} input
   * @param {boolean} sending
   */
  const takeSheet = (input, sending) => {
    input.addEventListener('change', async () => {
      const file = input.files?.[0];
      if (!file) return;
      const sheet = readSheet(file.name, await file.text());
      if (typeof sheet === 'string') {
        say(sheet + (sending ? '; nothing downloaded' : '; nothing imported'));
        return;
      }
      const merged = mergeSheet(file.name, sheet, sending);
      element('fresh', HTMLElement).hidden = true;
      update();
      if (!sending) {
        say(merged.said);
        return;
      }
      const link = document.createElement('a');
      link.href = URL.createObjectURL(new Blob([merged.text], { type: 'text/csv' }));
      link.download = data.scorer + '.csv';
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(link.href), 60000);
      say(merged.said + '. Downloaded ' + data.scorer + '.csv: save it over ' + file.name + '.');
    });
  };

  // The download: the scorer's sheet as it is now, chosen, with the page's answers merged in.
  const sheetInput = element('current-sheet', HTMLInputElement);
  takeSheet(sheetInput, true);
  element('download', HTMLButtonElement).addEventListener('click', () => {
    sheetInput.value = '';
    say('Choose your ' + data.scorer + '.csv as it is now: the download is it with your answers');
    sheetInput.click();
  });
  // The sheet imported: merged into the page, nothing downloaded.
  takeSheet(element('import', HTMLInputElement), false);

  // Keys: a digit scores the dimension in focus, else the first left open, then moves on.
  document.addEventListener('keydown', (event) => {
    if (!/^[0-9]$/.test(event.key) || event.ctrlKey || event.metaKey || event.altKey) return;
    const target = event.target;
    if (target instanceof HTMLTextAreaElement) return;
    if (target instanceof HTMLInputElement && !['radio', 'checkbox'].includes(target.type)) return;
    const section = sections[current];
    if (!section) return;
    const fieldsets = Array.from(section.querySelectorAll('fieldset'));
    let at = fieldsets.findIndex((fieldset) => fieldset.contains(document.activeElement));
    if (at < 0) at = fieldsets.findIndex((fieldset) => !fieldset.querySelector('input:checked'));
    const fieldset = fieldsets[at];
    if (!fieldset) return;
    const radio = Array.from(fieldset.querySelectorAll('input')).find((input) => {
      return input.type === 'radio' && input.value === event.key;
    });
    if (!radio) return;
    event.preventDefault();
    radio.checked = true;
    radio.dispatchEvent(new Event('change', { bubbles: true }));
    const next = fieldsets[at + 1];
    const focus = next ? next.querySelector('input:checked') || next.querySelector('input') : radio;
    if (focus instanceof HTMLElement) focus.focus();
  });

  // The same page in another tab: its answers, merges and downloads shown here as they are made.
  window.addEventListener('storage', (event) => {
    if (event.storageArea !== localStorage || event.key === null) return;
    const row = rowOfEntry.get(event.key);
    const entry = entryOf(event.newValue);
    if (row === undefined || entry === null) return;
    entries.set(row, entry);
    setRow(row, entry.cells);
    update();
  });

  // Leaving with answers not downloaded asks first.
  window.addEventListener('beforeunload', (event) => {
    if (!unsaved()) return;
    event.preventDefault();
    event.returnValue = '';
  });

  if (!storable) element('storage', HTMLElement).hidden = false;
  element('fresh', HTMLElement).hidden = found > 0;
  update();
  const firstOpen = forms.findIndex((form) => !complete(form));
  show(firstOpen < 0 ? 0 : firstOpen);
})();
