import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MIGRATIONS } from './migrations.ts';
import { migrate, openSqliteStore } from './sqlite-store.ts';

describe('SQLite store', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'dg-store-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('runs each migration once, recording its version', async () => {
    const path = join(dir, 'nested', 'g.db');
    const store = openSqliteStore(path);
    await store.close();
    const db = new Database(path);
    expect(migrate(db)).toEqual([]);
    const versions = db.prepare('SELECT version FROM schema_migrations ORDER BY version').all();
    expect(versions).toEqual(MIGRATIONS.map((m) => ({ version: m.version })));
    db.close();
  });

  it('stores only the hash of a key and keeps data across reopening', async () => {
    const path = join(dir, 'g.db');
    const store = openSqliteStore(path);
    await store.createKey({
      id: 'key_1',
      name: 'n',
      prefix: 'dg_abc',
      hash: 'h'.repeat(64),
      creditsMicro: 5,
      rateLimitPerMinute: null,
      createdAt: 1,
      expiresAt: null,
    });
    await store.close();
    const again = openSqliteStore(path);
    expect(await again.findKeyByHash('h'.repeat(64))).toMatchObject({ id: 'key_1', prefix: 'dg_abc' });
    expect(await again.getKey('key_1')).toMatchObject({ creditsMicro: 5 });
    expect(await again.ledgerBalance('key_1')).toBe(5);
    await again.close();
    const db = new Database(path);
    expect(db.prepare('SELECT * FROM api_keys').get()).toMatchObject({
      hash: 'h'.repeat(64),
      prefix: 'dg_abc',
    });
    db.close();
  });

  it('a late release of a reservation swept as stale leaves the newer one that took its row id', async () => {
    const store = openSqliteStore(join(dir, 'g.db'));
    await store.createKey({
      id: 'key_1',
      name: 'n',
      prefix: 'dg_abc',
      hash: 'h'.repeat(64),
      creditsMicro: 1_000,
      rateLimitPerMinute: null,
      createdAt: 1,
      expiresAt: null,
    });
    const now = Date.now();
    const stalled = await store.reserve('key_1', 'req_stalled', 960, now - 3_600_000, 0);
    // The next reservation sweeps the hour-old one and, the table being empty, reuses its row id.
    const live = await store.reserve('key_1', 'req_live', 50, now, now - 60_000);
    if (!stalled.ok || !live.ok) throw new Error('reserve failed');
    expect(live.reservationId).toBe(stalled.reservationId);
    await store.release(stalled.reservationId, {
      requestId: 'req_stalled',
      keyId: 'key_1',
      creditsMicro: 0,
      inputTokens: 0,
      outputTokens: 0,
      questions: 0,
      status: 504,
      elapsedMs: 0,
      at: now,
    });
    // req_live still holds its 50.
    expect(await store.reserve('key_1', 'req_next', 951, now, now - 60_000)).toMatchObject({
      ok: false,
      availableMicro: 950,
    });
    await store.close();
  });

  it('refuses a negative balance at the database level', async () => {
    const path = join(dir, 'g.db');
    const store = openSqliteStore(path);
    await store.close();
    const db = new Database(path);
    db.prepare(
      "INSERT INTO api_keys (id, name, prefix, hash, credits_micro, created_at) VALUES ('k', 'n', 'p', 'h', 0, 0)",
    ).run();
    expect(() => db.prepare("UPDATE api_keys SET credits_micro = -1 WHERE id = 'k'").run()).toThrow(/CHECK/);
    db.close();
  });
});
