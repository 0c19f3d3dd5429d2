import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';

const here = dirname(new URL(import.meta.url).pathname);
/** USER_HZ: the unit of /proc CPU times, 100 on Linux for every architecture Node runs on. */
const CLOCK_TICKS_PER_SECOND = 100;
export const repoRoot = resolve(here, '../..');
const benchDir = join(repoRoot, 'bench');

/**
 * The Node flags `pnpm start` runs the gateway with, read from that checkout's package.json: a
 * gateway under measurement starts as its users start it.
 */
export function gatewayNodeFlags(checkout: string = repoRoot): string[] {
  const scripts = (
    JSON.parse(readFileSync(join(checkout, 'package.json'), 'utf8')) as {
      scripts?: Record<string, string>;
    }
  ).scripts;
  const flags = /\bnode ((?:--\S+ )*?)--import tsx apps\/gateway\/src\/main\.ts/.exec(
    scripts?.start ?? '',
  )?.[1];
  return flags?.trim().split(/\s+/).filter(Boolean) ?? [];
}

/** A checkout of `ref` in a temporary worktree, installed as a newcomer would (offline if it can). */
export function checkout(ref: string, dir: string): void {
  execFileSync('git', ['worktree', 'add', '--detach', dir, ref], { cwd: repoRoot, stdio: 'inherit' });
  const offline = spawnSync('pnpm', ['install', '--frozen-lockfile', '--offline'], {
    cwd: dir,
    stdio: 'ignore',
  });
  if (offline.status !== 0)
    execFileSync('pnpm', ['install', '--frozen-lockfile'], { cwd: dir, stdio: 'inherit' });
}

/** CPU time (user + system) process `pid` has used so far, in seconds (Linux /proc). */
export function cpuSecondsOfPid(pid: number | string): number {
  // Fields 14 and 15 of /proc/<pid>/stat (utime, stime), counted after the command name.
  const fields = (readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1] ?? '').split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
}

export interface Running {
  name: string;
  url: string;
  child: ChildProcess;
  /** Resident set size of the process now, in bytes (Linux /proc). */
  rss(): number;
  /** CPU time (user + system) the process has used so far, in seconds (Linux /proc). */
  cpuSeconds(): number;
  stop(): Promise<void>;
}

/**
 * Start a TypeScript entry point in its own process and wait until it says where it listens:
 * a `READY <url>` line, or the gateway's JSON "gateway listening" log line.
 */
export async function startProcess(
  name: string,
  entry: string,
  env: Record<string, string> = {},
  nodeArgs: string[] = [],
): Promise<Running> {
  // One node process with tsx as a loader (not the tsx CLI, which runs the program in a child
  // process): the pid is the server itself, so its RSS and CPU time are what is measured.
  const path = isAbsolute(entry) ? entry : join(repoRoot, entry);
  // A gateway (this checkout's or another's, in bench:compare) with its own `pnpm start` flags.
  const gateway = /(.*)\/apps\/gateway\/src\/main\.ts$/.exec(path);
  const flags = gateway?.[1] === undefined ? [] : gatewayNodeFlags(gateway[1]);
  const child = spawn(process.execPath, [...flags, ...nodeArgs, '--import', 'tsx', path], {
    cwd: benchDir,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const url = await new Promise<string>((resolveUrl, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start:\n${output}`)), 30_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      for (const line of output.split('\n')) {
        const ready = /^READY (\S+)/.exec(line);
        const listening = line.includes('"gateway listening"')
          ? (JSON.parse(line) as { address: string }).address
          : undefined;
        const found = ready?.[1] ?? listening;
        if (found) {
          clearTimeout(timer);
          child.stdout?.off('data', onData);
          // Keep draining output so a chatty process never blocks on a full pipe.
          child.stdout?.resume();
          resolveUrl(found);
          return;
        }
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.on('exit', (code) => reject(new Error(`${name} exited with ${code}:\n${output}`)));
  });
  return {
    name,
    url,
    child,
    rss() {
      const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
      const kb = Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0);
      return kb * 1024;
    },
    cpuSeconds() {
      return cpuSecondsOfPid(child.pid as number);
    },
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/**
 * With taskset and two CPUs or more: the servers measured (each under load in its turn) on CPU 1;
 * this process (the load generator) and the others (the stand-in) on CPU 0. A server's CPU time
 * per request then stops depending on what the scheduler put beside it. False where it cannot.
 */
export function pinServers(measured: Running[], others: Running[]): boolean {
  if (cpus().length < 2 || spawnSync('taskset', ['-V']).status !== 0) return false;
  const set = (cpu: number, pid: number | undefined) =>
    execFileSync('taskset', ['-a', '-p', '-c', String(cpu), String(pid)], { stdio: 'ignore' });
  set(0, process.pid);
  for (const running of others) set(0, running.child.pid);
  for (const running of measured) set(1, running.child.pid);
  return true;
}
