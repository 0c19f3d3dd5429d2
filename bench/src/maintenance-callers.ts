// pnpm bench:maintenance — what background maintenance costs the callers of the same SQLite file
// (docs/usage.md): a gateway started over a store written by the release before the rollups (so its
// first pass folds every record into them) with 60 days of records and 30 days' retention (so the
// same pass deletes half of them), 16 callers posting all along. Throughput and p99 in 3-second
// windows while the pass runs, against the windows after it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { migrateSqlite } from '@decision-gateway/gateway';
import Database from 'better-sqlite3';
import { createBenchKey } from './bench-support.ts';
import { measureLoad } from './load.ts';
import { startProcess } from './processes.ts';
import { BENCH_REQUEST } from './request.ts';

const RECORDS = Number(process.env.BENCH_MAINTENANCE_RECORDS ?? 2_000_000);
const CALLERS = 16;
const WINDOW_S = 3;
const DAY = 86_400_000;
const now = Date.now();

/** The release before the rollups' schema (migration 5) with `RECORDS` records over 60 days. */
function seed(path: string) {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  migrateSqlite(db, 5);
  db.exec(`INSERT INTO api_keys (id, name, prefix, hash, credits_micro, created_at)
    VALUES ('key_old', 'old', 'dg_old', 'bench-hash-old', NULL, ${now - 60 * DAY})`);
  const span = 60 * DAY;
  const chunk = 500_000;
  for (let from = 0; from < RECORDS; from += chunk) {
    const to = Math.min(RECORDS, from + chunk) - 1;
    db.exec(`WITH RECURSIVE s(j) AS (SELECT ${from} UNION ALL SELECT j + 1 FROM s WHERE j < ${to})
      INSERT INTO usage_records (request_id, key_id, credits_micro, input_tokens, output_tokens, questions, status,
        elapsed_ms, at, route, upstream, cached)
      SELECT 'req_old_' || j, 'key_old', 230000, 230, 0, 3, 200, 5, ${now - span} + j * ${Math.floor(span / RECORDS)},
        'default', 'lexical', 0 FROM s`);
  }
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
}

const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'dg-bench-maintenance-'));
  const path = join(dir, 'gateway.db');
  seed(path);
  const key = await createBenchKey(path);
  const gateway = await startProcess('gateway (maintenance)', 'apps/gateway/src/main.ts', {
    DATABASE_URL: `file:${path}`,
    UPSTREAM: 'lexical',
    RATE_LIMIT_PER_MINUTE: '0',
    USAGE_RETENTION_DAYS: '30',
    LOG_LEVEL: 'info',
  });
  let passDone = false;
  gateway.child.stdout?.on('data', (chunk: Buffer) => {
    if (chunk.toString().includes('usage maintenance')) passDone = true;
  });
  const target = {
    name: 'gateway',
    server: gateway,
    url: `${gateway.url}/v1/systemone`,
    headers: { authorization: `Bearer ${key}` },
    body: JSON.stringify(BENCH_REQUEST),
  };
  try {
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
    console.log(
      JSON.stringify(
        {
          records: RECORDS,
          passSeconds: Number(passSeconds.toFixed(1)),
          windowsDuring: during.length,
          rpsDuring: Math.round(rpsDuring),
          rpsAfter: Math.round(rpsAfter),
          throughputKept: Number((rpsDuring / rpsAfter).toFixed(2)),
          p99DuringMs: p99During,
          p99AfterMs: p99After,
          p99RiseMs: p99During - p99After,
          worstWindowP99Ms: Math.max(...during.map((w) => w.p99)),
        },
        null,
        2,
      ),
    );
  } finally {
    await gateway.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
