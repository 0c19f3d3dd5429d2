import type { BudgetWindow } from '@decision-gateway/contract';
import { describe, expect, it } from 'vitest';
import { windowEnd, windowStart, windowStarts } from './windows.ts';

const t = (iso: string) => Date.parse(iso);
const span = (window: BudgetWindow, at: string) => [
  new Date(windowStart(window, t(at))).toISOString(),
  new Date(windowEnd(window, t(at))).toISOString(),
];

describe('budget windows: UTC calendar periods found by arithmetic', () => {
  it('minutes, hours and days start at their boundaries; the last millisecond stays in its window', () => {
    expect(span('minute', '2026-11-26T15:42:59.999Z')).toEqual([
      '2026-11-26T15:42:00.000Z',
      '2026-11-26T15:43:00.000Z',
    ]);
    expect(span('minute', '2026-11-26T15:43:00.000Z')[0]).toBe('2026-11-26T15:43:00.000Z');
    expect(span('hour', '2026-11-26T15:42:10Z')).toEqual([
      '2026-11-26T15:00:00.000Z',
      '2026-11-26T16:00:00.000Z',
    ]);
    expect(span('day', '2026-11-26T23:59:59.999Z')).toEqual([
      '2026-11-26T00:00:00.000Z',
      '2026-11-27T00:00:00.000Z',
    ]);
  });

  it('weeks start on Monday 00:00 UTC, whatever the day', () => {
    // 2026-11-26 is a Thursday; 2026-11-23 the Monday before it.
    expect(span('week', '2026-11-26T10:00:00Z')).toEqual([
      '2026-11-23T00:00:00.000Z',
      '2026-11-30T00:00:00.000Z',
    ]);
    expect(span('week', '2026-11-23T00:00:00Z')[0]).toBe('2026-11-23T00:00:00.000Z');
    expect(span('week', '2026-11-29T23:59:59.999Z')[0]).toBe('2026-11-23T00:00:00.000Z');
    expect(span('week', '2026-11-30T00:00:00Z')[0]).toBe('2026-11-30T00:00:00.000Z');
    // A week across the year's end.
    expect(span('week', '2027-01-01T12:00:00Z')).toEqual([
      '2026-12-28T00:00:00.000Z',
      '2027-01-04T00:00:00.000Z',
    ]);
  });

  it('months start on the 1st, a leap February ends on the 29th, December ends with the year', () => {
    expect(span('month', '2028-02-29T23:59:59.999Z')).toEqual([
      '2028-02-01T00:00:00.000Z',
      '2028-03-01T00:00:00.000Z',
    ]);
    expect(span('month', '2027-02-28T12:00:00Z')[1]).toBe('2027-03-01T00:00:00.000Z');
    expect(span('month', '2026-12-31T23:59:59.999Z')).toEqual([
      '2026-12-01T00:00:00.000Z',
      '2027-01-01T00:00:00.000Z',
    ]);
    expect(span('month', '2027-01-01T00:00:00Z')[0]).toBe('2027-01-01T00:00:00.000Z');
  });

  it('a leap day is a day of its own', () => {
    expect(span('day', '2028-02-29T08:00:00Z')).toEqual([
      '2028-02-29T00:00:00.000Z',
      '2028-03-01T00:00:00.000Z',
    ]);
  });

  it('gives every kind’s start at once, each holding the time', () => {
    const at = t('2026-11-26T15:42:10.123Z');
    const starts = windowStarts(at);
    for (const [window, start] of Object.entries(starts)) {
      expect(start).toBeLessThanOrEqual(at);
      expect(windowEnd(window as BudgetWindow, at)).toBeGreaterThan(at);
    }
    expect(starts.month).toBe(t('2026-11-01T00:00:00Z'));
  });
});
