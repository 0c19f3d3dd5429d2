// The call thread (call-thread.ts): upstream calls made here, off the serving thread, each turn's
// answers sent back in one message. Plain JavaScript: Node 20's module hooks (tsx's) do not reach
// a worker thread, and loading tsx in it would cost ~40 MB more.
import { parentPort } from 'node:worker_threads';
import { Pool } from 'undici';
import { CLOSED, httpCall, POOL_OPTIONS } from './http-call.mjs';

if (parentPort === null) throw new Error('call-thread-worker.mjs runs as a worker thread');
const port = parentPort;

/** @type {Map<number, Pool>} each upstream's pool, by the number the serving thread gave it */
const pools = new Map();
/** @type {Set<number>} the pools of upstreams closed since (the gateway has drained) */
const closed = new Set();
/** @type {unknown[]} pairs of a call's id and its result, sent at the end of this turn */
let answers = [];

/** @param {import('./call-thread.ts').ThreadCall} call */
function poolFor(call) {
  let pool = pools.get(call.pool);
  if (pool === undefined) {
    pool = new Pool(call.origin, POOL_OPTIONS);
    pools.set(call.pool, pool);
  }
  return pool;
}

/**
 * @param {number} id
 * @param {import('./http-call.d.mts').CallResult} result
 */
function answered(id, result) {
  if (answers.length === 0) setImmediate(flush);
  answers.push(id, result);
}

function flush() {
  const batch = answers;
  answers = [];
  port.postMessage(batch);
}

port.on('message', (/** @type {import('./call-thread.ts').ThreadMessage} */ message) => {
  if (message.kind === 'close') {
    closed.add(message.pool);
    const pool = pools.get(message.pool);
    pools.delete(message.pool);
    pool?.destroy().catch(() => {});
    return;
  }
  for (const call of message.calls) {
    // As a destroyed pool answers on the serving thread: a failed connection, not a new pool.
    if (closed.has(call.pool)) {
      answered(call.id, CLOSED);
      continue;
    }
    const options = { path: call.path, method: call.method, headers: call.headers, body: call.body };
    httpCall(poolFor(call), options, call.limit, call.deadlineAt).then((result) => answered(call.id, result));
  }
});
