import { failure, type GatewayFailure } from '@decision-gateway/contract';
import type { Logger } from 'pino';
import { Pool } from 'undici';
import {
  type ClientSpan,
  clientSpan,
  type ResponseFacts,
  type TraceParent,
  traceIdsOf,
  type UpstreamIdentity,
} from '../telemetry/spans.ts';
import { type CallPlace, callThread, makeCall } from './call-thread.ts';
import { type CallResult, POOL_OPTIONS } from './http-call.mjs';
import { jsonBody } from './json-body.ts';
import { nativeErrorReason } from './native-errors.ts';
import {
  type BackoffOptions,
  backoffMs,
  DEFAULT_BACKOFF,
  isBusyStatus,
  isRetryableStatus,
  retryAfterMs,
} from './retry-policy.ts';

export interface UpstreamHttpOptions {
  /** For logs and traces: which upstream this is. */
  name: string;
  /** Its kind, for traces (`gen_ai.provider.name`). */
  provider: string;
  /** The model it is asked for, for traces; undefined where the kind has none. */
  model?: string | undefined;
  /** What an answer's body says of its model and usage, for traces; read only while tracing. */
  responseFacts?: ((body: unknown) => ResponseFacts) | undefined;
  baseUrl: string;
  apiKey?: string | undefined;
  maxRetries: number;
  /** UPSTREAM_MAX_BODY_BYTES: an answer larger than this is not read on (502). */
  maxBodyBytes?: number;
  logger: Logger;
  /** The header carrying the upstream's own request id, logged beside the gateway's. */
  requestIdHeader: string;
  /** Extra request headers (a proxy's own, e.g. Portkey's `x-portkey-*`). */
  headers?: Readonly<Record<string, string>> | undefined;
  backoff?: BackoffOptions;
  /** Called before each retry (for metrics). */
  onRetry?: () => void;
  /** For a service that wraps every answer in an envelope of its own (Cloudflare's): how to open it. */
  envelope?: Envelope | undefined;
  /**
   * Where its HTTP calls are made: on the call thread while the serving thread is busy (the
   * default, `call-thread.ts`), or never there.
   */
  callThread?: CallPlace;
}

/**
 * How a service's own envelope is opened (docs/upstreams.md#cloudflares-clef): the answer inside, or
 * what a failure inside means, whatever the HTTP status (a failure may come with a 2xx). A body
 * that is no envelope is read as usual (undefined).
 */
export type Envelope = (status: number, body: unknown) => EnvelopeReading | undefined;
export type EnvelopeReading =
  | { kind: 'answer'; body: unknown }
  /** Not retried; the status says what the gateway makes of it (400 → 40001, else 502). */
  | { kind: 'refused'; status: number; reason: string }
  /** Retried like a busy upstream; the status says what it ends as (503 → 50300). */
  | { kind: 'busy'; status: number; reason: string };

/**
 * An answer's way from the wire to the caller, one shape per thing it means: what one HTTP call
 * came to (`attempt`), what the retry policy made of the calls (`Ending`), what a kind is handed
 * (`HttpResult`: a body, or the gateway failure it stands for), the kind's raw answers
 * (`UpstreamOutcome`), the route's checked decision (`RouteAnswer`, carried unchanged into the
 * evaluation beside its debit) and what a door is handed (`EvaluationOutcome`).
 */
export type HttpResult =
  | { ok: true; body: unknown; upstreamRequestId: string | undefined }
  | { ok: false; failure: GatewayFailure; detail: string; unwell: boolean };

interface CallContext {
  requestId: string;
  deadlineAt: number;
  /** How many of the request's questions this call carries (`dg.questions` of its span). */
  questions: number;
  /** The upstream call's trace (`UpstreamCall.trace`), handed on by its kind. */
  trace: unknown;
  /** Headers of this call alone, beside the configured ones (System One's images flag). */
  headers?: Readonly<Record<string, string>>;
}

/** What ended the retry loop without a usable answer. */
type Ending =
  | { kind: 'answer'; status: number; body: unknown; upstreamRequestId: string | undefined }
  | { kind: 'refused'; status: number; reason: string; upstreamRequestId: string | undefined }
  | { kind: 'exhausted'; status: number | undefined; reason: string; retryAfterMs: number | undefined }
  | { kind: 'deadline' }
  | { kind: 'malformed'; status: number; reason: string };

/**
 * JSON over a keep-alive pool (undici) with the retry policy of docs/upstreams.md: connection errors, 408,
 * 429, 5xx and 529 are retried with exponential backoff and jitter, honouring `retry-after-ms` /
 * `Retry-After`; one deadline covers every attempt and a wait that would pass it is not started.
 * The circuit breaker sits a level up, around whole requests (`withCircuitBreaker`).
 */
/** The HTTP client every remote kind calls through. */
export type UpstreamHttp = ReturnType<typeof createUpstreamHttp>;

export function createUpstreamHttp(options: UpstreamHttpOptions) {
  const base = new URL(options.baseUrl);
  const basePath = base.pathname.replace(/\/+$/, '');
  const pool = new Pool(base.origin, POOL_OPTIONS);
  const threadPool = callThread.newPool();
  const place = options.callThread ?? 'when-busy';
  const backoff = options.backoff ?? DEFAULT_BACKOFF;
  const maxBodyBytes = options.maxBodyBytes ?? 1_048_576;
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
  if (options.apiKey) headers.authorization = `Bearer ${options.apiKey}`;
  for (const [name, value] of Object.entries(options.headers ?? {})) headers[name.toLowerCase()] = value;
  const identity: UpstreamIdentity = {
    name: options.name,
    provider: options.provider,
    model: options.model,
    address: base.hostname,
    port: Number(base.port) || (base.protocol === 'https:' ? 443 : 80),
  };

  async function exchange(path: string, payload: Buffer, call: CallContext): Promise<Ending> {
    let last: Ending = { kind: 'deadline' };
    const sent = call.headers === undefined ? headers : { ...headers, ...call.headers };
    for (let n = 0; n <= options.maxRetries; n++) {
      if (Date.now() >= call.deadlineAt) return { kind: 'deadline' };
      // Each HTTP call is its own span, ended before any backoff wait.
      const span =
        call.trace === undefined
          ? undefined
          : clientSpan(identity, call.trace as TraceParent, { retry: n, questions: call.questions }, sent);
      const request = {
        path: basePath + path,
        method: 'POST',
        headers: span?.headers ?? sent,
        body: payload,
      } as const;
      const result = await makeCall(
        place,
        pool,
        threadPool,
        base.origin,
        request,
        maxBodyBytes,
        call.deadlineAt,
      );
      const judged = judge(result);
      if (span) endSpan(span, result, judged.ending);
      if (!judged.retryable) return judged.ending;
      last = judged.ending;
      if (result.kind === 'response')
        options.logger.warn(
          {
            requestId: call.requestId,
            upstreamRequestId: headerValue(result.headers[options.requestIdHeader]),
            upstream: options.name,
            status: result.status,
            attempt: n + 1,
            reason: (judged.ending as { reason: string }).reason,
            ...span?.ids,
          },
          'upstream attempt failed',
        );
      if (n === options.maxRetries) break;
      const delay = judged.wait ?? backoffMs(n, backoff);
      if (Date.now() + delay >= call.deadlineAt) break; // docs/upstreams.md: never start a wait past the deadline
      options.onRetry?.();
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
    return last;
  }

  /** What one HTTP call came to, and whether the retry policy tries again (after `wait`, if asked). */
  function judge(result: CallResult): {
    ending: Ending;
    retryable: boolean;
    wait?: number | undefined;
  } {
    switch (result.kind) {
      case 'deadline':
        return { ending: result, retryable: false };
      case 'too_large': {
        const reason = `the answer is larger than ${maxBodyBytes} bytes`;
        return { ending: { kind: 'malformed', status: result.status, reason }, retryable: false };
      }
      case 'connection': {
        const ending = {
          kind: 'exhausted',
          status: undefined,
          reason: result.reason,
          retryAfterMs: undefined,
        };
        return { ending: ending as Ending, retryable: true };
      }
      case 'response': {
        const upstreamRequestId = headerValue(result.headers[options.requestIdHeader]);
        const body = parseJson(result.text);
        const opened = body && options.envelope?.(result.status, body.value);
        if (opened?.kind === 'answer')
          return {
            ending: { kind: 'answer', status: result.status, body: opened.body, upstreamRequestId },
            retryable: false,
          };
        if (opened?.kind === 'refused')
          return {
            ending: { kind: 'refused', status: opened.status, reason: opened.reason, upstreamRequestId },
            retryable: false,
          };
        if (opened?.kind === 'busy') {
          const asked = retryAfterMs(result.headers);
          return {
            ending: { kind: 'exhausted', status: opened.status, reason: opened.reason, retryAfterMs: asked },
            retryable: true,
            wait: asked,
          };
        }
        if (result.status >= 200 && result.status < 300) {
          if (body === undefined)
            return {
              ending: { kind: 'malformed', status: result.status, reason: 'the body is not JSON' },
              retryable: false,
            };
          return {
            ending: { kind: 'answer', status: result.status, body: body.value, upstreamRequestId },
            retryable: false,
          };
        }
        const reason = nativeErrorReason(body?.value) ?? `HTTP ${result.status}`;
        if (!isRetryableStatus(result.status))
          return {
            ending: { kind: 'refused', status: result.status, reason, upstreamRequestId },
            retryable: false,
          };
        const asked = retryAfterMs(result.headers);
        return {
          ending: { kind: 'exhausted', status: result.status, reason, retryAfterMs: asked },
          retryable: true,
          wait: asked,
        };
      }
    }
  }

  /** A call's span told how it ended: its status, the upstream's request id, and what a success's body says. */
  function endSpan(span: ClientSpan, result: CallResult, ending: Ending): void {
    if (result.kind === 'response')
      span.answered(result.status, headerValue(result.headers[options.requestIdHeader]));
    else if (result.kind === 'too_large') span.answered(result.status, undefined);
    if (ending.kind === 'answer' && options.responseFacts) span.read(options.responseFacts(ending.body));
    span.end(spanErrorType(result, ending));
  }

  return {
    async postJson(path: string, payload: unknown, call: CallContext): Promise<HttpResult> {
      // The bytes once, kept for retries: a string body would be held while the upstream thinks and
      // copied to bytes again by every attempt (docs/performance.md: what a request holds is what
      // each scavenge copies).
      const ending = await exchange(path, jsonBody(payload), call);
      const result = toResult(ending);
      if (!result.ok) {
        const upstreamRequestId = 'upstreamRequestId' in ending ? ending.upstreamRequestId : undefined;
        options.logger.warn(
          {
            requestId: call.requestId,
            upstreamRequestId,
            upstream: options.name,
            code: result.failure.code,
            reason: result.detail,
            // Under the route's span: the calls' own spans are its children.
            ...(call.trace !== undefined && traceIdsOf(call.trace as TraceParent)),
          },
          'upstream call failed',
        );
      }
      return result;
    },
    /** After the gateway's drain nothing waits on the pool: a call still open was abandoned. */
    async close() {
      callThread.close(threadPool);
      await pool.destroy();
    },
  };
}

/** docs/http-api.md#errors, docs/upstreams.md: how each ending reaches the caller. */
function toResult(ending: Ending): HttpResult {
  // Only failures that say the upstream is unwell count against it; refusals prove it answers.
  const unwell = ending.kind === 'exhausted' || ending.kind === 'deadline';
  switch (ending.kind) {
    case 'answer':
      return { ok: true, body: ending.body, upstreamRequestId: ending.upstreamRequestId };
    case 'deadline':
      return failed(
        unwell,
        failure('upstream_timeout', 'the upstream did not answer in time'),
        'deadline passed',
      );
    case 'malformed':
      return failed(
        unwell,
        failure('upstream_error', `the upstream returned an invalid answer: ${ending.reason}`),
        ending.reason,
      );
    case 'refused':
      if (ending.status === 400 || ending.status === 422) {
        // The upstream judged the caller's input (e.g. too many tokens): the caller should know why.
        const message = `the upstream refused the request: ${ending.reason}`;
        return failed(
          unwell,
          failure('invalid_request', message, { issues: [{ path: [], message: ending.reason }] }),
          ending.reason,
        );
      }
      if (ending.status === 401 || ending.status === 403) {
        // The gateway's own credential was refused: an operator problem, never shown to callers.
        return failed(
          unwell,
          failure('upstream_error', 'the upstream refused the gateway'),
          `HTTP ${ending.status}: ${ending.reason}`,
        );
      }
      return failed(
        unwell,
        failure('upstream_error', `the upstream failed (HTTP ${ending.status})`),
        ending.reason,
      );
    case 'exhausted':
      // A proxy's own timeout (Cloudflare's 524): the upstream did not answer in time.
      if (ending.status === 524)
        return failed(
          unwell,
          failure('upstream_timeout', 'the upstream did not answer in time'),
          `HTTP 524: ${ending.reason}`,
        );
      if (ending.status !== undefined && isBusyStatus(ending.status)) {
        return failed(
          unwell,
          failure('unavailable', 'the upstream is busy; try again shortly', {
            retryAfterMs: Math.round(ending.retryAfterMs ?? 1000),
          }),
          `HTTP ${ending.status}: ${ending.reason}`,
        );
      }
      return failed(
        unwell,
        failure(
          'upstream_error',
          ending.status === undefined
            ? 'the upstream could not be reached'
            : `the upstream failed (HTTP ${ending.status})`,
        ),
        ending.status === undefined ? ending.reason : `HTTP ${ending.status}: ${ending.reason}`,
      );
  }
}

/** `error.type` of an upstream call's span (OpenTelemetry's HTTP convention: the status, else what failed). */
function spanErrorType(result: { kind: string; code?: string | undefined; status?: number }, ending: Ending) {
  if (result.kind === 'deadline') return 'timeout';
  if (result.kind === 'connection') return result.code ?? 'connection_error';
  if (result.kind === 'too_large') return 'response_too_large';
  if (ending.kind === 'answer') return undefined;
  return ending.kind === 'malformed' ? 'invalid_json' : String(result.status);
}

/** A failed call. Not a closure inside toResult, which runs on every call: making one each time costs. */
function failed(unwell: boolean, f: GatewayFailure, detail: string): HttpResult {
  return { ok: false, failure: f, detail, unwell };
}

function parseJson(text: string): { value: unknown } | undefined {
  try {
    return { value: JSON.parse(text) };
  } catch {
    return undefined;
  }
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
