import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase } from '../../test/services.ts';
import { openPostgresStore } from './postgres/postgres-store.ts';
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
    async cleanup() {
      await store.close();
      await database.drop();
    },
  };
});
