import { describe, expect, it } from 'vitest';
import type { CachedDecision, DecisionCache, DecisionKey } from './decision-cache.ts';

export interface CacheFixture {
  cache: DecisionCache;
  /** Moves the cache's clock on, or (for a real-time store) waits until that much has passed. */
  advance(ms: number): Promise<void>;
  cleanup(): Promise<void>;
}

const decision = (upstream: string): CachedDecision => ({
  answers: { q: { type: 'noul', noul: 0.8 } },
  upstream,
  storedAt: 1_000,
});
let n = 0;
const key = (owner: string): DecisionKey => ({
  hash: `h${++n}_${Math.random().toString(36).slice(2)}`,
  owner,
});

/** The one suite every DecisionCache passes (docs/routes.md#decision-cache). */
export function decisionCacheContract(name: string, open: () => Promise<CacheFixture>) {
  describe(`${name}: DecisionCache contract`, () => {
    async function withCache(run: (fixture: CacheFixture) => Promise<void>) {
      const fixture = await open();
      try {
        await run(fixture);
      } finally {
        await fixture.cleanup();
      }
    }

    it('gives back what was stored, and nothing for a key never stored', () =>
      withCache(async ({ cache }) => {
        const stored = key('key_a');
        await cache.set(stored, decision('local'), 60);
        expect(await cache.get(stored)).toEqual(decision('local'));
        expect(await cache.get(key('key_a'))).toBeUndefined();
      }));

    it('forgets a decision once its TTL has passed', () =>
      withCache(async ({ cache, advance }) => {
        const stored = key('key_a');
        const kept = key('key_a');
        await cache.set(stored, decision('local'), 1);
        await cache.set(kept, decision('local'), 3600);
        await advance(1_100);
        expect(await cache.get(stored)).toBeUndefined();
        expect(await cache.get(kept)).toEqual(decision('local'));
      }));

    it('purges one API key’s decisions, or all, saying how many', () =>
      withCache(async ({ cache }) => {
        const a1 = key('key_a');
        const a2 = key('key_a');
        const b = key('key_b');
        for (const k of [a1, a2, b]) await cache.set(k, decision('local'), 60);
        expect(await cache.purge('key_a')).toBe(2);
        expect(await cache.get(a1)).toBeUndefined();
        expect(await cache.get(b)).toEqual(decision('local'));
        expect(await cache.purge('key_a')).toBe(0);
        expect(await cache.purge()).toBe(1);
        expect(await cache.get(b)).toBeUndefined();
      }));
  });
}
