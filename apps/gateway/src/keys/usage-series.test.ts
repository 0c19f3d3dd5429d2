import { describe, expect, it } from 'vitest';
import { fillSeries, seriesTooLong, stepsBetween } from './usage-series.ts';

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
    const bucket = {
      bucket: 1,
      requests: 4,
      errors: 1,
      creditsMicro: 1_234_567,
      inputTokens: 1234,
      outputTokens: 0,
      cacheHits: 2,
      p50ElapsedMs: 12,
      p95ElapsedMs: 40,
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
        p50ElapsedMs: 12,
        p95ElapsedMs: 40,
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
});
