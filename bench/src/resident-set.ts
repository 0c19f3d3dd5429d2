// pnpm bench:rss: does the REST gateway's resident set grow with the requests it serves?
// `pnpm bench` reads one block of 100,000 requests after a warm-up, which also reads where the
// heaps stand in their cycle. Here one gateway serves BENCH_RSS_BLOCKS blocks (6) of
// BENCH_RSS_REQUESTS (100,000) at c=64 after 20,000 to warm up, and its resident set is read after
// each: a leak climbs block after block, a heap settling steps once and holds. The gateway inherits
// the environment, so `UPSTREAM_CALL_THREAD=off pnpm bench:rss` measures it without the call thread.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchData, createBenchKey } from './bench-support.ts';
import { loadCount, restTarget } from './load.ts';
import { type Running, startProcess } from './processes.ts';

const BLOCKS = Number(process.env.BENCH_RSS_BLOCKS ?? 6);
const REQUESTS = Number(process.env.BENCH_RSS_REQUESTS ?? 100_000);
const WARMUP_REQUESTS = 20_000;
const CONNECTIONS = 64;
const MB = 2 ** 20;

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'dg-bench-rss-'));
  const processes: Running[] = [];
  const data = await benchData('sqlite', join(dir, 'gateway.db'));
  try {
    const upstream = await startProcess('stand-in upstream', 'bench/src/stand-in-upstream.ts');
    processes.push(upstream);
    const apiKey = await createBenchKey(data.location);
    const gateway = await startProcess('gateway (systemone, sqlite)', 'apps/gateway/src/main.ts', {
      ...data.gatewayEnv(upstream.url),
    });
    processes.push(gateway);
    const target = restTarget('gateway REST', gateway, apiKey);
    const warmupErrors = await loadCount(target, CONNECTIONS, WARMUP_REQUESTS);
    const warm = gateway.rss();
    process.stdout.write(
      `REST gateway, c=${CONNECTIONS}, call thread ${process.env.UPSTREAM_CALL_THREAD ?? 'when-busy'}: ${(warm / MB).toFixed(1)} MB after ${WARMUP_REQUESTS.toLocaleString('en')} requests to warm up\n`,
    );
    let errors = warmupErrors;
    const rises: number[] = [];
    for (let block = 1; block <= BLOCKS; block++) {
      errors += await loadCount(target, CONNECTIONS, REQUESTS);
      const rise = (gateway.rss() - warm) / MB;
      rises.push(rise);
      process.stdout.write(
        `after ${(block * REQUESTS).toLocaleString('en')} more: ${rise >= 0 ? '+' : ''}${rise.toFixed(1)} MB\n`,
      );
    }
    const [first = 0] = rises;
    const last = rises[rises.length - 1] ?? 0;
    process.stdout.write(
      `from the first block to the last: ${last - first >= 0 ? '+' : ''}${(last - first).toFixed(1)} MB over ${((BLOCKS - 1) * REQUESTS).toLocaleString('en')} requests\n`,
    );
    if (errors > 0) {
      process.stderr.write(`${errors} requests failed\n`);
      process.exitCode = 1;
    }
  } finally {
    for (const running of processes.reverse()) await running.stop();
    await data.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
