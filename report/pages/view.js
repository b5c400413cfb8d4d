// @ts-check
// The run viewer's script (report/view.ts inlines it): the runs, the transcripts of the run chosen
// (and of a second one, side by side), the filters, and one transcript at a time. It builds every
// element itself and sets each text as text (textContent, never HTML), so a transcript's script tag
// shows as what it is.
(() => {
  /**
   * @typedef {{ name: string, description: string, labels: number[] }} Dimension
   * @typedef {{ label: string, source: { media_type: string, data: string } }} Image
   * @typedef {{ who: string, text: string, images: Image[], hidden?: boolean }} Turn
   * @typedef {Record<string, number>} Scores
   * @typedef {{ scorer: string, scores: Scores, notes: string, unsure: boolean, stale: boolean }}
   *   Human
   * @typedef {{
   *   model: string, task_id: string, turns: Turn[] | null, unavailable: string | null,
   *   prompt: string | null, prompt_note: string, prompt_sha256: string | null, humans: Human[]
   * }} Transcript
   * @typedef {{
   *   judge: string | null, model: string | null, provider: string | null,
   *   family: string | null, text: string, thinking: string | null, redacted_thinking: number,
   *   stop_reason: string | null, request_id: string | null, latency_ms: number | null,
   *   scores: Scores | null
   * }} Answer
   * @typedef {{
   *   judge: string | null, error: string, status: number | null, message: string,
   *   raw_text: string | null
   * }} Attempt
   * @typedef {{
   *   line: number, run_id: string | null, timestamp: string | null, status: string | null,
   *   judge: string | null, scores: Scores | null, notes: string | null, error: string | null,
   *   cost_usd: number | null, prompt_sha256: string | null, sample_scores: Scores[],
   *   attempts: Attempt[], answers: Answer[]
   * }} Entry
   * @typedef {{
   *   t: number, status: 'scored' | 'failed' | 'no row', scores: Scores | null, notes: string,
   *   stale: boolean, judge: string | null, fallback: boolean, timestamp: string | null,
   *   cost_usd: number | null, entries: Entry[]
   * }} Result
   * @typedef {{
   *   name: string, scores: string | null, log: string | null,
   *   judges: { name: string, rows: number, fallback_rows: number }[], families: string[],
   *   first: string | null, last: string | null, sessions: number, rows: number, stale: number,
   *   failed: number, fallbacks: number, cost_usd: number | null, samples: number[],
   *   thinking_answers: number, redacted_thinking_answers: number,
   *   settings: { judge: string, text: string }[], results: Result[]
   * }} Run
   * @typedef {{
   *   study: string, scores_dir: string, dimensions: Dimension[], runs: Run[],
   *   transcripts: Transcript[], notes: string[]
   * }} Data
   * @typedef {string | Node | null | undefined | false} Child
   */

  const source = document.getElementById('view-data');
  const app = document.getElementById('app');
  if (source === null || app === null) return;
  /** @type {Data} */
  const data = JSON.parse(source.textContent || '{}');
  const dimensions = data.dimensions;

  // Indexes the data itself makes: each is in range.
  /** @param {number} d */
  const dimensionAt = (d) => /** @type {Dimension} */ (dimensions[d]);
  /** @param {number} r */
  const runAt = (r) => /** @type {Run} */ (data.runs[r]);
  /** @param {number} t */
  const transcriptAt = (t) => /** @type {Transcript} */ (data.transcripts[t]);

  // ---- Building elements: text is always a text node -------------------------------------------

  /**
   * An element with attributes (set as attributes, never as HTML) and children (text or nodes).
   * @template {keyof HTMLElementTagNameMap} K
   * @param {K} tag
   * @param {Record<string, string>} attributes
   * @param {Child[]} children
   * @returns {HTMLElementTagNameMap[K]}
   */
  const el = (tag, attributes = {}, ...children) => {
    const element = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, value);
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      element.append(typeof child === 'string' ? document.createTextNode(child) : child);
    }
    return element;
  };

  /** @param {string} tag @param {string} text */
  const tag = (tag, text) => el('span', { class: `tag ${tag}` }, text);

  /** @param {number | null} cost */
  const money = (cost) => (cost === null ? 'unknown' : `$${cost.toFixed(4)}`);

  /** @param {string | null} time */
  const when = (time) =>
    time === null ? 'unknown' : time.replace('T', ' ').replace(/\.\d+Z$/, 'Z');

  /** @param {number} count @param {string} one @param {string} [many] */
  const plural = (count, one, many = `${one}s`) => `${count} ${count === 1 ? one : many}`;

  // Short names of the dimensions for the score strips' legend: their initials, numbered where two
  // dimensions share them.
  const initials = dimensions.map((dimension) => {
    const words = dimension.name.split(/[_\s-]+/);
    return words.map((word) => word.charAt(0).toUpperCase()).join('');
  });
  const shortNames = initials.map((short, d) => {
    const shared = initials.filter((other) => other === short).length > 1;
    return shared ? `${short}${d + 1}` : short;
  });

  // ---- What the lists compare ------------------------------------------------------------------

  /** Each run's results by transcript. @type {Map<number, Result>[]} */
  const resultsOf = data.runs.map(
    (run) => new Map(run.results.map((result) => [result.t, result])),
  );
  /** @param {number} r @returns {Map<number, Result>} */
  const resultsAt = (r) => resultsOf[r] ?? new Map();

  /** @param {number} d @param {number | undefined} score */
  const at = (d, score) => (score === undefined ? -1 : dimensionAt(d).labels.indexOf(score));

  /**
   * How far the people are from the run on a transcript: per scorer the steps of each dimension's
   * scale between the two scores, summed over the dimensions (or on the one chosen), averaged over
   * the scorers; null without both.
   * @param {Result | undefined} result @param {Transcript} transcript @param {number | null} only
   */
  const peopleSteps = (result, transcript, only) => {
    if (result === undefined || result.scores === null || transcript.humans.length === 0) {
      return null;
    }
    const scores = result.scores;
    const perScorer = transcript.humans.flatMap((human) => {
      let steps = 0;
      let compared = 0;
      dimensions.forEach((dimension, d) => {
        if (only !== null && only !== d) return;
        const mine = human.scores[dimension.name];
        const judge = scores[dimension.name];
        if (mine === undefined || judge === undefined) return;
        steps += Math.abs(at(d, mine) - at(d, judge));
        compared++;
      });
      return compared > 0 ? [steps] : [];
    });
    if (perScorer.length === 0) return null;
    return perScorer.reduce((total, steps) => total + steps, 0) / perScorer.length;
  };

  /**
   * The steps between two runs' scores of a transcript, summed over the dimensions (or the one
   * chosen); null unless both scored it.
   * @param {Result | undefined} a @param {Result | undefined} b @param {number | null} only
   */
  const runSteps = (a, b, only) => {
    if (a === undefined || b === undefined || a.scores === null || b.scores === null) return null;
    let steps = 0;
    dimensions.forEach((dimension, d) => {
      if (only !== null && only !== d) return;
      const one = a.scores?.[dimension.name];
      const other = b.scores?.[dimension.name];
      if (one === undefined || other === undefined) return;
      steps += Math.abs(at(d, one) - at(d, other));
    });
    return steps;
  };

  /** @param {number | null} steps */
  const stepsText = (steps) => (steps === null ? '–' : String(Math.round(steps * 100) / 100));

  // ---- The state: the runs chosen, the filters, the transcript open (in the address's #) -------

  // Runs A and B by index (B -1: none); each filter's value by its name ('' for all).
  const state = { a: 0, b: -1 };
  /** @type {Map<string, string>} */
  const chosen = new Map([['order', 'differs']]);
  /** @param {string} name */
  const value = (name) => chosen.get(name) ?? '';

  /** The transcripts the filters keep, in the order chosen. @returns {number[]} */
  const shownTranscripts = () => {
    const only = value('dimension') === '' ? null : Number(value('dimension'));
    const a = resultsAt(state.a);
    const b = state.b < 0 ? undefined : resultsAt(state.b);
    const kept = data.transcripts.flatMap((transcript, t) => {
      const one = a?.get(t);
      const other = b?.get(t);
      if (value('model') !== '' && transcript.model !== value('model')) return [];
      if (value('task') !== '' && transcript.task_id !== value('task')) return [];
      if (
        value('judge') !== '' &&
        one?.judge !== value('judge') &&
        other?.judge !== value('judge')
      ) {
        return [];
      }
      const people = peopleSteps(one, transcript, only);
      const runs = runSteps(one, other, only);
      if (value('disagreement') === 'people' && !(people !== null && people > 0)) return [];
      if (value('disagreement') === 'agree' && people !== 0) return [];
      if (value('disagreement') === 'runs' && !(runs !== null && runs > 0)) return [];
      if (value('status') === 'stale' && !(one?.stale || other?.stale)) return [];
      if (value('status') === 'failed' && one?.status !== 'failed' && other?.status !== 'failed') {
        return [];
      }
      if (value('status') === 'fallback' && !(one?.fallback || other?.fallback)) return [];
      if (value('status') === 'unjudged' && one !== undefined && one.status === 'scored') return [];
      return [{ t, people: people ?? -1, runs: runs ?? -1 }];
    });
    if (value('order') !== 'pair') {
      // Two runs: the rows whose scores differ first; one: the most disputed by the people first.
      kept.sort((x, y) => {
        const byRuns = b === undefined ? 0 : y.runs - x.runs;
        return byRuns || y.people - x.people || x.t - y.t;
      });
    }
    return kept.map((item) => item.t);
  };

  const readHash = () => {
    const match = /^#t(\d+)$/.exec(location.hash);
    const t = match === null ? null : Number(match[1]);
    return t !== null && t < data.transcripts.length ? t : null;
  };

  // ---- The runs ----------------------------------------------------------------------------------

  const runsSection = () => {
    const section = el('section', { id: 'runs' }, el('h2', {}, `Runs (${data.runs.length})`));
    section.append(
      el(
        'p',
        { class: 'hint' },
        `Each run is a judge CSV and its audit log in ${data.scores_dir}. Choose run A, and a run B ` +
          'to set beside it.',
      ),
    );
    if (data.runs.length === 0) {
      section.append(el('p', { class: 'warning' }, 'No judge CSV or audit log in that folder.'));
      return section;
    }
    const head = [
      'A',
      'B',
      'run',
      'judges (rows)',
      'family',
      'judged',
      'rows',
      'stale',
      'failed',
      'fallbacks',
      'cost',
      'settings',
    ];
    const numeric = new Set(['rows', 'stale', 'failed', 'fallbacks', 'cost']);
    const rows = data.runs.map((run, r) => {
      const pickA = el('input', { type: 'radio', name: 'run-a', value: String(r) });
      const pickB = el('input', { type: 'radio', name: 'run-b', value: String(r) });
      pickA.checked = r === state.a;
      pickB.checked = r === state.b;
      pickA.setAttribute('aria-label', `run A: ${run.name}`);
      pickB.setAttribute('aria-label', `run B: ${run.name}`);
      pickA.addEventListener('change', () => choose(r, state.b === r ? -1 : state.b));
      pickB.addEventListener('change', () => choose(state.a === r ? state.b : state.a, r));
      const files = [run.scores ?? 'no CSV', run.log ?? 'no audit log'].join(' · ');
      const judges = run.judges.map((judge) => {
        const fallback = judge.fallback_rows > 0 ? `, ${judge.fallback_rows} as a fallback` : '';
        return `${judge.name} (${judge.rows}${fallback})`;
      });
      const samples = run.samples.length === 0 ? '1' : run.samples.join(', ');
      const thinking = [`samples ${samples}`];
      thinking.push(
        run.thinking_answers > 0
          ? `thinking kept in ${plural(run.thinking_answers, 'answer')}`
          : 'no thinking kept',
      );
      if (run.redacted_thinking_answers > 0) {
        thinking.push(`${plural(run.redacted_thinking_answers, 'answer')} with redacted thinking`);
      }
      const settings = el(
        'td',
        { class: 'settings', 'data-label': 'settings' },
        thinking.join('; '),
      );
      for (const judge of run.settings) {
        settings.append(el('div', {}, `${judge.judge}: ${judge.text}`));
      }
      let time = 'unknown (no audit log)';
      if (run.first !== null && run.last !== null) {
        // The last on the day of the first: its time alone.
        const last = when(run.last);
        const sameDay = run.last.slice(0, 10) === run.first.slice(0, 10);
        const end = sameDay ? last.slice(11) : last;
        time = `${when(run.first)} → ${end} (${plural(run.sessions, 'session')})`;
      }
      const cells = [
        el('td', { class: 'pick', 'data-label': 'A' }, pickA),
        el('td', { class: 'pick', 'data-label': 'B' }, pickB),
        el(
          'td',
          { 'data-label': 'run' },
          el('b', {}, run.name),
          el('div', { class: 'hint' }, files),
        ),
        el('td', { 'data-label': 'judges' }, judges.join('; ') || 'unknown'),
        el('td', { 'data-label': 'family' }, run.families.join(', ') || 'unknown'),
        el('td', { 'data-label': 'judged' }, time),
        el('td', { class: 'num', 'data-label': 'rows' }, String(run.rows)),
        el('td', { class: 'num', 'data-label': 'stale' }, String(run.stale)),
        el('td', { class: 'num', 'data-label': 'failed' }, String(run.failed)),
        el('td', { class: 'num', 'data-label': 'fallbacks' }, String(run.fallbacks)),
        el('td', { class: 'num', 'data-label': 'cost' }, money(run.cost_usd)),
        settings,
      ];
      let mark = '';
      if (r === state.a) mark = 'is-a';
      if (r === state.b) mark = 'is-b';
      return el('tr', { class: mark, 'data-run': String(r) }, ...cells);
    });
    const header = el(
      'tr',
      {},
      ...head.map((name) => el('th', numeric.has(name) ? { class: 'num' } : {}, name)),
    );
    const none = el('input', { type: 'radio', name: 'run-b', value: '-1', id: 'no-b' });
    none.checked = state.b < 0;
    none.addEventListener('change', () => choose(state.a, -1));
    section.append(
      el(
        'div',
        { class: 'wide' },
        el('table', { class: 'runs stack' }, el('thead', {}, header), el('tbody', {}, ...rows)),
      ),
      el('p', {}, el('label', {}, none, ' no run B: one run against the people')),
    );
    section.append(
      el(
        'p',
        { class: 'hint' },
        "Settings: samples and thinking as the log records them; each judge's request settings " +
          'as models.json gives them now (the log does not record them). Cost: every entry of ' +
          'the log, failed ones too.',
      ),
    );
    return section;
  };

  /** @param {number} a @param {number} b */
  const choose = (a, b) => {
    state.a = a;
    state.b = b;
    chosen.set('judge', '');
    if (state.b < 0 && value('disagreement') === 'runs') chosen.set('disagreement', '');
    render();
  };

  // ---- The list of transcripts -----------------------------------------------------------------

  /** @param {string} name @param {string} label @param {[string, string][]} options */
  const select = (name, label, options) => {
    const element = el('select', { name });
    for (const [value, text] of options) element.append(el('option', { value }, text));
    element.value = value(name);
    element.addEventListener('change', () => {
      chosen.set(name, element.value);
      render();
    });
    return el('label', {}, label, element);
  };

  /** @param {string[]} values @returns {[string, string][]} */
  const choices = (values) => [...new Set(values)].sort().map((value) => [value, value]);

  const filters = () => {
    const judges = [state.a, state.b]
      .filter((r) => r >= 0)
      .flatMap((r) => runAt(r).judges.map((judge) => judge.name));
    /** @type {[string, string][]} */
    const disagreement = [
      ['', 'any'],
      ['people', 'run A and the people differ'],
      ['agree', 'run A and the people agree'],
    ];
    if (state.b >= 0) disagreement.push(['runs', 'runs A and B differ']);
    return el(
      'form',
      { class: 'filters', id: 'filters' },
      select('model', 'tutor', [
        ['', 'every tutor'],
        ...choices(data.transcripts.map((t) => t.model)),
      ]),
      select('task', 'task', [
        ['', 'every task'],
        ...choices(data.transcripts.map((t) => t.task_id)),
      ]),
      select('dimension', 'dimension', [
        ['', 'every dimension'],
        ...dimensions.map(
          (dimension, d) => /** @type {[string, string]} */ ([String(d), dimension.name]),
        ),
      ]),
      select('judge', 'judge', [['', 'any judge'], ...choices(judges)]),
      select('disagreement', 'disagreement', disagreement),
      select('status', 'rows', [
        ['', 'all'],
        ['stale', 'stale'],
        ['failed', 'failed'],
        ['fallback', 'by a fallback judge'],
        ['unjudged', 'no row in run A'],
      ]),
      select('order', 'order', [
        ['differs', state.b >= 0 ? 'A and B differing first' : 'most disputed first'],
        ['pair', 'by tutor, then task'],
      ]),
    );
  };

  /**
   * A transcript's scores as a strip, one cell a dimension; a cell differing from `against`'s is
   * marked.
   * @param {Scores | null} scores @param {Scores | null} [against]
   */
  const strip = (scores, against = null) => {
    const only = value('dimension') === '' ? null : Number(value('dimension'));
    const cells = dimensions.flatMap((dimension, d) => {
      if (only !== null && only !== d) return [];
      const score = scores?.[dimension.name];
      const other = against?.[dimension.name];
      const differs = score !== undefined && other !== undefined && score !== other;
      const classes = [differs ? 'differs' : '', score === undefined ? 'none' : ''].join(' ');
      const title = `${dimension.name}: ${score === undefined ? 'no score' : score}`;
      return [
        el('span', { class: classes.trim(), title }, score === undefined ? '–' : String(score)),
      ];
    });
    return el('span', { class: 'strip' }, ...cells);
  };

  /** The people's scores of a transcript as one strip: a dimension's score, or its scores. */
  /** @param {Transcript} transcript @param {Scores | null} against */
  const peopleStrip = (transcript, against) => {
    const only = value('dimension') === '' ? null : Number(value('dimension'));
    const cells = dimensions.flatMap((dimension, d) => {
      if (only !== null && only !== d) return [];
      const scores = transcript.humans.flatMap((human) => {
        const score = human.scores[dimension.name];
        return score === undefined ? [] : [score];
      });
      const judge = against?.[dimension.name];
      const differs = judge !== undefined && scores.some((score) => score !== judge);
      const text = scores.length === 0 ? '–' : scores.join('·');
      const title = `${dimension.name}: ${scores.length === 0 ? 'no score' : scores.join(', ')}`;
      return [
        el('span', { class: differs ? 'differs' : scores.length === 0 ? 'none' : '', title }, text),
      ];
    });
    return el('span', { class: 'strip' }, ...cells);
  };

  /** What is to know of a run's result at a glance, each flag named after its run (`run`). */
  /** @param {Result | undefined} result @param {string} run */
  const flags = (result, run) => {
    if (result === undefined) return [tag('unjudged', `${run}not judged`)];
    const shown = [];
    if (result.status === 'failed') shown.push(tag('failed', `${run}failed`));
    if (result.status === 'no row') shown.push(tag('unjudged', `${run}no row`));
    if (result.stale) shown.push(tag('stale', `${run}stale`));
    if (result.fallback) shown.push(tag('fallback', `${run}fallback`));
    return shown;
  };

  const listSection = () => {
    const section = el('section', { id: 'transcripts' });
    const a = runAt(state.a);
    const b = state.b < 0 ? undefined : runAt(state.b);
    const title = b === undefined ? `run A: ${a.name}` : `run A: ${a.name}, run B: ${b.name}`;
    section.append(el('h2', {}, `Transcripts (${title})`), filters());

    const shown = shownTranscripts();
    section.append(
      el(
        'p',
        { id: 'shown', role: 'status' },
        `${shown.length} of ${data.transcripts.length} transcripts shown`,
      ),
    );
    const legend = dimensions.map((dimension, d) => [
      el('b', {}, shortNames[d]),
      ` ${dimension.name}`,
    ]);
    section.append(
      el(
        'p',
        { class: 'legend' },
        "Scores in the dimensions' order: ",
        ...legend.flatMap((parts, d) => (d === 0 ? parts : ['; ', ...parts])),
        ". Highlighted: a score that differs from run A's. Disagreement: per scorer, the steps of " +
          'each scale between the scores, summed over the dimensions, averaged over the scorers.',
      ),
    );

    const head = ['transcript', 'A: judge', 'A'];
    if (b !== undefined) head.push('B: judge', 'B', 'A–B steps');
    head.push('people', 'A–people steps', 'flags');
    const only = value('dimension') === '' ? null : Number(value('dimension'));
    const rows = shown.map((t) => {
      const transcript = transcriptAt(t);
      const one = resultsAt(state.a).get(t);
      const other = b === undefined ? undefined : resultsAt(state.b).get(t);
      const link = el('a', { href: `#t${t}` }, `${transcript.model} / ${transcript.task_id}`);
      const cells = [
        el('td', { class: 'pair', 'data-label': 'transcript' }, link),
        el('td', { 'data-label': 'A: judge' }, one?.judge ?? '–'),
        el('td', { 'data-label': 'A' }, strip(one?.scores ?? null)),
      ];
      if (b !== undefined) {
        cells.push(
          el('td', { 'data-label': 'B: judge' }, other?.judge ?? '–'),
          el('td', { 'data-label': 'B' }, strip(other?.scores ?? null, one?.scores ?? null)),
        );
        cells.push(
          el(
            'td',
            { class: 'num', 'data-label': 'A–B steps' },
            stepsText(runSteps(one, other, only)),
          ),
        );
      }
      cells.push(
        el('td', { 'data-label': 'people' }, peopleStrip(transcript, one?.scores ?? null)),
        el(
          'td',
          { class: 'num', 'data-label': 'A–people steps' },
          stepsText(peopleSteps(one, transcript, only)),
        ),
        el(
          'td',
          { 'data-label': 'flags' },
          ...flags(one, b === undefined ? '' : 'A '),
          ...(b === undefined ? [] : flags(other, 'B ')),
        ),
      );
      const row = el('tr', { 'data-t': String(t) }, ...cells);
      row.addEventListener('click', (event) => {
        if (event.target instanceof HTMLAnchorElement) return;
        location.hash = `#t${t}`;
      });
      return row;
    });
    const header = el('tr', {}, ...head.map((name) => el('th', {}, name)));
    section.append(
      el(
        'div',
        { class: 'wide' },
        el('table', { class: 'list stack' }, el('thead', {}, header), el('tbody', {}, ...rows)),
      ),
    );
    return section;
  };

  // ---- One transcript ----------------------------------------------------------------------------

  /** @param {Transcript} transcript */
  const turnsOf = (transcript) => {
    if (transcript.turns === null) {
      return el('p', { class: 'warning' }, transcript.unavailable ?? 'transcript not shown');
    }
    const turns = transcript.turns.map((turn) => {
      const role = turn.who === 'Student' ? 'student' : turn.who === 'Tutor' ? 'tutor' : 'other';
      const images = turn.images.map((image) => {
        const img = el('img', { alt: image.label });
        img.src = `data:${image.source.media_type};base64,${image.source.data}`;
        return el('figure', {}, img, el('figcaption', {}, image.label));
      });
      return el(
        'div',
        { class: `turn ${role}` },
        el('p', { class: 'who' }, turn.who),
        el('pre', {}, turn.text),
        ...images,
      );
    });
    return el('div', { class: 'turns' }, ...turns);
  };

  /** The scores side by side: run A, run B, each scorer; a score differing from A's marked. */
  /** @param {Transcript} transcript @param {(Result | undefined)[]} results @param {string[]} names */
  const scoresTable = (transcript, results, names) => {
    const scorers = transcript.humans.map((human) => {
      const marks = [human.unsure ? ' (unsure)' : '', human.stale ? ' (stale)' : ''].join('');
      return `${human.scorer || 'human'}${marks}`;
    });
    const header = el(
      'tr',
      {},
      ...['dimension', ...names, ...scorers].map((name) => el('th', {}, name)),
    );
    const a = results[0]?.scores ?? null;
    const rows = dimensions.map((dimension) => {
      /** @param {number | undefined} score @param {boolean} compared */
      const cell = (score, compared) => {
        const differs =
          compared &&
          score !== undefined &&
          a?.[dimension.name] !== undefined &&
          score !== a[dimension.name];
        return el(
          'td',
          differs ? { class: 'differs' } : {},
          score === undefined ? '–' : String(score),
        );
      };
      return el(
        'tr',
        {},
        el('th', { title: dimension.description }, dimension.name),
        ...results.map((result, i) => cell(result?.scores?.[dimension.name], i > 0)),
        ...transcript.humans.map((human) => cell(human.scores[dimension.name], true)),
      );
    });
    return el(
      'div',
      { class: 'wide' },
      el('table', { class: 'scores' }, el('thead', {}, header), el('tbody', {}, ...rows)),
    );
  };

  /** Scores as `MC 2 · PS 1 ...`, by the dimensions' short names (the list's legend). */
  /** @param {Scores} scores */
  const scoresText = (scores) => {
    const each = dimensions.map((dimension, d) => {
      return `${shortNames[d]} ${scores[dimension.name] ?? '–'}`;
    });
    return each.join(' · ');
  };

  /** One audit line: its outcome, each answer (raw, parsed, thinking) and each failed attempt. */
  /** @param {Entry} entry @param {boolean} open */
  const entryDetails = (entry, open) => {
    const summary = [`line ${entry.line}`, entry.status ?? 'unknown', when(entry.timestamp)];
    if (entry.judge !== null) summary.push(entry.judge);
    const details = el('details', { class: 'entry' }, el('summary', {}, summary.join(' · ')));
    details.open = open;
    const facts = [`run ${entry.run_id ?? 'unknown'}`, `cost ${money(entry.cost_usd)}`];
    facts.push(`prompt sha256 ${entry.prompt_sha256 ?? 'not recorded'}`);
    details.append(el('p', { class: 'facts' }, facts.join(' · ')));
    if (entry.error !== null) details.append(el('p', { class: 'warning' }, entry.error));
    if (entry.sample_scores.length > 1) {
      details.append(
        el('h4', {}, `${entry.sample_scores.length} samples (the row is their median)`),
      );
      entry.sample_scores.forEach((sample, i) => {
        details.append(el('p', { class: 'facts' }, `sample ${i + 1}: ${scoresText(sample)}`));
      });
    }
    entry.answers.forEach((answer, i) => {
      const who = [answer.model ?? answer.judge ?? 'unknown model'];
      if (answer.provider !== null) who.push(answer.provider);
      if (answer.family !== null) who.push(`family ${answer.family}`);
      const about = [
        `stop ${answer.stop_reason ?? 'unknown'}`,
        `request ${answer.request_id ?? 'unknown'}`,
      ];
      if (answer.latency_ms !== null) about.push(`${Math.round(answer.latency_ms)} ms`);
      const box = el(
        'div',
        { class: 'answer' },
        el('h4', {}, `Answer ${i + 1}: ${who.join(', ')}`),
        el('p', { class: 'facts' }, about.join(' · ')),
        el(
          'p',
          { class: 'facts' },
          answer.scores === null
            ? 'parsed: no usable scores'
            : `parsed: ${scoresText(answer.scores)}`,
        ),
        el('pre', { class: 'raw' }, answer.text),
      );
      if (answer.thinking !== null && answer.thinking !== '') {
        box.append(
          el(
            'details',
            { class: 'thinking' },
            el('summary', {}, "The judge's thinking"),
            el('pre', {}, answer.thinking),
          ),
        );
      }
      if (answer.redacted_thinking > 0) {
        box.append(
          el(
            'p',
            { class: 'facts' },
            `${plural(answer.redacted_thinking, 'redacted thinking block')}`,
          ),
        );
      }
      details.append(box);
    });
    for (const attempt of entry.attempts) {
      const status = attempt.status === null ? '' : ` (HTTP ${attempt.status})`;
      const box = el(
        'div',
        { class: 'answer' },
        el(
          'h4',
          {},
          `Failed attempt: ${attempt.judge ?? 'unknown judge'}: ${attempt.error}${status}`,
        ),
        el('p', { class: 'facts' }, attempt.message),
      );
      if (attempt.raw_text !== null) box.append(el('pre', { class: 'raw' }, attempt.raw_text));
      details.append(box);
    }
    return details;
  };

  /** A run's panel on a transcript: its row, whether stale, and every audit line of it. */
  /** @param {Run} run @param {Result | undefined} result @param {Transcript} transcript @param {string} which */
  const runPanel = (run, result, transcript, which) => {
    const panel = el(
      'section',
      { class: `panel run-${which.toLowerCase()}` },
      el('h3', {}, `Run ${which}: ${run.name}`),
    );
    if (result === undefined) {
      panel.append(el('p', {}, 'Not judged in this run.'));
      return panel;
    }
    const facts = el('dl', { class: 'kv' });
    /** @param {string} name @param {Child} value */
    const fact = (name, value) => facts.append(el('dt', {}, name), el('dd', {}, value));
    const status = {
      scored: 'scored',
      failed: 'failed: no row (its last entry failed)',
      'no row': 'scored in the log, but no row in the CSV now',
    }[result.status];
    fact('status', status);
    let judge = result.judge ?? 'unknown';
    if (result.fallback) judge += ' (a fallback: an earlier judge failed)';
    fact('judge', judge);
    fact('judged', when(result.timestamp));
    fact('cost', money(result.cost_usd));
    const last = result.entries.at(-1);
    if (last !== undefined && transcript.prompt_sha256 !== null && last.prompt_sha256 !== null) {
      const same = last.prompt_sha256 === transcript.prompt_sha256;
      fact(
        'prompt',
        same
          ? 'the rebuilt prompt is the one sent (same sha256)'
          : 'the prompt sent differs from the one rebuilt now',
      );
    }
    panel.append(facts);
    if (result.stale) {
      panel.append(
        el(
          'p',
          { class: 'warning' },
          'Stale: an input of its prompt (transcript, task, reference key, rubric or template) changed since it was judged; the report leaves it out.',
        ),
      );
    }
    if (result.scores !== null && result.notes !== '') {
      panel.append(el('h4', {}, "The row's notes"), el('pre', { class: 'notes' }, result.notes));
    }
    if (result.entries.length === 0) {
      panel.append(el('p', { class: 'hint' }, 'Not in the audit log: no answer to show.'));
    }
    const entries = [...result.entries].reverse();
    entries.forEach((entry, i) => panel.append(entryDetails(entry, i === 0)));
    return panel;
  };

  /** @param {number} t */
  const detailSection = (t) => {
    const transcript = transcriptAt(t);
    const shown = shownTranscripts();
    const place = shown.indexOf(t);
    const section = el('section', { id: 'transcript' });
    const back = el('a', { href: '#' }, '← every transcript');
    const nav = el('nav', { class: 'detail-nav' }, back);
    /** @param {string} label @param {number | undefined} target */
    const step = (label, target) => {
      const button = el('button', { type: 'button' }, label);
      button.disabled = target === undefined;
      button.addEventListener('click', () => {
        if (target !== undefined) location.hash = `#t${target}`;
      });
      return button;
    };
    nav.append(step('← previous', place > 0 ? shown[place - 1] : undefined));
    nav.append(
      step('next →', place >= 0 && place < shown.length - 1 ? shown[place + 1] : undefined),
    );
    nav.append(
      el(
        'span',
        { class: 'hint' },
        place >= 0 ? `${place + 1} of ${shown.length} shown` : 'not among those the filters show',
      ),
    );
    section.append(nav, el('h2', {}, `${transcript.model} / ${transcript.task_id}`));

    const runs = [state.a, state.b].filter((r) => r >= 0);
    const results = runs.map((r) => resultsAt(r).get(t));
    const names = runs.map((r, i) => `${i === 0 ? 'A' : 'B'}: ${runAt(r).name}`);
    section.append(scoresTable(transcript, results, names));

    const people = transcript.humans.filter((human) => human.notes !== '');
    for (const human of people) {
      section.append(
        el(
          'p',
          { class: 'facts' },
          el('b', {}, `${human.scorer || 'human'}'s notes: `),
          human.notes,
        ),
      );
    }

    const reading = el(
      'section',
      { class: 'panel' },
      el('h3', {}, 'Transcript'),
      turnsOf(transcript),
    );
    const prompt = el(
      'details',
      { class: 'prompt' },
      el('summary', {}, 'The prompt sent to the judge'),
    );
    prompt.append(el('p', { class: 'hint' }, transcript.prompt_note));
    if (transcript.prompt !== null) prompt.append(el('pre', {}, transcript.prompt));
    reading.append(prompt);
    const panels = runs.map((r, i) =>
      runPanel(runAt(r), results[i], transcript, i === 0 ? 'A' : 'B'),
    );
    section.append(
      el('div', { class: `columns${panels.length > 1 ? ' three' : ''}` }, reading, ...panels),
    );
    return section;
  };

  // ---- The page ----------------------------------------------------------------------------------

  // Where the list was scrolled to when a transcript was opened: back to the list goes back there.
  let listScroll = 0;
  let showingList = false;

  const render = () => {
    const open = readHash();
    const scrollY = showingList ? window.scrollY : listScroll;
    app.replaceChildren();
    if (data.notes.length > 0) {
      app.append(
        el('ul', { class: 'notes-list' }, ...data.notes.map((note) => el('li', {}, note))),
      );
    }
    if (open !== null && data.runs.length > 0) {
      if (showingList) listScroll = scrollY;
      showingList = false;
      app.append(detailSection(open));
      window.scrollTo(0, 0);
      return;
    }
    showingList = true;
    app.append(runsSection());
    if (data.runs.length > 0) app.append(listSection());
    window.scrollTo(0, scrollY);
  };

  window.addEventListener('hashchange', render);
  render();
})();
