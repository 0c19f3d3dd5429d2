import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import { createTestDatabase } from '../../../test/services.ts';
import { newKey, usageEntry } from '../store.contract-tests.ts';
import type { Store } from '../store.ts';
import { FUNCTIONS } from './functions.ts';
import { POSTGRES_MIGRATIONS } from './migrations.ts';
import { migratePostgres, openPostgresStore } from './postgres-store.ts';

/** `run` with a store on a new database and a connection of its own to it; both closed, the database dropped, after. */
async function onNewStore(run: (store: Store, sql: postgres.Sql) => Promise<void>): Promise<void> {
  const database = await createTestDatabase();
  const store = await openPostgresStore(database.url, { poolSize: 2 });
  const sql = postgres(database.url, { max: 1, onnotice: () => {} });
  try {
    await run(store, sql);
  } finally {
    await sql.end();
    await store.close();
    await database.drop();
  }
}

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

  it('keeps amounts as bigint micro-credits and refuses a negative balance in the database', () =>
    onNewStore(async (store, sql) => {
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
    }));

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

  it('commits a batch of reserves without waiting for the disk, and every batch that writes usage records with it', () =>
    onNewStore(async (store, sql) => {
      // Deferred triggers run as each transaction commits: each notes what its commit waits for.
      await sql.unsafe(`
        CREATE TABLE commit_waits (tx bigint, wrote text, setting text);
        CREATE FUNCTION note_commit() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          INSERT INTO commit_waits VALUES (txid_current(), TG_ARGV[0], current_setting('synchronous_commit'));
          RETURN NULL;
        END $$;
        CREATE CONSTRAINT TRIGGER hold_committed AFTER INSERT ON reservations
          DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION note_commit('hold');
        CREATE CONSTRAINT TRIGGER record_committed AFTER INSERT ON usage_records
          DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION note_commit('record');`);
      await store.createKey(newKey({ id: 'key_waits', creditsMicro: 1_000_000_000 }));
      const now = Date.now();

      const held = await store.reserve('key_waits', 'alone', 1_000, now, now - 60_000);
      if (!held.ok) throw new Error('the reserve was refused');
      expect(await sql`SELECT wrote, setting FROM commit_waits`).toEqual([{ wrote: 'hold', setting: 'off' }]);
      await store.settle(held.reservationId, usageEntry('key_waits', 'alone', 700, now), now - 60_000);
      const failed = await store.reserve('key_waits', 'failed', 1_000, now, now - 60_000);
      if (!failed.ok) throw new Error('the reserve was refused');
      await store.release(failed.reservationId, {
        ...usageEntry('key_waits', 'failed', 0, now),
        status: 502,
      });
      expect(await sql`SELECT wrote, setting FROM commit_waits WHERE wrote = 'record'`).toEqual([
        { wrote: 'record', setting: 'on' },
        { wrote: 'record', setting: 'on' },
      ]);

      // Many at once share batches: a batch with any usage record in it waits for the disk, holds and all.
      await Promise.all(
        Array.from({ length: 40 }, async (_, i) => {
          const hold = await store.reserve('key_waits', `many-${i}`, 1_000, now, now - 60_000);
          if (!hold.ok) throw new Error('the reserve was refused');
          await store.settle(
            hold.reservationId,
            usageEntry('key_waits', `many-${i}`, 500, now),
            now - 60_000,
          );
        }),
      );
      const commits = await sql<{ records: number; settings: string[] }[]>`
        SELECT count(*) FILTER (WHERE wrote = 'record')::int AS records, array_agg(DISTINCT setting) AS settings
        FROM commit_waits GROUP BY tx`;
      for (const commit of commits) expect(commit.settings).toEqual([commit.records > 0 ? 'on' : 'off']);
      expect(commits.reduce((sum, commit) => sum + commit.records, 0)).toBe(42);
    }));

  it('charges a settle whose hold the server lost (a reserve never flushed) as it charges one swept as stale', () =>
    onNewStore(async (store, sql) => {
      await store.createKey(newKey({ id: 'key_lost', creditsMicro: 5_000 }));
      await store.createKey(newKey({ id: 'key_short', creditsMicro: 5_000 }));
      const now = Date.now();
      const holds = new Map<string, string | null>();
      for (const key of ['key_lost', 'key_short']) {
        const held = await store.reserve(key, `${key}-1`, 4_000, now, now - 60_000);
        if (!held.ok) throw new Error('the reserve was refused');
        holds.set(key, held.reservationId);
        // What a crash takes with a commit that did not wait for the disk.
        await sql`DELETE FROM reservations WHERE request_id = ${`${key}-1`}`;
      }
      // Another request holds most of what key_short has left meanwhile.
      const other = await store.reserve('key_short', 'key_short-2', 4_000, now, now - 60_000);
      expect(other.ok).toBe(true);

      const settle = (key: string) =>
        store.settle(holds.get(key) ?? null, usageEntry(key, `${key}-1`, 3_000, now), now - 60_000);
      expect(await settle('key_lost')).toBe(3_000);
      // Capped at what the key can still cover beside the other live hold.
      expect(await settle('key_short')).toBe(1_000);
      expect((await store.getKey('key_lost'))?.creditsMicro).toBe(2_000);
      expect((await store.getKey('key_short'))?.creditsMicro).toBe(4_000);
      const records = await sql`SELECT request_id, credits_micro FROM usage_records ORDER BY request_id`;
      expect(records.map((r) => [r.request_id, Number(r.credits_micro)])).toEqual([
        ['key_lost-1', 3_000],
        ['key_short-1', 1_000],
      ]);
    }));
});
