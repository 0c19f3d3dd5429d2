// pnpm bench:profile: where the gateway's CPU goes, per request, beside the bare relay's total.
// The gateway (systemone upstream, SQLite, a real key) runs under `node --cpu-prof` at c=64; each
// sample is charged to the nearest frame on its stack that belongs to a known part of a request.
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
import { createBenchKey, updateDocSection } from './bench-support.ts';
import { measureLoad, restTarget, type Target } from './load.ts';
import { type Running, repoRoot, startProcess } from './processes.ts';

const SECONDS = Number(process.env.BENCH_PROFILE_SECONDS ?? 15);
const CONNECTIONS = 64;

/** The parts of a request, matched against a frame's script URL; the first that matches wins. */
const PARTS: { part: string; url: RegExp }[] = [
  { part: 'SQLite store: key lookup, reserve, settle', url: /apps\/gateway\/src\/store\/|better-sqlite3/ },
  { part: 'request validation: JSON, Zod', url: /packages\/contract\/src\/|\/zod@/ },
  { part: 'answer checks', url: /packages\/questions\/src\// },
  { part: 'upstream client: undici, retries', url: /undici|apps\/gateway\/src\/upstreams\// },
  { part: 'logging: pino', url: /pino|sonic-boom|redact/ },
  { part: 'metrics: prom-client', url: /prom-client|apps\/gateway\/src\/metrics/ },
  { part: 'API key hashing', url: /apps\/gateway\/src\/auth\// },
  { part: 'envelopes', url: /apps\/gateway\/src\/http\/envelope/ },
  { part: 'evaluation core', url: /apps\/gateway\/src\/core\// },
  { part: 'Fastify', url: /fastify|find-my-way|avvio/ },
  {
    part: 'Node HTTP server, sockets',
    url: /node:_http|node:net|node:internal\/streams|node:events|node:stream/,
  },
  { part: 'start-up: module loading', url: /tsx|esbuild|node:internal\/modules/ },
];
const STARTUP = 'start-up: module loading';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** Microseconds of samples per part (idle excluded). */
function chargeSamples(profile: CpuProfile): Map<string, number> {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const partOf = new Map<number, string>();
  const chargeNode = (id: number): string => {
    const known = partOf.get(id);
    if (known !== undefined) return known;
    const name = byId.get(id)?.callFrame.functionName;
    let part = 'other JavaScript';
    if (name === '(garbage collector)') part = 'garbage collection';
    else if (name === '(idle)') part = 'idle';
    else if (name === '(program)') part = 'V8 and native, unattributed';
    else {
      for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
        const url = byId.get(at)?.callFrame.url ?? '';
        const match = PARTS.find((p) => p.url.test(url));
        if (match) {
          part = match.part;
          break;
        }
      }
    }
    partOf.set(id, part);
    return part;
  };
  const total = new Map<string, number>();
  profile.samples.forEach((id, i) => {
    const part = chargeNode(id);
    if (part !== 'idle') total.set(part, (total.get(part) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  return total;
}

/** Warm up, then load at c=64: what the measured run gives, or a throw if any request failed. */
async function loadAtSixtyFour(target: Target) {
  await measureLoad(target, CONNECTIONS, 3);
  const result = await measureLoad(target, CONNECTIONS, SECONDS);
  if (result.errors > 0) throw new Error(`${result.errors} requests to ${target.name} failed under load`);
  return { rps: result.rps, requests: result.requests, cpuUsPerRequest: result.cpuUsPerRequest };
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'dg-profile-'));
  const processes: Running[] = [];
  try {
    const upstream = await startProcess('stand-in upstream', 'bench/src/stand-in-upstream.ts');
    processes.push(upstream);
    const relay = await startProcess('baseline relay', 'bench/src/baseline-relay.ts', {
      UPSTREAM_URL: upstream.url,
    });
    processes.push(relay);
    const apiKey = await createBenchKey(join(dir, 'gateway.db'));
    const profileDir = join(dir, 'profile');
    const gateway = await startProcess(
      'gateway (systemone)',
      'apps/gateway/src/main.ts',
      {
        DATABASE_URL: `file:${join(dir, 'gateway.db')}`,
        RATE_LIMIT_PER_MINUTE: '0',
        LOG_LEVEL: 'info',
        PORT: '0',
        UPSTREAM: 'systemone',
        UPSTREAM_BASE_URL: upstream.url,
      },
      ['--cpu-prof', `--cpu-prof-dir=${profileDir}`],
    );
    processes.push(gateway);

    const base = await loadAtSixtyFour(restTarget('baseline relay', relay));
    const gw = await loadAtSixtyFour(restTarget('gateway REST', gateway, apiKey));
    await gateway.stop(); // the profile is written as the process exits

    // The main thread's profile is the largest (tsx's loader thread writes a small one).
    const [file] = readdirSync(profileDir)
      .map((name) => join(profileDir, name))
      .sort((a, b) => statSync(b).size - statSync(a).size);
    if (file === undefined) throw new Error('the gateway wrote no CPU profile');
    // BENCH_PROFILE_OUT=path keeps the raw profile, for Chrome DevTools or a closer look.
    if (process.env.BENCH_PROFILE_OUT) copyFileSync(file, process.env.BENCH_PROFILE_OUT);
    const charged = chargeSamples(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile);
    charged.delete(STARTUP);
    const sampled = [...charged.values()].reduce((sum, us) => sum + us, 0);
    // Shares come from the profile; the per-request total from the CPU time /proc measured.
    const parts = [...charged]
      .sort((a, b) => b[1] - a[1])
      .map(([part, us]) => ({
        part,
        share: us / sampled,
        usPerRequest: (us / sampled) * gw.cpuUsPerRequest,
      }));
    const report = {
      date: new Date().toISOString(),
      machine: { cores: cpus().length, cpu: cpus()[0]?.model ?? 'unknown', node: process.version },
      seconds: SECONDS,
      connections: CONNECTIONS,
      relay: base,
      gateway: gw,
      parts,
    };
    writeFileSync(join(repoRoot, 'bench/results/profile.json'), `${JSON.stringify(report, null, 2)}\n`);
    const table = renderProfile(report);
    process.stdout.write(`\n${table}\n`);
    updateDocSection('performance.md', 'profile', table);
  } finally {
    for (const running of processes.reverse()) await running.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

function renderProfile(report: {
  date: string;
  machine: { cores: number; cpu: string; node: string };
  relay: { rps: number; cpuUsPerRequest: number };
  gateway: { rps: number; cpuUsPerRequest: number };
  parts: { part: string; share: number; usPerRequest: number }[];
}): string {
  return [
    `Profiled ${report.date.slice(0, 10)} on ${report.machine.cores} cores, Node ${report.machine.node}: the REST gateway under \`node --cpu-prof\` at c=${CONNECTIONS} for ${SECONDS} s ` +
      `(${report.gateway.rps.toFixed(0)} req/s, ${report.gateway.cpuUsPerRequest.toFixed(0)} µs of CPU per request with the profiler on), ` +
      `beside the baseline relay (${report.relay.rps.toFixed(0)} req/s, ${report.relay.cpuUsPerRequest.toFixed(0)} µs per request).`,
    '',
    '| part of a gateway request | share of CPU | µs per request |',
    '| --- | ---: | ---: |',
    ...report.parts.map(
      (p) => `| ${p.part} | ${(p.share * 100).toFixed(1)} % | ${p.usPerRequest.toFixed(1)} |`,
    ),
  ].join('\n');
}

await main();
