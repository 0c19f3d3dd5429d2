import type Database from 'better-sqlite3';
import { BatchRollups, type RecordForRollup, upsertRowSql } from '../rollups.ts';

/**
 * The SQLite store's rollups (docs/usage.md), summed per group-commit batch: the
 * records of a batch are added up in memory and each rollup row they touch is written once,
 * before the batch commits, in its transaction. Under load a batch holds many records of the same
 * key and minute, so this writes a handful of rows where a trigger would write six per record.
 * Each op's additions are kept apart until it succeeds, so an op that fails (and rolls back to its
 * savepoint) adds nothing.
 */
export function createRollupBatch(db: Database.Database) {
  const upsert = {
    usage_rollups: db.prepare(upsertRowSql('usage_rollups')),
    usage_totals: db.prepare(upsertRowSql('usage_totals')),
  };
  let batch = new BatchRollups();
  /** What the op being run adds, kept apart until it succeeds. */
  let op: { record: RecordForRollup; sign: 1 | -1; creditsMicro: number }[] = [];

  return {
    /** Adds (sign 1) or takes away (sign -1) a record, within the op being run; `creditsMicro` in place of the record's. */
    add(record: RecordForRollup, sign: 1 | -1, creditsMicro = record.creditsMicro) {
      op.push({ record, sign, creditsMicro });
    },
    opSucceeded() {
      for (const { record, sign, creditsMicro } of op) batch.add(record, sign, creditsMicro);
      op = [];
    },
    opFailed() {
      op = [];
    },
    /** Inside the batch's transaction, after its ops: every row touched, written once. */
    flush() {
      for (const row of batch.rows.values()) upsert[row.table].run(...row.dims, ...row.sums);
      batch = new BatchRollups();
    },
    /** The batch is run again, or failed: nothing of it counts. */
    reset() {
      batch = new BatchRollups();
      op = [];
    },
  };
}

export type RollupBatch = ReturnType<typeof createRollupBatch>;
