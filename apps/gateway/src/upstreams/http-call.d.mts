import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';

/** What one HTTP call to an upstream came to, before the retry policy judges it. */
export type CallResult =
  | { kind: 'response'; status: number; headers: IncomingHttpHeaders; text: string }
  | { kind: 'connection'; reason: string; code: string | undefined }
  | { kind: 'too_large'; status: number }
  | { kind: 'deadline' };

/** Every upstream's keep-alive pool, on the serving thread and on the call thread alike. */
export const POOL_OPTIONS: { keepAliveTimeout: number; keepAliveMaxTimeout: number };

/** A call to a closed upstream on the call thread: a failed connection, as on a destroyed pool. */
export const CLOSED: CallResult;

/** One call through undici's `dispatch`, collected as bytes up to `limit`, ended at `deadlineAt`. */
export function httpCall(
  dispatcher: Dispatcher,
  options: Dispatcher.DispatchOptions,
  limit: number,
  deadlineAt: number,
): Promise<CallResult>;
