import type { UsagePoint } from '@decision-gateway/contract';
import { describe, expect, it } from 'vitest';
import { pointLabel, rangeStart, summarize } from './chart-data.ts';

const point = (at: string, requests: number, errors = 0, creditsUsed = 0): UsagePoint => ({
  at,
  requests,
  errors,
  creditsUsed,
  input_tokens: 0,
  output_tokens: 0,
  cacheHits: 0,
  p50ElapsedMs: null,
  p95ElapsedMs: null,
});

describe('chart data', () => {
  it('starts a range on a whole step, so it holds 24 hourly points or 30 daily ones', () => {
    const now = Date.parse('2026-11-23T10:30:00Z');
    expect(rangeStart('24h', now)).toBe('2026-11-22T11:00:00.000Z');
    expect(rangeStart('30d', now)).toBe('2026-10-25T00:00:00.000Z');
  });

  it('labels points by their step', () => {
    expect(pointLabel('2026-11-23T09:00:00.000Z', 'hour')).toBe('11/23 09:00');
    expect(pointLabel('2026-11-23T00:00:00.000Z', 'day')).toBe('11/23');
  });

  it('sums each chart for screen readers', () => {
    expect(summarize([point('a', 0)], 'requests')).toBe('No requests in this range.');
    const series = [
      { ...point('2026-11-23T09:00:00.000Z', 2, 1, 0.1), p50ElapsedMs: 4, p95ElapsedMs: 9 },
      { ...point('2026-11-23T10:00:00.000Z', 5, 0, 0.2), cacheHits: 3, p50ElapsedMs: 3, p95ElapsedMs: 30 },
    ];
    expect(summarize(series, 'requests')).toBe(
      '7 requests (1 failed) in this range; the busiest step began 2026-11-23T10:00:00.000Z with 5.',
    );
    expect(summarize(series, 'credits')).toBe(
      '0.3 credits spent in this range; 3 answers came from the cache.',
    );
    expect(summarize(series, 'latency')).toBe(
      'the slowest step began 2026-11-23T10:00:00.000Z: p50 3 ms, p95 30 ms.',
    );
  });
});
