import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import { createTestDatabase } from '../../../test/services.ts';
import { windowStarts } from '../../budgets/windows.ts';
import { newKey, usageEntry } from '../store.contract-tests.ts';
import type { Store } from '../store.ts';
import { FUNCTIONS } from './functions.ts';
import { POSTGRES_MIGRATIONS } from './migrations.ts';
import { migratePostgres, openPostgresStore } from './postgres-store.ts';
import type { StepRow } from './step-batcher.ts';

/** `run` with a store on a new database and a connection of its own to it; both closed, the database dropped, after. */
async function onNewStore(run: (store: Store, sql: postgres.Sql) => Promise<void>): Promise<void> {
  const database = await createTestDatabase();
  const store = await openPostgresStore(database.url, { poolSize: 2 });
  const sql = postgres(database.url, { max: 1, onnotice: () => {} });
  try {
    await run(store, sql);
  } finally {
    await sql.end();
    await store.close();
    await database.drop();
  }
}

/** A seeded generator (mulberry32): the same batches on every run. */
function seeded(seed: number) {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** A settle's or release's usage fields, as the store sends them (`usageStep`). */
function usageOf(key: string, request: string, status: number, at: number) {
  return {
    key,
    request,
    input: 40,
    output: 2,
    questions: 1,
    status,
    elapsed: 5,
    at,
    route: 'default',
    upstream: 'systemone',
    cached: false,
    token: key === 'key_tokened' ? 'tok_capped' : null,
    subject: null,
    starts: windowStarts(at),
    staleBefore: at - 60_000,
  };
}

/** Rows as JSON text, sorted: two databases' tables compared whatever order their ids give them. */
const sortedRows = (rows: readonly object[]) => rows.map((row) => JSON.stringify(row)).sort();

type BatchStep = Record<string, unknown> & {
  op: 'reserve' | 'settle' | 'release';
  key: string;
  request: string;
};

/** The state a batch leaves that a caller or operator can read, in an order both databases share. */
async function ledgerState(sql: postgres.Sql) {
  const [keys, records, decisions, holds, budgets, totals, rollups] = await Promise.all([
    sql`SELECT id, credits_micro, last_used_at FROM api_keys ORDER BY id`,
    sql`SELECT request_id, key_id, credits_micro, status, token_id, at FROM usage_records ORDER BY request_id`,
    sql`SELECT request_id, key_id, questions FROM decision_records ORDER BY request_id`,
    sql`SELECT request_id, key_id, amount_micro, created_at FROM reservations ORDER BY request_id`,
    sql`SELECT holder, period, spent_micro, window_start FROM budgets ORDER BY holder, period`,
    sql`SELECT * FROM usage_totals`,
    sql`SELECT * FROM usage_rollups`,
  ]);
  return {
    keys,
    records,
    decisions,
    holds,
    budgets,
    totals: sortedRows(totals),
    rollups: sortedRows(rollups),
  };
}

describe('PostgreSQL store', () => {
  it('migrates safely when several instances start at once: each step applied once', async () => {
    const database = await createTestDatabase();
    try {
      const stores = await Promise.all(
        Array.from({ length: 6 }, () => openPostgresStore(database.url, { poolSize: 2 })),
      );
      await Promise.all(stores.map((store) => store.close()));
      const sql = postgres(database.url, { max: 1, onnotice: () => {} });
      try {
        const rows = await sql<{ version: number }[]>`SELECT version FROM schema_migrations ORDER BY version`;
        expect(rows.map((r) => r.version)).toEqual(POSTGRES_MIGRATIONS.map((m) => m.version));
        expect(await migratePostgres(sql as never)).toEqual([]);
      } finally {
        await sql.end();
      }
    } finally {
      await database.drop();
    }
  });

  it('keeps amounts as bigint micro-credits and refuses a negative balance in the database', () =>
    onNewStore(async (store, sql) => {
      const big = 9_000_000_000_000; // 9 million credits: beyond a 32-bit integer
      await store.createKey({
        id: 'key_big',
        name: 'big',
        prefix: 'dg_big',
        hash: 'b'.repeat(64),
        creditsMicro: big,
        rateLimitPerMinute: null,
        route: null,
        createdAt: Date.now(),
        expiresAt: null,
      });
      expect((await store.getKey('key_big'))?.creditsMicro).toBe(big);
      const [column] = await sql`SELECT data_type FROM information_schema.columns
        WHERE table_name = 'api_keys' AND column_name = 'credits_micro'`;
      expect(column?.data_type).toBe('bigint');
      await expect(sql`UPDATE api_keys SET credits_micro = -1 WHERE id = 'key_big'`).rejects.toThrow(
        /check/i,
      );
    }));

  it('holds, once migrated, exactly the function definitions of functions.ts', async () => {
    const database = await createTestDatabase();
    const sql = postgres(database.url, { max: 1, onnotice: () => {} });
    try {
      await migratePostgres(sql as never);
      const rows = await sql<{ proname: string; prosrc: string; proconfig: string[] | null }[]>`
        SELECT proname, prosrc, proconfig FROM pg_proc WHERE proname LIKE 'dg\_%' ORDER BY proname`;
      const inDatabase = Object.fromEntries(
        rows.map((row) => [row.proname, { body: row.prosrc, settings: row.proconfig ?? [] }]),
      );
      // Each definition's body is what lies between its $fn$ quotes; its settings, the SET
      // clauses before them.
      const current = Object.fromEntries(
        Object.entries(FUNCTIONS).map(([name, definition]) => {
          const [head, body] = definition.split('$fn$');
          const settings = [...(head ?? '').matchAll(/\bSET (\w+) = (\w+)/g)].map(
            ([, key, value]) => `${key}=${value}`,
          );
          return [name, { body, settings }];
        }),
      );
      expect(inDatabase).toEqual(current);
    } finally {
      await sql.end();
      await database.drop();
    }
  });

  it('commits a batch of reserves without waiting for the disk, and every batch that writes usage records with it', () =>
    onNewStore(async (store, sql) => {
      // Deferred triggers run as each transaction commits: each notes what its commit waits for.
      await sql.unsafe(`
        CREATE TABLE commit_waits (tx bigint, wrote text, setting text);
        CREATE FUNCTION note_commit() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          INSERT INTO commit_waits VALUES (txid_current(), TG_ARGV[0], current_setting('synchronous_commit'));
          RETURN NULL;
        END $$;
        CREATE CONSTRAINT TRIGGER hold_committed AFTER INSERT ON reservations
          DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION note_commit('hold');
        CREATE CONSTRAINT TRIGGER record_committed AFTER INSERT ON usage_records
          DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION note_commit('record');`);
      await store.createKey(newKey({ id: 'key_waits', creditsMicro: 1_000_000_000 }));
      const now = Date.now();

      const held = await store.reserve('key_waits', 'alone', 1_000, now, now - 60_000);
      if (!held.ok) throw new Error('the reserve was refused');
      expect(await sql`SELECT wrote, setting FROM commit_waits`).toEqual([{ wrote: 'hold', setting: 'off' }]);
      await store.settle(held.reservationId, usageEntry('key_waits', 'alone', 700, now), now - 60_000);
      const failed = await store.reserve('key_waits', 'failed', 1_000, now, now - 60_000);
      if (!failed.ok) throw new Error('the reserve was refused');
      await store.release(failed.reservationId, {
        ...usageEntry('key_waits', 'failed', 0, now),
        status: 502,
      });
      expect(await sql`SELECT wrote, setting FROM commit_waits WHERE wrote = 'record'`).toEqual([
        { wrote: 'record', setting: 'on' },
        { wrote: 'record', setting: 'on' },
      ]);

      // Many at once share batches: a batch with any usage record in it waits for the disk, holds and all.
      await Promise.all(
        Array.from({ length: 40 }, async (_, i) => {
          const hold = await store.reserve('key_waits', `many-${i}`, 1_000, now, now - 60_000);
          if (!hold.ok) throw new Error('the reserve was refused');
          await store.settle(
            hold.reservationId,
            usageEntry('key_waits', `many-${i}`, 500, now),
            now - 60_000,
          );
        }),
      );
      const commits = await sql<{ records: number; settings: string[] }[]>`
        SELECT count(*) FILTER (WHERE wrote = 'record')::int AS records, array_agg(DISTINCT setting) AS settings
        FROM commit_waits GROUP BY tx`;
      for (const commit of commits) expect(commit.settings).toEqual([commit.records > 0 ? 'on' : 'off']);
      expect(commits.reduce((sum, commit) => sum + commit.records, 0)).toBe(42);
    }));

  it('settles the plain settles of a batch all at once, with the steps and ledger one at a time leaves', async () => {
    // The same batches through dg_apply as migration 13 left it (each step alone) and as it is now.
    const [before, now] = await Promise.all([createTestDatabase(), createTestDatabase()]);
    const stores = [
      await openPostgresStore(before.url, { poolSize: 1, migrateTo: 13 }),
      await openPostgresStore(now.url, { poolSize: 1 }),
    ];
    const sqls = [before, now].map((db) => postgres(db.url, { max: 1, onnotice: () => {} }));
    try {
      const start = Date.now();
      const keys = {
        plain: newKey({ id: 'key_plain', creditsMicro: 1_000_000_000 }),
        free: newKey({ id: 'key_free', creditsMicro: null }),
        // Too few credits for all a batch asks: each settle is capped as it comes.
        tight: newKey({ id: 'key_tight', creditsMicro: 60_000 }),
        budgeted: newKey({ id: 'key_budgeted', creditsMicro: 1_000_000_000 }),
        tokened: newKey({ id: 'key_tokened', creditsMicro: 1_000_000_000 }),
        revoked: newKey({ id: 'key_revoked', creditsMicro: 1_000_000_000 }),
        // Budgets far from their limits, but a soft one near 80 % now and then, and a minute window
        // that batches straddle.
        soft: newKey({ id: 'key_soft', creditsMicro: 1_000_000_000 }),
        // A budget on its project: one at a time, always.
        grouped: newKey({ id: 'key_grouped', creditsMicro: 1_000_000_000 }),
      };
      for (const store of stores) {
        for (const key of Object.values(keys)) await store.createKey(key);
        await store.setBudgets(
          { kind: 'key', id: 'key_budgeted' },
          [{ window: 'day', limitMicro: 40_000, mode: 'hard' }],
          start,
        );
        await store.createToken({
          id: 'tok_capped',
          keyId: 'key_tokened',
          hash: 'h'.repeat(64),
          expiresAt: start + 3_600_000,
          maxCreditsMicro: 30_000,
          origins: null,
          subject: 'someone',
          rateLimitPerMinute: null,
          route: null,
          createdAt: start,
        });
        await store.revokeKey('key_revoked', start);
        await store.setBudgets(
          { kind: 'key', id: 'key_soft' },
          [
            { window: 'minute', limitMicro: 1_000_000_000, mode: 'hard' },
            { window: 'day', limitMicro: 150_000, mode: 'soft' },
          ],
          start,
        );
        await store.createProject({ id: 'proj_budgeted', name: 'budgeted', createdAt: start });
        await store.setKeyProject('key_grouped', 'proj_budgeted');
        await store.setBudgets(
          { kind: 'project', id: 'proj_budgeted' },
          [{ window: 'day', limitMicro: 1_000_000_000, mode: 'hard' }],
          start,
        );
      }

      const random = seeded(48);
      const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
      // The tight key most often, so that its holds are in flight when its credits are lowered.
      const keyIds = [
        ...Object.values(keys).map((key) => key.id),
        'key_tight',
        'key_tight',
        'key_budgeted',
        'key_soft',
        'key_soft',
        'key_soft',
      ];
      /** Holds granted, by request: each database's own id of it. */
      const holds = new Map<string, { key: string; amount: number; ids: (number | null)[] }>();
      const settled: { key: string; request: string; ids: (number | null)[] }[] = [];
      let requests = 0;
      const outcomes = new Map<string, number>();
      const count = (outcome: string) => outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
      for (let round = 0; round < 60; round++) {
        // An operator lowers a key's credits while its requests are in flight (their settles are
        // capped), then grants it more.
        const credits = round % 5 === 3 ? 1_000 : round % 5 === 0 ? 60_000 : undefined;
        if (credits !== undefined)
          await Promise.all(
            sqls.map((sql) => sql`UPDATE api_keys SET credits_micro = ${credits} WHERE id = 'key_tight'`),
          );
        const steps: BatchStep[] = [];
        /** Each settle of a hold: what it debits unless a limit caps it. */
        const uncapped = new Map<number, number>();
        const ids: (number | null)[][] = [];
        // A batch spans seconds, so that some straddle a minute's window.
        const at = () => start + round * 10_000 + steps.length * 1_000;
        const usage = (key: string, request: string, status: number) => ({
          ...usageOf(key, request, status, at()),
          cached: random() < 0.1,
          deadline: random() < 0.04 ? Date.now() - 1_000 : Date.now() + 60_000,
        });
        for (const [request, hold] of [...holds]) {
          if (random() < 0.3) continue;
          holds.delete(request);
          // A hold the server lost (a reserve never flushed): its settle is charged as a stale one is.
          if (random() < 0.08)
            await Promise.all(sqls.map((sql) => sql`DELETE FROM reservations WHERE request_id = ${request}`));
          const release = random() < 0.2;
          // Now and then a request that cost nothing (a cached answer): its settle debits 0.
          const cost = random() < 0.1 ? 0 : Math.floor(random() * hold.amount * 1.5);
          if (!release) uncapped.set(steps.length, Math.min(cost, hold.amount));
          steps.push({
            op: release ? 'release' : 'settle',
            ...usage(hold.key, request, release ? 502 : 200),
            cost,
            ...(random() < 0.7 && { decision: { questions: `{"q${request}":1}`, reused: null } }),
          });
          ids.push(hold.ids);
          if (!release) settled.push({ key: hold.key, request, ids: hold.ids });
        }
        // A settle asked again (its answer lost): its hold is gone and its record says what it cost.
        if (settled.length > 0 && random() < 0.3) {
          const again = pick(settled);
          steps.push({ op: 'settle', ...usage(again.key, again.request, 200), cost: 1_000 });
          ids.push(again.ids);
        }
        const reserves: number[] = [];
        for (let n = 3 + Math.floor(random() * 10); n > 0; n--) {
          const key = pick(keyIds);
          reserves.push(steps.length);
          steps.push({
            op: 'reserve',
            key,
            request: `r${++requests}`,
            // The tight key's holds are large: its reserves meet its credits while settles free them.
            amount: (key === 'key_tight' ? 5_000 : 1_000) + Math.floor(random() * 9_000),
            at: at(),
            staleBefore: at() - 60_000,
            token: key === 'key_tokened' ? 'tok_capped' : null,
            starts: windowStarts(at()),
            deadline: random() < 0.04 ? Date.now() - 1_000 : Date.now() + 60_000,
          });
          ids.push([null, null]);
        }
        // A reserve asked again (its answer lost): it is answered its hold; now and then twice in one batch.
        for (const [request, hold] of holds) {
          if (random() < 0.85) continue;
          for (let times = random() < 0.3 ? 2 : 1; times > 0; times--) {
            reserves.push(steps.length);
            steps.push({
              op: 'reserve',
              key: hold.key,
              request,
              amount: hold.amount,
              at: at(),
              staleBefore: at() - 60_000,
              token: hold.key === 'key_tokened' ? 'tok_capped' : null,
              starts: windowStarts(at()),
              deadline: Date.now() + 60_000,
            });
            ids.push([null, null]);
          }
        }
        // In a turn's order, settles and reserves come mixed: shuffled, as `position` says.
        const order = steps.map((_, i) => i).sort(() => random() - 0.5);
        const position = new Map(order.map((original, at) => [original, at]));
        const answers = await Promise.all(
          sqls.map((sql, db) => {
            const batch = order.map((i) => {
              const step = steps[i] as BatchStep;
              return step.op === 'reserve' ? step : { ...step, reservation: ids[i]?.[db] ?? null };
            });
            return sql<
              StepRow[]
            >`SELECT * FROM dg_apply(${JSON.stringify(batch)}::text::jsonb) ORDER BY step`;
          }),
        );
        const [old, current] = answers.map((rows) =>
          rows.map((row) => ({
            ...row,
            available: row.granted ? 'granted' : row.available,
            reservation: row.reservation === null,
          })),
        );
        expect(current, `round ${round}`).toEqual(old);
        for (const row of answers[0] ?? []) {
          if (row.refused === 'late') count('late');
          else if (!row.granted) count('refused');
          if ((row.events ?? []).length > 0) count('events');
          const full = uncapped.get(order[row.step] as number);
          if (full !== undefined && row.debit !== null && Number(row.debit) < full) count('capped');
        }
        const [left, right] = await Promise.all(sqls.map((sql) => ledgerState(sql)));
        expect(right, `round ${round}`).toEqual(left);
        for (const i of reserves) {
          const step = steps[i] as BatchStep;
          const granted = answers.map((rows) => rows[position.get(i) as number]);
          if (granted[0]?.granted)
            holds.set(step.request, {
              key: step.key,
              amount: step.amount as number,
              ids: granted.map((row) => row?.reservation ?? null),
            });
        }
      }
      // Batches written out, each through both: a key whose settle lost its hold keeps all its steps in
      // order (its reserve after that settle is refused, as the settle took what the key had); a
      // reserve asked before a settle that would free room for it is refused too (its key's credits
      // do not cover its holds and the batch's reserves at once, so the key is not plain); and a
      // request of a plain key reserved twice in one batch holds once.
      for (const store of stores) {
        await store.createKey(newKey({ id: 'key_edge', creditsMicro: 10_000 }));
        await store.createKey(newKey({ id: 'key_order', creditsMicro: 10_000 }));
        await store.createKey(newKey({ id: 'key_windows', creditsMicro: 1_000_000_000 }));
        await store.setBudgets(
          { kind: 'key', id: 'key_windows' },
          [{ window: 'minute', limitMicro: 1_000_000_000, mode: 'hard' }],
          start,
        );
      }
      const at = start + 100_000;
      const reserve = (key: string, request: string, amount: number) => ({
        op: 'reserve',
        key,
        request,
        amount,
        at,
        staleBefore: at - 60_000,
        token: null,
        starts: windowStarts(at),
        deadline: Date.now() + 60_000,
      });
      const settle = (key: string, request: string, reservation: unknown, cost: number) => ({
        ...usageOf(key, request, 200, at),
        op: 'settle',
        reservation,
        cost,
        deadline: Date.now() + 60_000,
      });
      const both = async (batch: (db: number) => object[]) => {
        const answers = await Promise.all(
          sqls.map(
            (sql, db) =>
              sql<StepRow[]>`SELECT * FROM dg_apply(${JSON.stringify(batch(db))}::text::jsonb) ORDER BY step`,
          ),
        );
        const [left, right] = await Promise.all(sqls.map((sql) => ledgerState(sql)));
        expect(right).toEqual(left);
        return answers.map((rows) =>
          rows.map((row) => [row.granted, row.debit === null ? null : Number(row.debit)]),
        );
      };
      const holdOf = async (request: string) =>
        Promise.all(
          sqls.map(
            async (sql) => (await sql`SELECT id FROM reservations WHERE request_id = ${request}`)[0]?.id,
          ),
        );
      await both(() => [
        reserve('key_edge', 'e1', 4_000),
        reserve('key_edge', 'e2', 3_000),
        reserve('key_order', 'o1', 6_000),
      ]);
      const lost = await holdOf('e1');
      await Promise.all(sqls.map((sql) => sql`DELETE FROM reservations WHERE request_id = 'e1'`));
      expect(
        await both((db) => [settle('key_edge', 'e1', lost[db], 6_000), reserve('key_edge', 'e3', 2_000)]),
      ).toEqual([
        [
          [true, 6_000],
          [false, null],
        ],
        [
          [true, 6_000],
          [false, null],
        ],
      ]);
      const o1 = await holdOf('o1');
      expect(
        await both((db) => [reserve('key_order', 'o2', 5_000), settle('key_order', 'o1', o1[db], 1_000)]),
      ).toEqual([
        [
          [false, null],
          [true, 1_000],
        ],
        [
          [false, null],
          [true, 1_000],
        ],
      ]);
      await both(() => [reserve('key_plain', 'e4', 1_000), reserve('key_plain', 'e4', 1_000)]);
      for (const sql of sqls)
        expect(await sql`SELECT count(*)::int AS n FROM reservations WHERE request_id = 'e4'`).toEqual([
          { n: 1 },
        ]);
      // A key's settles on both sides of a minute's start: each window takes its own, as one at a
      // time; and settles that debit nothing leave a budget's window where it was.
      const minute = Math.ceil((start + 1_000_000) / 60_000) * 60_000;
      const timed = <T extends object>(step: T, t: number) => ({
        ...step,
        at: t,
        starts: windowStarts(t),
        staleBefore: t - 60_000,
      });
      await both(() =>
        ['w1', 'w2', 'w3', 'w4'].map((request, i) =>
          timed(reserve('key_windows', request, 5_000), minute - 2_000 + i),
        ),
      );
      const w = await Promise.all(['w1', 'w2', 'w3', 'w4'].map(holdOf));
      await both((db) => [
        timed(settle('key_windows', 'w1', w[0]?.[db], 1_000), minute - 100),
        timed(settle('key_windows', 'w2', w[1]?.[db], 2_000), minute + 100),
      ]);
      await both((db) => [
        timed(settle('key_windows', 'w3', w[2]?.[db], 0), minute + 120_000),
        timed(settle('key_windows', 'w4', w[3]?.[db], 0), minute + 120_001),
      ]);
      for (const sql of sqls)
        expect(
          await sql`SELECT spent_micro::int AS spent, window_start::bigint = ${minute} AS now FROM budgets WHERE holder = 'key_windows'`,
        ).toEqual([{ spent: 2_000, now: true }]);
      // The batches met every limit: settles capped by credits and by the token, reserves refused,
      // budget events, late steps; and most settles of the plain keys went in bulk.
      expect(outcomes.get('capped')).toBeGreaterThan(2);
      expect(outcomes.get('refused')).toBeGreaterThan(10);
      expect(outcomes.get('late')).toBeGreaterThan(2);
      expect(outcomes.get('events')).toBeGreaterThan(0);
    } finally {
      await Promise.all(sqls.map((sql) => sql.end()));
      await Promise.all(stores.map((store) => store.close()));
      await Promise.all([before.drop(), now.drop()]);
    }
  });

  it("settles a batch of a key far from its limits without the one-step function, and one near a budget's threshold with it", () =>
    onNewStore(async (store, sql) => {
      await store.createKey(newKey({ id: 'key_bulk', creditsMicro: 1_000_000_000 }));
      await store.createKey(newKey({ id: 'key_limited', creditsMicro: 1_000_000_000 }));
      await store.setBudgets(
        { kind: 'key', id: 'key_bulk' },
        [{ window: 'day', limitMicro: 900_000_000, mode: 'hard' }],
        Date.now(),
      );
      // Two settles of 3,000 take this one past 80 % of its soft budget: the second has an event to tell.
      await store.setBudgets(
        { kind: 'key', id: 'key_limited' },
        [{ window: 'day', limitMicro: 7_000, mode: 'soft' }],
        Date.now(),
      );
      const at = Date.now();
      const reserve = (key: string, request: string) => ({
        op: 'reserve',
        key,
        request,
        amount: 5_000,
        at,
        staleBefore: at - 60_000,
        token: null,
        starts: windowStarts(at),
        deadline: at + 60_000,
      });
      const settle = (key: string, request: string, reservation: number) => ({
        op: 'settle',
        key,
        request,
        reservation,
        cost: 3_000,
        staleBefore: at - 60_000,
        input: 3,
        output: 1,
        questions: 1,
        status: 200,
        elapsed: 4,
        at,
        route: 'default',
        upstream: 'systemone',
        cached: false,
        token: null,
        subject: null,
        starts: windowStarts(at),
        deadline: at + 60_000,
        decision: { questions: '{}', reused: null },
      });
      const apply = (steps: object[]) =>
        sql<StepRow[]>`SELECT * FROM dg_apply(${JSON.stringify(steps)}::text::jsonb) ORDER BY step`;
      const held = await apply(
        ['a', 'b', 'c'].flatMap((r) => [reserve('key_bulk', r), reserve('key_limited', `l${r}`)]),
      );
      // From here a settle that reaches the one-step function fails its batch.
      await sql.unsafe(`ALTER FUNCTION dg_step_settle RENAME TO dg_step_settle_kept;
        CREATE FUNCTION dg_step_settle(p_reservation bigint, p_request text, p_key text, p_cost bigint, p_stale_before bigint,
          p_input integer, p_output integer, p_questions integer, p_status integer, p_elapsed integer, p_at bigint,
          p_route text, p_upstream text, p_cached boolean, p_token text, p_subject text, p_starts jsonb)
        RETURNS TABLE (debit bigint, events jsonb) LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'settled one at a time: %', p_request; END $$;`);
      const settles = ['a', 'b', 'c'].map((r, i) => settle('key_bulk', r, Number(held[2 * i]?.reservation)));
      const rows = await apply([...settles, reserve('key_bulk', 'd')]);
      expect(
        rows.map((row) => [row.step, row.granted, row.debit === null ? null : Number(row.debit)]),
      ).toEqual([
        [0, true, 3_000],
        [1, true, 3_000],
        [2, true, 3_000],
        [3, true, null],
      ]);
      expect((await store.getKey('key_bulk'))?.creditsMicro).toBe(1_000_000_000 - 9_000);
      expect(await sql`SELECT request_id FROM decision_records ORDER BY request_id`).toEqual(
        ['a', 'b', 'c'].map((request_id) => ({ request_id })),
      );
      expect(await sql`SELECT holder, spent_micro::int AS spent FROM budgets ORDER BY holder`).toEqual([
        { holder: 'key_bulk', spent: 9_000 },
        { holder: 'key_limited', spent: 0 },
      ]);
      const budgeted = ['a', 'b'].map((r, i) =>
        settle('key_limited', `l${r}`, Number(held[2 * i + 1]?.reservation)),
      );
      await expect(apply(budgeted)).rejects.toThrow(/settled one at a time: la/);
    }));

  it('charges a settle whose hold the server lost (a reserve never flushed) as it charges one swept as stale', () =>
    onNewStore(async (store, sql) => {
      await store.createKey(newKey({ id: 'key_lost', creditsMicro: 5_000 }));
      await store.createKey(newKey({ id: 'key_short', creditsMicro: 5_000 }));
      const now = Date.now();
      const holds = new Map<string, string | null>();
      for (const key of ['key_lost', 'key_short']) {
        const held = await store.reserve(key, `${key}-1`, 4_000, now, now - 60_000);
        if (!held.ok) throw new Error('the reserve was refused');
        holds.set(key, held.reservationId);
        // What a crash takes with a commit that did not wait for the disk.
        await sql`DELETE FROM reservations WHERE request_id = ${`${key}-1`}`;
      }
      // Another request holds most of what key_short has left meanwhile.
      const other = await store.reserve('key_short', 'key_short-2', 4_000, now, now - 60_000);
      expect(other.ok).toBe(true);

      const settle = (key: string) =>
        store.settle(holds.get(key) ?? null, usageEntry(key, `${key}-1`, 3_000, now), now - 60_000);
      expect(await settle('key_lost')).toBe(3_000);
      // Capped at what the key can still cover beside the other live hold.
      expect(await settle('key_short')).toBe(1_000);
      expect((await store.getKey('key_lost'))?.creditsMicro).toBe(2_000);
      expect((await store.getKey('key_short'))?.creditsMicro).toBe(4_000);
      const records = await sql`SELECT request_id, credits_micro FROM usage_records ORDER BY request_id`;
      expect(records.map((r) => [r.request_id, Number(r.credits_micro)])).toEqual([
        ['key_lost-1', 3_000],
        ['key_short-1', 1_000],
      ]);
    }));
});
