// Loopback fake of the Anthropic Messages API; tests and the benchmark drive it through the real SDK.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * When an answer is sent: `until` (if given) has settled, then the fake's latency and `delayMs` have passed. A test
 * holds an answer with `until` for as long as it needs it in flight, instead of guessing how long that is.
 */
export type ReplyTiming = { delayMs?: number; until?: Promise<unknown> };

export type Reply =
  | ({
      kind?: 'message';
      text: string;
      stopReason?: string;
      /** The answer's usage as sent: any value (missing or malformed counts included). */
      usage?: unknown;
      /**
       * Thinking blocks before the text: their texts, or `false` for none. Default: one block when the request asks
       * for thinking, none otherwise.
       */
      thinking?: string[] | false;
      /** Redacted thinking blocks (opaque `data`) after the thinking blocks. */
      redactedThinking?: number;
      /** The model id the answer names; default the request's. */
      model?: string;
      headers?: Record<string, string>;
    } & ReplyTiming)
  | ({
      kind: 'error';
      status: number;
      type: string;
      message: string;
      errorCode?: string;
      headers?: Record<string, string>;
    } & ReplyTiming)
  | { kind: 'hang' } // accept the request, never answer (until the client gives up or close())
  | ({ kind: 'raw'; status: number; body: string; headers?: Record<string, string> } & ReplyTiming);

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: any; // parsed JSON or undefined
  at: number; // the fake's clock (Date.now() unless `clock` is given) on arrival
}

/** What the fake's Message Batches endpoint returns for one request of a batch. */
export type BatchResult =
  | { type: 'succeeded'; text: string; stopReason?: string }
  | { type: 'errored'; errorType?: string; message?: string }
  | { type: 'expired' }
  | { type: 'canceled' }
  /** The line's `result` exactly as given (undefined leaves the key out): for malformed results. */
  | { type: 'raw'; result: unknown };

export interface FakeBatch {
  id: string;
  requests: { custom_id: string; params: any }[];
  polls: number;
  endedAt?: number;
}

export interface FakeOptions {
  /** The loopback port to listen on; default any free one. */
  port?: number;
  latencyMs?: number;
  /** Message Batches: a batch ends at its `pollsUntilEnded`-th retrieve (default 1); `result` scripts each request's result. */
  batch?: {
    pollsUntilEnded?: number;
    result?: (customId: string, params: any, index: number) => BatchResult | undefined;
    /** Whether the n-th retrieve (from 1) stalls: its headers and half its body sent, the rest never. */
    stallPoll?: (poll: number) => boolean;
    /** How many result lines the n-th results download (from 1) sends before it stalls; undefined: all, then ends. */
    stallResults?: (download: number) => number | undefined;
  };
  responder?: (req: RecordedRequest, index: number) => Reply | undefined;
  /**
   * A fixed window: at most `limit` requests in each `windowMs` (aligned to the fake's start; refused ones count too).
   * A request over it gets a 429, after the latency, with `retry-after` until the window ends.
   */
  rateLimit?: { limit: number; windowMs: number };
  /**
   * What the limiters (`rateLimit`, `buckets`) tell a client. `'anthropic'` (the default): every answer carries
   * `anthropic-ratelimit-*` for each, and a 429 also `retry-after`. `'retry-after'`: a 429 carries `retry-after` and
   * nothing else, no answer any rate-limit header, as a proxy that keeps its own limit in front of the API does.
   */
  limiterHeaders?: 'anthropic' | 'retry-after';
  /**
   * Token buckets, as the API documents its limits: each starts full and refills continuously at `perSecond` up to
   * `capacity`. A Messages request costs 1 request and its input tokens (see `countInputTokens`; cache reads are
   * free) at arrival, and its answer's output_tokens when the answer is sent (that level may go negative). A request
   * that finds any bucket short of its cost (for output tokens: a level below 1) gets a 429 at once, with
   * `retry-after` (seconds) until that bucket holds enough, and takes nothing. With buckets, a message answer's usage
   * reports input_tokens, cache_creation_input_tokens and cache_read_input_tokens as the fake computed them.
   */
  buckets?: { requests?: Bucket; inputTokens?: Bucket; outputTokens?: Bucket };
  dimensions?: string[];
  /**
   * The time the fake keeps, shared with the client under test so both agree: it stamps arrivals, refills the buckets,
   * and dates retry-after, resets, rate-limit windows and batch ends. Default the real clocks. Latency stays real
   * unless `latencyClock` is given.
   */
  clock?: { now(): number };
  /**
   * Waits the latency (and `delayMs`) on this clock instead of real time, the request held meanwhile, so a jump clock
   * skips it as it skips the client's own waits: a run of many requests paced by a limiter then takes no real wait.
   */
  latencyClock?: { sleep(ms: number): Promise<void> };
}

export type Bucket = { capacity: number; perSecond: number };

/** The input side of a message answer's usage, as the fake computes it for `buckets`. */
export interface InputUsage {
  input_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
  /** The cache writes by lifetime, as the API reports them, when the request marked anything for caching. */
  cache_creation?: { ephemeral_5m_input_tokens: number; ephemeral_1h_input_tokens: number };
}

/** One piece of a prompt, in order: system, then every message's content; `ttl` of its breakpoint, if any. */
type Piece = { chars: number; images: number; key: string; breakpoint: boolean; ttl?: string };

const EFFORTS = ['low', 'medium', 'high', 'xhigh', 'max'];

/**
 * What the API refuses with a 400 in `thinking` and `output_config.effort`, as documented: an unknown thinking type
 * or effort, and manual thinking (`{type: "enabled"}`) on Claude Opus 4.7, whose thinking is adaptive only.
 */
function settingsRefusal(body: any): string | undefined {
  const thinking = body?.thinking;
  if (thinking !== undefined) {
    if (!['adaptive', 'enabled', 'disabled'].includes(thinking?.type)) {
      return `thinking.type: Input should be 'adaptive', 'enabled' or 'disabled'`;
    }
    if (thinking.type === 'enabled' && /opus-4-7/.test(String(body?.model))) {
      return (
        '"thinking.type.enabled" is not supported for this model. Use "thinking.type.adaptive" and ' +
        '"output_config.effort" to control thinking behavior.'
      );
    }
  }
  const effort = body?.output_config?.effort;
  if (effort !== undefined && !EFFORTS.includes(effort)) {
    return `output_config.effort: Input should be ${EFFORTS.map((e) => `'${e}'`).join(', ')}`;
  }
  return undefined;
}

export const IMAGE_TOKENS = 1600;
const BUCKET_HEADER = {
  requests: 'requests',
  inputTokens: 'input-tokens',
  outputTokens: 'output-tokens',
} as const;
type BucketName = keyof typeof BUCKET_HEADER;
type BucketState = Bucket & { level: number; at: number };
/** Milliseconds since the epoch, with a fraction: the buckets refill continuously. */
const preciseNow = () => performance.timeOrigin + performance.now();

function promptPieces(body: any): Piece[] {
  const pieces: Piece[] = [];
  const add = (block: any) => {
    if (typeof block === 'string')
      return pieces.push({ chars: block.length, images: 0, key: block, breakpoint: false });
    if (!block || typeof block !== 'object') return;
    const breakpoint = block.cache_control != null;
    const ttl = breakpoint ? (block.cache_control.ttl ?? '5m') : undefined;
    if (block.type === 'text' && typeof block.text === 'string')
      return pieces.push({ chars: block.text.length, images: 0, key: block.text, breakpoint, ttl });
    const { cache_control: _, ...rest } = block;
    pieces.push({
      chars: 0,
      images: block.type === 'image' ? 1 : 0,
      key: JSON.stringify(rest),
      breakpoint,
      ttl,
    });
  };
  const addContent = (content: any) =>
    Array.isArray(content) ? content.forEach(add) : add(content);
  addContent(body?.system);
  if (Array.isArray(body?.messages))
    for (const message of body.messages) addContent(message?.content);
  return pieces;
}

const piecesTokens = (pieces: Piece[]) =>
  Math.ceil(pieces.reduce((sum, piece) => sum + piece.chars, 0) / 4) +
  IMAGE_TOKENS * pieces.reduce((sum, piece) => sum + piece.images, 0);

/**
 * A Messages request's input tokens as the fake counts them: ceil(characters of the text of `system` and of every
 * text block or string content in `messages` / 4), plus 1,600 per image; cache reads included.
 */
export function countInputTokens(body: unknown): number {
  return piecesTokens(promptPieces(body));
}

type Answer = { status: number; body: string; headers: Record<string, string> };

const RATE_LIMIT_MESSAGE = 'Number of requests has exceeded your per-minute rate limit';

// The default valid answer covers the shipped rubric's dimensions.
function rubricDimensions(): string[] {
  const rubric = JSON.parse(readFileSync(new URL('../rubric.json', import.meta.url), 'utf8')) as {
    dimensions: { name: string }[];
  };
  return rubric.dimensions.map((dimension) => dimension.name);
}

function errorBody(n: number, type: string, message: string, errorCode?: string): string {
  const error = { type, message, ...(errorCode ? { details: { error_code: errorCode } } : {}) };
  return JSON.stringify({ type: 'error', error, request_id: `req_fake_${n}` });
}

export class FakeAnthropic {
  readonly url: string;
  readonly requests: RecordedRequest[] = [];
  count429 = 0;
  /** Every batch created, in order (POST /v1/messages/batches). */
  readonly batches: FakeBatch[] = [];
  /** How many times a batch was retrieved (polled). */
  batchPolls = 0;
  /** How many times batch results were downloaded. */
  batchDownloads = 0;
  /**
   * With `buckets`, what the admitted Messages requests cost: requests, input tokens taken from the bucket (uncached
   * input and cache writes), cache reads (free), and output tokens taken when their answers were sent.
   */
  readonly charged = { requests: 0, inputTokens: 0, cacheReadTokens: 0, outputTokens: 0 };
  private readonly server: Server;
  private readonly opts: FakeOptions;
  private readonly startedAt: number; // rate-limit windows are aligned to this
  private readonly queue: Reply[] = [];
  private readonly timers = new Set<ReturnType<typeof setTimeout>>();
  private seq = 0;
  private closed = false;
  private window = { index: -1, count: 0 };
  private dims: string[] | undefined;
  private readonly buckets: Partial<Record<BucketName, BucketState>> = {};
  /** Every cacheable prefix (its exact pieces) admitted so far. */
  private readonly cached = new Set<string>();
  /** This process's requests to the fake (undici's, as fetch makes them) sent and not yet answered in full. */
  private readonly open = new Set<object>();
  /** Requests the fake holds on purpose: a hang, or a reply whose `until` has not settled. */
  private held = 0;
  private settledWaiters: (() => void)[] = [];
  private readonly onRequestCreate = (message: unknown) => {
    const request = (message as { request: { origin?: unknown } }).request;
    if (request.origin === this.url) this.open.add(request);
  };
  private readonly onRequestDone = (message: unknown) => {
    if (this.open.delete((message as { request: object }).request)) this.checkSettled();
  };

  private constructor(server: Server, url: string, opts: FakeOptions) {
    this.server = server;
    this.url = url;
    this.opts = opts;
    this.startedAt = this.wallNow();
    const at = this.bucketNow();
    for (const name of Object.keys(BUCKET_HEADER) as BucketName[]) {
      const bucket = opts.buckets?.[name];
      if (bucket) this.buckets[name] = { ...bucket, level: bucket.capacity, at };
    }
  }

  static async start(opts: FakeOptions = {}): Promise<FakeAnthropic> {
    let fake: FakeAnthropic | undefined;
    const server = createServer((req, res) => void fake?.handle(req, res));
    await new Promise<void>((resolve, reject) =>
      server.once('error', reject).listen(opts.port ?? 0, '127.0.0.1', resolve),
    );
    const { port } = server.address() as AddressInfo;
    fake = new FakeAnthropic(server, `http://127.0.0.1:${port}`, opts);
    subscribe('undici:request:create', fake.onRequestCreate);
    subscribe('undici:request:trailers', fake.onRequestDone);
    subscribe('undici:request:error', fake.onRequestDone);
    return fake;
  }

  /**
   * Resolves once no request from this process is on its way to the fake, being answered, or on its way back, except
   * those the fake holds on purpose (a hang, an `until`): a jump clock waits for this before it moves time on, so
   * time does not run ahead of the requests in flight (their arrival and answer times stay what real time makes them).
   */
  settled(): Promise<void> {
    if (this.isSettled()) return Promise.resolve();
    return new Promise((resolve) => this.settledWaiters.push(resolve));
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

  /** Counts a request the fake holds on purpose until `released` settles (never, for a hang). */
  private holdUntil(released: Promise<unknown>): void {
    this.held++;
    this.checkSettled();
    const release = () => {
      this.held--;
      this.checkSettled();
    };
    void released.then(release, release);
  }

  enqueue(...replies: Reply[]): void {
    this.queue.push(...replies);
  }

  /** Now on the wall clock that dates headers and arrivals: the given clock's, else Date.now(). */
  private wallNow(): number {
    return this.opts.clock ? this.opts.clock.now() : Date.now();
  }

  /** Now for the buckets' continuous refill: the given clock's, else the real time with a fraction of a millisecond. */
  private bucketNow(): number {
    return this.opts.clock ? this.opts.clock.now() : preciseNow();
  }

  validAnswer(scores: Partial<Record<string, number>> = {}, notes?: string): string {
    this.dims ??= this.opts.dimensions ?? rubricDimensions(); // lazy, so fakes that only script replies need no rubric
    const all = { ...Object.fromEntries(this.dims.map((d) => [d, 2])), ...scores }; // an undefined score drops that key
    return JSON.stringify({ scores: all, notes: notes ?? 'ok' });
  }

  async close(): Promise<void> {
    this.closed = true;
    unsubscribe('undici:request:create', this.onRequestCreate);
    unsubscribe('undici:request:trailers', this.onRequestDone);
    unsubscribe('undici:request:error', this.onRequestDone);
    this.checkSettled();
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve())); // ignore "not running" on a second close
    this.server.closeAllConnections(); // hanging and keep-alive sockets would otherwise hold close() open
    await closed;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const n = ++this.seq;
    const at = this.wallNow();
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const path = req.url ?? '/';
    if (path.startsWith('/v1/messages/batches'))
      return this.handleBatch(req.method ?? 'GET', path.split('?')[0]!, chunks, res, n);
    if (req.method !== 'POST' || path.split('?')[0] !== '/v1/messages') {
      return this.send(res, n, {
        status: 404,
        body: errorBody(n, 'not_found_error', `Not found: ${req.method} ${path}`),
        headers: {},
      });
    }
    let body: any;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      body = undefined;
    }
    const recorded: RecordedRequest = { method: req.method, path, headers: req.headers, body, at };
    const index = this.requests.push(recorded) - 1;
    const refused = settingsRefusal(body);
    if (refused) {
      const error = errorBody(n, 'invalid_request_error', refused);
      return this.send(res, n, { status: 400, body: error, headers: {} });
    }
    const rl = this.countRateLimit(at);
    const admitted = rl?.limited ? undefined : this.admit(body);
    if (admitted && 'retryAfterS' in admitted) {
      // Refused by a bucket: at once, without the latency, and taking nothing.
      const retryAfter = { 'retry-after': admitted.retryAfterS.toFixed(3) };
      const headers = this.tellsLimits()
        ? { ...rl?.headers, ...this.bucketHeaders(this.bucketNow()), ...retryAfter }
        : retryAfter;
      const error = errorBody(n, 'rate_limit_error', admitted.message);
      return this.send(res, n, { status: 429, body: error, headers });
    }
    const reply: Reply = rl?.limited
      ? { kind: 'error', status: 429, type: 'rate_limit_error', message: RATE_LIMIT_MESSAGE }
      : this.pick(recorded, index);
    if (reply.kind === 'hang') {
      this.holdUntil(new Promise((resolve) => res.once('close', resolve)));
      return;
    }

    const delay = (this.opts.latencyMs ?? 0) + (reply.delayMs ?? 0);
    const answerLater = () => {
      if (this.closed) return; // held with `until` past the test's end
      const answerNow = () => {
        if (this.closed) return;
        const usage =
          admitted && (reply.kind ?? 'message') === 'message'
            ? { ...admitted.usage, output_tokens: 20, ...(reply as { usage?: object }).usage }
            : undefined;
        const answer = this.answer(reply, n, body, usage);
        if (usage) this.takeOutput(usage.output_tokens);
        if (this.opts.buckets && this.tellsLimits())
          answer.headers = { ...this.bucketHeaders(this.bucketNow()), ...answer.headers };
        if (rl && this.tellsLimits()) answer.headers = { ...rl.headers, ...answer.headers };
        // Computed at send time so the client waits only for what is left of the window.
        if (rl?.limited)
          answer.headers['retry-after'] ??= Math.max(
            0.001,
            (rl.end - this.wallNow()) / 1000,
          ).toFixed(3);
        this.send(res, n, answer);
      };
      const latencyClock = this.opts.latencyClock;
      if (latencyClock) {
        const waited = latencyClock.sleep(delay);
        this.holdUntil(waited);
        void waited.then(answerNow);
        return;
      }
      const timer = setTimeout(() => {
        this.timers.delete(timer);
        answerNow();
      }, delay); // one timer per request, so concurrent requests see the latency in parallel
      this.timers.add(timer);
    };
    if (reply.until) {
      this.holdUntil(reply.until);
      void reply.until.then(answerLater, answerLater);
    } else {
      answerLater();
    }
  }

  // Message Batches: create, retrieve (ends after N polls), and results as JSONL in reverse order (results come in any order).
  private handleBatch(
    method: string,
    path: string,
    chunks: Buffer[],
    res: ServerResponse,
    n: number,
  ): void {
    const json = (status: number, value: unknown) =>
      this.send(res, n, { status, body: JSON.stringify(value), headers: {} });
    if (method === 'POST' && path === '/v1/messages/batches') {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        requests: FakeBatch['requests'];
      };
      const batch: FakeBatch = {
        id: `msgbatch_fake_${this.batches.length + 1}`,
        requests: body.requests,
        polls: 0,
      };
      this.batches.push(batch);
      return json(200, this.batchObject(batch));
    }
    const [, id, results] = /^\/v1\/messages\/batches\/([^/]+)(\/results)?$/.exec(path) ?? [];
    const batch = this.batches.find((candidate) => candidate.id === id);
    if (!batch) return json(404, JSON.parse(errorBody(n, 'not_found_error', `no batch ${id}`)));
    if (!results) {
      this.batchPolls++;
      if (++batch.polls >= (this.opts.batch?.pollsUntilEnded ?? 1))
        batch.endedAt ??= this.wallNow();
      const body = JSON.stringify(this.batchObject(batch));
      if (this.opts.batch?.stallPoll?.(this.batchPolls))
        return this.stall(res, n, body.slice(0, body.length / 2), 'application/json');
      return this.send(res, n, { status: 200, body, headers: {} });
    }
    this.batchDownloads++;
    const lines = batch.requests
      .map((request, index) => {
        const scripted = this.opts.batch?.result?.(request.custom_id, request.params, index) ?? {
          type: 'succeeded',
          text: this.validAnswer(),
        };
        if (scripted.type === 'raw')
          return JSON.stringify({ custom_id: request.custom_id, result: scripted.result });
        const result =
          scripted.type === 'succeeded'
            ? {
                type: 'succeeded',
                message: JSON.parse(
                  this.answer(
                    { text: scripted.text, stopReason: scripted.stopReason },
                    n,
                    request.params,
                  ).body,
                ),
              }
            : scripted.type === 'errored'
              ? {
                  type: 'errored',
                  error: {
                    type: 'error',
                    error: {
                      type: scripted.errorType ?? 'api_error',
                      message: scripted.message ?? 'Internal server error',
                    },
                  },
                }
              : { type: scripted.type };
        return JSON.stringify({ custom_id: request.custom_id, result });
      })
      .reverse();
    const sent = this.opts.batch?.stallResults?.(this.batchDownloads);
    if (sent !== undefined) {
      const part = lines.slice(0, sent).map((line) => `${line}\n`);
      return this.stall(res, n, part.join(''), 'application/binary');
    }
    this.send(res, n, {
      status: 200,
      body: lines.map((line) => `${line}\n`).join(''),
      headers: { 'content-type': 'application/binary' },
    });
  }

  /** Sends the headers and `part` of a body, then nothing more: held (settled) until the client gives up. */
  private stall(res: ServerResponse, n: number, part: string, contentType: string): void {
    this.holdUntil(new Promise((resolve) => res.once('close', resolve)));
    res.writeHead(200, { 'content-type': contentType, 'request-id': `req_fake_${n}` });
    res.write(part);
  }

  private batchObject(batch: FakeBatch) {
    const ended = batch.endedAt !== undefined;
    const count = batch.requests.length;
    return {
      id: batch.id,
      type: 'message_batch',
      processing_status: ended ? 'ended' : 'in_progress',
      request_counts: {
        processing: ended ? 0 : count,
        succeeded: ended ? count : 0,
        errored: 0,
        canceled: 0,
        expired: 0,
      },
      created_at: new Date(this.wallNow()).toISOString(),
      expires_at: new Date(this.wallNow() + 86_400_000).toISOString(),
      ended_at: ended ? new Date(batch.endedAt!).toISOString() : null,
      cancel_initiated_at: null,
      archived_at: null,
      results_url: ended ? `${this.url}/v1/messages/batches/${batch.id}/results` : null,
    };
  }

  private pick(recorded: RecordedRequest, index: number): Reply {
    try {
      return (
        this.queue.shift() ?? this.opts.responder?.(recorded, index) ?? { text: this.validAnswer() }
      );
    } catch (err) {
      // A throwing responder or a missing rubric should fail the test loudly, not hang it.
      return {
        kind: 'error',
        status: 500,
        type: 'api_error',
        message: `fake-anthropic: ${String(err)}`,
      };
    }
  }

  private answer(
    reply: Exclude<Reply, { kind: 'hang' }>,
    n: number,
    request: any,
    usage?: InputUsage & { output_tokens: number },
  ): Answer {
    const headers = { ...reply.headers };
    switch (reply.kind) {
      case 'error':
        return {
          status: reply.status,
          body: errorBody(n, reply.type, reply.message, reply.errorCode),
          headers,
        };
      case 'raw':
        return { status: reply.status, body: reply.body, headers };
      default: {
        // Asked to think, the fake thinks (summarised, as the API returns it by default), then answers.
        const asked =
          request?.thinking?.type === 'adaptive' || request?.thinking?.type === 'enabled';
        const thoughts =
          reply.thinking ?? (asked ? [`fake thinking ${n}: weighing the rubric`] : []);
        const content: unknown[] = [];
        for (const thinking of thoughts || []) {
          content.push({ type: 'thinking', thinking, signature: `sig_fake_${n}` });
        }
        for (let i = 0; i < (reply.redactedThinking ?? 0); i++) {
          content.push({ type: 'redacted_thinking', data: `redacted_fake_${n}_${i}` });
        }
        if (reply.text !== '' || content.length === 0)
          content.push({ type: 'text', text: reply.text });
        const message = {
          id: `msg_fake_${n}`,
          type: 'message',
          role: 'assistant',
          model: reply.model ?? request?.model,
          content,
          stop_reason: reply.stopReason ?? 'end_turn',
          stop_sequence: null,
          usage:
            usage ??
            (reply.usage === undefined ? { input_tokens: 100, output_tokens: 20 } : reply.usage),
        };
        return { status: 200, body: JSON.stringify(message), headers };
      }
    }
  }

  /** Whether answers carry the limiters' `anthropic-ratelimit-*` headers (`limiterHeaders`). */
  private tellsLimits(): boolean {
    return (this.opts.limiterHeaders ?? 'anthropic') === 'anthropic';
  }

  // Fixed windows aligned to server start; every request in the window counts, including rejected ones.
  private countRateLimit(now: number) {
    const rl = this.opts.rateLimit;
    if (!rl) return undefined;
    const index = Math.floor((now - this.startedAt) / rl.windowMs);
    if (index !== this.window.index) this.window = { index, count: 0 };
    const count = ++this.window.count;
    const end = this.startedAt + (index + 1) * rl.windowMs;
    const headers: Record<string, string> = {
      'anthropic-ratelimit-requests-limit': String(rl.limit),
      'anthropic-ratelimit-requests-remaining': String(Math.max(0, rl.limit - count)),
      'anthropic-ratelimit-requests-reset': new Date(end).toISOString(),
    };
    return { limited: count > rl.limit, end, headers };
  }

  /** The level of a bucket now, after its continuous refill since it was last read. */
  private level(bucket: BucketState, now: number): number {
    const elapsedS = Math.max(0, now - bucket.at) / 1000;
    bucket.level = Math.min(bucket.capacity, bucket.level + elapsedS * bucket.perSecond);
    bucket.at = Math.max(bucket.at, now);
    return bucket.level;
  }

  /**
   * With buckets, admits a Messages request (takes its cost, records its cache writes, returns its input usage) or
   * refuses it (returns the wait until every bucket short of its cost holds enough); without, undefined.
   */
  private admit(
    body: any,
  ): { usage: InputUsage } | { retryAfterS: number; message: string } | undefined {
    if (!this.opts.buckets) return undefined;
    const now = this.bucketNow();
    const pieces = promptPieces(body);
    const total = piecesTokens(pieces);
    // The cacheable prefixes end at the blocks with cache_control; the longest one already written is read, and
    // the prefix up to the last one is written (its tokens beyond what was read).
    const prefixes = pieces.flatMap((piece, i) =>
      piece.breakpoint
        ? [{ key: JSON.stringify(pieces.slice(0, i + 1).map((p) => p.key)), end: i + 1 }]
        : [],
    );
    const read = [...prefixes].reverse().find((prefix) => this.cached.has(prefix.key));
    const last = prefixes.at(-1);
    const readTokens = read ? piecesTokens(pieces.slice(0, read.end)) : 0;
    const writeTokens =
      last && last !== read ? piecesTokens(pieces.slice(0, last.end)) - readTokens : 0;
    const usage: InputUsage = {
      input_tokens: total - readTokens - writeTokens,
      cache_creation_input_tokens: writeTokens,
      cache_read_input_tokens: readTokens,
    };
    if (last) {
      // The written prefix lives as long as its breakpoint says.
      const lastPiece = pieces[last.end - 1]!;
      const hour = lastPiece.ttl === '1h' ? writeTokens : 0;
      usage.cache_creation = {
        ephemeral_5m_input_tokens: writeTokens - hour,
        ephemeral_1h_input_tokens: hour,
      };
    }
    const cost: Record<BucketName, number> = {
      requests: 1,
      inputTokens: usage.input_tokens + writeTokens,
      outputTokens: 1, // output is taken when the answer is sent; an empty bucket refuses
    };
    const short = (Object.entries(this.buckets) as [BucketName, BucketState][]).flatMap(
      ([name, bucket]) => {
        const level = this.level(bucket, now);
        if (level >= cost[name]) return [];
        const need = Math.min(cost[name], bucket.capacity); // a cost beyond capacity never fits: wait until full
        const what = BUCKET_HEADER[name].replace('-', ' ');
        const over =
          cost[name] > bucket.capacity ? ` (this request alone needs ${cost[name]})` : '';
        return [
          {
            wait: (need - level) / bucket.perSecond,
            what: `${bucket.perSecond} ${what} per second${over}`,
          },
        ];
      },
    );
    if (short.length) {
      const wait = Math.max(...short.map((s) => s.wait));
      const limits = short.map((s) => s.what).join(', ');
      return {
        retryAfterS: Math.max(0.001, wait),
        message: `This request would exceed your rate limit of ${limits}`,
      };
    }
    if (this.buckets.requests) this.buckets.requests.level -= cost.requests;
    if (this.buckets.inputTokens) this.buckets.inputTokens.level -= cost.inputTokens;
    for (const prefix of prefixes) this.cached.add(prefix.key);
    this.charged.requests++;
    this.charged.inputTokens += cost.inputTokens;
    this.charged.cacheReadTokens += readTokens;
    return { usage };
  }

  private takeOutput(tokens: number): void {
    const bucket = this.buckets.outputTokens;
    if (bucket) {
      this.level(bucket, this.bucketNow());
      bucket.level -= tokens; // may go negative: later requests wait until it refills
    }
    this.charged.outputTokens += tokens;
  }

  /**
   * `anthropic-ratelimit-{requests|input-tokens|output-tokens}-limit/-remaining/-reset` for every configured bucket:
   * its capacity, the floor of its level (at least 0), and when it will be full again. With both token buckets, also
   * `anthropic-ratelimit-tokens-*` mirroring the tighter of the two (fewer remaining; on a tie, the later reset).
   */
  private bucketHeaders(now: number): Record<string, string> {
    const headers: Record<string, string> = {};
    let tightest: { remaining: number; reset: number; capacity: number } | undefined;
    for (const [name, bucket] of Object.entries(this.buckets) as [BucketName, BucketState][]) {
      const level = this.level(bucket, now);
      const remaining = Math.max(0, Math.floor(level));
      // Levels follow the monotonic clock; the reset is told on the wall clock that clients compare it with.
      const reset =
        this.wallNow() + (Math.max(0, bucket.capacity - level) / bucket.perSecond) * 1000;
      const prefix = `anthropic-ratelimit-${BUCKET_HEADER[name]}`;
      headers[`${prefix}-limit`] = String(bucket.capacity);
      headers[`${prefix}-remaining`] = String(remaining);
      headers[`${prefix}-reset`] = new Date(reset).toISOString();
      const tighter =
        !tightest ||
        remaining < tightest.remaining ||
        (remaining === tightest.remaining && reset > tightest.reset);
      if (name !== 'requests' && tighter)
        tightest = { remaining, reset, capacity: bucket.capacity };
    }
    if (tightest && this.buckets.inputTokens && this.buckets.outputTokens) {
      headers['anthropic-ratelimit-tokens-limit'] = String(tightest.capacity);
      headers['anthropic-ratelimit-tokens-remaining'] = String(tightest.remaining);
      headers['anthropic-ratelimit-tokens-reset'] = new Date(tightest.reset).toISOString();
    }
    return headers;
  }

  private send(res: ServerResponse, n: number, { status, body, headers }: Answer): void {
    if (res.destroyed) return; // the client already gave up (e.g. its timeout fired)
    if (status === 429) this.count429++;
    res.writeHead(status, {
      'content-type': 'application/json',
      'request-id': `req_fake_${n}`,
      ...headers,
    });
    res.end(body);
  }
}
