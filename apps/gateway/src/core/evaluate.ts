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
import type { Logger } from 'pino';
import { refusedKeyFailure } from '../auth/api-keys.ts';
import type { Authenticate, Credentials } from '../auth/authenticate.ts';
import {
  type CachedDecision,
  type CacheScope,
  cacheDirective,
  type DecisionCache,
  decisionKey,
} from '../cache/decision-cache.ts';
import type { RateLimiter } from '../rate-limit/rate-limiter.ts';
import {
  type KeyAuth,
  type Store,
  StoreUnavailableError,
  type TokenAuth,
  type UsageEntry,
} from '../store/store.ts';
import type { Route } from '../upstreams/route.ts';
import { costMicro, fromMicro, type Pricing } from './credits.ts';
import { isJsonMediaType } from './media-type.ts';
import { storeTroubleFailure } from './store-trouble.ts';

export interface EvaluationDeps {
  authenticate: Authenticate;
  /** Credits only: reserve, settle and release. Keys are checked by `authenticate`. */
  store: Store;
  /** The routes of the configuration, by name; one is `default` (SPEC §12). */
  routes: ReadonlyMap<string, Route>;
  /** The decision cache of routes that have one (SPEC §13). */
  cache?: DecisionCache;
  cacheScope?: CacheScope;
  /** Told of each cache outcome on a route with a cache, for metrics. */
  onCacheOutcome?(route: string, outcome: CacheOutcome): void;
  /** Told when an upstream reported more usage than was reserved: the excess is not charged (SPEC §7). */
  onDebitCapped?(route: string, excessMicro: number): void;
  /** STORE_TIMEOUT_MS: the longest one store call takes before it fails (SPEC §10). */
  storeTimeoutMs?: number;
  rateLimiter: RateLimiter;
  pricing: Pricing;
  /** Per-key default when a key has no limit of its own; 0 = off. */
  defaultRateLimitPerMinute: number;
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
  /** The `x-dg-route` header, when sent. */
  route?: string | undefined;
  /** The `Cache-Control` header, when sent. */
  cacheControl?: string | undefined;
  /** The `Origin` header: a browser's request (SPEC §14). */
  origin?: string | undefined;
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
  /** The route taken, once known. */
  route?: string;
  /** On a route with a decision cache. */
  cache?: CacheOutcome;
  /** The upstream(s) that answered, by configured name (`a+b` after an escalation). */
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
  /** On a route with a decision cache (SPEC §13). */
  cache?: 'hit' | 'miss' | 'bypass';
  /** A hit: whole seconds since the decision was stored. */
  age?: number;
}

/** A hit, an identical request's answer waited for, a miss, or a lookup skipped by Cache-Control. */
export type CacheOutcome = 'hit' | 'coalesced' | 'miss' | 'bypass';

export type EvaluationOutcome =
  | { ok: true; data: EvaluationData; meta: ResponseMeta; log: EvaluationLog }
  | { ok: false; failure: GatewayFailure; meta: ResponseMeta; log: EvaluationLog };

/**
 * A reservation lives from its own store call through the route's upstream calls to the settle,
 * each store call bounded by the store's deadline: never longer than the longest route deadline
 * plus two store deadlines. One older than that (and a second of slack) was left by a crashed
 * process: from then on it counts nowhere (SPEC §7). A store that stalls cannot make a live
 * reservation look stale, since the calls around it end by their deadlines.
 */
const staleAfterMs = (longestDeadlineMs: number, storeTimeoutMs: number) =>
  longestDeadlineMs + 2 * storeTimeoutMs + 1_000;

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

/** Who pays for a request: its key, and the browser token it came with, if any (SPEC §14). */
interface Payer extends KeyAuth {
  token: TokenAuth['token'] | null;
  /** Read from authentication's cache and not yet confirmed against the store (SPEC §5). */
  unconfirmed: boolean;
}

/** A request between its reservation and its settlement. */
interface Flight {
  call: EvaluationCall;
  key: Payer;
  reservationId: string | null;
  questions: number;
  route: string;
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
  const longestDeadlineMs = Math.max(...[...deps.routes.values()].map((route) => route.spec.deadlineMs));
  const staleAfter = staleAfterMs(longestDeadlineMs, deps.storeTimeoutMs ?? 2_000);
  const staleBefore = (now: number) => now - staleAfter;
  /** Decisions being asked now, by cache key: identical requests wait for the first (SPEC §13). */
  const leaders = new Map<string, Promise<CachedDecision | undefined>>();

  async function fail(
    call: EvaluationCall,
    key: Payer | undefined,
    error: GatewayFailure,
    log: EvaluationLog,
    reservationId: string | null = null,
  ): Promise<EvaluationOutcome> {
    // A key from the cache may have been revoked since: then that is the answer, with no record.
    const refused = key && (await confirm(call, key));
    if (refused) return { ok: false, failure: refused, meta: { requestId: call.requestId }, log };
    if (key && !abandoned(call.requestId)) {
      await deps.store.release(
        reservationId,
        usageEntry(call, key, NO_USAGE, 0, error.status, log.questions ?? 0, { route: log.route ?? null }),
      );
    }
    return { ok: false, failure: error, meta: metaOf(call, log), log };
  }

  function usageEntry(
    call: EvaluationCall,
    key: Payer,
    usage: Usage,
    creditsMicro: number,
    status: number,
    questions: number,
    /** Where it went: its route once known, the upstream that answered, whether from the cache. */
    where: { route: string | null; upstream?: string | null; cached?: boolean },
  ): UsageEntry {
    return {
      requestId: call.requestId,
      keyId: key.id,
      tokenId: key.token?.id ?? null,
      subject: key.token?.subject ?? null,
      creditsMicro,
      inputTokens: usage.input_tokens,
      outputTokens: usage.output_tokens,
      questions,
      status,
      elapsedMs: Math.round(performance.now() - call.startedAt),
      at: clock(),
      route: where.route,
      upstream: where.upstream ?? null,
      cached: where.cached ?? false,
    };
  }

  /** The credentials a request showed, for authentication. */
  const credentialsOf = (call: EvaluationCall, cached: boolean): Credentials => ({
    authorization: call.authorization,
    origin: call.origin,
    cached,
  });

  /**
   * A key read from authentication's cache, read again from the store before any answer that the
   * reservation did not confirm: its refusal if it was revoked or has expired, else undefined.
   */
  async function confirm(call: EvaluationCall, key: Payer): Promise<GatewayFailure | undefined> {
    if (!key.unconfirmed) return undefined;
    const fresh = await deps.authenticate(credentialsOf(call, false));
    if (!fresh.ok) return fresh.failure;
    key.unconfirmed = false;
    return undefined;
  }

  async function evaluate(call: EvaluationCall): Promise<EvaluationOutcome> {
    const log: EvaluationLog = {};
    const payer: { key?: Payer } = {};
    try {
      return await evaluateLogged(call, log, payer);
    } catch (error) {
      // Storage trouble is never a 500 (SPEC §10): the caller may try again shortly.
      const unavailable = storeTroubleFailure(error);
      if (!unavailable) throw error;
      deps.logger.warn({ err: error, requestId: call.requestId }, 'the store is unavailable');
      log.reason = (error as Error).message;
      // Whatever the store did or did not do for this request, it ends as a failure: recorded
      // once the store answers again, its hold freed, and its debit undone should a settle whose
      // answer was lost have gone through.
      if (payer.key && !abandoned(call.requestId))
        releaseEventually(
          usageEntry(call, payer.key, NO_USAGE, 0, 503, log.questions ?? 0, { route: log.route ?? null }),
        );
      return { ok: false, failure: unavailable, meta: metaOf(call, log), log };
    }
  }

  /**
   * Release a failed request in the background until the store takes it (SPEC §§4, 7): retried
   * with growing waits while the store is unavailable, for at most RECONCILE.giveUpAfterMs.
   */
  function releaseEventually(entry: UsageEntry) {
    const started = clock();
    let waitMs: number = RECONCILE.firstWaitMs;
    const attempt = () => {
      deps.store.release(null, entry).then(
        () =>
          deps.logger.info(
            { requestId: entry.requestId },
            'recorded a request the store could not take in time',
          ),
        (error: unknown) => {
          if (!(error instanceof StoreUnavailableError) || clock() - started > RECONCILE.giveUpAfterMs) {
            deps.logger.error(
              { err: error, requestId: entry.requestId },
              'could not record a failed request',
            );
            return;
          }
          setTimeout(attempt, waitMs).unref();
          waitMs = Math.min(RECONCILE.maxWaitMs, waitMs * 2);
        },
      );
    };
    setTimeout(attempt, waitMs).unref();
  }

  async function evaluateLogged(
    call: EvaluationCall,
    log: EvaluationLog,
    payer: { key?: Payer },
  ): Promise<EvaluationOutcome> {
    const auth = await deps.authenticate(credentialsOf(call, true));
    if (!auth.ok) return { ok: false, failure: auth.failure, meta: { requestId: call.requestId }, log };
    const { principal } = auth;
    const key: Payer = {
      ...principal.key,
      token: principal.kind === 'token' ? principal.token : null,
      unconfirmed: auth.fromCache,
    };
    payer.key = key;
    log.keyPrefix = key.prefix;

    // The key's bucket for every request; a token's own bucket on top of it (SPEC §14).
    const limit = key.rateLimitPerMinute ?? deps.defaultRateLimitPerMinute;
    const overKey = limit > 0 ? await overLimit(key.id, limit, 'the key') : undefined;
    if (overKey) return fail(call, key, overKey, log);
    const tokenLimit = key.token?.rateLimitPerMinute;
    const overToken =
      key.token && tokenLimit ? await overLimit(`token:${key.token.id}`, tokenLimit, 'the token') : undefined;
    if (overToken) return fail(call, key, overToken, log);

    // Bytes are read at once; only a lazy body (tRPC) waits.
    const body = call.body.kind === 'bytes' ? readBytes(call.body) : await readLazy(call.body);
    if (!body.ok) return fail(call, key, body.error, log);
    const parsed = parseEvaluationRequest(body.value);
    // SPEC §4's order: 40002 → 40003 → 40004 (the route) → 40001.
    if (!parsed.ok && parsed.error.code !== 40001) return fail(call, key, parsed.error, log);
    // A token's route always wins; else the header, the key's route, `default` (SPEC §§12, 14).
    const routeName = key.token?.route ?? call.route ?? key.route ?? 'default';
    const route = deps.routes.get(routeName);
    if (route === undefined) return fail(call, key, unknownRoute(routeName, deps.routes), log);
    log.route = routeName;
    const cache = route.spec.cacheTtlSeconds > 0 ? deps.cache : undefined;
    const directive = cache ? cacheDirective(call.cacheControl) : undefined;
    if (cache) log.cache = directive === undefined ? 'miss' : 'bypass';
    if (!parsed.ok) return fail(call, key, parsed.error, log);
    const request = parsed.value;
    log.questions = Object.keys(request.questions).length;
    log.questionTypes = {};
    for (const question of Object.values(request.questions)) {
      log.questionTypes[question.type] = (log.questionTypes[question.type] ?? 0) + 1;
    }

    // Awaited, not returned: an async function returning a promise pays two more microtasks.
    if (!cache) return await paid(call, key, route, request, body.bytes, log);
    // After validation and the rate limit, before any credit is held: a hit needs none.
    const cacheKey = decisionKey(deps.cacheScope ?? 'key', key.id, routeName, request);
    if (directive === undefined) {
      const found = await cache.get(cacheKey);
      if (found) return served(call, key, found, log, 'hit');
      const leader = leaders.get(cacheKey.hash);
      if (leader) {
        // Never past this request's own deadline; if the first fails, this one goes on by itself.
        const led = await withinMs(leader, route.spec.deadlineMs);
        if (led) return served(call, key, led, log, 'coalesced');
      }
    }
    deps.onCacheOutcome?.(routeName, directive === undefined ? 'miss' : 'bypass');
    let resolveLeader: ((decision: CachedDecision | undefined) => void) | undefined;
    if (directive === undefined && !leaders.has(cacheKey.hash)) {
      leaders.set(cacheKey.hash, new Promise((resolve) => (resolveLeader = resolve)));
    }
    try {
      const outcome = await paid(call, key, route, request, body.bytes, log);
      if (!outcome.ok) return outcome;
      // Only successful decisions, after their settlement.
      const decision = {
        answers: outcome.data.result.answers,
        upstream: outcome.meta.upstream ?? '',
        storedAt: clock(),
      };
      if (directive !== 'no-store') await cache.set(cacheKey, decision, route.spec.cacheTtlSeconds);
      resolveLeader?.(decision);
      return outcome;
    } finally {
      if (resolveLeader) {
        resolveLeader(undefined);
        leaders.delete(cacheKey.hash);
      }
    }
  }

  /** 429 when `bucket` has no token left for this request, else undefined. */
  async function overLimit(
    bucket: string,
    perMinute: number,
    whose: string,
  ): Promise<GatewayFailure | undefined> {
    const decision = await deps.rateLimiter.take(bucket, perMinute, clock());
    if (decision.ok) return undefined;
    const message = `${whose} is over its rate limit of ${perMinute} requests per minute`;
    return failure('rate_limited', message, { retryAfterMs: decision.retryAfterMs });
  }

  /** A decision from the cache (or an identical request's): nothing spent, a usage record all the same. */
  async function served(
    call: EvaluationCall,
    key: Payer,
    decision: CachedDecision,
    log: EvaluationLog,
    how: 'hit' | 'coalesced',
  ): Promise<EvaluationOutcome> {
    const refused = await confirm(call, key);
    if (refused) return { ok: false, failure: refused, meta: { requestId: call.requestId }, log };
    log.cache = how;
    log.upstream = decision.upstream;
    log.usage = NO_USAGE;
    log.creditsUsed = 0;
    const route = log.route as string;
    await deps.store.release(
      null,
      usageEntry(call, key, NO_USAGE, 0, 200, log.questions ?? 0, {
        route,
        upstream: decision.upstream,
        cached: true,
      }),
    );
    deps.onCacheOutcome?.(route, how);
    const age = Math.max(0, Math.floor((clock() - decision.storedAt) / 1000));
    return {
      ok: true,
      log,
      meta: {
        requestId: call.requestId,
        route,
        upstream: decision.upstream,
        creditsUsed: 0,
        cache: 'hit',
        age,
      },
      data: {
        result: {
          model: MODEL_ID,
          answers: decision.answers,
          usage: NO_USAGE,
          elapsedMs: Math.round(performance.now() - call.startedAt),
        },
        creditsUsed: 0,
      },
    };
  }

  /** Reserve, ask the route's upstreams, settle: the path of every request that is not a hit. */
  async function paid(
    call: EvaluationCall,
    key: Payer,
    route: Route,
    request: EvaluationRequest,
    bodyBytes: number,
    log: EvaluationLog,
  ): Promise<EvaluationOutcome> {
    const routeName = route.spec.name;
    const bound = costMicro(route.usageBound(request, bodyBytes), deps.pricing);
    const now = clock();
    const reservation = await deps.store.reserve(
      key.id,
      call.requestId,
      bound,
      now,
      staleBefore(now),
      key.token?.id,
    );
    if (!reservation.ok && reservation.code === 'key_refused') {
      // Revoked or expired since authentication read it: refused as authentication words it.
      key.unconfirmed = true;
      const refused = (await confirm(call, key)) ?? refusedKeyFailure(reservation.reason);
      return { ok: false, failure: refused, meta: { requestId: call.requestId }, log };
    }
    key.unconfirmed = false;
    if (!reservation.ok) {
      const error = failure(
        'insufficient_credits',
        `this request may cost up to ${fromMicro(bound)} credits; ${key.token?.maxCreditsMicro ? 'the token (or its key)' : 'the key'} has ${fromMicro(reservation.availableMicro)} available`,
      );
      return fail(call, key, error, log);
    }

    flights.set(call.requestId, {
      call,
      key,
      reservationId: reservation.reservationId,
      questions: log.questions ?? 0,
      route: routeName,
      abandoned: false,
      settling: false,
    });
    try {
      return await answer(call, key, route, request, bodyBytes, bound, reservation.reservationId, log);
    } catch (error) {
      // The store cannot be reached: its hold goes stale by itself (SPEC §7), no release is tried.
      if (error instanceof StoreUnavailableError) throw error;
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
          usageEntry(flight.call, flight.key, none, 0, 503, flight.questions, { route: flight.route }),
        ),
      ),
    );
    return pending.length;
  }

  async function answer(
    call: EvaluationCall,
    key: Payer,
    route: Route,
    request: EvaluationRequest,
    bodyBytes: number,
    boundMicro: number,
    reservationId: string | null,
    log: EvaluationLog,
  ): Promise<EvaluationOutcome> {
    const upstreamStart = performance.now();
    const outcome = await route.answer({
      request,
      bodyBytes,
      requestId: call.requestId,
      deadlineAt: clock() + route.spec.deadlineMs,
    });
    log.upstreamMs = performance.now() - upstreamStart;
    log.upstreamOutcome = 'error';
    if (!outcome.ok) {
      if (outcome.detail) log.reason = outcome.detail;
      return fail(call, key, outcome.failure, log, reservationId);
    }
    const flight = flights.get(call.requestId);
    if (flight?.abandoned) {
      // The shutdown released this request's hold while the upstream answered: it is not charged.
      const error = failure('unavailable', 'the gateway shut down before the answer');
      return { ok: false, failure: error, meta: metaOf(call, log), log };
    }
    if (flight) flight.settling = true;
    log.upstreamOutcome = 'ok';
    log.upstream = outcome.upstream;
    log.usage = outcome.usage;
    if (outcome.upstreamRequestId !== undefined) log.upstreamRequestId = outcome.upstreamRequestId;
    if (outcome.labelMass !== undefined) log.labelMass = outcome.labelMass;
    // Never more than was reserved: an upstream reporting more is charged the reservation (SPEC §7).
    const reported = costMicro(outcome.usage, deps.pricing);
    const cost = Math.min(reported, boundMicro);
    if (reported > boundMicro) {
      deps.onDebitCapped?.(route.spec.name, reported - boundMicro);
      deps.logger.warn(
        {
          requestId: call.requestId,
          upstream: outcome.upstream,
          usage: outcome.usage,
          reservedMicro: boundMicro,
          reportedMicro: reported,
        },
        'the upstream reported more usage than was reserved; the reservation was charged',
      );
    }
    const entry = usageEntry(call, key, outcome.usage, cost, 200, log.questions ?? 0, {
      route: log.route ?? null,
      upstream: outcome.upstream,
    });
    const debited = await deps.store.settle(reservationId, entry, staleBefore(clock()));
    const creditsUsed = fromMicro(debited);
    log.creditsUsed = creditsUsed;
    return {
      ok: true,
      log,
      meta: metaOf(call, log, creditsUsed),
      data: {
        result: {
          model: MODEL_ID,
          answers: outcome.answers,
          usage: outcome.usage,
          elapsedMs: Math.round(performance.now() - call.startedAt),
        },
        creditsUsed,
      },
    };
  }

  return { evaluate, abandonInFlight };
}

const NO_USAGE: Usage = { input_tokens: 0, output_tokens: 0 };

/** How a failed request is recorded once the store is back: waits from 250 ms to 5 s, for 15 minutes. */
const RECONCILE = { firstWaitMs: 250, maxWaitMs: 5_000, giveUpAfterMs: 15 * 60_000 } as const;

/** What the response says of the evaluation so far: the route once known, the upstream once one answered. */
function metaOf(call: EvaluationCall, log: EvaluationLog, creditsUsed?: number): ResponseMeta {
  const meta: ResponseMeta = { requestId: call.requestId };
  if (creditsUsed !== undefined) meta.creditsUsed = creditsUsed;
  if (log.route !== undefined) meta.route = log.route;
  if (log.cache !== undefined) meta.cache = log.cache === 'coalesced' ? 'hit' : log.cache;
  if (log.upstreamOutcome === 'ok' && log.upstream !== undefined) meta.upstream = log.upstream;
  return meta;
}

/** The promise's value, or undefined once `ms` have passed without one. */
async function withinMs<T>(promise: Promise<T | undefined>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** 40004: the route asked for (by header or by the key) is not in the configuration. */
function unknownRoute(name: string, routes: ReadonlyMap<string, Route>): GatewayFailure {
  const defined = [...routes.keys()].sort().join(', ');
  return failure('unknown_route', `no route named "${name.slice(0, 64)}"; the routes are: ${defined}`);
}

type ReadBody = { ok: true; value: unknown; bytes: number } | { ok: false; error: GatewayFailure };

/** Media type (41500) before JSON (40000), in SPEC §4's order, on every door. */
function mediaTypeFailure(contentType: string | undefined): ReadBody | undefined {
  if (isJsonMediaType(contentType)) return undefined;
  const sent = contentType === undefined ? 'no Content-Type' : `Content-Type "${contentType.slice(0, 100)}"`;
  return {
    ok: false,
    error: failure('unsupported_media_type', `send Content-Type: application/json (got ${sent})`),
  };
}

function readBytes(body: Extract<EvaluationBody, { kind: 'bytes' }>): ReadBody {
  const refused = mediaTypeFailure(body.contentType);
  if (refused) return refused;
  const decoded = decodeJsonBody(body.bytes);
  return decoded.ok ? { ok: true, value: decoded.value, bytes: body.bytes?.length ?? 0 } : decoded;
}

async function readLazy(body: Extract<EvaluationBody, { kind: 'lazy' }>): Promise<ReadBody> {
  const refused = mediaTypeFailure(body.contentType);
  if (refused) return refused;
  const read = await body.read();
  return read.ok ? { ok: true, value: read.value, bytes: body.bytes } : read;
}
