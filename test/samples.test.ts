// Repeated samples (--samples k): each transcript judged k times by one judge, its row the per-dimension median (the
// lower middle for even k) with the notes of the closest sample; samples 2..k read sample 1's prompt from the cache;
// a judge whose k samples are not all usable hands the transcript to the next judge, which does all k afresh; with
// --batch a transcript's k samples go in one batch. Plus medianVerdict itself and report.ts's self_consistency.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { Writable } from 'node:stream';
import { describe, test } from 'node:test';
import {
  DIMENSIONS,
  MODELS_FILE,
  allKeys,
  answerJson,
  csvRows,
  judgeEntry,
  readLog,
  rowCount,
  setup,
  tagOf,
  tagOfParams,
  wellFormedCsv,
} from './helpers.ts';
import type { Workspace, WorkspaceOptions } from './helpers.ts';
import type { BatchResult, RecordedRequest, Reply } from '../fakes/anthropic.ts';

// Destructured, not imported by name: a renamed export then fails its own tests, not the whole file.
const { batchCustomId, medianVerdict, pairKey, splitIntoBatches } = await import('../run-judge.ts');
const { main: reportMain } = await import('../report.ts');
const { readAuditLog } = await import('../report/inputs.ts');

// ---- Local helpers ---------------------------------------------------------------------------------------------------

type Scores = Record<string, number>;
const entries = (ws: Workspace) => readLog(ws.log);
const entryOf = (ws: Workspace, key: string) =>
  entries(ws).find((entry) => `${entry.model}/${entry.task_id}` === key)!;

const MC = DIMENSIONS[0]; // mathematical_correctness
const PS = DIMENSIONS[1]; // proof_scaffolding
/** Every dimension `score`, with `overrides`. */
const all = (score: number, overrides: Scores = {}): Scores => ({
  ...Object.fromEntries(DIMENSIONS.map((dimension) => [dimension, score])),
  ...overrides,
});
/** A CSV row's scores, by dimension. */
const rowScores = (record: string[]): Scores =>
  Object.fromEntries(DIMENSIONS.map((dimension, i) => [dimension, Number(record[i + 2])]));
const rowOf = (ws: Workspace, key: string) => {
  const row = csvRows(ws.output).find((candidate) => candidate.key === key);
  assert.ok(row, `a row for ${key}`);
  return { scores: rowScores(row.record), notes: row.record.at(-1) };
};
/** A multiset of score sets, comparable with deepEqual whatever their order. */
const unordered = (sets: (Scores | null)[]) => sets.map((set) => JSON.stringify(set)).sort();

const modelOf = (req: RecordedRequest) => req.body?.model as string;
const lastBlock = (params: any) => {
  const content = params?.messages?.[0]?.content;
  return Array.isArray(content) ? content.at(-1) : undefined;
};
/** A responder answering each request with `reply(n)`, n counting that judge's requests for that transcript from 1. */
function perTranscript(reply: (n: number, judge: string, tag: string) => Reply | undefined) {
  const counts = new Map<string, number>();
  return (req: RecordedRequest) => {
    const key = `${modelOf(req)} ${tagOf(req)}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
    return reply(counts.get(key)!, modelOf(req), tagOf(req)!);
  };
}
const BATCH = ['--batch', '--poll-interval', '0.01'];
const ONE = { models: 1, tasks: ['proof01'] } satisfies WorkspaceOptions;

// ---------------------------------------------------------------------------------------------
describe('medianVerdict: per dimension the median, the lower middle for even k; the notes of the closest sample', () => {
  const verdict = (a: number, b: number, notes = `${a}${b}`) => ({ scores: { a, b }, notes });
  const cases = [
    {
      label: 'odd k: the middle value of each dimension on its own',
      samples: [verdict(0, 2), verdict(2, 2), verdict(1, 0)],
      scores: { a: 1, b: 2 },
    },
    {
      label: 'even k: the lower middle ([0, 2] gives 0)',
      samples: [verdict(0, 2), verdict(2, 0)],
      scores: { a: 0, b: 0 },
    },
    {
      label: 'even k: the lower middle ([1, 2, 2, 0] gives 1)',
      samples: [verdict(1, 2), verdict(2, 2), verdict(2, 2), verdict(0, 2)],
      scores: { a: 1, b: 2 },
    },
  ];
  for (const { label, samples, scores } of cases) {
    test(label, () => {
      const copies = structuredClone(samples);
      assert.deepEqual(medianVerdict(samples).scores, scores);
      assert.deepEqual(samples, copies, 'the samples are left as they were');
    });
  }

  const notes = [
    {
      label: 'the sample equal to the median',
      samples: [verdict(0, 0, 'far'), verdict(2, 2, 'other'), verdict(1, 2, 'closest')],
      notes: 'closest (median of 3 samples)', // median (1, 2)
    },
    {
      label: 'the earliest of those with the fewest differences',
      samples: [verdict(2, 1, 'first'), verdict(1, 2, 'second'), verdict(0, 0, 'third')],
      notes: 'first (median of 3 samples)', // median (1, 1): one difference each for the first two
    },
    {
      label: 'the earliest among the closest, not the earliest overall',
      samples: [verdict(0, 0, 'far'), verdict(2, 1, 'second'), verdict(1, 2, 'third')],
      notes: 'second (median of 3 samples)', // median (1, 1)
    },
    {
      label: 'with even k',
      samples: [verdict(0, 2, 'low a'), verdict(2, 0, 'low b')],
      notes: 'low a (median of 2 samples)', // median (0, 0): one difference each
    },
  ];
  for (const { label, samples, notes: expected } of notes) {
    test(`notes: ${label}, followed by " (median of k samples)"`, () => {
      assert.equal(medianVerdict(samples).notes, expected);
    });
  }

  test('k = 1: the sample unchanged, no suffix', () => {
    const sample = verdict(2, 0, 'only');
    assert.deepEqual(medianVerdict([sample]), { scores: { a: 2, b: 0 }, notes: 'only' });
  });
});

// ---------------------------------------------------------------------------------------------
describe('--samples 3 end to end: the row is the median, the audit log keeps every sample', () => {
  test('three different answers: the CSV row is the per-dimension median, the notes those of the closest', async (t) => {
    // Median: MC 1 (0, 1, 2), PS 1 (2, 1, 0), the rest 2. Samples 1 and 3 differ from it in two dimensions each,
    // sample 2 in four: sample 1's notes, the earliest of the closest (sample 1 is always sent first).
    const sampled = [all(2, { [MC]: 0 }), all(1), all(2, { [PS]: 0 })];
    const { fake, ws, run } = await setup(t, {}, ONE);
    fake.enqueue(...sampled.map((scores, i) => ({ text: answerJson(scores, `NOTES-${i + 1}`) })));
    const result = await run(['--samples', '3']);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.requests.length, 3);
    const median = all(2, { [MC]: 1, [PS]: 1 });
    assert.deepEqual(rowOf(ws, 'm01/proof01'), {
      scores: median,
      notes: 'NOTES-1 (median of 3 samples)',
    });

    const [entry, ...others] = entries(ws);
    assert.equal(others.length, 0, 'one audit line for the transcript');
    assert.deepEqual([entry!.status, entry!.judge, entry!.scores], ['scored', 'judge-a', median]);
    assert.equal(entry!.sample_scores?.length, 3);
    assert.deepEqual(entry!.sample_scores![0], sampled[0], 'sample 1 first');
    assert.deepEqual(unordered(entry!.sample_scores!), unordered(sampled));
    assert.equal(entry!.answers.length, 3);
    for (const answer of entry!.answers)
      assert.deepEqual(answer.scores, JSON.parse(answer.text).scores);
    assert.deepEqual(unordered(entry!.answers.map((answer) => answer.scores)), unordered(sampled));
  });

  test('a run without --samples: no sample_scores, notes without a suffix', async (t) => {
    const { fake, ws, run } = await setup(t, {}, ONE);
    fake.enqueue({ text: answerJson(all(1), 'ONLY') });
    assert.equal((await run()).code, 0);
    assert.deepEqual(rowOf(ws, 'm01/proof01'), { scores: all(1), notes: 'ONLY' });
    assert.equal('sample_scores' in entries(ws)[0]!, false);
  });

  const refused = ['0', '101', '1.5', 'two'];
  for (const value of refused) {
    test(`--samples ${value}: a usage error (a positive integer up to 100), no call`, async (t) => {
      const { fake, ws, run } = await setup(t, {}, ONE);
      const result = await run(['--samples', value]);
      assert.equal(result.code, 2);
      assert.match(result.stderr, /--samples.*positive integer up to 100/);
      assert.equal(fake.requests.length, 0);
      assert.equal(rowCount(ws.output), 0);
    });
  }
});

// ---------------------------------------------------------------------------------------------
describe('the prompt cache: samples 2..k read sample 1 from it', () => {
  test('--samples 3: every request marks the prompt with cache_control; 2 and 3 wait for the answer to 1', async (t) => {
    const FIRST_ANSWER_MS = 150;
    const responder = perTranscript((n) => ({
      text: answerJson(all(2)),
      delayMs: n === 1 ? FIRST_ANSWER_MS : 0,
    }));
    const { fake, ws, run } = await setup(
      t,
      { responder },
      { models: 1, tasks: ['proof01', 'proof02'] },
    );
    const result = await run(['--samples', '3', '--concurrency', '2']);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.requests.length, 6);
    for (const req of fake.requests)
      assert.deepEqual(lastBlock(req.body)?.cache_control, { type: 'ephemeral' });
    for (const key of allKeys(ws)) {
      const [first, ...rest] = fake.requests
        .filter((req) => tagOf(req) === key)
        .sort((a, b) => a.at - b.at);
      assert.equal(rest.length, 2, key);
      for (const later of rest) {
        assert.ok(
          later.at >= first!.at + FIRST_ANSWER_MS,
          `${key}: sent ${later.at - first!.at} ms after sample 1`,
        );
        assert.deepEqual(
          later.body,
          first!.body,
          `${key}: the same request, so the same cached prefix`,
        );
      }
    }
  });

  test('the default k = 1: no request has cache_control', async (t) => {
    const { fake, run } = await setup(t, {}, {});
    assert.equal((await run()).code, 0);
    assert.equal(fake.requests.length, 6);
    for (const req of fake.requests) assert.ok(!JSON.stringify(req.body).includes('cache_control'));
  });

  test("the audit log records each answer's cache tokens: a write on sample 1, reads on samples 2 and 3", async (t) => {
    // With buckets the fake computes the prompt cache; a roomy one never refuses.
    const { fake, ws, run } = await setup(
      t,
      { buckets: { requests: { capacity: 1000, perSecond: 1000 } } },
      ONE,
    );
    const result = await run(['--samples', '3']);
    assert.equal(result.code, 0, result.stderr);
    const { answers, usage } = entries(ws)[0]!;
    const cache = answers.map((answer) => [
      answer.usage!.cache_creation_input_tokens ?? 0,
      answer.usage!.cache_read_input_tokens ?? 0,
    ]);
    const written = cache[0]![0]!;
    assert.ok(written > 1000, `the whole prompt written on sample 1 (${written} tokens)`);
    assert.deepEqual(cache, [
      [written, 0],
      [0, written],
      [0, written],
    ]);
    assert.equal(fake.charged.cacheReadTokens, 2 * written);
    assert.deepEqual(
      [usage.cache_creation_input_tokens, usage.cache_read_input_tokens],
      [written, 2 * written],
    );
    assert.match(result.stderr, new RegExp(`cache write ${written}, cache read ${2 * written}\\b`));
  });

  test('cache tokens as the answer reports them are recorded as they are', async (t) => {
    const usage = (written: number, read: number) => ({
      input_tokens: 7,
      output_tokens: 20,
      cache_creation_input_tokens: written,
      cache_read_input_tokens: read,
    });
    const { fake, ws, run } = await setup(t, {}, ONE);
    fake.enqueue(
      { text: answerJson(), usage: usage(1234, 0) },
      { text: answerJson(), usage: usage(0, 1234) },
      { text: answerJson(), usage: usage(0, 1234) },
    );
    assert.equal((await run(['--samples', '3'])).code, 0);
    const answers = entries(ws)[0]!.answers;
    assert.deepEqual(
      answers.map((answer) => answer.usage),
      [
        { input_tokens: 7, output_tokens: 20, cache_creation_input_tokens: 1234 },
        { input_tokens: 7, output_tokens: 20, cache_read_input_tokens: 1234 },
        { input_tokens: 7, output_tokens: 20, cache_read_input_tokens: 1234 },
      ],
    );
  });
});

// ---------------------------------------------------------------------------------------------
describe("a judge's attempt is all k samples: one unusable sample sends the transcript to the next judge", () => {
  const failures: { label: string; failing: number; reply: Reply; primaryAnswers: number }[] = [
    { label: 'sample 2 is not JSON', failing: 2, reply: { text: 'not JSON' }, primaryAnswers: 3 },
    {
      label: 'sample 3 is cut off by max_tokens',
      failing: 3,
      reply: { text: answerJson(), stopReason: 'max_tokens' },
      primaryAnswers: 3,
    },
    {
      label: 'sample 1 is an HTTP 500',
      failing: 1,
      reply: { kind: 'error', status: 500, type: 'api_error', message: 'Internal server error' },
      primaryAnswers: 0,
    },
  ];
  /** judge-a answers all 2 but for its `failing`-th request; judge-b answers all 1. */
  const responderFor = (failing: number, reply: Reply) =>
    perTranscript((n, judge) =>
      judge === 'judge-a'
        ? n === failing
          ? reply
          : { text: answerJson(all(2), 'from a') }
        : { text: answerJson(all(1), 'from b') },
    );

  for (const { label, failing, reply, primaryAnswers } of failures) {
    test(`${label}: the fallback judge does all 3 samples; the primary's answers stay in the log`, async (t) => {
      const { fake, ws, run } = await setup(t, { responder: responderFor(failing, reply) }, ONE);
      const result = await run(['--samples', '3']);
      assert.equal(result.code, 0, result.stderr);
      assert.equal(fake.requests.filter((req) => modelOf(req) === 'judge-b').length, 3);
      assert.deepEqual(rowOf(ws, 'm01/proof01'), {
        scores: all(1),
        notes: 'from b (median of 3 samples)',
      });
      const entry = entryOf(ws, 'm01/proof01');
      assert.equal(entry.judge, 'judge-b');
      assert.deepEqual(entry.sample_scores, [all(1), all(1), all(1)]);
      assert.deepEqual(
        entry.attempts.map((attempt) => attempt.judge),
        ['judge-a'],
      );
      const byJudge = (judge: string) => entry.answers.filter((answer) => answer.judge === judge);
      assert.equal(byJudge('judge-a').length, primaryAnswers);
      assert.equal(byJudge('judge-b').length, 3);
      assert.deepEqual(
        unordered(byJudge('judge-b').map((answer) => answer.scores)),
        unordered([all(1), all(1), all(1)]),
      );
    });
  }

  test("the row takes the family of the judge whose samples made it, not the primary's of its partial samples", async (t) => {
    const judge = judgeEntry('judge-a', { family: 'alpha' });
    const fallbacks = [judgeEntry('judge-b', { family: 'beta' })];
    const responder = responderFor(2, { text: 'not JSON' });
    const { ws, run } = await setup(t, { responder }, { ...ONE, judge, fallbacks });
    const result = await run(['--samples', '3']);
    assert.equal(result.code, 0, result.stderr);
    const entry = entryOf(ws, 'm01/proof01');
    assert.deepEqual([entry.judge, entry.judge_family, entry.fallback], ['judge-b', 'beta', true]);
    const row = readAuditLog(ws.log).rows.get(pairKey('proof01', 'm01'))!;
    assert.deepEqual([row.judge, row.family, row.fallback], ['judge-b', 'beta', true]);
  });

  test('with --no-fallback the transcript fails: exit 1, no row from fewer samples than asked', async (t) => {
    const { fake, ws, run } = await setup(
      t,
      { responder: responderFor(2, { text: 'not JSON' }) },
      ONE,
    );
    const result = await run(['--samples', '3', '--no-fallback']);
    assert.equal(result.code, 1, result.stderr);
    assert.match(
      result.stderr,
      /failed m01\/proof01: judge judge-a: unusable answer: the answer is not JSON/,
    );
    assert.equal(rowCount(ws.output), 0);
    assert.ok(fake.requests.every((req) => modelOf(req) === 'judge-a'));
    const entry = entryOf(ws, 'm01/proof01');
    assert.equal(entry.status, 'failed');
    assert.equal(entry.error?.class, 'EvalJudgeResponseError');
    assert.deepEqual(
      entry.answers.map((answer) => answer.scores === null).sort(),
      [false, false, true],
      "every sample's answer kept; the unusable one without scores",
    );
  });
});

// ---------------------------------------------------------------------------------------------
describe("--batch --samples 2: a transcript's samples go in the same batch", () => {
  // Sample 1 all 2 but MC 0, sample 2 all 1: the lower middle is MC 0, the rest 1; sample 2 differs in one dimension.
  const sampled = [all(2, { [MC]: 0 }), all(1)];
  const median = all(1, { [MC]: 0 });
  const batchResult =
    (errored?: { key: string; sample: string }) =>
    (customId: string, params: unknown): BatchResult => {
      const sample = customId.endsWith('_s1') ? 0 : 1;
      if (errored && tagOfParams(params) === errored.key && customId.endsWith(errored.sample))
        return { type: 'errored', errorType: 'api_error', message: 'Internal server error' };
      return { type: 'succeeded', text: answerJson(sampled[sample]!, `S${sample + 1}`) };
    };

  test('one batch, two requests per transcript (custom_ids _s1, _s2, the prompt cached), rows the medians', async (t) => {
    const { fake, ws, run } = await setup(t, { batch: { result: batchResult() } }, {});
    const result = await run([...BATCH, '--samples', '2']);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.batches.length, 1);
    assert.equal(fake.requests.length, 0, 'no synchronous call');
    const requests = fake.batches[0]!.requests;
    assert.equal(requests.length, 12);
    for (const pair of ws.pairs) {
      const key = `${pair.model}/${pair.task_id}`;
      const mine = requests.filter((request) => tagOfParams(request.params) === key);
      const id = batchCustomId(pair.task_id, pair.model);
      assert.deepEqual(
        mine.map((request) => request.custom_id).sort(),
        [`${id}_s1`, `${id}_s2`],
        key,
      );
      for (const request of mine)
        // --batch: the 1-hour cache by default, as a batch often outlives 5 minutes
        assert.deepEqual(lastBlock(request.params)?.cache_control, {
          type: 'ephemeral',
          ttl: '1h',
        });
      assert.deepEqual(rowOf(ws, key), { scores: median, notes: 'S2 (median of 2 samples)' });
      assert.deepEqual(entryOf(ws, key).sample_scores, sampled);
    }
    assert.deepEqual(wellFormedCsv(ws.output), allKeys(ws));
  });

  test("one sample's result errored: that transcript is judged again synchronously, all 2 samples, and gets its row", async (t) => {
    const errored = { key: 'm02/proof03', sample: '_s2' };
    const responder = () => ({ text: answerJson(all(0), 'sync') });
    const { fake, ws, run } = await setup(
      t,
      { responder, batch: { result: batchResult(errored) } },
      {},
    );
    const result = await run([...BATCH, '--samples', '2']);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(fake.batches.length, 1);
    assert.deepEqual(
      fake.requests.map((req) => [tagOf(req), modelOf(req)]),
      [
        [errored.key, 'judge-a'],
        [errored.key, 'judge-a'],
      ],
    );
    assert.deepEqual(rowOf(ws, errored.key), {
      scores: all(0),
      notes: 'sync (median of 2 samples)',
    });
    const entry = entryOf(ws, errored.key);
    assert.deepEqual(entry.sample_scores, [all(0), all(0)]);
    assert.equal(entry.answers.length, 3, "the batch's usable sample and the two synchronous ones");
    assert.match(entry.attempts[0]!.message, /errored/);
    for (const key of allKeys(ws).filter((other) => other !== errored.key))
      assert.deepEqual(rowOf(ws, key), { scores: median, notes: 'S2 (median of 2 samples)' });
    assert.deepEqual(wellFormedCsv(ws.output), allKeys(ws));
  });

  const dryRuns = [
    { samples: [], requests: 6 },
    { samples: ['--samples', '2'], requests: 12 },
  ];
  for (const { samples, requests } of dryRuns) {
    test(`the dry-run counts k requests a transcript (${samples.join(' ') || 'k = 1'}: ${requests})`, async (t) => {
      const { fake, run } = await setup(t, {}, {});
      const result = await run(['--dry-run', ...BATCH, ...samples]);
      assert.equal(result.code, 0, result.stderr);
      assert.match(
        result.stderr,
        new RegExp(`would send ${requests} request\\(s\\) in 1 batch\\(es\\)`),
      );
      assert.equal(fake.requests.length + fake.batches.length, 0);
    });
  }
  test('a batch holds at most maxRequests requests, counting each of the k samples', () => {
    // As batchRequests yields them: one item a transcript, with its k = 2 requests.
    const items = Array.from({ length: 5 }, (_, i) => ({
      id: i,
      bytes: 1,
      requests: [`t${i}_s1`, `t${i}_s2`],
    }));
    const batches = [...splitIntoBatches(items, { maxRequests: 4, maxBytes: 1_000 })];
    assert.deepEqual(
      batches.map((batch) => batch.flatMap((item) => item.requests).length),
      [4, 4, 2],
    );
  });

  test('the dry-run ceiling ("at most") covers all k answers at max_tokens', async (t) => {
    const price = { input: 5, output: 25 };
    const judge = judgeEntry('judge-a', { price_usd_per_mtok: price });
    const { run } = await setup(t, {}, { ...ONE, judge });
    const estimate = async (k: string) => {
      const { code, stderr } = await run(['--dry-run', '--samples', k]);
      assert.equal(code, 0, stderr);
      const [, input, ceiling] =
        /list price \$([\d.]+) for the input, at most \$([\d.]+)/.exec(stderr) ?? [];
      return { input: Number(input), ceiling: Number(ceiling) };
    };
    const one = await estimate('1');
    const three = await estimate('3');
    const outputs = (3 * judge.max_tokens * price.output) / 1e6;
    assert.ok(
      three.ceiling >= one.input + outputs,
      `at most $${three.ceiling}: below $${one.input + outputs}`,
    );
  });
});

// ---------------------------------------------------------------------------------------------
describe("report.ts self_consistency: how often a transcript's samples agree", () => {
  /** report.ts's JSON report on the workspace's judge CSV, human scores and audit log. */
  async function reportOn(ws: Workspace) {
    let out = '';
    const stdout = new Writable({
      write(chunk, _encoding, done) {
        out += chunk;
        done();
      },
    });
    const args = ['--format', 'json', '--scores', ws.output, '--human-scores', ws.humanScores];
    const code = await reportMain([...args, '--rubric', ws.rubric, '--log', ws.log], {
      stdout,
      stderr: process.stderr,
    });
    assert.equal(code, 0);
    const report = JSON.parse(out) as { dimensions: { name: string; self_consistency: unknown }[] };
    return Object.fromEntries(report.dimensions.map((d) => [d.name, d.self_consistency]));
  }

  test('after --samples 3 whose samples disagree on one dimension of one transcript: n, unanimous, mean_range', async (t) => {
    // m01/proof01's second answer scores MC 0 (the others 2): range 2 there; m01/proof02's samples all agree.
    const responder = perTranscript((n, _judge, tag) => ({
      text: answerJson(tag === 'm01/proof01' && n === 2 ? all(2, { [MC]: 0 }) : all(2)),
    }));
    const { ws, run } = await setup(t, { responder }, { models: 1, tasks: ['proof01', 'proof02'] });
    assert.equal((await run(['--samples', '3'])).code, 0);
    const consistency = await reportOn(ws);
    assert.deepEqual(consistency[MC], { n: 2, unanimous: 0.5, mean_range: 1 });
    for (const dimension of DIMENSIONS.slice(1))
      assert.deepEqual(consistency[dimension], { n: 2, unanimous: 1, mean_range: 0 }, dimension);
  });

  test('after a run without samples: null', async (t) => {
    const { ws, run } = await setup(t, {}, { models: 1, tasks: ['proof01', 'proof02'] });
    assert.equal((await run()).code, 0);
    const consistency = await reportOn(ws);
    for (const dimension of DIMENSIONS) assert.equal(consistency[dimension], null, dimension);
  });
});

// ---------------------------------------------------------------------------------------------
describe('the judge settings in a run: thinking kept, prices by the model that answered, the cache lifetime', () => {
  const ROOMY = { buckets: { requests: { capacity: 1000, perSecond: 1000 } } }; // the fake computes the cache
  const answersOf = (ws: Workspace) => entries(ws)[0]!.answers;
  const costOf = (ws: Workspace) => entries(ws)[0]!.cost_usd;
  const near = (actual: number | null, expected: number) =>
    assert.ok(actual !== null && Math.abs(actual - expected) < 1e-12, `${actual} ≠ ${expected}`);

  test('"thinking": "adaptive": each answer\'s thinking in the audit log beside its text, never in the CSV', async (t) => {
    const judge = judgeEntry('judge-a', { thinking: 'adaptive', effort: 'low' });
    const { fake, ws, run } = await setup(t, {}, { ...ONE, judge });
    const result = await run(['--samples', '2']);
    assert.equal(result.code, 0, result.stderr);
    for (const req of fake.requests) {
      assert.deepEqual(req.body.thinking, { type: 'adaptive' });
      assert.equal(req.body.output_config.effort, 'low');
    }
    const answers = answersOf(ws);
    assert.equal(answers.length, 2);
    for (const answer of answers) {
      assert.match(answer.thinking!, /^fake thinking \d+: weighing the rubric$/);
      assert.equal(answer.model, 'judge-a', 'the id that answered');
      assert.ok(answer.scores, 'the text was parsed, not the thinking');
    }
    assert.doesNotMatch(fs.readFileSync(ws.output, 'utf8'), /fake thinking/);
  });

  test('a JUDGE_MODEL override priced by its own id, from prices by model id', async (t) => {
    const prices = { 'judge-a': { input: 5, output: 25 }, 'judge-h': { input: 1, output: 5 } };
    const judge = judgeEntry('judge-a', { model_env: 'RJ_JUDGE', price_usd_per_mtok: prices });
    const { ws, run } = await setup(t, {}, { ...ONE, judge });
    const env = { env: { RJ_JUDGE: 'judge-h' } };
    const dry = await run(['--dry-run'], env);
    assert.match(dry.stderr, /at judge-h \(from RJ_JUDGE\)'s list price \$/);
    const result = await run([], env);
    assert.equal(result.code, 0, result.stderr);
    near(costOf(ws), (100 * 1 + 20 * 5) / 1e6); // the fake's 100 in, 20 out at judge-h's price
    assert.match(result.stderr, /; cost \$0\.0002;/);
  });

  test("a JUDGE_MODEL override with only the entry's model priced: cost unknown, never the entry's price", async (t) => {
    const judge = judgeEntry('judge-a', {
      model_env: 'RJ_JUDGE',
      price_usd_per_mtok: { input: 5, output: 25 },
    });
    const { ws, run } = await setup(t, {}, { ...ONE, judge });
    const env = { env: { RJ_JUDGE: 'judge-h' } };
    const dry = await run(['--dry-run'], env);
    assert.match(
      dry.stderr,
      /no cost: judge-h \(from RJ_JUDGE\) has no price in price_usd_per_mtok/,
    );
    const result = await run([], env);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(costOf(ws), null);
    assert.match(result.stderr, /; cost unknown \(no price for judge-h in models\.json\);/);
  });

  test('the answering model\'s id (the message\'s "model") is the one priced', async (t) => {
    const prices = { 'judge-a': { input: 5, output: 25 }, 'judge-a-2026': { input: 1, output: 5 } };
    const judge = judgeEntry('judge-a', { price_usd_per_mtok: prices });
    const responder = () => ({ text: answerJson(all(2)), model: 'judge-a-2026' });
    const { ws, run } = await setup(t, { responder }, { ...ONE, judge });
    assert.equal((await run()).code, 0);
    assert.equal(answersOf(ws)[0]!.model, 'judge-a-2026');
    near(costOf(ws), (100 * 1 + 20 * 5) / 1e6);
  });

  test('--cache-ttl 1h: the prompt marked ttl 1h, its writes priced at 2x input, reads at 0.1x', async (t) => {
    const judge = judgeEntry('judge-a', { price_usd_per_mtok: { input: 5, output: 25 } });
    const { fake, ws, run } = await setup(t, ROOMY, { ...ONE, judge });
    const result = await run(['--samples', '2', '--cache-ttl', '1h']);
    assert.equal(result.code, 0, result.stderr);
    for (const req of fake.requests) {
      assert.deepEqual(lastBlock(req.body)?.cache_control, { type: 'ephemeral', ttl: '1h' });
    }
    const [first, second] = answersOf(ws);
    const written = first!.usage!.cache_creation_input_tokens!;
    assert.deepEqual(first!.usage!.cache_creation, {
      ephemeral_5m_input_tokens: 0,
      ephemeral_1h_input_tokens: written,
    });
    const uncached = first!.usage!.input_tokens + second!.usage!.input_tokens;
    const expected = (uncached * 5 + written * 2 * 5 + written * 0.1 * 5 + 2 * 20 * 25) / 1e6;
    near(costOf(ws), expected);
  });

  test('without --cache-ttl, the 5-minute cache: its writes priced at 1.25x input', async (t) => {
    const judge = judgeEntry('judge-a', { price_usd_per_mtok: { input: 5, output: 25 } });
    const { ws, run } = await setup(t, ROOMY, { ...ONE, judge });
    assert.equal((await run(['--samples', '2'])).code, 0);
    const [first, second] = answersOf(ws);
    const written = first!.usage!.cache_creation_input_tokens!;
    const uncached = first!.usage!.input_tokens + second!.usage!.input_tokens;
    const expected = (uncached * 5 + written * 1.25 * 5 + written * 0.1 * 5 + 2 * 20 * 25) / 1e6;
    near(costOf(ws), expected);
  });

  test('cache writes not split by lifetime are priced at the lifetime asked for (1h: 2x)', async (t) => {
    const judge = judgeEntry('judge-a', { price_usd_per_mtok: { input: 5, output: 25 } });
    const usage = { input_tokens: 10, output_tokens: 0, cache_creation_input_tokens: 1000 };
    const { ws, run } = await setup(
      t,
      { responder: () => ({ text: answerJson(all(2)), usage }) },
      {
        ...ONE,
        judge,
      },
    );
    assert.equal((await run(['--samples', '2', '--cache-ttl', '1h'])).code, 0);
    near(costOf(ws), 2 * ((10 * 5 + 1000 * 2 * 5) / 1e6));
  });

  test('the dry-run estimate reflects the cache lifetime: 1h writes cost more than 5m ones', async (t) => {
    const judge = judgeEntry('judge-a', { price_usd_per_mtok: { input: 5, output: 25 } });
    const { run } = await setup(t, {}, { ...ONE, judge });
    const inputCost = async (ttl: string) => {
      const { code, stderr } = await run(['--dry-run', '--samples', '3', '--cache-ttl', ttl]);
      assert.equal(code, 0, stderr);
      assert.match(stderr, new RegExp(`2\\.\\.k read the prompt cached ${ttl}`));
      return Number(/list price \$([\d.]+) for the input/.exec(stderr)![1]);
    };
    const fiveMinutes = await inputCost('5m');
    const hour = await inputCost('1h');
    // written once, read twice: (2 + 0.2) / (1.25 + 0.2) of the 5-minute estimate
    assert.ok(Math.abs(hour / fiveMinutes - 2.2 / 1.45) < 0.01, `${hour} / ${fiveMinutes}`);
  });

  test('without --cache-ttl the estimate prices the direct figure at 5m and the --batch one at 1h, saying so', async (t) => {
    const judge = judgeEntry('judge-a', { price_usd_per_mtok: { input: 5, output: 25 } });
    const { run } = await setup(t, {}, { ...ONE, judge });
    const { code, stderr } = await run(['--dry-run', '--samples', '3']);
    assert.equal(code, 0, stderr);
    assert.match(stderr, /2\.\.k read the prompt cached 5m, 1h with --batch/);
    const direct = Number(/list price \$([\d.]+) for the input/.exec(stderr)![1]);
    const batch = Number(/with --batch half: \$([\d.]+)/.exec(stderr)![1]);
    // written once, read twice: (2 + 0.2) / (1.25 + 0.2), then half
    assert.ok(Math.abs(batch / direct - 2.2 / 1.45 / 2) < 0.01, `${batch} / ${direct}`);
  });

  test('--samples: the tokens line adds up all input (uncached + cache write + cache read), each named', async (t) => {
    const { ws, run } = await setup(t, ROOMY, ONE);
    const result = await run(['--samples', '3']);
    assert.equal(result.code, 0, result.stderr);
    const usage = entries(ws)[0]!.usage;
    const write = usage.cache_creation_input_tokens!;
    const read = usage.cache_read_input_tokens!;
    const total = usage.input_tokens + write + read;
    assert.ok(write > 0 && read > 0);
    assert.match(
      result.stderr,
      new RegExp(
        `tokens in ${total} \\(uncached ${usage.input_tokens}, cache write ${write}, cache read ${read}\\), out 60;`,
      ),
    );
  });

  const unreadable: [string, unknown][] = [
    [
      'a cache read of 1e20',
      { input_tokens: 100, output_tokens: 20, cache_read_input_tokens: 1e20 },
    ],
    ['no usage at all', null],
    ['a negative count', { input_tokens: -5, output_tokens: 20 }],
  ];
  for (const [label, usage] of unreadable) {
    test(`usage with ${label}: the cost is unknown, never $0, and the raw usage is kept`, async (t) => {
      const judge = judgeEntry('judge-a', { price_usd_per_mtok: { input: 5, output: 25 } });
      const responder = () => ({ text: answerJson(all(2)), usage });
      const { ws, run } = await setup(t, { responder }, { ...ONE, judge });
      const result = await run();
      assert.equal(result.code, 0, result.stderr);
      assert.equal(costOf(ws), null);
      const [answer] = answersOf(ws);
      assert.equal(answer!.usage, null);
      assert.deepEqual(answer!.usage_raw, usage);
      assert.match(result.stderr, /; cost unknown \(an answer reported unreadable usage/);
      assert.match(
        result.stderr,
        /tokens \(not counting 1 answer\(s\) whose usage was unreadable\)/,
      );
      assert.doesNotMatch(result.stderr, /cost \$/);
    });
  }
});

describe('--cache-ttl with --batch: 1h by default, as a batch often outlives 5 minutes', () => {
  test('--batch --samples 2 --cache-ttl 5m: the batch requests carry the 5-minute cache', async (t) => {
    const { fake, run } = await setup(t, {}, ONE);
    const result = await run([...BATCH, '--samples', '2', '--cache-ttl', '5m']);
    assert.equal(result.code, 0, result.stderr);
    for (const request of fake.batches[0]!.requests) {
      assert.deepEqual(lastBlock(request.params)?.cache_control, { type: 'ephemeral' });
    }
  });

  test('--cache-ttl 10m is a usage error naming the choices', async (t) => {
    const { fake, run } = await setup(t, {}, ONE);
    const result = await run(['--cache-ttl', '10m']);
    assert.equal(result.code, 2);
    assert.match(result.stderr, /--cache-ttl.*10m.*5m, 1h/);
    assert.equal(fake.requests.length, 0);
  });
});

describe('a price by prompt length (prompt_tokens_up_to): beyond it the cost is unknown', () => {
  const banded = (upTo: number) =>
    judgeEntry('judge-a', {
      price_usd_per_mtok: { input: 1, output: 5, prompt_tokens_up_to: upTo },
    });

  test('a prompt within the band is priced; one past it is unknown, saying why', async (t) => {
    const within = await setup(t, {}, { ...ONE, judge: banded(100) }); // the fake's 100 input tokens
    assert.match((await within.run()).stderr, /; cost \$0\.0002;/);
    const past = await setup(t, {}, { ...ONE, judge: banded(99) });
    const result = await past.run();
    assert.equal(result.code, 0, result.stderr);
    assert.match(
      result.stderr,
      /; cost unknown \(a prompt longer than the 99 tokens judge-a's price covers\);/,
    );
  });

  test('the dry-run gives no cost when a prompt is longer than the band, naming it', async (t) => {
    const { run } = await setup(t, {}, { ...ONE, judge: banded(10) });
    const { code, stderr } = await run(['--dry-run']);
    assert.equal(code, 0, stderr);
    assert.match(stderr, /no cost: a prompt of ~\d+ tokens is longer than the 10 prompt tokens/);
  });
});

describe('the shipped models.json with JUDGE_MODEL set: priced as the model that answers', () => {
  const shipped = JSON.parse(fs.readFileSync(MODELS_FILE, 'utf8'));

  test("JUDGE_MODEL=claude-haiku-4-5: the dry-run estimate is at Haiku's list price, named, not Opus's", async (t) => {
    const { run } = await setup(t, {}, { ...ONE, modelsJson: shipped });
    const inputCost = async (env: Record<string, string>) => {
      const { code, stderr } = await run(['--dry-run'], { env });
      assert.equal(code, 0, stderr);
      const [, model, dollars] = /at (.+?)'s list price \$([\d.]+) for the input/.exec(stderr)!;
      return { model, dollars: Number(dollars) };
    };
    const opus = await inputCost({});
    const haiku = await inputCost({ JUDGE_MODEL: 'claude-haiku-4-5' });
    assert.equal(opus.model, 'claude-opus-4-7');
    assert.equal(haiku.model, 'claude-haiku-4-5 (from JUDGE_MODEL)');
    // $1 against $5 per million input tokens; both printed to 4 decimals
    const expected = opus.dollars / 5;
    assert.ok(Math.abs(haiku.dollars - expected) <= 0.0001, `${haiku.dollars}, ${opus.dollars}`);
  });

  test('with --batch, the thinking of batch answers is kept in the audit log too', async (t) => {
    const judge = judgeEntry('judge-a', { thinking: 'adaptive' });
    const { fake, ws, run } = await setup(t, {}, { ...ONE, judge });
    const result = await run(BATCH);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(fake.batches[0]!.requests[0]!.params.thinking, { type: 'adaptive' });
    const answer = entries(ws)[0]!.answers[0]!;
    assert.match(answer.thinking!, /^fake thinking \d+: weighing the rubric$/);
  });
});
