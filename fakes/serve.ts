// fakes/serve.ts: `npm run fake-api`, a rehearsal without a key. Starts the loopback fakes of the
// Anthropic API (Messages, Message Batches) and of the OpenAI API (Chat Completions, Batch API)
// that the tests use, answering every judge request with valid scores on the rubric's own scale:
// seeded by the transcript, the judge model and --seed, so a transcript gets the same scores from
// the same judge every time, and two judges differ as real ones do. It prints where they listen and the variables to set; Ctrl-C stops it.
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

/** Where and how the fakes answer: the rubric's file, the seed, and the port (0: any free one). */
export type FakeApiOptions = { rubric: string; seed: number; port?: number };

/**
 * Both fakes on loopback ports, every answer scores on `rubric`'s scale. With a port, Anthropic's
 * fake listens on it and OpenAI's on the next one, so the exported variables stay right across
 * restarts.
 */
export async function startFakeApi(options: FakeApiOptions): Promise<FakeApi> {
  const rubric = loadRubric(options.rubric);
  const answerFor = (body: { model?: unknown; messages?: unknown } | undefined) =>
    fakeAnswer(rubric, options.seed, String(body?.model ?? ''), body?.messages);
  const anthropicPort = options.port ?? 0;
  const openaiPort = options.port === undefined ? 0 : options.port + 1;

  const anthropic = await FakeAnthropic.start({
    port: anthropicPort,
    responder: (request) => ({ text: answerFor(request.body) }),
    batch: {
      result: (_id, params) => ({ type: 'succeeded', text: answerFor(params) }),
    },
  });
  const openai = await FakeOpenAi.start({
    port: openaiPort,
    responder: (request) => ({ text: answerFor(request.body) }),
    batch: {
      result: (_id, body) => ({ kind: 'completion', text: answerFor(body) }),
    },
  }).catch(async (error: unknown) => {
    await anthropic.close();
    throw error;
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

/**
 * A valid answer: each dimension one of its allowed scores. The transcript (the text of the
 * prompt's messages, whatever the API's shape) and the seed fix a level each judge starts from;
 * the model id then moves it: about one answer in four one level off, and a leniency of its own
 * (0-30% of answers one level up). So judges agree with each other in part and differ in how
 * lenient they are, and a comparison of judges, a jury or self-preference has something to show.
 */
export function fakeAnswer(rubric: Rubric, seed: number, model: string, messages: unknown): string {
  const transcript = textOf(messages);
  const leniency = randomOf(seed, 'leniency', model)() * 0.3;
  const scores: Record<string, number> = {};

  for (const dimension of rubric.dimensions) {
    const allowed = allowedScores(dimension);
    const shared = randomOf(seed, 'level', dimension.name, transcript);
    const own = randomOf(seed, 'judge', model, dimension.name, transcript);
    let level = Math.floor(shared() * allowed.length);

    if (own() < 0.25) {
      level += own() < 0.5 ? -1 : 1;
    }
    if (own() < leniency) {
      level += 1;
    }

    const clipped = Math.min(allowed.length - 1, Math.max(0, level));
    scores[dimension.name] = allowed[clipped]!;
  }

  const notes = `a made-up answer from fake-api for ${model || 'a judge'}, for a rehearsal`;
  return JSON.stringify({ scores, notes });
}

/** A seeded generator drawn from the hash of `parts`. */
function randomOf(seed: number, ...parts: string[]): () => number {
  const hash = sha256(JSON.stringify(parts));
  return mulberry32((Number.parseInt(hash.slice(0, 8), 16) ^ seed) >>> 0);
}

/** Every string in the messages but their roles and cache marks, in order. */
function textOf(value: unknown): string {
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) return value.map(textOf).join('\n');
  if (value === null || typeof value !== 'object') return '';

  const parts: string[] = [];
  for (const [key, inner] of Object.entries(value)) {
    if (key === 'role' || key === 'cache_control' || key === 'type') continue;
    parts.push(textOf(inner));
  }
  return parts.join('\n');
}

/** `npm run fake-api -- [--dir DIR] [--rubric FILE] [--seed S] [--port P]`: runs until Ctrl-C. */
async function run(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      dir: { type: 'string' },
      rubric: { type: 'string' },
      seed: { type: 'string', default: '0' },
      port: { type: 'string' },
    },
  });
  const rubric = values.rubric ?? path.join(values.dir ?? '.', DEFAULTS.rubric);
  const seed = Number(values.seed);
  if (!/^\d+$/.test(values.seed!) || seed > 0xffffffff) {
    process.stderr.write(`fake-api: --seed ${values.seed}: give a whole number\n`);
    return 2;
  }
  const port = values.port === undefined ? undefined : Number(values.port);
  if (port !== undefined && !(/^\d+$/.test(values.port!) && port >= 1 && port <= 65534)) {
    process.stderr.write(
      `fake-api: --port ${values.port}: give a port from 1 to 65534 (OpenAI's fake takes the next one)\n`,
    );
    return 2;
  }

  const api = await startFakeApi({ rubric, seed, port });
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
