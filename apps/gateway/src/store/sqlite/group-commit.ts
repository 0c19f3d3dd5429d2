import type Database from 'better-sqlite3';

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/** An op threw during the plain run: the batch is run again with savepoints. */
class OpFailed extends Error {}

interface Pending {
  run: () => unknown;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit: write operations queued during one turn of the event loop run together in one
 * IMMEDIATE transaction, and their promises settle only after the commit. A commit costs far more
 * than the statements (an fsync path and WAL bookkeeping), so concurrent requests share one
 * instead of paying one each; a lone request waits a single event-loop turn. Ops still run one
 * after another, so every op sees the effects of the ones before it: the credit invariants hold
 * as with one transaction per op.
 *
 * Ops run plainly first. Should one throw, the whole batch rolls back and runs again with each op
 * in its own savepoint, so only the failing op fails: savepoints cost two statements per op, paid
 * only when needed. Ops must therefore be safe to run twice (a rolled-back run leaves no trace).
 */
/**
 * Told how each op of a batch went, and asked to finish the batch inside its transaction: a store
 * that sums something per batch (the rollups) keeps what a successful op added, drops what a failed
 * one did, and writes its sums before the commit.
 */
export interface BatchHooks {
  opSucceeded(): void;
  opFailed(): void;
  beforeCommit(): void;
  /** The batch is run again or failed: nothing of it counts. */
  reset(): void;
}

const NO_HOOKS: BatchHooks = { opSucceeded() {}, opFailed() {}, beforeCommit() {}, reset() {} };

/**
 * The hot writes and the background connection's write transactions take turns (docs/usage.md):
 * while a background batch holds SQLite's write lock, a commit would sleep in the busy handler on
 * the thread that serves requests; instead the queued writes wait, without blocking anything, and
 * commit as soon as the batch ends, before the next batch may start.
 */
export interface WriteTurns {
  /** Before a background write transaction: the writes already queued commit first. */
  beforeBackgroundWrite(): Promise<void>;
  /** After it: the writes queued meanwhile commit now. */
  afterBackgroundWrite(): void;
}

/**
 * When a turn's writes may commit before the turn ends: once its first write has waited `afterMs`,
 * if `allowed()` says so. A long turn otherwise holds its first requests (and their upstream calls)
 * until its last one has queued its write; committing early costs a commit more, which only a
 * thread with time to spare should pay.
 */
export interface EarlyCommit {
  afterMs: number;
  allowed: () => boolean;
  now: () => number;
}

export function createGroupCommit(
  db: Database.Database,
  beforeBatch: () => void = () => {},
  /** What a failure becomes for the caller (e.g. storage trouble → the store's own error). */
  classify: (error: unknown) => unknown = (error) => error,
  hooks: BatchHooks = NO_HOOKS,
  early?: EarlyCommit,
): { write: <T>(run: () => T) => Promise<T>; turns: WriteTurns } {
  let queue: Pending[] = [];
  let scheduled = false;
  /** When the queue's first write was queued (with `early`). */
  let firstQueuedAt = 0;
  /** Background write transactions holding (or about to hold) the write lock. */
  let backgroundWrites = 0;
  /** Background writes waiting for the queued writes to commit. */
  let waiting: (() => void)[] = [];

  // Made once: better-sqlite3 builds four wrapper functions each time db.transaction() is called.
  const runPlain = db.transaction((batch: Pending[]) => {
    const outcomes = batch.map((op): Outcome => {
      try {
        const value = op.run();
        hooks.opSucceeded();
        return { ok: true, value };
      } catch (error) {
        hooks.opFailed();
        throw new OpFailed('a write of the batch failed', { cause: error });
      }
    });
    hooks.beforeCommit();
    return outcomes;
  });
  /** Run inside the batch's transaction, one op runs as a savepoint. */
  const inSavepoint = db.transaction((run: () => unknown) => run());
  const runIsolated = db.transaction((batch: Pending[]) => {
    const outcomes = batch.map((op): Outcome => {
      try {
        const value = inSavepoint(op.run);
        hooks.opSucceeded();
        return { ok: true, value };
      } catch (error) {
        hooks.opFailed();
        return { ok: false, error };
      }
    });
    hooks.beforeCommit();
    return outcomes;
  });

  function flush() {
    scheduled = false;
    const batch = queue;
    queue = [];
    try {
      if (batch.length > 0) commit(batch);
    } finally {
      // The background writes that waited for this batch may go now.
      const go = waiting;
      waiting = [];
      for (const resume of go) resume();
    }
  }

  function commit(batch: Pending[]) {
    let outcomes: Outcome[];
    try {
      beforeBatch(); // e.g. the file is still the one opened: otherwise nothing of the batch runs
      try {
        outcomes = runPlain.immediate(batch);
      } catch (error) {
        hooks.reset();
        if (!(error instanceof OpFailed)) throw error;
        outcomes = runIsolated.immediate(batch);
      }
    } catch (error) {
      hooks.reset();
      // The commit itself failed (e.g. the database stayed locked past busy_timeout, or the file
      // was removed): nothing of this batch happened.
      for (const op of batch) op.reject(classify(error));
      return;
    }
    batch.forEach((op, i) => {
      const outcome = outcomes[i] as Outcome;
      if (outcome.ok) op.resolve(outcome.value);
      else op.reject(classify(outcome.error));
    });
  }

  /** The queued writes commit now, the turn not over, if the first has waited long enough. */
  function commitEarly({ afterMs, allowed, now }: EarlyCommit) {
    if (queue.length === 1) {
      firstQueuedAt = now();
      return;
    }
    if (backgroundWrites > 0 || now() - firstQueuedAt < afterMs || !allowed()) return;
    // The turn's own flush stays scheduled: it commits whatever the rest of the turn queues.
    const batch = queue;
    queue = [];
    commit(batch);
  }

  const schedule = () => {
    if (!scheduled && backgroundWrites === 0 && queue.length > 0) {
      scheduled = true;
      setImmediate(flush);
    }
  };

  return {
    write<T>(run: () => T): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        queue.push({ run, resolve: resolve as (value: unknown) => void, reject });
        if (early !== undefined) commitEarly(early);
        schedule();
      });
    },
    turns: {
      async beforeBackgroundWrite() {
        while (queue.length > 0 || scheduled) await new Promise<void>((resume) => waiting.push(resume));
        backgroundWrites++;
      },
      afterBackgroundWrite() {
        backgroundWrites--;
        schedule();
      },
    },
  };
}
