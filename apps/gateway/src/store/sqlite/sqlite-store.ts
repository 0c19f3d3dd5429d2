import { mkdirSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { servingThreadSteadyLoad } from '../../serving-thread.ts';
import { assertUpgraded, pendingMigrations } from '../shared-rules.ts';
import { type Store, StoreUnavailableError } from '../store.ts';
import { type BackgroundConnection, openBackgroundConnection } from './background-connection.ts';
import { sqliteBudgets } from './budgets.ts';
import { sqliteCredits } from './credits.ts';
import { sqliteDecisions } from './decisions.ts';
import { createGroupCommit, type EarlyCommit } from './group-commit.ts';
import { sqliteKeys } from './keys.ts';
import { sqliteLearning } from './learning.ts';
import { MIGRATIONS } from './migrations.ts';
import type { SqliteParts } from './parts.ts';
import { createRollupBatch } from './rollup-batch.ts';
import { prepareStatements } from './statements.ts';
import { sqliteUsage } from './usage.ts';

/**
 * How often the background connection checkpoints the WAL after writes: this connection never does
 * (a checkpoint copies pages into the database file and syncs it, which in a commit here would
 * stall every request behind it).
 */
const CHECKPOINT_EVERY_MS = 1_000;

/** A long turn's writes commit once its first has waited 2 ms, while the serving thread has time to spare. */
const EARLY_COMMIT: EarlyCommit = {
  afterMs: 2,
  allowed: () => servingThreadSteadyLoad() < 0.8,
  now: () => performance.now(),
};

/** SQLite's result codes for a file it cannot lock, read or write now: storage trouble, not a bug. */
const TROUBLE = /^SQLITE_(BUSY|LOCKED|IOERR|FULL|CANTOPEN|READONLY|PROTOCOL|NOTADB|CORRUPT)/;

/** Storage trouble becomes the store's own error (503, docs/operating.md); anything else stays as it is. */
function storageTrouble(error: unknown): unknown {
  const code = (error as { code?: unknown }).code;
  const file = error instanceof Error && /^the database file /.test(error.message);
  if ((typeof code === 'string' && TROUBLE.test(code)) || file)
    return new StoreUnavailableError(`the SQLite database cannot be written: ${(error as Error).message}`, {
      cause: error,
    });
  return error;
}

/** Apply the migrations this file has not seen yet; returns the versions applied. */
export function migrate(db: Database.Database, upTo = Number.POSITIVE_INFINITY): number[] {
  db.exec(
    'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)',
  );
  const applied = new Set(
    db
      .prepare<[], { version: number }>('SELECT version FROM schema_migrations')
      .all()
      .map((row) => row.version),
  );
  const done: number[] = [];
  for (const step of pendingMigrations(MIGRATIONS, applied, upTo)) {
    db.transaction(() => {
      db.exec(step.sql);
      db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(
        step.version,
        step.name,
        Date.now(),
      );
    }).immediate();
    done.push(step.version);
  }
  return done;
}

export interface SqliteStoreOptions {
  /** STORE_TIMEOUT_MS: how long a write waits for another process's lock before giving up (503). */
  timeoutMs?: number;
  /** Migrate no further than this version: tests of the upgrade start from an older schema. */
  migrateTo?: number;
}

/**
 * The Store on a SQLite file (better-sqlite3: synchronous, so each step runs with no interleaving
 * inside this process; BEGIN IMMEDIATE serialises writers across processes). Statements are
 * prepared once; the hot writes (reserve, settle, release) share commits through group commit.
 */
export function openSqliteStore(path: string, options: SqliteStoreOptions = {}): Store {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma(`busy_timeout = ${Math.trunc(options.timeoutMs ?? 2_000)}`);
  db.pragma('foreign_keys = ON');
  if (path !== ':memory:') db.pragma('wal_autocheckpoint = 0');
  migrate(db, options.migrateTo);

  const sql = prepareStatements(db);

  /**
   * The file this store opened must still be the one at its path: a file deleted or replaced
   * under a running gateway would take every later write with it on restart. Checked before each
   * write batch and by readiness.
   */
  const opened = path === ':memory:' ? undefined : statSync(path);
  const assertSameFile = () => {
    if (opened === undefined) return;
    let now: ReturnType<typeof statSync>;
    try {
      now = statSync(path);
    } catch {
      throw new Error(`the database file ${path} was removed`);
    }
    if (now.ino !== opened.ino || now.dev !== opened.dev)
      throw new Error(`the database file ${path} was replaced by another file`);
  };

  /** The rollups of each batch's records, written once per row before it commits. */
  const rollups = createRollupBatch(db);
  /** Whether this connection wrote since the background connection's last checkpoint (migrations count). */
  let wrote = true;
  const { write, turns } = createGroupCommit(
    db,
    assertSameFile,
    storageTrouble,
    {
      opSucceeded: rollups.opSucceeded,
      opFailed: rollups.opFailed,
      beforeCommit() {
        rollups.flush();
        wrote = true;
      },
      reset: rollups.reset,
    },
    EARLY_COMMIT,
  );
  /** A write outside group commit (admin and CLI): the same file check, the same error for trouble. */
  const guarded = <T>(run: () => T): T => {
    try {
      assertSameFile();
      wrote = true;
      return run();
    } catch (error) {
      throw storageTrouble(error);
    }
  };

  /** Reads that can take more than a few milliseconds, and background writes, on their own thread. */
  let reads: BackgroundConnection | undefined;
  const background = () =>
    (reads ??= openBackgroundConnection(path, {
      timeoutMs: options.timeoutMs ?? 2_000,
      classify: storageTrouble,
      turns,
    }));

  const checkpoints =
    path === ':memory:'
      ? undefined
      : setInterval(() => {
          if (!wrote) return;
          wrote = false;
          background()
            .checkpoint()
            .catch(() => {
              wrote = true; // tried again at the next tick
            });
        }, CHECKPOINT_EVERY_MS).unref();

  const parts: SqliteParts = { db, sql, write, guarded, background, rollups };
  const budgets = sqliteBudgets(parts);
  const store: Store = {
    ...sqliteKeys(parts),
    ...sqliteCredits(parts, budgets, (event) => store.onBudgetEvent?.(event)),
    ...budgets.methods,
    ...sqliteDecisions(parts),
    ...sqliteLearning(parts),
    ...sqliteUsage(parts),
    async checkWritable() {
      assertSameFile();
      sql.heartbeat.run(Date.now());
      assertUpgraded(sql.backfill.get());
    },
    async close() {
      clearInterval(checkpoints);
      await reads?.close();
      if (db.open) db.close();
    },
  };
  return store;
}
