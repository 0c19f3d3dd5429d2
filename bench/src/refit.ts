// pnpm bench:refit — what a calibration refit over 100,000 outcomes (docs/calibration-maps.md) costs
// the callers of the same instance: how long the refit takes, and a caller's p99 with and without a
// refit running beside it (three rounds, the middle rise reported). SQLite, the embedded default.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { seeded } from '@decision-gateway/gateway/testing';
import Database from 'better-sqlite3';
import { Pool } from 'undici';
import { createBenchKey, timedRequest } from './bench-support.ts';
import { startProcess } from './processes.ts';
import { BENCH_REQUEST } from './request.ts';

const OUTCOMES = Number(process.env.BENCH_REFIT_OUTCOMES ?? 100_000);
const ADMIN_TOKEN = 'bench-admin-token-0123456789abcdef';
const DAY = 86_400_000;
const CALLER_REQUESTS = 400;
const now = Date.now();

/**
 * Decisions of 4 nouls and 4 choices answered by one upstream over the last 20 days, each with its 8
 * outcomes, written as the gateway keeps them (outcomes/decision-record.ts).
 */
function seed(path: string) {
  const db = new Database(path);
  const random = seeded(7);
  const decisions = Math.ceil(OUTCOMES / 8);
  const insertDecision = db.prepare(
    'INSERT INTO decision_records (request_id, key_id, route, at, reused, questions) VALUES (?, ?, ?, ?, NULL, ?)',
  );
  const insertOutcome = db.prepare(
    'INSERT INTO decision_outcomes (request_id, question_id, truth, recorded_at) VALUES (?, ?, ?, ?)',
  );
  db.transaction(() => {
    for (let d = 0; d < decisions; d++) {
      const at = now - 20 * DAY + Math.floor((d / decisions) * 20 * DAY);
      const questions: Record<string, unknown> = {};
      const truths: [string, string][] = [];
      for (let i = 0; i < 4; i++) {
        const p = 0.02 + 0.96 * random();
        questions[`n${i}`] = { type: 'noul', upstream: 'cheap', p };
        truths.push([`n${i}`, JSON.stringify(random() < p * 0.8)]);
        const raw = [random(), random(), random(), random()].map((x) => x ** 3 + 0.01);
        const sum = raw.reduce((s, x) => s + x, 0);
        const probabilities = raw.map((x) => x / sum);
        questions[`c${i}`] = {
          type: 'choice',
          upstream: 'cheap',
          p: probabilities,
          confidence: 0.5,
          labels: ['a', 'b', 'c', 'd'],
        };
        truths.push([`c${i}`, JSON.stringify(['a', 'b', 'c', 'd'][Math.floor(random() * 4)])]);
      }
      insertDecision.run(`req_seed_${d}`, 'key_seed', 'default', at, JSON.stringify(questions));
      for (const [id, truth] of truths) insertOutcome.run(`req_seed_${d}`, id, truth, at);
    }
  })();
  db.close();
}

const p99 = (times: number[]) => [...times].sort((a, b) => a - b)[Math.floor(times.length * 0.99)] as number;

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'dg-bench-refit-'));
  const dbPath = join(dir, 'gateway.db');
  const key = await createBenchKey(dbPath);
  seed(dbPath);
  const config = join(dir, 'gateway.yaml');
  writeFileSync(
    config,
    'upstreams:\n  cheap: { kind: lexical }\nroutes:\n  default: { upstreams: [cheap] }\n',
  );
  const gateway = await startProcess('gateway (refit)', 'apps/gateway/src/main.ts', {
    DATABASE_URL: `file:${dbPath}`,
    GATEWAY_CONFIG: config,
    RATE_LIMIT_PER_MINUTE: '0',
    ADMIN_TOKEN,
    CALIBRATION_REFIT_MINUTES: '0',
    LOG_LEVEL: 'info',
    PORT: '0',
  });
  const url = new URL(gateway.url);
  const caller = new Pool(url.origin, { connections: 1 });
  const operator = new Pool(url.origin, { connections: 1 });
  const body = JSON.stringify(BENCH_REQUEST);
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${key}` };
  const latencies = async (until: () => boolean, atLeast: number) => {
    const times: number[] = [];
    while (times.length < atLeast || !until()) times.push(await timedRequest(caller, headers, body));
    return times;
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
    await latencies(() => true, 200);
    // The first refit starts the refit thread: timed apart.
    const first = await refit();
    const rounds: { quiet: number; refitting: number; seconds: number; requests: number }[] = [];
    for (let round = 0; round < 3; round++) {
      const quiet = p99(await latencies(() => true, CALLER_REQUESTS));
      let done = false;
      const running = refit().then((result) => {
        done = true;
        return result;
      });
      const busy = await latencies(() => done, 50);
      const { seconds } = await running;
      rounds.push({ quiet, refitting: p99(busy), seconds, requests: busy.length });
    }
    const rises = rounds.map((r) => r.refitting - r.quiet).sort((a, b) => a - b);
    const middle = rounds.find((r) => r.refitting - r.quiet === rises[1]) as (typeof rounds)[number];
    console.log(
      JSON.stringify(
        {
          outcomes: OUTCOMES,
          firstRefitSeconds: Number(first.seconds.toFixed(2)),
          maps: first.maps,
          refitSeconds: rounds.map((r) => Number(r.seconds.toFixed(2))),
          quietP99Ms: Number(middle.quiet.toFixed(2)),
          refittingP99Ms: Number(middle.refitting.toFixed(2)),
          riseMs: Number((rises[1] as number).toFixed(2)),
          callerRequestsDuringRefits: rounds.map((r) => r.requests),
        },
        null,
        2,
      ),
    );
  } finally {
    await caller.close();
    await operator.close();
    await gateway.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
