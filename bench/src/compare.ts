// pnpm bench:compare <git-ref> [<git-ref>…]: this checkout's REST gateway (or another door, with
// BENCH_COMPARE_DOOR) beside the one at each <git-ref>, in one run, on one machine, against one stand-in upstream and one baseline relay. Ratios taken in
// different runs (or on different machines) move by more than the changes they are meant to show;
// side by side, round by round, they do not. See docs/performance.md.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  benchStoreFrom,
  createBenchDatabase,
  postgresGatewayEnv,
  THREE_BUDGETS,
  vacuumBenchDatabase,
} from './bench-support.ts';
import { measureInTurn, median, type Reading, range, sharesOf } from './in-turn.ts';
import {
  imagesGatewayConfig,
  measureLoad,
  photoJsonTarget,
  photoTarget,
  QUESTION_DOORS,
  restTarget,
  type Target,
} from './load.ts';
import { checkout, pinServers, type Running, repoRoot, startProcess } from './processes.ts';

/**
 * Fresh processes per trial: one Node process of the same code settles at its own speed (V8's
 * choices, hash seeds, memory layout), as much as 20 % apart from the next. Rounds within a
 * trial agree with each other; trials do not, so the verdict is the median over trials.
 */
const TRIALS = Number(process.env.BENCH_COMPARE_TRIALS ?? 5);
const ROUNDS = Number(process.env.BENCH_COMPARE_ROUNDS ?? 4);
const SECONDS = Number(process.env.BENCH_COMPARE_SECONDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_COMPARE_CONNECTIONS ?? 64);
/**
 * BENCH_COMPARE_NEW_CONNECTIONS=1: every request on a connection of its own (`Connection: close`),
 * as callers that keep none alive send them, so each one is accepted anew.
 */
const NEW_CONNECTIONS = process.env.BENCH_COMPARE_NEW_CONNECTIONS === '1';
const asSent = (target: Target): Target =>
  NEW_CONNECTIONS ? { ...target, headers: { ...target.headers, connection: 'close' } } : target;
/** An upstream that answers after this long (BENCH_COMPARE_UPSTREAM_MS, e.g. 100 as a model would), or at once. */
const UPSTREAM_MS = Number(process.env.BENCH_COMPARE_UPSTREAM_MS ?? 0);
/** The doors a gateway can be measured through: the bench's three questions, or its photo request. */
const DOORS: Record<
  string,
  {
    label: string;
    target: (name: string, server: Running, key: string) => Target | Promise<Target>;
    /** Its gateway's upstream takes images (a configuration file in place of UPSTREAM). */
    images?: true;
  }
> = {
  ...QUESTION_DOORS,
  images: { label: 'REST, one 1 MB JPEG a request (multipart)', target: photoTarget, images: true },
  'images-json': {
    label: '/native, one 1 MB JPEG a request as base64 in JSON',
    target: photoJsonTarget,
    images: true,
  },
};
const doorName = process.env.BENCH_COMPARE_DOOR ?? 'rest';
if (!Object.hasOwn(DOORS, doorName))
  throw new Error(`BENCH_COMPARE_DOOR: one of ${Object.keys(DOORS).join(', ')}, not ${doorName}`);
const DOOR = DOORS[doorName] as (typeof DOORS)[string];

/**
 * BENCH_COMPARE_STORE=postgres: each gateway on a PostgreSQL database of its own with Redis rate
 * limits, as `pnpm bench`'s PG+Redis rows run it, instead of a SQLite file. PostgreSQL's own
 * processes are not pinned.
 */
const STORE = benchStoreFrom('BENCH_COMPARE_STORE');

/** With BENCH_COMPARE_BUDGETS=3, the key holds the bench's three hard budgets (docs/budgets.md). */
const budgets = process.env.BENCH_COMPARE_BUDGETS ?? '0';
if (budgets !== '0' && budgets !== '3') throw new Error(`BENCH_COMPARE_BUDGETS: 0 or 3, not ${budgets}`);

/**
 * A key in a new database (a SQLite file, or PostgreSQL with BENCH_COMPARE_STORE=postgres), made
 * by that checkout's own CLI (its own schema and hashing), with the bench's three hard budgets
 * when asked for.
 */
function createKey(checkoutDir: string, databaseUrl: string): string {
  const cli = (...args: string[]) =>
    execFileSync(
      process.execPath,
      ['--import', 'tsx', join(checkoutDir, 'apps/gateway/src/cli/keys.ts'), ...args],
      {
        cwd: join(checkoutDir, 'apps/gateway'),
        env: { ...process.env, DATABASE_URL: databaseUrl },
      },
    ).toString();
  const out = cli('create', '--name', 'compare', '--credits', '1000000000', '--json');
  const { id, key } = JSON.parse(out) as { id?: unknown; key?: unknown };
  if (typeof key !== 'string' || typeof id !== 'string')
    throw new Error(`no key from ${checkoutDir}'s CLI:\n${out}`);
  if (budgets === '3')
    for (const budget of THREE_BUDGETS) cli('budget', 'set', id, budget.window, String(budget.limit));
  return key;
}

/**
 * The servers measured on one CPU and the load on the other (`pinServers`), unless
 * BENCH_COMPARE_PIN=0 leaves every process where the scheduler puts it, as `pnpm bench` does (a
 * change that fills a gateway's idle time shows only then).
 */
function pin(measured: Running[], others: Running[]): boolean {
  if (process.env.BENCH_COMPARE_PIN === '0') return false;
  return pinServers(measured, others);
}

/** A trial's figures for one target, with its req/s over the relay's. */
type Summary = Reading & { relayRatio: number };

async function main() {
  const refs = process.argv.slice(2);
  if (refs.length === 0)
    throw new Error('usage: pnpm bench:compare <git-ref> [<git-ref>…]   (e.g. a commit before a change)');
  const dir = mkdtempSync(join(tmpdir(), 'dg-compare-'));
  const others = refs.map((ref, i) => ({ ref, dir: join(dir, `checkout-${i}`), name: `gateway at ${ref}` }));
  const processes: Running[] = [];
  const dropAtEnd: { drop(): Promise<void> }[] = [];
  try {
    for (const other of others) checkout(other.ref, other.dir);
    const upstream = await startProcess('stand-in upstream', 'bench/src/stand-in-upstream.ts', {
      DELAY_MS: String(UPSTREAM_MS),
    });
    processes.push(upstream);
    // One database a gateway: a SQLite file, or a PostgreSQL database dropped at the end.
    const databases: string[] = [];
    for (let i = 0; i <= others.length; i++) {
      if (STORE === 'sqlite') databases.push(`file:${join(dir, `gateway-${i}.db`)}`);
      else {
        const database = await createBenchDatabase(`_${i}`);
        dropAtEnd.push(database);
        databases.push(database.url);
      }
    }
    const otherKeys = others.map((other, i) => createKey(other.dir, databases[i] as string));
    const nowKey = createKey(repoRoot, databases[others.length] as string);
    const imagesConfig = join(dir, 'images.yaml');
    writeFileSync(imagesConfig, imagesGatewayConfig(upstream.url));
    const relayName = 'baseline relay';
    const nowName = 'gateway (this checkout)';
    const gateway = async (
      name: string,
      checkoutDir: string,
      database: string,
      key: string,
    ): Promise<Target> => {
      const server = await startProcess(name, join(checkoutDir, 'apps/gateway/src/main.ts'), {
        ...(STORE === 'postgres'
          ? postgresGatewayEnv(database, upstream.url)
          : { DATABASE_URL: database, RATE_LIMIT_PER_MINUTE: '0', LOG_LEVEL: 'info', PORT: '0' }),
        ...(DOOR.images
          ? { GATEWAY_CONFIG: imagesConfig }
          : { UPSTREAM: 'systemone', UPSTREAM_BASE_URL: upstream.url }),
      });
      return asSent(await DOOR.target(name, server, key));
    };

    /** Per trial, the medians of its rounds (and the resident set's highest rise in any of them). */
    const trials: Record<string, Summary>[] = [];
    let pinned = false;
    for (let trial = 0; trial < TRIALS; trial++) {
      if (STORE === 'postgres') for (const database of databases) await vacuumBenchDatabase(database);
      const relay = await startProcess(relayName, 'bench/src/baseline-relay.ts', {
        UPSTREAM_URL: upstream.url,
      });
      const base = asSent(restTarget(relayName, relay));
      const targets = [base];
      try {
        for (const [i, other] of others.entries())
          targets.push(await gateway(other.name, other.dir, databases[i] as string, otherKeys[i] as string));
        targets.push(await gateway(nowName, repoRoot, databases[others.length] as string, nowKey));
        pinned = pin(
          targets.map((target) => target.server),
          [upstream],
        );
        for (const target of targets) await measureLoad(target, CONNECTIONS, 3); // warm-up
        // Each round, and each trial, starts with the next target: with the relay always first, the
        // gateway measured last at c=1024 read 0.91x the same code measured before it.
        const rounds = await measureInTurn(targets, {
          rounds: ROUNDS,
          seconds: SECONDS,
          connections: CONNECTIONS,
          firstRound: trial * ROUNDS,
        });
        const relayRounds = rounds.get(relayName) as Reading[];
        const summary: Record<string, Summary> = {};
        for (const target of targets) {
          const of = rounds.get(target.name) as Reading[];
          const { rps, cpu, rpsShare } = sharesOf(of, relayRounds);
          summary[target.name] = {
            rps,
            cpu,
            relayRatio: rpsShare,
            rssKb: Math.max(...of.map((r) => r.rssKb)),
          };
        }
        trials.push(summary);
        process.stderr.write(
          `trial ${trial + 1}/${TRIALS}: ${targets.map((t) => `${t.name} ${summary[t.name]?.rps.toFixed(0)} req/s ${summary[t.name]?.cpu.toFixed(0)} µs ${summary[t.name]?.rssKb.toFixed(0)} KB`).join(' · ')}\n`,
        );
      } finally {
        for (const target of targets) await target.server.stop();
      }
    }

    const of = (name: string, field: keyof Summary) => trials.map((t) => t[name]?.[field] as number);
    const paired = (name: string, field: 'rps' | 'cpu') =>
      trials.map((t) => (t[nowName]?.[field] as number) / (t[name]?.[field] as number));
    const lines = [
      `${TRIALS} trials (fresh processes each), each ${ROUNDS} rounds of ${SECONDS} s at c=${CONNECTIONS} with the ${others.length + 2} targets in turn, the gateways through ${DOOR.label}${STORE === 'postgres' ? ' on PostgreSQL + Redis' : ''}${budgets === '3' ? ' on a key with three hard budgets' : ''}${UPSTREAM_MS > 0 ? `, the upstream answering after ${UPSTREAM_MS} ms` : ''}; ${pinned ? 'the relay and the gateways pinned to CPU 1, the load generator and the stand-in to CPU 0' : 'not pinned'}; ${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, Node ${process.version}.`,
      '',
      '| target | req/s | CPU µs/req | × relay req/s | RSS rise per connection |',
      '| --- | ---: | ---: | ---: | ---: |',
      ...[relayName, ...others.map((other) => other.name), nowName].map(
        (name) =>
          `| ${name} | ${median(of(name, 'rps')).toFixed(0)} | ${median(of(name, 'cpu')).toFixed(0)} | ${median(of(name, 'relayRatio')).toFixed(2)} (${range(of(name, 'relayRatio'))}) | ${median(of(name, 'rssKb')).toFixed(0)} KB (${of(
            name,
            'rssKb',
          )
            .map((kb) => kb.toFixed(0))
            .sort((a, b) => Number(a) - Number(b))
            .join(', ')}) |`,
      ),
      '',
      "Medians over trials (ranges over trials in brackets). RSS rise per connection: how far the resident set rose above where it stood at the start of a round, at the highest round of a trial, over the connections (with a slow upstream, what each request in flight costs, held or awaiting collection); each trial's in brackets.",
      ...others.map(
        ({ ref, name }) =>
          `This checkout beside ${ref}, trial by trial: req/s ${median(paired(name, 'rps')).toFixed(3)}× (${range(paired(name, 'rps'), 3)}), ` +
          `CPU per request ${median(paired(name, 'cpu')).toFixed(3)}× (${range(paired(name, 'cpu'), 3)}).`,
      ),
    ];
    process.stdout.write(`\n${lines.join('\n')}\n`);
  } finally {
    for (const running of processes.reverse()) await running.stop();
    for (const database of dropAtEnd) await database.drop();
    for (const other of others)
      spawnSync('git', ['worktree', 'remove', '--force', other.dir], { cwd: repoRoot, stdio: 'ignore' });
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
