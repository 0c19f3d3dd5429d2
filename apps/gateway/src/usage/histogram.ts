/**
 * Latency histograms (docs/usage.md): every usage record counts in the bucket of
 * its `elapsedMs`, a bucket holding latencies up to and including its bound (Prometheus's `le`),
 * the last one everything above 10 s. Percentiles are read back from the buckets alone.
 */
export const LATENCY_BOUNDS_MS = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000] as const;

/** One count per bound, and one more for latencies above the last bound. */
export const LATENCY_BUCKETS = LATENCY_BOUNDS_MS.length + 1;

/**
 * The q-quantile (0 < q ≤ 1) of the latencies counted in `counts` (one count per bucket, not
 * cumulative), interpolated linearly within its bucket exactly as Prometheus's
 * `histogram_quantile` does: the first bucket starts at 0, and a quantile landing above the last
 * bound is that bound. Milliseconds rounded to 0.01; null when nothing was counted.
 */
export function latencyQuantile(counts: readonly number[], q: number): number | null {
  const total = counts.reduce((sum, n) => sum + n, 0);
  if (total === 0) return null;
  const rank = q * total;
  let below = 0;
  for (let i = 0; i < counts.length; i++) {
    const count = counts[i] ?? 0;
    if (below + count >= rank && count > 0) {
      if (i >= LATENCY_BOUNDS_MS.length) return LATENCY_BOUNDS_MS[LATENCY_BOUNDS_MS.length - 1] as number;
      const start = i === 0 ? 0 : (LATENCY_BOUNDS_MS[i - 1] as number);
      const end = LATENCY_BOUNDS_MS[i] as number;
      return round2(start + (end - start) * ((rank - below) / count));
    }
    below += count;
  }
  return LATENCY_BOUNDS_MS[LATENCY_BOUNDS_MS.length - 1] as number;
}

/** The bucket a latency is counted in. */
export function latencyBucket(elapsedMs: number): number {
  const i = LATENCY_BOUNDS_MS.findIndex((bound) => elapsedMs <= bound);
  return i === -1 ? LATENCY_BOUNDS_MS.length : i;
}

const round2 = (n: number) => Math.round(n * 100) / 100;
