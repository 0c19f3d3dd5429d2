import type { UsagePoint } from '@decision-gateway/contract';

export type Range = '24h' | '7d' | '30d';

/** Each range of the usage charts, and the step its points are summed by. */
export const RANGES: Record<Range, { label: string; ms: number; step: 'minute' | 'hour' | 'day' }> = {
  '24h': { label: '24 h', ms: 86_400_000, step: 'hour' },
  '7d': { label: '7 d', ms: 7 * 86_400_000, step: 'hour' },
  '30d': { label: '30 d', ms: 30 * 86_400_000, step: 'day' },
};

/** Where a range starts: the start of the step that holds `now − range`, so points fall on whole steps. */
export function rangeStart(range: Range, now: number): string {
  const { ms, step } = RANGES[range];
  const stepMs = step === 'day' ? 86_400_000 : step === 'hour' ? 3_600_000 : 60_000;
  return new Date(Math.floor((now - ms) / stepMs) * stepMs + stepMs).toISOString();
}

/** A short label for a point's time, by the range's step. */
export function pointLabel(at: string, step: 'minute' | 'hour' | 'day'): string {
  const d = new Date(at);
  const day = `${d.getUTCMonth() + 1}/${d.getUTCDate()}`;
  return step === 'day' ? day : `${day} ${String(d.getUTCHours()).padStart(2, '0')}:00`;
}

/** What each chart says to a screen reader: its totals, and its busiest or slowest step. */
export function summarize(series: readonly UsagePoint[], chart: 'requests' | 'credits' | 'latency'): string {
  const requests = series.reduce((sum, p) => sum + p.requests, 0);
  if (requests === 0) return 'No requests in this range.';
  if (chart === 'requests') {
    const errors = series.reduce((sum, p) => sum + p.errors, 0);
    const busiest = series.reduce((top, p) => (p.requests > top.requests ? p : top));
    return `${requests} requests (${errors} failed) in this range; the busiest step began ${busiest.at} with ${busiest.requests}.`;
  }
  if (chart === 'credits') {
    const credits = Math.round(series.reduce((sum, p) => sum + p.creditsUsed, 0) * 1e6) / 1e6;
    const hits = series.reduce((sum, p) => sum + p.cacheHits, 0);
    return `${credits} credits spent in this range; ${hits} answers came from the cache.`;
  }
  const timed = series.filter((p) => p.p95ElapsedMs !== null);
  const slowest = timed.reduce((top, p) => ((p.p95ElapsedMs ?? 0) > (top.p95ElapsedMs ?? 0) ? p : top));
  return `the slowest step began ${slowest.at}: p50 ${slowest.p50ElapsedMs} ms, p95 ${slowest.p95ElapsedMs} ms.`;
}
