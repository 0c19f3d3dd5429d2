// pnpm bench:maintenance — what background maintenance costs the callers of the same store
// (docs/usage.md), on SQLite and on PostgreSQL (BENCH_MAINTENANCE_STORES=sqlite,postgres): a gateway
// started over a store written by the release before the rollups (so its first pass folds every
// record into them) with 60 days of records and 30 days' retention (so the same pass deletes half
// of them, and half of the decision records kept beside them), 16 callers posting all along. Throughput and p99 in 3-second windows while the pass
// runs, against the windows after it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { migratePostgres, migrateSqlite } from '@decision-gateway/gateway';
import Database from 'better-sqlite3';
import { createBenchDatabase, createBenchKey, onPostgres } from './bench-support.ts';
import { measureLoad, restTarget } from './load.ts';
import { startProcess } from './processes.ts';

const RECORDS = Number(process.env.BENCH_MAINTENANCE_RECORDS ?? 2_000_000);
/** BENCH_MAINTENANCE_CALLERS=0: nobody calls, and the pass alone is timed. */
const CALLERS = Number(process.env.BENCH_MAINTENANCE_CALLERS ?? 16);
const WINDOW_S = 3;
const DAY = 86_400_000;
const now = Date.now();
const SPAN = 60 * DAY;
const STORES = (process.env.BENCH_MAINTENANCE_STORES ?? 'sqlite,postgres').split(',');
const KEY_SQL = `INSERT INTO api_keys (id, name, prefix, hash, credits_micro, created_at)
  VALUES ('key_old', 'old', 'dg_old', 'bench-hash-old', NULL, ${now - SPAN})`;
const COLUMNS =
  'request_id, key_id, credits_micro, input_tokens, output_tokens, questions, status, elapsed_ms, at, route, upstream, cached';
/** Record j: one every 60 days / RECORDS, all of one old key. */
const DECISIONS = Math.floor(RECORDS / 2);
/** Decision j, kept beside record 2j (the release that keeps decisions), for decision retention. */
const decisionSql = (j: string) =>
  `'req_old_' || (2 * ${j}), 'key_old', 'default', ${now - SPAN} + 2 * ${j} * ${Math.floor(SPAN / RECORDS)}, NULL,
   '{"urgent":{"type":"noul","upstream":"lexical","p":0.8}}'`;
const DECISION_COLUMNS = 'request_id, key_id, route, at, reused, questions';
const recordSql = (j: string, cached: string) =>
  `'req_old_' || ${j}, 'key_old', 230000, 230, 0, 3, 200, 5, ${now - SPAN} + ${j} * ${Math.floor(SPAN / RECORDS)}, 'default', 'lexical', ${cached}`;

/**
 * The SQLite release before the rollups' schema (migration 5) with `RECORDS` records over 60 days,
 * upgraded, with a decision kept for every other record.
 */
function seedSqlite(path: string) {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  migrateSqlite(db, 5);
  db.exec(KEY_SQL);
  const chunk = 500_000;
  for (let from = 0; from < RECORDS; from += chunk) {
    const to = Math.min(RECORDS, from + chunk) - 1;
    db.exec(`WITH RECURSIVE s(j) AS (SELECT ${from} UNION ALL SELECT j + 1 FROM s WHERE j < ${to})
      INSERT INTO usage_records (${COLUMNS}) SELECT ${recordSql('j', '0')} FROM s`);
  }
  // Then the current schema (the fold is left to the gateway) and the decisions kept meanwhile.
  migrateSqlite(db);
  db.exec(`WITH RECURSIVE s(j) AS (SELECT 0 UNION ALL SELECT j + 1 FROM s WHERE j < ${DECISIONS - 1})
    INSERT INTO decision_records (${DECISION_COLUMNS}) SELECT ${decisionSql('j')} FROM s`);
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
}

/** The PostgreSQL release before the rollups' schema (migration 4), the same records and decisions. */
async function seedPostgres(url: string) {
  await onPostgres(url, async (sql) => {
    await migratePostgres(sql, 4);
    await sql.unsafe(KEY_SQL);
    await sql.unsafe(`INSERT INTO usage_records (${COLUMNS})
      SELECT ${recordSql('j', 'false')} FROM generate_series(0::bigint, ${RECORDS - 1}::bigint) j`);
    await migratePostgres(sql);
    await sql.unsafe(`INSERT INTO decision_records (${DECISION_COLUMNS})
      SELECT ${decisionSql('j')} FROM generate_series(0::bigint, ${DECISIONS - 1}::bigint) j`);
    await sql.unsafe('VACUUM ANALYZE usage_records');
    await sql.unsafe('VACUUM ANALYZE decision_records');
  });
}

const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;

/** The pass on one store: the callers' windows during it and after it. */
async function measure(store: string) {
  const dir = mkdtempSync(join(tmpdir(), 'dg-bench-maintenance-'));
  const database = store === 'postgres' ? await createBenchDatabase() : undefined;
  const url = database?.url ?? `file:${join(dir, 'gateway.db')}`;
  try {
    if (database) await seedPostgres(database.url);
    else seedSqlite(join(dir, 'gateway.db'));
    const key = await createBenchKey(database?.url ?? join(dir, 'gateway.db'));
    const gateway = await startProcess(`gateway (maintenance, ${store})`, 'apps/gateway/src/main.ts', {
      DATABASE_URL: url,
      UPSTREAM: 'lexical',
      RATE_LIMIT_PER_MINUTE: '0',
      PORT: '0',
      USAGE_RETENTION_DAYS: '30',
      LOG_LEVEL: 'info',
    });
    let passDone = false;
    gateway.child.stdout?.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('usage maintenance')) passDone = true;
    });
    const target = restTarget('gateway', gateway, key);
    try {
      if (CALLERS === 0) {
        const started = performance.now();
        while (!passDone) await new Promise((resolve) => setTimeout(resolve, 100));
        const passSeconds = (performance.now() - started) / 1000;
        return {
          store,
          records: RECORDS,
          decisions: DECISIONS,
          callers: 0,
          passSeconds: Number(passSeconds.toFixed(1)),
        };
      }
      const during: { rps: number; p99: number }[] = [];
      const started = performance.now();
      while (!passDone) during.push(await measureLoad(target, CALLERS, WINDOW_S));
      const passSeconds = (performance.now() - started) / 1000;
      const after: { rps: number; p99: number }[] = [];
      for (let i = 0; i < 4; i++) after.push(await measureLoad(target, CALLERS, WINDOW_S));
      const rpsDuring = median(during.map((w) => w.rps));
      const rpsAfter = median(after.map((w) => w.rps));
      const p99During = median(during.map((w) => w.p99));
      const p99After = median(after.map((w) => w.p99));
      return {
        store,
        records: RECORDS,
        decisions: DECISIONS,
        passSeconds: Number(passSeconds.toFixed(1)),
        windowsDuring: during.length,
        rpsDuring: Math.round(rpsDuring),
        rpsAfter: Math.round(rpsAfter),
        throughputKept: Number((rpsDuring / rpsAfter).toFixed(2)),
        p99DuringMs: p99During,
        p99AfterMs: p99After,
        p99RiseMs: p99During - p99After,
        worstWindowP99Ms: Math.max(...during.map((w) => w.p99)),
      };
    } finally {
      await gateway.stop();
    }
  } finally {
    await database?.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}

for (const store of STORES) console.log(JSON.stringify(await measure(store), null, 2));
