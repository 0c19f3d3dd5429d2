import type { Socket } from 'node:net';
import { failure, type UpstreamHealth } from '@decision-gateway/contract';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyRequest,
  LogController,
} from 'fastify';
import type { Logger } from 'pino';
import type { Authenticate } from '../auth/authenticate.ts';
import type { TokenService } from '../auth/tokens.ts';
import type { BudgetService } from '../budgets/budget-service.ts';
import type { DecisionCache } from '../cache/decision-cache.ts';
import type { CalibrationMaps } from '../calibration-maps/maps-service.ts';
import type { Evaluator } from '../core/evaluation/index.ts';
import { adminDoor } from '../doors/admin.ts';
import { createCallerActions } from '../doors/caller-actions.ts';
import { consoleDoor } from '../doors/console.ts';
import { door, doorOf, notFound, sendFailure } from '../doors/door.ts';
import type { DoorOutcome, EvaluationReport } from '../doors/door-outcome.ts';
import { geminiDoor } from '../doors/gemini/index.ts';
import { mcpDoor } from '../doors/mcp/index.ts';
import type { SessionLimits } from '../doors/mcp/sessions.ts';
import { openAiDoor } from '../doors/openai/index.ts';
import { operationsDoor } from '../doors/operations.ts';
import { nativeDoor, restDoor } from '../doors/raw-body-door.ts';
import { trpcDoor } from '../doors/trpc.ts';
import type { KeyService } from '../keys/key-service.ts';
import type { GatewayMetrics } from '../metrics.ts';
import type { Outcomes } from '../outcomes/outcome-service.ts';
import type { RateLimiter } from '../rate-limit/rate-limiter.ts';
import type { Reviews } from '../reviews/review-service.ts';
import type { Store } from '../store/store.ts';
import { endAbandonedSpan, traceRequests } from '../telemetry/request-spans.ts';
import { traceIdsOf, tracingOn } from '../telemetry/spans.ts';
import type { UsageReports } from '../usage/reports.ts';
import { createConnections, newRequestId } from './connections.ts';
import { closeLingering } from './lingering-close.ts';
import { copyListener } from './listener-copies.ts';
import { createPathTable } from './path-table.ts';

export interface Gateway {
  app: FastifyInstance;
  /** The services it was built from (key creation for the bootstrap key and tests). */
  services: GatewayServices;
  /**
   * Stop accepting, let in-flight requests finish and settle, answer 503 to what still arrives on
   * open connections, then close. Past SHUTDOWN_TIMEOUT_MS every connection is closed and every
   * reservation still held is released. Resolves `true` when it had to force that.
   */
  drain(): Promise<boolean>;
  /**
   * Once listening: take in up to `perTurn` new connections each turn of the event loop rather than
   * one (ACCEPTS_PER_TURN; listener-copies.ts). Rejects, accepting one a turn as before, if the
   * listening socket could not be copied.
   */
  acceptPerTurn(perTurn: number, backlog: number): Promise<void>;
}

/**
 * The gateway's HTTP server: the doors (each a plugin that owns its format) over the services the
 * composition root (`app.ts`) built, plus the hooks every request passes: its id, the drain, the
 * log line and metrics.
 */
/** The services the server and its doors are given, each built once by the composition root (app.ts). */
export interface GatewayServices {
  logger: Logger;
  metrics: GatewayMetrics;
  store: Store;
  rateLimiter: RateLimiter;
  authenticate: Authenticate;
  evaluator: Evaluator;
  tokens: TokenService;
  keys: KeyService;
  /** Projects and budgets (docs/budgets.md). */
  budgets: BudgetService;
  /** Usage series and summaries, from the rollups (docs/usage.md). */
  reports: UsageReports;
  /** Outcomes callers report, and the calibration measured from them (docs/outcomes.md). */
  outcomes: Outcomes;
  /** The calibration maps fitted from those outcomes (docs/calibration-maps.md). */
  calibrationMaps: CalibrationMaps;
  /** Review items, and reviewers' truths (docs/review.md). */
  reviews: Reviews;
  /** RATE_LIMIT_PER_MINUTE, and the clock of keys and rate limits: for what callers do besides evaluating. */
  defaultRateLimitPerMinute: number;
  clock: () => number;
  cache: DecisionCache | undefined;
  corsOrigins: readonly string[];
  adminToken: string | undefined;
  consoleRoot: string | undefined;
  upstreamHealth(): UpstreamHealth;
  timeouts: { requestMs: number; shutdownMs: number };
  /** The MCP door's session bounds (MCP_MAX_SESSIONS; the idle time for tests). */
  mcpSessions: Partial<SessionLimits>;
}

export function buildServer(services: GatewayServices): Gateway {
  const state = { draining: false };
  const { metrics, logger } = services;
  const connections = createConnections({
    requestTimeoutMs: services.timeouts.requestMs,
    shutdownTimeoutMs: services.timeouts.shutdownMs,
    logger,
    onAnswered(status, code) {
      metrics.requests.inc({ route: 'unmatched', method: '', status, code: String(code) });
    },
    onAbandoned: (request) => abandoned(request),
    doorOf,
  });
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
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
  // The refit thread and the maps' timers end with the server.
  app.addHook('onClose', () => services.calibrationMaps.close());
  const paths = createPathTable(app);
  // First, so that a request answered by the hooks below (a drain's 503) has its span too.
  if (tracingOn()) traceRequests(app, doorOf);

  // Outside the doors that read bodies (which set their own parsers), a body is never read: an
  // unknown path or a wrong method is answered 404/405 first, whatever it carries (docs/http-api.md#errors).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined));

  app.decorateRequest('startedAt', 0);
  app.decorateRequest('outcome', undefined);
  app.decorateRequest('accounted', false);

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
  // clients let go and the server can finish closing instead of waiting out idle sockets. A 503
  // answered before its body was all read closes lingering: closed at once, the body still
  // arriving would reset the connection, and the client would lose the 503.
  app.addHook('onSend', (request, reply, payload, done) => {
    if (state.draining) {
      reply.header('connection', 'close');
      if (!request.raw.complete) closeLingering(request.raw.socket as Socket);
    }
    // What the gateway itself added to this request: everything but the upstream call.
    const overhead = performance.now() - request.startedAt - upstreamMsOf(request.outcome);
    reply.header('x-gateway-overhead-ms', overhead.toFixed(3));
    done(null, payload);
  });

  /**
   * A request whose client went away before its answer was written, in the middle of its body
   * (Fastify's onRequestAbort) or while the gateway worked on it (its connection closed,
   * connections.ts), or that was answered below the router (408): it gets no onResponse. It leaves
   * the in-flight count here, once, says so in the log, and its SERVER span ends as aborted. Its
   * evaluation, if one began, runs on and is recorded as any other.
   */
  function abandoned(request: FastifyRequest) {
    if (request.accounted) return;
    request.accounted = true;
    metrics.inFlight.dec();
    endAbandonedSpan(request);
    if (request.outcome?.belowRouter !== true)
      request.log.info(
        {
          method: request.method,
          path: request.url.split('?', 1)[0],
          elapsedMs: Math.round(performance.now() - request.startedAt),
          ...(request.traceParent && traceIdsOf(request.traceParent)),
        },
        'request aborted by the client',
      );
  }
  app.addHook('onRequestAbort', (request, done) => {
    abandoned(request);
    done();
  });

  // One line per request, with what the evaluation said about itself; never a key or token.
  app.addHook('onResponse', (request, reply, done) => {
    if (request.accounted) return done();
    request.accounted = true;
    const evaluations = request.outcome?.evaluations ?? [];
    const code = request.outcome?.code;
    // The route pattern; a 405 by the path it matched; a tRPC call by its procedure.
    const route = request.outcome?.route ?? request.routeOptions.url ?? paths.patternFor(request.url);
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
        // While tracing: the SERVER span's ids (docs/tracing.md).
        ...(request.traceParent && traceIdsOf(request.traceParent)),
      },
      'request',
    );
    done();
  });

  // Paths outside every door's prefix: answered in the REST envelope.
  door(app, 'rest', { methodsFor: paths.methodsFor, ownsNotFound: false });
  app.setNotFoundHandler(async (request, reply) =>
    sendFailure(reply, notFound(request, reply, paths), 'rest'),
  );

  // Each door in its own plugin scope: it owns its format, and knows only the services it is given.
  const { evaluator, tokens, corsOrigins } = services;
  const doorOptions = {
    evaluate: evaluator.evaluate,
    callers: createCallerActions(services),
    corsOrigins,
    methodsFor: paths.methodsFor,
  };
  app.register(restDoor, doorOptions);
  app.register(trpcDoor, { ...doorOptions, prefix: '/trpc' });
  app.register(nativeDoor, { ...doorOptions, prefix: '/native' });
  app.register(openAiDoor, { ...doorOptions, prefix: '/openai/v1' });
  app.register(geminiDoor, { ...doorOptions, prefix: '/gemini' });
  app.register(mcpDoor, {
    ...doorOptions,
    prefix: '/mcp',
    authenticate: services.authenticate,
    sessions: services.mcpSessions,
  });
  if (services.adminToken !== undefined) {
    app.register(consoleDoor, {
      prefix: '/console',
      methodsFor: paths.methodsFor,
      ...(services.consoleRoot !== undefined && { root: services.consoleRoot }),
    });
    app.register(adminDoor, {
      adminToken: services.adminToken,
      keys: services.keys,
      budgets: services.budgets,
      reports: services.reports,
      outcomes: services.outcomes,
      calibrationMaps: services.calibrationMaps,
      reviews: services.reviews,
      tokens,
      ...(services.cache && { cache: services.cache }),
      upstreams: services.upstreamHealth,
      methodsFor: paths.methodsFor,
    });
  }
  app.register(operationsDoor, {
    metrics,
    methodsFor: paths.methodsFor,
    readiness: () => readinessProblem(services.store, services.rateLimiter),
    documentedRoutes: paths.documented,
  });

  return {
    app,
    services,
    async drain() {
      state.draining = true;
      const forced = await connections.drain(async () => {
        const released = await evaluator.abandonInFlight();
        logger.warn({ released }, 'released the reservations of unfinished requests');
      });
      await app.close();
      return forced;
    },
    async acceptPerTurn(perTurn, backlog) {
      connections.adoptListenerCopies(await copyListener(app.server, perTurn - 1, backlog));
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
    if (log.images) {
      metrics.images.inc(log.images);
      metrics.imageBytes.inc(log.imageBytes ?? 0);
    }
    if (log.creditsUsed) metrics.creditsDebited.add(log.creditsUsed);
    // Upstream calls are timed and counted by the route, one per attempt (routing/build-routes.ts).
    if (log.upstream !== undefined && log.labelMass !== undefined)
      metrics.labelMass.observe({ upstream: log.upstream }, log.labelMass);
  }
}
