import postgres from 'postgres';
import type { KeyAuth, KeyRecord, Store, UsageEntry } from '../store.ts';
import { pageOf } from '../store.ts';
import { POSTGRES_MIGRATIONS } from './migrations.ts';

/** int8 columns as JavaScript numbers: micro-credits and epoch milliseconds stay far below 2^53. */
const int8 = {
  to: 20,
  from: [20],
  serialize: (value: number) => String(value),
  parse: (text: string) => {
    const value = Number(text);
    if (!Number.isSafeInteger(value)) throw new RangeError(`int8 ${text} is beyond a safe integer`);
    return value;
  },
};

type Sql = postgres.Sql<{ int8: number }>;

/** Any constant: the advisory lock that lets one starting instance migrate at a time. */
const MIGRATION_LOCK = 0x4447_0001;
/** Readiness must answer promptly, even while the database does not. */
const READY_TIMEOUT_MS = 2_000;

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

/** Apply the migrations the database has not seen yet, under an advisory lock; returns those applied. */
export async function migratePostgres(sql: Sql): Promise<number[]> {
  return sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`;
    await tx`CREATE TABLE IF NOT EXISTS schema_migrations (
      version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)`;
    const applied = new Set(
      (await tx<{ version: number }[]>`SELECT version FROM schema_migrations`).map((r) => r.version),
    );
    const done: number[] = [];
    for (const step of POSTGRES_MIGRATIONS) {
      if (applied.has(step.version)) continue;
      await tx.unsafe(step.sql);
      await tx`INSERT INTO schema_migrations (version, name, applied_at) VALUES (${step.version}, ${step.name}, ${Date.now()})`;
      done.push(step.version);
    }
    return done;
  });
}

export interface PostgresStoreOptions {
  /** Connections in the pool (DATABASE_POOL_SIZE). */
  poolSize: number;
}

/**
 * The Store on PostgreSQL (postgres.js), for any number of gateway instances on one database.
 * Reserve and settle are each one transaction that locks the key's row first (SELECT … FOR
 * UPDATE), so concurrent requests on one key, from any instance, queue on that row and each sees
 * the reservations committed before it: no lost update, no overspending. There is no key cache:
 * authentication reads the key by its hash on every request, so a revocation or expiry made
 * through any instance is refused by every instance on the next request (SPEC §5).
 */
export async function openPostgresStore(url: string, options: PostgresStoreOptions): Promise<Store> {
  const sql: Sql = postgres(url, {
    max: options.poolSize,
    types: { int8 },
    onnotice: () => {},
    connect_timeout: 10,
    connection: { application_name: 'decision-gateway' },
  });
  try {
    await migratePostgres(sql);
  } catch (error) {
    await sql.end({ timeout: 1 });
    throw error;
  }

  /** Stale reservations are swept at most once a minute per instance; they count nowhere before. */
  let lastSweep = 0;

  const keyColumns = sql`id, name, prefix, credits_micro, rate_limit_per_minute, created_at, expires_at, revoked_at, last_used_at`;

  /** What live reservations of a key hold, read after its row is locked (a fresh snapshot). */
  const held = async (tx: postgres.TransactionSql<{ int8: number }>, keyId: string, since: number) => {
    const [row] = await tx<{ held: number }[]>`
      SELECT COALESCE(SUM(amount_micro), 0)::bigint AS held FROM reservations
      WHERE key_id = ${keyId} AND created_at >= ${since}`;
    return row?.held ?? 0;
  };

  const insertUsage = (
    tx: postgres.TransactionSql<{ int8: number }>,
    entry: UsageEntry,
    credits: number,
  ) => tx`
    INSERT INTO usage_records (request_id, key_id, credits_micro, input_tokens, output_tokens, questions, status, elapsed_ms, at)
    VALUES (${entry.requestId}, ${entry.keyId}, ${credits}, ${entry.inputTokens}, ${entry.outputTokens},
            ${entry.questions}, ${entry.status}, ${entry.elapsedMs}, ${entry.at})`;

  return {
    async createKey(key) {
      return sql.begin(async (tx) => {
        const [row] = await tx<KeyRow[]>`
          INSERT INTO api_keys (id, name, prefix, hash, credits_micro, rate_limit_per_minute, created_at, expires_at)
          VALUES (${key.id}, ${key.name}, ${key.prefix}, ${key.hash}, ${key.creditsMicro}, ${key.rateLimitPerMinute},
                  ${key.createdAt}, ${key.expiresAt})
          RETURNING ${keyColumns}`;
        if (key.creditsMicro !== null && key.creditsMicro > 0)
          await tx`INSERT INTO credit_ledger (key_id, delta_micro, at) VALUES (${key.id}, ${key.creditsMicro}, ${key.createdAt})`;
        return toKey(row as KeyRow);
      });
    },

    async findKeyByHash(hash) {
      const [row] = await sql<KeyAuth[]>`
        SELECT id, prefix, rate_limit_per_minute AS "rateLimitPerMinute", expires_at AS "expiresAt",
               revoked_at AS "revokedAt"
        FROM api_keys WHERE hash = ${hash}`;
      return row;
    },

    async getKey(id) {
      const [row] = await sql<KeyRow[]>`SELECT ${keyColumns} FROM api_keys WHERE id = ${id}`;
      return row && toKey(row);
    },

    async listKeys(limit, after) {
      const rows = await sql<KeyRow[]>`
        SELECT ${keyColumns} FROM api_keys
        ${after === undefined ? sql`` : sql`WHERE (created_at, id) < (${after.createdAt}, ${after.id})`}
        ORDER BY created_at DESC, id DESC LIMIT ${limit + 1}`;
      return pageOf(rows.map(toKey), limit);
    },

    async countKeys() {
      const [row] = await sql<{ n: number }[]>`SELECT COUNT(*)::bigint AS n FROM api_keys`;
      return row?.n ?? 0;
    },

    async adjustCredits(id, delta, at) {
      return sql.begin(async (tx) => {
        const [row] = await tx<KeyRow[]>`SELECT ${keyColumns} FROM api_keys WHERE id = ${id} FOR UPDATE`;
        if (!row) return { ok: false, code: 'not_found' } as const;
        if (row.credits_micro === null) return { ok: false, code: 'unlimited' } as const;
        const balance = row.credits_micro + delta;
        if (balance < 0) return { ok: false, code: 'would_go_negative' } as const;
        await tx`UPDATE api_keys SET credits_micro = ${balance} WHERE id = ${id}`;
        if (delta !== 0)
          await tx`INSERT INTO credit_ledger (key_id, delta_micro, at) VALUES (${id}, ${delta}, ${at})`;
        return { ok: true, key: toKey({ ...row, credits_micro: balance }) } as const;
      });
    },

    async revokeKey(id, at) {
      const [row] = await sql<KeyRow[]>`
        UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ${at}) WHERE id = ${id} RETURNING ${keyColumns}`;
      return row && toKey(row);
    },

    async reserve(keyId, requestId, amount, at, staleBefore) {
      if (at - lastSweep > 60_000) {
        lastSweep = at;
        await sql`DELETE FROM reservations WHERE created_at < ${staleBefore}`;
      }
      return sql.begin(async (tx) => {
        const [key] = await tx<{ credits: number | null }[]>`
          SELECT credits_micro AS credits FROM api_keys WHERE id = ${keyId} FOR UPDATE`;
        if (!key) return { ok: false, code: 'insufficient_credits', availableMicro: 0 } as const;
        if (key.credits === null) return { ok: true, reservationId: null } as const;
        const available = key.credits - (await held(tx, keyId, staleBefore));
        if (available < amount)
          return { ok: false, code: 'insufficient_credits', availableMicro: Math.max(0, available) } as const;
        const [row] = await tx<{ id: number }[]>`
          INSERT INTO reservations (key_id, request_id, amount_micro, created_at)
          VALUES (${keyId}, ${requestId}, ${amount}, ${at}) RETURNING id`;
        return { ok: true, reservationId: String(row?.id) } as const;
      });
    },

    async settle(reservationId, entry, staleBefore) {
      return sql.begin(async (tx) => {
        const [key] = await tx<{ credits: number | null }[]>`
          SELECT credits_micro AS credits FROM api_keys WHERE id = ${entry.keyId} FOR UPDATE`;
        if (reservationId !== null) {
          // The request id too: a reservation swept as stale must not take a newer one with it.
          await tx`DELETE FROM reservations WHERE id = ${Number(reservationId)} AND request_id = ${entry.requestId}`;
        }
        let debit = entry.creditsMicro;
        if (key && key.credits !== null) {
          // Never more than the key can still cover beside other live reservations (stale ones
          // count nowhere, SPEC §7).
          debit = Math.min(debit, Math.max(0, key.credits - (await held(tx, entry.keyId, staleBefore))));
          await tx`UPDATE api_keys SET credits_micro = credits_micro - ${debit}, last_used_at = ${entry.at}
                   WHERE id = ${entry.keyId}`;
        } else {
          await tx`UPDATE api_keys SET last_used_at = ${entry.at} WHERE id = ${entry.keyId}`;
        }
        await insertUsage(tx, entry, debit);
        return debit;
      });
    },

    async release(reservationId, entry) {
      await sql.begin(async (tx) => {
        if (reservationId !== null)
          await tx`DELETE FROM reservations WHERE id = ${Number(reservationId)} AND request_id = ${entry.requestId}`;
        await insertUsage(tx, entry, 0);
        await tx`UPDATE api_keys SET last_used_at = ${entry.at} WHERE id = ${entry.keyId}`;
      });
    },

    async usage(keyId, limit) {
      const [totals] = await sql<{ requests: number; credits: number; input: number; output: number }[]>`
        SELECT COUNT(*)::bigint AS requests, COALESCE(SUM(credits_micro), 0)::bigint AS credits,
               COALESCE(SUM(input_tokens), 0)::bigint AS input, COALESCE(SUM(output_tokens), 0)::bigint AS output
        FROM usage_records WHERE key_id = ${keyId}`;
      const recent = await sql<UsageRow[]>`
        SELECT * FROM usage_records WHERE key_id = ${keyId} ORDER BY at DESC, id DESC LIMIT ${limit}`;
      return {
        totals: {
          requests: totals?.requests ?? 0,
          creditsMicro: totals?.credits ?? 0,
          inputTokens: totals?.input ?? 0,
          outputTokens: totals?.output ?? 0,
        },
        recent: recent.map(toUsage),
      };
    },

    async ledgerBalance(keyId) {
      const [row] = await sql<{ total: number }[]>`
        SELECT (SELECT COALESCE(SUM(delta_micro), 0) FROM credit_ledger WHERE key_id = ${keyId})::bigint
             - (SELECT COALESCE(SUM(credits_micro), 0) FROM usage_records WHERE key_id = ${keyId})::bigint AS total`;
      return row?.total ?? 0;
    },

    async checkWritable() {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`PostgreSQL did not answer within ${READY_TIMEOUT_MS} ms`)),
          READY_TIMEOUT_MS,
        );
      });
      try {
        await Promise.race([
          sql`INSERT INTO heartbeat (id, at) VALUES (1, ${Date.now()})
              ON CONFLICT (id) DO UPDATE SET at = excluded.at`,
          timeout,
        ]);
      } finally {
        clearTimeout(timer);
      }
    },

    async close() {
      await sql.end({ timeout: 5 });
    },
  };
}
