// pnpm bench: one run, side by side, on this machine. See docs/performance.md.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import {
  createBenchDatabase,
  createBenchKey,
  createBenchKeys,
  postgresGatewayEnv,
  THREE_BUDGETS,
  updateDocSection,
  vacuumBenchDatabase,
} from './bench-support.ts';
import { measureInTurn, type Reading, range, ratioAgainst, type Shares, sharesOf } from './in-turn.ts';
import {
  geminiTarget,
  imagesGatewayConfig,
  type LoadResult,
  loadCount,
  mcpDecideTarget,
  measureLoad,
  nativeTarget,
  openAiTarget,
  photoTarget,
  type Target,
  trpcTarget,
} from './load.ts';
import { type Running, repoRoot, startProcess } from './processes.ts';
import { BENCH_REQUEST } from './request.ts';
import { runUsageVolumeBench } from './usage-volume.ts';

const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 3);
const CONCURRENCY = [1, 16, 64];
/** The rows with an upstream that takes 100 ms, as a model does: many requests in flight at once. */
const SLOW_UPSTREAM_MS = 100;
const SLOW_CONCURRENCY = [256, 1024];
const SLOW = `(${SLOW_UPSTREAM_MS} ms upstream)`;
const LEAK_REQUESTS = Number(process.env.BENCH_LEAK_REQUESTS ?? 100_000);
const SEQUENTIAL_REQUESTS = Number(process.env.BENCH_SEQUENTIAL_REQUESTS ?? 3000);
const LEAK_WARMUP_REQUESTS = Math.ceil(LEAK_REQUESTS / 5);
/** The load spread over this many keys, in the "64 keys" rows. */
const SPREAD_KEYS = 64;
/**
 * The bars at c=64 (REST to the relay, a door to REST, budgets, tracing, PostgreSQL to SQLite) are
 * read from rounds taken in turn (in-turn.ts), not from their cells, which a shared machine can
 * move apart in the minute between them.
 */
const TURN_ROUNDS = Number(process.env.BENCH_TURN_ROUNDS ?? 4);
const TURN_SECONDS = Number(process.env.BENCH_TURN_SECONDS ?? 3);
const TURN_CONNECTIONS = 64;
/**
 * The bars with the 100 ms upstream are read in turn too, the relay on it and the gateway, at each
 * of their concurrencies. Each round opens its connections anew (1,024 take a saturated gateway a
 * while to accept), so its rounds last longer.
 */
const SLOW_TURN_SECONDS = Math.max(TURN_SECONDS, 5);
/** One target's share of a reference's req/s, taken in turn with `connections` connections each. */
type TurnShare = { target: string; reference: string; connections: number } & Shares;
/**
 * The shares read in turn, [held, held to], in groups: a group's rows (every name its pairs hold)
 * take their rounds together.
 */
const TURN_GROUPS: [string, string][][] = [
  [
    ['gateway REST', 'baseline relay'],
    ['relay + store', 'baseline relay'],
    ['gateway REST', 'relay + store'],
  ],
  [
    ['gateway tRPC', 'gateway REST'],
    ['gateway /native', 'gateway REST'],
    ['gateway OpenAI door', 'gateway REST'],
    ['gateway Gemini door', 'gateway REST'],
    ['gateway MCP decide', 'gateway REST'],
    ['gateway REST 3 budgets', 'gateway REST'],
  ],
  [
    ['gateway REST traced', 'gateway REST'],
    ['gateway REST sampled 10%', 'gateway REST'],
  ],
  [
    ['gateway PG+Redis', 'gateway REST'],
    ['gateway PG+Redis 3 budgets', 'gateway PG+Redis'],
  ],
  [[`gateway PG+Redis ${SPREAD_KEYS} keys`, `gateway REST ${SPREAD_KEYS} keys`]],
];
/**
 * BENCH_ONLY=name,name: measure only the targets whose names contain one of these (the baseline
 * relay always, for the ratios), and write nothing: for trying a change. Bars need every row.
 */
const ONLY = process.env.BENCH_ONLY?.split(',')
  .map((name) => name.trim())
  .filter(Boolean);

interface Measurement extends LoadResult {
  target: string;
  concurrency: number;
  /** The 100 ms upstream's rows: resident set per request in flight, in KB. */
  rssPerRequestKb?: number;
}

async function load(
  target: Target,
  concurrency: number,
  seconds: number,
  options: { slowResponses?: boolean } = {},
): Promise<Measurement> {
  return { target: target.name, concurrency, ...(await measureLoad(target, concurrency, seconds, options)) };
}

/**
 * p50/p99 at concurrency 1 with a microsecond clock: one keep-alive connection, one request after
 * another. autocannon rounds latencies to whole milliseconds, too coarse for a 1 ms bar.
 */
async function sequentialLatency(
  target: Target,
  count: number,
): Promise<{ p50: number; p99: number; errors: number }> {
  const url = new URL(target.url);
  const pool = new Pool(url.origin, { connections: 1 });
  const headers = { 'content-type': 'application/json', ...target.headers };
  const keyed = (i: number) =>
    target.keys ? { ...headers, authorization: `Bearer ${target.keys[i % target.keys.length]}` } : headers;
  const times: number[] = [];
  let errors = 0;
  try {
    for (let i = 0; i < count + 200; i++) {
      const started = performance.now();
      const response = await pool.request({
        path: url.pathname,
        method: 'POST',
        headers: keyed(i),
        body: target.eachBody?.() ?? target.body,
      });
      await response.body.text();
      if (response.statusCode !== 200) errors++;
      if (i >= 200) times.push(performance.now() - started); // the first 200 warm up
    }
  } finally {
    await pool.close();
  }
  times.sort((a, b) => a - b);
  const at = (q: number) =>
    Number((times[Math.min(times.length - 1, Math.floor(q * times.length))] as number).toFixed(2));
  return { p50: at(0.5), p99: at(0.99), errors };
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'dg-bench-'));
  const processes: Running[] = [];
  const database = await createBenchDatabase();
  const started = async (...args: Parameters<typeof startProcess>) => {
    const running = await startProcess(...args);
    processes.push(running);
    return running;
  };
  try {
    const body = JSON.stringify(BENCH_REQUEST);
    const upstream = await started('stand-in upstream', 'bench/src/stand-in-upstream.ts');
    const relay = await started('baseline relay', 'bench/src/baseline-relay.ts', {
      UPSTREAM_URL: upstream.url,
    });

    // A real key with ample credits, so reservations and debits happen as in production. The
    // relay with accounting gets its own database file and key, so no process shares a WAL.
    const [apiKey, ...restKeys] = await createBenchKeys(join(dir, 'gateway.db'), 1 + SPREAD_KEYS);
    if (apiKey === undefined) throw new Error('no bench key was made');
    // A key with three hard budgets (docs/budgets.md), limits no request reaches: what checking and
    // counting them costs. The same on PostgreSQL below.
    const [budgetedKey] = await createBenchKeys(join(dir, 'gateway.db'), 1, THREE_BUDGETS);
    const auth = { authorization: `Bearer ${apiKey}` };
    const relayKey = await createBenchKey(join(dir, 'relay.db'));
    const storeRelay = await started('relay + store', 'bench/src/baseline-relay.ts', {
      UPSTREAM_URL: upstream.url,
      RELAY_DATABASE: join(dir, 'relay.db'),
    });
    const databaseUrl = `file:${join(dir, 'gateway.db')}`;
    const gatewayEnv = {
      DATABASE_URL: databaseUrl,
      RATE_LIMIT_PER_MINUTE: '0',
      LOG_LEVEL: 'info',
      PORT: '0',
    };
    const gateway = await started('gateway (systemone)', 'apps/gateway/src/main.ts', {
      ...gatewayEnv,
      UPSTREAM: 'systemone',
      UPSTREAM_BASE_URL: upstream.url,
    });
    // The same REST gateway with every request traced (docs/tracing.md) to a collector that
    // keeps nothing, in protobuf (the default); its own file and key.
    const sink = await started('OTLP sink', 'bench/src/otlp-sink.ts');
    /** A REST gateway of its own file and key, exporting its sampled traces to the sink. */
    const tracedGateway = async (file: string, label: string, sampler: Record<string, string>) => {
      const key = await createBenchKey(join(dir, file));
      const server = await started(label, 'apps/gateway/src/main.ts', {
        ...gatewayEnv,
        DATABASE_URL: `file:${join(dir, file)}`,
        UPSTREAM: 'systemone',
        UPSTREAM_BASE_URL: upstream.url,
        OTEL_EXPORTER_OTLP_ENDPOINT: sink.url,
        ...sampler,
      });
      return { key, server };
    };
    const { key: tracedKey, server: traced } = await tracedGateway('traced.db', 'gateway (traced)', {
      OTEL_TRACES_SAMPLER: 'always_on',
    });
    // And at the sampling docs/tracing.md recommends for production: one trace in ten.
    const { key: sampledKey, server: sampled } = await tracedGateway(
      'sampled.db',
      'gateway (traced at 10%)',
      {
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.1',
      },
    );
    // Images (docs/images.md): a gateway whose upstream takes them, sent one 1 MB JPEG a request as
    // multipart (REST's JSON keeps 32 KiB). Its own file, key and configuration. Each image counts
    // five times its size against IMAGE_BYTES_IN_FLIGHT: the default 256 MiB would refuse (503) some
    // of 64 at once whenever more than about 51 are inside the gateway, as on a slow machine. The row
    // measures serving them; the cap has its own bench (bench:images).
    const imagesConfig = join(dir, 'images.yaml');
    writeFileSync(imagesConfig, imagesGatewayConfig(upstream.url));
    const imagesKey = await createBenchKey(join(dir, 'images.db'));
    const imaged = await started('gateway (images)', 'apps/gateway/src/main.ts', {
      ...gatewayEnv,
      DATABASE_URL: `file:${join(dir, 'images.db')}`,
      GATEWAY_CONFIG: imagesConfig,
      IMAGE_BYTES_IN_FLIGHT: String(512 * 2 ** 20),
    });
    // An upstream that answers after 100 ms, with its own relay and REST gateway (file and key).
    const slowUpstream = await started('stand-in upstream (100 ms)', 'bench/src/stand-in-upstream.ts', {
      DELAY_MS: String(SLOW_UPSTREAM_MS),
    });
    const slowRelay = await started('baseline relay (100 ms)', 'bench/src/baseline-relay.ts', {
      UPSTREAM_URL: slowUpstream.url,
    });
    const slowKey = await createBenchKey(join(dir, 'slow.db'));
    const slowGateway = await started('gateway (100 ms upstream)', 'apps/gateway/src/main.ts', {
      ...gatewayEnv,
      DATABASE_URL: `file:${join(dir, 'slow.db')}`,
      UPSTREAM: 'systemone',
      UPSTREAM_BASE_URL: slowUpstream.url,
    });
    const lexical = await started('gateway (lexical)', 'apps/gateway/src/main.ts', {
      ...gatewayEnv,
      UPSTREAM: 'lexical',
    });
    // The decision cache: the same request again and again, so every request after the first is a
    // hit (a rate-limit check and a usage record, no reservation, no upstream). Its own file and key.
    const cacheKey = await createBenchKey(join(dir, 'cache.db'));
    const cached = await started('gateway (cache hits)', 'apps/gateway/src/main.ts', {
      ...gatewayEnv,
      DATABASE_URL: `file:${join(dir, 'cache.db')}`,
      UPSTREAM: 'systemone',
      UPSTREAM_BASE_URL: upstream.url,
      CACHE_TTL_SECONDS: '3600',
    });
    // The multi-instance store: PostgreSQL with Redis rate limits.
    const [pgKey, ...pgKeys] = await createBenchKeys(database.url, 1 + SPREAD_KEYS);
    const [pgBudgetedKey] = await createBenchKeys(database.url, 1, THREE_BUDGETS);
    const pgEnv = postgresGatewayEnv(database.url, upstream.url);
    const pgGateway = await started('gateway (PostgreSQL)', 'apps/gateway/src/main.ts', pgEnv);
    const pgSecond = await started('gateway (PostgreSQL, 2nd)', 'apps/gateway/src/main.ts', pgEnv);
    const pgAuth = { authorization: `Bearer ${pgKey}` };

    // The MCP door: one session, opened as an MCP client opens it.
    const mcp = await mcpDecideTarget('gateway MCP decide', gateway, apiKey);

    const all: Target[] = [
      { name: 'baseline relay', server: relay, url: `${relay.url}/v1/systemone`, headers: {}, body },
      {
        name: 'relay + store',
        server: storeRelay,
        url: `${storeRelay.url}/v1/systemone`,
        headers: { authorization: `Bearer ${relayKey}` },
        body,
      },
      { name: 'gateway REST', server: gateway, url: `${gateway.url}/v1/systemone`, headers: auth, body },
      {
        name: 'gateway REST traced',
        server: traced,
        url: `${traced.url}/v1/systemone`,
        headers: { authorization: `Bearer ${tracedKey}` },
        body,
      },
      {
        name: 'gateway REST sampled 10%',
        server: sampled,
        url: `${sampled.url}/v1/systemone`,
        headers: { authorization: `Bearer ${sampledKey}` },
        body,
      },
      {
        name: 'gateway REST 3 budgets',
        server: gateway,
        url: `${gateway.url}/v1/systemone`,
        headers: { authorization: `Bearer ${budgetedKey}` },
        body,
      },
      await photoTarget('gateway REST 1 MB JPEG', imaged, imagesKey),
      await trpcTarget('gateway tRPC', gateway, apiKey),
      nativeTarget('gateway /native', gateway, apiKey),
      openAiTarget('gateway OpenAI door', gateway, apiKey),
      await geminiTarget('gateway Gemini door', gateway, apiKey),
      mcp,
      { name: 'gateway lexical', server: lexical, url: `${lexical.url}/v1/systemone`, headers: auth, body },
      {
        name: 'gateway cache hits',
        server: cached,
        url: `${cached.url}/v1/systemone`,
        headers: { authorization: `Bearer ${cacheKey}` },
        body,
      },
      {
        name: 'gateway PG+Redis',
        server: pgGateway,
        url: `${pgGateway.url}/v1/systemone`,
        headers: pgAuth,
        body,
      },
      {
        name: 'gateway PG+Redis 3 budgets',
        server: pgGateway,
        url: `${pgGateway.url}/v1/systemone`,
        headers: { authorization: `Bearer ${pgBudgetedKey}` },
        body,
      },
      {
        name: 'gateway PG+Redis ×2',
        server: pgGateway,
        url: `${pgGateway.url}/v1/systemone`,
        headers: pgAuth,
        body,
        replicas: [{ server: pgSecond, url: `${pgSecond.url}/v1/systemone` }],
      },
      // The same load spread over 64 keys: rows that do not all wait on one key's row.
      {
        name: `gateway REST ${SPREAD_KEYS} keys`,
        server: gateway,
        url: `${gateway.url}/v1/systemone`,
        headers: {},
        keys: restKeys,
        body,
      },
      {
        name: `gateway PG+Redis ${SPREAD_KEYS} keys`,
        server: pgGateway,
        url: `${pgGateway.url}/v1/systemone`,
        headers: {},
        keys: pgKeys,
        body,
      },
    ];
    const targets = all.filter(
      (t) => ONLY === undefined || t.name === 'baseline relay' || ONLY.some((name) => t.name.includes(name)),
    );
    const slowBase: Target = {
      name: `baseline relay ${SLOW}`,
      server: slowRelay,
      url: `${slowRelay.url}/v1/systemone`,
      headers: {},
      body,
    };
    const slowGateways: Target[] = [
      {
        name: `gateway REST ${SLOW}`,
        server: slowGateway,
        url: `${slowGateway.url}/v1/systemone`,
        headers: { authorization: `Bearer ${slowKey}` },
        body,
      },
    ];
    // Its own relay, measured whenever a row on the 100 ms upstream is.
    const slowMeasured = slowGateways.filter(
      (t) => ONLY === undefined || ONLY.some((name) => t.name.includes(name)),
    );
    const slowTargets = slowMeasured.length > 0 ? [slowBase, ...slowMeasured] : [];

    // The PG+Redis rows share one database: each starts from a vacuumed one (vacuumBenchDatabase).
    const onPgStore = new Set([pgGateway, pgSecond]);
    const measurements: Measurement[] = [];
    for (const concurrency of CONCURRENCY) {
      for (const target of targets) {
        if (onPgStore.has(target.server)) await vacuumBenchDatabase(database.url);
        await load(target, concurrency, WARMUP);
        const m = await load(target, concurrency, DURATION);
        if (concurrency === 1) {
          const latency = await sequentialLatency(target, SEQUENTIAL_REQUESTS);
          Object.assign(m, latency, { errors: m.errors + latency.errors });
        }
        measurements.push(m);
        process.stderr.write(
          `${target.name.padEnd(16)} c=${String(concurrency).padEnd(3)} ${m.rps.toFixed(0).padStart(6)} req/s  p50 ${m.p50} ms  p99 ${m.p99} ms  ${m.cpuUsPerRequest.toFixed(0)} CPU µs/req  errors ${m.errors}${m.failedAs ? ` (${m.failedAs})` : ''}\n`,
        );
      }
    }

    // The bars at c=64, each group's targets in turn, so that a bar's two rows meet the same machine.
    const named = (name: string) => targets.find((t) => t.name === name);
    const turnShares: TurnShare[] = [];
    for (const group of TURN_GROUPS) {
      const pairs = group.filter((pair) => pair.every((name) => named(name) !== undefined));
      if (pairs.length === 0) continue; // a partial run (BENCH_ONLY) without this group's rows
      const members = [...new Set(pairs.flat())].map((name) => named(name) as Target);
      // Each round of a PostgreSQL group starts from a vacuumed database, as each of its cells did.
      const beforeRound = members.some((t) => onPgStore.has(t.server))
        ? () => vacuumBenchDatabase(database.url)
        : undefined;
      await beforeRound?.();
      for (const target of members) await load(target, TURN_CONNECTIONS, WARMUP);
      const readings = await measureInTurn(members, {
        rounds: TURN_ROUNDS,
        seconds: TURN_SECONDS,
        connections: TURN_CONNECTIONS,
        ...(beforeRound && { beforeRound }),
      });
      for (const [target, reference] of pairs) {
        const shares = sharesOf(readings.get(target) as Reading[], readings.get(reference) as Reading[]);
        turnShares.push({ target, reference, connections: TURN_CONNECTIONS, ...shares });
        process.stderr.write(
          `in turn  ${target} ${shares.rps.toFixed(0)} req/s ${shares.cpu.toFixed(0)} CPU µs/req: ${shares.rpsShare.toFixed(2)}× ${reference} (${range(shares.rpsShareRange)})\n`,
        );
      }
    }

    // The 100 ms upstream: throughput, latency and the resident set per request in flight (the
    // highest RSS sampled during the cell, less the RSS before it, over the concurrency).
    for (const concurrency of SLOW_CONCURRENCY) {
      for (const target of slowTargets) {
        await load(target, concurrency, WARMUP);
        const m = await load(target, concurrency, DURATION, { slowResponses: true });
        const measured = { ...m, rssPerRequestKb: m.rssRise / 1024 / concurrency };
        measurements.push(measured);
        process.stderr.write(
          `${target.name.padEnd(16)} c=${String(concurrency).padEnd(4)} ${m.rps.toFixed(0).padStart(6)} req/s  p50 ${m.p50} ms  p99 ${m.p99} ms  ${m.cpuUsPerRequest.toFixed(0)} CPU µs/req  ${measured.rssPerRequestKb.toFixed(0)} KB/request in flight  over 1 s ${m.overOneSecond?.responses} (first on a connection ${m.overOneSecond?.firstOnConnection})  errors ${m.errors}${m.failedAs ? ` (${m.failedAs})` : ''}\n`,
        );
      }
      // Its bar: the gateway's req/s over the relay's, round by round, as the bars at c=64.
      if (slowMeasured.length === 0) continue;
      const readings = await measureInTurn(slowTargets, {
        rounds: TURN_ROUNDS,
        seconds: SLOW_TURN_SECONDS,
        connections: concurrency,
      });
      for (const target of slowMeasured) {
        const shares = sharesOf(
          readings.get(target.name) as Reading[],
          readings.get(slowBase.name) as Reading[],
        );
        turnShares.push({
          target: target.name,
          reference: slowBase.name,
          connections: concurrency,
          ...shares,
        });
        process.stderr.write(
          `in turn  ${target.name} c=${concurrency} ${shares.rps.toFixed(0)} req/s ${shares.cpu.toFixed(0)} CPU µs/req: ${shares.rpsShare.toFixed(2)}× the relay (${range(shares.rpsShareRange)})\n`,
        );
      }
    }

    if (ONLY !== undefined) {
      process.stdout.write('\nBENCH_ONLY: a partial run; nothing written.\n');
      return;
    }

    // Memory: RSS of the REST gateway before and after LEAK_REQUESTS more requests. The gateway
    // sat idle while the lexical one was measured, and V8 shrinks an idle heap; a burst of load
    // first brings it back to its working size, so what follows measures growth, not regrowth.
    const rest = targets.find((t) => t.name === 'gateway REST') as Target;
    await loadCount(rest, 64, LEAK_WARMUP_REQUESTS);
    const rssBefore = gateway.rss();
    const leakErrors = await loadCount(rest, 64, LEAK_REQUESTS);
    const rssAfter = gateway.rss();

    const report = buildReport(measurements, turnShares, {
      rssBefore,
      rssAfter,
      requests: LEAK_REQUESTS,
      warmupRequests: LEAK_WARMUP_REQUESTS,
      errors: leakErrors,
    });
    writeFileSync(join(repoRoot, 'bench/results/latest.json'), `${JSON.stringify(report, null, 2)}\n`);
    const table = renderTable(report);
    process.stdout.write(`\n${table}\n`);
    updateDocSection('performance.md', 'bench', table);
    if (report.errors > 0) process.exitCode = 1;
    // Usage at any volume: a month of history on both stores (BENCH_USAGE=0 leaves it out).
    if (process.env.BENCH_USAGE !== '0') {
      const usage = await runUsageVolumeBench();
      process.stdout.write(`\n${usage}\n`);
      if (!process.env.BENCH_USAGE_RECORDS) updateDocSection('usage.md', 'bench-usage', usage);
    }
  } finally {
    for (const running of processes.reverse()) await running.stop();
    await database.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}

function buildReport(
  measurements: Measurement[],
  turnShares: TurnShare[],
  memory: { rssBefore: number; rssAfter: number; requests: number; warmupRequests: number; errors: number },
) {
  const at = (target: string, c: number) =>
    measurements.find((m) => m.target === target && m.concurrency === c) as Measurement;
  const rows = measurements.map((m) => {
    const base = at(m.target.endsWith(SLOW) ? `baseline relay ${SLOW}` : 'baseline relay', m.concurrency);
    return {
      ...m,
      throughputRatio: m.rps / base.rps,
      addedP50Ms: m.p50 - base.p50,
      addedP99Ms: m.p99 - base.p99,
    };
  });
  const ratio = (t: string, c: number) =>
    rows.find((r) => r.target === t && r.concurrency === c) as (typeof rows)[number];
  const rssGrowthMb = (memory.rssAfter - memory.rssBefore) / 2 ** 20;
  /** `target`'s req/s over `reference`'s, taken in turn (at c=64 unless said). */
  const share = (target: string, reference: string, connections = TURN_CONNECTIONS) => {
    const taken = turnShares.find(
      (s) => s.target === target && s.reference === reference && s.connections === connections,
    );
    if (taken === undefined)
      throw new Error(`no share of ${target} to ${reference} was taken in turn at c=${connections}`);
    return taken;
  };
  /** A figure held to at least `least`. */
  const atLeast = (value: number, least: number) => ({
    value,
    least,
    bar: `≥ ${least}`,
    met: value >= least,
  });
  /** A bar between two rows: that share, held to at least `least`. */
  const shareBar = (target: string, reference: string, least: number, connections?: number) => {
    const { rpsShare, rpsShareRange } = share(target, reference, connections);
    return { ...atLeast(rpsShare, least), range: rpsShareRange };
  };
  /** Every door is held to 0.9× REST's throughput at c=64 on the same gateway. */
  const doorVsRest = (door: string) => shareBar(door, 'gateway REST', 0.9);
  const targets = {
    restThroughputAt64: shareBar('gateway REST', 'baseline relay', 0.5),
    slowAt256: shareBar(`gateway REST ${SLOW}`, `baseline relay ${SLOW}`, 0.9, 256),
    slowAt1024: shareBar(`gateway REST ${SLOW}`, `baseline relay ${SLOW}`, 0.75, 1024),
    slowAddedP99Ms: {
      value: Math.max(
        ratio(`gateway REST ${SLOW}`, 256).addedP99Ms,
        ratio(`gateway REST ${SLOW}`, 1024).addedP99Ms,
      ),
      bar: '≤ 50 ms',
      met:
        Math.max(
          ratio(`gateway REST ${SLOW}`, 256).addedP99Ms,
          ratio(`gateway REST ${SLOW}`, 1024).addedP99Ms,
        ) <= 50,
    },
    slowRssPerRequestKb: {
      value: ratio(`gateway REST ${SLOW}`, 256).rssPerRequestKb ?? 0,
      bar: '≤ 150 KB',
      met: (ratio(`gateway REST ${SLOW}`, 256).rssPerRequestKb ?? 0) <= 150,
    },
    addedP99At1Ms: {
      value: ratio('gateway REST', 1).addedP99Ms,
      bar: '≤ 1 ms',
      met: ratio('gateway REST', 1).addedP99Ms <= 1,
    },
    addedP99At64Ms: {
      value: ratio('gateway REST', 64).addedP99Ms,
      bar: '≤ 5 ms',
      met: ratio('gateway REST', 64).addedP99Ms <= 5,
    },
    rssGrowthMb: { value: rssGrowthMb, bar: '< 10 MB', met: rssGrowthMb < 10 },
    trpcVsRestAt64: doorVsRest('gateway tRPC'),
    nativeVsRestAt64: doorVsRest('gateway /native'),
    openAiVsRestAt64: doorVsRest('gateway OpenAI door'),
    geminiVsRestAt64: doorVsRest('gateway Gemini door'),
    mcpVsRestAt64: doorVsRest('gateway MCP decide'),
    tracedVsRestAt64: shareBar('gateway REST traced', 'gateway REST', 0.7),
    sampledVsRestAt64: shareBar('gateway REST sampled 10%', 'gateway REST', 0.95),
    postgresVsSqliteAt64: shareBar('gateway PG+Redis', 'gateway REST', 0.7),
    postgresVsSqliteSpreadAt64: shareBar(
      `gateway PG+Redis ${SPREAD_KEYS} keys`,
      `gateway REST ${SPREAD_KEYS} keys`,
      0.7,
    ),
    budgetsVsRestAt64: shareBar('gateway REST 3 budgets', 'gateway REST', 0.9),
    postgresBudgetsAt64: shareBar('gateway PG+Redis 3 budgets', 'gateway PG+Redis', 0.9),
    postgresAddedP50At1Ms: {
      value: ratio('gateway PG+Redis', 1).p50 - ratio('gateway REST', 1).p50,
      bar: '≤ 1.5 ms',
      met: ratio('gateway PG+Redis', 1).p50 - ratio('gateway REST', 1).p50 <= 1.5,
    },
  };
  // Not bars: where the per-request storage work the API requires alone puts the ceiling, and how close
  // the gateway comes to it.
  const floors = {
    storeRelayVsBaselineAt64: share('relay + store', 'baseline relay').rpsShare,
    restVsStoreRelayAt64: share('gateway REST', 'relay + store').rpsShare,
    twoInstancesVsOneAt64: ratio('gateway PG+Redis ×2', 64).rps / ratio('gateway PG+Redis', 64).rps,
  };
  return {
    date: new Date().toISOString(),
    machine: {
      cores: cpus().length,
      cpu: cpus()[0]?.model ?? 'unknown',
      node: process.version,
      platform: process.platform,
    },
    durationSeconds: DURATION,
    warmupSeconds: WARMUP,
    rows,
    inTurn: {
      rounds: TURN_ROUNDS,
      seconds: TURN_SECONDS,
      slowSeconds: SLOW_TURN_SECONDS,
      shares: turnShares,
    },
    memory: { ...memory, rssGrowthMb },
    targets,
    floors,
    errors: rows.reduce((sum, r) => sum + r.errors, 0) + memory.errors,
  };
}

type Report = ReturnType<typeof buildReport>;

/** Where the 100 ms upstream's slowest responses came from: connections waiting to be accepted. */
function slowResponsesLine(report: Report): string {
  const said = SLOW_CONCURRENCY.map((c) => {
    const slow = report.rows.find(
      (r) => r.target === `gateway REST ${SLOW}` && r.concurrency === c,
    )?.overOneSecond;
    return slow === undefined
      ? `none counted at c=${c}`
      : `at c=${c}, ${slow.responses.toLocaleString('en')} responses took over 1 s, ${slow.firstOnConnection.toLocaleString('en')} of them the first on their connection`;
  });
  return `With the 100 ms upstream, ${said.join('; ')} (a saturated event loop accepts at most \`ACCEPTS_PER_TURN\` new connections a turn: [the tail at c=1024](#the-tail-at-c1024)).`;
}

function renderTable(report: Report): string {
  const lines = [
    `Measured ${report.date.slice(0, 10)} on ${report.machine.cores} cores (${report.machine.cpu}), Node ${report.machine.node}; ` +
      `${report.durationSeconds} s per cell after ${report.warmupSeconds} s warm-up, autocannon, all processes on this machine. ` +
      `At c=1, p50/p99 come from ${SEQUENTIAL_REQUESTS} sequential requests timed in microseconds (autocannon rounds to whole ms); ` +
      'elsewhere from autocannon. CPU µs/req is the CPU time of the serving process alone per request.',
    '',
    '| target | c | req/s | p50 ms | p99 ms | × baseline req/s | added p50 ms | added p99 ms | CPU µs/req |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...report.rows.map(
      (r) =>
        `| ${r.target} | ${r.concurrency} | ${r.rps.toFixed(0)} | ${r.p50} | ${r.p99} | ${r.throughputRatio.toFixed(2)} | ${r.addedP50Ms.toFixed(2)} | ${r.addedP99Ms.toFixed(2)} | ${r.cpuUsPerRequest.toFixed(0)} |`,
    ),
    '',
    `RSS of the REST gateway: ${(report.memory.rssBefore / 2 ** 20).toFixed(1)} MB before (after a warm-up of ${report.memory.warmupRequests.toLocaleString('en')} requests) and ${(report.memory.rssAfter / 2 ** 20).toFixed(1)} MB after ${report.memory.requests.toLocaleString('en')} more (c=64) (${report.memory.rssGrowthMb >= 0 ? '+' : ''}${report.memory.rssGrowthMb.toFixed(1)} MB).`,
    '',
    `In turn: the rows each bar holds together (REST to the relay, a door or a key's budgets to REST, tracing to none, PostgreSQL + Redis to SQLite, all at c=64; REST to the relay on the 100 ms upstream at c=256 and c=1024), measured again in ${report.inTurn.rounds} rounds of ${report.inTurn.seconds} s (${report.inTurn.slowSeconds} s on the 100 ms upstream), each group's rows one after another and every round starting with the next row; a share is a row's req/s over its reference's in the same round, the median over rounds (their lowest and highest in brackets). The cells above were measured a minute or more apart, which on a shared machine can move two rows apart by more than what one costs beside the other ([reading the bars](#reading-the-bars)).`,
    '',
    '| in turn | c | req/s | CPU µs/req | × reference req/s | × reference CPU µs | reference |',
    '| --- | ---: | ---: | ---: | ---: | ---: | --- |',
    ...report.inTurn.shares.map(
      (s) =>
        `| ${s.target} | ${s.connections} | ${s.rps.toFixed(0)} | ${s.cpu.toFixed(0)} | ${s.rpsShare.toFixed(2)} (${range(s.rpsShareRange)}) | ${s.cpuShare.toFixed(2)} | ${s.reference} |`,
    ),
    '',
    '| bar | measured | target | met |',
    '| --- | ---: | --- | --- |',
    `| REST throughput vs baseline, c=64 | ${shareOf(report.targets.restThroughputAt64)} | ${report.targets.restThroughputAt64.bar} | ${yes(report.targets.restThroughputAt64.met)} |`,
    `| REST with a 100 ms upstream vs the relay on it, c=256 | ${shareOf(report.targets.slowAt256)} | ${report.targets.slowAt256.bar} | ${yes(report.targets.slowAt256.met)} |`,
    `| REST with a 100 ms upstream vs the relay on it, c=1024 | ${shareOf(report.targets.slowAt1024)} | ${report.targets.slowAt1024.bar} | ${yes(report.targets.slowAt1024.met)} |`,
    `| added p99 with a 100 ms upstream, c=256 and c=1024 | ${report.targets.slowAddedP99Ms.value.toFixed(0)} ms | ${report.targets.slowAddedP99Ms.bar} | ${yes(report.targets.slowAddedP99Ms.met)} |`,
    `| RSS per request in flight with a 100 ms upstream, c=256 | ${report.targets.slowRssPerRequestKb.value.toFixed(0)} KB | ${report.targets.slowRssPerRequestKb.bar} | ${yes(report.targets.slowRssPerRequestKb.met)} |`,
    `| added p99, c=1 | ${report.targets.addedP99At1Ms.value.toFixed(2)} ms | ${report.targets.addedP99At1Ms.bar} | ${yes(report.targets.addedP99At1Ms.met)} |`,
    `| added p99, c=64 | ${report.targets.addedP99At64Ms.value.toFixed(1)} ms | ${report.targets.addedP99At64Ms.bar} | ${yes(report.targets.addedP99At64Ms.met)} |`,
    `| RSS growth over ${report.memory.requests.toLocaleString('en')} requests | ${report.targets.rssGrowthMb.value.toFixed(1)} MB | ${report.targets.rssGrowthMb.bar} | ${yes(report.targets.rssGrowthMb.met)} |`,
    `| tRPC vs REST throughput, c=64 | ${shareOf(report.targets.trpcVsRestAt64)} | ${report.targets.trpcVsRestAt64.bar} | ${yes(report.targets.trpcVsRestAt64.met)} |`,
    `| /native vs REST throughput, c=64 | ${shareOf(report.targets.nativeVsRestAt64)} | ${report.targets.nativeVsRestAt64.bar} | ${yes(report.targets.nativeVsRestAt64.met)} |`,
    `| OpenAI door vs REST throughput (the same 3 questions), c=64 | ${shareOf(report.targets.openAiVsRestAt64)} | ${report.targets.openAiVsRestAt64.bar} | ${yes(report.targets.openAiVsRestAt64.met)} |`,
    `| Gemini door vs REST throughput (the same 3 questions), c=64 | ${shareOf(report.targets.geminiVsRestAt64)} | ${report.targets.geminiVsRestAt64.bar} | ${yes(report.targets.geminiVsRestAt64.met)} |`,
    `| MCP decide vs REST throughput (the same 3 questions), c=64 | ${shareOf(report.targets.mcpVsRestAt64)} | ${report.targets.mcpVsRestAt64.bar} | ${yes(report.targets.mcpVsRestAt64.met)} |`,
    `| REST traced (every request, OTLP/protobuf) vs untraced throughput, c=64 | ${shareOf(report.targets.tracedVsRestAt64)} | ${report.targets.tracedVsRestAt64.bar} | ${yes(report.targets.tracedVsRestAt64.met)} |`,
    `| REST traced at 10% (parentbased_traceidratio 0.1) vs untraced throughput, c=64 | ${shareOf(report.targets.sampledVsRestAt64)} | ${report.targets.sampledVsRestAt64.bar} | ${yes(report.targets.sampledVsRestAt64.met)} |`,
    `| REST with three hard budgets on the key vs without, SQLite, c=64 | ${shareOf(report.targets.budgetsVsRestAt64)} | ${report.targets.budgetsVsRestAt64.bar} | ${yes(report.targets.budgetsVsRestAt64.met)} |`,
    `| REST with three hard budgets on the key vs without, PostgreSQL + Redis, c=64 | ${shareOf(report.targets.postgresBudgetsAt64)} | ${report.targets.postgresBudgetsAt64.bar} | ${yes(report.targets.postgresBudgetsAt64.met)} |`,
    `| PostgreSQL + Redis vs SQLite throughput, one key, c=64 | ${shareOf(report.targets.postgresVsSqliteAt64)} | ${report.targets.postgresVsSqliteAt64.bar} | ${yes(report.targets.postgresVsSqliteAt64.met)} |`,
    `| PostgreSQL + Redis vs SQLite throughput, ${SPREAD_KEYS} keys, c=64 | ${shareOf(report.targets.postgresVsSqliteSpreadAt64)} | ${report.targets.postgresVsSqliteSpreadAt64.bar} | ${yes(report.targets.postgresVsSqliteSpreadAt64.met)} |`,
    `| PostgreSQL + Redis added p50 over SQLite, c=1 | ${report.targets.postgresAddedP50At1Ms.value.toFixed(2)} ms | ${report.targets.postgresAddedP50At1Ms.bar} | ${yes(report.targets.postgresAddedP50At1Ms.met)} |`,
    '',
    `The relay doing only the storage work every request requires per request (key lookup, reservation, settlement with a usage record, through the gateway's Store) reaches ${report.floors.storeRelayVsBaselineAt64.toFixed(2)}× the bare relay at c=64; the gateway REST path reaches ${report.floors.restVsStoreRelayAt64.toFixed(2)}× of that.`,
    '',
    `"gateway MCP decide" is the same decision as a \`decide\` tool call in one MCP session of the REST gateway (the JSON-RPC envelope and its checks, the answer written out twice, as text and as structured content: see [the MCP door](#the-mcp-door)).`,
    '',
    slowResponsesLine(report),
    '',
    `"gateway PG+Redis" is the REST gateway (systemone upstream, as "gateway REST") on PostgreSQL with Redis rate limits. "${SPREAD_KEYS} keys" rows spread the same load over ${SPREAD_KEYS} keys, one after another. "×2" splits the same load over two such instances on one database and one Redis: ${report.floors.twoInstancesVsOneAt64.toFixed(2)}× one instance (CPU µs/req sums both processes; on this 2-core machine the instances, PostgreSQL, Redis, the relay and the load generator share the cores).`,
  ];
  return lines.join('\n');
}

const yes = (met: boolean) => (met ? 'yes' : '**no**');
/** A bar read in turn: its median share, and the rounds' lowest and highest. */
const shareOf = (bar: { value: number; range: [number, number]; least: number }) => {
  const value = ratioAgainst(bar.value, bar.least);
  return `${value}× (${range(bar.range, value.length - value.indexOf('.') - 1)})`;
};

await main();
