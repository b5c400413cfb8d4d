// Loopback fake of OpenAI's Chat Completions API (and of the servers that speak it: Ollama, vLLM), and of its Batch
// API (files uploaded as multipart, batches created, polled, their output and error files read); tests drive it
// through the real openai SDK. Its error bodies, rate-limit headers, usage and batch objects are OpenAI's shapes.
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
      /** The message's content exactly as sent, in place of `text` (a list of parts, say). */
      content?: unknown;
      /** The message's tool calls, as a server sends them when the model calls a tool. */
      toolCalls?: unknown[];
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

/** What the fake's Batch API gives for one request of a batch: by default a completion with a valid answer. */
export type OpenAiBatchResult =
  | { kind: 'completion'; text?: string; usage?: unknown }
  | { kind: 'error'; code: string; message: string } // a line of the error file (expired, failed)
  | { kind: 'http'; status: number; type: string; message: string } // a response that is an HTTP error
  | { kind: 'missing' }; // in neither file

export interface FakeOpenAiBatch {
  id: string;
  input_file_id: string;
  endpoint: string;
  completion_window: string;
  /** The batch completes at its `endAfterPolls`-th retrieve; a test may change it (Infinity: never). */
  endAfterPolls: number;
  polls: number;
  status: 'validating' | 'in_progress' | 'completed' | 'failed' | 'expired';
  /** The uploaded lines, parsed. */
  lines: { custom_id: string; method: string; url: string; body: any }[];
  output_file_id?: string;
  error_file_id?: string;
  /** Once completed: the requests in the output file, and in the error file. */
  completed: number;
  failed: number;
}

export interface RecordedOpenAiRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: any;
}

export interface FakeOpenAiOptions {
  /** The loopback port to listen on; default any free one. */
  port?: number;
  /** The key the server wants (`Authorization: Bearer <key>`), else a 401 in OpenAI's words; default: none wanted. */
  key?: string;
  /** The models it serves; another gets a 404 `model_not_found`. Default: any. */
  models?: string[];
  /** Prompt tokens reported as cached (`prompt_tokens_details.cached_tokens`) on each default usage. */
  cachedTokens?: number;
  /** Rate-limit headers on every answer and error, as OpenAI sends them. */
  rateLimit?: Record<'requests' | 'tokens', { limit: number; remaining: number; reset: string }>;
  responder?: (req: RecordedOpenAiRequest, index: number) => OpenAiReply | undefined;
  /**
   * The Batch API: false answers 404 on /v1/files and /v1/batches, as a local Ollama does;
   * 'error-200' answers them HTTP 200 with an `error`, as some local servers answer any unknown path.
   */
  batch?:
    | false
    | 'error-200'
    | {
        /** Retrieves a batch answers in_progress before the one that completes it; default 1 (the first completes). */
        pollsUntilEnded?: number;
        /** Each request's result; undefined: a completion with a valid answer. */
        result?: (customId: string, body: any) => OpenAiBatchResult | undefined;
        /** The error file's content answers 404, as the API does once a file has expired. */
        errorFileExpired?: boolean;
      };
}

// the shipped rubric's dimensions, for the default answer
const DIMENSIONS = (
  JSON.parse(readFileSync(new URL('../rubric.json', import.meta.url), 'utf8')) as {
    dimensions: { name: string }[];
  }
).dimensions.map((dimension) => dimension.name);

export class FakeOpenAi {
  readonly requests: RecordedOpenAiRequest[] = [];
  /** Every batch created, in order (POST /v1/batches). */
  readonly batches: FakeOpenAiBatch[] = [];
  /** Every file uploaded or made, by id: its purpose and content. */
  readonly files = new Map<string, { purpose: string; content: string }>();
  /** The base URL a judge entry names: the server's address with /v1. */
  readonly url: string;
  private readonly origin: string;
  private readonly queue: OpenAiReply[] = [];
  private seq = 0;
  private readonly expired = new Set<string>();
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
      server.once('error', reject).listen(opts.port ?? 0, '127.0.0.1', resolve),
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
    const route = recorded.path.split('?')[0]!;
    if (/^\/v1\/(files|batches)(\/|$)/.test(route)) {
      this.batchApi(recorded, route, text, res, n);
      return;
    }

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

  /** The Batch API: upload a file (multipart), create a batch of it, retrieve it, read a file's content. */
  private batchApi(
    req: RecordedOpenAiRequest,
    route: string,
    text: string,
    res: ServerResponse,
    n: number,
  ): void {
    const headers = { 'content-type': 'application/json', 'x-request-id': `req_oai_${n}` };
    const json = (status: number, value: unknown) =>
      void res.writeHead(status, headers).end(JSON.stringify(value));
    const notFound = (message: string) =>
      json(404, { error: { message, type: 'invalid_request_error', param: null, code: null } });
    if (this.opts.batch === false) {
      // Ollama's answer to a path it does not serve
      res.writeHead(404, { 'content-type': 'text/plain' }).end('404 page not found');
      return;
    }
    if (this.opts.batch === 'error-200') {
      json(200, { error: `Unexpected endpoint or method. (${req.method} ${route})` });
      return;
    }
    const refused = this.gatekeeper({ ...req, body: { model: this.opts.models?.[0] } });
    if (refused?.kind === 'error') {
      const error = {
        message: refused.message,
        type: refused.type,
        param: null,
        code: refused.code,
      };
      json(refused.status, { error });
      return;
    }

    if (req.method === 'POST' && route === '/v1/files') {
      const form = parseMultipart(text, String(req.headers['content-type']));
      const id = `file-fake-${this.files.size + 1}`;
      this.files.set(id, { purpose: form.purpose ?? '', content: form.file ?? '' });
      json(200, {
        id,
        object: 'file',
        bytes: Buffer.byteLength(form.file ?? ''),
        created_at: 1_800_000_000,
        filename: form.filename ?? 'file',
        purpose: form.purpose,
        status: 'processed',
      });
      return;
    }
    if (req.method === 'GET' && route === '/v1/batches') {
      json(200, { object: 'list', data: [], first_id: null, last_id: null, has_more: false });
      return;
    }
    if (req.method === 'POST' && route === '/v1/batches') {
      const input = this.files.get(req.body?.input_file_id);
      if (!input) return notFound(`No such File object: ${req.body?.input_file_id}`);
      const batch: FakeOpenAiBatch = {
        id: `batch_fake_${this.batches.length + 1}`,
        input_file_id: req.body.input_file_id,
        endpoint: req.body.endpoint,
        completion_window: req.body.completion_window,
        endAfterPolls: this.batchOptions().pollsUntilEnded ?? 1,
        polls: 0,
        status: 'validating',
        completed: 0,
        failed: 0,
        lines: input.content
          .split('\n')
          .filter((line) => line !== '')
          .map((line) => JSON.parse(line)),
      };
      this.batches.push(batch);
      json(200, this.batchObject(batch));
      return;
    }
    const [, batchId] = /^\/v1\/batches\/([^/]+)$/.exec(route) ?? [];
    if (req.method === 'GET' && batchId !== undefined) {
      const batch = this.batches.find((candidate) => candidate.id === batchId);
      if (!batch) return notFound(`No batch found with id '${batchId}'.`);
      batch.polls++;
      if (batch.status !== 'completed' && batch.polls >= batch.endAfterPolls) this.complete(batch);
      else if (batch.status === 'validating') batch.status = 'in_progress';
      json(200, this.batchObject(batch));
      return;
    }
    const [, fileId] = /^\/v1\/files\/([^/]+)\/content$/.exec(route) ?? [];
    const file = fileId === undefined ? undefined : this.files.get(fileId);
    if (req.method === 'GET' && fileId !== undefined && this.expired.has(fileId)) {
      return notFound(`No such File object: ${fileId}`);
    }
    if (req.method === 'GET' && file) {
      res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(file.content);
      return;
    }
    notFound(`Invalid URL (${req.method} ${route})`);
  }

  /** Ends a batch: each request's result goes to the output file or the error file, as scripted. */
  private complete(batch: FakeOpenAiBatch): void {
    const output: string[] = [];
    const errors: string[] = [];
    batch.lines.forEach((line, index) => {
      const scripted = this.batchOptions().result?.(line.custom_id, line.body) ?? {
        kind: 'completion',
      };
      const id = `batch_req_${index + 1}`;
      if (scripted.kind === 'missing') return;
      if (scripted.kind === 'error') {
        const error = { code: scripted.code, message: scripted.message };
        errors.push(JSON.stringify({ id, custom_id: line.custom_id, response: null, error }));
        return;
      }
      if (scripted.kind === 'http') {
        const error = { message: scripted.message, type: scripted.type, param: null, code: null };
        const response = { status_code: scripted.status, request_id: `req_${id}`, body: { error } };
        errors.push(JSON.stringify({ id, custom_id: line.custom_id, response, error: null }));
        return;
      }
      const asked = { method: 'POST', path: line.url, headers: {}, body: line.body };
      const body = this.completion(asked, { text: scripted.text, usage: scripted.usage });
      const response = { status_code: 200, request_id: `req_${id}`, body };
      output.push(JSON.stringify({ id, custom_id: line.custom_id, response, error: null }));
    });
    const save = (lines: string[]) => {
      const id = `file-fake-${this.files.size + 1}`;
      this.files.set(id, { purpose: 'batch_output', content: lines.map((l) => `${l}\n`).join('') });
      return id;
    };
    if (output.length > 0) batch.output_file_id = save(output);
    if (errors.length > 0) batch.error_file_id = save(errors);
    if (batch.error_file_id && this.batchOptions().errorFileExpired) {
      this.expired.add(batch.error_file_id);
    }
    batch.completed = output.length;
    batch.failed = errors.length;
    batch.status = 'completed';
  }

  /** The scripted Batch API's options; none for a server without one. */
  private batchOptions(): Exclude<FakeOpenAiOptions['batch'], false | 'error-200' | undefined> {
    return typeof this.opts.batch === 'object' ? this.opts.batch : {};
  }

  private batchObject(batch: FakeOpenAiBatch) {
    return {
      id: batch.id,
      object: 'batch',
      endpoint: batch.endpoint,
      errors: null,
      input_file_id: batch.input_file_id,
      completion_window: batch.completion_window,
      status: batch.status,
      output_file_id: batch.output_file_id ?? null,
      error_file_id: batch.error_file_id ?? null,
      created_at: 1_800_000_000,
      request_counts: {
        total: batch.lines.length,
        completed: batch.completed,
        failed: batch.failed,
      },
      metadata: null,
    };
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
    if (reply.content !== undefined) message.content = reply.content;
    if (reply.toolCalls !== undefined) message.tool_calls = reply.toolCalls;
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

/** The fields of a multipart/form-data body (the file's content as text), and the file's name. */
function parseMultipart(text: string, contentType: string): Record<string, string> {
  const boundary = /boundary=(?:"([^"]+)"|([^;]+))/.exec(contentType);
  const fields: Record<string, string> = {};
  if (!boundary) return fields;
  for (const part of text.split(`--${boundary[1] ?? boundary[2]}`)) {
    const split = part.indexOf('\r\n\r\n');
    if (split < 0) continue;
    const head = part.slice(0, split);
    const name = /name="([^"]*)"/.exec(head)?.[1];
    if (name === undefined) continue;
    fields[name] = part.slice(split + 4).replace(/\r\n$/, '');
    const filename = /filename="([^"]*)"/.exec(head)?.[1];
    if (filename !== undefined) fields.filename = filename;
  }
  return fields;
}
