import { StoreUnavailableError } from '../store.ts';

/**
 * The storage rule of docs/operating.md, for PostgreSQL: every call ends by its deadline; a transient conflict is
 * tried again inside the store; trouble reaching the database is the store's own error (503).
 */

/** SQLSTATEs that say the transaction was rolled back and may simply run again. */
const CONFLICT = new Set(['40P01', '40001']); // deadlock_detected, serialization_failure

/**
 * What says the database cannot answer now: connection exceptions (class 08), shutdowns and
 * start-ups (57P01–57P03), statement and lock timeouts (57014, 55P03), insufficient resources
 * (class 53), a read-only standby (25006); postgres.js's own connection errors; Node's socket errors.
 */
const UNAVAILABLE_STATES = /^(08|53|57P0[1-3]|57014|55P03|25006)/;
const UNAVAILABLE_CODES = new Set([
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
]);

export type Trouble = 'conflict' | 'unavailable' | 'other';

export function troubleOf(error: unknown): Trouble {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return 'other';
  if (CONFLICT.has(code)) return 'conflict';
  if (UNAVAILABLE_STATES.test(code) || UNAVAILABLE_CODES.has(code)) return 'unavailable';
  return 'other';
}

export interface Attempt<T> {
  run: () => PromiseLike<T>;
  /**
   * Whether trouble reaching the database may be retried: true only for steps that are
   * idempotent (a lost acknowledgement may hide a commit). Conflicts are always retried.
   */
  idempotent: boolean;
}

/** Backoff between tries: exponential from 5 ms, at most 200 ms, jittered over its upper half. */
export function backoffMs(attempt: number, random: () => number = Math.random): number {
  const ceiling = Math.min(200, 5 * 2 ** attempt);
  return ceiling / 2 + random() * (ceiling / 2);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs `attempt` until it succeeds or `deadline` (epoch ms) passes; then, or on trouble reaching
 * the database that may not be retried, the call ends with StoreUnavailableError. Other errors
 * (bugs) are thrown as they are. A try still running at the deadline is left to end by itself:
 * the server's statement_timeout bounds it, and a reserve, settle or release that reaches the
 * database after its deadline does nothing (`dg_apply`). It is not cancelled: postgres.js's
 * `cancel()` on a query waiting for a connection leaves that connection unusable (seen here:
 * every later query on the pool waited forever after an outage).
 */
export async function withDeadline<T>(what: string, deadline: number, attempt: Attempt<T>): Promise<T> {
  for (let tries = 0; ; tries++) {
    const left = deadline - Date.now();
    if (left <= 0) throw timedOut(what);
    try {
      return await raceDeadline(attempt.run(), left, what);
    } catch (error) {
      if (error instanceof StoreUnavailableError) throw error;
      const trouble = troubleOf(error);
      const retry = trouble === 'conflict' || (trouble === 'unavailable' && attempt.idempotent);
      if (!retry) {
        if (trouble === 'other') throw error;
        throw new StoreUnavailableError(`PostgreSQL cannot be reached: ${(error as Error).message}`, {
          cause: error,
        });
      }
      const wait = backoffMs(tries);
      if (Date.now() + wait >= deadline) {
        throw new StoreUnavailableError(`PostgreSQL did not answer within its deadline (${what})`, {
          cause: error,
        });
      }
      await sleep(wait);
    }
  }
}

function timedOut(what: string) {
  return new StoreUnavailableError(`PostgreSQL did not answer within its deadline (${what})`);
}

async function raceDeadline<T>(query: PromiseLike<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timedOut(what)), ms);
  });
  try {
    return await Promise.race([query, expired]);
  } finally {
    clearTimeout(timer);
  }
}
