import { Worker } from 'node:worker_threads';
import { Pool } from 'undici';
import { type CallRequest, type CallResult, httpCall, POOL_OPTIONS } from './http-call.js';

/**
 * From this many calls to one upstream in one turn of the serving thread's event loop, the turn's
 * calls go to the upstream thread together. Fewer stay on the serving thread: handing a lone call
 * over costs each side a wake-up (one request at a time took 0.4 ms longer), which pays only once
 * turns are busy, that thread is the bottleneck, and the sockets' and undici's work can move to
 * another core (docs/performance.md).
 */
export const THREAD_FROM_CALLS_A_TURN = 4;

/**
 * A body larger than this stays on the serving thread whatever the turn: handing it over copies it
 * (an image's megabytes), and the copy would cost as much as the thread saves and be held twice.
 */
export const THREAD_MAX_BODY_BYTES = 64 * 1024;

/** The code of a call the upstream thread held when it stopped: a failed connection, retried as one. */
export const THREAD_STOPPED = 'DG_UPSTREAM_THREAD_STOPPED';

/** One upstream's HTTP calls, on whichever thread has room for them. */
export interface UpstreamCalls {
  call(request: CallRequest, limit: number, deadlineAt: number): Promise<CallResult>;
  /** After the gateway's drain: a call still open is abandoned, and later ones fail as connections. */
  close(): Promise<void>;
}

/** A call waiting for the end of its turn, when the turn's calls go where their number says. */
interface TurnCall {
  request: CallRequest;
  limit: number;
  deadlineAt: number;
  resolve(result: CallResult): void;
}

let nextPoolId = 0;
/** Upstreams open in the process: the thread ends with the last. */
let open = 0;

export function openUpstreamCalls(
  origin: string,
  { threadFrom = THREAD_FROM_CALLS_A_TURN }: { threadFrom?: number } = {},
): UpstreamCalls {
  const pool = new Pool(origin, POOL_OPTIONS);
  const poolId = nextPoolId++;
  let closed = false;
  let turn: TurnCall[] = [];
  const endTurn = () => {
    const calls = turn;
    turn = [];
    const thread = !closed && calls.length >= threadFrom ? upstreamThread() : undefined;
    // Until the thread has started, calls go on here: none waits for it.
    const handed: TurnCall[] = [];
    for (const call of calls)
      if (thread?.ready && call.request.body.byteLength <= THREAD_MAX_BODY_BYTES) handed.push(call);
      else void httpCall(pool, call.request, call.limit, call.deadlineAt).then(call.resolve);
    if (handed.length > 0) thread?.send(poolId, origin, handed);
  };
  open++;
  return {
    call(request, limit, deadlineAt) {
      return new Promise((resolve) => {
        if (turn.length === 0) setImmediate(endTurn);
        turn.push({ request, limit, deadlineAt, resolve });
      });
    },
    async close() {
      if (closed) return;
      closed = true;
      await Promise.all([pool.destroy(), running?.closePool(poolId)]);
      if (--open === 0) await stopUpstreamThread();
    },
  };
}

let running: UpstreamThread | undefined;
/** A thread that could not start (it ended before it was ready) is not tried again. */
let unavailable = false;

function upstreamThread(): UpstreamThread | undefined {
  if (running === undefined && !unavailable) running = new UpstreamThread();
  return running;
}

/** Starts the upstream thread if it is not running; resolves once it takes calls (or could not start). */
export async function startUpstreamThread(): Promise<void> {
  await upstreamThread()?.started;
}

/** Ends the upstream thread; the calls it held end as failed connections ({@link THREAD_STOPPED}). */
export async function stopUpstreamThread(): Promise<void> {
  const thread = running;
  running = undefined;
  await thread?.stop();
}

type ThreadMessage = { ready: true } | { answers: { id: number; result: CallResult }[] } | { closed: number };

/** The worker of `call-thread.js`, and the calls it holds. */
class UpstreamThread {
  ready = false;
  readonly started: Promise<void>;
  readonly #worker: Worker;
  readonly #waiting = new Map<number, (result: CallResult) => void>();
  readonly #closing = new Map<number, () => void>();
  #nextId = 0;
  #stopping = false;

  constructor() {
    this.#worker = new Worker(new URL('./call-thread.js', import.meta.url));
    this.#worker.unref();
    this.started = new Promise((resolve) => {
      this.#worker.on('message', (message: ThreadMessage) => {
        if ('ready' in message) {
          this.ready = true;
          resolve();
        } else if ('closed' in message) this.#closing.get(message.closed)?.();
        else {
          for (const { id, result } of message.answers) {
            const resolveCall = this.#waiting.get(id);
            this.#waiting.delete(id);
            resolveCall?.(result);
          }
          // Idle, it lets the process end; holding calls, it keeps it up as the serving thread's pool would.
          if (this.#waiting.size === 0) this.#worker.unref();
        }
      });
      // An error ends the worker: its exit, which follows, ends what it held.
      this.#worker.on('error', () => {});
      this.#worker.on('exit', () => {
        if (!this.ready && !this.#stopping) unavailable = true;
        this.#stopped();
        resolve();
      });
    });
  }

  /** A turn's calls to one upstream, in one message. */
  send(pool: number, origin: string, calls: TurnCall[]): void {
    if (this.#waiting.size === 0) this.#worker.ref();
    const sent = calls.map(({ request, limit, deadlineAt, resolve }) => {
      const id = this.#nextId++;
      this.#waiting.set(id, resolve);
      return { id, request, limit, deadlineAt };
    });
    this.#worker.postMessage({ pool, origin, calls: sent });
  }

  /** Destroys an upstream's pool on the thread, after the calls already sent to it. */
  closePool(pool: number): Promise<void> {
    return new Promise((resolve) => {
      this.#closing.set(pool, resolve);
      this.#worker.postMessage({ close: pool });
    });
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    await this.#worker.terminate();
  }

  #stopped(): void {
    if (running === this) running = undefined;
    this.ready = false;
    const stopped: CallResult = {
      kind: 'connection',
      reason: 'the upstream thread stopped',
      code: THREAD_STOPPED,
    };
    for (const resolveCall of this.#waiting.values()) resolveCall(stopped);
    this.#waiting.clear();
    for (const closed of this.#closing.values()) closed();
    this.#closing.clear();
  }
}
