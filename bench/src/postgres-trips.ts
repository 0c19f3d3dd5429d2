// pnpm bench:postgres — where a request's PostgreSQL work goes (docs/scaling-out.md): one REST
// gateway on PostgreSQL with Redis rate limits, at each of BENCH_POSTGRES_CONNECTIONS (1,8,64,256)
// for BENCH_POSTGRES_SECONDS (8). Per request: the transactions PostgreSQL committed (each step
// batch is one statement, so one round trip and one commit), the CPU of the gateway, of
// PostgreSQL's processes and of Redis, and the time spent in each of the store's database
// functions (`track_functions`, set on the bench's own database only). BENCH_POSTGRES_BUDGETS=3:
// the key has the three hard budgets of the bench's budget rows.
import { execFileSync } from 'node:child_process';
import postgres from 'postgres';
import { createBenchDatabase, createBenchKeys, postgresGatewayEnv, THREE_BUDGETS } from './bench-support.ts';
import { measureLoad, restTarget } from './load.ts';
import { cpuSecondsOfPid, startProcess } from './processes.ts';

const LEVELS = (process.env.BENCH_POSTGRES_CONNECTIONS ?? '1,8,64,256').split(',').map(Number);
const SECONDS = Number(process.env.BENCH_POSTGRES_SECONDS ?? 8);
/** CPU seconds used so far by every process whose command line matches `pattern` (pgrep -f). */
function cpuSecondsOf(pattern: string): number {
  let pids: string[] = [];
  try {
    pids = execFileSync('pgrep', ['-f', pattern]).toString().split(/\s+/).filter(Boolean);
  } catch {
    // pgrep exits 1 when nothing matches.
  }
  let seconds = 0;
  for (const pid of pids) {
    try {
      seconds += cpuSecondsOfPid(pid);
    } catch {
      // The process ended between pgrep and the read.
    }
  }
  return seconds;
}

interface FunctionTimes {
  calls: number;
  selfMs: number;
  totalMs: number;
}

const database = await createBenchDatabase();
const name = new URL(database.url).pathname.slice(1);
const admin = postgres(database.url, { max: 1, onnotice: () => {} });
await admin.unsafe(`ALTER DATABASE ${name} SET track_functions = 'all'`);
const upstream = await startProcess('stand-in upstream', 'bench/src/stand-in-upstream.ts');
const budgeted = process.env.BENCH_POSTGRES_BUDGETS === '3';
const [key] = await createBenchKeys(database.url, 1, budgeted ? THREE_BUDGETS : undefined);
const gateway = await startProcess(
  'gateway (PostgreSQL)',
  'apps/gateway/src/main.ts',
  postgresGatewayEnv(database.url, upstream.url),
);
const target = restTarget('gateway PG+Redis', gateway, key);

/** What PostgreSQL has counted for the database so far: committed transactions and function times. */
async function statistics(): Promise<{ commits: number; functions: Map<string, FunctionTimes> }> {
  // A backend gone idle hands its counts to the shared view only after 10 s (PostgreSQL's
  // PGSTAT_IDLE_INTERVAL), so the gateway's connections are given 11.
  await new Promise((resolve) => setTimeout(resolve, 11_000));
  await admin`SELECT pg_stat_clear_snapshot()`;
  const [row] = await admin<{ commits: number }[]>`
    SELECT xact_commit::int8 AS commits FROM pg_stat_database WHERE datname = ${name}`;
  const rows = await admin<{ name: string; calls: number; selfMs: number; totalMs: number }[]>`
    SELECT funcname AS name, calls::int8 AS calls, self_time AS "selfMs", total_time AS "totalMs"
    FROM pg_stat_user_functions`;
  return { commits: row?.commits ?? 0, functions: new Map(rows.map((fn) => [fn.name, fn])) };
}

try {
  await measureLoad(target, 16, 3); // warm-up
  console.log(
    `REST gateway on PostgreSQL + Redis, one key${budgeted ? ' with three hard budgets' : ''}, ${SECONDS} s a level\n`,
  );
  let before = await statistics();
  for (const connections of LEVELS) {
    const postgresBefore = cpuSecondsOf('^postgres');
    const redisBefore = cpuSecondsOf('redis-server');
    const result = await measureLoad(target, connections, SECONDS);
    const postgresCpu = cpuSecondsOf('^postgres') - postgresBefore;
    const redisCpu = cpuSecondsOf('redis-server') - redisBefore;
    const after = await statistics();
    const committed = after.commits - before.commits;
    const perRequest = (value: number) => value / result.requests;
    console.log(
      `c=${connections}: ${Math.round(result.rps)} req/s (${result.requests} requests, ${result.errors} errors), ` +
        `${perRequest(committed).toFixed(3)} commits a request; CPU µs a request: gateway ` +
        `${Math.round(result.cpuUsPerRequest)}, PostgreSQL ${Math.round(perRequest(postgresCpu * 1e6))}, ` +
        `Redis ${Math.round(perRequest(redisCpu * 1e6))}`,
    );
    for (const [fn, now] of [...after.functions].sort((a, b) => b[1].selfMs - a[1].selfMs)) {
      const then = before.functions.get(fn) ?? { calls: 0, selfMs: 0, totalMs: 0 };
      const calls = now.calls - then.calls;
      if (calls === 0) continue;
      console.log(
        `    ${fn}: ${perRequest(calls).toFixed(2)} calls, ${perRequest((now.selfMs - then.selfMs) * 1000).toFixed(1)} µs ` +
          `of its own (${perRequest((now.totalMs - then.totalMs) * 1000).toFixed(1)} with what it calls) a request`,
      );
    }
    before = after;
  }
} finally {
  await admin.end();
  await gateway.stop();
  await upstream.stop();
  await database.drop();
}
