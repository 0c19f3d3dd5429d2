import type { RequestListener } from 'node:http';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { loopbackServer } from '../../test/support/loopback.ts';
import { servingThreadLoad } from '../serving-thread.ts';
import { type CallPlace, CallThread, callThread, makeCall } from './call-thread.ts';

const closers: (() => Promise<void>)[] = [];
const serve = (listener: RequestListener) => loopbackServer(listener, closers);
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** A pool that counts the calls made through it, on the serving thread. */
function countingPool(origin: string) {
  const pool = new Pool(origin);
  closers.push(() => pool.destroy());
  const made = { count: 0 };
  const dispatch = pool.dispatch.bind(pool);
  pool.dispatch = (options, handler) => {
    made.count++;
    return dispatch(options, handler);
  };
  return { pool, made };
}

const POST = { path: '/v1/x', method: 'POST', headers: {}, body: Buffer.from('{"q":1}') } as const;

/** The serving thread's load, as the gate reads it: the next window starts now. */
async function newWindow() {
  await sleep(120);
  servingThreadLoad();
}

/** A window in which the serving thread's loop is busy throughout. */
async function busyWindow() {
  await newWindow();
  const end = performance.now() + 150;
  while (performance.now() < end);
}

describe('where an upstream call is made', () => {
  // Twenty calls at once: the gate lets calls go over only with 16 or more under way.
  const twentyCalls = (pool: Pool, origin: string, place: CallPlace = 'when-busy') => {
    const threadPool = callThread.newPool();
    closers.push(async () => callThread.close(threadPool));
    return Promise.all(
      Array.from({ length: 20 }, () =>
        makeCall(place, pool, threadPool, origin, POST, 1024, Date.now() + 10_000),
      ),
    );
  };

  /** An idle window: the loop waits in the poll phase throughout. */
  const idleWindow = async () => {
    await newWindow();
    await sleep(120);
  };

  it.each([
    ['keeps every call on the serving thread while its event loop has room', idleWindow, 'when-busy', 20],
    [
      'hands calls beyond the sixteenth under way to the call thread while the loop was busy',
      busyWindow,
      'when-busy',
      16,
    ],
    [
      'keeps every call on the serving thread, busy or not, where the operator said off (never)',
      busyWindow,
      'never',
      20,
    ],
  ] as const)('%s', async (_, window, place, onServingThread) => {
    const origin = await serve((_req, res) => res.end('{"ok":true}'));
    const { pool, made } = countingPool(origin);
    await window();
    const results = await twentyCalls(pool, origin, place);
    expect(results.every((result) => result.kind === 'response' && result.text === '{"ok":true}')).toBe(true);
    expect(made.count).toBe(onServingThread);
  });
});

describe('the call thread', () => {
  it('fails the calls it holds when it stops, as unreached upstreams, and starts again for the next', async () => {
    const thread = new CallThread();
    closers.push(() => thread.stop());
    let seen = 0;
    const silent = await serve(() => {
      seen++;
    });
    const pool = thread.newPool();
    const held = Array.from({ length: 3 }, () => thread.call(pool, silent, POST, 1024, Date.now() + 30_000));
    // Stopped once the calls are on their way: the upstream has seen them all.
    for (const giveUpAt = Date.now() + 20_000; seen < 3 && Date.now() < giveUpAt; ) await sleep(10);
    expect(seen).toBe(3);
    await thread.stop();
    for (const result of await Promise.all(held))
      expect(result).toMatchObject({
        kind: 'connection',
        reason: expect.stringMatching(/call thread stopped/),
      });
    const answering = await serve((_req, res) => res.end('{"again":true}'));
    expect(await thread.call(thread.newPool(), answering, POST, 1024, Date.now() + 10_000)).toMatchObject({
      kind: 'response',
      text: '{"again":true}',
    });
  });
});
