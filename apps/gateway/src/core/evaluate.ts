import {
  decodeJsonBody,
  type EvaluationData,
  type EvaluationRequest,
  failure,
  type GatewayFailure,
  MODEL_ID,
  type Parsed,
  parseEvaluationRequest,
  type QuestionType,
  type Usage,
} from '@decision-gateway/contract';
import { checkAnswers, checkUsage, type Upstream } from '@decision-gateway/questions';
import type { Logger } from 'pino';
import type { Authenticate } from '../auth/authenticate.ts';
import type { RateLimiter } from '../rate-limit/rate-limiter.ts';
import type { KeyAuth, Store, UsageEntry } from '../store/store.ts';
import { costMicro, fromMicro, type Pricing } from './credits.ts';

export interface EvaluationDeps {
  authenticate: Authenticate;
  /** Credits only: reserve, settle and release. Keys are checked by `authenticate`. */
  store: Store;
  upstream: Upstream;
  rateLimiter: RateLimiter;
  pricing: Pricing;
  /** Per-key default when a key has no limit of its own; 0 = off. */
  defaultRateLimitPerMinute: number;
  /** The upstream deadline; reservations older than this (plus slack) are stale. */
  upstreamTimeoutMs: number;
  logger: Logger;
  clock?: () => number;
}

/**
 * The body as each door receives it: REST and `/native` hand over bytes; tRPC hands over a reader
 * of one operation's input, read only once the media type has been judged (SPEC §4's order).
 */
export type EvaluationBody =
  | { kind: 'bytes'; bytes: Uint8Array | undefined; contentType: string | undefined }
  | { kind: 'lazy'; contentType: string | undefined; bytes: number; read(): Promise<Parsed<unknown>> };

export interface EvaluationCall {
  requestId: string;
  /** performance.now() when the request arrived: elapsedMs counts from here. */
  startedAt: number;
  authorization: string | undefined;
  body: EvaluationBody;
}

/** What the request log line says about an evaluation, whatever its outcome. */
export interface EvaluationLog {
  keyPrefix?: string;
  questions?: number;
  usage?: Usage;
  creditsUsed?: number;
  upstreamMs?: number;
  /** Whether the upstream's answer was usable (after the checks of SPEC §8). */
  upstreamOutcome?: 'ok' | 'error';
  /** The upstream that answered, by its configured name. */
  upstream?: string;
  /** The upstream's own request id, logged beside the gateway's. */
  upstreamRequestId?: string;
  /** Logprob upstreams: the lowest share of next-token mass that fell on the offered labels. */
  labelMass?: number;
  /** How many questions of each type the request asked. */
  questionTypes?: Partial<Record<QuestionType, number>>;
  reason?: string;
}

/**
 * What every door tells its caller beside the body (SPEC §§3, 11, 12, 13), written as headers by
 * one function (`http/response-meta.ts`). Fields appear once the evaluation has learnt them.
 */
export interface ResponseMeta {
  requestId: string;
  /** Credits debited (successes of API-key and token requests). */
  creditsUsed?: number;
  /** The route the request took, once it is known. */
  route?: string;
  /** Which upstream(s) answered: `name`, or `first+escalated` (SPEC §12). */
  upstream?: string;
}

export type EvaluationOutcome =
  | { ok: true; data: EvaluationData; meta: ResponseMeta; log: EvaluationLog }
  | { ok: false; failure: GatewayFailure; meta: ResponseMeta; log: EvaluationLog };

const JSON_MEDIA_TYPE = /^application\/json[ \t]*(;|$)/i;
/**
 * A reservation lives from just before the upstream call to just after it, so never much longer
 * than the upstream deadline. One older than twice the deadline (and at least a second more) was
 * left by a crashed process: from then on it counts nowhere (SPEC §7).
 */
const staleAfterMs = (upstreamTimeoutMs: number) => upstreamTimeoutMs + Math.max(1_000, upstreamTimeoutMs);

/**
 * The one evaluation path (SPEC §§1–8) both doors call: authenticate → rate limit → media type →
 * JSON → validate → reserve credits → upstream → check answers → settle. Checks run in SPEC §4's
 * precedence; a failed request is never charged; every authenticated request leaves a usage entry.
 */
export type Evaluate = (call: EvaluationCall) => Promise<EvaluationOutcome>;

export interface Evaluator {
  evaluate: Evaluate;
  /**
   * For a shutdown that can wait no longer (SPEC §10): release every reservation still held, each
   * with a usage record (status 503), and make sure those requests are never settled afterwards.
   * Returns how many were released.
   */
  abandonInFlight(): Promise<number>;
}

/** A request between its reservation and its settlement. */
interface Flight {
  call: EvaluationCall;
  key: KeyAuth;
  reservationId: string | null;
  questions: number;
  abandoned: boolean;
  /** Its settlement has begun: a shutdown lets it finish rather than release it. */
  settling: boolean;
}

export function createEvaluator(deps: EvaluationDeps): Evaluator {
  const clock = deps.clock ?? Date.now;
  const flights = new Map<string, Flight>();
  /** True once a shutdown released this request's hold: nothing more is written for it. */
  const abandoned = (requestId: string) => flights.get(requestId)?.abandoned === true;
  /** Reservations created before this were left by a crashed process: they count nowhere (SPEC §7). */
  const staleBefore = (now: number) => now - staleAfterMs(deps.upstreamTimeoutMs);

  async function fail(
    call: EvaluationCall,
    key: KeyAuth | undefined,
    error: GatewayFailure,
    log: EvaluationLog,
    reservationId: string | null = null,
  ): Promise<EvaluationOutcome> {
    if (key && !abandoned(call.requestId)) {
      await deps.store.release(
        reservationId,
        usageEntry(call, key, { input_tokens: 0, output_tokens: 0 }, 0, error.status, log.questions ?? 0),
      );
    }
    return { ok: false, failure: error, meta: { requestId: call.requestId }, log };
  }

  function usageEntry(
    call: EvaluationCall,
    key: KeyAuth,
    usage: Usage,
    creditsMicro: number,
    status: number,
    questions: number,
  ): UsageEntry {
    return {
      requestId: call.requestId,
      keyId: key.id,
      creditsMicro,
      inputTokens: usage.input_tokens,
      outputTokens: usage.output_tokens,
      questions,
      status,
      elapsedMs: Math.round(performance.now() - call.startedAt),
      at: clock(),
    };
  }

  async function evaluate(call: EvaluationCall): Promise<EvaluationOutcome> {
    const log: EvaluationLog = {};
    const auth = await deps.authenticate(call.authorization);
    if (!auth.ok) return { ok: false, failure: auth.failure, meta: { requestId: call.requestId }, log };
    const key = auth.principal.key;
    log.keyPrefix = key.prefix;

    const limit = key.rateLimitPerMinute ?? deps.defaultRateLimitPerMinute;
    if (limit > 0) {
      const decision = await deps.rateLimiter.take(key.id, limit, clock());
      if (!decision.ok) {
        const error = failure(
          'rate_limited',
          `the key is over its rate limit of ${limit} requests per minute`,
          {
            retryAfterMs: decision.retryAfterMs,
          },
        );
        return fail(call, key, error, log);
      }
    }

    const body = await readBody(call.body);
    if (!body.ok) return fail(call, key, body.error, log);
    const parsed = parseEvaluationRequest(body.value);
    if (!parsed.ok) return fail(call, key, parsed.error, log);
    const request = parsed.value;
    log.questions = Object.keys(request.questions).length;
    log.questionTypes = {};
    for (const question of Object.values(request.questions)) {
      log.questionTypes[question.type] = (log.questionTypes[question.type] ?? 0) + 1;
    }

    const bound = costMicro(deps.upstream.usageBound(request, body.bytes), deps.pricing);
    const now = clock();
    const reservation = await deps.store.reserve(key.id, call.requestId, bound, now, staleBefore(now));
    if (!reservation.ok) {
      const error = failure(
        'insufficient_credits',
        `this request may cost up to ${fromMicro(bound)} credits; the key has ${fromMicro(reservation.availableMicro)} available`,
      );
      return fail(call, key, error, log);
    }

    flights.set(call.requestId, {
      call,
      key,
      reservationId: reservation.reservationId,
      questions: log.questions,
      abandoned: false,
      settling: false,
    });
    try {
      return await answer(call, key, request, body.bytes, reservation.reservationId, log);
    } catch (error) {
      deps.logger.error({ err: error, requestId: call.requestId }, 'evaluation failed unexpectedly');
      return fail(call, key, failure('internal_error', 'internal error'), log, reservation.reservationId);
    } finally {
      flights.delete(call.requestId);
    }
  }

  async function abandonInFlight(): Promise<number> {
    const pending = [...flights.values()].filter((flight) => !flight.abandoned && !flight.settling);
    for (const flight of pending) flight.abandoned = true;
    const none = { input_tokens: 0, output_tokens: 0 };
    await Promise.all(
      pending.map((flight) =>
        deps.store.release(
          flight.reservationId,
          usageEntry(flight.call, flight.key, none, 0, 503, flight.questions),
        ),
      ),
    );
    return pending.length;
  }

  async function answer(
    call: EvaluationCall,
    key: KeyAuth,
    request: EvaluationRequest,
    bodyBytes: number,
    reservationId: string | null,
    log: EvaluationLog,
  ): Promise<EvaluationOutcome> {
    log.upstream = deps.upstream.name;
    const upstreamStart = performance.now();
    const outcome = await deps.upstream.answer({
      request,
      bodyBytes,
      requestId: call.requestId,
      deadlineAt: clock() + deps.upstreamTimeoutMs,
    });
    log.upstreamMs = performance.now() - upstreamStart;
    log.upstreamOutcome = 'error';
    if (!outcome.ok) {
      if (outcome.detail) log.reason = outcome.detail;
      return fail(call, key, outcome.failure, log, reservationId);
    }
    const answers = checkAnswers(request.questions, outcome.answers);
    const usage = checkUsage(outcome.usage);
    if (!answers.ok || !usage.ok) {
      const reason = answers.ok ? (usage as { reason: string }).reason : answers.reason;
      log.reason = reason;
      const error = failure('upstream_error', `the upstream returned an invalid answer: ${reason}`);
      return fail(call, key, error, log, reservationId);
    }
    const flight = flights.get(call.requestId);
    if (flight?.abandoned) {
      // The shutdown released this request's hold while the upstream answered: it is not charged.
      const error = failure('unavailable', 'the gateway shut down before the answer');
      return { ok: false, failure: error, meta: { requestId: call.requestId }, log };
    }
    if (flight) flight.settling = true;
    log.upstreamOutcome = 'ok';
    log.usage = usage.value;
    if (outcome.upstreamRequestId !== undefined) log.upstreamRequestId = outcome.upstreamRequestId;
    if (outcome.labelMass !== undefined) log.labelMass = outcome.labelMass;
    const cost = costMicro(usage.value, deps.pricing);
    const entry = usageEntry(call, key, usage.value, cost, 200, log.questions ?? 0);
    const debited = await deps.store.settle(reservationId, entry, staleBefore(clock()));
    const creditsUsed = fromMicro(debited);
    log.creditsUsed = creditsUsed;
    return {
      ok: true,
      log,
      meta: { requestId: call.requestId, creditsUsed, upstream: deps.upstream.name },
      data: {
        result: {
          model: MODEL_ID,
          answers: answers.value,
          usage: usage.value,
          elapsedMs: Math.round(performance.now() - call.startedAt),
        },
        creditsUsed,
      },
    };
  }

  return { evaluate, abandonInFlight };
}

/** Media type (41500) before JSON (40000), in SPEC §4's order, on every door. */
async function readBody(
  body: EvaluationBody,
): Promise<{ ok: true; value: unknown; bytes: number } | { ok: false; error: GatewayFailure }> {
  if (body.contentType === undefined || !JSON_MEDIA_TYPE.test(body.contentType.trim())) {
    const sent =
      body.contentType === undefined ? 'no Content-Type' : `Content-Type "${body.contentType.slice(0, 100)}"`;
    return {
      ok: false,
      error: failure('unsupported_media_type', `send Content-Type: application/json (got ${sent})`),
    };
  }
  if (body.kind === 'lazy') {
    const read = await body.read();
    return read.ok ? { ok: true, value: read.value, bytes: body.bytes } : read;
  }
  const decoded = decodeJsonBody(body.bytes);
  return decoded.ok ? { ok: true, value: decoded.value, bytes: body.bytes?.length ?? 0 } : decoded;
}
