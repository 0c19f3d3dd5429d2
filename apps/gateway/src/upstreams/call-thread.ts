import { Worker } from 'node:worker_threads';
import type { Dispatcher } from 'undici';
import { servingThreadLoad } from '../serving-thread.ts';
import { type CallResult, CLOSED, httpCall } from './http-call.mjs';

/**
 * Upstream calls made on a thread of their own while the serving thread is busy
 * (docs/performance.md, "The call thread"). Under load the serving thread is what limits
 * throughput, and an upstream call's HTTP work (undici writing the request, parsing the answer's
 * head and collecting its body) is about an eighth of it; on that thread it runs on the other core.
 * Handing a call over costs both threads a wake-up, which a gateway with few requests in flight
 * would pay in throughput, so a call goes over only while the serving thread's event loop was busy
 * for most of the last window and many calls are under way; otherwise it is made where it is asked
 * for. Each turn's calls go in one message and each turn of the call thread's answers come back in
 * one.
 */

/** What the serving thread sends the call thread. */
export type ThreadMessage =
  | { kind: 'calls'; calls: ThreadCall[] }
  /** An upstream is closed (the gateway has drained): its pool goes. */
  | { kind: 'close'; pool: number };

export interface ThreadCall {
  id: number;
  /** Which upstream's pool: each upstream has its own, as on the serving thread. */
  pool: number;
  origin: string;
  path: string;
  method: string;
  headers: Record<string, string>;
  body: Uint8Array;
  limit: number;
  deadlineAt: number;
}

/**
 * And how many upstream calls must be under way: a call handed over waits for two wake-ups, which
 * costs a gateway with few requests in flight more of its throughput than the other core gives it.
 */
const MIN_IN_FLIGHT = 16;
/** How much of the last window the serving thread's loop must have been busy for calls to go over. */
const BUSY_SHARE = 0.9;

/** Where an upstream's calls are made (`UpstreamHttpOptions.callThread`). */
export type CallPlace = 'when-busy' | 'never';

let inFlight = 0;

/**
 * One HTTP call to an upstream, as `httpCall` makes it: for `when-busy`, on the call thread while
 * the serving thread is busy with many calls under way; else on `pool`.
 */
export function makeCall(
  place: CallPlace,
  pool: Dispatcher,
  threadPool: number,
  origin: string,
  request: CallRequest,
  limit: number,
  deadlineAt: number,
): Promise<CallResult> {
  const off = place === 'when-busy' && inFlight >= MIN_IN_FLIGHT && servingThreadLoad() >= BUSY_SHARE;
  inFlight++;
  const made = off
    ? callThread.call(threadPool, origin, request, limit, deadlineAt)
    : httpCall(pool, request, limit, deadlineAt);
  return made.then(ended);
}

/** A module function, not a closure per call (docs/performance.md, "Functions made per request"). */
function ended(result: CallResult): CallResult {
  inFlight--;
  return result;
}

/** An upstream call's request, as both threads make it. */
export interface CallRequest {
  path: string;
  method: string;
  headers: Record<string, string>;
  body: Buffer;
}

/** The process's call thread, started by its first call. */
export class CallThread {
  #worker: Worker | undefined;
  #nextId = 0;
  #waiting = new Map<number, (result: CallResult) => void>();
  #queued: ThreadCall[] = [];
  #nextPool = 0;
  #closed = new Set<number>();

  /** A pool of its own on the call thread, for one upstream. */
  newPool(): number {
    return this.#nextPool++;
  }

  /** One HTTP call, as `httpCall` makes it, made on the call thread. */
  call(
    pool: number,
    origin: string,
    request: CallRequest,
    limit: number,
    deadlineAt: number,
  ): Promise<CallResult> {
    // As a destroyed pool answers on the serving thread: a failed connection, not a new pool.
    if (this.#closed.has(pool)) return Promise.resolve(CLOSED);
    const worker = this.#started();
    return new Promise((resolve) => {
      const id = this.#nextId++;
      this.#waiting.set(id, resolve);
      if (this.#waiting.size === 1) worker.ref(); // answers still to come keep the process alive
      if (this.#queued.length === 0) setImmediate(() => this.#send());
      // A copy of its own: a small Buffer shares the pool's 8 KB, which a message would copy whole.
      this.#queued.push({
        id,
        pool,
        origin,
        ...request,
        body: new Uint8Array(request.body),
        limit,
        deadlineAt,
      });
    });
  }

  /** `pool` on the call thread is closed, if it was opened. */
  close(pool: number): void {
    this.#closed.add(pool);
    this.#worker?.postMessage({ kind: 'close', pool } satisfies ThreadMessage);
  }

  /** Stops the thread: the calls it holds fail as unreached upstreams, and the next call starts another. */
  async stop(): Promise<void> {
    await this.#worker?.terminate();
  }

  #send(): void {
    const calls = this.#queued;
    this.#queued = [];
    this.#worker?.postMessage(
      { kind: 'calls', calls } satisfies ThreadMessage,
      calls.map((call) => call.body.buffer as ArrayBuffer),
    );
  }

  #started(): Worker {
    if (this.#worker !== undefined) return this.#worker;
    // No tsx in it (execArgv empty): the worker is plain JavaScript.
    const worker = new Worker(new URL('./call-thread-worker.mjs', import.meta.url), { execArgv: [] });
    worker.unref();
    worker.on('message', (answers: unknown[]) => {
      for (let i = 0; i < answers.length; i += 2) {
        const id = answers[i] as number;
        const resolve = this.#waiting.get(id);
        this.#waiting.delete(id);
        resolve?.(answers[i + 1] as CallResult);
      }
      if (this.#waiting.size === 0) worker.unref();
    });
    // A thread that stops fails the calls it held as unreached upstreams; the next call starts another.
    const stopped = (reason: string) => {
      if (this.#worker !== worker) return;
      this.#worker = undefined;
      for (const resolve of this.#waiting.values())
        resolve({ kind: 'connection', reason: `the call thread stopped: ${reason}`, code: undefined });
      this.#waiting.clear();
      this.#queued = [];
    };
    worker.on('error', (error) => stopped(error.message));
    worker.on('exit', (code) => stopped(`exit code ${code}`));
    this.#worker = worker;
    return worker;
  }
}

/** The one call thread of this process. */
export const callThread = new CallThread();
