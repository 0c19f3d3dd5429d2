// One HTTP call to an upstream (types in http-call.d.ts). Plain JavaScript: the upstream thread
// loads it as it is (call-thread.js), as the serving thread does (upstream-calls.ts).

/** Every upstream pool's keep-alive: connections are kept between calls, not made for each. */
export const POOL_OPTIONS = { keepAliveTimeout: 30_000, keepAliveMaxTimeout: 120_000 };

/**
 * One call through undici's `dispatch`, its answer collected as bytes by a handler of ours. The
 * answer never becomes a stream: `pool.request` makes a Readable for every answer, and reading it
 * as text adds a promise and listeners more, on every upstream call (docs/performance.md). The
 * deadline covers waiting for a connection, the answer's head and its body; an answer is never
 * read past `limit` bytes, so a huge or endless one costs at most that much memory.
 */
export function httpCall(dispatcher, request, limit, deadlineAt) {
  return new Promise((resolve) => {
    const collector = new AnswerCollector(resolve, limit);
    collector.timer = setTimeout(() => collector.expire(), Math.max(0, deadlineAt - Date.now()));
    dispatcher.dispatch(request, collector);
  });
}

/** Why a call was cut short, as undici is told it (the result says so to the caller). */
class CallCutShort extends Error {}

/** undici's dispatch handler for one call: collects its answer, or the first way it ended. */
class AnswerCollector {
  /** The deadline's timer, set by `httpCall`. */
  timer = undefined;
  #controller = undefined;
  #settled = false;
  #status = 0;
  #headers = {};
  #chunks = [];
  #size = 0;
  #resolve;
  #limit;

  constructor(resolve, limit) {
    this.#resolve = resolve;
    this.#limit = limit;
  }

  onRequestStart(controller) {
    this.#controller = controller;
    // The deadline passed while the call waited for a connection: it is not sent.
    if (this.#settled) controller.abort(new CallCutShort('the call was cut short'));
  }

  onResponseStart(controller, status, headers) {
    if (status < 200) return; // informational: the answer's own head follows
    this.#status = status;
    this.#headers = headers;
    // A declared length is enforced by undici (a longer body is an error): too long is known now.
    const declared = headers['content-length'];
    if (typeof declared === 'string' && Number(declared) > this.#limit) this.#tooLarge(controller);
  }

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

  onResponseError(_controller, error) {
    const { message, code } = error;
    this.#settle({ kind: 'connection', reason: message || 'connection failed', code });
  }

  /** The deadline passed: the caller hears at once, and undici ends the call if it has begun. */
  expire() {
    this.#settle({ kind: 'deadline' });
    this.#controller?.abort(new CallCutShort('the deadline passed'));
  }

  #tooLarge(controller) {
    this.#settle({ kind: 'too_large', status: this.#status });
    this.#chunks = [];
    controller.abort(new CallCutShort('the answer is too large'));
  }

  /** The first ending is the call's; whatever undici reports after it (the abort's error) is not. */
  #settle(result) {
    if (this.#settled) return;
    this.#settled = true;
    clearTimeout(this.timer);
    this.#resolve(result);
  }
}
