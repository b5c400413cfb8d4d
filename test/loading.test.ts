// Loading stage: JSON files, rubric, models.json, transcript discovery and validation, transcript images.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import type { TestContext } from 'node:test';
import {
  DIMENSIONS,
  MODELS_FILE,
  RUBRIC_FILE,
  waitFor,
  judgeConfig,
  makeTranscript,
  mentioning,
  rubricFile,
  setup,
  shippedRubricJson,
  snapshot,
  tempDir,
  writeJson,
} from './helpers.ts';
import type { Workspace } from './helpers.ts';
import type { JudgeConfig, TranscriptRef } from '../run-judge.ts';

// Destructured, not imported by name: a renamed export then fails its own tests, not the whole file.
const {
  EvalConfigurationError,
  judgeModel,
  loadJson,
  loadModelsConfig,
  priceFor,
  loadRubric,
  loadTranscript,
  readTranscripts,
  rubricDimensions,
  transcriptImages,
} = await import('../run-judge.ts');
const { main: reportMain } = await import('../report.ts');

interface ErrorCase {
  label: string;
  /** Writes the bad input (or not, for a missing file) and returns its path. */
  write: (t: TestContext) => string;
  /** What the message must name besides the file. */
  mentions?: string[];
  /** The field path the message must name, e.g. `dimensions[2].scores`. */
  field?: string;
}

/** Two tests per case, so a message that lacks the field path does not hide whether the right error is raised. */
function errorTests(load: (file: string) => unknown, name: string, cases: ErrorCase[]): void {
  for (const { label, write, mentions = [], field } of cases) {
    test(`${label} → ${name} naming the file${mentions.map((part) => `, ${part}`).join('')}`, (t) => {
      const file = write(t);
      assert.throws(() => load(file), { name, message: mentioning(file, ...mentions) });
    });
    if (field) {
      test(`${label} → the message names the field path ${field}`, (t) => {
        const file = write(t);
        assert.throws(() => load(file), { name, message: mentioning(file, field) });
      });
    }
  }
}

const fileIn = (t: TestContext, name: string, value?: unknown) => {
  const file = path.join(tempDir(t), name);
  return value === undefined ? file : writeJson(file, value);
};

describe('loadJson', () => {
  test('a valid file returns its parsed value', (t) => {
    assert.deepEqual(loadJson(fileIn(t, 'ok.json', { a: [1, 'x'] })), { a: [1, 'x'] });
  });

  const failures: [
    string,
    string | undefined,
    typeof EvalConfigurationError | undefined,
    string[],
  ][] = [
    ['a missing file', undefined, undefined, ['not found']],
    ['malformed JSON', '{"a": 1,', undefined, ['invalid JSON']],
    // Configuration files pass their own class, so a broken rubric.json stops the run as a configuration error.
    ['malformed JSON read with a chosen class', 'not json', EvalConfigurationError, []],
  ];
  for (const [label, content, ErrorClass, mentions] of failures) {
    const name = ErrorClass?.name ?? 'EvalInputError';
    test(`${label} → ${name} naming the file${mentions.map((part) => `, ${part}`).join('')}`, (t) => {
      const file = fileIn(t, 'bad.json', content);
      assert.throws(() => loadJson(file, ErrorClass), {
        name,
        message: mentioning(file, ...mentions),
      });
    });
  }
});

describe('loadRubric and rubricDimensions', () => {
  test('the shipped rubric has the six dimensions, in rubric.json order', () => {
    const names = shippedRubricJson().dimensions.map((d) => d.name);
    assert.deepEqual(rubricDimensions(loadRubric(RUBRIC_FILE)), names);
    assert.deepEqual(names, [...DIMENSIONS]);
  });

  test('the dimension order follows the file, not a fixed list: a reversed rubric gives the reversed order', (t) => {
    const file = rubricFile(t, (json) => json.dimensions.reverse());
    assert.deepEqual(rubricDimensions(loadRubric(file)), [...DIMENSIONS].reverse());
  });
});

describe('loadRubric: a bad rubric.json is a configuration error naming the file and the field', () => {
  const badScores: [string, Record<string, unknown>][] = [
    ['a non-integer key "a"', { 0: 'x', a: 'y' }],
    ['a fractional key "1.5"', { 0: 'x', '1.5': 'y' }],
    ['a negative key "-1"', { '-1': 'x', 0: 'y' }],
    ['a leading-zero key "01"', { 0: 'x', '01': 'y' }],
    ['no keys at all', {}],
    ['a non-string description', { 0: 'x', 1: 7 }],
  ];
  errorTests(loadRubric, 'EvalConfigurationError', [
    { label: 'malformed JSON', write: (t) => fileIn(t, 'rubric.json', '{"dimensions": [') },
    {
      label: 'empty dimensions',
      write: (t) => rubricFile(t, (json) => void (json.dimensions = [])),
      mentions: ['empty'],
      field: 'dimensions',
    },
    {
      label: 'a duplicate dimension name',
      write: (t) =>
        rubricFile(t, (json) => void (json.dimensions[1]!.name = json.dimensions[0]!.name)),
      mentions: ['duplicate', '"mathematical_correctness"'],
      field: 'dimensions[1].name',
    },
    ...badScores.map(([label, scores]) => ({
      label: `scores with ${label}`,
      write: (t: TestContext) =>
        rubricFile(
          t,
          (json) => void (json.dimensions[2]!.scores = scores as Record<string, string>),
        ),
      mentions: ['error_diagnosis', 'scores'],
      field: 'dimensions[2].scores',
    })),
  ]);
});

/** A models.json whose judge (and optional first fallback) is judgeConfig() with `judge`/`fallback` merged in. */
const modelsWith = (
  t: TestContext,
  judge: Record<string, unknown>,
  fallback?: Record<string, unknown>,
) =>
  fileIn(t, 'models.json', {
    judge: { ...judgeConfig(), ...judge },
    fallback_judges: fallback ? [{ ...judgeConfig(), ...fallback }] : [],
  });

describe('loadModelsConfig', () => {
  test('the shipped models.json: judge claude-opus-4-7 via JUDGE_MODEL, key ANTHROPIC_API_KEY, temperature null', () => {
    const models = loadModelsConfig(MODELS_FILE);
    assert.equal(models.judge.model, 'claude-opus-4-7');
    assert.equal(models.judge.model_env, 'JUDGE_MODEL');
    assert.equal(models.judge.api_key_env, 'ANTHROPIC_API_KEY');
    assert.equal(models.judge.temperature, null);
    assert.ok(Array.isArray(models.fallback_judges));
  });

  test('valid "media" and "structured_output" values load, in the judge and in fallbacks', (t) => {
    const file = modelsWith(
      t,
      { media: ['text', 'image'], structured_output: false },
      { media: [], structured_output: true },
    );
    const models = loadModelsConfig(file);
    assert.deepEqual(models.judge.media, ['text', 'image']);
    assert.equal(models.judge.structured_output, false);
    assert.equal(models.fallback_judges[0]!.structured_output, true);
  });

  errorTests(loadModelsConfig, 'EvalConfigurationError', [
    { label: 'a missing models.json', write: (t) => fileIn(t, 'models.json') },
    {
      label: 'no "judge" entry',
      write: (t) => fileIn(t, 'models.json', { models: [], fallback_judges: [] }),
      mentions: ['judge'],
    },
    {
      label: '"media": ["text", "images"]',
      write: (t) => modelsWith(t, { media: ['text', 'images'] }),
      mentions: ['media', '"images"'],
      field: 'judge.media',
    },
    {
      label: '"media" that is not a list',
      write: (t) => modelsWith(t, { media: 'image' }),
      mentions: ['media'],
      field: 'judge.media',
    },
    ...[['image', 3], ['video']].map((media) => ({
      label: `a fallback judge with "media": ${JSON.stringify(media)}`,
      write: (t: TestContext) => modelsWith(t, {}, { media }),
      mentions: ['media', 'fallback_judges[0]'],
      field: 'fallback_judges[0].media',
    })),
    ...['false', 'true', 1, null].map((value) => ({
      label: `"structured_output": ${JSON.stringify(value)}`,
      write: (t: TestContext) => modelsWith(t, { structured_output: value }),
      mentions: ['structured_output'],
      field: 'judge.structured_output',
    })),
  ]);
});

describe('loadModelsConfig: api_key_env names a variable, never holds the key', () => {
  // A key pasted into api_key_env must not be echoed: not in the refusal, nor later as "variable <key> is not set".
  const SECRET = 'sk-ant-api03-SECRETVALUE';
  for (const [where, write] of [
    ['judge', (t: TestContext) => modelsWith(t, { api_key_env: SECRET })],
    ['fallback_judges[0]', (t: TestContext) => modelsWith(t, {}, { api_key_env: SECRET })],
  ] as const) {
    test(`a key-looking value in ${where}.api_key_env → EvalConfigurationError naming the file and the field, not the value`, (t) => {
      const file = write(t);
      assert.throws(
        () => loadModelsConfig(file),
        (error: Error) => {
          assert.equal(error.name, 'EvalConfigurationError');
          assert.match(error.message, mentioning(file, `${where}.api_key_env`));
          assert.doesNotMatch(error.message, /SECRETVALUE/);
          assert.doesNotMatch(String(error.stack), /SECRETVALUE/);
          return true;
        },
      );
    });
  }
});

describe('loadModelsConfig: judge entries are strict, other objects are not', () => {
  // A misspelt key would otherwise be ignored silently, e.g. a temperature that is never applied.
  errorTests(
    loadModelsConfig,
    'EvalConfigurationError',
    [
      { where: 'judge', key: 'temprature', known: 'temperature' },
      { where: 'fallback_judges[0]', key: 'max_token', known: 'max_tokens' },
      { where: 'judge', key: 'structured_outputs', known: 'structured_output' },
    ].map(({ where, key, known }) => ({
      label: `an unknown key "${key}" in ${where}`,
      write: (t: TestContext) =>
        where === 'judge' ? modelsWith(t, { [key]: 0 }) : modelsWith(t, {}, { [key]: 0 }),
      mentions: [where, key, `did you mean "${known}"`],
    })),
  );

  test('the models list keeps its free-form entries; a top-level "comment" is allowed', (t) => {
    const file = fileIn(t, 'models.json', {
      comment: ['prices checked 2026-12-02', 'a second line'],
      models: [{ name: 'stub', provider: 'local', notes: 'free-form notes', anything: [1] }],
      judge: judgeConfig(),
      fallback_judges: [],
    });
    assert.equal(loadModelsConfig(file).judge.model, 'claude-test-judge');
  });
});

describe('loadModelsConfig: strict at every level with a fixed set of keys, the hint from that level', () => {
  const judged = (t: TestContext, extra: Record<string, unknown>) =>
    fileIn(t, 'models.json', { judge: judgeConfig(), ...extra });
  const cases: { label: string; write: (t: TestContext) => string; says: RegExp }[] = [
    {
      label: 'a top-level "fallback_judge"',
      write: (t) => judged(t, { fallback_judge: [] }),
      says: /\(top level\): unknown key "fallback_judge" \(did you mean "fallback_judges"\?\)/,
    },
    {
      label: '"inpt" in price_usd_per_mtok',
      write: (t) => modelsWith(t, { price_usd_per_mtok: { inpt: 5, output: 25 } }),
      says: /judge\.price_usd_per_mtok: unknown key "inpt" \(did you mean "input"\?\)/,
    },
    {
      label: 'an unknown price key far from any',
      write: (t) => modelsWith(t, { price_usd_per_mtok: { input: 5, output: 25, zzzzzzzz: 1 } }),
      says: /price_usd_per_mtok: unknown key "zzzzzzzz" \(known: input, output, cache_write_5m, cache_write_1h, cache_read, prompt_tokens_up_to\)/,
    },
    {
      label: '"inpt" in a price by model id',
      write: (t) =>
        modelsWith(t, {}, { price_usd_per_mtok: { 'claude-x': { inpt: 5, output: 25 } } }),
      says: /fallback_judges\[0\]\.price_usd_per_mtok\.claude-x: unknown key "inpt" \(did you mean "input"\?\)/,
    },
    {
      label: 'a price by model id that is not a price',
      write: (t) => modelsWith(t, { price_usd_per_mtok: { 'claude-x': 5 } }),
      says: /judge\.price_usd_per_mtok\.claude-x: Invalid input: expected object, received number/,
    },
    {
      label: '"max_retry" in retry',
      write: (t) => modelsWith(t, { retry: { max_retry: 1 } }),
      says: /judge\.retry: unknown key "max_retry" \(did you mean "max_retries"\?\)/,
    },
    {
      label: '"thinkng" in a judge',
      write: (t) => modelsWith(t, { thinkng: 'adaptive' }),
      says: /judge: unknown key "thinkng" \(did you mean "thinking"\?\)/,
    },
    {
      label: '"thinking": "enabled"',
      write: (t) => modelsWith(t, { thinking: 'enabled' }),
      says: /judge\.thinking: .*"adaptive" \(got "enabled"\)/,
    },
    {
      label: '"effort": "hihg"',
      write: (t) => modelsWith(t, {}, { effort: 'hihg' }),
      says: /fallback_judges\[0\]\.effort: .*"low"\|"medium"\|"high"\|"xhigh"\|"max" \(got "hihg"\)/,
    },
  ];
  for (const { label, write, says } of cases) {
    test(`${label} → EvalConfigurationError: ${says.source.slice(0, 60)}…`, (t) => {
      const file = write(t);
      assert.throws(
        () => loadModelsConfig(file),
        (error: Error) => {
          assert.equal(error.name, 'EvalConfigurationError');
          assert.match(error.message, mentioning(file));
          assert.match(error.message, says);
          return true;
        },
      );
    });
  }

  test('valid settings load: thinking, effort, prices for the model or by model id', (t) => {
    const byModel = { 'claude-a': { input: 1, output: 5, cache_read: 0.05 } };
    const file = modelsWith(
      t,
      { thinking: 'adaptive', effort: 'low', price_usd_per_mtok: { input: 5, output: 25 } },
      { price_usd_per_mtok: byModel },
    );
    const models = loadModelsConfig(file);
    assert.equal(models.judge.thinking, 'adaptive');
    assert.equal(models.judge.effort, 'low');
    assert.deepEqual(models.fallback_judges[0]!.price_usd_per_mtok, byModel);
  });

  test('the shipped models.json prices its judge and fallback by their own model ids', () => {
    const models = loadModelsConfig(MODELS_FILE);
    for (const config of [models.judge, ...models.fallback_judges]) {
      const price = priceFor(config, config.model);
      assert.ok(price && price.input > 0 && price.output > 0, `a price for ${config.model}`);
    }
  });
});

describe('judgeModel', () => {
  const withEnvVar = judgeConfig({ model: 'base-model', model_env: 'RJ_JUDGE_MODEL' });
  const cases: [string, JudgeConfig, NodeJS.ProcessEnv, string][] = [
    [
      'model_env set in the environment replaces model',
      withEnvVar,
      { RJ_JUDGE_MODEL: 'override' },
      'override',
    ],
    ['model_env unset keeps model', withEnvVar, {}, 'base-model'],
    ['model_env blank keeps model', withEnvVar, { RJ_JUDGE_MODEL: '   ' }, 'base-model'],
    [
      'without model_env the variable is ignored',
      judgeConfig({ model: 'base-model' }),
      { RJ_JUDGE_MODEL: 'x' },
      'base-model',
    ],
  ];
  for (const [label, judge, env, expected] of cases) {
    test(label, () => {
      assert.equal(judgeModel(judge, env), expected);
    });
  }
});

/** Writes a transcripts tree, { model: [task, ...] }, each a small valid transcript. */
function transcriptTree(dir: string, layout: Record<string, string[]>): string {
  for (const [model, tasks] of Object.entries(layout)) {
    for (const task of tasks) {
      writeJson(
        path.join(dir, model, `${task}.json`),
        makeTranscript({ metadata: { task_id: task, model } }),
      );
    }
  }
  return dir;
}

const pairsOf = (refs: TranscriptRef[]) => refs.map((ref) => `${ref.model}/${ref.task_id}`);

describe('readTranscripts', () => {
  test('returns refs sorted by model, then task, from folder names and file stems', (t) => {
    // Created in an order that is neither sorted nor reverse-sorted, so directory order cannot pass by luck.
    const layout = { mid: ['t2', 't3', 't1'], alpha: ['t3', 't1', 't2'], zeta: ['t1', 't3', 't2'] };
    const dir = transcriptTree(tempDir(t), layout);
    const refs = readTranscripts(dir);
    const expected = ['alpha', 'mid', 'zeta'].flatMap((model) =>
      ['t1', 't2', 't3'].map((task) => `${model}/${task}`),
    );
    assert.deepEqual(pairsOf(refs), expected);
    assert.equal(refs[0]!.path, path.join(dir, 'alpha', 't1.json'));
  });

  test('tasks sort by task id, not by file name ("t1" before "t1-b", although "t1-b.json" < "t1.json")', (t) => {
    const dir = transcriptTree(tempDir(t), { m: ['t1-b', 't1', 't0'] });
    assert.deepEqual(
      readTranscripts(dir).map((ref) => ref.task_id),
      ['t0', 't1', 't1-b'],
    );
  });

  test('ignores non-.json files and files outside model folders', (t) => {
    const dir = transcriptTree(tempDir(t), { alpha: ['t1'] });
    fs.writeFileSync(path.join(dir, 'alpha', 'README.md'), 'x');
    writeJson(path.join(dir, 'stray.json'), {});
    assert.deepEqual(pairsOf(readTranscripts(dir)), ['alpha/t1']);
  });

  test('filters by task id, by model folder, and by both', (t) => {
    const dir = transcriptTree(tempDir(t), { zeta: ['t2', 't1'], alpha: ['t3', 't1'] });
    assert.deepEqual(pairsOf(readTranscripts(dir, 't1')), ['alpha/t1', 'zeta/t1']);
    assert.deepEqual(pairsOf(readTranscripts(dir, undefined, 'zeta')), ['zeta/t1', 'zeta/t2']);
    assert.deepEqual(pairsOf(readTranscripts(dir, 't2', 'zeta')), ['zeta/t2']);
  });

  test('the model filter is a folder name, never a model name from the metadata', (t) => {
    const dir = tempDir(t);
    writeJson(
      path.join(dir, 'tutor-folder', 't1.json'),
      makeTranscript({ metadata: { provider_model: 'claude-sonnet-4-6' } }),
    );
    assert.throws(() => readTranscripts(dir, undefined, 'claude-sonnet-4-6'), {
      name: 'EvalInputError',
      message: mentioning('tutor-folder'),
    });
  });

  test('no match → EvalInputError listing the existing models and tasks', (t) => {
    const dir = transcriptTree(tempDir(t), { zeta: ['t2'], alpha: ['t3', 't1'] });
    assert.throws(() => readTranscripts(dir, 'nope', 'alpha'), {
      name: 'EvalInputError',
      message: mentioning('nope', 'alpha', 'zeta', 't1', 't2', 't3'),
    });
  });

  test('the evals folder given (it holds transcripts/): refused, naming the folder to pass; tasks are never read as transcripts', (t) => {
    const evals = tempDir(t);
    transcriptTree(path.join(evals, 'transcripts'), { stub: ['proof01'] });
    writeJson(path.join(evals, 'reference_keys', 'proof01.json'), { task_id: 'proof01' });
    writeJson(path.join(evals, 'tasks', 'proof01.json'), { task_id: 'proof01' });
    const expected = path.join(evals, 'transcripts');
    assert.throws(() => readTranscripts(evals), {
      name: 'EvalInputError',
      message: `${evals}: not a transcripts folder ({model}/{task_id}.json): it holds ${expected}; pass --transcripts ${expected}`,
    });
  });

  test('the project folder given (`--transcripts .`): refused, naming evals/transcripts; node_modules is never a tutor', (t) => {
    const project = tempDir(t);
    transcriptTree(path.join(project, 'evals', 'transcripts'), { stub: ['proof01'] });
    writeJson(path.join(project, 'node_modules', '.package-lock.json'), {});
    assert.throws(() => readTranscripts(project), {
      name: 'EvalInputError',
      message: mentioning(`pass --transcripts ${path.join(project, 'evals', 'transcripts')}`),
    });
    const withPackages = transcriptTree(tempDir(t), { alpha: ['t1'] });
    writeJson(path.join(withPackages, 'node_modules', 'x.json'), {});
    assert.deepEqual(pairsOf(readTranscripts(withPackages)), ['alpha/t1']);
  });

  test('report.ts sheet --transcripts <the evals folder>: exit 2 with the same message, no sheet', async (t) => {
    const evals = tempDir(t);
    transcriptTree(path.join(evals, 'transcripts'), { stub: ['proof01'] });
    let stdout = '';
    let stderr = '';
    const io = {
      stdout: { write: (text: string) => (stdout += text) },
      stderr: { write: (text: string) => (stderr += text) },
    } as unknown as Parameters<typeof reportMain>[1];
    const code = await reportMain(['sheet', '--transcripts', evals, '--rubric', RUBRIC_FILE], io);
    assert.equal(code, 2, stderr);
    assert.equal(stdout, '');
    assert.match(stderr, /not a transcripts folder.*pass --transcripts /);
  });

  test('a relative rubric.json that is missing → the message says paths are relative to the current folder, and what to do', (t) => {
    const cwd = process.cwd();
    process.chdir(tempDir(t));
    t.after(() => process.chdir(cwd));
    assert.throws(() => loadRubric('rubric.json'), {
      name: 'EvalConfigurationError',
      message:
        `rubric.json: file not found (paths are relative to the current folder, ${process.cwd()}: ` +
        'run from the project folder, or pass --dir STUDY)',
    });
  });

  test('a missing transcripts folder → EvalInputError naming it', (t) => {
    const dir = path.join(tempDir(t), 'missing');
    assert.throws(() => readTranscripts(dir), { name: 'EvalInputError', message: mentioning(dir) });
  });
});

describe('readTranscripts: a link is followed when it stays inside the transcripts folder, refused when it leaves it', () => {
  /** transcripts/beta/t1.json, transcripts/_store/alpha/t1.json (a folder of folders lists nothing), outside/x/t1.json. */
  function linkLayout(t: TestContext) {
    const root = tempDir(t);
    const transcripts = transcriptTree(path.join(root, 'transcripts'), { beta: ['t1'] });
    transcriptTree(path.join(transcripts, '_store'), { alpha: ['t1'] });
    const outside = transcriptTree(path.join(root, 'outside'), { x: ['t1'] });
    return { transcripts, outside };
  }

  test("a linked model folder (relative link) is listed under the link's name, with its transcripts", (t) => {
    const { transcripts } = linkLayout(t);
    fs.symlinkSync(path.join('_store', 'alpha'), path.join(transcripts, 'alpha'));
    const refs = readTranscripts(transcripts);
    assert.deepEqual(pairsOf(refs), ['alpha/t1', 'beta/t1']);
    assert.equal(refs[0]!.path, path.join(transcripts, 'alpha', 't1.json'));
  });

  test('a linked transcript file (absolute link) is listed under its own name', (t) => {
    const { transcripts } = linkLayout(t);
    fs.symlinkSync(
      path.join(transcripts, 'beta', 't1.json'),
      path.join(transcripts, 'beta', 't2.json'),
    );
    assert.deepEqual(pairsOf(readTranscripts(transcripts)), ['beta/t1', 'beta/t2']);
  });

  const LEAVING: [
    string,
    (transcripts: string, outside: string) => [target: string, link: string],
  ][] = [
    [
      'a model folder linked outside',
      (transcripts, outside) => [path.join(outside, 'x'), path.join(transcripts, 'evil')],
    ],
    [
      'a model folder linked outside by a relative path',
      (transcripts) => ['../outside/x', path.join(transcripts, 'evil')],
    ],
    [
      'a transcript file linked outside',
      (transcripts, outside) => [
        path.join(outside, 'x', 't1.json'),
        path.join(transcripts, 'beta', 't2.json'),
      ],
    ],
  ];
  const BROKEN: [string, (transcripts: string) => string, string][] = [
    [
      'a link to nothing',
      (transcripts) => path.join(transcripts, 'beta', 'missing.json'),
      'ENOENT',
    ],
    [
      'a link to itself (a loop)',
      (transcripts) => path.join(transcripts, 'beta', 'loop.json'),
      'ELOOP',
    ],
  ];
  for (const [label, linkAt, code] of BROKEN) {
    test(`${label} → EvalInputError naming the link, "a broken link (${code})", not a crash`, (t) => {
      const { transcripts } = linkLayout(t);
      const link = linkAt(transcripts);
      fs.symlinkSync(code === 'ELOOP' ? link : path.join(transcripts, 'nowhere'), link);
      assert.throws(() => readTranscripts(transcripts), {
        name: 'EvalInputError',
        message: mentioning(link, `a broken link (${code})`),
      });
    });
  }

  test("a hidden broken link (an editor's lock file, .#t1.json) is ignored", (t) => {
    const { transcripts } = linkLayout(t);
    fs.symlinkSync('root@host.12345:1700000000', path.join(transcripts, 'beta', '.#t1.json'));
    assert.deepEqual(pairsOf(readTranscripts(transcripts)), ['beta/t1']);
  });

  for (const [label, linkOf] of LEAVING) {
    test(`${label} → EvalInputError naming the link and "leaves the transcripts folder", not skipped`, (t) => {
      const { transcripts, outside } = linkLayout(t);
      const [target, link] = linkOf(transcripts, outside);
      fs.symlinkSync(target, link);
      assert.throws(() => readTranscripts(transcripts), {
        name: 'EvalInputError',
        message: mentioning(link, 'leaves the transcripts folder'),
      });
    });
  }
});

/** Runs `fn` as an unprivileged user: root reads a folder whatever its mode, so root drops to "nobody" for the call. */
function unprivileged<T>(fn: () => T): T {
  if (process.geteuid?.() !== 0) return fn();
  process.seteuid!(65534);
  try {
    return fn();
  } finally {
    process.seteuid!(0);
  }
}

describe('readTranscripts: a folder it cannot list', () => {
  test('a model folder with mode 000 → EvalInputError naming the folder and "cannot be read"', (t) => {
    const root = tempDir(t);
    fs.chmodSync(root, 0o755); // so that an unprivileged user reaches the transcripts folder
    const transcripts = transcriptTree(path.join(root, 'transcripts'), {
      alpha: ['t1'],
      beta: ['t1'],
    });
    const locked = path.join(transcripts, 'beta');
    fs.chmodSync(locked, 0o000);
    try {
      assert.throws(() => unprivileged(() => readTranscripts(transcripts)), {
        name: 'EvalInputError',
        message: mentioning(locked, 'cannot be read'),
      });
    } finally {
      fs.chmodSync(locked, 0o755);
    }
  });
});

/** The ref of a transcript file laid out as {model}/{task}.json. */
const refOf = (file: string): TranscriptRef => ({
  model: path.basename(path.dirname(file)),
  task_id: path.basename(file, '.json'),
  path: file,
});
const transcriptFile = (t: TestContext, model: string, task: string, value: unknown) =>
  writeJson(path.join(tempDir(t), model, `${task}.json`), value);
/** Writes stub/proof01.json with this metadata. */
const withMetadata = (metadata: Record<string, unknown>) => (t: TestContext) =>
  transcriptFile(t, 'stub', 'proof01', makeTranscript({ metadata }));

describe('loadTranscript', () => {
  test('content as [{type: "text", text}] blocks is accepted as is', (t) => {
    const content = [
      { type: 'text', text: 'first' },
      { type: 'text', text: 'second' },
    ];
    const file = transcriptFile(t, 'stub', 'p1', {
      metadata: { task_id: 'p1', model: 'stub' },
      messages: [{ role: 'user', content }],
    });
    assert.deepEqual(loadTranscript(refOf(file)).messages[0]!.content, content);
  });

  errorTests((file) => loadTranscript(refOf(file)), 'EvalInputError', [
    {
      label: 'malformed JSON',
      write: (t) => transcriptFile(t, 'stub', 'p1', '{"messages": ['),
      mentions: ['invalid JSON'],
    },
    {
      label: 'metadata.task_id disagreeing with the file name',
      write: withMetadata({ task_id: 'proof02', model: 'stub' }),
      mentions: ['proof02', 'proof01'],
      field: 'metadata.task_id',
    },
    {
      label: 'metadata.model disagreeing with the folder',
      write: withMetadata({ task_id: 'proof01', model: 'other-model' }),
      mentions: ['other-model', 'stub'],
      field: 'metadata.model',
    },
    {
      label: 'a bad role',
      write: (t) =>
        transcriptFile(t, 'stub', 'p1', { messages: [{ role: 'tutor', content: 'hi' }] }),
      mentions: ['"tutor"'],
      field: 'messages[0].role',
    },
    {
      label: 'an image block with neither a path nor a valid base64 source',
      write: (t) =>
        transcriptFile(t, 'stub', 'p1', {
          messages: [{ role: 'user', content: [{ type: 'image', source: {} }] }],
        }),
      mentions: ['content'],
      field: 'messages[0].content',
    },
  ]);
});

const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
  'base64',
);

/** root/secret.png outside, root/transcripts/m01/photo.png inside; the transcript file itself is never read. */
function layout(t: TestContext) {
  const root = tempDir(t);
  const transcripts = path.join(root, 'transcripts');
  fs.mkdirSync(path.join(transcripts, 'm01'), { recursive: true });
  fs.writeFileSync(path.join(root, 'secret.png'), PNG);
  fs.writeFileSync(path.join(transcripts, 'm01', 'photo.png'), PNG);
  const transcriptPath = path.join(transcripts, 'm01', 't1.json');
  const imagesOf = (imagePath: string) =>
    transcriptImages(
      { messages: [{ role: 'user', content: [{ type: 'image', path: imagePath }] }] },
      transcriptPath,
    );
  return { root, transcripts, transcriptPath, imagesOf };
}

describe('transcriptImages: image paths stay inside the transcripts folder', () => {
  test('a relative path inside the folder is read', (t) => {
    const { transcripts, imagesOf } = layout(t);
    const [image] = imagesOf('photo.png');
    assert.equal(image!.label, '[image 1]');
    assert.equal(image!.file, path.join(transcripts, 'm01', 'photo.png'));
    assert.equal(image!.source.data, PNG.toString('base64'));
  });

  for (const imagePath of ['../../secret.png', '../m01/../../secret.png']) {
    test(`a relative path escaping the folder ("${imagePath}") → EvalInputError naming the transcript and the path`, (t) => {
      const { transcriptPath, imagesOf } = layout(t);
      assert.throws(() => imagesOf(imagePath), {
        name: 'EvalInputError',
        message: mentioning(transcriptPath, imagePath),
      });
    });
  }

  test('an absolute path → EvalInputError naming the transcript, even when it points inside the folder', (t) => {
    const { root, transcripts, transcriptPath, imagesOf } = layout(t);
    for (const absolute of [
      path.join(root, 'secret.png'),
      path.join(transcripts, 'm01', 'photo.png'),
    ]) {
      assert.throws(() => imagesOf(absolute), {
        name: 'EvalInputError',
        message: mentioning(transcriptPath, absolute),
      });
    }
  });

  test('a symlink inside the folder pointing outside it → EvalInputError naming the transcript and the link', (t) => {
    const { root, transcripts, transcriptPath, imagesOf } = layout(t);
    fs.symlinkSync(path.join(root, 'secret.png'), path.join(transcripts, 'm01', 'link.png'));
    assert.throws(() => imagesOf('link.png'), {
      name: 'EvalInputError',
      message: mentioning(transcriptPath, 'link.png'),
    });
  });

  test('a missing file inside the folder → EvalInputError naming the transcript, the file and ENOENT', (t) => {
    const { transcripts, transcriptPath, imagesOf } = layout(t);
    assert.throws(() => imagesOf('missing.png'), {
      name: 'EvalInputError',
      message: mentioning(transcriptPath, path.join(transcripts, 'm01', 'missing.png'), 'ENOENT'),
    });
  });
});

describe('transcriptImages: only a regular file within the 5 MB limit is read', () => {
  /** Each makes `file`, and returns what to check once it was refused. */
  const SPECIAL: {
    label: string;
    also: string;
    make: (file: string, t: TestContext) => Promise<() => void>;
  }[] = [
    {
      label: 'a directory',
      also: '',
      make: async (file) => {
        fs.mkdirSync(file);
        return () => {};
      },
    },
    {
      label: 'a FIFO',
      also: '; the FIFO is never opened',
      make: async (file, t) => {
        execFileSync('mkfifo', [file]);
        // A writer in another process, blocked in its open until a reader opens the FIFO (so a regression fails
        // instead of hanging). Linux names where a process sleeps: a writer woken by a reader no longer sleeps there.
        const writer = spawn('sh', ['-c', 'printf x > "$1"', 'sh', file], { stdio: 'ignore' });
        t.after(() => void writer.kill('SIGKILL'));
        const waitsForReader = () =>
          fs.readFileSync(`/proc/${writer.pid}/wchan`, 'utf8') === 'wait_for_partner';
        await waitFor(waitsForReader, 10_000, 'the writer to wait for a reader');
        return () => {
          assert.ok(waitsForReader(), 'the writer still waits: the FIFO was never opened');
        };
      },
    },
  ];
  for (const { label, also, make } of SPECIAL) {
    const name = `${label} named like an image → EvalInputError naming the file and "not a regular file"${also}`;
    test(name, { timeout: 5_000 }, async (t) => {
      const { transcripts, transcriptPath, imagesOf } = layout(t);
      const file = path.join(transcripts, 'm01', 'special.png');
      const check = await make(file, t);
      assert.throws(() => imagesOf('special.png'), {
        name: 'EvalInputError',
        message: mentioning(transcriptPath, file, 'not a regular file'),
      });
      check();
    });
  }

  /** The API's limit, 5 MB of base64, in bytes of the file. */
  const IMAGE_MAX_BYTES = (5 * 1024 * 1024 * 3) / 4;
  /** A sparse file of `size` bytes, so a large image costs no disk and little time. */
  const sparseImage = (file: string, size: number) => {
    fs.writeFileSync(file, '');
    fs.truncateSync(file, size);
  };

  test('an image of exactly the limit is read: 5 MB once base64-encoded', (t) => {
    const { transcripts, imagesOf } = layout(t);
    sparseImage(path.join(transcripts, 'm01', 'big.png'), IMAGE_MAX_BYTES);
    assert.equal(imagesOf('big.png')[0]!.source.data.length, 5 * 1024 * 1024);
  });

  test('an image one byte over the limit → EvalInputError naming the file, its size and "5 MB"', (t) => {
    const { transcripts, transcriptPath, imagesOf } = layout(t);
    const file = path.join(transcripts, 'm01', 'big.png');
    sparseImage(file, IMAGE_MAX_BYTES + 1);
    assert.throws(() => imagesOf('big.png'), {
      name: 'EvalInputError',
      message: mentioning(transcriptPath, file, `${IMAGE_MAX_BYTES + 1} bytes`, '5 MB'),
    });
  });
});

// ---------------------------------------------------------------------------------------------
// Reserved dimension names and limits: configuration errors, never a crash or a corrupt CSV
// ---------------------------------------------------------------------------------------------

/** Names a dimension cannot take: the CSV's other columns, Object.prototype's properties, and non-identifiers. */
const RESERVED_DIMENSION_NAMES = [
  'task_id',
  'model',
  'notes',
  'scorer',
  'transcript_sha256',
  'unsure',
  '__proto__',
  'constructor',
  'toString',
  'hasOwnProperty',
  'has space',
  'a,b',
  'say"hi',
  "it's",
  '',
];

describe('loadRubric: a reserved dimension name is a configuration error naming the file and the field', () => {
  errorTests(
    loadRubric,
    'EvalConfigurationError',
    RESERVED_DIMENSION_NAMES.map((name) => ({
      label: `a dimension named ${JSON.stringify(name)}`,
      write: (t: TestContext) => rubricFile(t, (json) => void (json.dimensions[3]!.name = name)),
      field: 'dimensions[3].name',
    })),
  );

  test('names that only contain a reserved word load (the control case)', (t) => {
    const names = ['task_id_2', 'model_quality', 'notes_taken', 'Constructor', 'proto'];
    const file = rubricFile(t, (json) =>
      names.forEach((name, i) => (json.dimensions[i]!.name = name)),
    );
    assert.deepEqual(rubricDimensions(loadRubric(file)).slice(0, names.length), names);
  });

  for (const name of ['notes', '__proto__', 'toString', 'a,b']) {
    test(`a run with a dimension named ${JSON.stringify(name)}: exit 2 naming the file and the field, no request, nothing written`, async (t) => {
      const rubric = shippedRubricJson();
      rubric.dimensions[1]!.name = name;
      const { fake, ws, run } = await setup(t, {}, { rubricText: JSON.stringify(rubric, null, 2) });
      const before = snapshot(ws.dir);
      const result = await run();
      assert.equal(result.code, 2, result.stderr);
      assert.match(result.stderr, mentioning(`run-judge: ${ws.rubric}`, 'dimensions[1].name'));
      assert.doesNotMatch(result.stderr, /^\s+at /m, 'no stack trace');
      assert.equal(fake.requests.length, 0);
      assert.deepEqual(snapshot(ws.dir), before, 'no CSV, log or lock');
    });
  }
});

describe('loadModelsConfig: timeout_s is at most 3600 (the SDK timer overflows past 2^31 ms)', () => {
  errorTests(loadModelsConfig, 'EvalConfigurationError', [
    ...[3601, 1e9].map((timeout_s) => ({
      label: `"timeout_s": ${timeout_s} on the judge`,
      write: (t: TestContext) => modelsWith(t, { timeout_s }),
      mentions: ['timeout_s'],
      field: 'judge.timeout_s',
    })),
    {
      label: '"timeout_s": 1e9 on a fallback judge',
      write: (t: TestContext) => modelsWith(t, {}, { timeout_s: 1e9 }),
      mentions: ['timeout_s'],
      field: 'fallback_judges[0].timeout_s',
    },
  ]);

  test('"timeout_s": 3600 is accepted, on the judge and on a fallback', (t) => {
    const models = loadModelsConfig(modelsWith(t, { timeout_s: 3600 }, { timeout_s: 3600 }));
    assert.equal(models.judge.timeout_s, 3600);
    assert.equal(models.fallback_judges[0]!.timeout_s, 3600);
  });
});

// ---------------------------------------------------------------------------------------------
// Deeply nested JSON: JSON.parse reads it, but anything recursive over it (writing it back, String()) overflows
// ---------------------------------------------------------------------------------------------

const DEEP = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
/** Rewrites a JSON file with `edit` applied, a value set to "DEEP" becoming 100,000 nested arrays; returns the file. */
function deepen(file: string, edit: (json: any) => void): string {
  const json = JSON.parse(fs.readFileSync(file, 'utf8'));
  edit(json);
  fs.writeFileSync(file, JSON.stringify(json).replace('"DEEP"', DEEP));
  return file;
}

describe('deeply nested JSON is the usual error naming the file and the field, never a RangeError', () => {
  const deepDescription = (json: any) => (json.dimensions[0].description = 'DEEP');
  const deepJudgeModel = (json: any) => (json.judge.model = 'DEEP');
  errorTests(loadRubric, 'EvalConfigurationError', [
    {
      label: 'a rubric description nested 100,000 levels deep',
      write: (t) => deepen(rubricFile(t), deepDescription),
      mentions: ['dimensions[0].description'],
    },
    {
      label: 'a rubric nested 100,000 levels deep',
      write: (t) => fileIn(t, 'rubric.json', DEEP),
      mentions: ['(top level)'],
    },
  ]);
  errorTests(loadModelsConfig, 'EvalConfigurationError', [
    {
      label: 'a judge model nested 100,000 levels deep',
      write: (t) => deepen(modelsWith(t, {}), deepJudgeModel),
      mentions: ['judge.model'],
    },
    {
      label: "a fallback judge's media nested 100,000 levels deep",
      write: (t) =>
        deepen(modelsWith(t, {}, {}), (json) => (json.fallback_judges[0].media = 'DEEP')),
      mentions: ['fallback_judges[0].media'],
    },
  ]);
  const transcriptWith = (edit: (json: any) => void) => (t: TestContext) =>
    deepen(transcriptFile(t, 'stub', 'p1', makeTranscript()), edit);
  errorTests((file) => loadTranscript(refOf(file)), 'EvalInputError', [
    {
      label: "a transcript's message content nested 100,000 levels deep",
      write: transcriptWith((json) => (json.messages[1].content = 'DEEP')),
      mentions: ['messages[1].content'],
    },
    {
      label: "a transcript's problem_statement nested 100,000 levels deep",
      write: transcriptWith((json) => (json.problem_statement = 'DEEP')),
      mentions: ['problem_statement'],
    },
    {
      label: 'a transcript nested 100,000 levels deep',
      write: (t) => transcriptFile(t, 'stub', 'p1', DEEP),
      mentions: ['(top level)'],
    },
    ...(['task_id', 'model'] as const).map((field) => ({
      label: `a transcript's metadata.${field} nested 100,000 levels deep`,
      write: transcriptWith((json) => (json.metadata = { [field]: 'DEEP' })),
      mentions: [`metadata.${field}`, 'expected string'],
    })),
    {
      label: "a transcript's metadata.task_id that is a list, not a string",
      write: transcriptWith((json) => (json.metadata = { task_id: ['p1'] })),
      mentions: ['metadata.task_id', 'expected string'],
    },
  ]);

  const RUNS: [string, (ws: Workspace) => string, string, string[]][] = [
    ['rubric.json', (ws) => deepen(ws.rubric, deepDescription), 'dimensions[0].description', []],
    ['models.json', (ws) => deepen(ws.models, deepJudgeModel), 'judge.model', []],
    [
      'a task file (--dry-run)',
      (ws) => deepen(path.join(ws.tasks, 'proof01.json'), (json) => (json.topic = 'DEEP')),
      'topic',
      ['--dry-run'],
    ],
  ];
  for (const [label, write, field, args] of RUNS) {
    test(`a run with ${label} nested 100,000 levels deep: exit 2, one line naming the file and the field, no request`, async (t) => {
      const { fake, ws, run } = await setup(t, {}, { models: 1, tasks: ['proof01'] });
      const file = write(ws);
      const result = await run(args);
      if (args.includes('--dry-run')) {
        // the dry-run lists the transcript whose task file would fail it, with the run's message
        assert.equal(result.code, 1, result.stderr);
        assert.match(result.stderr, mentioning(`\n  m01/proof01: ${file}: `, field));
        assert.doesNotMatch(result.stderr, /RangeError|\n {4}at /, 'no stack trace');
      } else {
        assert.equal(result.code, 2, result.stderr);
        assert.match(result.stderr, /^run-judge: [^\n]*\n$/, 'one line, no stack trace');
        assert.match(result.stderr, mentioning(`run-judge: ${file}: `, field));
      }
      assert.equal(fake.requests.length, 0);
    });
  }
});
