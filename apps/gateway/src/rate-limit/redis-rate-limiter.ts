import type { Result } from 'ioredis';
import { createFailFastRedis } from '../redis-client.ts';
import type { RateDecision, RateLimiter } from './rate-limiter.ts';

/**
 * The token bucket of docs/operating.md in Redis, so every instance shares one bucket per key. One Lua
 * script reads, refills, takes and writes the bucket: Redis runs it atomically, so concurrent
 * takes from any number of instances never lose an update. Time comes from the callers' clocks;
 * a caller whose clock lags never refills a bucket backwards (elapsed time is at least 0).
 */
const TAKE = `
local limit = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
local per_ms = limit / 60000
local bucket = redis.call('HMGET', KEYS[1], 'tokens', 'at', 'limit')
local tokens = tonumber(bucket[1])
local at = tonumber(bucket[2])
if tokens == nil or tonumber(bucket[3]) ~= limit then
  tokens = limit
  at = now
elseif now > at then
  tokens = math.min(limit, tokens + (now - at) * per_ms)
  at = now
end
local ok = 0
local retry_after = 0
if tokens >= 1 then
  tokens = tokens - 1
  ok = 1
else
  retry_after = math.ceil((1 - tokens) / per_ms)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(at), 'limit', tostring(limit))
-- A bucket untouched for a minute is full again, the same as no bucket: let Redis forget it.
redis.call('PEXPIRE', KEYS[1], 61000)
return {ok, retry_after, math.floor(tokens)}
`;

export interface RedisRateLimiterOptions {
  url: string;
  keyPrefix: string;
  /** Told when Redis cannot be asked and a request goes through unlimited (fail open). */
  onUnavailable: (error: Error) => void;
}

export interface SharedRateLimiter extends RateLimiter {
  /** The first connection (at start): resolves once connected, rejects if Redis cannot be reached then. */
  connect(): Promise<void>;
  checkReachable(): Promise<void>;
  close(): Promise<void>;
}

// The script defined below, typed the way ioredis documents for custom commands.
declare module 'ioredis' {
  interface RedisCommander<Context> {
    /** [1 when taken, the wait for the next token in ms, the whole tokens left]. */
    dgTake(key: string, limit: number, now: number): Result<[number, number, number], Context>;
  }
}

/**
 * When Redis is down the limiter fails open: the request is served without a limit, a warning is
 * logged and `dg_rate_limit_unavailable_total` counts it, and /readyz answers 503 so a load
 * balancer can route around the instance. Refusing every request because the limiter's store is
 * down would turn a Redis outage into a full gateway outage; credits stay exact either way.
 */
export function createRedisRateLimiter(options: RedisRateLimiterOptions): SharedRateLimiter {
  const redis = createFailFastRedis(options.url);
  redis.defineCommand('dgTake', { numberOfKeys: 1, lua: TAKE });

  return {
    remote: true,
    async take(keyId, limitPerMinute, now): Promise<RateDecision> {
      try {
        const [ok, retryAfterMs, left] = await redis.dgTake(
          `${options.keyPrefix}rl:${keyId}`,
          limitPerMinute,
          now,
        );
        return ok === 1 ? { ok: true, left } : { ok: false, retryAfterMs };
      } catch (error) {
        options.onUnavailable(error as Error);
        // Nothing is known of the bucket: the next request waits for an answer again.
        return { ok: true, left: 0 };
      }
    },
    async connect() {
      await redis.connect();
    },
    async checkReachable() {
      await redis.ping();
    },
    async close() {
      redis.disconnect();
    },
  };
}
