import type { Result } from 'ioredis';
import { createFailFastRedis } from '../redis-client.ts';
import type { RateDecision, RateLimiter } from './rate-limiter.ts';

/**
 * The token bucket of docs/operating.md in Redis, so every instance shares one bucket per key. One Lua
 * script reads, refills, takes and writes each bucket: Redis runs it atomically, so concurrent
 * takes from any number of instances never lose an update. Time comes from the callers' clocks;
 * a caller whose clock lags never refills a bucket backwards (elapsed time is at least 0).
 *
 * One call takes for every request of a turn of the event loop, in the order they asked: KEYS are
 * the buckets, ARGV each one's limit and time in pairs; the answer is three numbers a take.
 */
const TAKE = `
local answers = {}
for i = 1, #KEYS do
  local limit = tonumber(ARGV[2 * i - 1])
  local now = tonumber(ARGV[2 * i])
  local per_ms = limit / 60000
  local bucket = redis.call('HMGET', KEYS[i], 'tokens', 'at', 'limit')
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
  redis.call('HSET', KEYS[i], 'tokens', tostring(tokens), 'at', tostring(at), 'limit', tostring(limit))
  -- A bucket untouched for a minute is full again, the same as no bucket: let Redis forget it.
  redis.call('PEXPIRE', KEYS[i], 61000)
  answers[3 * i - 2] = ok
  answers[3 * i - 1] = retry_after
  answers[3 * i] = math.floor(tokens)
end
return answers
`;

/**
 * The most takes one call carries: a turn with more sends several calls, so that no one script
 * holds Redis (and every other instance's takes) for long.
 */
const MAX_TAKES_A_CALL = 256;

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
    /**
     * `keys` buckets, then a limit and a time for each: for each take, 1 when taken, the wait
     * for the next token in ms, and the whole tokens left.
     */
    dgTake(keys: number, ...bucketsThenLimitsAndTimes: (string | number)[]): Result<number[], Context>;
  }
}

/** A take waiting for its turn's call. */
interface Take {
  bucket: string;
  limit: number;
  now: number;
  answer(decision: RateDecision): void;
}

/**
 * When Redis is down the limiter fails open: the request is served without a limit, a warning is
 * logged and `dg_rate_limit_unavailable_total` counts it, and /readyz answers 503 so a load
 * balancer can route around the instance. Refusing every request because the limiter's store is
 * down would turn a Redis outage into a full gateway outage; credits stay exact either way.
 */
export function createRedisRateLimiter(options: RedisRateLimiterOptions): SharedRateLimiter {
  // The limiter gathers a turn's takes itself (below), so its client sends each call at once.
  const redis = createFailFastRedis(options.url, { autoPipelining: false });
  redis.defineCommand('dgTake', { lua: TAKE });
  let waiting: Take[] = [];

  /** The turn's takes, asked of Redis in calls of at most MAX_TAKES_A_CALL. */
  function send() {
    const takes = waiting;
    waiting = [];
    for (let from = 0; from < takes.length; from += MAX_TAKES_A_CALL)
      void ask(takes.slice(from, from + MAX_TAKES_A_CALL));
  }

  async function ask(takes: Take[]) {
    const args: (string | number)[] = takes.map((take) => take.bucket);
    for (const take of takes) args.push(take.limit, take.now);
    try {
      const answers = await redis.dgTake(takes.length, ...args);
      // Three numbers a take, in the order asked: taken (1 or 0), the wait in ms, the tokens left.
      for (const [i, take] of takes.entries()) {
        const at = 3 * i;
        take.answer(
          answers[at] === 1
            ? { ok: true, left: answers[at + 2] as number }
            : { ok: false, retryAfterMs: answers[at + 1] as number },
        );
      }
    } catch (error) {
      for (const take of takes) {
        options.onUnavailable(error as Error);
        // Nothing is known of the bucket: the next request waits for an answer again.
        take.answer({ ok: true, left: 0 });
      }
    }
  }

  return {
    remote: true,
    take(keyId, limitPerMinute, now): Promise<RateDecision> {
      return new Promise((answer) => {
        // The first take of a turn sends the turn's takes once the turn's I/O has been read.
        if (waiting.length === 0) setImmediate(send);
        waiting.push({ bucket: `${options.keyPrefix}rl:${keyId}`, limit: limitPerMinute, now, answer });
      });
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
