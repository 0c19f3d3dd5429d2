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

  it('never loses a take under concurrency: 100 at once on a limit of 30 admit exactly 30', async () => {
    const limiter = await open();
    const decisions = await Promise.all(Array.from({ length: 100 }, () => limiter.take('k', 30, 5_000)));
    expect(decisions.filter((d) => d.ok)).toHaveLength(30);
  });
});

describe('the Redis limiter', () => {
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
