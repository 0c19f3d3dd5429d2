import { Worker } from 'node:worker_threads';
import { StoreUnavailableError } from '../store.ts';
import type { WriteTurns } from './group-commit.ts';

/** One statement and its positional parameters. */
export interface Statement {
  sql: string;
  params: readonly unknown[];
}

/**
 * The SQLite store's connection on its own thread (`sqlite-thread.js`): what it runs never holds
 * up the thread that serves requests. Each call has the store's deadline: past it the caller gets
 * StoreUnavailableError (503) while the thread finishes the statement on its own. Started on first
 * use, so a store that is never read from costs no thread.
 */
export interface BackgroundConnection {
  all<T>(statement: Statement): Promise<T[]>;
  exec(sql: string): Promise<void>;
  /**
   * Copies the WAL's frames into the database file, as far as readers allow (docs/usage.md), then
   * those committed meanwhile in a write turn of its own, so that the next commit starts the WAL
   * over: without that turn, under steady writes, the WAL only ever grew (~17 MB a second at c=64).
   */
  checkpoint(): Promise<void>;
  /** Runs the statements in one IMMEDIATE transaction; resolves with each one's changed rows. */
  transaction(steps: readonly Statement[]): Promise<number[]>;
  close(): Promise<void>;
}

/** What `PRAGMA wal_checkpoint` answers: the WAL's frames it saw, and how many of them it copied. */
type CheckpointResult = [{ busy: number; log: number; checkpointed: number }];

type Reply =
  | { id: number; ok: true; value: unknown }
  | { id: number; ok: false; message: string; code?: string };

export function openBackgroundConnection(
  path: string,
  options: {
    timeoutMs: number;
    classify: (error: unknown) => unknown;
    /** Takes turns with the hot writes, so that neither waits on SQLite's lock (group-commit.ts). */
    turns?: WriteTurns;
  },
): BackgroundConnection {
  let worker: Worker | undefined;
  let next = 0;
  const pending = new Map<number, { resolve(value: unknown): void; reject(error: unknown): void }>();

  const start = () => {
    const thread = new Worker(new URL('./sqlite-thread.js', import.meta.url), {
      workerData: { path, busyTimeoutMs: options.timeoutMs },
      // Plain JavaScript needs no tsx: inherited from the gateway's command line it cost ~11 MB more.
      execArgv: [],
    });
    thread.on('message', (reply: Reply) => {
      const call = pending.get(reply.id);
      if (call === undefined) return; // its caller gave up at the deadline
      pending.delete(reply.id);
      if (reply.ok) call.resolve(reply.value);
      else call.reject(options.classify(Object.assign(new Error(reply.message), { code: reply.code })));
    });
    thread.on('error', (error) => {
      for (const call of pending.values()) call.reject(options.classify(error));
      pending.clear();
      worker = undefined;
    });
    // A thread that is only waiting for work does not keep the process alive.
    thread.unref();
    return thread;
  };

  const send = <T>(message: Record<string, unknown>) =>
    new Promise<T>((resolve, reject) => {
      worker ??= start();
      const id = next++;
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(
          new StoreUnavailableError(`the SQLite database did not answer within ${options.timeoutMs} ms`),
        );
      }, options.timeoutMs);
      pending.set(id, {
        resolve(value) {
          clearTimeout(timer);
          resolve(value as T);
        },
        reject(error) {
          clearTimeout(timer);
          reject(error);
        },
      });
      worker.postMessage({ id, ...message });
    });

  return {
    all: (statement) => send({ op: 'all', sql: statement.sql, params: statement.params }),
    exec: (sql) => send({ op: 'exec', sql }),
    async checkpoint() {
      // PASSIVE copies the frames that were there when it began, and reports only those; under
      // steady writes the commits made while it copied always remain, so the WAL never starts over.
      const [{ log }] = await send<CheckpointResult>({ op: 'checkpoint' });
      const { turns } = options;
      if (log <= 0 || turns === undefined) return;
      // What is left is a few milliseconds' commits: copied while the hot writes wait their turn,
      // every frame is then in the database file, and the next commit writes the WAL from its start.
      await turns.beforeBackgroundWrite();
      try {
        await send<CheckpointResult>({ op: 'checkpoint' });
      } finally {
        turns.afterBackgroundWrite();
      }
    },
    async transaction(steps) {
      const { turns } = options;
      if (turns === undefined) return send<number[]>({ op: 'transaction', steps });
      await turns.beforeBackgroundWrite();
      try {
        return await send<number[]>({ op: 'transaction', steps });
      } finally {
        turns.afterBackgroundWrite();
      }
    },
    async close() {
      const thread = worker;
      worker = undefined;
      if (thread !== undefined) await thread.terminate();
    },
  };
}
