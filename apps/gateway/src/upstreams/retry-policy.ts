/** Statuses worth another attempt (docs/upstreams.md): timeouts, rate limits, server errors and overload. */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 429 || status === 529 || status >= 500;
}

/** Statuses that mean "come back later" rather than "broken": exhausted retries on them → 503. */
export function isBusyStatus(status: number): boolean {
  return status === 429 || status === 503 || status === 529;
}

/**
 * The wait the upstream asked for: `retry-after-ms` (milliseconds) first, then `Retry-After`
 * (seconds or an HTTP date). Undefined when absent or unreadable.
 */
export function retryAfterMs(
  headers: Record<string, string | string[] | undefined>,
  now = Date.now(),
): number | undefined {
  const first = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value);
  const ms = first(headers['retry-after-ms']);
  if (ms !== undefined && ms.trim() !== '' && Number.isFinite(Number(ms)) && Number(ms) >= 0)
    return Number(ms);
  const after = first(headers['retry-after']);
  if (after === undefined || after.trim() === '') return undefined;
  const seconds = Number(after);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(after);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
}

export const DEFAULT_BACKOFF: BackoffOptions = { initialMs: 200, maxMs: 5_000 };

/**
 * Exponential backoff with jitter for zero-based `attempt`: a random wait between half and all
 * of min(max, initial·2^attempt), so retrying callers spread out instead of arriving together.
 */
export function backoffMs(
  attempt: number,
  options: BackoffOptions = DEFAULT_BACKOFF,
  random = Math.random,
): number {
  const ceiling = Math.min(options.maxMs, options.initialMs * 2 ** attempt);
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}
