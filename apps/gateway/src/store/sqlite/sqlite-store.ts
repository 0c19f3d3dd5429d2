import { mkdirSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import {
  foldRecordsSql,
  ROLLUP_STEPS_MS,
  type SummedRow,
  summaryReads,
  summedSql,
  toSummary,
  toSums,
} from '../rollups.ts';
import {
  KEY_COLUMNS,
  type KeyRow,
  TOKEN_AUTH_COLUMNS,
  toKey,
  toTokenAuth,
  toUsage,
  type UsageRow,
} from '../rows.ts';
import { adjustedBalance, assertUpgraded, pendingMigrations, usageTotals } from '../shared-rules.ts';
import {
  type AdjustResult,
  groupJudged,
  type KeptDecision,
  type KeyAuth,
  type NewKey,
  pageOf,
  type ReserveResult,
  type SeriesRow,
  type Store,
  StoreUnavailableError,
  type UsageEntry,
} from '../store.ts';
import { type BackgroundConnection, openBackgroundConnection } from './background-connection.ts';
import { createGroupCommit } from './group-commit.ts';
import { MIGRATIONS } from './migrations.ts';
import { createRollupBatch } from './rollup-batch.ts';

/** Keys kept for authentication; past this many the cache starts again from empty. */
const KEY_CACHE_LIMIT = 10_000;

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

const SUMS = summedSql('sqlite');

/** The reads run on the background connection (docs/usage.md). */
const READS = {
  series: `SELECT at, ${summedSql('sqlite', 'usage_totals')} FROM usage_totals
           WHERE step_ms = ? AND at >= ? AND at < ? GROUP BY at ORDER BY at`,
  keySeries: `SELECT at, ${SUMS} FROM usage_rollups WHERE key_id = ? AND step_ms = ? AND at >= ? AND at < ?
              GROUP BY at ORDER BY at`,
  keyTotals: `SELECT ${SUMS} FROM usage_rollups WHERE key_id = ? AND step_ms = ${ROLLUP_STEPS_MS.day}`,
  recent: 'SELECT * FROM usage_records WHERE key_id = ? ORDER BY at DESC, id DESC LIMIT ?',
  judged: `SELECT d.request_id, d.route, d.questions, o.question_id, o.truth
           FROM decision_records d JOIN decision_outcomes o ON o.request_id = d.request_id
           WHERE d.at >= ? AND d.at < ? AND (? IS NULL OR d.key_id = ?) AND (? IS NULL OR d.route = ?)
           ORDER BY d.request_id`,
};

/**
 * Retention deletes from the oldest records by id, a batch at a time, those older than the cutoff:
 * records are written in the order their requests end, so id order is time order give or take a
 * request's deadline, and no index on \`at\` is needed (nor paid on every insert). A record that
 * ended out of order waits for the next pass.
 */
const DELETE_OLDEST = `DELETE FROM usage_records WHERE id IN (
  SELECT id FROM (SELECT id, at FROM usage_records ORDER BY id LIMIT ?) WHERE at < ?)`;

/** Folds records from a batch's start (or from next_id, should another process have folded part of it) until its end. */
const FOLDS = (['usage_totals', 'usage_rollups'] as const).map((table) =>
  foldRecordsSql('sqlite', table, 'MAX(?, (SELECT next_id FROM usage_rollup_backfill WHERE id = 1))', '?'),
);

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
  migrate(db, options.migrateTo);

  const sql = {
    insertKey: db.prepare(
      `INSERT INTO api_keys (id, name, prefix, hash, credits_micro, rate_limit_per_minute, route, created_at, expires_at)
       VALUES (@id, @name, @prefix, @hash, @creditsMicro, @rateLimitPerMinute, @route, @createdAt, @expiresAt)`,
    ),
    keyAuthByHash: db.prepare<[string], KeyAuth>(
      `SELECT id, prefix, rate_limit_per_minute AS rateLimitPerMinute, route, expires_at AS expiresAt,
              revoked_at AS revokedAt
       FROM api_keys WHERE hash = ?`,
    ),
    /** Changes whenever another connection (a process, an instance, the CLI) commits a write. */
    dataVersion: db.prepare<[], number>('PRAGMA data_version').pluck(),
    keyById: db.prepare<[string], KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = ?`),
    /** Newest first, after a cursor; one row more than asked says whether a next page exists. */
    keysPage: db.prepare<{ createdAt: number; id: string; limit: number }, KeyRow>(
      `SELECT ${KEY_COLUMNS} FROM api_keys WHERE (created_at, id) < (@createdAt, @id)
       ORDER BY created_at DESC, id DESC LIMIT @limit`,
    ),
    countKeys: db.prepare<[], { n: number }>('SELECT COUNT(*) AS n FROM api_keys'),
    setCredits: db.prepare<[number, string]>('UPDATE api_keys SET credits_micro = ? WHERE id = ?'),
    revoke: db.prepare<[number, string]>(
      'UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?',
    ),
    grant: db.prepare<[string, number, number]>(
      'INSERT INTO credit_ledger (key_id, delta_micro, at) VALUES (?, ?, ?)',
    ),
    ledgerBalance: db.prepare<[string, string], { total: number }>(
      `SELECT (SELECT COALESCE(SUM(delta_micro), 0) FROM credit_ledger WHERE key_id = ?)
            - (SELECT COALESCE(SUM(credits_micro), 0) FROM usage_rollups WHERE key_id = ? AND step_ms = ${ROLLUP_STEPS_MS.day}) AS total`,
    ),
    /**
     * What reserve and settle read, in one statement: the key as it stands, its balance, and what its
     * live (not stale) reservations hold, summed from the covering index alone.
     */
    balance: db.prepare<
      { keyId: string; since: number },
      { credits: number | null; reserved: number; revokedAt: number | null; expiresAt: number | null }
    >(
      `SELECT credits_micro AS credits, revoked_at AS revokedAt, expires_at AS expiresAt,
              (SELECT COALESCE(SUM(amount_micro), 0) FROM reservations
               WHERE key_id = @keyId AND created_at >= @since) AS reserved
       FROM api_keys WHERE id = @keyId`,
    ),
    /** One hold per request (a unique index): a retried reserve inserts nothing and finds its hold. */
    insertReservation: db.prepare<[string, string, number, number, string | null]>(
      `INSERT INTO reservations (key_id, request_id, amount_micro, created_at, token_id) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (request_id) DO NOTHING`,
    ),
    reservationOf: db.prepare<[string, string], { id: number }>(
      'SELECT id FROM reservations WHERE request_id = ? AND key_id = ?',
    ),
    insertToken: db.prepare(
      `INSERT INTO tokens (id, key_id, hash, expires_at, max_credits_micro, origins, subject, rate_limit_per_minute, route, created_at)
       VALUES (@id, @keyId, @hash, @expiresAt, @maxCreditsMicro, @originsJson, @subject, @rateLimitPerMinute, @route, @createdAt)`,
    ),
    tokenAuthByHash: db.prepare<[string], Parameters<typeof toTokenAuth>[0]>(
      `SELECT ${TOKEN_AUTH_COLUMNS} FROM tokens t JOIN api_keys k ON k.id = t.key_id WHERE t.hash = ?`,
    ),
    /** A token's cap, what it spent (its usage records) and what its live reservations hold. */
    tokenBudget: db.prepare<
      { tokenId: string; since: number },
      { cap: number | null; spent: number; held: number; expiresAt: number }
    >(
      `SELECT max_credits_micro AS cap, expires_at AS expiresAt,
              (SELECT COALESCE(SUM(credits_micro), 0) FROM usage_records WHERE token_id = @tokenId) AS spent,
              (SELECT COALESCE(SUM(amount_micro), 0) FROM reservations
               WHERE token_id = @tokenId AND created_at >= @since) AS held
       FROM tokens WHERE id = @tokenId`,
    ),
    // Row ids are reused once deleted: the request id makes sure it is still this request's
    // reservation, not a newer one that took the id after a sweep released this one as stale.
    deleteReservation: db.prepare<[number, string], { amount: number }>(
      'DELETE FROM reservations WHERE id = ? AND request_id = ? RETURNING amount_micro AS amount',
    ),
    /** Idempotency: a request already holding a reservation, or already recorded. */
    recordedDebit: db.prepare<[string, string], UsageRow & { id: number; debit: number }>(
      'SELECT *, credits_micro AS debit FROM usage_records WHERE request_id = ? AND key_id = ?',
    ),
    deleteReservationOf: db.prepare<[string, string]>(
      'DELETE FROM reservations WHERE request_id = ? AND key_id = ?',
    ),
    voidUsage: db.prepare<[number, string, string]>(
      'UPDATE usage_records SET credits_micro = 0, status = ? WHERE request_id = ? AND key_id = ?',
    ),
    refund: db.prepare<[number, string]>(
      'UPDATE api_keys SET credits_micro = credits_micro + ? WHERE id = ? AND credits_micro IS NOT NULL',
    ),
    dropStale: db.prepare<[number]>('DELETE FROM reservations WHERE created_at < ?'),
    debitAndTouch: db.prepare<[number, number, string]>(
      'UPDATE api_keys SET credits_micro = credits_micro - ?, last_used_at = ? WHERE id = ?',
    ),
    touch: db.prepare<[number, string]>('UPDATE api_keys SET last_used_at = ? WHERE id = ?'),
    /** Positional parameters: binding 14 by name costs a property lookup each (about 1 µs a row). */
    insertUsage: db.prepare<
      [
        string,
        string,
        number,
        number,
        number,
        number,
        number,
        number,
        number,
        string | null,
        string | null,
        number,
        string | null,
        string | null,
      ]
    >(
      `INSERT INTO usage_records (request_id, key_id, credits_micro, input_tokens, output_tokens, questions, status, elapsed_ms, at,
                                 route, upstream, cached, token_id, subject)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    /** The upgrade's progress: records from next_id to last_id are still to be folded into the rollups. */
    backfill: db.prepare<[], { next: number; last: number }>(
      'SELECT next_id AS next, last_id AS last FROM usage_rollup_backfill WHERE id = 1',
    ),
    insertDecision: db.prepare<[string, string, string | null, number, string | null, string]>(
      `INSERT INTO decision_records (request_id, key_id, route, at, reused, questions) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (request_id) DO NOTHING`,
    ),
    decision: db.prepare<
      [string],
      {
        requestId: string;
        keyId: string;
        route: string | null;
        at: number;
        reused: string | null;
        questions: string;
      }
    >(
      `SELECT request_id AS requestId, key_id AS keyId, route, at, reused, questions FROM decision_records WHERE request_id = ?`,
    ),
    outcomeExists: db.prepare<[string, string], { n: number }>(
      'SELECT 1 AS n FROM decision_outcomes WHERE request_id = ? AND question_id = ?',
    ),
    upsertOutcome: db.prepare<[string, string, string, number]>(
      `INSERT INTO decision_outcomes (request_id, question_id, truth, recorded_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (request_id, question_id) DO UPDATE SET truth = excluded.truth, recorded_at = excluded.recorded_at`,
    ),
    heartbeat: db.prepare<[number]>(
      'INSERT INTO heartbeat (id, at) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET at = excluded.at',
    ),
  };

  const createKey = db.transaction((key: NewKey) => {
    sql.insertKey.run(key);
    if (key.creditsMicro !== null && key.creditsMicro > 0)
      sql.grant.run(key.id, key.creditsMicro, key.createdAt);
  });

  const adjustCredits = db.transaction((id: string, delta: number, at: number): AdjustResult => {
    const row = sql.keyById.get(id);
    if (!row) return { ok: false, code: 'not_found' };
    const adjusted = adjustedBalance(row.credits_micro, delta);
    if (!adjusted.ok) return adjusted;
    sql.setCredits.run(adjusted.balanceMicro, id);
    if (delta !== 0) sql.grant.run(id, delta, at);
    return { ok: true, key: toKey({ ...row, credits_micro: adjusted.balanceMicro }) };
  });

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
  const write = createGroupCommit(db, assertSameFile, storageTrouble, {
    opSucceeded: rollups.opSucceeded,
    opFailed: rollups.opFailed,
    beforeCommit: rollups.flush,
    reset: rollups.reset,
  });
  /** A write outside group commit (admin and CLI): the same file check, the same error for trouble. */
  const guarded = <T>(run: () => T): T => {
    try {
      assertSameFile();
      return run();
    } catch (error) {
      throw storageTrouble(error);
    }
  };

  /**
   * Keys read for authentication, by hash, valid while no other connection has written to the
   * database: PRAGMA data_version (a cheap check on every lookup) says when one has, and this
   * connection's own key changes clear it directly. A revocation or a new expiry anywhere is seen
   * on the next request, as docs/http-api.md#keys requires; only the statement that reads the key is saved.
   */
  const keyCache = new Map<string, KeyAuth>();
  let cachedVersion = sql.dataVersion.get();
  const findKeyAuth = (hash: string): KeyAuth | undefined => {
    const version = sql.dataVersion.get();
    if (version !== cachedVersion) {
      keyCache.clear();
      cachedVersion = version;
    }
    const cached = keyCache.get(hash);
    if (cached !== undefined) return cached;
    const key = sql.keyAuthByHash.get(hash);
    // Unknown hashes are not cached: guessed keys must not grow memory.
    if (key !== undefined) {
      if (keyCache.size >= KEY_CACHE_LIMIT) keyCache.clear();
      keyCache.set(hash, key);
    }
    return key;
  };
  /**
   * Stale reservations only stop counting (`since`); rows are swept at most once a minute. (If a
   * batch is rolled back and replayed, its sweep may be skipped: the next one catches up.)
   */
  let lastSweep = 0;

  /** What a capped token can still spend beside its live reservations; undefined when uncapped. */
  const tokenAvailable = (tokenId: string | null | undefined, since: number): number | undefined => {
    if (tokenId === null || tokenId === undefined) return undefined;
    const budget = sql.tokenBudget.get({ tokenId, since });
    if (!budget || budget.cap === null) return undefined;
    return budget.cap - budget.spent - budget.held;
  };

  const reserve = (
    keyId: string,
    requestId: string,
    amount: number,
    at: number,
    staleBefore: number,
    tokenId: string | null = null,
  ): ReserveResult => {
    if (at - lastSweep > 60_000) {
      sql.dropStale.run(staleBefore);
      lastSweep = at;
    }
    const row = sql.balance.get({ keyId, since: staleBefore });
    // The key as it stands now: authentication may have read it from a cache (docs/http-api.md#keys).
    if (!row) return { ok: false, code: 'key_refused', reason: 'unknown' };
    if (row.revokedAt !== null) return { ok: false, code: 'key_refused', reason: 'revoked' };
    if (row.expiresAt !== null && row.expiresAt <= at)
      return { ok: false, code: 'key_refused', reason: 'expired' };
    // What a capped token can still spend beside its live reservations; undefined when uncapped.
    let tokenLeft: number | undefined;
    if (tokenId !== null) {
      const token = sql.tokenBudget.get({ tokenId, since: staleBefore });
      if (!token || token.expiresAt <= at) return { ok: false, code: 'key_refused', reason: 'token_expired' };
      if (token.cap !== null) tokenLeft = token.cap - token.spent - token.held;
    }
    if (row.credits === null && tokenLeft === undefined) return { ok: true, reservationId: null };
    const keyLeft = row.credits === null ? Number.MAX_SAFE_INTEGER : row.credits - row.reserved;
    const available = Math.min(keyLeft, tokenLeft ?? Number.MAX_SAFE_INTEGER);
    if (available >= amount) {
      const inserted = sql.insertReservation.run(keyId, requestId, amount, at, tokenId);
      if (inserted.changes === 1) return { ok: true, reservationId: String(inserted.lastInsertRowid) };
    }
    // Asked again for the same request (a retried call): the hold it already has, which the
    // live holds above already count.
    const existing = sql.reservationOf.get(requestId, keyId);
    if (existing) return { ok: true, reservationId: String(existing.id) };
    if (available >= amount) throw new Error(`request ${requestId} holds a reservation of another key`);
    return { ok: false, code: 'insufficient_credits', availableMicro: Math.max(0, available) };
  };

  /** The request's usage record, with what was debited for it, and its rollups. */
  const insertUsage = (entry: UsageEntry, debitMicro: number) => {
    rollups.add({ ...entry, creditsMicro: debitMicro }, 1);
    return sql.insertUsage.run(
      entry.requestId,
      entry.keyId,
      debitMicro,
      entry.inputTokens,
      entry.outputTokens,
      entry.questions,
      entry.status,
      entry.elapsedMs,
      entry.at,
      entry.route,
      entry.upstream,
      entry.cached ? 1 : 0,
      entry.tokenId,
      entry.subject,
    );
  };

  const keepDecision = (entry: UsageEntry, decision: KeptDecision | undefined) => {
    if (decision !== undefined)
      sql.insertDecision.run(
        entry.requestId,
        entry.keyId,
        entry.route,
        entry.at,
        decision.reused,
        decision.questions,
      );
  };

  const settle = (
    reservationId: string | null,
    entry: UsageEntry,
    staleBefore: number,
    decision?: KeptDecision,
  ): number => {
    let debit = entry.creditsMicro;
    const held =
      reservationId === null ? undefined : sql.deleteReservation.get(Number(reservationId), entry.requestId);
    // Never more than was reserved (docs/http-api.md#credits).
    if (held) debit = Math.min(debit, held.amount);
    else {
      // No hold (an unlimited key, a retried call, a hold swept as stale): settled already, the
      // first debit stands and nothing is written twice.
      const recorded = sql.recordedDebit.get(entry.requestId, entry.keyId);
      if (recorded) return recorded.debit;
    }
    // Live reservations of other requests count against the cap; stale ones (left by a crashed
    // process) count nowhere, even before the sweep removes them (docs/http-api.md#credits).
    const row = sql.balance.get({ keyId: entry.keyId, since: staleBefore });
    // A capped token never spends past its cap, beside its other live reservations (docs/browsers.md).
    const tokenLeft = tokenAvailable(entry.tokenId, staleBefore);
    if (tokenLeft !== undefined) debit = Math.min(debit, Math.max(0, tokenLeft));
    if (row && row.credits !== null) {
      // Never more than the key can still cover beside its other in-flight reservations.
      debit = Math.min(debit, Math.max(0, row.credits - row.reserved));
      sql.debitAndTouch.run(debit, entry.at, entry.keyId);
    } else {
      sql.touch.run(entry.at, entry.keyId);
    }
    insertUsage(entry, debit);
    keepDecision(entry, decision);
    return debit;
  };

  const release = (reservationId: string | null, entry: UsageEntry, decision?: KeptDecision) => {
    // A hold still there means nothing was recorded for the request yet.
    const held =
      reservationId === null ? undefined : sql.deleteReservation.get(Number(reservationId), entry.requestId);
    if (!held) {
      const recorded = sql.recordedDebit.get(entry.requestId, entry.keyId);
      if (recorded) {
        // Settled, yet its caller was answered a failure: a failed request is never charged.
        if (recorded.status === 200 && entry.status !== 200) {
          // Its rollups move with it, unless the upgrade has yet to fold it (the fold takes it as it is then).
          const progress = sql.backfill.get();
          if (!(progress && recorded.id >= progress.next && recorded.id <= progress.last)) {
            const was = toUsage(recorded);
            rollups.add(was, -1);
            rollups.add({ ...was, creditsMicro: 0, status: entry.status }, 1);
          }
          sql.voidUsage.run(entry.status, entry.requestId, entry.keyId);
          sql.refund.run(recorded.debit, entry.keyId);
        }
        return;
      }
      sql.deleteReservationOf.run(entry.requestId, entry.keyId);
    }
    insertUsage(entry, 0);
    sql.touch.run(entry.at, entry.keyId);
    keepDecision(entry, decision);
  };

  /** Reads that can take more than a few milliseconds, and background writes, on their own thread. */
  let reads: BackgroundConnection | undefined;
  const background = () =>
    (reads ??= openBackgroundConnection(path, {
      timeoutMs: options.timeoutMs ?? 2_000,
      classify: storageTrouble,
    }));

  return {
    async createKey(key) {
      guarded(() => createKey.immediate(key));
      return toKey(sql.keyById.get(key.id) as KeyRow);
    },
    async findKeyByHash(hash) {
      return findKeyAuth(hash);
    },
    async createToken(token) {
      const originsJson = token.origins === null ? null : JSON.stringify(token.origins);
      await write(() => sql.insertToken.run({ ...token, originsJson }));
    },
    async findTokenByHash(hash) {
      const row = sql.tokenAuthByHash.get(hash);
      return row && toTokenAuth(row);
    },
    async getKey(id) {
      const row = sql.keyById.get(id);
      return row && toKey(row);
    },
    async listKeys(limit, after) {
      const rows = sql.keysPage.all({
        createdAt: after?.createdAt ?? Number.MAX_SAFE_INTEGER,
        id: after?.id ?? '',
        limit: limit + 1,
      });
      return pageOf(rows.map(toKey), limit);
    },
    async countKeys() {
      return sql.countKeys.get()?.n ?? 0;
    },
    async adjustCredits(id, delta, at) {
      return guarded(() => adjustCredits.immediate(id, delta, at));
    },
    async revokeKey(id, at) {
      guarded(() => sql.revoke.run(at, id));
      keyCache.clear();
      const row = sql.keyById.get(id);
      return row && toKey(row);
    },
    reserve: (keyId, requestId, amount, at, staleBefore, tokenId) =>
      write(() => reserve(keyId, requestId, amount, at, staleBefore, tokenId ?? null)),
    settle: (reservationId, entry, staleBefore, decision) =>
      write(() => settle(reservationId, entry, staleBefore, decision)),
    release: (reservationId, entry, decision) => write(() => release(reservationId, entry, decision)),
    async findDecision(requestId) {
      return sql.decision.get(requestId);
    },
    recordOutcomes: (requestId, outcomes, at) =>
      write(() => {
        let replaced = 0;
        for (const { questionId, truth } of outcomes) {
          if (sql.outcomeExists.get(requestId, questionId)) replaced++;
          sql.upsertOutcome.run(requestId, questionId, truth, at);
        }
        return replaced;
      }),
    async judgedDecisions({ from, to, keyId, route }) {
      const rows = await background().all<{
        request_id: string;
        route: string | null;
        questions: string;
        question_id: string;
        truth: string;
      }>({
        sql: READS.judged,
        params: [from, to, keyId ?? null, keyId ?? null, route ?? null, route ?? null],
      });
      return groupJudged(rows);
    },
    async deleteDecisionsBefore(before, limit) {
      const [, changed] = await background().transaction([
        {
          sql: `DELETE FROM decision_outcomes WHERE request_id IN (
                  SELECT request_id FROM (SELECT request_id, at FROM decision_records ORDER BY id LIMIT ?) WHERE at < ?)`,
          params: [limit, before],
        },
        {
          sql: `DELETE FROM decision_records WHERE id IN (
                  SELECT id FROM (SELECT id, at FROM decision_records ORDER BY id LIMIT ?) WHERE at < ?)`,
          params: [limit, before],
        },
      ]);
      return changed ?? 0;
    },
    async usageSeries({ keyId, stepMs, from, to }) {
      const rows = await background().all<SummedRow & { at: number }>(
        keyId === undefined
          ? { sql: READS.series, params: [stepMs, from, to] }
          : { sql: READS.keySeries, params: [keyId, stepMs, from, to] },
      );
      return rows.map((row): SeriesRow => ({ at: Number(row.at), ...toSums(row) }));
    },
    async usageSummary({ keyId, spans }) {
      const reads = summaryReads('sqlite', spans, keyId, () => '?');
      return toSummary(await Promise.all(reads.map((read) => background().all<SummedRow>(read))));
    },
    async usage(keyId, limit) {
      const [totals, recent] = await Promise.all([
        background().all<SummedRow>({ sql: READS.keyTotals, params: [keyId] }),
        background().all<UsageRow>({ sql: READS.recent, params: [keyId, limit] }),
      ]);
      return { totals: usageTotals(toSums(totals[0] ?? {})), recent: recent.map(toUsage) };
    },
    async ledgerBalance(keyId) {
      return sql.ledgerBalance.get(keyId, keyId)?.total ?? 0;
    },
    async foldIntoRollups(limit) {
      const [progress] = await background().all<{ next: number; last: number }>({
        sql: 'SELECT next_id AS next, last_id AS last FROM usage_rollup_backfill WHERE id = 1',
        params: [],
      });
      if (progress === undefined || progress.next > progress.last) return { folded: 0, left: 0 };
      const until = Math.min(progress.next + limit, progress.last + 1);
      // The batch and the move of next_id commit together; a batch another process folded first
      // (next_id moved) folds nothing.
      await background().transaction([
        ...FOLDS.map((sql) => ({ sql, params: [progress.next, until] })),
        {
          sql: 'UPDATE usage_rollup_backfill SET next_id = MAX(next_id, ?) WHERE id = 1',
          params: [until],
        },
      ]);
      return { folded: until - progress.next, left: progress.last + 1 - until };
    },
    async deleteUsageBefore(before, limit) {
      const [changed] = await background().transaction([
        {
          sql: DELETE_OLDEST,
          params: [limit, before],
        },
      ]);
      return changed ?? 0;
    },
    async deleteRollupsBefore(stepMs, before, limit) {
      const changed = await background().transaction([
        {
          sql: `DELETE FROM usage_rollups WHERE (step_ms, at, key_id, route, upstream, cached) IN (
                  SELECT step_ms, at, key_id, route, upstream, cached FROM usage_rollups
                  WHERE step_ms = ? AND at < ? LIMIT ?)`,
          params: [stepMs, before, limit],
        },
        {
          sql: `DELETE FROM usage_totals WHERE (step_ms, at) IN (
                  SELECT step_ms, at FROM usage_totals WHERE step_ms = ? AND at < ? LIMIT ?)`,
          params: [stepMs, before, limit],
        },
      ]);
      return changed.reduce((sum, n) => sum + n, 0);
    },
    async checkWritable() {
      assertSameFile();
      sql.heartbeat.run(Date.now());
      assertUpgraded(sql.backfill.get());
    },
    async close() {
      await reads?.close();
      if (db.open) db.close();
    },
  };
}
