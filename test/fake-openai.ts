// Loopback fake of OpenAI's Chat Completions API (and of the servers that speak it: Ollama, vLLM); tests drive it
// through the real openai SDK. Its error bodies, rate-limit headers and usage are OpenAI's shapes.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type OpenAiReply =
  | {
      kind?: 'completion';
      /** The message's content; default a valid answer for the rubric. */
      text?: string | null;
      refusal?: string;
      /** A server's own reasoning text (vLLM's `reasoning_content`). */
      reasoning?: string;
      finishReason?: string;
      /** The answer's usage exactly as sent; default counts the prompt, with `cachedTokens` cached. */
      usage?: unknown;
      model?: string;
      headers?: Record<string, string>;
    }
  | {
      kind: 'error';
      status: number;
      type: string;
      message: string;
      code?: string | null;
      headers?: Record<string, string>;
    }
  | { kind: 'raw'; status: number; body: string; headers?: Record<string, string> }
  | { kind: 'hang' }; // accept the request, never answer (until the client gives up or close())

export interface RecordedOpenAiRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: any;
}

export interface FakeOpenAiOptions {
  /** The key the server wants (`Authorization: Bearer <key>`), else a 401 in OpenAI's words; default: none wanted. */
  key?: string;
  /** The models it serves; another gets a 404 `model_not_found`. Default: any. */
  models?: string[];
  /** Prompt tokens reported as cached (`prompt_tokens_details.cached_tokens`) on each default usage. */
  cachedTokens?: number;
  /** Rate-limit headers on every answer and error, as OpenAI sends them. */
  rateLimit?: Record<'requests' | 'tokens', { limit: number; remaining: number; reset: string }>;
  responder?: (req: RecordedOpenAiRequest, index: number) => OpenAiReply | undefined;
}

// the shipped rubric's dimensions, for the default answer
const DIMENSIONS = (
  JSON.parse(readFileSync(new URL('../rubric.json', import.meta.url), 'utf8')) as {
    dimensions: { name: string }[];
  }
).dimensions.map((dimension) => dimension.name);

export class FakeOpenAi {
  readonly requests: RecordedOpenAiRequest[] = [];
  /** The base URL a judge entry names: the server's address with /v1. */
  readonly url: string;
  private readonly origin: string;
  private readonly queue: OpenAiReply[] = [];
  private seq = 0;
  private closed = false;
  private held = 0;
  private readonly open = new Set<object>();
  private settledWaiters: (() => void)[] = [];
  private readonly onRequestCreate = (message: unknown) => {
    const request = (message as { request: { origin?: unknown } }).request;
    if (request.origin === this.origin) this.open.add(request);
  };
  private readonly onRequestDone = (message: unknown) => {
    if (this.open.delete((message as { request: object }).request)) this.checkSettled();
  };

  private constructor(
    private readonly server: Server,
    origin: string,
    private readonly opts: FakeOpenAiOptions,
  ) {
    this.origin = origin;
    this.url = `${origin}/v1`;
  }

  static async start(opts: FakeOpenAiOptions = {}): Promise<FakeOpenAi> {
    let fake: FakeOpenAi | undefined;
    const server = createServer((req, res) => void fake?.handle(req, res));
    await new Promise<void>((resolve, reject) =>
      server.once('error', reject).listen(0, '127.0.0.1', resolve),
    );
    const { port } = server.address() as AddressInfo;
    fake = new FakeOpenAi(server, `http://127.0.0.1:${port}`, opts);
    subscribe('undici:request:create', fake.onRequestCreate);
    subscribe('undici:request:trailers', fake.onRequestDone);
    subscribe('undici:request:error', fake.onRequestDone);
    return fake;
  }

  enqueue(...replies: OpenAiReply[]): void {
    this.queue.push(...replies);
  }

  /** A valid answer: every dimension 2, unless overridden. */
  validAnswer(scores: Record<string, number> = {}): string {
    const all = Object.fromEntries(DIMENSIONS.map((name) => [name, 2]));
    return JSON.stringify({ scores: Object.assign(all, scores), notes: 'ok' });
  }

  /** Resolves once no request of this process is in flight to the fake, except a hang (for a jump clock). */
  settled(): Promise<void> {
    if (this.isSettled()) return Promise.resolve();
    return new Promise((resolve) => this.settledWaiters.push(resolve));
  }

  async close(): Promise<void> {
    this.closed = true;
    unsubscribe('undici:request:create', this.onRequestCreate);
    unsubscribe('undici:request:trailers', this.onRequestDone);
    unsubscribe('undici:request:error', this.onRequestDone);
    this.checkSettled();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    await closed;
  }

  private isSettled(): boolean {
    return this.closed || this.open.size <= this.held;
  }

  private checkSettled(): void {
    if (!this.isSettled()) return;
    const waiters = this.settledWaiters;
    this.settledWaiters = [];
    for (const resolve of waiters) resolve();
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const n = ++this.seq;
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    let body: any;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = undefined;
    }
    const recorded = {
      method: req.method ?? 'GET',
      path: req.url ?? '/',
      headers: req.headers,
      body,
    };
    this.requests.push(recorded);

    const reply =
      this.opts.responder?.(recorded, n - 1) ?? this.queue.shift() ?? this.gatekeeper(recorded);
    if (reply?.kind === 'hang') {
      this.held++;
      this.checkSettled();
      return;
    }
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'x-request-id': `req_oai_${n}`,
    };
    for (const [name, limit] of Object.entries(this.opts.rateLimit ?? {})) {
      headers[`x-ratelimit-limit-${name}`] = String(limit.limit);
      headers[`x-ratelimit-remaining-${name}`] = String(limit.remaining);
      headers[`x-ratelimit-reset-${name}`] = limit.reset;
    }
    Object.assign(headers, reply?.headers);

    if (reply?.kind === 'raw') {
      res.writeHead(reply.status, headers).end(reply.body);
      return;
    }
    if (reply?.kind === 'error') {
      const error = {
        message: reply.message,
        type: reply.type,
        param: null,
        code: reply.code ?? null,
      };
      res.writeHead(reply.status, headers).end(JSON.stringify({ error }));
      return;
    }
    res.writeHead(200, headers).end(JSON.stringify(this.completion(recorded, reply ?? {})));
  }

  /** The server's own refusals: a missing or wrong key (401), a model it does not serve (404). */
  private gatekeeper(req: RecordedOpenAiRequest): OpenAiReply | undefined {
    const key = this.opts.key;
    if (key !== undefined && req.headers.authorization !== `Bearer ${key}`) {
      return {
        kind: 'error',
        status: 401,
        type: 'invalid_request_error',
        code: 'invalid_api_key',
        message:
          'Incorrect API key provided: sk-w***ng. You can find your API key at the dashboard.',
      };
    }
    const model = req.body?.model;
    if (this.opts.models && !this.opts.models.includes(model)) {
      return {
        kind: 'error',
        status: 404,
        type: 'invalid_request_error',
        code: 'model_not_found',
        message: `The model \`${model}\` does not exist or you do not have access to it.`,
      };
    }
    return undefined;
  }

  private completion(
    req: RecordedOpenAiRequest,
    reply: Extract<OpenAiReply, { kind?: 'completion' }>,
  ) {
    const promptTokens = Math.ceil(JSON.stringify(req.body?.messages ?? []).length / 4);
    const cached = Math.min(this.opts.cachedTokens ?? 0, promptTokens);
    const usage = reply.usage ?? {
      prompt_tokens: promptTokens,
      completion_tokens: 20,
      total_tokens: promptTokens + 20,
      prompt_tokens_details: { cached_tokens: cached, audio_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0 },
    };
    const message: Record<string, unknown> = {
      role: 'assistant',
      content:
        reply.refusal !== undefined
          ? null
          : reply.text === undefined
            ? this.validAnswer()
            : reply.text,
      refusal: reply.refusal ?? null,
    };
    if (reply.reasoning !== undefined) message.reasoning_content = reply.reasoning;
    return {
      id: `chatcmpl-${this.seq}`,
      object: 'chat.completion',
      created: 1_800_000_000,
      model: reply.model ?? req.body?.model,
      choices: [{ index: 0, message, finish_reason: reply.finishReason ?? 'stop', logprobs: null }],
      usage,
    };
  }
}
