import { type ChildProcess, spawn } from 'node:child_process';
import { join, resolve } from 'node:path';
import { sleep } from './harness.ts';

const appDir = resolve(import.meta.dirname, '..');
const main = join(appDir, 'src', 'main.ts');
/** tsx's loader by its path: the gateway runs from temporary folders, outside the workspace. */
const tsxLoader = import.meta.resolve('tsx');

/** A gateway started as `pnpm start` starts it: its own process, real signals, real sockets. */
export interface GatewayProcess {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** The JSON log lines written so far. */
  logs: () => Record<string, unknown>[];
  exited: Promise<number | null>;
}

export function startGatewayProcess(cwd: string, env: Record<string, string>): GatewayProcess {
  // One process, tsx as a loader, as `pnpm start` runs it: the tsx CLI would run the gateway in a
  // child and SIGKILL it when it is too busy to acknowledge a signal within 30 ms.
  const child = spawn(process.execPath, ['--import', tsxLoader, main], {
    cwd,
    env: { ...process.env, PORT: '0', LOG_LEVEL: 'info', ...env },
  });
  let out = '';
  let err = '';
  child.stdout?.on('data', (chunk) => {
    out += chunk;
  });
  child.stderr?.on('data', (chunk) => {
    err += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const logs = () =>
    out
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  return { child, stdout: () => out, stderr: () => err, logs, exited };
}

/** The address the process logged once listening. */
export async function listeningAddress(running: GatewayProcess, timeoutMs = 20_000): Promise<string> {
  const started = Date.now();
  while (Date.now() - started < timeoutMs) {
    const line = running.logs().find((l) => l.msg === 'gateway listening');
    if (line) return line.address as string;
    if (running.child.exitCode !== null) break;
    await sleep(50);
  }
  throw new Error(`the gateway did not start:\n${running.stdout()}\n${running.stderr()}`);
}

/** SIGKILL and wait until the process is gone. */
export async function killHard(running: GatewayProcess): Promise<void> {
  running.child.kill('SIGKILL');
  await running.exited;
}
