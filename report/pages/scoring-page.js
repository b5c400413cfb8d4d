// @ts-check
// The scoring page's program (report/scoring-page.ts inlines it). The sheet's rows are the
// download's rows, in their order: a row on the page takes its form's answer, any other row (a
// removed transcript's) is kept as the sheet has it. A form starts from its sheet row; answers kept
// in localStorage (per plan folder and scorer, one entry per transcript and hash, so two tabs never
// write over each other's) fill in over it, never blanking a score. Another tab's answer arrives by
// the storage event. Importing a sheet does the same. Pages of earlier versions kept one object per
// page: read, never written.

/**
 * What the page is written with (report/scoring-page.ts): the sheet's columns and rows, as text.
 * @typedef {{
 *   scorer: string,
 *   plan: string,
 *   previous: string[],
 *   formula: string,
 *   header: string[],
 *   dimensions: string[],
 *   rows: Record<string, string>[],
 * }} PageData
 */

/**
 * A form's answer as the browser keeps it: the scores given, by dimension, the notes, the mark.
 * @typedef {{ scores: Record<string, string>, notes: string, unsure: boolean }} Answer
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
  const key = 'run-judge-scoring:' + data.plan + ':' + data.scorer;
  const legacyKeys = [key].concat(
    data.previous.map((plan) => {
      return 'run-judge-scoring:' + plan + ':' + data.scorer;
    }),
  );
  const sections = Array.from(document.querySelectorAll('section')).filter((section) => {
    return section.classList.contains('transcript');
  });
  const forms = sections.map((section) => inside(section, 'form.scores', HTMLFormElement));
  const links = Array.from(document.querySelectorAll('nav a'));
  /** @param {Record<string, string>} cells */
  const pairOf = (cells) => cells.task_id + '\n' + cells.model;
  /** @param {Record<string, string>} cells */
  const idOf = (cells) => pairOf(cells) + '\n' + cells.transcript_sha256;
  /**
   * The sheet row a form is for.
   * @param {HTMLFormElement} form
   * @returns {Record<string, string>}
   */
  const cellsOf = (form) => data.rows[Number(form.dataset.row)] ?? {};
  const formOfPair = new Map(forms.map((form) => [pairOf(cellsOf(form)), form]));
  /** @param {Record<string, string>} cells */
  const entryOf = (cells) =>
    key + ':' + JSON.stringify([cells.task_id, cells.model, cells.transcript_sha256]);
  const formOfEntry = new Map(forms.map((form) => [entryOf(cellsOf(form)), form]));
  let rows = data.rows.map((cells) => Object.assign({}, cells));

  // Each form's saved answer: its own entry, else what an earlier page's one object held.
  /** @type {Map<HTMLFormElement, Answer>} */
  const saved = new Map();
  /** @type {string | null} */
  let downloaded = null;
  let storable = true;
  try {
    /** @type {Record<string, Answer>[]} */
    const legacy = legacyKeys.map((one) => JSON.parse(localStorage.getItem(one) || '{}') || {});
    for (const form of forms) {
      const own = localStorage.getItem(entryOf(cellsOf(form)));
      const old = legacy.map((object) => object[idOf(cellsOf(form))]).find((answer) => answer);
      if (own !== null) saved.set(form, JSON.parse(own));
      else if (old) saved.set(form, old);
    }
    downloaded = localStorage.getItem(key + ':downloaded');
  } catch (error) {
    storable = false;
  }

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
   * @returns {Answer}
   */
  const answerOf = (form) => {
    /** @type {Record<string, string>} */
    const scores = {};
    for (const name of data.dimensions) {
      const checked = radiosOf(form, name).find((radio) => radio.checked);
      if (checked) scores[name] = checked.value;
    }
    return { scores: scores, notes: notesOf(form).value, unsure: unsureOf(form).checked };
  };
  /** @param {HTMLFormElement} form */
  const complete = (form) => Object.keys(answerOf(form).scores).length === data.dimensions.length;

  /**
   * Fills in what the answer holds; a score it lacks leaves the form's as it is.
   * @param {HTMLFormElement} form
   * @param {Partial<Answer>} answer
   */
  const fill = (form, answer) => {
    for (const name of data.dimensions) {
      const value = answer.scores && answer.scores[name];
      const input = radiosOf(form, name).find((radio) => radio.value === value);
      if (input) input.checked = true;
    }
    if (answer.notes) notesOf(form).value = answer.notes;
    if (answer.unsure !== undefined) unsureOf(form).checked = answer.unsure;
  };
  /**
   * Sets the form to the answer exactly: another tab's answer is that tab's whole form.
   * @param {HTMLFormElement} form
   * @param {Partial<Answer>} answer
   */
  const setForm = (form, answer) => {
    for (const name of data.dimensions) {
      const value = answer.scores && answer.scores[name];
      for (const radio of radiosOf(form, name)) radio.checked = radio.value === value;
    }
    notesOf(form).value = answer.notes || '';
    unsureOf(form).checked = answer.unsure === true;
  };
  /**
   * @param {Record<string, string>} cells
   * @returns {Answer}
   */
  const answerOfCells = (cells) => {
    /** @type {Record<string, string>} */
    const scores = {};
    for (const name of data.dimensions) {
      const value = (cells[name] || '').trim();
      if (value !== '') scores[name] = value;
    }
    const unsure = (cells.unsure || '').trim().toLowerCase() === 'yes';
    return { scores: scores, notes: cells.notes || '', unsure: unsure };
  };

  /** @param {string} text */
  const cell = (text) => {
    const guarded = formula.test(text) ? "'" + text : text;
    return /[",\r\n]/.test(guarded) ? '"' + guarded.replace(/"/g, '""') + '"' : guarded;
  };
  /** @param {Record<string, string>} cells */
  const lineOf = (cells) => data.header.map((column) => cell(cells[column] || '')).join(',') + '\n';
  /** @param {HTMLFormElement} form */
  const formCells = (form) => {
    const answer = answerOf(form);
    const cells = Object.assign({}, cellsOf(form));
    for (const name of data.dimensions) cells[name] = answer.scores[name] || '';
    cells.notes = answer.notes;
    if (data.header.includes('unsure')) cells.unsure = answer.unsure ? 'yes' : '';
    return cells;
  };
  // Every row of the sheet, in its order; a form whose row the sheet lacks goes last.
  const sheet = () => {
    /** @type {Set<HTMLFormElement>} */
    const used = new Set();
    const lines = rows.map((cells) => {
      const form = formOfPair.get(pairOf(cells));
      if (!form) return lineOf(cells);
      used.add(form);
      return lineOf(formCells(form));
    });
    for (const form of forms) {
      if (!used.has(form)) lines.push(lineOf(formCells(form)));
    }
    return data.header.join(',') + '\n' + lines.join('');
  };

  /** @param {HTMLFormElement} form */
  const save = (form) => {
    if (!storable) return;
    try {
      localStorage.setItem(entryOf(cellsOf(form)), JSON.stringify(answerOf(form)));
    } catch (error) {
      storable = false;
      element('storage', HTMLElement).hidden = false;
    }
  };

  let written = '';
  const unsaved = () => {
    const now = sheet();
    return now !== written && now !== downloaded;
  };
  const update = () => {
    let left = 0;
    forms.forEach((form, i) => {
      const done = complete(form);
      if (!done) left++;
      links[i]?.classList.toggle('done', done);
      sections[i]?.querySelector('h2 .state')?.classList.toggle('done', done);
    });
    const status = element('left', HTMLElement);
    status.textContent =
      left === 0
        ? 'All ' + forms.length + ' scored: download your CSV'
        : left + ' of ' + forms.length + ' left';
    element('unsaved', HTMLElement).hidden = !unsaved();
  };

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

  // Each form from its sheet row (what was written), then the browser's answers over it.
  forms.forEach((form) => {
    form.reset();
    fill(form, answerOfCells(cellsOf(form)));
  });
  written = sheet();
  forms.forEach((form) => {
    const answer = saved.get(form);
    if (answer) fill(form, answer);
    const changed = () => {
      save(form);
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
  element('download', HTMLButtonElement).addEventListener('click', () => {
    const text = sheet();
    const link = document.createElement('a');
    link.href = URL.createObjectURL(new Blob([text], { type: 'text/csv' }));
    link.download = data.scorer + '.csv';
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 60000);
    downloaded = text;
    try {
      localStorage.setItem(key + ':downloaded', text);
    } catch (error) {
      // Not kept: the warning comes back after a reload, which is the safe side.
    }
    update();
  });

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

  // The sheet imported: its rows become the download's, its scores fill in the forms.
  const importInput = element('import', HTMLInputElement);
  importInput.addEventListener('change', async () => {
    const file = importInput.files?.[0];
    if (!file) return;
    const status = element('import-status', HTMLElement);
    status.hidden = false;
    const records = parseCsv(await file.text());
    const header = records[0] ?? [];
    if (!header.includes('task_id') || !header.includes('model')) {
      status.textContent =
        file.name + ': not a sheet (no task_id and model columns); nothing imported';
      return;
    }
    const imported = records.slice(1).map((values) => {
      /** @type {Record<string, string>} */
      const cells = {};
      header.forEach((column, i) => {
        cells[column] = unguard(values[i] || '');
      });
      return cells;
    });
    let taken = 0;
    let older = 0;
    const kept = [];
    for (const cells of imported) {
      const form = formOfPair.get(pairOf(cells));
      if (!form) {
        kept.push(cells);
        continue;
      }
      const hash = (cells.transcript_sha256 || '').trim().toLowerCase();
      if (hash !== '' && hash !== cellsOf(form).transcript_sha256) {
        older++;
      } else {
        fill(form, answerOfCells(cells));
        save(form);
        taken++;
      }
      kept.push(cellsOf(form));
    }
    rows = kept;
    update();
    let said = file.name + ': ' + taken + ' row(s) taken';
    if (older > 0) {
      said += '; ' + older + ' row(s) scored an older text of their transcript, left open';
    }
    status.textContent = said;
  });

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
    const radio = Array.from(fieldset.querySelectorAll('input[type=radio]')).find((input) => {
      return input instanceof HTMLInputElement && input.value === event.key;
    });
    if (!(radio instanceof HTMLInputElement)) return;
    event.preventDefault();
    radio.checked = true;
    radio.dispatchEvent(new Event('change', { bubbles: true }));
    const next = fieldsets[at + 1];
    const focus = next ? next.querySelector('input:checked') || next.querySelector('input') : radio;
    if (focus instanceof HTMLElement) focus.focus();
  });

  // The same page in another tab: its answers and downloads shown here as they are made.
  window.addEventListener('storage', (event) => {
    if (event.storageArea !== localStorage || event.key === null || event.newValue === null) return;
    if (event.key === key + ':downloaded') {
      downloaded = event.newValue;
    } else {
      const form = formOfEntry.get(event.key);
      if (!form) return;
      try {
        setForm(form, JSON.parse(event.newValue));
      } catch (error) {
        return; // not an answer this page wrote
      }
    }
    update();
  });

  // Leaving with answers not downloaded asks first.
  window.addEventListener('beforeunload', (event) => {
    if (!unsaved()) return;
    event.preventDefault();
    event.returnValue = '';
  });

  if (!storable) element('storage', HTMLElement).hidden = false;
  update();
  const firstOpen = forms.findIndex((form) => !complete(form));
  show(firstOpen < 0 ? 0 : firstOpen);
})();
