// pnpm bench:doors: each door the bench's three questions can take, beside REST on ONE gateway
// process, in turn each round. The bars hold the doors to a share of REST's throughput; two
// processes of the same code can settle 10–20 % apart (see compare.ts), so the door's share is
// measured where that cannot enter: one process, the same store, the same warmed code. Prints its
// table and writes nothing. See docs/performance.md.
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createBenchKey, sqliteGatewayEnv } from './bench-support.ts';
import { measureInTurn, median, type Reading, range, type Shares, sharesOf } from './in-turn.ts';
import { measureLoad, QUESTION_DOORS, type QuestionDoor, type Target } from './load.ts';
import { pinServers, startProcess } from './processes.ts';

const TRIALS = Number(process.env.BENCH_DOORS_TRIALS ?? 3);
const ROUNDS = Number(process.env.BENCH_DOORS_ROUNDS ?? 4);
const SECONDS = Number(process.env.BENCH_DOORS_SECONDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_DOORS_CONNECTIONS ?? 64);
/** What the bench holds every door to, against REST (docs/performance.md). */
const BAR = 0.9;

const DOORS = Object.keys(QUESTION_DOORS) as QuestionDoor[];

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'dg-doors-'));
  const upstream = await startProcess('stand-in upstream', 'bench/src/stand-in-upstream.ts', {
    DELAY_MS: '0',
  });
  /**
   * Per door, each trial's medians over its rounds: req/s, CPU µs a request, and both as shares of
   * REST's in the same round (rounds a few seconds apart share the machine's mood; trials do not).
   */
  const trials = new Map<QuestionDoor, Shares[]>(DOORS.map((door) => [door, []]));
  let pinned = false;
  try {
    for (let trial = 0; trial < TRIALS; trial++) {
      const file = join(dir, `gateway-${trial}.db`);
      const key = await createBenchKey(file);
      const gateway = await startProcess(
        'gateway',
        'apps/gateway/src/main.ts',
        sqliteGatewayEnv(file, upstream.url),
      );
      try {
        // Unpinned by default, as `pnpm bench` runs, whose rows the doors' bar is set on.
        pinned = process.env.BENCH_DOORS_PIN === '1' && pinServers([gateway], [upstream]);
        const targets: [QuestionDoor, Target][] = [];
        for (const door of DOORS) targets.push([door, await QUESTION_DOORS[door].target(door, gateway, key)]);
        for (const [, target] of targets) await measureLoad(target, CONNECTIONS, 3); // warm-up
        const readings = await measureInTurn(
          targets.map(([, target]) => target),
          { rounds: ROUNDS, seconds: SECONDS, connections: CONNECTIONS },
        );
        const rest = readings.get('rest') as Reading[];
        for (const door of DOORS) trials.get(door)?.push(sharesOf(readings.get(door) as Reading[], rest));
        const line = DOORS.map((door) => {
          const last = trials.get(door)?.at(-1) as Shares;
          return `${door} ${last.rps.toFixed(0)} req/s ${last.cpu.toFixed(0)} µs (${last.rpsShare.toFixed(2)}× REST)`;
        });
        process.stdout.write(`trial ${trial + 1}/${TRIALS}: ${line.join(' · ')}\n`);
      } finally {
        await gateway.stop();
      }
    }
  } finally {
    await upstream.stop();
    rmSync(dir, { recursive: true, force: true });
  }

  const rows = DOORS.map((door) => {
    const each = trials.get(door) as Shares[];
    const shares = each.map((t) => t.rpsShare);
    const met = door === 'rest' ? '' : median(shares) >= BAR ? 'yes' : '**no**';
    return `| ${QUESTION_DOORS[door].label} | ${median(each.map((t) => t.rps)).toFixed(0)} | ${median(each.map((t) => t.cpu)).toFixed(0)} | ${median(shares).toFixed(2)} (${range(shares)}) | ${median(each.map((t) => t.cpuShare)).toFixed(2)} | ${met} |`;
  });
  process.stdout.write(
    [
      '',
      `${TRIALS} trials (a fresh gateway each), each ${ROUNDS} rounds of ${SECONDS} s at c=${CONNECTIONS} with the doors in turn on that one gateway; ${pinned ? 'the gateway pinned to CPU 1, the load generator and the stand-in to CPU 0' : 'not pinned'}; ${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, Node ${process.version}.`,
      '',
      `| door | req/s | CPU µs/req | × REST req/s, round by round (range over trials) | × REST CPU | ≥ ${BAR} |`,
      '| --- | ---: | ---: | ---: | ---: | --- |',
      ...rows,
      '',
    ].join('\n'),
  );
}

await main();
