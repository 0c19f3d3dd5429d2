/** Outcome of taking one token for a key: when taken, the whole tokens the bucket still holds. */
export type RateDecision = { ok: true; left: number } | { ok: false; retryAfterMs: number };

/**
 * Per-key request limits: in-process (one instance) or in Redis (shared by every instance).
 * `rate-limiter.test.ts` is the one contract both pass.
 */
export interface RateLimiter {
  take(keyId: string, limitPerMinute: number, now: number): Promise<RateDecision>;
  /**
   * Asked over the network: while it answers, a request its last answers leave room for is read
   * and reserved (core/evaluation/rate-limit.ts).
   */
  readonly remote?: boolean;
  /** For limiters behind a service: resolves while it answers (readiness); rejects saying why. */
  checkReachable?(): Promise<void>;
}

interface Bucket {
  tokens: number;
  updatedAt: number;
  limit: number;
}

/**
 * Token bucket (docs/operating.md): holds one minute's allowance and refills continuously, so a key may
 * burst up to its limit and then sustain limit/60 requests per second.
 */
export function createMemoryRateLimiter(): RateLimiter {
  const buckets = new Map<string, Bucket>();
  return {
    async take(keyId, limit, now) {
      const perMs = limit / 60_000;
      let bucket = buckets.get(keyId);
      if (bucket === undefined || bucket.limit !== limit) {
        bucket = { tokens: limit, updatedAt: now, limit };
        buckets.set(keyId, bucket);
      } else {
        bucket.tokens = Math.min(limit, bucket.tokens + (now - bucket.updatedAt) * perMs);
        bucket.updatedAt = now;
      }
      if (bucket.tokens >= 1) {
        bucket.tokens -= 1;
        return { ok: true, left: Math.floor(bucket.tokens) };
      }
      return { ok: false, retryAfterMs: Math.ceil((1 - bucket.tokens) / perMs) };
    },
  };
}
