import type { CachedDecision } from './decision-cache.ts';

/** The leader of identical requests in flight: tells the others its decision, or that it failed. */
export interface Lead {
  done(decision: CachedDecision | undefined): void;
}

/** Either this request leads, or it follows the one that does: its decision, or undefined once it failed or took too long. */
export type Joined = { lead: Lead } | { follow: Promise<CachedDecision | undefined> };

/**
 * Identical requests in flight at once on one instance make one upstream call: the first leads,
 * the others wait for its decision and are answered as hits; if it fails, each of them goes on by
 * itself (docs/routes.md#decision-cache). Joining is synchronous, so no two requests can both
 * find no leader and both lead.
 */
export function createCoalescer() {
  const leaders = new Map<string, Promise<CachedDecision | undefined>>();
  return {
    /** Follow the leader of `hash` for at most `ms`, or lead it. */
    join(hash: string, ms: number): Joined {
      const leader = leaders.get(hash);
      if (leader !== undefined) return { follow: withinMs(leader, ms) };
      let resolve: (decision: CachedDecision | undefined) => void = () => {};
      leaders.set(hash, new Promise((r) => (resolve = r)));
      return {
        lead: {
          done(decision) {
            if (leaders.delete(hash)) resolve(decision);
          },
        },
      };
    },
  };
}

export type Coalescer = ReturnType<typeof createCoalescer>;

/** The promise's value, or undefined once `ms` have passed without one. */
async function withinMs<T>(promise: Promise<T | undefined>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
