// A study with two real judge runs (run-judge against the loopback fake), for the viewer's tests:
// STUDY/evals/{transcripts,tasks,reference_keys,scores,human}, rubric.json and models.json.
// Run "judge_scores" (the default CSV): claude-opus-4-7 thinking, claude-sonnet-4-6 its fallback;
// stub/proof01 gets no JSON from opus, so sonnet scores it as a fallback; tutor-sonnet/proof03
// is refused by every judge (a failed row). Run "second": claude-opus-5-5 with 3 samples. The fake
// scores each judge model its own way, so the runs differ on some transcripts. stub/proof02 holds a
// <script> that would mark the page if it ran; tutor-sonnet/proof01 is edited after both runs, so
// its rows are stale. alice scored every transcript, bob two.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { stringify } from 'csv-stringify/sync';
import { FakeAnthropic } from '../fakes/anthropic.ts';
import { fakeAnswer } from '../fakes/serve.ts';
import { loadRubric } from '../run-judge.ts';
import { REPO, runMain, writeJson } from './helpers.ts';

/** A payload that marks the page (`window.__ran`) if it ever runs. */
export const PAYLOAD =
  "<script>window.__ran = 'transcript'</script><img src=x onerror=\"window.__ran = 'img'\">";

export const FALLBACK_PAIR = 'stub/proof01';
export const FAILED_PAIR = 'tutor-sonnet/proof03';
export const STALE_PAIR = 'tutor-sonnet/proof01';
export const PAYLOAD_PAIR = 'stub/proof02';

const judge = (model: string, extra: Record<string, unknown> = {}) => ({
  provider: 'anthropic',
  model,
  api_key_env: 'ANTHROPIC_API_KEY',
  temperature: null,
  max_tokens: 512,
  // Generous: a loaded machine must not turn a slow answer into a fallback.
  timeout_s: 600,
  retry: { max_retries: 1, budget_s: 600, base_delay_s: 0.01 },
  price_usd_per_mtok: { input: 5, output: 25 },
  ...extra,
});

/** Writes the study under `dir` and runs both judges on it; returns the study folder. */
export async function writeStudy(dir: string): Promise<string> {
  // 1. The shipped eval set, rubric and a models.json of two judges.
  const study = path.join(dir, 'study');
  for (const folder of ['tasks', 'reference_keys', 'transcripts']) {
    fs.cpSync(path.join(REPO, 'evals', folder), path.join(study, 'evals', folder), {
      recursive: true,
    });
  }
  fs.copyFileSync(path.join(REPO, 'rubric.json'), path.join(study, 'rubric.json'));
  writeJson(path.join(study, 'models.json'), {
    models: [{ name: 'stub', provider: 'local' }],
    judge: judge('claude-opus-4-7', { model_env: 'JUDGE_MODEL', thinking: 'adaptive' }),
    fallback_judges: [judge('claude-sonnet-4-6')],
  });
  const payloadFile = path.join(study, 'evals', 'transcripts', `${PAYLOAD_PAIR}.json`);
  const payload = JSON.parse(fs.readFileSync(payloadFile, 'utf8'));
  payload.messages.push({ role: 'user', content: `Is this right? ${PAYLOAD}` });
  writeJson(payloadFile, payload);

  // 2. The two runs, against a fake that scores each judge its own way.
  const rubric = loadRubric(path.join(study, 'rubric.json'));
  const fake = await FakeAnthropic.start({
    responder: (request) => {
      const text = JSON.stringify(request.body?.messages ?? '');
      const model = String(request.body?.model ?? '');
      if (text.includes('due tonight')) {
        return { kind: 'error', status: 400, type: 'invalid_request_error', message: 'refused' };
      }
      const stub = text.includes('Help the student understand the proof');
      if (stub && text.includes('Task ID: proof01') && /opus-4/.test(model)) {
        return { text: 'I would rather not give scores.' };
      }
      return { text: fakeAnswer(rubric, 7, model, request.body?.messages) };
    },
  });
  try {
    const first = await runMain(['--dir', study, '--before-human-scoring'], { baseUrl: fake.url });
    const second = await runMain(
      ['--dir', study, '--before-human-scoring', '--samples', '3'].concat([
        '--output',
        path.join(study, 'evals', 'scores', 'second.csv'),
      ]),
      { baseUrl: fake.url, env: { JUDGE_MODEL: 'claude-opus-5-5' } },
    );
    if (first.code !== 1 || second.code !== 1) {
      throw new Error(`the study's runs: ${first.stderr}\n${second.stderr}`);
    }
  } finally {
    await fake.close();
  }

  // 3. The people's sheets, then an edit that makes one transcript's rows stale.
  const dimensions = rubric.dimensions.map((dimension) => dimension.name);
  const pairs = ['stub', 'tutor-sonnet'].flatMap((model) =>
    ['proof01', 'proof02', 'proof03'].map((task) => [task, model]),
  );
  const alice = pairs.map(([task, model], i) => [
    task,
    model,
    ...dimensions.map((_, d) => String((i + d) % 3)),
    `alice on ${model}/${task}`,
    'alice',
  ]);
  const bob = pairs
    .slice(0, 2)
    .map(([task, model]) => [
      task,
      model,
      ...dimensions.map(() => '1'),
      `bob's notes ${PAYLOAD}`,
      'bob',
    ]);
  const header = ['task_id', 'model', ...dimensions, 'notes', 'scorer'];
  const human = path.join(study, 'evals', 'human');
  fs.mkdirSync(human, { recursive: true });
  fs.writeFileSync(path.join(human, 'alice.csv'), stringify([header, ...alice]));
  fs.writeFileSync(path.join(human, 'bob.csv'), stringify([header, ...bob]));

  const staleFile = path.join(study, 'evals', 'transcripts', `${STALE_PAIR}.json`);
  const stale = JSON.parse(fs.readFileSync(staleFile, 'utf8'));
  stale.messages.push({ role: 'user', content: 'One more question, added after the runs.' });
  writeJson(staleFile, stale);
  return study;
}
