// pnpm bench:profile: where the gateway's CPU goes, per request, beside the bare relay's total.
// The gateway (systemone upstream, SQLite or PostgreSQL + Redis, a real key) runs at c=64 (or
// BENCH_PROFILE_CONNECTIONS, on an upstream answering after BENCH_PROFILE_UPSTREAM_MS), sampled by Linux's `perf`
// where it can run (CPU time, every thread) or else by `node --cpu-prof`; each sample is charged to
// the nearest frame on its stack that belongs to a known part of a request.
import { execFileSync, spawn } from 'node:child_process';
import {
  copyFileSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type BenchData,
  type BenchStore,
  benchData,
  benchStoreFrom,
  createBenchKey,
  updateDocSection,
} from './bench-support.ts';
import { measureLoad, QUESTION_DOORS, questionDoorFrom, restTarget, type Target } from './load.ts';
import { type Running, repoRoot, startProcess } from './processes.ts';
import {
  type CpuProfile,
  chargePerfSamples,
  chargeSamples,
  type PerfCharges,
  partsOf,
  STARTUP,
} from './profile-parts.ts';

const SECONDS = Number(process.env.BENCH_PROFILE_SECONDS ?? 15);
/**
 * BENCH_PROFILE_CONNECTIONS and BENCH_PROFILE_UPSTREAM_MS (e.g. 1024 and 100, as `pnpm bench`'s
 * slow rows) show what grows with the requests in flight; only the profile at c=64 on an upstream
 * that answers at once is written into docs/performance.md.
 */
const CONNECTIONS = Number(process.env.BENCH_PROFILE_CONNECTIONS ?? 64);
const UPSTREAM_MS = Number(process.env.BENCH_PROFILE_UPSTREAM_MS ?? 0);
/**
 * BENCH_PROFILE_DOOR=openai|mcp profiles the gateway through that door instead of REST, to see
 * what the door adds; only REST's profile is written into docs/performance.md.
 */
const DOOR = questionDoorFrom('BENCH_PROFILE_DOOR');
/**
 * BENCH_PROFILE_STORE=postgres profiles the gateway on PostgreSQL with Redis rate limits, as
 * `pnpm bench`'s PG+Redis rows run it; only the SQLite profile is written into docs/performance.md.
 */
const STORE = benchStoreFrom('BENCH_PROFILE_STORE');

/**
 * The gateway inherits this environment, so OTEL_* variables set for the profile trace its requests
 * (docs/tracing.md); such a profile is printed, never written into docs/performance.md.
 */
const TRACED = Object.keys(process.env).some((name) => name.startsWith('OTEL_EXPORTER_OTLP_'));

/**
 * V8's sampler (`--cpu-prof`) interrupts the serving thread at fixed intervals of wall time, so
 * time it spent preempted, or inside a system call while the kernel hands its bytes to the peer,
 * is charged to whatever it was doing, and the collector's helper threads are not sampled at all.
 * On 2 shared cores it gave the SQLite store 17.6–21.5 % of the gateway's CPU where CPU-time
 * sampling finds 14 % (docs/performance.md). `perf record -e cpu-clock` samples CPU time on every thread; node's
 * `--perf-basic-prof-only-functions` names the JavaScript frames. BENCH_PROFILE_SAMPLER=v8 asks
 * for V8's sampler all the same (it needs no `perf`, and keeps whole JavaScript stacks).
 */
type Sampler = 'perf' | 'v8';
const SAMPLER: Sampler =
  process.env.BENCH_PROFILE_SAMPLER === 'v8' || (process.env.BENCH_PROFILE_SAMPLER !== 'perf' && !perfWorks())
    ? 'v8'
    : 'perf';

/** Whether `perf` is installed and may sample processes here. */
function perfWorks(): boolean {
  try {
    execFileSync('perf', ['record', '-e', 'cpu-clock', '-o', '/dev/null', '--', 'true'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const PARTS = partsOf(STORE);

/** The gateway's CPU sampled by `perf` for SECONDS, while it is loaded: samples per part, of every thread and of the serving one. */
async function perfProfile(gateway: Running, dir: string): Promise<PerfCharges> {
  const data = join(dir, 'perf.data');
  const pid = String(gateway.child.pid);
  const recording = spawn(
    'perf',
    ['record', '-e', 'cpu-clock', '-F', '999', '-g', '-o', data, '-p', pid, '--', 'sleep', String(SECONDS)],
    { stdio: 'ignore' },
  );
  const recorded = new Promise<void>((resolve, reject) =>
    recording.once('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`perf record exited ${code}`)),
    ),
  );
  await recorded;
  const script = execFileSync('perf', ['script', '-i', data, '-F', 'tid,ip,sym,dso'], {
    maxBuffer: 1 << 30,
    stdio: ['ignore', 'pipe', 'ignore'],
  }).toString();
  // BENCH_PROFILE_OUT=path keeps the samples as `perf script` wrote them, for a closer look.
  if (process.env.BENCH_PROFILE_OUT) writeFileSync(process.env.BENCH_PROFILE_OUT, script);
  return chargePerfSamples(script, PARTS, gateway.child.pid as number);
}

/** Warm up, then load at CONNECTIONS: what the measured run gives, or a throw if any request failed. */
async function loadProfiled(target: Target, warmUp = true) {
  if (warmUp) await measureLoad(target, CONNECTIONS, 3);
  const result = await measureLoad(target, CONNECTIONS, SECONDS);
  if (result.errors > 0) throw new Error(`${result.errors} requests to ${target.name} failed under load`);
  return { rps: result.rps, requests: result.requests, cpuUsPerRequest: result.cpuUsPerRequest };
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'dg-profile-'));
  const processes: Running[] = [];
  let data: BenchData | undefined;
  try {
    const upstream = await startProcess('stand-in upstream', 'bench/src/stand-in-upstream.ts', {
      DELAY_MS: String(UPSTREAM_MS),
    });
    processes.push(upstream);
    const relay = await startProcess('baseline relay', 'bench/src/baseline-relay.ts', {
      UPSTREAM_URL: upstream.url,
    });
    processes.push(relay);
    data = await benchData(STORE, join(dir, 'gateway.db'));
    const apiKey = await createBenchKey(data.location);
    const profileDir = join(dir, 'profile');
    const gateway = await startProcess(
      `gateway (systemone, ${STORE})`,
      'apps/gateway/src/main.ts',
      data.gatewayEnv(upstream.url),
      SAMPLER === 'perf'
        ? ['--perf-basic-prof-only-functions']
        : ['--cpu-prof', `--cpu-prof-dir=${profileDir}`],
    );
    processes.push(gateway);

    const base = await loadProfiled(restTarget('baseline relay', relay));
    const target = await QUESTION_DOORS[DOOR].target(`gateway ${DOOR}`, gateway, apiKey);
    let gw: Awaited<ReturnType<typeof loadProfiled>>;
    let charged: Map<string, number>;
    // perf only: the serving thread's samples, a subset of `charged`.
    let serving: Map<string, number> | undefined;
    if (SAMPLER === 'perf') {
      await measureLoad(target, CONNECTIONS, 3);
      // perf samples for as long as the load runs, side by side.
      let perThread: PerfCharges;
      [gw, perThread] = await Promise.all([loadProfiled(target, false), perfProfile(gateway, dir)]);
      ({ all: charged, serving } = perThread);
      await gateway.stop();
      // The symbol map node wrote for perf.
      rmSync(join(tmpdir(), `perf-${gateway.child.pid}.map`), { force: true });
    } else {
      gw = await loadProfiled(target);
      await gateway.stop(); // the profile is written as the process exits
      // The main thread's profile is the largest (tsx's loader thread writes a small one).
      const [file] = readdirSync(profileDir)
        .map((name) => join(profileDir, name))
        .sort((a, b) => statSync(b).size - statSync(a).size);
      if (file === undefined) throw new Error('the gateway wrote no CPU profile');
      // BENCH_PROFILE_OUT=path keeps the raw profile, for Chrome DevTools or a closer look.
      if (process.env.BENCH_PROFILE_OUT) copyFileSync(file, process.env.BENCH_PROFILE_OUT);
      charged = chargeSamples(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile, PARTS);
    }
    charged.delete(STARTUP);
    serving?.delete(STARTUP);
    const sampled = [...charged.values()].reduce((sum, us) => sum + us, 0);
    // Shares come from the profile; the per-request total from the CPU time /proc measured.
    const usPerRequest = (samples: number) => (samples / sampled) * gw.cpuUsPerRequest;
    const parts = [...charged]
      .sort((a, b) => b[1] - a[1])
      .map(([part, us]) => ({
        part,
        share: us / sampled,
        usPerRequest: usPerRequest(us),
        ...(serving && { servingUsPerRequest: usPerRequest(serving.get(part) ?? 0) }),
      }));
    const servingUs = serving && usPerRequest([...serving.values()].reduce((sum, n) => sum + n, 0));
    const report = {
      date: new Date().toISOString(),
      machine: { cores: cpus().length, cpu: cpus()[0]?.model ?? 'unknown', node: process.version },
      sampler: SAMPLER,
      door: QUESTION_DOORS[DOOR].label,
      store: STORE,
      seconds: SECONDS,
      connections: CONNECTIONS,
      relay: base,
      gateway: gw,
      ...(servingUs !== undefined && { servingUsPerRequest: servingUs }),
      parts,
    };
    const table = renderProfile(report);
    process.stdout.write(`\n${table}\n`);
    if (DOOR === 'rest' && STORE === 'sqlite' && CONNECTIONS === 64 && UPSTREAM_MS === 0 && !TRACED) {
      writeFileSync(join(repoRoot, 'bench/results/profile.json'), `${JSON.stringify(report, null, 2)}\n`);
      updateDocSection('performance.md', 'profile', table);
    }
  } finally {
    for (const running of processes.reverse()) await running.stop();
    await data?.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}

function renderProfile(report: {
  date: string;
  machine: { cores: number; cpu: string; node: string };
  sampler: Sampler;
  door: string;
  store: BenchStore;
  relay: { rps: number; cpuUsPerRequest: number };
  gateway: { rps: number; cpuUsPerRequest: number };
  /** perf only: the serving thread's CPU a request, the part that limits throughput. */
  servingUsPerRequest?: number;
  parts: { part: string; share: number; usPerRequest: number; servingUsPerRequest?: number }[];
}): string {
  const serving = report.servingUsPerRequest;
  return [
    `Profiled ${report.date.slice(0, 10)} on ${report.machine.cores} cores, Node ${report.machine.node}: the gateway through ${report.door}${report.store === 'postgres' ? ' on PostgreSQL with Redis rate limits' : ''} ${report.sampler === 'perf' ? 'sampled by `perf record -e cpu-clock` (CPU time, every thread)' : 'under `node --cpu-prof` (wall time of the serving thread)'} at c=${CONNECTIONS}${UPSTREAM_MS > 0 ? `, the upstream answering after ${UPSTREAM_MS} ms,` : ''} for ${SECONDS} s ` +
      `(${report.gateway.rps.toFixed(0)} req/s, ${report.gateway.cpuUsPerRequest.toFixed(0)} µs of CPU per request with the profiler on), ` +
      `beside the baseline relay (${report.relay.rps.toFixed(0)} req/s, ${report.relay.cpuUsPerRequest.toFixed(0)} µs per request).` +
      (serving === undefined
        ? ''
        : ` Of the gateway's CPU, ${serving.toFixed(0)} µs a request (${((serving / report.gateway.cpuUsPerRequest) * 100).toFixed(0)} %) ran on its serving thread, the one that limits throughput; the rest on the call thread and the collector's helpers.`),
    '',
    serving === undefined
      ? '| part of a gateway request | share of CPU | µs per request |'
      : '| part of a gateway request | share of CPU | µs per request | of which on the serving thread |',
    serving === undefined ? '| --- | ---: | ---: |' : '| --- | ---: | ---: | ---: |',
    ...report.parts.map(
      (p) =>
        `| ${p.part} | ${(p.share * 100).toFixed(1)} % | ${p.usPerRequest.toFixed(1)} |` +
        (p.servingUsPerRequest === undefined ? '' : ` ${p.servingUsPerRequest.toFixed(1)} |`),
    ),
  ].join('\n');
}

await main();
