import type Database from 'better-sqlite3';

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

interface Pending {
  run: () => unknown;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit: write operations queued during one turn of the event loop run together in one
 * IMMEDIATE transaction, each in its own savepoint (one failing op rolls back alone), and their
 * promises settle only after the commit. A commit costs far more than the statements (an fsync
 * path and WAL bookkeeping), so concurrent requests share one instead of paying one each; a lone
 * request waits a single event-loop turn. Ops still run one after another, so every op sees the
 * effects of the ones before it: the credit invariants hold as with one transaction per op.
 */
export function createGroupCommit(db: Database.Database) {
  let queue: Pending[] = [];
  let scheduled = false;

  // Made once: better-sqlite3 builds four wrapper functions each time db.transaction() is called.
  /** Run inside the batch's transaction, one op runs as a savepoint. */
  const inSavepoint = db.transaction((run: () => unknown) => run());
  const runBatch = db.transaction((batch: Pending[]) =>
    batch.map((op): Outcome => {
      try {
        return { ok: true, value: inSavepoint(op.run) };
      } catch (error) {
        return { ok: false, error };
      }
    }),
  );

  function flush() {
    scheduled = false;
    const batch = queue;
    queue = [];
    let outcomes: Outcome[];
    try {
      outcomes = runBatch.immediate(batch);
    } catch (error) {
      // The commit itself failed (e.g. the database stayed locked past busy_timeout): nothing
      // of this batch happened.
      for (const op of batch) op.reject(error);
      return;
    }
    batch.forEach((op, i) => {
      const outcome = outcomes[i] as Outcome;
      if (outcome.ok) op.resolve(outcome.value);
      else op.reject(outcome.error);
    });
  }

  return function write<T>(run: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      queue.push({ run, resolve: resolve as (value: unknown) => void, reject });
      if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    });
  };
}
