// pnpm bench:alloc: what a request costs the garbage collector, from V8's own GC trace. Unlike
// req/s and CPU time, the bytes allocated a request do not depend on how fast or how busy the
// machine is, so a change to the request path shows here at once. The REST gateway (systemone
// upstream, SQLite, a real key) runs with `--trace-gc-nvp` at c=64 on an upstream that answers at
// once, and at c=256 on one that answers after 100 ms, where each request lives through scavenges
// and what it holds is copied, then promoted to the old space (how many scavenges a request sees
// depends on throughput, so those two columns move between runs: compare them over several).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type BenchData,
  benchData,
  benchStoreFrom,
  createBenchKey,
  updateDocSection,
} from './bench-support.ts';
import { loadCount, QUESTION_DOORS, questionDoorFrom } from './load.ts';
import { type Running, startProcess } from './processes.ts';

/** Requests measured a row, in BLOCKS blocks; each figure a request is the median block's. */
const REQUESTS = Number(process.env.BENCH_ALLOC_REQUESTS ?? 30_000);
const BLOCKS = 3;
const BLOCK_REQUESTS = Math.ceil(REQUESTS / BLOCKS);
const WARMUP_REQUESTS = 20_000;
/** BENCH_ALLOC_DOOR=openai|mcp measures through that door; only REST's table is written into the docs. */
const DOOR = questionDoorFrom('BENCH_ALLOC_DOOR');
/** BENCH_ALLOC_STORE=postgres: on PostgreSQL with Redis rate limits; only SQLite's table is written into the docs. */
const STORE = benchStoreFrom('BENCH_ALLOC_STORE');
const SCENARIOS = [
  { name: 'fast upstream', connections: 64, upstreamMs: 0 },
  { name: '100 ms upstream', connections: 256, upstreamMs: 100 },
] as const;

/** One line of `--trace-gc-nvp`: the collection's kind, its pause, and the bytes it saw. */
interface GcLine {
  kind: string;
  pauseMs: number;
  allocated: number;
  survived: number;
  promoted: number;
}

function parseGcTrace(text: string): GcLine[] {
  const lines: GcLine[] = [];
  for (const line of text.split('\n')) {
    const kind = / gc=(\w+)/.exec(line)?.[1];
    if (kind === undefined) continue;
    const field = (name: string) => Number(new RegExp(` ${name}=([\\d.]+)`).exec(line)?.[1] ?? 0);
    lines.push({
      kind,
      pauseMs: field('pause'),
      allocated: field('allocated'),
      survived: field('new_space_survived'),
      promoted: field('promoted'),
    });
  }
  return lines;
}

interface Measured {
  scenario: string;
  connections: number;
  requests: number;
  seconds: number;
  /** KB a request: allocated, copied within the young generation, promoted to the old one. */
  allocatedKb: number;
  survivedKb: number;
  promotedKb: number;
  /** Scavenges and mark-compacts per 1,000 requests, and the share of the run spent paused in them. */
  scavenges: number;
  markCompacts: number;
  pauseShare: number;
}

async function measure(scenario: (typeof SCENARIOS)[number], dir: string): Promise<Measured> {
  const processes: Running[] = [];
  let data: BenchData | undefined;
  try {
    const upstream = await startProcess(
      `stand-in upstream (${scenario.name})`,
      'bench/src/stand-in-upstream.ts',
      {
        DELAY_MS: String(scenario.upstreamMs),
      },
    );
    processes.push(upstream);
    data = await benchData(STORE, join(dir, `${scenario.upstreamMs}.db`));
    const apiKey = await createBenchKey(data.location);
    const gateway = await startProcess(
      `gateway (${scenario.name})`,
      'apps/gateway/src/main.ts',
      data.gatewayEnv(upstream.url),
      ['--trace-gc-nvp'],
    );
    processes.push(gateway);
    // V8 writes its trace to standard output, between the log lines.
    let trace = '';
    gateway.child.stdout?.on('data', (chunk: Buffer) => {
      trace += chunk.toString();
    });
    const target = await QUESTION_DOORS[DOOR].target(`gateway ${DOOR}`, gateway, apiKey);
    if ((await loadCount(target, scenario.connections, WARMUP_REQUESTS)) > 0)
      throw new Error(`requests failed while warming up (${scenario.name})`);
    // In blocks, each summed on its own: a block where the gateway's own timers (maintenance,
    // the key cache) happened to allocate too is the one the median leaves out.
    const blocks: GcLine[][] = [];
    const started = performance.now();
    for (let block = 0; block < BLOCKS; block++) {
      const mark = trace.length;
      const failed = await loadCount(target, scenario.connections, BLOCK_REQUESTS);
      if (failed > 0) throw new Error(`${failed} requests failed under load (${scenario.name})`);
      // Each collection's line follows it: wait for the last few to be read.
      await new Promise((resolve) => setTimeout(resolve, 200));
      blocks.push(parseGcTrace(trace.slice(mark)));
    }
    const seconds = (performance.now() - started) / 1000;
    const perRequest = (pick: (line: GcLine) => number) =>
      median(blocks.map((lines) => lines.reduce((total, line) => total + pick(line), 0) / BLOCK_REQUESTS));
    const all = blocks.flat();
    const requests = BLOCKS * BLOCK_REQUESTS;
    return {
      scenario: scenario.name,
      connections: scenario.connections,
      requests,
      seconds,
      allocatedKb: perRequest((line) => line.allocated) / 1024,
      survivedKb: perRequest((line) => line.survived) / 1024,
      promotedKb: perRequest((line) => line.promoted) / 1024,
      scavenges: (all.filter((line) => line.kind === 's').length * 1000) / requests,
      markCompacts: (all.filter((line) => line.kind === 'mc').length * 1000) / requests,
      pauseShare: all.reduce((total, line) => total + line.pauseMs, 0) / 1000 / seconds,
    };
  } finally {
    for (const running of processes.reverse()) await running.stop();
    await data?.drop();
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}

function render(rows: Measured[]): string {
  return [
    `Measured ${new Date().toISOString().slice(0, 10)}, Node ${process.version}: the gateway through ${QUESTION_DOORS[DOOR].label}${STORE === 'postgres' ? ' on PostgreSQL with Redis rate limits' : ''} under \`--trace-gc-nvp\`, after ${WARMUP_REQUESTS.toLocaleString('en')} requests to warm up, ${BLOCKS} blocks of ${BLOCK_REQUESTS.toLocaleString('en')} a row; the bytes are the median block's.`,
    '',
    '| upstream | c | KB allocated a request | KB copied in the young generation | KB promoted | scavenges a 1,000 requests | mark-compacts a 1,000 requests | share of the run paused |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...rows.map(
      (row) =>
        `| ${row.scenario} | ${row.connections} | ${row.allocatedKb.toFixed(1)} | ${row.survivedKb.toFixed(1)} | ${row.promotedKb.toFixed(1)} | ${row.scavenges.toFixed(1)} | ${row.markCompacts.toFixed(2)} | ${(row.pauseShare * 100).toFixed(1)} % |`,
    ),
  ].join('\n');
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'dg-alloc-'));
  try {
    const rows: Measured[] = [];
    for (const scenario of SCENARIOS) rows.push(await measure(scenario, dir));
    const table = render(rows);
    process.stdout.write(`\n${table}\n`);
    // BENCH_ALLOC_WRITE=0 only prints (for trying a change); otherwise docs/performance.md keeps the table.
    if (DOOR === 'rest' && STORE === 'sqlite' && process.env.BENCH_ALLOC_WRITE !== '0')
      updateDocSection('performance.md', 'alloc', table);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
