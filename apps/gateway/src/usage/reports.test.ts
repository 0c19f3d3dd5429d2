import { describe, expect, it } from 'vitest';
import { LATENCY_BUCKETS, latencyBucket, latencyQuantile } from './histogram.ts';
import { fillSeries, seriesTooLong, spansCovering, stepsBetween } from './reports.ts';

const hour = 3_600_000;
const t0 = Date.parse('2026-11-23T00:00:00Z');

describe('usage series maths', () => {
  it('counts a started step as a point', () => {
    expect(stepsBetween(t0, t0 + 3 * hour, 'hour')).toBe(3);
    expect(stepsBetween(t0, t0 + 3 * hour + 1, 'hour')).toBe(4);
    expect(stepsBetween(t0, t0 + 60_000, 'minute')).toBe(1);
  });

  it('refuses more than 1000 points, and allows exactly 1000', () => {
    expect(seriesTooLong(t0, t0 + 1000 * 60_000, 'minute')).toBeUndefined();
    expect(seriesTooLong(t0, t0 + 1001 * 60_000, 'minute')).toMatchObject({
      code: 40001,
      issues: [{ path: ['step'] }],
    });
  });

  it('fills the steps without records with zeros and no latency, oldest first', () => {
    // 4 latencies: 2 in (10, 25], 2 in (25, 50]
    const bucket = {
      at: t0 + hour,
      requests: 4,
      errors: 1,
      creditsMicro: 1_234_567,
      inputTokens: 1234,
      outputTokens: 0,
      cacheHits: 2,
      latency: [0, 0, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0],
    };
    expect(fillSeries([bucket], t0, t0 + 3 * hour, 'hour')).toEqual([
      {
        at: '2026-11-23T00:00:00.000Z',
        requests: 0,
        errors: 0,
        creditsUsed: 0,
        input_tokens: 0,
        output_tokens: 0,
        cacheHits: 0,
        p50ElapsedMs: null,
        p95ElapsedMs: null,
      },
      {
        at: '2026-11-23T01:00:00.000Z',
        requests: 4,
        errors: 1,
        creditsUsed: 1.234567,
        input_tokens: 1234,
        output_tokens: 0,
        cacheHits: 2,
        p50ElapsedMs: 25,
        p95ElapsedMs: 47.5,
      },
      {
        at: '2026-11-23T02:00:00.000Z',
        requests: 0,
        errors: 0,
        creditsUsed: 0,
        input_tokens: 0,
        output_tokens: 0,
        cacheHits: 0,
        p50ElapsedMs: null,
        p95ElapsedMs: null,
      },
    ]);
  });

  it('covers a range with whole days, the hours around them and the minutes at the edges', () => {
    const minute = 60_000;
    const day = 24 * hour;
    const from = t0 + 22 * hour + 50 * minute; // 22:50 on day 0
    const to = t0 + 3 * day + 2 * hour + 7 * minute; // 02:07 on day 3
    expect(spansCovering(from, to)).toEqual([
      { stepMs: minute, from, to: t0 + 23 * hour },
      { stepMs: hour, from: t0 + 23 * hour, to: t0 + day },
      { stepMs: day, from: t0 + day, to: t0 + 3 * day },
      { stepMs: hour, from: t0 + 3 * day, to: t0 + 3 * day + 2 * hour },
      { stepMs: minute, from: t0 + 3 * day + 2 * hour, to },
    ]);
    // Within one hour: minutes only; within one day: no day rollups.
    expect(spansCovering(t0 + 5 * minute, t0 + 9 * minute)).toEqual([
      { stepMs: minute, from: t0 + 5 * minute, to: t0 + 9 * minute },
    ]);
    expect(spansCovering(t0 + 2 * hour, t0 + 5 * hour)).toEqual([
      { stepMs: hour, from: t0 + 2 * hour, to: t0 + 5 * hour },
    ]);
    expect(spansCovering(t0, t0 + day)).toEqual([{ stepMs: day, from: t0, to: t0 + day }]);
  });
});

describe('latency percentiles from buckets, as Prometheus histogram_quantile', () => {
  const counts = (values: Record<number, number>) =>
    Array.from({ length: LATENCY_BUCKETS }, (_, i) => values[i] ?? 0);

  it('counts a latency in the first bucket whose bound holds it, bounds inclusive', () => {
    expect([0, 5, 5.5, 10, 11, 10_000, 10_001].map(latencyBucket)).toEqual([0, 0, 1, 1, 2, 10, 11]);
  });

  it('interpolates linearly within the bucket, the first starting at 0', () => {
    // 10 in [0, 5]: the median is at rank 5 of 10 → 2.5 ms; p95 at rank 9.5 → 4.75 ms.
    expect(latencyQuantile(counts({ 0: 10 }), 0.5)).toBe(2.5);
    expect(latencyQuantile(counts({ 0: 10 }), 0.95)).toBe(4.75);
    // 1 in (5,10], 3 in (100,250]: rank 2 → 100 + 150 × 1/3 = 150 ms.
    expect(latencyQuantile(counts({ 1: 1, 5: 3 }), 0.5)).toBe(150);
    // Rounded to 0.01: rank 1.9 of 3 in (25,50] → 25 + 25 × 1.9/3 = 40.8333…
    expect(latencyQuantile(counts({ 3: 3 }), 1.9 / 3)).toBe(40.83);
  });

  it('gives the last bound for a quantile above it, and null for no latencies', () => {
    expect(latencyQuantile(counts({ 0: 1, 11: 9 }), 0.5)).toBe(10_000);
    expect(latencyQuantile(counts({}), 0.5)).toBeNull();
  });

  it('skips empty buckets the rank lands on the edge of', () => {
    // Rank exactly the first bucket's count: the quantile is that bucket's bound, not a later one.
    expect(latencyQuantile(counts({ 0: 2, 4: 2 }), 0.5)).toBe(5);
  });
});
