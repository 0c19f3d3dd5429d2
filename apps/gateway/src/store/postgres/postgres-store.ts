import { windowStarts } from '../../budgets/windows.ts';
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
  type DecisionRecord,
  groupJudged,
  type KeyAuth,
  type KeyRefusal,
  pageOf,
  QUESTIONS_ONCE,
  type SeriesRow,
  type Store,
  type StoredCalibrationMap,
  type StoredReviewItem,
  type UsageEntry,
} from '../store.ts';
import { budgetEventOf, postgresBudgets } from './budgets.ts';
import { connectPostgres, type Sql } from './client.ts';
import { type Attempt, withDeadline } from './deadline.ts';
import { POSTGRES_MIGRATIONS } from './migrations.ts';
import { createStepBatcher, type Step, type StepRow } from './step-batcher.ts';

/** Any constant: the advisory lock that lets one starting instance migrate at a time. */
const MIGRATION_LOCK = 0x4447_0001;

/** Apply the migrations the database has not seen yet, under an advisory lock; returns those applied. */
export async function migratePostgres(sql: Sql, upTo = Number.POSITIVE_INFINITY): Promise<number[]> {
  return sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`;
    await tx`CREATE TABLE IF NOT EXISTS schema_migrations (
      version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)`;
    const applied = new Set(
      (await tx<{ version: number }[]>`SELECT version FROM schema_migrations`).map((r) => r.version),
    );
    const done: number[] = [];
    for (const step of pendingMigrations(POSTGRES_MIGRATIONS, applied, upTo)) {
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
  /** STORE_TIMEOUT_MS: the deadline of every call, queueing and connecting included (docs/operating.md). */
  timeoutMs?: number;
  /** Migrate no further than this version: tests of the upgrade start from an older schema. */
  migrateTo?: number;
}

/**
 * The Store on PostgreSQL (postgres.js), for any number of gateway instances on one database.
 * Reserve, settle and release are steps of the schema's functions (migrations 2–4): each locks its
 * key's row first (SELECT … FOR UPDATE), so concurrent requests on one key, from any instance,
 * queue on that row and each sees the reservations committed before it: no lost update, no
 * overspending. Steps asked for together go as one statement (`dg_apply`), one round trip and
 * one commit. Every call has a deadline (`timeoutMs`: statement_timeout on the server, a timer
 * covering queueing and connecting here); past it, or while the database cannot be reached, a
 * call throws StoreUnavailableError. Deadlocks and serialization failures are retried here.
 */
export async function openPostgresStore(url: string, options: PostgresStoreOptions): Promise<Store> {
  const timeoutMs = options.timeoutMs ?? 2_000;
  const connections: StoreConnections = {
    sql: connectPostgres(url, { poolSize: options.poolSize, timeoutMs }),
    steps: connectPostgres(url, { poolSize: 1, timeoutMs }),
  };
  try {
    await migratePostgres(connections.sql, options.migrateTo);
  } catch (error) {
    await Promise.all([connections.sql.end({ timeout: 1 }), connections.steps.end({ timeout: 1 })]);
    throw error;
  }
  return postgresStore(connections, timeoutMs);
}

/**
 * The store's connections, each made by `connectPostgres`: a pool for everything, and one
 * connection of its own for reserve, settle and release. On that one a batch of steps goes while
 * the one before is still on its way: postgres.js pipelines it, and PostgreSQL runs it the moment
 * the first one commits, with no round trip between and no row lock to wait for. On two pooled
 * connections the second batch only waited for the first one's row locks (half the throughput
 * on one key); pipelined on one, 1.086× the req/s at c=64 (docs/scaling-out.md).
 */
export interface StoreConnections {
  sql: Sql;
  steps: Sql;
}

/** Batches of steps on their way at once on the steps' connection: one running, the next queued behind it. */
const PIPELINED_BATCHES = 2;

/** The Store over a migrated database; it ends both connections on close. */
export function postgresStore({ sql, steps: stepsSql }: StoreConnections, timeoutMs: number): Store {
  /** Stale reservations are swept at most once a minute per instance; they count nowhere before. */
  let lastSweep = 0;

  const keyColumns = sql.unsafe(KEY_COLUMNS);

  /** One call within STORE_TIMEOUT_MS; `idempotent` lets trouble reaching the database be retried. */
  const call = <T>(what: string, run: Attempt<T>['run'], idempotent = true) =>
    withDeadline(what, Date.now() + timeoutMs, { run, idempotent });

  const step = createStepBatcher({
    apply: (steps, deadline) =>
      withDeadline('reserve, settle, release', deadline, {
        run: () => stepsSql<StepRow[]>`SELECT * FROM dg_apply(${JSON.stringify(steps)}::text::jsonb)`,
        idempotent: true,
      }),
    maxInFlight: PIPELINED_BATCHES,
  });
  const submit = (s: Step) => step(s, Date.now() + timeoutMs);

  const store: Store = {
    ...postgresBudgets(sql, call, keyColumns),
    createKey: (key) =>
      call(
        'create key',
        () =>
          sql.begin(async (tx) => {
            const [row] = await tx<KeyRow[]>`
          INSERT INTO api_keys (id, name, prefix, hash, credits_micro, rate_limit_per_minute, route, created_at, expires_at)
          VALUES (${key.id}, ${key.name}, ${key.prefix}, ${key.hash}, ${key.creditsMicro}, ${key.rateLimitPerMinute},
                  ${key.route}, ${key.createdAt}, ${key.expiresAt})
          RETURNING ${keyColumns}`;
            if (key.creditsMicro !== null && key.creditsMicro > 0)
              await tx`INSERT INTO credit_ledger (key_id, delta_micro, at) VALUES (${key.id}, ${key.creditsMicro}, ${key.createdAt})`;
            return toKey(row as KeyRow);
          }),
        false,
      ),

    createToken: (token) =>
      call(
        'create token',
        async () => {
          await sql`
            INSERT INTO tokens (id, key_id, hash, expires_at, max_credits_micro, origins, subject, rate_limit_per_minute, route, created_at)
            VALUES (${token.id}, ${token.keyId}, ${token.hash}, ${token.expiresAt}, ${token.maxCreditsMicro},
                    ${token.origins === null ? null : JSON.stringify(token.origins)}, ${token.subject},
                    ${token.rateLimitPerMinute}, ${token.route}, ${token.createdAt})`;
        },
        false,
      ),

    findTokenByHash: (hash) =>
      call('find token', async () => {
        const [row] = await sql<Parameters<typeof toTokenAuth>[0][]>`
          SELECT ${sql.unsafe(TOKEN_AUTH_COLUMNS)} FROM tokens t JOIN api_keys k ON k.id = t.key_id WHERE t.hash = ${hash}`;
        return row && toTokenAuth(row);
      }),

    findKeyByHash: (hash) =>
      call('find key', async () => {
        const [row] = await sql<KeyAuth[]>`
          SELECT id, prefix, rate_limit_per_minute AS "rateLimitPerMinute", route, expires_at AS "expiresAt",
                 revoked_at AS "revokedAt"
          FROM api_keys WHERE hash = ${hash}`;
        return row;
      }),

    getKey: (id) =>
      call('get key', async () => {
        const [row] = await sql<KeyRow[]>`SELECT ${keyColumns} FROM api_keys WHERE id = ${id}`;
        return row && toKey(row);
      }),

    listKeys: (limit, after) =>
      call('list keys', async () => {
        const rows = await sql<KeyRow[]>`
          SELECT ${keyColumns} FROM api_keys
          ${after === undefined ? sql`` : sql`WHERE (created_at, id) < (${after.createdAt}, ${after.id})`}
          ORDER BY created_at DESC, id DESC LIMIT ${limit + 1}`;
        return pageOf(rows.map(toKey), limit);
      }),

    countKeys: () =>
      call('count keys', async () => {
        const [row] = await sql<{ n: number }[]>`SELECT COUNT(*)::bigint AS n FROM api_keys`;
        return row?.n ?? 0;
      }),

    adjustCredits: (id, delta, at) =>
      call(
        'adjust credits',
        () =>
          sql.begin(async (tx) => {
            const [row] = await tx<KeyRow[]>`SELECT ${keyColumns} FROM api_keys WHERE id = ${id} FOR UPDATE`;
            if (!row) return { ok: false, code: 'not_found' } as const;
            const adjusted = adjustedBalance(row.credits_micro, delta);
            if (!adjusted.ok) return adjusted;
            await tx`UPDATE api_keys SET credits_micro = ${adjusted.balanceMicro} WHERE id = ${id}`;
            if (delta !== 0)
              await tx`INSERT INTO credit_ledger (key_id, delta_micro, at) VALUES (${id}, ${delta}, ${at})`;
            return { ok: true, key: toKey({ ...row, credits_micro: adjusted.balanceMicro }) } as const;
          }),
        false,
      ),

    revokeKey: (id, at) =>
      call('revoke key', async () => {
        const [row] = await sql<KeyRow[]>`
          UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ${at}) WHERE id = ${id} RETURNING ${keyColumns}`;
        return row && toKey(row);
      }),

    async reserve(keyId, requestId, amount, at, staleBefore, tokenId) {
      if (at - lastSweep > 60_000) {
        lastSweep = at;
        // Housekeeping only: stale reservations already count nowhere, swept or not.
        call(
          'sweep stale reservations',
          () => sql`DELETE FROM reservations WHERE created_at < ${staleBefore}`,
        ).catch(() => {});
      }
      const row = await submit({
        op: 'reserve',
        key: keyId,
        request: requestId,
        amount,
        at,
        staleBefore,
        token: tokenId ?? null,
        starts: windowStarts(at),
      });
      if (row.refused === 'budget')
        return {
          ok: false,
          code: 'budget_exceeded',
          exceeded: (row.events ?? []).map((e) => ({
            holder: { kind: e.holderKind, id: e.holder },
            window: e.window,
          })),
        };
      if (row.refused !== null) return { ok: false, code: 'key_refused', reason: row.refused as KeyRefusal };
      if (row.granted)
        return { ok: true, reservationId: row.reservation === null ? null : String(row.reservation) };
      return { ok: false, code: 'insufficient_credits', availableMicro: row.available ?? 0 };
    },

    async settle(reservationId, entry, staleBefore, decision) {
      const row = await submit({
        op: 'settle',
        ...usageStep(reservationId, entry),
        cost: entry.creditsMicro,
        staleBefore,
        ...(decision && { decision }),
      });
      for (const event of row.events ?? []) store.onBudgetEvent?.(budgetEventOf(event));
      return row.debit ?? 0;
    },

    async release(reservationId, entry, decision) {
      await submit({ op: 'release', ...usageStep(reservationId, entry), ...(decision && { decision }) });
    },

    findDecision: (requestId) =>
      call('find decision', async () => {
        const [row] = await sql<DecisionRecord[]>`
          SELECT request_id AS "requestId", key_id AS "keyId", route, at, reused, questions
          FROM decision_records WHERE request_id = ${requestId}`;
        return row;
      }),

    recordOutcomes: (requestId, outcomes, at) =>
      call('record outcomes', async () => {
        // xmax = 0 marks a row this statement inserted; any other, one it updated (replaced).
        const rows = await sql<{ replaced: boolean }[]>`
          INSERT INTO decision_outcomes (request_id, question_id, truth, recorded_at, source)
          SELECT ${requestId}, o.question_id, o.truth, ${at}, 'caller'
          FROM jsonb_to_recordset(${JSON.stringify(outcomes.map((o) => ({ question_id: o.questionId, truth: o.truth })))}::text::jsonb)
            AS o(question_id text, truth text)
          ON CONFLICT (request_id, question_id) DO UPDATE SET truth = excluded.truth, recorded_at = excluded.recorded_at,
            source = excluded.source
          RETURNING (xmax <> 0) AS replaced`;
        return rows.filter((row) => row.replaced).length;
      }),

    judgedDecisions: ({ from, to, keyId, route, after, limit }) =>
      call('judged decisions', async () => {
        const rows = await sql<Parameters<typeof groupJudged>[0][number][]>`
          SELECT d.id, d.route, d.at, ${sql.unsafe(QUESTIONS_ONCE)}, o.question_id, o.truth, o.source
          FROM decision_records d JOIN decision_outcomes o ON o.request_id = d.request_id
          WHERE d.id IN (
            SELECT p.id FROM decision_records p
            WHERE p.at >= ${from} AND p.at < ${to} AND p.id > ${after ?? -1}
              AND (${keyId ?? null}::text IS NULL OR p.key_id = ${keyId ?? null})
              AND (${route ?? null}::text IS NULL OR p.route = ${route ?? null})
              AND EXISTS (SELECT 1 FROM decision_outcomes q WHERE q.request_id = p.request_id)
            ORDER BY p.id LIMIT ${limit ?? null})
          ORDER BY d.id, o.question_id`;
        return groupJudged(rows);
      }),

    deleteDecisionsBefore: (before, limit) =>
      call('delete old decisions', () =>
        sql.begin(async (tx) => {
          const old = await tx<{ id: number; request_id: string }[]>`
            SELECT id, request_id FROM (SELECT id, request_id, at FROM decision_records ORDER BY id LIMIT ${limit}) oldest
            WHERE at < ${before}`;
          if (old.length === 0) return 0;
          const ids = old.map((row) => row.request_id);
          await tx`DELETE FROM decision_outcomes WHERE request_id = ANY(${ids})`;
          const deleted = await tx`DELETE FROM decision_records WHERE id = ANY(${old.map((row) => row.id)})`;
          return deleted.count;
        }),
      ),

    saveCalibrationMaps: (maps) =>
      call('save calibration maps', () =>
        sql.begin(async (tx) => {
          for (const map of maps) {
            if (map.active)
              await tx`UPDATE calibration_maps SET active = false
                WHERE upstream = ${map.upstream} AND type = ${map.type} AND active`;
            await tx`INSERT INTO calibration_maps (id, upstream, type, fitted_at, outcomes, params, held_out, active)
              VALUES (${map.id}, ${map.upstream}, ${map.type}, ${map.fittedAt}, ${map.outcomes}, ${map.params},
                ${map.heldOut}, ${map.active})`;
          }
        }),
      ),

    calibrationMaps: ({ activeOnly }) =>
      call('calibration maps', async () => {
        const rows = await sql<(StoredCalibrationMap & { fittedAt: string | number })[]>`
          SELECT id, upstream, type, fitted_at AS "fittedAt", outcomes, params, held_out AS "heldOut", active
          FROM calibration_maps WHERE (NOT ${activeOnly} OR active) ORDER BY fitted_at DESC, id DESC`;
        return rows.map((row) => ({ ...row, fittedAt: Number(row.fittedAt) }));
      }),

    saveReviewItem: (item) =>
      call('save review item', async () => {
        await sql`INSERT INTO review_items (id, request_id, key_id, route, at, status, item)
          VALUES (${item.id}, ${item.requestId}, ${item.keyId}, ${item.route}, ${item.at}, 'open', ${item.item})
          ON CONFLICT (request_id) DO NOTHING`;
      }),

    reviewItems: ({ status, route, limit, after }) =>
      call('review items', async () => {
        const rows = await sql<PgReviewRow[]>`
          SELECT ${sql.unsafe(REVIEW_COLUMNS)} FROM review_items
          WHERE (${status ?? null}::text IS NULL OR status = ${status ?? null})
            AND (${route ?? null}::text IS NULL OR route = ${route ?? null})
            AND (at > ${after?.at ?? -1} OR (at = ${after?.at ?? -1} AND id > ${after?.id ?? ''}))
          ORDER BY at, id LIMIT ${limit}`;
        return rows.map(reviewRow);
      }),

    reviewItem: (id) =>
      call('review item', async () => {
        const [row] = await sql<
          PgReviewRow[]
        >`SELECT ${sql.unsafe(REVIEW_COLUMNS)} FROM review_items WHERE id = ${id}`;
        return row && reviewRow(row);
      }),

    completeReview: (id, review, truths) =>
      call('complete review', () =>
        sql.begin(async (tx) => {
          const [done] = await tx<{ request_id: string }[]>`
            UPDATE review_items SET status = 'done', outcomes = ${review.outcomes}, reviewer = ${review.reviewer},
              reviewed_at = ${review.at}
            WHERE id = ${id} AND status = 'open' RETURNING request_id`;
          if (done === undefined) return false;
          await tx`
            INSERT INTO decision_outcomes (request_id, question_id, truth, recorded_at, source)
            SELECT ${done.request_id}, o.question_id, o.truth, ${review.at}, 'review'
            FROM jsonb_to_recordset(${JSON.stringify(truths.map((t) => ({ question_id: t.questionId, truth: t.truth })))}::text::jsonb)
              AS o(question_id text, truth text)
            ON CONFLICT (request_id, question_id) DO UPDATE SET truth = excluded.truth,
              recorded_at = excluded.recorded_at, source = 'review'`;
          return true;
        }),
      ),

    openReviews: () =>
      call('open reviews', async () => {
        const [row] = await sql<
          { n: string }[]
        >`SELECT count(*) AS n FROM review_items WHERE status = 'open'`;
        return Number(row?.n ?? 0);
      }),

    deleteReviewItems: (before, reviewedBefore, limit) =>
      call('delete review items', async () => {
        const deleted = await sql`DELETE FROM review_items WHERE id IN (
          SELECT id FROM review_items WHERE at < ${before} OR (status = 'done' AND reviewed_at < ${reviewedBefore})
          LIMIT ${limit})`;
        return deleted.count;
      }),

    usageSeries: ({ keyId, stepMs, from, to }) =>
      call('usage series', async () => {
        const rows = await sql.unsafe<(SummedRow & { at: number })[]>(
          keyId === undefined ? READS.series : READS.keySeries,
          keyId === undefined ? [stepMs, from, to] : [stepMs, from, to, keyId],
          { prepare: true },
        );
        return rows.map((row): SeriesRow => ({ at: Number(row.at), ...toSums(row) }));
      }),

    usageSummary: ({ keyId, spans }) =>
      call('usage summary', async () => {
        const reads = summaryReads('postgres', spans, keyId, (i) => `$${i}`);
        return toSummary(
          await Promise.all(reads.map((read) => sql.unsafe<SummedRow[]>(read.sql, read.params))),
        );
      }),

    usage: (keyId, limit) =>
      call('usage', async () => {
        const [totals] = await sql.unsafe<SummedRow[]>(READS.keyTotals, [keyId], { prepare: true });
        const recent = await sql<UsageRow[]>`
        SELECT * FROM usage_records WHERE key_id = ${keyId} ORDER BY at DESC, id DESC LIMIT ${limit}`;
        return { totals: usageTotals(toSums(totals ?? {})), recent: recent.map(toUsage) };
      }),

    ledgerBalance: (keyId) =>
      call('ledger balance', async () => {
        const [row] = await sql<{ total: number }[]>`
          SELECT (SELECT COALESCE(SUM(delta_micro), 0) FROM credit_ledger WHERE key_id = ${keyId})::bigint
               - (SELECT COALESCE(SUM(credits_micro), 0) FROM usage_rollups
                  WHERE key_id = ${keyId} AND step_ms = ${ROLLUP_STEPS_MS.day})::bigint AS total`;
        return row?.total ?? 0;
      }),

    newestUsageId: () =>
      call('newest usage record', async () => {
        const [row] = await sql<{ id: string | null }[]>`SELECT MAX(id)::text AS id FROM usage_records`;
        return row?.id ?? null;
      }),

    foldIntoRollups: (limit) =>
      call(
        'fold usage into rollups',
        () =>
          sql.begin(async (tx) => {
            // The row lock makes instances fold one batch at a time, each from where the last stopped.
            const [progress] = await tx<{ next: number; last: number }[]>`
              SELECT next_id AS next, last_id AS last FROM usage_rollup_backfill WHERE id = 1 FOR UPDATE`;
            if (progress === undefined || progress.next > progress.last) return { folded: 0, left: 0 };
            const until = Math.min(progress.next + limit, progress.last + 1);
            for (const fold of FOLDS) await tx.unsafe(fold, [progress.next, until]);
            await tx`UPDATE usage_rollup_backfill SET next_id = ${until} WHERE id = 1`;
            return { folded: until - progress.next, left: progress.last + 1 - until };
          }),
        false,
      ),

    // From the oldest records by id, as the SQLite store does (no index on `at` to pay for).
    deleteUsageBefore: (before, limit) =>
      call('delete old usage', async () => {
        const deleted = await sql`
          DELETE FROM usage_records WHERE id IN (
            SELECT id FROM (SELECT id, at FROM usage_records ORDER BY id LIMIT ${limit}) oldest WHERE at < ${before})`;
        return deleted.count;
      }),

    deleteRollupsBefore: (stepMs, before, limit) =>
      call('delete old rollups', async () => {
        const perKey = await sql`
          DELETE FROM usage_rollups WHERE ctid IN (
            SELECT ctid FROM usage_rollups WHERE step_ms = ${stepMs} AND at < ${before} LIMIT ${limit})`;
        const allKeys = await sql`
          DELETE FROM usage_totals WHERE ctid IN (
            SELECT ctid FROM usage_totals WHERE step_ms = ${stepMs} AND at < ${before} LIMIT ${limit})`;
        return perKey.count + allKeys.count;
      }),

    async checkWritable() {
      await call(
        'readiness',
        () =>
          sql`INSERT INTO heartbeat (id, at) VALUES (1, ${Date.now()}) ON CONFLICT (id) DO UPDATE SET at = excluded.at`,
        false,
      );
      const [progress] = await call(
        'upgrade progress',
        () => sql<{ next: number; last: number }[]>`
          SELECT next_id AS next, last_id AS last FROM usage_rollup_backfill WHERE id = 1`,
      );
      assertUpgraded(progress);
    },

    async close() {
      await Promise.all([sql.end({ timeout: 5 }), stepsSql.end({ timeout: 5 })]);
    },
  };
  return store;
}

const SUMS = summedSql('postgres');

/** Rollup reads (docs/usage.md). */
const READS = {
  series: `SELECT at, ${summedSql('postgres', 'usage_totals')} FROM usage_totals
           WHERE step_ms = $1 AND at >= $2 AND at < $3 GROUP BY at ORDER BY at`,
  keySeries: `SELECT at, ${SUMS} FROM usage_rollups WHERE step_ms = $1 AND at >= $2 AND at < $3 AND key_id = $4
              GROUP BY at ORDER BY at`,
  keyTotals: `SELECT ${SUMS} FROM usage_rollups WHERE key_id = $1 AND step_ms = ${ROLLUP_STEPS_MS.day}`,
};

const FOLDS = (['usage_totals', 'usage_rollups'] as const).map((table) =>
  foldRecordsSql('postgres', table, '$1', '$2'),
);

/** The usage record of a settle or release, as a step of `dg_apply`. */
function usageStep(reservationId: string | null, entry: UsageEntry) {
  return {
    key: entry.keyId,
    reservation: reservationId === null ? null : Number(reservationId),
    request: entry.requestId,
    input: entry.inputTokens,
    output: entry.outputTokens,
    questions: entry.questions,
    status: entry.status,
    elapsed: entry.elapsedMs,
    at: entry.at,
    route: entry.route,
    upstream: entry.upstream,
    cached: entry.cached,
    token: entry.tokenId,
    subject: entry.subject,
    starts: windowStarts(entry.at),
  };
}

const REVIEW_COLUMNS = `id, request_id AS "requestId", key_id AS "keyId", route, at, status, item, outcomes, reviewer,
  reviewed_at AS "reviewedAt"`;
type PgReviewRow = Omit<StoredReviewItem, 'at' | 'reviewedAt'> & {
  at: string | number;
  reviewedAt: string | number | null;
};
/** bigint columns come back as text. */
const reviewRow = (row: PgReviewRow): StoredReviewItem => ({
  ...row,
  at: Number(row.at),
  reviewedAt: row.reviewedAt === null ? null : Number(row.reviewedAt),
});
