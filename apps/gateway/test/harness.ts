import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { MODEL_ID } from '@decision-gateway/contract';
import { createLexicalUpstream, type Upstream, type UpstreamOutcome } from '@decision-gateway/questions';
import type { Logger } from 'pino';
import { composeGateway } from '../src/app.ts';
import type { CacheScope, DecisionCache } from '../src/cache/decision-cache.ts';
import { pricingFromCredits } from '../src/core/credits.ts';
import type { SessionLimits } from '../src/doors/mcp/sessions.ts';
import type { Gateway } from '../src/http/server.ts';
import { createKeyService, type KeyService } from '../src/keys/key-service.ts';
import { createLogger } from '../src/logger.ts';
import { createMetrics, type GatewayMetrics } from '../src/metrics.ts';
import { buildRoutes, type UpstreamStats } from '../src/routing/build-routes.ts';
import type { Route } from '../src/routing/route.ts';
import { openSqliteStore } from '../src/store/sqlite/sqlite-store.ts';
import type { Store } from '../src/store/store.ts';
import { createUpstreamRegistry } from '../src/upstreams/registry.ts';
import { loadConfigText } from './support/config-text.ts';
import { singleRoute } from './support/single-route.ts';

export const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';

export interface TestGateway {
  url: string;
  store: Store;
  keys: KeyService;
  gateway: Gateway;
  metrics: GatewayMetrics;
  dbPath: string;
  /** Every log line the gateway wrote, as text. */
  logs: string[];
  /** A fresh key; `credits: null` for unlimited. */
  createKey(options?: { credits?: number | null; rateLimitPerMinute?: number; expiresAt?: string }): Promise<{
    id: string;
    key: string;
  }>;
  close(): Promise<void>;
}

export interface TestGatewayOptions {
  upstream?: Upstream | ((logger: Logger, metrics: GatewayMetrics) => Upstream);
  /** Routes over upstreams (docs/routes.md), in place of `upstream`. */
  routes?: (logger: Logger, metrics: GatewayMetrics) => ReadonlyMap<string, Route>;
  adminToken?: string;
  rateLimitPerMinute?: number;
  upstreamTimeoutMs?: number;
  creditsPer1kInput?: number;
  /** Share the SQLite file of another instance (cross-instance tests). */
  dbPath?: string;
  /** A decision cache for the default route, keeping decisions this long (docs/routes.md#decision-cache). */
  cache?: DecisionCache;
  cacheTtlSeconds?: number;
  cacheScope?: CacheScope;
  corsOrigins?: string[];
  /** The core's clock (key and token expiry, rate limits). */
  clock?: () => number;
  /** The console's built files. */
  consoleRoot?: string;
  /** DECISION_RETENTION_DAYS (default 30). */
  decisionRetentionDays?: number;
  /** The MCP door's session bounds (docs/mcp.md#sessions). */
  mcpSessions?: Partial<SessionLimits>;
  /** IMAGE_BYTES_IN_FLIGHT (docs/images.md#memory). */
  imageBytesInFlight?: number;
  /** The calibration maps' settings (docs/calibration-maps.md); by default refits run only on demand. */
  calibration?: Partial<{ refitMinutes: number; windowDays: number; minOutcomes: number; reloadMs: number }>;
}

/** A real gateway on 127.0.0.1 with a fresh SQLite file, as `pnpm start` builds it. */
export async function startGateway(options: TestGatewayOptions = {}): Promise<TestGateway> {
  const dir = options.dbPath === undefined ? mkdtempSync(join(tmpdir(), 'dg-test-')) : undefined;
  const dbPath = options.dbPath ?? join(dir as string, 'gateway.db');
  const store = openSqliteStore(dbPath);
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      logs.push(...String(chunk).split('\n').filter(Boolean));
      done();
    },
  });
  const logger = createLogger('info', sink);
  const metrics = createMetrics();
  const upstream =
    typeof options.upstream === 'function'
      ? options.upstream(logger, metrics)
      : (options.upstream ?? createLexicalUpstream());
  const upstreamStats: UpstreamStats = new Map();
  const routes =
    options.routes?.(logger, metrics) ??
    singleRoute(upstream, {
      logger,
      metrics,
      stats: upstreamStats,
      timeoutMs: options.upstreamTimeoutMs ?? 10_000,
      ...(options.cacheTtlSeconds !== undefined && { cacheTtlSeconds: options.cacheTtlSeconds }),
    });
  const gateway = composeGateway({
    store,
    routes,
    upstreamStats,
    ...(options.cache && { cache: options.cache, cacheScope: options.cacheScope ?? 'key' }),
    ...(options.corsOrigins && { corsOrigins: options.corsOrigins }),
    ...(options.clock && { clock: options.clock }),
    ...(options.consoleRoot && { consoleRoot: options.consoleRoot }),
    ...(options.decisionRetentionDays !== undefined && {
      decisionRetentionDays: options.decisionRetentionDays,
    }),
    ...(options.mcpSessions && { mcpSessions: options.mcpSessions }),
    ...(options.imageBytesInFlight !== undefined && { imageBytesInFlight: options.imageBytesInFlight }),
    calibration: { refitMinutes: 0, ...options.calibration },
    logger,
    pricing: pricingFromCredits(options.creditsPer1kInput ?? 1, 0),
    rateLimitPerMinute: options.rateLimitPerMinute ?? 0,
    adminToken: options.adminToken,
    metrics,
  });
  const address = await gateway.app.listen({ port: 0, host: '127.0.0.1' });
  const keys = createKeyService(store, Date.now, [...routes.keys()]);
  let closed = false;
  return {
    url: address,
    store,
    keys,
    gateway,
    metrics,
    dbPath,
    logs,
    async createKey({ credits = 100, rateLimitPerMinute, expiresAt } = {}) {
      const created = await keys.create({
        name: 'test',
        credits,
        ...(rateLimitPerMinute !== undefined && { rateLimitPerMinute }),
        ...(expiresAt !== undefined && { expiresAt }),
      });
      if (!created.ok) throw new Error(created.error.message);
      return { id: created.value.id, key: created.value.key };
    },
    async close() {
      if (closed) return;
      closed = true;
      await gateway.app.close();
      await upstream.close?.();
      await store.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A valid three-question request (one of each type). */
export function sampleRequest(): Record<string, unknown> {
  return {
    model: MODEL_ID,
    state: 'Hi, I was charged twice for my order last week. Please refund the double charge.',
    questions: {
      team: { type: 'choice', criteria: { billing: 'payments, refunds', technical: 'bugs, crashes' } },
      urgency: { type: 'score', instructions: 'How urgent is it?', criteria: ['not urgent', 'soon', 'now'] },
      refund: { type: 'noul', instructions: 'Is this a refund request?' },
    },
  };
}

export interface Sent {
  status: number;
  headers: Headers;
  body: any;
  text: string;
}

/** POST a JSON body (or raw text) to the REST door. */
export async function post(
  base: string,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Sent> {
  const response = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body),
  });
  return sent(response);
}

/** Any method, with a JSON body or none (admin PATCH and DELETE). */
export async function send(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Sent> {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { ...headers, ...(body !== undefined && { 'content-type': 'application/json' }) },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  return sent(response);
}

export async function get(base: string, path: string, headers: Record<string, string> = {}): Promise<Sent> {
  return sent(await fetch(`${base}${path}`, { headers }));
}

async function sent(response: Response): Promise<Sent> {
  const text = await response.text();
  return {
    status: response.status,
    headers: response.headers,
    text,
    body: text ? JSON.parse(text) : undefined,
  };
}

export const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

/** An upstream written for a test: answers with whatever `answer` returns, counting its calls. */
export function scriptedUpstream(
  answer: (call: Parameters<Upstream['answer']>[0]) => Promise<UpstreamOutcome> | UpstreamOutcome,
  usageBound: Upstream['usageBound'] = () => ({ input_tokens: 1000, output_tokens: 0 }),
): Upstream & { calls: number } {
  const upstream = {
    name: 'scripted',
    calls: 0,
    usageBound,
    async answer(call: Parameters<Upstream['answer']>[0]) {
      upstream.calls++;
      return answer(call);
    },
  };
  return upstream;
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Routes from a configuration file's text (YAML or JSON), as `GATEWAY_CONFIG` would load them. */
export function configuredRoutes(
  text: string,
  env: Record<string, string> = {},
): (logger: Logger, metrics: GatewayMetrics) => ReadonlyMap<string, Route> {
  const loaded = loadConfigText(text, env);
  if (!loaded.ok) throw new Error(loaded.problems.join('\n'));
  const { gateway } = loaded.config;
  return (logger, metrics) =>
    buildRoutes(gateway, createUpstreamRegistry(gateway.upstreams, logger, { metrics }), { logger, metrics });
}
