import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';

/** What one HTTP call to an upstream came to, before the retry policy judges it. */
export type CallResult =
  | { kind: 'response'; status: number; headers: IncomingHttpHeaders; text: string }
  | { kind: 'connection'; reason: string; code: string | undefined }
  | { kind: 'too_large'; status: number }
  | { kind: 'deadline' };

/**
 * One call through undici's `dispatch`, its answer collected as bytes by a handler of ours. The
 * answer never becomes a stream: `pool.request` makes a Readable for every answer, and reading it
 * as text adds a promise and listeners more, on every upstream call (docs/performance.md). The
 * deadline covers waiting for a connection, the answer's head and its body; an answer is never
 * read past `limit` bytes, so a huge or endless one costs at most that much memory.
 */
export function httpCall(
  dispatcher: Dispatcher,
  options: Dispatcher.DispatchOptions,
  limit: number,
  deadlineAt: number,
): Promise<CallResult> {
  return new Promise((resolve) => {
    const collector = new AnswerCollector(resolve, limit);
    collector.timer = setTimeout(() => collector.expire(), Math.max(0, deadlineAt - Date.now()));
    dispatcher.dispatch(options, collector);
  });
}

/** Why a call was cut short, as undici is told it (the result says so to the caller). */
class CallCutShort extends Error {}

class AnswerCollector implements Dispatcher.DispatchHandler {
  timer: NodeJS.Timeout | undefined;
  #controller: Dispatcher.DispatchController | undefined;
  #settled = false;
  #status = 0;
  #headers: IncomingHttpHeaders = {};
  #chunks: Buffer[] = [];
  #size = 0;

  constructor(
    private readonly resolve: (result: CallResult) => void,
    private readonly limit: number,
  ) {}

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    // The deadline passed while the call waited for a connection: it is not sent.
    if (this.#settled) controller.abort(new CallCutShort('the call was cut short'));
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    status: number,
    headers: IncomingHttpHeaders,
  ): void {
    if (status < 200) return; // informational: the answer's own head follows
    this.#status = status;
    this.#headers = headers;
    // A declared length is enforced by undici (a longer body is an error): too long is known now.
    const declared = headers['content-length'];
    if (typeof declared === 'string' && Number(declared) > this.limit) this.#tooLarge(controller);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#settled) return;
    this.#size += chunk.length;
    if (this.#size > this.limit) this.#tooLarge(controller);
    else this.#chunks.push(chunk);
  }

  onResponseEnd(): void {
    if (this.#settled) return;
    const [only] = this.#chunks;
    const bytes = this.#chunks.length === 1 && only ? only : Buffer.concat(this.#chunks, this.#size);
    this.#settle({
      kind: 'response',
      status: this.#status,
      headers: this.#headers,
      text: bytes.toString('utf8'),
    });
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    const { message, code } = error as NodeJS.ErrnoException;
    this.#settle({ kind: 'connection', reason: message || 'connection failed', code });
  }

  /** The deadline passed: the caller hears at once, and undici ends the call if it has begun. */
  expire(): void {
    this.#settle({ kind: 'deadline' });
    this.#controller?.abort(new CallCutShort('the deadline passed'));
  }

  #tooLarge(controller: Dispatcher.DispatchController): void {
    this.#settle({ kind: 'too_large', status: this.#status });
    this.#chunks = [];
    controller.abort(new CallCutShort('the answer is too large'));
  }

  /** The first ending is the call's; whatever undici reports after it (the abort's error) is not. */
  #settle(result: CallResult): void {
    if (this.#settled) return;
    this.#settled = true;
    clearTimeout(this.timer);
    this.resolve(result);
  }
}
