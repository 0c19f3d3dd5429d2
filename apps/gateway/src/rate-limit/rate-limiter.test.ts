import { describe, expect, it } from 'vitest';
import { createMemoryRateLimiter } from './rate-limiter.ts';

describe('token bucket', () => {
  it('allows a burst of one minute’s allowance, then refuses with the wait for the next token', async () => {
    const limiter = createMemoryRateLimiter();
    const t0 = 1_000_000;
    for (let i = 0; i < 60; i++) expect(await limiter.take('k', 60, t0)).toEqual({ ok: true });
    expect(await limiter.take('k', 60, t0)).toEqual({ ok: false, retryAfterMs: 1000 });
    expect(await limiter.take('k', 60, t0 + 400)).toEqual({ ok: false, retryAfterMs: 600 });
    expect(await limiter.take('k', 60, t0 + 1000)).toEqual({ ok: true });
  });

  it('refills continuously and never above the allowance', async () => {
    const limiter = createMemoryRateLimiter();
    const t0 = 0;
    for (let i = 0; i < 6; i++) await limiter.take('k', 6, t0);
    // An hour later the bucket holds 6 tokens, not 360.
    for (let i = 0; i < 6; i++) expect((await limiter.take('k', 6, t0 + 3_600_000)).ok).toBe(true);
    expect((await limiter.take('k', 6, t0 + 3_600_000)).ok).toBe(false);
  });

  it('keeps keys apart', async () => {
    const limiter = createMemoryRateLimiter();
    expect((await limiter.take('a', 1, 0)).ok).toBe(true);
    expect((await limiter.take('a', 1, 0)).ok).toBe(false);
    expect((await limiter.take('b', 1, 0)).ok).toBe(true);
  });
});
