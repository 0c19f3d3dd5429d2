import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import type {
  AdjustResult,
  KeyRecord,
  NewKey,
  ReserveResult,
  Store,
  UsageEntry,
  UsageTotals,
} from '../store.ts';
import { MIGRATIONS } from './migrations.ts';

interface KeyRow {
  id: string;
  name: string;
  prefix: string;
  credits_micro: number | null;
  rate_limit_per_minute: number | null;
  created_at: number;
  expires_at: number | null;
  revoked_at: number | null;
  last_used_at: number | null;
}

interface UsageRow {
  request_id: string;
  key_id: string;
  credits_micro: number;
  input_tokens: number;
  output_tokens: number;
  questions: number;
  status: number;
  elapsed_ms: number;
  at: number;
}

const KEY_COLUMNS =
  'id, name, prefix, credits_micro, rate_limit_per_minute, created_at, expires_at, revoked_at, last_used_at';

function toKey(row: KeyRow): KeyRecord {
  return {
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    creditsMicro: row.credits_micro,
    rateLimitPerMinute: row.rate_limit_per_minute,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    revokedAt: row.revoked_at,
    lastUsedAt: row.last_used_at,
  };
}

function toUsage(row: UsageRow): UsageEntry {
  return {
    requestId: row.request_id,
    keyId: row.key_id,
    creditsMicro: row.credits_micro,
    inputTokens: row.input_tokens,
    outputTokens: row.output_tokens,
    questions: row.questions,
    status: row.status,
    elapsedMs: row.elapsed_ms,
    at: row.at,
  };
}

/** Apply the migrations this file has not seen yet; returns the versions applied. */
export function migrate(db: Database.Database): number[] {
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
  for (const step of MIGRATIONS) {
    if (applied.has(step.version)) continue;
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

/**
 * The Store on a SQLite file (better-sqlite3: synchronous, so each method is one transaction with
 * no interleaving inside this process; BEGIN IMMEDIATE serialises writers across processes).
 * Statements are prepared once.
 */
export function openSqliteStore(path: string): Store {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('busy_timeout = 5000');
  db.pragma('foreign_keys = ON');
  migrate(db);

  const sql = {
    insertKey: db.prepare(
      `INSERT INTO api_keys (id, name, prefix, hash, credits_micro, rate_limit_per_minute, created_at, expires_at)
       VALUES (@id, @name, @prefix, @hash, @creditsMicro, @rateLimitPerMinute, @createdAt, @expiresAt)`,
    ),
    keyByHash: db.prepare<[string], KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE hash = ?`),
    keyById: db.prepare<[string], KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = ?`),
    listKeys: db.prepare<[], KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys ORDER BY created_at, id`),
    countKeys: db.prepare<[], { n: number }>('SELECT COUNT(*) AS n FROM api_keys'),
    setCredits: db.prepare<[number, string]>('UPDATE api_keys SET credits_micro = ? WHERE id = ?'),
    revoke: db.prepare<[number, string]>(
      'UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?',
    ),
    touch: db.prepare<[number, string]>('UPDATE api_keys SET last_used_at = ? WHERE id = ?'),
    ledger: db.prepare<[string, number, string, string | null, number]>(
      'INSERT INTO credit_ledger (key_id, delta_micro, kind, request_id, at) VALUES (?, ?, ?, ?, ?)',
    ),
    ledgerSum: db.prepare<[string], { total: number }>(
      'SELECT COALESCE(SUM(delta_micro), 0) AS total FROM credit_ledger WHERE key_id = ?',
    ),
    dropStale: db.prepare<[string, number]>('DELETE FROM reservations WHERE key_id = ? AND created_at < ?'),
    reserved: db.prepare<[string], { total: number }>(
      'SELECT COALESCE(SUM(amount_micro), 0) AS total FROM reservations WHERE key_id = ?',
    ),
    insertReservation: db.prepare<[string, string, number, number]>(
      'INSERT INTO reservations (id, key_id, amount_micro, created_at) VALUES (?, ?, ?, ?)',
    ),
    deleteReservation: db.prepare<[string]>('DELETE FROM reservations WHERE id = ?'),
    insertUsage: db.prepare(
      `INSERT INTO usage_records (request_id, key_id, credits_micro, input_tokens, output_tokens, questions, status, elapsed_ms, at)
       VALUES (@requestId, @keyId, @creditsMicro, @inputTokens, @outputTokens, @questions, @status, @elapsedMs, @at)`,
    ),
    usageTotals: db.prepare<[string], { requests: number; credits: number; input: number; output: number }>(
      `SELECT COUNT(*) AS requests, COALESCE(SUM(credits_micro), 0) AS credits,
              COALESCE(SUM(input_tokens), 0) AS input, COALESCE(SUM(output_tokens), 0) AS output
       FROM usage_records WHERE key_id = ?`,
    ),
    ping: db.prepare('SELECT 1'),
    recentUsage: db.prepare<[string, number], UsageRow>(
      'SELECT * FROM usage_records WHERE key_id = ? ORDER BY at DESC, rowid DESC LIMIT ?',
    ),
  };

  const createKey = db.transaction((key: NewKey) => {
    sql.insertKey.run(key);
    if (key.creditsMicro !== null && key.creditsMicro > 0) {
      sql.ledger.run(key.id, key.creditsMicro, 'grant', null, key.createdAt);
    }
  });

  const adjustCredits = db.transaction((id: string, delta: number, at: number): AdjustResult => {
    const row = sql.keyById.get(id);
    if (!row) return { ok: false, code: 'not_found' };
    if (row.credits_micro === null) return { ok: false, code: 'unlimited' };
    const balance = row.credits_micro + delta;
    if (balance < 0) return { ok: false, code: 'would_go_negative' };
    sql.setCredits.run(balance, id);
    if (delta !== 0) sql.ledger.run(id, delta, 'grant', null, at);
    return { ok: true, key: toKey({ ...row, credits_micro: balance }) };
  });

  const reserve = db.transaction(
    (keyId: string, requestId: string, amount: number, at: number, staleBefore: number): ReserveResult => {
      const row = sql.keyById.get(keyId);
      if (!row) return { ok: false, code: 'insufficient_credits', availableMicro: 0 };
      if (row.credits_micro === null) return { ok: true, reservationId: null };
      sql.dropStale.run(keyId, staleBefore);
      const available = row.credits_micro - (sql.reserved.get(keyId)?.total ?? 0);
      if (available < amount)
        return { ok: false, code: 'insufficient_credits', availableMicro: Math.max(0, available) };
      sql.insertReservation.run(requestId, keyId, amount, at);
      return { ok: true, reservationId: requestId };
    },
  );

  const settle = db.transaction((reservationId: string | null, entry: UsageEntry): number => {
    if (reservationId !== null) sql.deleteReservation.run(reservationId);
    const row = sql.keyById.get(entry.keyId);
    let debit = entry.creditsMicro;
    if (row && row.credits_micro !== null) {
      // Never more than the key can still cover beside its other in-flight reservations.
      const coverable = Math.max(0, row.credits_micro - (sql.reserved.get(entry.keyId)?.total ?? 0));
      debit = Math.min(debit, coverable);
      if (debit > 0) sql.setCredits.run(row.credits_micro - debit, entry.keyId);
    }
    if (debit > 0) sql.ledger.run(entry.keyId, -debit, 'debit', entry.requestId, entry.at);
    sql.insertUsage.run({ ...entry, creditsMicro: debit });
    sql.touch.run(entry.at, entry.keyId);
    return debit;
  });

  const release = db.transaction((reservationId: string | null, entry: UsageEntry) => {
    if (reservationId !== null) sql.deleteReservation.run(reservationId);
    sql.insertUsage.run({ ...entry, creditsMicro: 0 });
    sql.touch.run(entry.at, entry.keyId);
  });

  return {
    async createKey(key) {
      createKey.immediate(key);
      return toKey(sql.keyById.get(key.id) as KeyRow);
    },
    async findKeyByHash(hash) {
      const row = sql.keyByHash.get(hash);
      return row && toKey(row);
    },
    async getKey(id) {
      const row = sql.keyById.get(id);
      return row && toKey(row);
    },
    async listKeys() {
      return sql.listKeys.all().map(toKey);
    },
    async countKeys() {
      return sql.countKeys.get()?.n ?? 0;
    },
    async adjustCredits(id, delta, at) {
      return adjustCredits.immediate(id, delta, at);
    },
    async revokeKey(id, at) {
      sql.revoke.run(at, id);
      const row = sql.keyById.get(id);
      return row && toKey(row);
    },
    async reserve(keyId, requestId, amount, at, staleBefore) {
      return reserve.immediate(keyId, requestId, amount, at, staleBefore);
    },
    async settle(reservationId, entry) {
      return settle.immediate(reservationId, entry);
    },
    async release(reservationId, entry) {
      release.immediate(reservationId, entry);
    },
    async usage(keyId, limit) {
      const totals = sql.usageTotals.get(keyId);
      const summary: UsageTotals = {
        requests: totals?.requests ?? 0,
        creditsMicro: totals?.credits ?? 0,
        inputTokens: totals?.input ?? 0,
        outputTokens: totals?.output ?? 0,
      };
      return { totals: summary, recent: sql.recentUsage.all(keyId, limit).map(toUsage) };
    },
    async ledgerBalance(keyId) {
      return sql.ledgerSum.get(keyId)?.total ?? 0;
    },
    async ping() {
      sql.ping.get();
    },
    async close() {
      if (db.open) db.close();
    },
  };
}
