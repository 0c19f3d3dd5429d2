import { execFileSync } from 'node:child_process';
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
      route: null,
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
