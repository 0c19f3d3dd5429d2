// pnpm bench:refit — what a calibration refit over 100,000 outcomes (docs/calibration-maps.md) costs
// the callers of the same instance, on SQLite and on PostgreSQL (BENCH_REFIT_STORES): how long the
// refit takes, and what BENCH_REFIT_CALLERS (16) callers posting all along get while it runs against
// as long a stretch just before it: their throughput and their p99 (three rounds, the middle one
// reported).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { seeded } from '@decision-gateway/gateway/testing';
import Database from 'better-sqlite3';
import { Pool } from 'undici';
import { createBenchDatabase, createBenchKey, onPostgres, timedRequest } from './bench-support.ts';
import { startProcess } from './processes.ts';
import { BENCH_REQUEST } from './request.ts';

const OUTCOMES = Number(process.env.BENCH_REFIT_OUTCOMES ?? 100_000);
const CALLERS = Number(process.env.BENCH_REFIT_CALLERS ?? 16);
const STORES = (process.env.BENCH_REFIT_STORES ?? 'sqlite,postgres').split(',');
const ADMIN_TOKEN = 'bench-admin-token-0123456789abcdef';
const DAY = 86_400_000;
/** The shortest stretch the callers are measured over, quiet or beside a refit. */
const AT_LEAST_SECONDS = 2;
const now = Date.now();

type DecisionRow = [requestId: string, keyId: string, route: string, at: number, questions: string];
type OutcomeRow = [requestId: string, questionId: string, truth: string, recordedAt: number];

/**
 * Decisions of 4 nouls and 4 choices answered by one upstream over the last 20 days, each with its 8
 * outcomes, as the gateway keeps them (outcomes/decision-record.ts).
 */
function history(): { decisions: DecisionRow[]; outcomes: OutcomeRow[] } {
  const random = seeded(7);
  const count = Math.ceil(OUTCOMES / 8);
  const decisions: DecisionRow[] = [];
  const outcomes: OutcomeRow[] = [];
  for (let d = 0; d < count; d++) {
    const at = now - 20 * DAY + Math.floor((d / count) * 20 * DAY);
    const questions: Record<string, unknown> = {};
    for (let i = 0; i < 4; i++) {
      const p = 0.02 + 0.96 * random();
      questions[`n${i}`] = { type: 'noul', upstream: 'cheap', p };
      outcomes.push([`req_seed_${d}`, `n${i}`, JSON.stringify(random() < p * 0.8), at]);
      const raw = [random(), random(), random(), random()].map((x) => x ** 3 + 0.01);
      const sum = raw.reduce((s, x) => s + x, 0);
      questions[`c${i}`] = {
        type: 'choice',
        upstream: 'cheap',
        p: raw.map((x) => x / sum),
        confidence: 0.5,
        labels: ['a', 'b', 'c', 'd'],
      };
      const truth = ['a', 'b', 'c', 'd'][Math.floor(random() * 4)];
      outcomes.push([`req_seed_${d}`, `c${i}`, JSON.stringify(truth), at]);
    }
    decisions.push([`req_seed_${d}`, 'key_seed', 'default', at, JSON.stringify(questions)]);
  }
  return { decisions, outcomes };
}

function seedSqlite(path: string, { decisions, outcomes }: ReturnType<typeof history>) {
  const db = new Database(path);
  const insertDecision = db.prepare(
    'INSERT INTO decision_records (request_id, key_id, route, at, reused, questions) VALUES (?, ?, ?, ?, NULL, ?)',
  );
  const insertOutcome = db.prepare(
    'INSERT INTO decision_outcomes (request_id, question_id, truth, recorded_at) VALUES (?, ?, ?, ?)',
  );
  db.transaction(() => {
    for (const row of decisions) insertDecision.run(...row);
    for (const row of outcomes) insertOutcome.run(...row);
  })();
  db.close();
}

async function seedPostgres(url: string, { decisions, outcomes }: ReturnType<typeof history>) {
  await onPostgres(url, async (sql) => {
    const chunk = 5_000;
    for (let from = 0; from < decisions.length; from += chunk) {
      const rows = decisions.slice(from, from + chunk);
      await sql`INSERT INTO decision_records (request_id, key_id, route, at, questions)
        SELECT * FROM unnest(${rows.map((r) => r[0])}::text[], ${rows.map((r) => r[1])}::text[],
          ${rows.map((r) => r[2])}::text[], ${rows.map((r) => r[3])}::bigint[], ${rows.map((r) => r[4])}::text[])`;
    }
    for (let from = 0; from < outcomes.length; from += chunk) {
      const rows = outcomes.slice(from, from + chunk);
      await sql`INSERT INTO decision_outcomes (request_id, question_id, truth, recorded_at)
        SELECT * FROM unnest(${rows.map((r) => r[0])}::text[], ${rows.map((r) => r[1])}::text[],
          ${rows.map((r) => r[2])}::text[], ${rows.map((r) => r[3])}::bigint[])`;
    }
    await sql.unsafe('VACUUM ANALYZE decision_records');
    await sql.unsafe('VACUUM ANALYZE decision_outcomes');
  });
}

const p99 = (times: number[]) => [...times].sort((a, b) => a - b)[Math.floor(times.length * 0.99)] as number;

interface Stretch {
  seconds: number;
  requests: number;
  rps: number;
  p99Ms: number;
}

/** The refits and the callers beside them on one store. */
async function measure(store: string) {
  const dir = mkdtempSync(join(tmpdir(), 'dg-bench-refit-'));
  const database = store === 'postgres' ? await createBenchDatabase() : undefined;
  const dbPath = join(dir, 'gateway.db');
  // The key first: opening the store to make it migrates the database.
  const key = await createBenchKey(database?.url ?? dbPath);
  if (database) await seedPostgres(database.url, history());
  else seedSqlite(dbPath, history());
  const config = join(dir, 'gateway.yaml');
  writeFileSync(
    config,
    'upstreams:\n  cheap: { kind: lexical }\nroutes:\n  default: { upstreams: [cheap] }\n',
  );
  const gateway = await startProcess(`gateway (refit, ${store})`, 'apps/gateway/src/main.ts', {
    DATABASE_URL: database?.url ?? `file:${dbPath}`,
    GATEWAY_CONFIG: config,
    RATE_LIMIT_PER_MINUTE: '0',
    ADMIN_TOKEN,
    CALIBRATION_REFIT_MINUTES: '0',
    LOG_LEVEL: 'info',
    PORT: '0',
  });
  const url = new URL(gateway.url);
  const callers = new Pool(url.origin, { connections: CALLERS });
  const operator = new Pool(url.origin, { connections: 1 });
  const body = JSON.stringify(BENCH_REQUEST);
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${key}` };
  /** The callers, each posting one request after another, for at least `seconds` and until `until()`. */
  const call = async (seconds: number, until: () => boolean): Promise<Stretch> => {
    const started = performance.now();
    const times: number[] = [];
    const go = () => performance.now() - started < seconds * 1000 || !until();
    await Promise.all(
      Array.from({ length: CALLERS }, async () => {
        while (go()) times.push(await timedRequest(callers, headers, body));
      }),
    );
    const elapsed = (performance.now() - started) / 1000;
    return { seconds: elapsed, requests: times.length, rps: times.length / elapsed, p99Ms: p99(times) };
  };
  const refit = async () => {
    const started = performance.now();
    const response = await operator.request({
      path: '/admin/calibration/refit',
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    const text = await response.body.text();
    if (response.statusCode !== 200) throw new Error(`the refit got ${response.statusCode}: ${text}`);
    return {
      seconds: (performance.now() - started) / 1000,
      maps: (JSON.parse(text).data.maps as unknown[]).length,
    };
  };
  try {
    await call(3, () => true);
    // The first refit starts the refit thread: timed apart.
    const first = await refit();
    const rounds: { refitSeconds: number; quiet: Stretch; refitting: Stretch }[] = [];
    let last = first.seconds;
    for (let round = 0; round < 3; round++) {
      // As long a stretch as the last refit took, just before this one.
      const quiet = await call(Math.max(AT_LEAST_SECONDS, last), () => true);
      let done = false;
      const running = refit().then((result) => {
        done = true;
        return result;
      });
      const refitting = await call(0, () => done);
      const { seconds } = await running;
      last = seconds;
      rounds.push({ refitSeconds: seconds, quiet, refitting });
    }
    const share = (r: (typeof rounds)[number]) => r.refitting.rps / r.quiet.rps;
    const middle = [...rounds].sort((a, b) => share(a) - share(b))[1] as (typeof rounds)[number];
    return {
      store,
      outcomes: OUTCOMES,
      callers: CALLERS,
      firstRefitSeconds: Number(first.seconds.toFixed(2)),
      maps: first.maps,
      refitSeconds: rounds.map((r) => Number(r.refitSeconds.toFixed(2))),
      throughputShares: rounds.map((r) => Number(share(r).toFixed(2))),
      p99RisesMs: rounds.map((r) => Number((r.refitting.p99Ms - r.quiet.p99Ms).toFixed(1))),
      middle: {
        quietRps: Math.round(middle.quiet.rps),
        refittingRps: Math.round(middle.refitting.rps),
        quietP99Ms: Number(middle.quiet.p99Ms.toFixed(1)),
        refittingP99Ms: Number(middle.refitting.p99Ms.toFixed(1)),
      },
    };
  } finally {
    await callers.close();
    await operator.close();
    await gateway.stop();
    await database?.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}

for (const store of STORES) console.log(JSON.stringify(await measure(store), null, 2));
