// fakes/serve.ts: `npm run fake-api`, a rehearsal without a key. Starts the loopback fakes of the
// Anthropic API (Messages, Message Batches) and of the OpenAI API (Chat Completions, Batch API)
// that the tests use, answering every judge request with valid scores on the rubric's own scale:
// a mix seeded by the prompt and --seed, so the same transcript gets the same scores and the report
// has something to measure. It prints where they listen and the variables to set; Ctrl-C stops it.
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { DEFAULTS, allowedScores, isEntryModule, loadRubric, sha256 } from '../run-judge.ts';
import type { Rubric } from '../run-judge.ts';
import { mulberry32 } from '../report/analysis.ts';
import { FakeAnthropic } from './anthropic.ts';
import { FakeOpenAi } from './openai.ts';

/** The two fakes, what to tell a user about them, and how to stop both. */
export type FakeApi = {
  anthropic: FakeAnthropic;
  openai: FakeOpenAi;
  banner: string;
  close(): Promise<void>;
};

/** Both fakes on loopback ports, every answer scores on `rubric`'s scale. */
export async function startFakeApi(options: { rubric: string; seed: number }): Promise<FakeApi> {
  const rubric = loadRubric(options.rubric);
  const answerFor = (prompt: unknown) => fakeAnswer(rubric, options.seed, prompt);
  const anthropic = await FakeAnthropic.start({
    responder: (request) => ({ text: answerFor(request.body?.messages) }),
    batch: {
      result: (_id, params) => ({ type: 'succeeded', text: answerFor(params?.messages) }),
    },
  });
  const openai = await FakeOpenAi.start({
    responder: (request) => ({ text: answerFor(request.body?.messages) }),
    batch: {
      result: (_id, body) => ({ kind: 'completion', text: answerFor(body?.messages) }),
    },
  });
  const banner = [
    `fake-api: Anthropic's API at ${anthropic.url}, OpenAI's at ${openai.url} (loopback only; ` +
      `any key is accepted, none is checked); scores on ${options.rubric}'s scale, ` +
      `seed ${options.seed}`,
    'In another terminal, set these, then run the protocol as usual:',
    `  export ANTHROPIC_BASE_URL=${anthropic.url} ANTHROPIC_API_KEY=fake-key`,
    `  export OPENAI_BASE_URL=${openai.url} OPENAI_API_KEY=fake-key`,
    'Ctrl-C stops it.',
  ].join('\n');
  const close = async () => {
    await anthropic.close();
    await openai.close();
  };
  return { anthropic, openai, banner: `${banner}\n`, close };
}

/** A valid answer: each dimension one of its allowed scores, drawn from the prompt's hash. */
export function fakeAnswer(rubric: Rubric, seed: number, prompt: unknown): string {
  const hash = sha256(JSON.stringify(prompt ?? null));
  const random = mulberry32((Number.parseInt(hash.slice(0, 8), 16) ^ seed) >>> 0);
  const scores: Record<string, number> = {};
  for (const dimension of rubric.dimensions) {
    const allowed = allowedScores(dimension);
    scores[dimension.name] = allowed[Math.floor(random() * allowed.length)]!;
  }
  return JSON.stringify({ scores, notes: 'a made-up answer from fake-api, for a rehearsal' });
}

/** `npm run fake-api -- [--dir DIR] [--rubric FILE] [--seed S]`: runs until Ctrl-C. */
async function run(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      dir: { type: 'string' },
      rubric: { type: 'string' },
      seed: { type: 'string', default: '0' },
    },
  });
  const rubric = values.rubric ?? path.join(values.dir ?? '.', DEFAULTS.rubric);
  const seed = Number(values.seed);
  if (!/^\d+$/.test(values.seed!) || seed > 0xffffffff) {
    process.stderr.write(`fake-api: --seed ${values.seed}: give a whole number\n`);
    return 2;
  }
  const api = await startFakeApi({ rubric, seed });
  process.stdout.write(api.banner);
  await new Promise<void>((resolve) => process.once('SIGINT', resolve));
  await api.close();
  return 0;
}

if (isEntryModule(import.meta.url)) {
  run(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (error: Error) => {
      process.stderr.write(`fake-api: ${error.message}\n`);
      process.exitCode = 2;
    },
  );
}
