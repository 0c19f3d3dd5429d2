import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { createGroupCommit } from './group-commit.ts';

function setup() {
  const db = new Database(':memory:');
  db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER NOT NULL CHECK (v >= 0))');
  const { write, turns } = createGroupCommit(db);
  return { db, write, turns };
}

describe('group commit', () => {
  it('runs the writes of one event-loop turn in one transaction, in order, each seeing the last', async () => {
    const { db, write } = setup();
    db.prepare('INSERT INTO t (id, v) VALUES (1, 1)').run();
    // Two "reserves" in the same turn: only the first fits.
    const take = () =>
      write(() => {
        const { v } = db.prepare('SELECT v FROM t WHERE id = 1').get() as { v: number };
        if (v < 1) return false;
        db.prepare('UPDATE t SET v = v - 1 WHERE id = 1').run();
        return true;
      });
    const results = await Promise.all([take(), take(), take()]);
    expect(results).toEqual([true, false, false]);
    expect(db.prepare('SELECT v FROM t WHERE id = 1').get()).toEqual({ v: 0 });
  });

  it('rolls back a failing write alone and rejects only its promise', async () => {
    const { db, write } = setup();
    const ok1 = write(() => db.prepare('INSERT INTO t (id, v) VALUES (1, 5)').run().changes);
    const bad = write(() => {
      db.prepare('INSERT INTO t (id, v) VALUES (2, 5)').run();
      db.prepare('INSERT INTO t (id, v) VALUES (3, -1)').run(); // CHECK fails
    });
    const ok2 = write(() => db.prepare('INSERT INTO t (id, v) VALUES (4, 5)').run().changes);
    await expect(ok1).resolves.toBe(1);
    await expect(bad).rejects.toThrow(/CHECK/);
    await expect(ok2).resolves.toBe(1);
    expect(db.prepare('SELECT id FROM t ORDER BY id').all()).toEqual([{ id: 1 }, { id: 4 }]);
  });

  it('applies the other writes of a batch with a failing one exactly once', async () => {
    const { db, write } = setup();
    db.prepare('INSERT INTO t (id, v) VALUES (1, 0)').run();
    const bump = () => write(() => db.prepare('UPDATE t SET v = v + 1 WHERE id = 1').run().changes);
    const results = await Promise.allSettled([
      bump(),
      write(() => db.prepare('UPDATE t SET v = -1 WHERE id = 1').run()), // CHECK fails
      bump(),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(db.prepare('SELECT v FROM t WHERE id = 1').get()).toEqual({ v: 2 });
  });

  it('settles promises only after the commit, and starts a new batch for later writes', async () => {
    const { db, write } = setup();
    const first = write(() => db.prepare('INSERT INTO t (id, v) VALUES (1, 1)').run());
    expect(db.prepare('SELECT COUNT(*) AS n FROM t').get()).toEqual({ n: 0 });
    await first;
    expect(db.inTransaction).toBe(false);
    await write(() => db.prepare('INSERT INTO t (id, v) VALUES (2, 1)').run());
    expect(db.prepare('SELECT COUNT(*) AS n FROM t').get()).toEqual({ n: 2 });
  });

  it('takes turns with background writes: queued writes commit first, and writes during one wait for its end', async () => {
    const { db, write, turns } = setup();
    const order: string[] = [];
    const queued = write(() => order.push('queued write'));
    // A background write asked for now waits for the queued write's commit.
    const background = turns.beforeBackgroundWrite().then(() => order.push('background starts'));
    await background;
    expect(order).toEqual(['queued write', 'background starts']);
    await queued;
    // While it holds the lock, a write waits (it does not run, so it cannot meet the lock)…
    let ran = false;
    const during = write(() => {
      ran = true;
      return db.prepare('INSERT INTO t (id, v) VALUES (1, 1)').run().changes;
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(ran).toBe(false);
    // …and commits as soon as the background write is over.
    turns.afterBackgroundWrite();
    await expect(during).resolves.toBe(1);
    // With nothing queued, a background write starts at once.
    await turns.beforeBackgroundWrite();
    turns.afterBackgroundWrite();
  });
});
