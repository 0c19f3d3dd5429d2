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
  /** Copies the WAL's frames into the database file, as far as readers allow (docs/usage.md). */
  checkpoint(): Promise<void>;
  /** Runs the statements in one IMMEDIATE transaction; resolves with each one's changed rows. */
  transaction(steps: readonly Statement[]): Promise<number[]>;
  close(): Promise<void>;
}

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
    checkpoint: () => send({ op: 'checkpoint' }),
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
