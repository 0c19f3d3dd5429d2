import { createFailFastRedis } from '../redis-client.ts';
import type { CachedDecision, DecisionCache } from './decision-cache.ts';

export interface RedisCacheOptions {
  url: string;
  keyPrefix: string;
  /** Told of every Redis failure: the request goes on as a miss (docs/routes.md#decision-cache). */
  onUnavailable(error: Error): void;
}

/**
 * The decision cache in Redis, shared by every instance: one key per decision with its own TTL
 * (`<prefix>cache:<hash>`), and per API key a set of the hashes it stored, so a purge by key finds
 * them without scanning. Any Redis failure is a miss, never a failed request.
 */
export function createRedisCache(options: RedisCacheOptions): DecisionCache & { connect(): Promise<void> } {
  const redis = createFailFastRedis(options.url);
  const entryKey = (hash: string) => `${options.keyPrefix}cache:${hash}`;
  const ownerKey = (owner: string) => `${options.keyPrefix}cache-owner:${owner}`;
  const failed = (error: unknown) => options.onUnavailable(error as Error);

  return {
    async get(key) {
      try {
        const text = await redis.get(entryKey(key.hash));
        return text === null ? undefined : (JSON.parse(text) as CachedDecision);
      } catch (error) {
        failed(error);
        return undefined;
      }
    },
    async set(key, decision, ttlSeconds) {
      try {
        const ttlMs = ttlSeconds * 1000;
        await redis
          .multi()
          .set(entryKey(key.hash), JSON.stringify(decision), 'PX', ttlMs)
          .sadd(ownerKey(key.owner), key.hash)
          // The index lives as long as its longest entry could.
          .pexpire(ownerKey(key.owner), ttlMs, 'GT')
          .pexpire(ownerKey(key.owner), ttlMs, 'NX')
          .exec();
      } catch (error) {
        failed(error);
      }
    },
    async purge(owner) {
      if (owner !== undefined) {
        const hashes = await redis.smembers(ownerKey(owner));
        const dropped = hashes.length === 0 ? 0 : await redis.unlink(...hashes.map(entryKey));
        await redis.unlink(ownerKey(owner));
        return dropped;
      }
      let dropped = 0;
      for (const pattern of [`${options.keyPrefix}cache:*`, `${options.keyPrefix}cache-owner:*`]) {
        let cursor = '0';
        do {
          const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 500);
          cursor = next;
          if (keys.length > 0) {
            const removed = await redis.unlink(...keys);
            if (pattern.endsWith('cache:*')) dropped += removed;
          }
        } while (cursor !== '0');
      }
      return dropped;
    },
    /** Until connected every lookup misses; the client reconnects by itself after a failure. */
    async connect() {
      await redis.connect();
    },
    async close() {
      redis.disconnect();
    },
  };
}
