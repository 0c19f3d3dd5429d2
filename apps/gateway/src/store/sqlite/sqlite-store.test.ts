import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { usageEntry } from '../store.contract-tests.ts';
import type { BudgetEvent, Store } from '../store.ts';
import { MIGRATIONS } from './migrations.ts';
import { migrate, openSqliteStore } from './sqlite-store.ts';

/** A key as the key service would store it, with `creditsMicro` (null: unlimited). */
const keyRecord = (creditsMicro: number | null) => ({
  id: 'key_1',
  name: 'n',
  prefix: 'dg_abc',
  hash: 'h'.repeat(64),
  creditsMicro,
  rateLimitPerMinute: null,
  route: null,
  createdAt: 1,
  expiresAt: null,
});

/** A request of one credit settled for key_1, with no hold before it. */
const settleOne = (store: Store, requestId: string) =>
  store.settle(
    null,
    {
      requestId,
      keyId: 'key_1',
      creditsMicro: 1,
      inputTokens: 1,
      outputTokens: 0,
      questions: 1,
      status: 200,
      elapsedMs: 1,
      at: Date.now(),
      route: 'default',
      upstream: 'lexical',
      cached: false,
      tokenId: null,
      subject: null,
    },
    0,
  );

/** The WAL header's checkpoint sequence number (bytes 12–15): SQLite adds one each time the WAL starts over. */
function walRestarts(path: string): number {
  const header = Buffer.alloc(16);
  const fd = openSync(`${path}-wal`, 'r');
  try {
    readSync(fd, header, 0, 16, 0);
  } finally {
    closeSync(fd);
  }
  return header.readUInt32BE(12);
}

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

  it('upgrades a file with holds in flight: they stay, and are read from the indexes alone', async () => {
    const path = join(dir, 'g.db');
    const db = new Database(path);
    // The file as the previous release left it: every migration before the reservations' indexes.
    db.exec(
      'CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)',
    );
    for (const step of MIGRATIONS.filter((m) => m.version < 5)) {
      db.exec(step.sql);
      db.prepare('INSERT INTO schema_migrations VALUES (?, ?, 0)').run(step.version, step.name);
    }
    db.exec(`INSERT INTO api_keys (id, name, prefix, hash, credits_micro, created_at) VALUES ('k', 'n', 'p', 'h', 100, 0), ('k2', 'n', 'p2', 'h2', 100, 0);
             INSERT INTO reservations (key_id, request_id, amount_micro, created_at) VALUES
               ('k', 'req_a', 10, 1), ('k', 'req_b', 20, 1), ('k', 'req_b', 20, 2)`);
    expect(migrate(db)).toEqual([5, 6, 7, 8, 9, 10]);
    // A request holds one reservation: a duplicate (only a bug could leave one) keeps the oldest.
    expect(db.prepare('SELECT id, request_id FROM reservations ORDER BY id').all()).toEqual([
      { id: 1, request_id: 'req_a' },
      { id: 2, request_id: 'req_b' },
    ]);
    const plan = (sql: string) =>
      (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as { detail: string }[])
        .map((row) => row.detail)
        .join('; ');
    expect(plan("SELECT SUM(amount_micro) FROM reservations WHERE key_id = 'k' AND created_at >= 0")).toMatch(
      /USING COVERING INDEX reservations_key_live/,
    );
    expect(plan("SELECT id FROM reservations WHERE request_id = 'req_a' AND key_id = 'k'")).toMatch(
      /USING INDEX reservations_request/,
    );
    db.close();

    // The store on the upgraded file: a retried reserve finds its hold; the other request's hold counts.
    const store = openSqliteStore(path);
    await expect(store.reserve('k', 'req_b', 20, 3, 0)).resolves.toEqual({ ok: true, reservationId: '2' });
    await expect(store.reserve('k', 'req_c', 71, 3, 0)).resolves.toEqual({
      ok: false,
      code: 'insufficient_credits',
      availableMicro: 70,
    });
    // Request ids are the gateway's own and unique: one held under another key is a bug, not a hold.
    await expect(store.reserve('k2', 'req_a', 10, 3, 0)).rejects.toThrow(/another key/);
    await store.close();
  });

  it('keeps what each key holds as holds come and go, the upgrade’s holds included', async () => {
    const path = join(dir, 'g.db');
    const db = new Database(path);
    // The file as the previous release left it, with holds in flight.
    expect(migrate(db, 9)).toEqual(MIGRATIONS.filter((m) => m.version <= 9).map((m) => m.version));
    db.exec(`INSERT INTO api_keys (id, name, prefix, hash, credits_micro, created_at) VALUES ('k', 'n', 'p', 'h', 1000, 0);
             INSERT INTO reservations (key_id, request_id, amount_micro, created_at) VALUES ('k', 'req_a', 10, 5), ('k', 'req_b', 20, 5)`);
    expect(migrate(db)).toEqual([10]);
    const held = () => db.prepare("SELECT reserved_micro AS n FROM api_keys WHERE id = 'k'").get();
    const summed = () =>
      db.prepare("SELECT COALESCE(SUM(amount_micro), 0) AS n FROM reservations WHERE key_id = 'k'").get();
    expect(held()).toEqual({ n: 30 });

    const store = openSqliteStore(path);
    // At 61 s the store's once-a-minute sweep runs (nothing is stale yet) and is not due again before 121 s.
    const c = await store.reserve('k', 'req_c', 40, 61_000, 0);
    expect(held()).toEqual({ n: 70 });
    await store.reserve('k', 'req_d', 50, 61_000, 0);
    if (!c.ok) throw new Error('reserve failed');
    await store.settle(c.reservationId, usageEntry('k', 'req_c', 25, 61_001), 0);
    await store.release(null, { ...usageEntry('k', 'req_b', 0, 61_002), status: 502 });
    expect(held()).toEqual(summed());
    expect(held()).toEqual({ n: 60 });
    // A hold gone stale (req_a, at 5) counts nowhere before the sweep takes it: 1000 - 25 - 50 left.
    await expect(store.reserve('k', 'req_e', 926, 70_000, 6)).resolves.toMatchObject({ availableMicro: 925 });
    expect(held()).toEqual({ n: 60 });
    // The sweep (at most once a minute) removes it, and the total moves with it.
    expect((await store.reserve('k', 'req_f', 100, 122_000, 6)).ok).toBe(true);
    expect(held()).toEqual(summed());
    expect(held()).toEqual({ n: 150 });
    await store.close();
    db.close();
  });

  it('stores only the hash of a key and keeps data across reopening', async () => {
    const path = join(dir, 'g.db');
    const store = openSqliteStore(path);
    await store.createKey(keyRecord(5));
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

  it('is not writable once its file is removed or replaced, and refuses writes then', async () => {
    const path = join(dir, 'g.db');
    const store = openSqliteStore(path);
    await expect(store.checkWritable()).resolves.toBeUndefined();
    for (const suffix of ['', '-wal', '-shm']) rmSync(`${path}${suffix}`, { force: true });
    await expect(store.checkWritable()).rejects.toThrow(/was removed/);
    await expect(store.reserve('k', 'r', 1, Date.now(), 0)).rejects.toThrow(/was removed/);
    // Another process starting meanwhile creates a new file at the path: still not ours.
    const other = openSqliteStore(path);
    await expect(store.checkWritable()).rejects.toThrow(/replaced/);
    await other.close();
    await store.close();
  });

  it('is not writable on a read-only database file', async () => {
    const path = join(dir, 'g.db');
    const created = openSqliteStore(path);
    await created.close();
    // Read-only even for root: the immutable attribute (ext4 and most Linux file systems).
    execFileSync('chattr', ['+i', path]);
    try {
      const store = openSqliteStore(path);
      await expect(store.checkWritable()).rejects.toThrow(/readonly|read-only/i);
      await store.close();
    } finally {
      execFileSync('chattr', ['-i', path]);
    }
  });

  it('checkpoints the WAL on its background connection after writes, so the WAL stops growing', async () => {
    const path = join(dir, 'g.db');
    const store = openSqliteStore(path);
    await store.createKey(keyRecord(null));
    const settle = (requestId: string) => settleOne(store, requestId);
    // In WAL mode only a checkpoint writes the database file itself.
    const file = () => `${statSync(path).mtimeMs}:${statSync(path).size}`;
    const walSizes: number[] = [];
    for (let round = 0; round < 4; round++) {
      const before = file();
      await Promise.all(Array.from({ length: 500 }, (_, i) => settle(`req_${round}_${i}`)));
      walSizes.push(statSync(`${path}-wal`).size);
      // A round is far below SQLite's own threshold (1,000 pages): only the store's checkpointer runs.
      const deadline = Date.now() + 20_000;
      while (file() === before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(file()).not.toBe(before);
    }
    // After a complete checkpoint the next writer starts the WAL over: it holds about one round.
    expect(walSizes[0]).toBeLessThan(1_000 * 4096);
    expect(walSizes.at(-1)).toBeLessThanOrEqual((walSizes[0] as number) * 1.5);
    await store.close();
  });

  it('starts the WAL over while writes never pause, instead of letting it grow for as long as they last', async () => {
    const path = join(dir, 'g.db');
    const store = openSqliteStore(path);
    await store.createKey(keyRecord(null));
    // Eight callers, each settling again as soon as its last settle committed: a commit every turn
    // of the event loop, so a checkpoint always finds frames committed while it copied.
    let writing = true;
    let sent = 0;
    const caller = async () => {
      while (writing) await settleOne(store, `req_${sent++}`);
    };
    const callers = Array.from({ length: 8 }, caller);
    const first = walRestarts(path);
    const deadline = Date.now() + 30_000;
    while (walRestarts(path) < first + 2 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 100));
    writing = false;
    await Promise.all(callers);
    expect(walRestarts(path)).toBeGreaterThanOrEqual(first + 2);
    await store.close();
  }, 45_000);

  it('a write that fails midway in a shared commit leaves the next one the budget as the file holds it', async () => {
    const path = join(dir, 'g.db');
    const store = openSqliteStore(path);
    const events: BudgetEvent[] = [];
    store.onBudgetEvent = (event) => events.push(event);
    await store.createKey(keyRecord(10_000_000));
    const now = Date.now();
    const holder = { kind: 'key', id: 'key_1' } as const;
    await store.setBudgets(holder, [{ window: 'day', limitMicro: 1_000_000, mode: 'soft' }], now);
    // A fault in the file: this request's usage record cannot be written, after its debit was counted.
    const db = new Database(path);
    db.exec(`CREATE TRIGGER poisoned BEFORE INSERT ON usage_records WHEN NEW.request_id = 'poisoned'
             BEGIN SELECT RAISE(ABORT, 'poisoned record'); END`);
    db.close();
    const costs = { first: 500_000, poisoned: 400_000, next: 300_000 };
    const settles = await Promise.allSettled(
      (
        await Promise.all(
          Object.entries(costs).map(async ([id, cost]) => {
            const held = await store.reserve('key_1', id, cost, now, now - 60_000);
            if (!held.ok) throw new Error('a soft budget never refuses');
            return { id, cost, reservationId: held.reservationId };
          }),
        )
      ).map(({ id, cost, reservationId }) =>
        store.settle(reservationId, usageEntry('key_1', id, cost, now), now - 60_000),
      ),
    );
    expect(settles.map((settled) => settled.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    // 0.5 + 0.3 spent: the poisoned debit undone, in the file and in what the next settle counted
    // from (0.5 → 0.8 crosses 80 %, not 0.9 → 1.2); the poisoned request still holds its 0.4.
    expect((await store.budgets(holder, now, now)).map((b) => b.spentMicro)).toEqual([800_000 + 400_000]);
    expect(events).toEqual([{ kind: 'crossing', holder, window: 'day', threshold: 0.8 }]);
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
