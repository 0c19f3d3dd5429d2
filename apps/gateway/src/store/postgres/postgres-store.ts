import postgres from 'postgres';
import {
  KEY_COLUMNS,
  type KeyRow,
  TOKEN_AUTH_COLUMNS,
  toKey,
  toTokenAuth,
  toUsage,
  type UsageRow,
} from '../rows.ts';
import type { KeyAuth, SeriesBucket, Store } from '../store.ts';
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
 * Reserve, settle and release are each one statement calling a function of the schema (migration
 * 2), so one round trip and one transaction: it locks the key's row first (SELECT … FOR UPDATE),
 * so concurrent requests on one key, from any instance, queue on that row and each sees the
 * reservations committed before it: no lost update, no overspending. There is no key cache:
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

  const keyColumns = sql.unsafe(KEY_COLUMNS);

  return {
    async createKey(key) {
      return sql.begin(async (tx) => {
        const [row] = await tx<KeyRow[]>`
          INSERT INTO api_keys (id, name, prefix, hash, credits_micro, rate_limit_per_minute, route, created_at, expires_at)
          VALUES (${key.id}, ${key.name}, ${key.prefix}, ${key.hash}, ${key.creditsMicro}, ${key.rateLimitPerMinute},
                  ${key.route}, ${key.createdAt}, ${key.expiresAt})
          RETURNING ${keyColumns}`;
        if (key.creditsMicro !== null && key.creditsMicro > 0)
          await tx`INSERT INTO credit_ledger (key_id, delta_micro, at) VALUES (${key.id}, ${key.creditsMicro}, ${key.createdAt})`;
        return toKey(row as KeyRow);
      });
    },

    async createToken(token) {
      await sql`
        INSERT INTO tokens (id, key_id, hash, expires_at, max_credits_micro, origins, subject, rate_limit_per_minute, route, created_at)
        VALUES (${token.id}, ${token.keyId}, ${token.hash}, ${token.expiresAt}, ${token.maxCreditsMicro},
                ${token.origins === null ? null : JSON.stringify(token.origins)}, ${token.subject},
                ${token.rateLimitPerMinute}, ${token.route}, ${token.createdAt})`;
    },

    async findTokenByHash(hash) {
      const [row] = await sql<Parameters<typeof toTokenAuth>[0][]>`
        SELECT ${sql.unsafe(TOKEN_AUTH_COLUMNS)} FROM tokens t JOIN api_keys k ON k.id = t.key_id WHERE t.hash = ${hash}`;
      return row && toTokenAuth(row);
    },

    async findKeyByHash(hash) {
      const [row] = await sql<KeyAuth[]>`
        SELECT id, prefix, rate_limit_per_minute AS "rateLimitPerMinute", route, expires_at AS "expiresAt",
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

    async reserve(keyId, requestId, amount, at, staleBefore, tokenId) {
      if (at - lastSweep > 60_000) {
        lastSweep = at;
        await sql`DELETE FROM reservations WHERE created_at < ${staleBefore}`;
      }
      const [row] = await sql<{ granted: boolean; reservation: number | null; available: number | null }[]>`
        SELECT * FROM dg_reserve(${keyId}, ${requestId}, ${amount}::bigint, ${at}::bigint, ${staleBefore}::bigint,
          ${tokenId ?? null}::text)`;
      if (row?.granted)
        return { ok: true, reservationId: row.reservation === null ? null : String(row.reservation) };
      return { ok: false, code: 'insufficient_credits', availableMicro: row?.available ?? 0 };
    },

    async settle(reservationId, entry, staleBefore) {
      const [row] = await sql<{ debit: number }[]>`
        SELECT dg_settle(${reservationId === null ? null : Number(reservationId)}::bigint, ${entry.requestId},
          ${entry.keyId}, ${entry.creditsMicro}::bigint, ${staleBefore}::bigint, ${entry.inputTokens},
          ${entry.outputTokens}, ${entry.questions}, ${entry.status}, ${entry.elapsedMs}, ${entry.at}::bigint,
          ${entry.route}, ${entry.upstream}, ${entry.cached}, ${entry.tokenId}::text, ${entry.subject}::text) AS debit`;
      return row?.debit ?? 0;
    },

    async release(reservationId, entry) {
      await sql`
        SELECT dg_release(${reservationId === null ? null : Number(reservationId)}::bigint, ${entry.requestId},
          ${entry.keyId}, ${entry.inputTokens}, ${entry.outputTokens}, ${entry.questions}, ${entry.status},
          ${entry.elapsedMs}, ${entry.at}::bigint, ${entry.route}, ${entry.upstream}, ${entry.cached},
          ${entry.tokenId}::text, ${entry.subject}::text)`;
    },

    async usageSeries({ keyId, from, to, stepMs }) {
      const rows = await sql<SeriesBucket[]>`
        SELECT ((at - ${from}::bigint) / ${stepMs}::bigint)::int AS bucket,
               COUNT(*)::int AS requests,
               (COUNT(*) FILTER (WHERE status <> 200))::int AS errors,
               COALESCE(SUM(credits_micro), 0)::bigint AS "creditsMicro",
               COALESCE(SUM(input_tokens), 0)::bigint AS "inputTokens",
               COALESCE(SUM(output_tokens), 0)::bigint AS "outputTokens",
               (COUNT(*) FILTER (WHERE cached))::int AS "cacheHits",
               percentile_disc(0.5) WITHIN GROUP (ORDER BY elapsed_ms) AS "p50ElapsedMs",
               percentile_disc(0.95) WITHIN GROUP (ORDER BY elapsed_ms) AS "p95ElapsedMs"
        FROM usage_records
        WHERE at >= ${from}::bigint AND at < ${to}::bigint AND (${keyId ?? null}::text IS NULL OR key_id = ${keyId ?? null})
        GROUP BY 1 ORDER BY 1`;
      return rows.map((row) => ({
        ...row,
        creditsMicro: Number(row.creditsMicro),
        inputTokens: Number(row.inputTokens),
        outputTokens: Number(row.outputTokens),
      }));
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
