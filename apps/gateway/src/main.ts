import { openGateway } from './app.ts';
import { ensureBootstrapKey } from './bootstrap.ts';
import { loadConfig, loadDotEnv, withoutPassword } from './config/environment.ts';
import { limitHeapGrowth } from './heap.ts';
import { createLogger } from './logger.ts';

limitHeapGrowth();
loadDotEnv();
const loaded = loadConfig(process.env);
if (!loaded.ok) {
  process.stderr.write(`Invalid configuration:\n${loaded.problems.map((p) => `  ${p}\n`).join('')}`);
  process.exit(1);
}
const config = loaded.config;
const logger = createLogger(config.logLevel);
// The SDK is loaded only when tracing is on: off, the gateway carries none of it (about 100 MB
// of RSS with its exporters).
const tracing =
  config.tracing && (await import('./telemetry/start-tracing.ts')).startTracing(config.tracing, logger);
const opened = await openGateway(config, logger).catch((error: Error) => {
  logger.fatal({ err: error }, 'the database could not be opened');
  process.exit(1);
});
const { gateway } = opened;

if (config.embeddedDatabase) {
  const key = await ensureBootstrapKey(gateway.services.store, gateway.services.keys);
  if (key !== undefined) {
    // The one place a key is ever printed (docs/operating.md#admin-api): standard output, once.
    process.stdout.write(
      `\nCreated the bootstrap API key (100 credits). It is shown only this once:\n\n  ${key}\n\n` +
        `Try it:  export DG_API_KEY=${key}\n\n`,
    );
  }
}

const address = await gateway.app
  .listen({ port: config.port, host: config.host, backlog: config.listenBacklog })
  .catch((error: NodeJS.ErrnoException) => {
    // One line naming the address, never a stack trace.
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
// A busy event loop accepts one connection a turn; copies of the listening socket take in more.
const acceptsPerTurn = await gateway
  .acceptPerTurn(config.acceptsPerTurn, config.listenBacklog)
  .then(() => config.acceptsPerTurn)
  .catch((error: Error) => {
    logger.warn({ err: error }, 'the listening socket could not be copied: one new connection a turn');
    return 1;
  });
logger.info(
  {
    address,
    acceptsPerTurn,
    listenBacklog: config.listenBacklog,
    upstreams: opened.upstreams,
    routes: opened.routes,
    database: config.database.kind === 'sqlite' ? config.database.path : withoutPassword(config.database.url),
    redis: config.redis !== undefined,
    admin: config.adminToken !== undefined,
    tracing: tracing !== undefined,
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
    // every reservation still held is released (docs/operating.md#timeouts-and-what-sigterm-guarantees).
    await gateway.drain();
    await opened.close();
    await tracing?.shutdown();
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
