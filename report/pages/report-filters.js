// @ts-check
// The report page's one script (report/html.ts inlines it): the filters and the order of the
// transcripts. It reads the index rows' data attributes and moves and hides elements; it never
// writes HTML, so no text becomes markup.
(() => {
  const form = document.getElementById('filters');
  const body = document.querySelector('#transcript-index tbody');
  const list = document.getElementById('transcript-list');
  const shown = document.getElementById('shown');
  if (!(form instanceof HTMLFormElement) || !(body instanceof HTMLTableSectionElement)) return;
  if (list === null || shown === null) return;

  /** @param {string} name */
  const chosen = (name) => {
    const select = form.elements.namedItem(name);
    return select instanceof HTMLSelectElement ? select.value : '';
  };

  const apply = () => {
    const model = chosen('model');
    const task = chosen('task');
    const dimension = chosen('dimension');
    const order = chosen('order');
    const key = dimension === '' ? 'steps' : 'd' + dimension;
    /** @param {HTMLTableRowElement} row */
    const steps = (row) => {
      const value = row.dataset[key];
      return value === undefined || value === '' ? -1 : Number(value);
    };
    /** @param {HTMLTableRowElement} row */
    const place = (row) => Number(row.dataset.order);
    const rows = Array.from(body.rows);
    rows.sort((a, b) => {
      if (order === 'pair') return place(a) - place(b);
      const by = order === 'least' ? steps(a) - steps(b) : steps(b) - steps(a);
      return by || place(a) - place(b);
    });
    let count = 0;
    for (const row of rows) {
      const visible =
        (model === '' || row.dataset.model === model) &&
        (task === '' || row.dataset.task === task) &&
        (dimension === '' || steps(row) > 0);
      const section = document.getElementById(row.dataset.target ?? '');
      row.hidden = !visible;
      body.appendChild(row);
      if (section) {
        section.hidden = !visible;
        list.appendChild(section);
      }
      if (visible) count++;
    }
    shown.textContent = count + ' of ' + rows.length + ' transcripts shown';
  };
  form.addEventListener('change', apply);
})();
