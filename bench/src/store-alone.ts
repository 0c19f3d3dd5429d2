// pnpm bench:store [<git-ref>]: the SQLite store alone, without HTTP, as a request uses it: 64
// requests at a time, each a reserve, then a settle with its usage record and its decision. It
// prints the CPU a request costs the store. With a ref, the store at that ref runs beside this
// checkout's, in fresh processes taking turns: a change inside the store shows here in a minute,
// where `bench:compare` needs many trials to see the few per cent it is of a whole request.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Store } from '@decision-gateway/gateway';
import { median, range } from './in-turn.ts';
import { checkout, repoRoot } from './processes.ts';

const IN_FLIGHT = 64;
const WARM_UP = 20_000;
const BLOCK = 30_000;
const BLOCKS = 3;
/** Pairs of processes, one of each store, taking turns. */
const PAIRS = Number(process.env.BENCH_STORE_PAIRS ?? 7);
const STALE_MS = 600_000;
/** A kept decision's JSON, about the size the gateway writes for three questions (`outcomes/decision-record.ts`). */
const QUESTIONS = JSON.stringify({
  team: { type: 'choice', upstream: 'systemone', probabilities: { billing: 0.8, technical: 0.2 } },
  urgency: { type: 'score', upstream: 'systemone', probabilities: [0.1, 0.3, 0.6], levels: 3 },
  refund: { type: 'noul', upstream: 'systemone', probabilities: { true: 0.9, false: 0.1 } },
});

/** In a child process: the store of the checkout at `checkoutDir`, loaded, measured, printed as µs a request. */
async function measure(checkoutDir: string, file: string): Promise<number> {
  const module = pathToFileURL(join(checkoutDir, 'apps/gateway/src/store/sqlite/sqlite-store.ts')).href;
  const { openSqliteStore } = (await import(module)) as { openSqliteStore: (path: string) => Store };
  const store = openSqliteStore(file);
  const key = await store.createKey({
    id: 'key_bench',
    name: 'bench',
    prefix: 'dg_bench',
    hash: 'bench',
    creditsMicro: 1e15,
    rateLimitPerMinute: null,
    route: null,
    createdAt: Date.now(),
    expiresAt: null,
  });
  let requests = 0;
  const request = async () => {
    const requestId = `req_${++requests}`;
    const at = Date.now();
    const hold = await store.reserve(key.id, requestId, 10_000, at, at - STALE_MS);
    if (!hold.ok) throw new Error(`refused: ${hold.code}`);
    const entry = {
      requestId,
      keyId: key.id,
      creditsMicro: 234_000,
      inputTokens: 234,
      outputTokens: 0,
      questions: 3,
      status: 200,
      elapsedMs: 3,
      at,
      route: 'default',
      upstream: 'systemone',
      cached: false,
      tokenId: null,
      subject: null,
    };
    await store.settle(hold.reservationId, entry, at - STALE_MS, { questions: QUESTIONS, reused: null });
  };
  const run = async (count: number) => {
    let left = count;
    const caller = async () => {
      while (left-- > 0) await request();
    };
    await Promise.all(Array.from({ length: IN_FLIGHT }, caller));
  };
  await run(WARM_UP);
  const blocks: number[] = [];
  for (let i = 0; i < BLOCKS; i++) {
    const before = process.cpuUsage();
    await run(BLOCK);
    const used = process.cpuUsage(before);
    blocks.push((used.user + used.system) / BLOCK);
  }
  await store.close();
  return median(blocks);
}

/** One fresh process measuring the store at `checkoutDir`; its µs a request. */
function measured(checkoutDir: string, dir: string, label: string): number {
  const file = join(dir, `${label}.db`);
  const child = spawnSync(
    process.execPath,
    [
      '--import',
      'tsx',
      '--conditions=@decision-gateway/source',
      import.meta.filename,
      '--child',
      checkoutDir,
      file,
    ],
    { cwd: join(repoRoot, 'bench'), encoding: 'utf8' },
  );
  for (const suffix of ['', '-wal', '-shm']) rmSync(`${file}${suffix}`, { force: true });
  const us = Number(child.stdout.trim());
  if (child.status !== 0 || !Number.isFinite(us))
    throw new Error(`the store at ${checkoutDir} failed:\n${child.stderr}`);
  return us;
}

const format = (values: number[], unit: string, digits: number) =>
  `${median(values).toFixed(digits)}${unit} (${range(values, digits)})`;

async function main() {
  const [ref] = process.argv.slice(2);
  const dir = mkdtempSync(join(tmpdir(), 'dg-store-'));
  const other = ref === undefined ? undefined : join(dir, 'checkout');
  try {
    if (ref !== undefined && other !== undefined) checkout(ref, other);
    const now: number[] = [];
    const then: number[] = [];
    for (let pair = 1; pair <= PAIRS; pair++) {
      now.push(measured(repoRoot, dir, `now-${pair}`));
      let line = `pair ${pair}/${PAIRS}: this checkout ${(now.at(-1) as number).toFixed(1)} µs a request`;
      if (other !== undefined) {
        then.push(measured(other, dir, `then-${pair}`));
        line += ` · at ${ref} ${(then.at(-1) as number).toFixed(1)}`;
      }
      console.log(line);
    }
    console.log(`\nThe SQLite store alone, CPU a request (reserve, settle), ${PAIRS} processes each:`);
    console.log(`this checkout: ${format(now, ' µs', 1)}`);
    if (ref !== undefined) {
      console.log(`at ${ref}: ${format(then, ' µs', 1)}`);
      const ratios = now.map((us, i) => us / (then[i] as number));
      const less = ratios.filter((ratio) => ratio < 1).length;
      console.log(
        `this checkout beside ${ref}, pair by pair: ${format(ratios, '×', 3)}, less in ${less} of ${PAIRS}`,
      );
    }
  } finally {
    if (other !== undefined)
      spawnSync('git', ['worktree', 'remove', '--force', other], { cwd: repoRoot, stdio: 'ignore' });
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === '--child') {
  const [checkoutDir, file] = process.argv.slice(3) as [string, string];
  process.stdout.write(`${await measure(checkoutDir, file)}\n`);
} else await main();
