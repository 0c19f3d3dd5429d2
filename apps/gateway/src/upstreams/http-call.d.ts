import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';

// The types of http-call.js, which is plain JavaScript because the upstream thread loads it too
// (call-thread.js), and Node 20's module hooks (tsx's) do not reach a worker thread.

/** Every upstream pool's keep-alive: connections are kept between calls, not made for each. */
export declare const POOL_OPTIONS: {
  readonly keepAliveTimeout: 30_000;
  readonly keepAliveMaxTimeout: 120_000;
};

/** One call's request: plain data, so that the upstream thread can be handed it (upstream-calls.ts). */
export interface CallRequest {
  path: string;
  method: 'POST';
  headers?: Record<string, string>;
  body: Uint8Array;
}

/** What one HTTP call to an upstream came to, before the retry policy judges it. */
export type CallResult =
  | { kind: 'response'; status: number; headers: IncomingHttpHeaders; text: string }
  | { kind: 'connection'; reason: string; code: string | undefined }
  | { kind: 'too_large'; status: number }
  | { kind: 'deadline' };

/**
 * One call through undici's `dispatch`, its answer collected as bytes, never read past `limit`,
 * and ended at `deadlineAt` (epoch ms) wherever it then is.
 */
export declare function httpCall(
  dispatcher: Dispatcher,
  request: CallRequest,
  limit: number,
  deadlineAt: number,
): Promise<CallResult>;
