// The upstream thread (upstream-calls.ts): the HTTP calls of a busy turn of the serving thread's
// event loop are made here, so that undici's and the sockets' work runs on another core. Plain
// JavaScript: Node 20's module hooks (tsx's) do not reach a worker thread.
import { parentPort } from 'node:worker_threads';
import { Pool } from 'undici';
import { httpCall, POOL_OPTIONS } from './http-call.js';

/** One pool per upstream of the serving thread, by its id; made at its first call here. */
const pools = new Map();
/** The answers of this turn of the event loop, sent together: one message, one wake-up. */
let answers = [];

const sendAnswers = () => {
  const batch = answers;
  answers = [];
  parentPort.postMessage({ answers: batch });
};

parentPort.on('message', (message) => {
  if (message.close !== undefined) {
    const pool = pools.get(message.close);
    pools.delete(message.close);
    void (pool?.destroy() ?? Promise.resolve()).then(() => parentPort.postMessage({ closed: message.close }));
    return;
  }
  let pool = pools.get(message.pool);
  if (pool === undefined) {
    pool = new Pool(message.origin, POOL_OPTIONS);
    pools.set(message.pool, pool);
  }
  for (const { id, request, limit, deadlineAt } of message.calls) {
    void httpCall(pool, request, limit, deadlineAt).then((result) => {
      if (answers.length === 0) setImmediate(sendAnswers);
      answers.push({ id, result });
    });
  }
});

parentPort.postMessage({ ready: true });
