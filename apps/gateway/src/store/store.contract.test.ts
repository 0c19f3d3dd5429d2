import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { createTestDatabase } from '../../test/services.ts';
import { connectPostgres } from './postgres/client.ts';
import { openPostgresStore, postgresStore } from './postgres/postgres-store.ts';
import { openSqliteStore } from './sqlite/sqlite-store.ts';
import { storeContract } from './store.contract.ts';

storeContract('SQLite', async () => {
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
    async cleanup() {
      await store.close();
      for (const other of others) await other.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

storeContract('PostgreSQL', async () => {
  const database = await createTestDatabase();
  const store = await openPostgresStore(database.url, { poolSize: 3 });
  return {
    store,
    openAnother: () => openPostgresStore(database.url, { poolSize: 3 }),
    async openUnderDeadline(timeoutMs) {
      const sql = connectPostgres(database.url, { poolSize: 3, timeoutMs });
      return {
        store: postgresStore(sql, timeoutMs),
        async occupy(ms) {
          // Rows first, then a sleep the server's statement_timeout cuts short: the case that once
          // left a connection handing the next query a shifted result.
          await sql`SELECT g, CASE WHEN g = 20 THEN pg_sleep(${ms / 1000}) END AS slept
                    FROM generate_series(1, 40) AS g`.catch(() => {});
        },
      };
    },
    async cleanup() {
      await store.close();
      await database.drop();
    },
  };
});
