import { Redis } from 'ioredis';

/**
 * A Redis client for the request path (rate limits, the decision cache): it fails fast while
 * disconnected instead of queueing requests behind a reconnect, and reconnects by itself. Connect
 * it with `connect()`; until then, and while Redis is down, every command fails at once.
 */
export function createFailFastRedis(url: string, options: { autoPipelining?: boolean } = {}): Redis {
  const redis = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: 500,
    lazyConnect: true,
    // Commands issued in one turn of the event loop go out in one write: at 64 concurrent
    // requests, one write (and one wake-up of Redis) serves many of them. Off for a client that
    // gathers its own turn's work into one command (the rate limiter).
    enableAutoPipelining: options.autoPipelining ?? true,
  });
  // Connection errors surface through the commands that fail.
  redis.on('error', () => {});
  return redis;
}
