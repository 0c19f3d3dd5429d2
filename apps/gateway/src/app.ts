import type { Logger } from 'pino';
import { createAuthenticate } from './auth/authenticate.ts';
import { createTokenService } from './auth/tokens.ts';
import { budgetEventReporter } from './budgets/budget-events.ts';
import { createBudgetService } from './budgets/budget-service.ts';
import type { CacheScope, DecisionCache } from './cache/decision-cache.ts';
import { createMemoryCache } from './cache/memory-cache.ts';
import { createRedisCache } from './cache/redis-cache.ts';
import { createCalibrationMaps } from './calibration-maps/maps-service.ts';
import { type Config, TIMEOUT_DEFAULTS } from './config/environment.ts';
import { type Pricing, pricingFromCredits } from './core/credits.ts';
import { createEvaluator } from './core/evaluation/index.ts';
import { staleAfterMs } from './core/evaluation/ledger.ts';
import type { SessionLimits } from './doors/mcp/sessions.ts';
import { buildServer, type Gateway, type GatewayServices } from './http/server.ts';
import { createImageBudget } from './images/image-budget.ts';
import { createKeyService } from './keys/key-service.ts';
import { warnAtMostEvery } from './logger.ts';
import { createMetrics, type GatewayMetrics } from './metrics.ts';
import { createOutcomes, escalatingRoutes } from './outcomes/outcome-service.ts';
import { createMemoryRateLimiter, type RateLimiter } from './rate-limit/rate-limiter.ts';
import { createRedisRateLimiter } from './rate-limit/redis-rate-limiter.ts';
import { createReviews } from './reviews/review-service.ts';
import { buildRoutes, type UpstreamStats, upstreamHealth } from './routing/build-routes.ts';
import type { Route } from './routing/route.ts';
import { openStore } from './store/open-store.ts';
import type { Store } from './store/store.ts';
import { createUpstreamRegistry } from './upstreams/registry.ts';
import { decisionRetention, reviewRetention, startMaintenance, usageRetention } from './usage/maintenance.ts';
import { createUsageReports } from './usage/reports.ts';

/**
 * The composition root: every service of the gateway is built here, once, and handed to the
 * server and its doors. `openGateway` builds them from the validated configuration, as `pnpm
 * start` does; `composeGateway` from parts already made (a test's store or routes).
 */

/** What the gateway is composed of; everything but the store, the routes and the logger has a default. */
export interface GatewayParts {
  store: Store;
  /** The routes of the configuration, by name; one is `default` (docs/routes.md). */
  routes: ReadonlyMap<string, Route>;
  logger: Logger;
  pricing: Pricing;
  /** RATE_LIMIT_PER_MINUTE: each key's default; 0 = off. */
  rateLimitPerMinute: number;
  adminToken?: string | undefined;
  rateLimiter?: RateLimiter;
  metrics?: GatewayMetrics;
  /** STORE_TIMEOUT_MS (default 2000). */
  storeTimeoutMs?: number;
  /** REQUEST_TIMEOUT_MS and SHUTDOWN_TIMEOUT_MS (default 30000 each). */
  requestTimeoutMs?: number;
  shutdownTimeoutMs?: number;
  /** The clock of keys, tokens, rate limits and usage (epoch ms). */
  clock?: () => number;
  /** The decision cache of routes that keep decisions, and whose decisions it shares. */
  cache?: DecisionCache;
  cacheScope?: CacheScope;
  /** CORS_ORIGINS: browser origins that may call with tokens (docs/browsers.md). */
  corsOrigins?: readonly string[];
  /** Calls and failures per upstream, fed by the routes' events (`GET /admin/upstreams`). */
  upstreamStats?: UpstreamStats;
  /** The console's built files (default: apps/console/dist); served with ADMIN_TOKEN only. */
  consoleRoot?: string;
  /** DECISION_RETENTION_DAYS (default 30): how long decisions are kept for outcomes; 0 keeps none. */
  decisionRetentionDays?: number;
  /** MCP_MAX_SESSIONS (default 1000) and how long an MCP session may stay idle (default 10 minutes). */
  mcpSessions?: Partial<SessionLimits>;
  /** IMAGE_BYTES_IN_FLIGHT (default 268435456): image bytes requests in flight may hold together. */
  imageBytesInFlight?: number;
  /**
   * CALIBRATION_REFIT_MINUTES (60), CALIBRATION_WINDOW_DAYS (30), CALIBRATION_MIN_OUTCOMES (200), and
   * how often the active maps are read again (30 s) (docs/calibration-maps.md).
   */
  calibration?: Partial<{ refitMinutes: number; windowDays: number; minOutcomes: number; reloadMs: number }>;
}

export function createServices(parts: GatewayParts): GatewayServices {
  const clock = parts.clock ?? Date.now;
  const metrics = parts.metrics ?? createMetrics();
  const rateLimiter = parts.rateLimiter ?? createMemoryRateLimiter();
  const corsOrigins = parts.corsOrigins ?? [];
  const routeNames = [...parts.routes.keys()];
  const stats = parts.upstreamStats ?? new Map();
  const authenticate = createAuthenticate(parts.store, clock, corsOrigins);
  const decisionRetentionDays = parts.decisionRetentionDays ?? 30;
  parts.store.onBudgetEvent = budgetEventReporter(metrics, parts.logger);
  const longestDeadlineMs = Math.max(...[...parts.routes.values()].map((route) => route.spec.deadlineMs));
  const budgets = createBudgetService(
    parts.store,
    clock,
    staleAfterMs(longestDeadlineMs, parts.storeTimeoutMs ?? 2_000),
  );
  const calibrationMaps = createCalibrationMaps({
    store: parts.store,
    logger: parts.logger,
    clock,
    refitMinutes: parts.calibration?.refitMinutes ?? 60,
    windowDays: parts.calibration?.windowDays ?? 30,
    minOutcomes: parts.calibration?.minOutcomes ?? 200,
    ...(parts.calibration?.reloadMs !== undefined && { reloadMs: parts.calibration.reloadMs }),
    // Read at each page of a refit, long after the evaluator below is made.
    requestsBegun: () => evaluator.begun(),
  });
  void calibrationMaps.start();
  const reviews = createReviews({
    store: parts.store,
    clock,
    logger: parts.logger,
    onReviewed: (outcome) => metrics.reviews.inc({ outcome }),
  });
  metrics.watchOpenReviews(() => parts.store.openReviews());
  const evaluator = createEvaluator({
    authenticate,
    calibration: calibrationMaps,
    reviews,
    clock,
    keepDecisions: decisionRetentionDays > 0,
    store: parts.store,
    routes: parts.routes,
    ...(parts.cache && { cache: parts.cache, cacheScope: parts.cacheScope ?? 'key' }),
    onCacheOutcome: (route, outcome) => metrics.cacheOutcomes.inc({ route, outcome }),
    onDebitCapped(route, excessMicro) {
      metrics.debitCapped.inc({ route });
      metrics.debitCappedMicroCredits.inc({ route }, excessMicro);
    },
    onBudgetRefused: (holder, window) => metrics.budgetRefusals.inc({ holder, window }),
    imageBudget: createImageBudget(parts.imageBytesInFlight ?? 268_435_456),
    ...(parts.storeTimeoutMs !== undefined && { storeTimeoutMs: parts.storeTimeoutMs }),
    rateLimiter,
    pricing: parts.pricing,
    defaultRateLimitPerMinute: parts.rateLimitPerMinute,
    logger: parts.logger,
  });
  return {
    logger: parts.logger,
    metrics,
    store: parts.store,
    rateLimiter,
    authenticate,
    evaluator,
    tokens: createTokenService(parts.store, clock, routeNames),
    keys: createKeyService(parts.store, clock, routeNames, budgets),
    budgets,
    reports: createUsageReports(parts.store, clock),
    calibrationMaps,
    reviews,
    outcomes: createOutcomes({
      store: parts.store,
      clock,
      retentionDays: decisionRetentionDays,
      escalating: escalatingRoutes(
        [...parts.routes].map(([name, route]) => [
          name,
          {
            upstreams: route.spec.members.map((m) => m.upstream.name),
            escalate: route.spec.escalate && { to: route.spec.escalate.to.upstream.name },
          },
        ]),
      ),
      onJudged: (upstream, type) => metrics.outcomes.inc({ upstream, type }),
    }),
    defaultRateLimitPerMinute: parts.rateLimitPerMinute,
    clock,
    cache: parts.cache,
    corsOrigins,
    adminToken: parts.adminToken,
    consoleRoot: parts.consoleRoot,
    upstreamHealth: () => upstreamHealth(parts.routes, stats),
    timeouts: {
      requestMs: parts.requestTimeoutMs ?? TIMEOUT_DEFAULTS.requestMs,
      shutdownMs: parts.shutdownTimeoutMs ?? TIMEOUT_DEFAULTS.shutdownMs,
    },
    mcpSessions: { ...parts.mcpSessions, ...(parts.clock && { clock: parts.clock }) },
  };
}

/** The gateway over parts already made. */
export function composeGateway(parts: GatewayParts): Gateway {
  return buildServer(createServices(parts));
}

export interface OpenedGateway {
  gateway: Gateway;
  /** Every upstream and route name, for the start-up log line. */
  upstreams: string[];
  routes: string[];
  /** After the drain: closes the upstreams, Redis and the store, in that order. */
  close(): Promise<void>;
}

/**
 * The gateway the configuration describes (docs/operating.md#configuration): its store, Redis
 * (shared rate limits and decision cache), upstreams and routes. Throws when the store cannot be
 * opened.
 */
export async function openGateway(config: Config, logger: Logger): Promise<OpenedGateway> {
  const store = await openStore(config.database);
  const metrics = createMetrics();
  const redis = config.redis;

  // With REDIS_URL every instance shares one bucket per key; without, each has its own.
  let rateLimiter: ReturnType<typeof createRedisRateLimiter> | undefined;
  if (redis !== undefined) {
    const warn = warnAtMostEvery(logger, 10_000);
    rateLimiter = createRedisRateLimiter({
      ...redis,
      onUnavailable(error) {
        metrics.rateLimitUnavailable.inc();
        warn(error, 'Redis cannot be reached: rate limits are not enforced until it is back');
      },
    });
    await rateLimiter.connect().catch((error: Error) => {
      logger.warn(
        { err: error },
        'Redis cannot be reached at start: rate limits are not enforced until it is',
      );
    });
  } else if (config.database.kind === 'postgres') {
    logger.warn(
      'PostgreSQL without REDIS_URL: rate limits are per instance, so N instances allow N times a key’s limit',
    );
  }

  // The decision cache, when a route keeps decisions: in Redis, shared by every instance, or in
  // process. A Redis failure makes the cache miss, never the request fail.
  let cache: DecisionCache | undefined;
  if (Object.values(config.gateway.routes).some((route) => route.cacheTtlSeconds > 0)) {
    if (redis !== undefined) {
      const warn = warnAtMostEvery(logger, 10_000);
      const shared = createRedisCache({
        ...redis,
        onUnavailable(error) {
          metrics.cacheUnavailable.inc();
          warn(error, 'Redis cannot be reached: the decision cache misses until it is back');
        },
      });
      await shared.connect().catch((error: Error) => {
        logger.warn(
          { err: error },
          'Redis cannot be reached at start: the decision cache misses until it is',
        );
      });
      cache = shared;
    } else {
      const local = createMemoryCache({ maxBytes: config.cache.maxBytes });
      metrics.watchCacheBytes(() => local.bytes?.() ?? 0);
      cache = local;
    }
  }

  const upstreams = createUpstreamRegistry(config.gateway.upstreams, logger, {
    metrics,
    maxBodyBytes: config.upstreamMaxBodyBytes,
    callThread: config.upstreamCallThread,
  });
  const upstreamStats: UpstreamStats = new Map();
  const routes = buildRoutes(config.gateway, upstreams, { logger, metrics, stats: upstreamStats });
  const gateway = composeGateway({
    store,
    routes,
    upstreamStats,
    ...(cache && { cache, cacheScope: config.cache.scope }),
    corsOrigins: config.corsOrigins,
    logger,
    pricing: pricingFromCredits(config.pricing.creditsPer1kInput, config.pricing.creditsPer1kOutput),
    rateLimitPerMinute: config.rateLimitPerMinute,
    adminToken: config.adminToken,
    metrics,
    requestTimeoutMs: config.requestTimeoutMs,
    storeTimeoutMs: config.database.timeoutMs,
    shutdownTimeoutMs: config.shutdownTimeoutMs,
    decisionRetentionDays: config.retention.decisionDays,
    mcpSessions: { max: config.mcp.maxSessions },
    imageBytesInFlight: config.imageBytesInFlight,
    calibration: config.calibration,
    ...(rateLimiter && { rateLimiter }),
  });
  // The upgrade's fold and retention, in the background from now on (docs/usage.md).
  const maintenance = startMaintenance({
    store,
    tasks: [
      ...usageRetention(store, config.retention.usageDays),
      decisionRetention(store, config.retention.decisionDays),
      reviewRetention(store, config.retention.reviewDays),
    ],
    logger,
  });
  return {
    gateway,
    upstreams: [...upstreams.keys()],
    routes: [...routes.keys()],
    async close() {
      await maintenance.stop();
      await Promise.all([...upstreams.values()].map((upstream) => upstream.close?.()));
      await rateLimiter?.close();
      await cache?.close?.();
      await store.close();
    },
  };
}
