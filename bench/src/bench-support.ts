import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BudgetSpec } from '@decision-gateway/contract';
import {
  connectPostgres,
  createKeyService,
  openPostgresStore,
  openSqliteStore,
  type Store,
} from '@decision-gateway/gateway';
import postgres from 'postgres';
import type { Pool } from 'undici';
import { repoRoot } from './processes.ts';

/** A key with ample credits in a new SQLite file at `path` (or a PostgreSQL URL); returns the plain key. */
export async function createBenchKey(path: string): Promise<string> {
  return (await createBenchKeys(path, 1))[0] as string;
}

/**
 * The environment of the bench's REST gateway: a SQLite file, no rate limit, info logs, asking the
 * stand-in upstream at `upstreamUrl` as a System One service.
 */
export function sqliteGatewayEnv(file: string, upstreamUrl: string): Record<string, string> {
  return {
    DATABASE_URL: `file:${file}`,
    RATE_LIMIT_PER_MINUTE: '0',
    LOG_LEVEL: 'info',
    PORT: '0',
    UPSTREAM: 'systemone',
    UPSTREAM_BASE_URL: upstreamUrl,
  };
}

/** Where a bench's gateway keeps its data: a SQLite file, or PostgreSQL with Redis rate limits. */
export type BenchStore = 'sqlite' | 'postgres';

/** The store the environment variable `name` asks for (`sqlite` unless set); anything else throws. */
export function benchStoreFrom(name: string): BenchStore {
  const store = process.env[name] ?? 'sqlite';
  if (store !== 'sqlite' && store !== 'postgres')
    throw new Error(`${name}: sqlite or postgres, not ${store}`);
  return store;
}

/** Where one bench gateway keeps its data, made for it and dropped once it has stopped. */
export interface BenchData {
  /** A SQLite file's path or a PostgreSQL URL, as `createBenchKeys` takes it. */
  location: string;
  /** The REST gateway's environment on this data, asking the stand-in upstream at `upstreamUrl`. */
  gatewayEnv(upstreamUrl: string): Record<string, string>;
  drop(): Promise<void>;
}

/** The SQLite file `file`, or with `postgres` a PostgreSQL database of its own (Redis rate limits). */
export async function benchData(store: BenchStore, file: string): Promise<BenchData> {
  if (store === 'sqlite')
    return { location: file, gatewayEnv: (url) => sqliteGatewayEnv(file, url), drop: async () => {} };
  const database = await createBenchDatabase();
  return {
    location: database.url,
    gatewayEnv: (url) => postgresGatewayEnv(database.url, url),
    drop: database.drop,
  };
}

/**
 * The environment of a REST gateway on PostgreSQL with Redis rate limits (docs/scaling-out.md),
 * asking the stand-in upstream at `upstreamUrl`: a limit high enough never to refuse, so the Redis
 * script runs on every request as in production.
 */
export function postgresGatewayEnv(databaseUrl: string, upstreamUrl: string): Record<string, string> {
  return {
    DATABASE_URL: databaseUrl,
    REDIS_URL: process.env.BENCH_REDIS_URL ?? process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379',
    REDIS_KEY_PREFIX: `dg-bench-${process.pid}:`,
    RATE_LIMIT_PER_MINUTE: '100000000',
    UPSTREAM: 'systemone',
    UPSTREAM_BASE_URL: upstreamUrl,
    LOG_LEVEL: 'info',
    PORT: '0',
  };
}

/** Three hard budgets (docs/budgets.md) with limits no bench request reaches: what checking and counting them costs. */
export const THREE_BUDGETS: BudgetSpec[] = (['minute', 'hour', 'day'] as const).map((window) => ({
  window,
  limit: 100_000_000,
  mode: 'hard' as const,
}));

/** `count` keys with ample credits in the SQLite file at `path` (or a PostgreSQL URL). */
export async function createBenchKeys(
  path: string,
  count: number,
  /** Budgets on each key (docs/budgets.md). */
  budgets?: BudgetSpec[],
): Promise<string[]> {
  const store: Store = path.startsWith('postgres')
    ? await openPostgresStore(path, { poolSize: 1 })
    : openSqliteStore(path);
  try {
    const keys: string[] = [];
    for (let i = 0; i < count; i++) {
      const created = await createKeyService(store).create({
        name: `bench ${i}`,
        credits: 1_000_000_000,
        ...(budgets && { budgets }),
      });
      if (!created.ok) throw new Error(created.error.message);
      keys.push(created.value.key);
    }
    return keys;
  } finally {
    await store.close();
  }
}

/** Replace what a page of docs/ holds between `<!-- name:start -->` and `<!-- name:end -->`. */
export function updateDocSection(page: 'performance.md' | 'usage.md', name: string, content: string) {
  const path = join(repoRoot, 'docs', page);
  const readme = readFileSync(path, 'utf8');
  const start = `<!-- ${name}:start -->`;
  const end = `<!-- ${name}:end -->`;
  const from = readme.indexOf(start);
  const to = readme.indexOf(end);
  if (from === -1 || to === -1) throw new Error(`docs/${page} has no ${start} … ${end} section`);
  writeFileSync(path, `${readme.slice(0, from + start.length)}\n${content}\n${readme.slice(to)}`);
}

/**
 * A database of its own on the machine's PostgreSQL (BENCH_DATABASE_URL or TEST_DATABASE_URL
 * names the server), dropped by `drop()`.
 */
export async function createBenchDatabase(
  /** Tells apart several databases of one bench process. */
  suffix = '',
): Promise<{ url: string; drop: () => Promise<void> }> {
  const server =
    process.env.BENCH_DATABASE_URL ??
    process.env.TEST_DATABASE_URL ??
    'postgres://postgres@127.0.0.1:5432/postgres';
  const name = `dg_bench_${process.pid}${suffix}`;
  const admin = postgres(server, { max: 1, onnotice: () => {} });
  await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.unsafe(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(server);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const again = postgres(server, { max: 1, onnotice: () => {} });
      await again.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await again.end();
    },
  };
}

/**
 * VACUUM of a bench database, as autovacuum would leave it between bursts: where autovacuum is
 * off (as on the machines these benches were made on), each measurement would otherwise meet the
 * dead reservations and key row versions of the ones before it.
 */
export async function vacuumBenchDatabase(url: string): Promise<void> {
  await onPostgres(url, async (sql) => void (await sql`VACUUM`));
}

/** Runs `seed` on a connection of its own to the database at `url` (long statements allowed), then closes it. */
export async function onPostgres(
  url: string,
  seed: (sql: ReturnType<typeof connectPostgres>) => Promise<void>,
): Promise<void> {
  const sql = connectPostgres(url, { poolSize: 1, timeoutMs: 600_000 });
  try {
    await seed(sql);
  } finally {
    await sql.end();
  }
}

/** One request to the REST door on `pool`, timed in ms; an answer other than 200 throws. */
export async function timedRequest(
  pool: Pool,
  headers: Record<string, string>,
  body: string,
): Promise<number> {
  const started = performance.now();
  const response = await pool.request({ path: '/v1/systemone', method: 'POST', headers, body });
  await response.body.text();
  if (response.statusCode !== 200) throw new Error(`the caller got ${response.statusCode}`);
  return performance.now() - started;
}
