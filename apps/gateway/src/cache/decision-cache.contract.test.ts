import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { TEST_REDIS_URL } from '../../test/services.ts';
import { decisionCacheContract } from './decision-cache.contract-tests.ts';
import { createMemoryCache } from './memory-cache.ts';
import { createRedisCache } from './redis-cache.ts';

decisionCacheContract('in process (lru-cache)', async () => {
  // Not 0: lru-cache reads a start time of 0 as "no TTL".
  let now = 1_000_000;
  const cache = createMemoryCache({ maxBytes: 1_000_000, perf: { now: () => now } });
  return {
    cache,
    async advance(ms) {
      now += ms;
    },
    async cleanup() {},
  };
});

decisionCacheContract('Redis', async () => {
  const keyPrefix = `dg_test_${randomBytes(4).toString('hex')}:`;
  const cache = createRedisCache({
    url: TEST_REDIS_URL,
    keyPrefix,
    onUnavailable: (error) => {
      throw error;
    },
  });
  await cache.connect();
  return {
    cache,
    // Redis keeps time itself: wait for the TTL to pass, polling nothing but the clock.
    advance: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    async cleanup() {
      await cache.purge();
      const redis = new Redis(TEST_REDIS_URL);
      const left = await redis.keys(`${keyPrefix}*`);
      if (left.length > 0) await redis.del(...left);
      redis.disconnect();
      await cache.close?.();
    },
  };
});
