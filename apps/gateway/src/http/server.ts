import { failure, type GatewayFailure } from '@decision-gateway/contract';
import type { Upstream } from '@decision-gateway/questions';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  LogController,
} from 'fastify';
import type { Logger } from 'pino';
import type { Pricing } from '../core/credits.ts';
import { createEvaluator, type EvaluationLog } from '../core/evaluate.ts';
import { createKeyService } from '../keys/key-service.ts';
import { createMetrics, type GatewayMetrics } from '../metrics.ts';
import { createMemoryRateLimiter, type RateLimiter } from '../rate-limit/rate-limiter.ts';
import type { Store } from '../store/store.ts';
import { trpcErrorBody } from '../trpc/errors.ts';
import { trpcRoutes } from '../trpc/trpc-routes.ts';
import { adminRoutes } from './admin-routes.ts';
import { createConnections, newRequestId } from './connections.ts';
import { isNativePath, sendFailure, sendSuccess } from './envelope.ts';
import { evaluationRoutes, nativeRoutes } from './evaluation-routes.ts';
import { operationsRoutes } from './operations-routes.ts';
import './fastify-types.ts';
import { createRouteTable } from './route-table.ts';

export interface GatewayOptions {
  store: Store;
  upstream: Upstream;
  logger: Logger;
  pricing: Pricing;
  rateLimitPerMinute: number;
  upstreamTimeoutMs: number;
  adminToken?: string | undefined;
  rateLimiter?: RateLimiter;
  metrics?: GatewayMetrics;
  /** SPEC §10 REQUEST_TIMEOUT_MS (default 30000). */
  requestTimeoutMs?: number;
  /** SPEC §10 SHUTDOWN_TIMEOUT_MS (default 30000). */
  shutdownTimeoutMs?: number;
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

/** Fastify's own errors (body limits, media types, JSON) as gateway failures. */
function failureOfFastifyError(error: FastifyError): GatewayFailure | undefined {
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return failure('payload_too_large', 'the body is larger than 32768 bytes');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return failure('unsupported_media_type', 'send Content-Type: application/json');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return failure('invalid_json', 'the body does not match its Content-Length');
    case 'GATEWAY_INVALID_JSON':
      return failure('invalid_json', error.message);
    default:
      return undefined;
  }
}

/** The gateway's HTTP service: REST and tRPC doors over one evaluation core, plus admin and health. */
export function buildGateway(options: GatewayOptions): Gateway {
  const state = { draining: false };
  const metrics = options.metrics ?? createMetrics();
  const connections = createConnections({
    requestTimeoutMs: options.requestTimeoutMs ?? 30_000,
    shutdownTimeoutMs: options.shutdownTimeoutMs ?? 30_000,
    logger: options.logger,
    onAnswered(status, code) {
      metrics.requests.inc({ route: 'unmatched', method: '', status, code: String(code) });
    },
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
  app.decorateRequest('gatewayCode', undefined);
  app.decorateRequest('evaluationLog', undefined);
  app.decorateRequest('sentContentType', undefined);
  app.decorateRequest('answeredBelowRouter', false);
  app.decorateRequest('finished', false);

  // The hooks take `done` rather than being async: they never wait, and every request runs them.
  app.addHook('onRequest', (request, reply, done) => {
    request.startedAt = performance.now();
    metrics.inFlight.inc();
    reply.header('x-request-id', request.id);
    // The official SDKs read their request id from this header (SPEC §11).
    if (isNativePath(request.url)) reply.header('x-typesafe-request-id', request.id);
    if (state.draining && request.url !== '/healthz') {
      // Answered here: the route never runs (Fastify's way to reply from a hook is not to call done).
      sendFailure(reply, failure('unavailable', 'the gateway is shutting down', { retryAfterMs: 1000 }));
      return;
    }
    done();
  });

  // While draining, every response (in-flight ones too) closes its connection, so keep-alive
  // clients let go and the server can finish closing instead of waiting out idle sockets.
  app.addHook('onSend', (request, reply, payload, done) => {
    if (state.draining) reply.header('connection', 'close');
    // What the gateway itself added to this request: everything but the upstream call.
    const overhead = performance.now() - request.startedAt - (request.evaluationLog?.upstreamMs ?? 0);
    reply.header('x-gateway-overhead-ms', overhead.toFixed(3));
    done(null, payload);
  });

  // One line per request, with what the evaluation said about itself; never a key or token.
  // A request whose client went away, or that was answered below the router (408), gets no
  // onResponse: it leaves the in-flight count here, once, and says so in the log.
  app.addHook('onRequestAbort', (request, done) => {
    if (request.finished) return done();
    request.finished = true;
    metrics.inFlight.dec();
    if (!request.answeredBelowRouter)
      request.log.info({ path: request.url.split('?', 1)[0] }, 'request aborted by the client');
    done();
  });

  app.addHook('onResponse', (request, reply, done) => {
    if (request.finished) return done();
    request.finished = true;
    const log = request.evaluationLog;
    observe(
      metrics,
      options.upstream.name,
      request.routeOptions.url,
      request.method,
      reply.statusCode,
      request.gatewayCode,
      request.startedAt,
      log,
    );
    request.log.info(
      {
        method: request.method,
        path: request.url.split('?', 1)[0],
        status: reply.statusCode,
        code: request.gatewayCode,
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

  app.setNotFoundHandler(async (request, reply) => {
    const allowed = routes.methodsFor(request.url);
    if (allowed.length === 0) {
      return sendFailure(
        reply,
        failure('not_found', `no route for ${request.method} ${request.url.split('?', 1)[0]}`),
      );
    }
    reply.header('allow', allowed.join(', '));
    return sendFailure(
      reply,
      failure('method_not_allowed', `${request.method} is not allowed here; use ${allowed.join(', ')}`),
    );
  });

  app.setErrorHandler(async (error: FastifyError, request, reply) => {
    const known = failureOfFastifyError(error);
    // A body cut short because the client left (or a timeout answered it) is not the gateway's fault.
    const gone = request.answeredBelowRouter || request.raw.destroyed || error.code === 'ECONNRESET';
    if (!known && !gone) request.log.error({ err: error }, 'unhandled error');
    const gatewayFailure = known ?? failure('internal_error', 'internal error');
    if (request.url.startsWith('/trpc/')) {
      request.gatewayCode = gatewayFailure.code;
      return reply
        .code(gatewayFailure.status)
        .type('application/json')
        .send(trpcErrorBody(gatewayFailure, request.id));
    }
    return sendFailure(reply, gatewayFailure);
  });

  const rateLimiter = options.rateLimiter ?? createMemoryRateLimiter();
  const evaluator = createEvaluator({
    store: options.store,
    upstream: options.upstream,
    rateLimiter,
    pricing: options.pricing,
    defaultRateLimitPerMinute: options.rateLimitPerMinute,
    upstreamTimeoutMs: options.upstreamTimeoutMs,
    logger: options.logger,
  });

  const { evaluate } = evaluator;
  app.register(evaluationRoutes, { evaluate, store: options.store });
  app.register(trpcRoutes, { evaluate, store: options.store });
  app.register(nativeRoutes, { evaluate, store: options.store, prefix: '/native' });
  if (options.adminToken !== undefined) {
    app.register(adminRoutes, { adminToken: options.adminToken, keys: createKeyService(options.store) });
  }

  app.register(operationsRoutes, { metrics });

  app.get('/healthz', async (_request, reply) => sendSuccess(reply, { status: 'ok' }));
  // Readiness: the store can be written (and, on SQLite, is still the file it opened), and a shared
  // rate limiter's Redis answers. A change of state is logged once, not on every probe.
  let notReady: string | undefined;
  app.get('/readyz', async (request, reply) => {
    // While draining, the onRequest hook answers 503 before this route runs.
    const problem = await readinessProblem(options.store, rateLimiter);
    if (problem === undefined) {
      if (notReady !== undefined) request.log.info({ was: notReady }, 'ready again');
      notReady = undefined;
      return sendSuccess(reply, { status: 'ready' });
    }
    if (notReady !== problem) request.log.error({ problem }, 'not ready');
    notReady = problem;
    return sendFailure(reply, failure('unavailable', `not ready: ${problem}`, { retryAfterMs: 1000 }));
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

/** Every metric a finished request feeds, in one place. */
function observe(
  metrics: GatewayMetrics,
  upstreamName: string,
  route: string | undefined,
  method: string,
  status: number,
  code: number | undefined,
  startedAt: number,
  log: EvaluationLog | undefined,
) {
  metrics.inFlight.dec();
  const routeLabel = route ?? 'unmatched';
  metrics.requests.inc({ route: routeLabel, method, status, code: code === undefined ? '' : String(code) });
  metrics.requestDuration.observe({ route: routeLabel }, (performance.now() - startedAt) / 1000);
  if (code === 42900) metrics.rateLimited.inc();
  if (!log) return;
  for (const [type, count] of Object.entries(log.questionTypes ?? {})) metrics.questions.inc({ type }, count);
  if (log.creditsUsed) metrics.creditsDebited.inc(log.creditsUsed);
  if (log.labelMass !== undefined) metrics.labelMass.observe({ upstream: upstreamName }, log.labelMass);
  if (log.upstreamMs !== undefined && log.upstreamOutcome !== undefined) {
    metrics.upstreamDuration.observe(
      { upstream: upstreamName, outcome: log.upstreamOutcome },
      log.upstreamMs / 1000,
    );
  }
}
