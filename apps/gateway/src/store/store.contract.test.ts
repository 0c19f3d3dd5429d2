import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { createTestDatabase } from '../../test/services.ts';
import { budgetContract } from './budgets.contract-tests.ts';
import { connectPostgres } from './postgres/client.ts';
import { migratePostgres, openPostgresStore, postgresStore } from './postgres/postgres-store.ts';
import { migrate, openSqliteStore } from './sqlite/sqlite-store.ts';
import { type LegacyWriter, type StoreFixture, storeContract } from './store.contract-tests.ts';
import type { UsageEntry } from './store.ts';

/** A usage record as the release before the rollups wrote it: these columns, then `cached`. */
const LEGACY_USAGE_COLUMNS =
  'request_id, key_id, credits_micro, input_tokens, output_tokens, questions, status, elapsed_ms, at, route, upstream, cached';
const legacyUsageRow = (e: UsageEntry) => [
  e.requestId,
  e.keyId,
  e.creditsMicro,
  e.inputTokens,
  e.outputTokens,
  e.questions,
  e.status,
  e.elapsedMs,
  e.at,
  e.route,
  e.upstream,
];

const openSqlite = async (): Promise<StoreFixture> => {
  const dir = mkdtempSync(join(tmpdir(), 'dg-contract-'));
  const path = join(dir, 'gateway.db');
  const store = openSqliteStore(path);
  const others: { close(): Promise<void> }[] = [];
  return {
    store,
    async openAnother() {
      const other = openSqliteStore(path);
      others.push(other);
      return other;
    },
    async openUnderDeadline(timeoutMs) {
      const stressed = openSqliteStore(path, { timeoutMs });
      // Another process's writer: while it holds the write lock, the store's writes wait out their
      // busy_timeout and end as StoreUnavailableError.
      const writer = new Database(path);
      writer.pragma('busy_timeout = 0');
      others.push({
        close: async () => {
          writer.close();
        },
      });
      return {
        store: stressed,
        async occupy(ms) {
          try {
            writer.exec('BEGIN IMMEDIATE');
          } catch {
            return; // another occupation holds it already
          }
          await new Promise((resolve) => setTimeout(resolve, ms));
          writer.exec('COMMIT');
        },
      };
    },
    async openBeforeRollups() {
      const legacyPath = join(dir, 'legacy.db');
      const db = new Database(legacyPath);
      migrate(db, 5);
      const legacy: LegacyWriter = {
        async createKey(key) {
          db.prepare(
            `INSERT INTO api_keys (id, name, prefix, hash, credits_micro, rate_limit_per_minute, route, created_at, expires_at)
             VALUES (@id, @name, @prefix, @hash, @creditsMicro, @rateLimitPerMinute, @route, @createdAt, @expiresAt)`,
          ).run(key);
        },
        async insertUsage(entry) {
          db.prepare(
            `INSERT INTO usage_records (${LEGACY_USAGE_COLUMNS}) VALUES (${LEGACY_USAGE_COLUMNS.split(', ')
              .map(() => '?')
              .join(', ')})`,
          ).run(...legacyUsageRow(entry), entry.cached ? 1 : 0);
        },
        async close() {
          db.close();
        },
      };
      return { legacy, upgrade: async () => openSqliteStore(legacyPath) };
    },
    async cleanup() {
      await store.close();
      for (const other of others) await other.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
};

const openPostgres = async (): Promise<StoreFixture> => {
  const database = await createTestDatabase();
  const store = await openPostgresStore(database.url, { poolSize: 3 });
  const dropLater: { drop(): Promise<void> }[] = [];
  return {
    store,
    openAnother: () => openPostgresStore(database.url, { poolSize: 3 }),
    async openUnderDeadline(timeoutMs) {
      const sql = connectPostgres(database.url, { poolSize: 3, timeoutMs });
      const steps = connectPostgres(database.url, { poolSize: 1, timeoutMs });
      return {
        store: postgresStore({ sql, steps }, timeoutMs),
        async occupy(ms) {
          // Rows first, then a sleep the server's statement_timeout cuts short: the case that once
          // left a connection handing the next query a shifted result. On the pool, or on the
          // steps' own connection, where the next batch may already be pipelined behind it.
          const on = Math.random() < 0.5 ? sql : steps;
          await on`SELECT g, CASE WHEN g = 20 THEN pg_sleep(${ms / 1000}) END AS slept
                    FROM generate_series(1, 40) AS g`.catch(() => {});
        },
      };
    },
    async openBeforeRollups() {
      const database = await createTestDatabase();
      dropLater.push(database);
      const sql = connectPostgres(database.url, { poolSize: 1, timeoutMs: 5_000 });
      await migratePostgres(sql, 4);
      const legacy: LegacyWriter = {
        async createKey(key) {
          await sql`INSERT INTO api_keys (id, name, prefix, hash, credits_micro, created_at)
                    VALUES (${key.id}, ${key.name}, ${key.prefix}, ${key.hash}, ${key.creditsMicro}, ${key.createdAt})`;
        },
        async insertUsage(entry) {
          await sql.unsafe(
            `INSERT INTO usage_records (${LEGACY_USAGE_COLUMNS}) VALUES (${LEGACY_USAGE_COLUMNS.split(', ')
              .map((_, i) => `$${i + 1}`)
              .join(', ')})`,
            [...legacyUsageRow(entry), entry.cached],
          );
        },
        close: () => sql.end({ timeout: 1 }),
      };
      return { legacy, upgrade: () => openPostgresStore(database.url, { poolSize: 2 }) };
    },
    async cleanup() {
      await store.close();
      await database.drop();
      for (const other of dropLater) await other.drop();
    },
  };
};

storeContract('SQLite', openSqlite);
budgetContract('SQLite', openSqlite);
storeContract('PostgreSQL', openPostgres);
budgetContract('PostgreSQL', openPostgres);
