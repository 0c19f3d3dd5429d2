import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { TEST_REDIS_URL } from '../../test/services.ts';
import { createMemoryRateLimiter, type RateLimiter } from './rate-limiter.ts';
import { createRedisRateLimiter } from './redis-rate-limiter.ts';

// One contract for every RateLimiter: the in-process bucket and the Redis one shared by instances.
const prefix = `dg-test-${randomUUID()}:`;
const closers: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const close of closers) await close();
  const redis = new Redis(TEST_REDIS_URL);
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

/** Polls `done` until it holds, or fails after a generous deadline. */
async function waitFor(done: () => boolean, deadlineMs = 10_000) {
  const until = Date.now() + deadlineMs;
  while (!done()) {
    if (Date.now() > until) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function redisLimiter(): Promise<RateLimiter> {
  const limiter = createRedisRateLimiter({
    url: TEST_REDIS_URL,
    keyPrefix: `${prefix}${randomUUID()}:`,
    onUnavailable: (error) => {
      throw error;
    },
  });
  await limiter.connect();
  closers.push(limiter.close);
  return limiter;
}

describe.each([
  ['in memory', async () => createMemoryRateLimiter()],
  ['in Redis', redisLimiter],
])('token bucket %s', (_, open) => {
  it('allows a burst of one minute’s allowance, then refuses with the wait for the next token', async () => {
    const limiter = await open();
    const t0 = 1_000_000;
    // Each take says how many whole tokens the bucket still holds.
    for (let i = 0; i < 60; i++) expect(await limiter.take('k', 60, t0)).toEqual({ ok: true, left: 59 - i });
    expect(await limiter.take('k', 60, t0)).toEqual({ ok: false, retryAfterMs: 1000 });
    expect(await limiter.take('k', 60, t0 + 400)).toEqual({ ok: false, retryAfterMs: 600 });
    expect(await limiter.take('k', 60, t0 + 1000)).toEqual({ ok: true, left: 0 });
    // Part of a token is not one: 1.5 s later the bucket holds 1.5, and a take leaves 0.5.
    expect(await limiter.take('k', 60, t0 + 2500)).toEqual({ ok: true, left: 0 });
  });

  it('refills continuously and never above the allowance', async () => {
    const limiter = await open();
    const t0 = 0;
    for (let i = 0; i < 6; i++) await limiter.take('k', 6, t0);
    // An hour later the bucket holds 6 tokens, not 360.
    for (let i = 0; i < 6; i++) expect((await limiter.take('k', 6, t0 + 3_600_000)).ok).toBe(true);
    expect((await limiter.take('k', 6, t0 + 3_600_000)).ok).toBe(false);
  });

  it('keeps keys apart', async () => {
    const limiter = await open();
    expect((await limiter.take('a', 1, 0)).ok).toBe(true);
    expect((await limiter.take('a', 1, 0)).ok).toBe(false);
    expect((await limiter.take('b', 1, 0)).ok).toBe(true);
  });

  it('answers takes asked at once in the order they were asked, each from its own bucket', async () => {
    const limiter = await open();
    const decisions = await Promise.all(
      (['a', 'b', 'a', 'b', 'a'] as const).map((key) => limiter.take(key, key === 'a' ? 2 : 1, 7_000)),
    );
    expect(decisions).toEqual([
      { ok: true, left: 1 },
      { ok: true, left: 0 },
      { ok: true, left: 0 },
      { ok: false, retryAfterMs: 60_000 },
      { ok: false, retryAfterMs: 30_000 },
    ]);
  });

  it('never loses a take under concurrency: 100 at once on a limit of 30 admit exactly 30', async () => {
    const limiter = await open();
    const decisions = await Promise.all(Array.from({ length: 100 }, () => limiter.take('k', 30, 5_000)));
    expect(decisions.filter((d) => d.ok)).toHaveLength(30);
  });
});

describe('the Redis limiter', () => {
  it('asks Redis once for the takes of a turn of the event loop, at most 256 to a call', async () => {
    const keyPrefix = `${prefix}${randomUUID()}:`;
    const limiter = createRedisRateLimiter({ url: TEST_REDIS_URL, keyPrefix, onUnavailable: () => {} });
    await limiter.connect();
    closers.push(limiter.close);
    // Redis's own account of the commands it was sent: those that name this limiter's buckets,
    // leaving out the ones its script runs (other tests share this Redis).
    const monitor = await new Redis(TEST_REDIS_URL).monitor();
    const other = new Redis(TEST_REDIS_URL);
    const seen: string[][] = [];
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      if (!source.includes('lua') && args.some((arg) => arg.startsWith(keyPrefix))) seen.push(args);
    });
    /** The limiter's calls since the last reading: Redis feeds MONITOR in the order it runs commands, so a marker sent after them comes after them. */
    let marks = 0;
    const calls = async () => {
      const marker = `${keyPrefix}marker-${++marks}`;
      await other.get(marker);
      await waitFor(() => seen.some((args) => args.includes(marker)));
      const before = seen.splice(0).filter((args) => !args.includes(marker));
      return before.map((args) => args.filter((arg) => arg.startsWith(keyPrefix)).length);
    };
    try {
      const takes = (n: number) =>
        Promise.all(Array.from({ length: n }, (_, i) => limiter.take(`k${i}`, 10, 9_000)));
      // The first call may be answered NOSCRIPT and sent again as EVAL: loaded before counting.
      await takes(1);
      await calls();

      expect((await takes(10)).every((d) => d.ok)).toBe(true);
      expect(await calls()).toEqual([10]);
      expect(await takes(300)).toHaveLength(300);
      expect(await calls()).toEqual([256, 44]);
    } finally {
      monitor.disconnect();
      other.disconnect();
    }
  });

  it('is one bucket for every instance: two limiters on one Redis share it', async () => {
    const keyPrefix = `${prefix}shared:`;
    const [a, b] = [0, 1].map(() =>
      createRedisRateLimiter({ url: TEST_REDIS_URL, keyPrefix, onUnavailable: () => {} }),
    ) as [ReturnType<typeof createRedisRateLimiter>, ReturnType<typeof createRedisRateLimiter>];
    await Promise.all([a.connect(), b.connect()]);
    closers.push(a.close, b.close);
    const decisions = await Promise.all(
      Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? a : b).take('k', 10, 1_000)),
    );
    expect(decisions.filter((d) => d.ok)).toHaveLength(10);
  });

  it('fails open while Redis cannot be reached, saying so, and is not ready', async () => {
    // A port that refuses connections: bound, then closed.
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    await new Promise((resolve) => server.close(resolve));
    const problems: Error[] = [];
    const limiter = createRedisRateLimiter({
      url: `redis://127.0.0.1:${port}`,
      keyPrefix: prefix,
      onUnavailable: (error) => problems.push(error),
    });
    closers.push(limiter.close);
    await expect(limiter.connect()).rejects.toThrow();
    // Nothing is known of the bucket: no token is promised to the next request.
    expect(await limiter.take('k', 1, 0)).toEqual({ ok: true, left: 0 });
    expect(await limiter.take('k', 1, 0)).toEqual({ ok: true, left: 0 });
    expect(problems).toHaveLength(2);
    await expect(limiter.checkReachable()).rejects.toThrow();
  });
});
