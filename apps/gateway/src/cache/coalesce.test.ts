import { describe, expect, it } from 'vitest';
import { createCoalescer, type Joined, type Lead } from './coalesce.ts';

const decision = { answers: {}, upstream: 'a', storedAt: 1 };
const leadOf = (joined: Joined) => ('lead' in joined ? joined.lead : undefined) as Lead;
const followed = (joined: Joined) => ('follow' in joined ? joined.follow : Promise.reject(new Error('led')));

describe('request coalescing', () => {
  it('one leader per decision; followers get its decision, or nothing when it fails', async () => {
    const coalescer = createCoalescer();
    const lead = leadOf(coalescer.join('h', 1_000));
    expect(lead).toBeDefined();
    const follower = followed(coalescer.join('h', 10_000));
    lead.done(decision);
    expect(await follower).toBe(decision);
    // Done: the next identical request leads again, and its failure tells followers nothing.
    const again = leadOf(coalescer.join('h', 1_000));
    const waiting = followed(coalescer.join('h', 10_000));
    again.done(undefined);
    expect(await waiting).toBeUndefined();
    // Another decision is led apart.
    expect(leadOf(coalescer.join('other', 1_000))).toBeDefined();
  });

  it('a follower waits no longer than it may', async () => {
    const coalescer = createCoalescer();
    coalescer.join('slow', 1_000);
    expect(await followed(coalescer.join('slow', 5))).toBeUndefined();
  });
});
