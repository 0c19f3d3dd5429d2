import type { Config } from '../config/environment.ts';
import { openPostgresStore } from './postgres/postgres-store.ts';
import { openSqliteStore } from './sqlite/sqlite-store.ts';
import type { Store } from './store.ts';

/** The store DATABASE_URL names (docs/operating.md): a SQLite file, or PostgreSQL (migrated at open). */
export async function openStore(database: Config['database']): Promise<Store> {
  return database.kind === 'postgres'
    ? openPostgresStore(database.url, { poolSize: database.poolSize, timeoutMs: database.timeoutMs })
    : openSqliteStore(database.path, { timeoutMs: database.timeoutMs });
}
