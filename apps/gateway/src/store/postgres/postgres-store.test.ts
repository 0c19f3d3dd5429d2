import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import { createTestDatabase } from '../../../test/services.ts';
import { FUNCTIONS } from './functions.ts';
import { POSTGRES_MIGRATIONS } from './migrations.ts';
import { migratePostgres, openPostgresStore } from './postgres-store.ts';

describe('PostgreSQL store', () => {
  it('migrates safely when several instances start at once: each step applied once', async () => {
    const database = await createTestDatabase();
    try {
      const stores = await Promise.all(
        Array.from({ length: 6 }, () => openPostgresStore(database.url, { poolSize: 2 })),
      );
      await Promise.all(stores.map((store) => store.close()));
      const sql = postgres(database.url, { max: 1, onnotice: () => {} });
      try {
        const rows = await sql<{ version: number }[]>`SELECT version FROM schema_migrations ORDER BY version`;
        expect(rows.map((r) => r.version)).toEqual(POSTGRES_MIGRATIONS.map((m) => m.version));
        expect(await migratePostgres(sql as never)).toEqual([]);
      } finally {
        await sql.end();
      }
    } finally {
      await database.drop();
    }
  });

  it('keeps amounts as bigint micro-credits and refuses a negative balance in the database', async () => {
    const database = await createTestDatabase();
    const store = await openPostgresStore(database.url, { poolSize: 2 });
    const sql = postgres(database.url, { max: 1, onnotice: () => {} });
    try {
      const big = 9_000_000_000_000; // 9 million credits: beyond a 32-bit integer
      await store.createKey({
        id: 'key_big',
        name: 'big',
        prefix: 'dg_big',
        hash: 'b'.repeat(64),
        creditsMicro: big,
        rateLimitPerMinute: null,
        route: null,
        createdAt: Date.now(),
        expiresAt: null,
      });
      expect((await store.getKey('key_big'))?.creditsMicro).toBe(big);
      const [column] = await sql`SELECT data_type FROM information_schema.columns
        WHERE table_name = 'api_keys' AND column_name = 'credits_micro'`;
      expect(column?.data_type).toBe('bigint');
      await expect(sql`UPDATE api_keys SET credits_micro = -1 WHERE id = 'key_big'`).rejects.toThrow(
        /check/i,
      );
    } finally {
      await sql.end();
      await store.close();
      await database.drop();
    }
  });

  it('holds, once migrated, exactly the function definitions of functions.ts', async () => {
    const database = await createTestDatabase();
    const sql = postgres(database.url, { max: 1, onnotice: () => {} });
    try {
      await migratePostgres(sql as never);
      const rows = await sql<{ proname: string; prosrc: string; proconfig: string[] | null }[]>`
        SELECT proname, prosrc, proconfig FROM pg_proc WHERE proname LIKE 'dg\_%' ORDER BY proname`;
      const inDatabase = Object.fromEntries(
        rows.map((row) => [row.proname, { body: row.prosrc, settings: row.proconfig ?? [] }]),
      );
      // Each definition's body is what lies between its $fn$ quotes; its settings, the SET
      // clauses before them.
      const current = Object.fromEntries(
        Object.entries(FUNCTIONS).map(([name, definition]) => {
          const [head, body] = definition.split('$fn$');
          const settings = [...(head ?? '').matchAll(/\bSET (\w+) = (\w+)/g)].map(
            ([, key, value]) => `${key}=${value}`,
          );
          return [name, { body, settings }];
        }),
      );
      expect(inDatabase).toEqual(current);
    } finally {
      await sql.end();
      await database.drop();
    }
  });
});
