import { failure } from '@decision-gateway/contract';
import type { Upstream } from '@decision-gateway/questions';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import type { Logger } from 'pino';
import { createAuthenticate } from '../auth/authenticate.ts';
import { createTokenService } from '../auth/tokens.ts';
import type { CacheScope, DecisionCache } from '../cache/decision-cache.ts';
import { TIMEOUT_DEFAULTS } from '../config.ts';
import type { Pricing } from '../core/credits.ts';
import { createEvaluator } from '../core/evaluation/index.ts';
import { createKeyService } from '../keys/key-service.ts';
import { createMetrics, type GatewayMetrics } from '../metrics.ts';
import { createMemoryRateLimiter, type RateLimiter } from '../rate-limit/rate-limiter.ts';
import type { Store } from '../store/store.ts';
import { trpcDoor } from '../trpc/trpc-door.ts';
import { createRoute, type Route } from '../upstreams/route.ts';
import { routeEvents, type UpstreamStats, upstreamHealth } from '../upstreams/routes.ts';
import { UPSTREAM_DEFAULTS } from '../upstreams/upstream-config.ts';
import { adminDoor } from './admin-routes.ts';
import { createConnections, newRequestId } from './connections.ts';
import { consoleDoor } from './console-door.ts';
import type { DoorOutcome, EvaluationReport } from './door-outcome.ts';
import { door, doorOf, notFound, sendFailure } from './doors.ts';
import { nativeDoor, restDoor } from './evaluation-routes.ts';
import { operationsDoor } from './operations-routes.ts';
import { createRouteTable } from './route-table.ts';

export interface GatewayOptions {
  store: Store;
  /** The routes of the configuration (SPEC §12), or else `upstream`… */
  routes?: ReadonlyMap<string, Route>;
  /** …one upstream, served as the route `default` with `upstreamTimeoutMs` per call. */
  upstream?: Upstream;
  logger: Logger;
  pricing: Pricing;
  rateLimitPerMinute: number;
  /** With `upstream`: the deadline of each call to it, and how long its route keeps a decision. */
  upstreamTimeoutMs?: number;
  cacheTtlSeconds?: number;
  adminToken?: string | undefined;
  rateLimiter?: RateLimiter;
  metrics?: GatewayMetrics;
  /** SPEC §10 STORE_TIMEOUT_MS (default 2000): how long one store call may take. */
  storeTimeoutMs?: number;
  /** SPEC §10 REQUEST_TIMEOUT_MS (default 30000). */
  requestTimeoutMs?: number;
  /** SPEC §10 SHUTDOWN_TIMEOUT_MS (default 30000). */
  shutdownTimeoutMs?: number;
  /** The core's clock (epoch ms): key expiry, rate limits and usage times all read it. */
  clock?: () => number;
  /** The decision cache of routes that have one (SPEC §13), and whose decisions it shares. */
  cache?: DecisionCache;
  cacheScope?: CacheScope;
  /** CORS_ORIGINS: browser origins that may call with tokens (SPEC §14). */
  corsOrigins?: readonly string[];
  /** Calls and failures per upstream, fed by the routes' events (`GET /admin/upstreams`). */
  upstreamStats?: UpstreamStats;
  /** The console's built files (default: apps/console/dist); served with ADMIN_TOKEN only. */
  consoleRoot?: string;
}

export interface Gateway {
  app: FastifyInstance;
  /**
   * Stop accepting, let in-flight requests finish and settle, answer 503 to what still arrives on
   * open connections, then close. Past SHUTDOWN_TIMEOUT_MS every connection is closed and every
   * reservation still held is released. Resolves `true` when it had to force that.
   */
  drain(): Promise<boolean>;
}

/** The gateway's HTTP service: REST and tRPC doors over one evaluation core, plus admin and health. */
export function buildGateway(options: GatewayOptions): Gateway {
  const state = { draining: false };
  const metrics = options.metrics ?? createMetrics();
  const connections = createConnections({
    requestTimeoutMs: options.requestTimeoutMs ?? TIMEOUT_DEFAULTS.requestMs,
    shutdownTimeoutMs: options.shutdownTimeoutMs ?? TIMEOUT_DEFAULTS.shutdownMs,
    logger: options.logger,
    onAnswered(status, code) {
      metrics.requests.inc({ route: 'unmatched', method: '', status, code: String(code) });
    },
    doorOf,
  });
  const app = Fastify({
    loggerInstance: options.logger as FastifyBaseLogger,
    // The gateway writes its own single line per request (onResponse below).
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'requestId' }),
    genReqId: newRequestId,
    keepAliveTimeout: 72_000,
    return503OnClosing: false,
    // The drain closes connections itself, so that none is cut while a request is on its way.
    forceCloseConnections: false,
    clientErrorHandler: connections.clientErrorHandler,
    ...connections.serverOptions(),
  });
  connections.attach(app);
  const routes = createRouteTable(app);

  // Outside the doors that read bodies (which set their own parsers), a body is never read: an
  // unknown path or a wrong method is answered 404/405 first, whatever it carries (SPEC §4).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined));

  app.decorateRequest('startedAt', 0);
  app.decorateRequest('outcome', undefined);
  /** Requests whose log line and metrics are done (by onResponse, or when aborted). */
  const finished = new WeakSet<object>();

  // The hooks take `done` rather than being async: they never wait, and every request runs them.
  app.addHook('onRequest', (request, reply, done) => {
    request.startedAt = performance.now();
    metrics.inFlight.inc();
    reply.header('x-request-id', request.id);
    if (request.raw.httpVersion === '1.1' && request.headers.host === undefined) {
      const noHost = failure('invalid_request', 'an HTTP/1.1 request needs a Host header');
      sendFailure(reply, noHost, doorOf(request));
      return;
    }
    if (state.draining && request.routeOptions.config?.servedWhileDraining !== true) {
      // Answered here, in the door's own format: the route never runs (Fastify's way to reply
      // from a hook is not to call done).
      const shuttingDown = failure('unavailable', 'the gateway is shutting down', { retryAfterMs: 1000 });
      sendFailure(reply, shuttingDown, doorOf(request));
      return;
    }
    done();
  });

  // While draining, every response (in-flight ones too) closes its connection, so keep-alive
  // clients let go and the server can finish closing instead of waiting out idle sockets.
  app.addHook('onSend', (request, reply, payload, done) => {
    if (state.draining) reply.header('connection', 'close');
    // What the gateway itself added to this request: everything but the upstream call.
    const overhead = performance.now() - request.startedAt - upstreamMsOf(request.outcome);
    reply.header('x-gateway-overhead-ms', overhead.toFixed(3));
    done(null, payload);
  });

  // One line per request, with what the evaluation said about itself; never a key or token.
  // A request whose client went away, or that was answered below the router (408), gets no
  // onResponse: it leaves the in-flight count here, once, and says so in the log.
  app.addHook('onRequestAbort', (request, done) => {
    if (finished.has(request)) return done();
    finished.add(request);
    metrics.inFlight.dec();
    if (request.outcome?.belowRouter !== true)
      request.log.info({ path: request.url.split('?', 1)[0] }, 'request aborted by the client');
    done();
  });

  app.addHook('onResponse', (request, reply, done) => {
    if (finished.has(request)) return done();
    finished.add(request);
    const evaluations = request.outcome?.evaluations ?? [];
    const code = request.outcome?.code;
    // The route pattern; a 405 by the path it matched; a tRPC call by its procedure.
    const route = request.outcome?.route ?? request.routeOptions.url ?? routes.patternFor(request.url);
    observe(metrics, route, request.method, reply.statusCode, code, request.startedAt, evaluations);
    // A tRPC batch's operations are listed one by one; a single evaluation's fields are inline.
    const log = evaluations.length === 1 ? evaluations[0]?.log : undefined;
    request.log.info(
      {
        method: request.method,
        path: request.url.split('?', 1)[0],
        status: reply.statusCode,
        code,
        operations:
          evaluations.length > 1
            ? evaluations.map((e) => ({ requestId: e.requestId, code: e.code, ...e.log }))
            : undefined,
        upstream: log?.upstream,
        keyPrefix: log?.keyPrefix,
        questions: log?.questions,
        inputTokens: log?.usage?.input_tokens,
        outputTokens: log?.usage?.output_tokens,
        creditsUsed: log?.creditsUsed,
        upstreamMs: log?.upstreamMs === undefined ? undefined : Math.round(log.upstreamMs),
        upstreamRequestId: log?.upstreamRequestId,
        labelMass: log?.labelMass,
        reason: log?.reason,
        elapsedMs: Math.round(performance.now() - request.startedAt),
      },
      'request',
    );
    done();
  });

  // Paths outside every door's prefix: answered in the REST envelope.
  door(app, 'rest', { methodsFor: routes.methodsFor, ownsNotFound: false });
  app.setNotFoundHandler(async (request, reply) =>
    sendFailure(reply, notFound(request, reply, routes), 'rest'),
  );

  const rateLimiter = options.rateLimiter ?? createMemoryRateLimiter();
  const clock = options.clock ?? Date.now;
  const corsOrigins = options.corsOrigins ?? [];
  const authenticate = createAuthenticate(options.store, clock, corsOrigins);
  const upstreamStats = options.upstreamStats ?? new Map();
  const routeTable = options.routes ?? singleRoute(options, metrics, upstreamStats);
  const evaluator = createEvaluator({
    authenticate,
    clock,
    store: options.store,
    routes: routeTable,
    ...(options.cache && { cache: options.cache, cacheScope: options.cacheScope ?? 'key' }),
    onCacheOutcome: (route, outcome) => metrics.cacheOutcomes.inc({ route, outcome }),
    onDebitCapped(route, excessMicro) {
      metrics.debitCapped.inc({ route });
      metrics.debitCappedMicroCredits.inc({ route }, excessMicro);
    },
    ...(options.storeTimeoutMs !== undefined && { storeTimeoutMs: options.storeTimeoutMs }),
    rateLimiter,
    pricing: options.pricing,
    defaultRateLimitPerMinute: options.rateLimitPerMinute,
    logger: options.logger,
  });

  // Each door in its own plugin scope: it owns its format, and knows only these two functions.
  const { evaluate } = evaluator;
  const tokens = createTokenService(options.store, clock, [...routeTable.keys()]);
  const doorOptions = { evaluate, authenticate, tokens, corsOrigins, methodsFor: routes.methodsFor };
  app.register(restDoor, doorOptions);
  app.register(trpcDoor, { ...doorOptions, prefix: '/trpc' });
  app.register(nativeDoor, { ...doorOptions, prefix: '/native' });
  if (options.adminToken !== undefined) {
    app.register(consoleDoor, {
      prefix: '/console',
      methodsFor: routes.methodsFor,
      ...(options.consoleRoot !== undefined && { root: options.consoleRoot }),
    });
    app.register(adminDoor, {
      adminToken: options.adminToken,
      keys: createKeyService(options.store, clock, [...routeTable.keys()]),
      tokens,
      ...(options.cache && { cache: options.cache }),
      upstreams: () => upstreamHealth(routeTable, upstreamStats),
      methodsFor: routes.methodsFor,
    });
  }
  app.register(operationsDoor, {
    metrics,
    methodsFor: routes.methodsFor,
    readiness: () => readinessProblem(options.store, rateLimiter),
  });

  return {
    app,
    async drain() {
      state.draining = true;
      const forced = await connections.drain(async () => {
        const released = await evaluator.abandonInFlight();
        options.logger.warn({ released }, 'released the reservations of unfinished requests');
      });
      await app.close();
      return forced;
    },
  };
}

/** Why the gateway cannot serve now, or undefined when it can. */
async function readinessProblem(store: Store, rateLimiter: RateLimiter): Promise<string | undefined> {
  try {
    await store.checkWritable();
  } catch (error) {
    return `the store cannot be written (${(error as Error).message})`;
  }
  try {
    await rateLimiter.checkReachable?.();
  } catch (error) {
    return `the rate limiter's Redis cannot be reached (${(error as Error).message})`;
  }
  return undefined;
}

/** The route `default` over one upstream, for a gateway built without a configuration file. */
function singleRoute(
  options: GatewayOptions,
  metrics: GatewayMetrics,
  stats: UpstreamStats,
): ReadonlyMap<string, Route> {
  if (options.upstream === undefined) throw new Error('buildGateway needs routes or an upstream');
  const timeoutMs = options.upstreamTimeoutMs ?? UPSTREAM_DEFAULTS.timeoutMs;
  const member = { upstream: options.upstream, timeoutMs };
  const spec = {
    name: 'default',
    members: [member],
    deadlineMs: 2 * timeoutMs,
    cacheTtlSeconds: options.cacheTtlSeconds ?? 0,
  };
  return new Map([
    ['default', createRoute(spec, { logger: options.logger, events: routeEvents(metrics, stats) })],
  ]);
}

/** How long the request waited on upstreams (every evaluation it ran). */
function upstreamMsOf(outcome: DoorOutcome | undefined): number {
  let total = 0;
  for (const evaluation of outcome?.evaluations ?? []) total += evaluation.log.upstreamMs ?? 0;
  return total;
}

/** Every metric a finished request feeds, in one place. */
function observe(
  metrics: GatewayMetrics,
  route: string | undefined,
  method: string,
  status: number,
  code: number | undefined,
  startedAt: number,
  evaluations: EvaluationReport[],
) {
  metrics.inFlight.dec();
  const routeLabel = route ?? 'unmatched';
  metrics.requests.inc({ route: routeLabel, method, status, code: code === undefined ? '' : String(code) });
  metrics.requestDuration.observe({ route: routeLabel }, (performance.now() - startedAt) / 1000);
  for (const { code: evaluationCode, log } of evaluations) {
    if (evaluationCode === 42900) metrics.rateLimited.inc();
    for (const [type, count] of Object.entries(log.questionTypes ?? {}))
      metrics.questions.inc({ type }, count);
    if (log.creditsUsed) metrics.creditsDebited.add(log.creditsUsed);
    // Upstream calls are timed and counted by the route, one per attempt (upstreams/routes.ts).
    if (log.upstream !== undefined && log.labelMass !== undefined)
      metrics.labelMass.observe({ upstream: log.upstream }, log.labelMass);
  }
}
