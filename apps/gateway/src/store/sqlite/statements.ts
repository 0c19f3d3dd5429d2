import type Database from 'better-sqlite3';
import {
  BUDGET_COLUMNS,
  BUDGET_VALUES,
  type BudgetRow,
  type BudgetValues,
  PROJECT_SELECT,
  type ProjectRow,
} from '../budget-rows.ts';
import { ROLLUP_STEPS_MS } from '../rollups.ts';
import { KEY_COLUMNS, type KeyRow, TOKEN_AUTH_COLUMNS, type toTokenAuth, type UsageRow } from '../rows.ts';
import type { KeyAuth } from '../store.ts';

/** The windows' starts a budget statement takes (budgets/windows.ts), by name. */
type WindowStarts = Record<'minute' | 'hour' | 'day' | 'week' | 'month', number>;
/** A budget row's current window start, picked from those by its period. */
const START_OF_PERIOD =
  "CASE period WHEN 'minute' THEN @minute WHEN 'hour' THEN @hour WHEN 'day' THEN @day WHEN 'week' THEN @week ELSE @month END";

/**
 * A key as reserve and settle read it (`balance`), in column order. Read as an array: better-sqlite3
 * makes a row object by adding each column under a name it looks up anew, twice a request here.
 */
export type BalanceValues = [
  credits: number | null,
  revokedAt: number | null,
  expiresAt: number | null,
  projectId: string | null,
  reserved: number,
  budgets: number,
];

/** Every statement the SQLite store runs on the serving thread, prepared once when it opens. */
export function prepareStatements(db: Database.Database) {
  return {
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
     * live (not stale) reservations hold: the running total the triggers keep, unless the key's
     * oldest hold is stale (left by a crashed process), when the live ones are summed from the
     * covering index as the sweep has yet to remove it.
     */
    balance: db
      .prepare<[keyId: string, since: number, keyId: string, since: number, keyId: string], BalanceValues>(
        `SELECT credits_micro, revoked_at, expires_at, project_id,
              CASE WHEN (SELECT MIN(created_at) FROM reservations WHERE key_id = ?) < ?
                THEN (SELECT COALESCE(SUM(amount_micro), 0) FROM reservations
                      WHERE key_id = ? AND created_at >= ?)
                ELSE reserved_micro END,
              (SELECT COUNT(*) FROM budgets WHERE holder = api_keys.id OR holder = api_keys.project_id)
       FROM api_keys WHERE id = ?`,
      )
      .raw(true),
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
    deleteReservation: db
      .prepare<[number, string], number>(
        'DELETE FROM reservations WHERE id = ? AND request_id = ? RETURNING amount_micro',
      )
      .pluck(),
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
    upsertOutcome: db.prepare<[string, string, string, number, string]>(
      `INSERT INTO decision_outcomes (request_id, question_id, truth, recorded_at, source) VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (request_id, question_id) DO UPDATE SET truth = excluded.truth, recorded_at = excluded.recorded_at,
       source = excluded.source`,
    ),
    // Budgets and projects (docs/budgets.md).
    /**
     * Every budget row of a key and of its project (a refund's windows). Both reads of the rows read
     * them as arrays, in BUDGET_VALUES' order: better-sqlite3 makes a row object by adding its
     * columns one by one under names it looks up anew (5.0 → 3.4 µs for three rows, made into
     * objects in JavaScript).
     */
    budgetsOf: db
      .prepare<[keyId: string, projectId: string | null], BudgetValues>(
        `SELECT ${BUDGET_VALUES} FROM budgets WHERE holder = ? OR holder = ?`,
      )
      .raw(true),
    /**
     * The rows among those of a key and its project that a reserve's amount or a settle's debit
     * (beside the key's live holds) could take to or past a limit, or a soft one to 80% of it: what
     * the budget rules (budget-rules.ts) may act on, judged there. A superset, since a row's stored
     * spend is at least its spend in the current window; a project's rows always, since what its
     * keys hold is summed only for them. A request far from its limits reads no row at all.
     */
    budgetsNear: db
      .prepare<
        [keyId: string, projectId: string | null, heldWithAmount: number, amount: number],
        BudgetValues
      >(
        `SELECT ${BUDGET_VALUES} FROM budgets
         WHERE (holder = ? OR holder = ?)
           AND (holder_kind = 'project'
                OR (mode = 'hard' AND spent_micro + ? > limit_micro)
                OR (mode = 'soft' AND (spent_micro + ?) * 5 >= limit_micro * 4))`,
      )
      .raw(true),
    budgetsOfHolder: db.prepare<[string], BudgetRow>(
      `SELECT ${BUDGET_COLUMNS} FROM budgets WHERE holder = ?`,
    ),
    /** What the live holds of a project's keys hold. */
    projectHeld: db.prepare<{ projectId: string; since: number }, { held: number }>(
      `SELECT COALESCE(SUM(r.amount_micro), 0) AS held FROM reservations r JOIN api_keys k ON k.id = r.key_id
     WHERE k.project_id = @projectId AND r.created_at >= @since`,
    ),
    keyHeld: db.prepare<{ keyId: string; since: number }, { held: number }>(
      `SELECT COALESCE(SUM(amount_micro), 0) AS held FROM reservations WHERE key_id = @keyId AND created_at >= @since`,
    ),
    /**
     * A settle's debit in every window of the key's and its project's budgets, in one statement: a
     * later window starts again from it; an earlier one counts nowhere.
     */
    spend: db.prepare<WindowStarts & { keyId: string; projectId: string | null; debit: number }>(
      `UPDATE budgets SET
       spent_micro = CASE WHEN window_start = ${START_OF_PERIOD} THEN spent_micro + @debit
                          WHEN window_start < ${START_OF_PERIOD} THEN @debit ELSE spent_micro END,
       window_start = MAX(window_start, ${START_OF_PERIOD})
     WHERE holder = @keyId OR holder = @projectId`,
    ),
    /** A refunded debit leaves the window it was counted in. */
    unspend: db.prepare<{ holder: string; period: string; start: number; debit: number }>(
      `UPDATE budgets SET spent_micro = MAX(0, spent_micro - @debit)
     WHERE holder = @holder AND period = @period AND window_start = @start`,
    ),
    deleteBudgets: db.prepare<[string]>('DELETE FROM budgets WHERE holder = ?'),
    insertBudget: db.prepare<{
      holder: string;
      kind: string;
      period: string;
      limitMicro: number;
      mode: string;
      start: number;
      spent: number;
    }>(
      `INSERT INTO budgets (holder, holder_kind, period, limit_micro, mode, window_start, spent_micro)
     VALUES (@holder, @kind, @period, @limitMicro, @mode, @start, @spent)`,
    ),
    /** The newest usage record's id: where a budget's seeding sum, read off this thread, stopped. */
    lastUsageId: db.prepare<[], { id: number | null }>('SELECT MAX(id) AS id FROM usage_records'),
    /** Debits recorded after that id from `since` on, by a key or a project's keys: the few since the sum. */
    keySpentAfter: db.prepare<[number, string, number], { spent: number }>(
      'SELECT COALESCE(SUM(credits_micro), 0) AS spent FROM usage_records WHERE id > ? AND key_id = ? AND at >= ?',
    ),
    projectSpentAfter: db.prepare<[number, string, number], { spent: number }>(
      `SELECT COALESCE(SUM(u.credits_micro), 0) AS spent FROM usage_records u JOIN api_keys k ON k.id = u.key_id
     WHERE u.id > ? AND k.project_id = ? AND u.at >= ?`,
    ),
    insertProject: db.prepare<[string, string, number]>(
      'INSERT INTO projects (id, name, created_at) VALUES (?, ?, ?)',
    ),
    projectById: db.prepare<[string], ProjectRow>(`${PROJECT_SELECT} WHERE p.id = ?`),
    projects: db.prepare<[], ProjectRow>(`${PROJECT_SELECT} ORDER BY p.created_at DESC, p.id DESC`),
    renameProject: db.prepare<[string, string]>('UPDATE projects SET name = ? WHERE id = ?'),
    deleteProject: db.prepare<[string]>('DELETE FROM projects WHERE id = ?'),
    setKeyProject: db.prepare<[string | null, string]>('UPDATE api_keys SET project_id = ? WHERE id = ?'),
    heartbeat: db.prepare<[number]>(
      'INSERT INTO heartbeat (id, at) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET at = excluded.at',
    ),
  };
}

export type Statements = ReturnType<typeof prepareStatements>;
