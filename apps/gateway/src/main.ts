import { ensureBootstrapKey } from './bootstrap.ts';
import { loadConfig } from './config.ts';
import { pricingFromCredits } from './core/credits.ts';
import { buildGateway } from './http/server.ts';
import { createKeyService } from './keys/key-service.ts';
import { createLogger } from './logger.ts';
import { createMetrics } from './metrics.ts';
import { openSqliteStore } from './store/sqlite/sqlite-store.ts';
import { createUpstream } from './upstreams/create-upstream.ts';

const loaded = loadConfig(process.env);
if (!loaded.ok) {
  process.stderr.write(`Invalid configuration:\n${loaded.problems.map((p) => `  ${p}\n`).join('')}`);
  process.exit(1);
}
const config = loaded.config;
const logger = createLogger(config.logLevel);
const store = openSqliteStore(config.databasePath);

if (config.embeddedDatabase) {
  const key = await ensureBootstrapKey(store, createKeyService(store));
  if (key !== undefined) {
    // The one place a key is ever printed (SPEC §6): standard output, once, on first start.
    process.stdout.write(
      `\nCreated the bootstrap API key (100 credits). It is shown only this once:\n\n  ${key}\n\n` +
        `Try it:  export DG_API_KEY=${key}\n\n`,
    );
  }
}

const metrics = createMetrics();
const upstream = createUpstream(config.upstream, logger, { metrics });
const gateway = buildGateway({
  store,
  upstream,
  logger,
  pricing: pricingFromCredits(config.pricing.creditsPer1kInput, config.pricing.creditsPer1kOutput),
  rateLimitPerMinute: config.rateLimitPerMinute,
  upstreamTimeoutMs: config.upstream.timeoutMs,
  adminToken: config.adminToken,
  metrics,
});

const address = await gateway.app.listen({ port: config.port, host: config.host });
logger.info(
  {
    address,
    upstream: upstream.name,
    database: config.databasePath,
    admin: config.adminToken !== undefined,
  },
  'gateway listening',
);

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, 'draining: finishing in-flight requests');
  try {
    await gateway.drain();
    await upstream.close?.();
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
process.on('SIGINT', () => void shutdown('SIGINT'));
