import type Database from 'better-sqlite3';
import type { BackgroundConnection } from './background-connection.ts';
import type { RollupBatch } from './rollup-batch.ts';
import type { Statements } from './statements.ts';

/**
 * What each domain of the SQLite store (keys.ts, credits.ts, decisions.ts, usage.ts) works with:
 * the connection, its statements, and the ways it writes and reads.
 */
export interface SqliteParts {
  db: Database.Database;
  sql: Statements;
  /** The hot writes share commits (group commit): each resolves once its batch commits. */
  write<T>(run: () => T): Promise<T>;
  /** A write outside group commit (admin and CLI): the same file check, the same error for trouble. */
  guarded<T>(run: () => T): T;
  /** Reads that can take more than a few milliseconds, and background writes, on their own thread. */
  background(): BackgroundConnection;
  /** The rollups of each batch's records, written once per row before it commits. */
  rollups: RollupBatch;
}
