import { ensureBootstrapKey } from './bootstrap.ts';
import type { DecisionCache } from './cache/decision-cache.ts';
import { createMemoryCache } from './cache/memory-cache.ts';
import { createRedisCache } from './cache/redis-cache.ts';
import { loadConfig, loadDotEnv, withoutPassword } from './config.ts';
import { pricingFromCredits } from './core/credits.ts';
import { buildGateway } from './http/server.ts';
import { createKeyService } from './keys/key-service.ts';
import { createLogger } from './logger.ts';
import { createMetrics } from './metrics.ts';
import { createRedisRateLimiter, type SharedRateLimiter } from './rate-limit/redis-rate-limiter.ts';
import { openStore } from './store/open-store.ts';
import { createUpstreamRegistry } from './upstreams/registry.ts';
import { buildRoutes, type UpstreamStats } from './upstreams/routes.ts';

loadDotEnv();
const loaded = loadConfig(process.env);
if (!loaded.ok) {
  process.stderr.write(`Invalid configuration:\n${loaded.problems.map((p) => `  ${p}\n`).join('')}`);
  process.exit(1);
}
const config = loaded.config;
const logger = createLogger(config.logLevel);
const store = await openStore(config.database).catch((error: Error) => {
  logger.fatal({ err: error }, 'the database could not be opened');
  process.exit(1);
});

if (config.embeddedDatabase) {
  const key = await ensureBootstrapKey(
    store,
    createKeyService(store, Date.now, Object.keys(config.gateway.routes)),
  );
  if (key !== undefined) {
    // The one place a key is ever printed (SPEC §6): standard output, once, on first start.
    process.stdout.write(
      `\nCreated the bootstrap API key (100 credits). It is shown only this once:\n\n  ${key}\n\n` +
        `Try it:  export DG_API_KEY=${key}\n\n`,
    );
  }
}

const metrics = createMetrics();

// SPEC §10: with REDIS_URL every instance shares one bucket per key; without, each has its own.
let rateLimiter: SharedRateLimiter | undefined;
if (config.redis !== undefined) {
  let lastWarning = 0;
  rateLimiter = createRedisRateLimiter({
    ...config.redis,
    onUnavailable(error) {
      metrics.rateLimitUnavailable.inc();
      // Fail open, and say so at most every 10 s rather than on every request.
      if (Date.now() - lastWarning > 10_000) {
        lastWarning = Date.now();
        logger.warn({ err: error }, 'Redis cannot be reached: rate limits are not enforced until it is back');
      }
    },
  });
  await rateLimiter.connect().catch((error: Error) => {
    logger.warn({ err: error }, 'Redis cannot be reached at start: rate limits are not enforced until it is');
  });
} else if (config.database.kind === 'postgres') {
  logger.warn(
    'PostgreSQL without REDIS_URL: rate limits are per instance, so N instances allow N times a key’s limit',
  );
}

// The decision cache (SPEC §13), when a route keeps decisions: in Redis, shared by every instance,
// or in process. A Redis failure makes the cache miss, never the request fail.
let cache: DecisionCache | undefined;
if (Object.values(config.gateway.routes).some((route) => route.cacheTtlSeconds > 0)) {
  if (config.redis !== undefined) {
    let lastWarning = 0;
    const shared = createRedisCache({
      ...config.redis,
      onUnavailable(error) {
        metrics.cacheUnavailable.inc();
        if (Date.now() - lastWarning > 10_000) {
          lastWarning = Date.now();
          logger.warn({ err: error }, 'Redis cannot be reached: the decision cache misses until it is back');
        }
      },
    });
    await shared.connect().catch((error: Error) => {
      logger.warn({ err: error }, 'Redis cannot be reached at start: the decision cache misses until it is');
    });
    cache = shared;
  } else {
    const local = createMemoryCache({ maxBytes: config.cache.maxBytes });
    metrics.watchCacheBytes(() => local.bytes?.() ?? 0);
    cache = local;
  }
}

// Every configured upstream by name, and the routes over them (SPEC §12).
const upstreams = createUpstreamRegistry(config.gateway.upstreams, logger, {
  metrics,
  maxBodyBytes: config.upstreamMaxBodyBytes,
});
const upstreamStats: UpstreamStats = new Map();
const routes = buildRoutes(config.gateway, upstreams, { logger, metrics, stats: upstreamStats });
const gateway = buildGateway({
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
  ...(rateLimiter && { rateLimiter }),
});

const address = await gateway.app
  .listen({ port: config.port, host: config.host })
  .catch((error: NodeJS.ErrnoException) => {
    // One line naming the address, never a stack trace (SPEC §10).
    const why =
      error.code === 'EADDRINUSE'
        ? 'the address is already in use'
        : error.code === 'EACCES'
          ? 'permission denied'
          : error.code === 'EADDRNOTAVAIL'
            ? 'no such address on this machine'
            : error.message;
    process.stderr.write(`Cannot listen on ${config.host}:${config.port}: ${why}\n`);
    process.exit(1);
  });
logger.info(
  {
    address,
    upstreams: [...upstreams.keys()],
    routes: [...routes.keys()],
    database: config.database.kind === 'sqlite' ? config.database.path : withoutPassword(config.database.url),
    redis: config.redis !== undefined,
    admin: config.adminToken !== undefined,
  },
  'gateway listening',
);

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  logger.info(
    { signal, shutdownTimeoutMs: config.shutdownTimeoutMs },
    'draining: finishing in-flight requests',
  );
  try {
    // Within SHUTDOWN_TIMEOUT_MS, whatever clients do: past it every connection is closed and
    // every reservation still held is released (SPEC §10).
    await gateway.drain();
    await Promise.all([...upstreams.values()].map((upstream) => upstream.close?.()));
    await rateLimiter?.close();
    await cache?.close?.();
    await store.close();
    logger.info('stopped');
    await new Promise<void>((resolve) => logger.flush(() => resolve()));
    process.exit(0);
  } catch (error) {
    logger.error({ err: error }, 'shutdown failed');
    process.exit(1);
  }
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
// Run by a package manager (`pnpm start`), the gateway follows the process that started it: a
// supervisor or `docker stop` signals pnpm, which exits without passing the signal on. Without
// this the gateway would go on as an orphan holding the port; with it, it drains as on SIGTERM.
if (process.env.npm_lifecycle_event !== undefined) {
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) void shutdown('the process that started the gateway exited');
  }, 250).unref();
}
process.on('SIGINT', () => void shutdown('SIGINT'));
