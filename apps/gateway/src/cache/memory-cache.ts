import { LRUCache } from 'lru-cache';
import type { CachedDecision, DecisionCache, DecisionKey } from './decision-cache.ts';

interface Entry {
  decision: CachedDecision;
  owner: string;
}

export interface MemoryCacheOptions {
  /** CACHE_MAX_BYTES: past it, the least recently used decisions go first. */
  maxBytes: number;
  /** For tests of expiry only: the clock lru-cache reads TTLs from. */
  perf?: { now(): number };
}

/**
 * The decision cache in process: lru-cache (isaacs'), the well-kept LRU with per-entry TTLs and a
 * size bound, so memory stays within CACHE_MAX_BYTES whatever callers send.
 */
export function createMemoryCache(options: MemoryCacheOptions): DecisionCache {
  const cache = new LRUCache<string, Entry>({
    maxSize: options.maxBytes,
    // UTF-16 code units of the stored JSON: near enough to bytes for a bound, and cheap.
    sizeCalculation: (entry) => 2 * JSON.stringify(entry.decision.answers).length + 200,
    // An injected clock is read on every check (lru-cache otherwise reuses `now` for 1 ms).
    ...(options.perf && { perf: options.perf, ttlResolution: 0 }),
  });
  return {
    async get(key: DecisionKey) {
      return cache.get(key.hash)?.decision;
    },
    async set(key, decision, ttlSeconds) {
      cache.set(key.hash, { decision, owner: key.owner }, { ttl: ttlSeconds * 1000 });
    },
    async purge(owner) {
      if (owner === undefined) {
        const count = cache.size;
        cache.clear();
        return count;
      }
      let count = 0;
      for (const [hash, entry] of cache.entries()) {
        if (entry.owner === owner && cache.delete(hash)) count++;
      }
      return count;
    },
    bytes: () => cache.calculatedSize,
  };
}
