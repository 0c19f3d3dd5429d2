// pnpm bench:usage (and the end of pnpm bench): usage at any volume, on both stores. A month of
// history (BENCH_USAGE_RECORDS, 20 million by default) written as the release before the rollups
// wrote it, upgraded by this release (the fold), then the operator's reads timed, a caller's p99
// measured with and without an operator reading, and the database's size extrapolated. See the
// docs/usage.md.
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createLogger,
  createUsageReports,
  migratePostgres,
  migrateSqlite,
  openPostgresStore,
  openSqliteStore,
  type Store,
  startMaintenance,
  usageRetention,
} from '@decision-gateway/gateway';
import Database from 'better-sqlite3';
import { Pool } from 'undici';
import {
  createBenchDatabase,
  createBenchKey,
  onPostgres,
  timedRequest,
  updateDocSection,
} from './bench-support.ts';
import { type Running, startProcess } from './processes.ts';
import { BENCH_REQUEST } from './request.ts';

const RECORDS = Number(process.env.BENCH_USAGE_RECORDS ?? 20_000_000);
const KEYS = 100;
const DAY = 86_400_000;
const MONTH = 30 * DAY;
const CHUNK = 1_000_000;
/** Calls per read, for its median and its slowest. */
const READS = 20;
const BAR_MS = 200;
const CALLER_REQUESTS = 400;
const ADMIN_TOKEN = 'bench-admin-token-0123456789abcdef';
const now = Date.now();

/**
 * The synthetic month, the same on both stores: record j of N, spread evenly over the last 30
 * days, 100 keys, two routes, two upstreams, one in ten a cache hit, one in fifty failed,
 * latencies from 2 to 335 ms.
 */
const recordSql = (j: string, n: number, cast: (sql: string) => string) => `
  'req_' || ${j}, 'key_' || (${j} * 7919 % ${KEYS}),
  CASE WHEN ${j} % 10 = 0 OR ${j} % 50 = 0 THEN 0 ELSE 230000 END, 230, 0, 3,
  CASE WHEN ${j} % 50 = 0 THEN 502 ELSE 200 END,
  ${cast(`(${j} * 2654435761 % 1000) / 3 + 2`)}, ${now - MONTH} + ${j} * ${Math.floor(MONTH / n)},
  CASE WHEN ${j} % 3 = 0 THEN 'cheap' ELSE 'default' END,
  CASE WHEN ${j} % 4 = 0 THEN 'strong' ELSE 'lexical' END, ${j} % 10 = 0`;
const RECORD_COLUMNS =
  'request_id, key_id, credits_micro, input_tokens, output_tokens, questions, status, elapsed_ms, at, route, upstream, cached';

async function timed<T>(run: () => Promise<T>): Promise<{ value: T; seconds: number }> {
  const started = performance.now();
  const value = await run();
  return { value, seconds: (performance.now() - started) / 1000 };
}

function seedSqlite(path: string) {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  migrateSqlite(db, 5);
  db.exec(`WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i < ${KEYS - 1})
    INSERT INTO api_keys (id, name, prefix, hash, credits_micro, created_at)
    SELECT 'key_' || i, 'key ' || i, 'dg_' || i, 'bench-hash-' || i, NULL, ${now - MONTH} FROM k`);
  for (let from = 0; from < RECORDS; from += CHUNK) {
    const to = Math.min(RECORDS, from + CHUNK) - 1;
    db.exec(`WITH RECURSIVE s(j) AS (SELECT ${from} UNION ALL SELECT j + 1 FROM s WHERE j < ${to})
      INSERT INTO usage_records (${RECORD_COLUMNS}) SELECT ${recordSql('j', RECORDS, (x) => x)} FROM s`);
  }
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
}

async function seedPostgres(url: string) {
  await onPostgres(url, async (sql) => {
    await migratePostgres(sql, 4);
    await sql.unsafe(`INSERT INTO api_keys (id, name, prefix, hash, credits_micro, created_at)
      SELECT 'key_' || i, 'key ' || i, 'dg_' || i, 'bench-hash-' || i, NULL, ${now - MONTH}
      FROM generate_series(0, ${KEYS - 1}) i`);
    for (let from = 0; from < RECORDS; from += CHUNK) {
      const to = Math.min(RECORDS, from + CHUNK) - 1;
      await sql.unsafe(`INSERT INTO usage_records (${RECORD_COLUMNS})
        SELECT ${recordSql('j', RECORDS, (x) => `(${x})::int`)} FROM generate_series(${from}::bigint, ${to}::bigint) j`);
    }
    await sql.unsafe('VACUUM ANALYZE usage_records');
  });
}

/** The upgrade, batch after batch as the gateway's background work runs it. */
async function fold(store: Store) {
  for (;;) {
    const batch = await store.foldIntoRollups(2_000);
    if (batch.left === 0) return;
  }
}

const iso = (t: number) => new Date(t).toISOString();

/** The operator's reads, each timed READS times: its median and its slowest call, in ms. */
async function timeReads(store: Store) {
  const reports = createUsageReports(store);
  const oneKey = 'key_7';
  // Ranges end now (the clock moves on while the history is written): `ago(ms)` is that far back.
  const ago = (ms: number) => iso(Date.now() - ms);
  const reads: [string, () => Promise<{ ok: boolean }>][] = [
    ['series, 30 days by hour, all keys', () => reports.series({ from: ago(MONTH), step: 'hour' })],
    [
      'series, 30 days by hour, one key',
      () => reports.series({ keyId: oneKey, from: ago(MONTH), step: 'hour' }),
    ],
    ['series, 30 days by day, all keys', () => reports.series({ from: ago(MONTH), step: 'day' })],
    ['series, 1000 minutes, all keys', () => reports.series({ from: ago(998 * 60_000), step: 'minute' })],
    ['summary, 30 days, all keys', () => reports.summary({ from: ago(MONTH) })],
    ['summary, 30 days, one key', () => reports.summary({ keyId: oneKey, from: ago(MONTH) })],
    ['summary, last 24 h, all keys', () => reports.summary({ from: ago(DAY) })],
  ];
  const results: { read: string; medianMs: number; slowestMs: number }[] = [];
  for (const [read, run] of reads) {
    // One call first, untimed: the first read after the upgrade finds the pages cold.
    if (!(await run()).ok) throw new Error(`${read} failed`);
    const times: number[] = [];
    for (let i = 0; i < READS; i++) {
      const started = performance.now();
      const answer = await run();
      if (!answer.ok) throw new Error(`${read} failed: ${JSON.stringify(answer)}`);
      times.push(performance.now() - started);
    }
    times.sort((a, b) => a - b);
    results.push({
      read,
      medianMs: Number((times[Math.floor(times.length / 2)] as number).toFixed(1)),
      slowestMs: Number((times[times.length - 1] as number).toFixed(1)),
    });
  }
  return results;
}

const p99 = (samples: number[]) => {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.ceil(0.99 * sorted.length) - 1] as number;
};

/** A caller's p99 (one request after another), quiet and while an operator reads back to back; three rounds. */
async function callerBesideOperator(gateway: Running, apiKey: string) {
  const url = new URL(gateway.url);
  const caller = new Pool(url.origin, { connections: 1 });
  const operator = new Pool(url.origin, { connections: 1 });
  const body = JSON.stringify(BENCH_REQUEST);
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` };
  const latencies = async (count: number) => {
    const times: number[] = [];
    for (let i = 0; i < count; i++) times.push(await timedRequest(caller, headers, body));
    return times;
  };
  const ago = (ms: number) => iso(Date.now() - ms);
  const paths = () => [
    `/admin/usage/series?from=${ago(MONTH)}&step=hour`,
    `/admin/usage/summary?from=${ago(MONTH)}`,
    `/admin/usage/series?from=${ago(998 * 60_000)}&step=minute`,
    `/admin/keys/key_7/usage?limit=1000`,
  ];
  try {
    await latencies(100);
    const rounds: { quiet: number; reading: number; reads: number }[] = [];
    for (let round = 0; round < 3; round++) {
      const quiet = p99(await latencies(CALLER_REQUESTS));
      let stop = false;
      let reads = 0;
      const reading = (async () => {
        while (!stop) {
          const response = await operator.request({
            path: paths()[reads % 4] as string,
            method: 'GET',
            headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
          });
          await response.body.text();
          if (response.statusCode !== 200) throw new Error(`an operator read got ${response.statusCode}`);
          reads++;
        }
      })();
      const busy = p99(await latencies(CALLER_REQUESTS));
      stop = true;
      await reading;
      rounds.push({ quiet, reading: busy, reads });
    }
    const rises = rounds.map((r) => r.reading - r.quiet).sort((a, b) => a - b);
    const middle = rounds.find((r) => r.reading - r.quiet === rises[1]) as (typeof rounds)[number];
    return {
      quietP99Ms: Number(middle.quiet.toFixed(2)),
      readingP99Ms: Number(middle.reading.toFixed(2)),
      riseMs: Number((rises[1] as number).toFixed(2)),
      operatorReads: rounds.reduce((sum, r) => sum + r.reads, 0),
    };
  } finally {
    await caller.close();
    await operator.close();
  }
}

const sqliteBytes = (path: string) =>
  [path, `${path}-wal`].reduce((sum, file) => {
    try {
      return sum + statSync(file).size;
    } catch {
      return sum;
    }
  }, 0);

const GB = 1e9;
const round = (n: number, digits = 1) => Number(n.toFixed(digits));

export async function runUsageVolumeBench(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'dg-bench-usage-'));
  const database = await createBenchDatabase();
  const silent = createLogger('silent');
  const running: Running[] = [];
  try {
    const millions = RECORDS / 1e6;
    process.stdout.write(
      `usage at any volume: seeding ${millions}M usage records on SQLite and PostgreSQL…\n`,
    );
    const path = join(dir, 'gateway.db');
    const sqliteSeed = await timed(async () => seedSqlite(path));
    const rawBytes = sqliteBytes(path);
    const sqlite = openSqliteStore(path, { timeoutMs: 60_000 });
    const sqliteFold = await timed(() => fold(sqlite));
    const rollupRows = (() => {
      const db = new Database(path, { readonly: true });
      const rows = db
        .prepare('SELECT step_ms AS step, COUNT(*) AS n FROM usage_rollups GROUP BY step_ms')
        .all() as { step: number; n: number }[];
      db.close();
      return Object.fromEntries(rows.map((r) => [r.step, r.n])) as Record<number, number>;
    })();
    const foldedBytes = sqliteBytes(path);
    const retention = startMaintenance({
      store: sqlite,
      tasks: usageRetention(sqlite, 90),
      logger: silent,
    });
    const sqlitePass = await timed(() => retention.runPass());
    await retention.stop();
    const sqliteReads = await timeReads(sqlite);
    await sqlite.close();

    const pgSeed = await timed(() => seedPostgres(database.url));
    const postgresStore = await openPostgresStore(database.url, { poolSize: 4, timeoutMs: 600_000 });
    const pgFold = await timed(() => fold(postgresStore));
    const pgReads = await timeReads(postgresStore);
    await postgresStore.close();

    process.stdout.write('usage at any volume: a caller beside an operator on the SQLite file…\n');
    const apiKey = await createBenchKey(path);
    const gateway = await startProcess('gateway (usage history)', 'apps/gateway/src/main.ts', {
      DATABASE_URL: `file:${path}`,
      ADMIN_TOKEN,
      UPSTREAM: 'lexical',
      RATE_LIMIT_PER_MINUTE: '0',
      LOG_LEVEL: 'info',
      PORT: '0',
    });
    running.push(gateway);
    const caller = await callerBesideOperator(gateway, apiKey);

    // Sizes: bytes per record (with its indexes) and per rollup row, measured on the SQLite file;
    // then a month at 100 requests a second over 100 keys with 8 route × upstream × cache
    // combinations each (800 rollup rows a minute, an hour and a day at most), and the steady
    // state with 90 days' retention.
    const bytesPerRecord = rawBytes / RECORDS;
    const allRollups = Object.values(rollupRows).reduce((sum, n) => sum + n, 0);
    const bytesPerRollup = (foldedBytes - rawBytes) / allRollups;
    const perMonth = 100 * 30 * 86_400;
    const rowsPerStep = 800;
    const monthBytes = perMonth * bytesPerRecord + (14 * 1440 + 30 * 24 + 30) * rowsPerStep * bytesPerRollup;
    const steadyBytes =
      3 * perMonth * bytesPerRecord + (14 * 1440 + 90 * 24 + 90) * rowsPerStep * bytesPerRollup;

    const slowest = Math.max(...sqliteReads.map((r) => r.slowestMs), ...pgReads.map((r) => r.slowestMs));
    const lines = [
      `Measured ${new Date(now).toISOString().slice(0, 10)} on ${millions}M usage records (100 keys, 30 days), \`pnpm bench:usage\`.`,
      '',
      '| read (median / slowest of 20 after one untimed, ms) | SQLite | PostgreSQL |',
      '| --- | --- | --- |',
      ...sqliteReads.map((r, i) => {
        const pg = pgReads[i] as (typeof pgReads)[number];
        return `| ${r.read} | ${r.medianMs} / ${r.slowestMs} | ${pg.medianMs} / ${pg.slowestMs} |`;
      }),
      '',
      `- Every read within ${BAR_MS} ms: **${slowest <= BAR_MS ? 'yes' : 'no'}** (slowest ${slowest} ms).`,
      `- A caller's p99 (one request after another, SQLite): ${caller.quietP99Ms} ms quiet, ${caller.readingP99Ms} ms while an operator reads back to back (${caller.operatorReads} reads): **+${caller.riseMs} ms** (bar: 25 ms; median of 3 rounds).`,
      `- Upgrade (the fold of records from before the rollups, 2,000 a batch): SQLite ${round(sqliteFold.seconds / millions)} s, PostgreSQL ${round(pgFold.seconds / millions)} s per million records (written in ${round(sqliteSeed.seconds)} s and ${round(pgSeed.seconds)} s).`,
      `- First retention pass (minute rollups past 14 days): ${round(sqlitePass.seconds)} s on SQLite, in batches of 2,000.`,
      `- Size: ${Math.round(bytesPerRecord)} bytes a usage record with its indexes, ${Math.round(bytesPerRollup)} bytes a rollup row (${allRollups.toLocaleString('en')} rollup rows for this month). At 100 requests a second: about ${round(monthBytes / GB)} GB after a month, ${round(steadyBytes / GB)} GB steady with 90 days' retention (${round(((perMonth / 30) * bytesPerRecord) / GB, 2)} GB a day of records; ${round((1e6 * bytesPerRecord) / 1e6)} MB per million requests).`,
    ];
    return lines.join('\n');
  } finally {
    for (const process of running) await process.stop();
    await database.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const table = await runUsageVolumeBench();
  process.stdout.write(`\n${table}\n`);
  if (!process.env.BENCH_USAGE_RECORDS) updateDocSection('usage.md', 'bench-usage', table);
}
