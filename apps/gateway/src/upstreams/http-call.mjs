// Plain JavaScript, with its types in http-call.d.mts: the thread that makes upstream calls off the
// serving thread (call-thread.mjs) loads it too, and Node 20's module hooks (tsx's) do not reach a
// worker thread.

/** Every upstream's keep-alive pool, on the serving thread and on the call thread alike. */
export const POOL_OPTIONS = { keepAliveTimeout: 30_000, keepAliveMaxTimeout: 120_000 };

/**
 * What a call to a closed upstream comes to on the call thread, as on a destroyed pool: a failed
 * connection, not a new pool.
 * @type {import('./http-call.d.mts').CallResult}
 */
export const CLOSED = { kind: 'connection', reason: 'the upstream is closed', code: 'UND_ERR_DESTROYED' };

/**
 * One call through undici's `dispatch`, its answer collected as bytes by a handler of ours. The
 * answer never becomes a stream: `pool.request` makes a Readable for every answer, and reading it
 * as text adds a promise and listeners more, on every upstream call (docs/performance.md). The
 * deadline covers waiting for a connection, the answer's head and its body; an answer is never
 * read past `limit` bytes, so a huge or endless one costs at most that much memory.
 *
 * @param {import('undici').Dispatcher} dispatcher
 * @param {import('undici').Dispatcher.DispatchOptions} options
 * @param {number} limit
 * @param {number} deadlineAt
 * @returns {Promise<import('./http-call.d.mts').CallResult>}
 */
export function httpCall(dispatcher, options, limit, deadlineAt) {
  return new Promise((resolve) => {
    const collector = new AnswerCollector(resolve, limit);
    collector.timer = setTimeout(() => collector.expire(), Math.max(0, deadlineAt - Date.now()));
    dispatcher.dispatch(options, collector);
  });
}

/** Why a call was cut short, as undici is told it (the result says so to the caller). */
class CallCutShort extends Error {}

/** @implements {import('undici').Dispatcher.DispatchHandler} */
class AnswerCollector {
  /** @type {NodeJS.Timeout | undefined} */
  timer = undefined;
  /** @type {import('undici').Dispatcher.DispatchController | undefined} */
  #controller = undefined;
  #settled = false;
  #status = 0;
  /** @type {import('node:http').IncomingHttpHeaders} */
  #headers = {};
  /** @type {Buffer[]} */
  #chunks = [];
  #size = 0;
  #resolve;
  #limit;

  /**
   * @param {(result: import('./http-call.d.mts').CallResult) => void} resolve
   * @param {number} limit
   */
  constructor(resolve, limit) {
    this.#resolve = resolve;
    this.#limit = limit;
  }

  /** @param {import('undici').Dispatcher.DispatchController} controller */
  onRequestStart(controller) {
    this.#controller = controller;
    // The deadline passed while the call waited for a connection: it is not sent.
    if (this.#settled) controller.abort(new CallCutShort('the call was cut short'));
  }

  /**
   * @param {import('undici').Dispatcher.DispatchController} controller
   * @param {number} status
   * @param {import('node:http').IncomingHttpHeaders} headers
   */
  onResponseStart(controller, status, headers) {
    if (status < 200) return; // informational: the answer's own head follows
    this.#status = status;
    this.#headers = headers;
    // A declared length is enforced by undici (a longer body is an error): too long is known now.
    const declared = headers['content-length'];
    if (typeof declared === 'string' && Number(declared) > this.#limit) this.#tooLarge(controller);
  }

  /**
   * @param {import('undici').Dispatcher.DispatchController} controller
   * @param {Buffer} chunk
   */
  onResponseData(controller, chunk) {
    if (this.#settled) return;
    this.#size += chunk.length;
    if (this.#size > this.#limit) this.#tooLarge(controller);
    else this.#chunks.push(chunk);
  }

  onResponseEnd() {
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

  /**
   * @param {import('undici').Dispatcher.DispatchController} _controller
   * @param {Error} error
   */
  onResponseError(_controller, error) {
    const { message, code } = /** @type {NodeJS.ErrnoException} */ (error);
    this.#settle({ kind: 'connection', reason: message || 'connection failed', code });
  }

  /** The deadline passed: the caller hears at once, and undici ends the call if it has begun. */
  expire() {
    this.#settle({ kind: 'deadline' });
    this.#controller?.abort(new CallCutShort('the deadline passed'));
  }

  /** @param {import('undici').Dispatcher.DispatchController} controller */
  #tooLarge(controller) {
    this.#settle({ kind: 'too_large', status: this.#status });
    this.#chunks = [];
    controller.abort(new CallCutShort('the answer is too large'));
  }

  /**
   * The first ending is the call's; whatever undici reports after it (the abort's error) is not.
   * @param {import('./http-call.d.mts').CallResult} result
   */
  #settle(result) {
    if (this.#settled) return;
    this.#settled = true;
    clearTimeout(this.timer);
    this.#resolve(result);
  }
}
