import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { type BatchHooks, createGroupCommit } from './group-commit.ts';

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

  describe('a long turn', () => {
    /** A group commit whose clock and early-commit verdict the test sets; it counts commits. */
    function early() {
      const db = new Database(':memory:');
      db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)');
      const clock = { now: 0, allowed: true, commits: 0 };
      const hooks: BatchHooks = {
        opSucceeded() {},
        opFailed() {},
        beforeCommit() {
          clock.commits++;
        },
        reset() {},
      };
      const { write, turns } = createGroupCommit(db, undefined, undefined, hooks, {
        afterMs: 2,
        allowed: () => clock.allowed,
        now: () => clock.now,
      });
      const insert = (id: number) =>
        write(() => db.prepare('INSERT INTO t (id, v) VALUES (?, 1)').run(id).changes);
      const rows = () => (db.prepare('SELECT COUNT(*) AS n FROM t').get() as { n: number }).n;
      return { clock, insert, rows, turns };
    }

    it('commits its writes before it ends once the first has waited 2 ms, and the rest at its end', async () => {
      const { clock, insert, rows } = early();
      const first = insert(1);
      clock.now = 1.9;
      const second = insert(2);
      expect(rows()).toBe(0); // the first has waited 1.9 ms: the turn's writes still wait
      clock.now = 2;
      const third = insert(3);
      // Committed within the turn, before any await: their callers go on at once.
      expect(rows()).toBe(3);
      expect(clock.commits).toBe(1);
      const fourth = insert(4);
      expect(rows()).toBe(3);
      await expect(Promise.all([first, second, third, fourth])).resolves.toEqual([1, 1, 1, 1]);
      // The turn's own commit took the fourth, and no empty batch was committed after it.
      expect(rows()).toBe(4);
      await new Promise((resolve) => setImmediate(resolve));
      expect(clock.commits).toBe(2);
    });

    it('commits nothing more at its end when every write of it was committed early', async () => {
      const { clock, insert, rows } = early();
      const writes = [insert(1)];
      clock.now = 3;
      writes.push(insert(2));
      expect(clock.commits).toBe(1);
      await Promise.all(writes);
      await new Promise((resolve) => setImmediate(resolve));
      expect(rows()).toBe(2);
      expect(clock.commits).toBe(1);
    });

    it('waits for the turn to end while early commits are not allowed', async () => {
      const { clock, insert, rows } = early();
      clock.allowed = false;
      const writes = [insert(1)];
      clock.now = 50;
      writes.push(insert(2), insert(3));
      expect(rows()).toBe(0);
      await Promise.all(writes);
      expect(rows()).toBe(3);
      expect(clock.commits).toBe(1);
    });

    it('never commits early while a background write holds the lock', async () => {
      const { clock, insert, rows, turns } = early();
      await turns.beforeBackgroundWrite();
      const writes = [insert(1)];
      clock.now = 50;
      writes.push(insert(2));
      expect(rows()).toBe(0);
      turns.afterBackgroundWrite();
      await Promise.all(writes);
      expect(rows()).toBe(2);
      expect(clock.commits).toBe(1);
    });
  });
});
