import type { BudgetWindow } from '@decision-gateway/contract';

/**
 * Budget windows (docs/budgets.md): UTC calendar periods. Minutes, hours and days from their
 * boundaries, weeks from Monday 00:00, months from the 1st 00:00. A window is found by arithmetic
 * on the time alone, so spend starts from 0 at each boundary with no job to run. Both stores
 * take the starts from here: the rule lives in one place.
 */

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** The start (epoch ms, inclusive) of the window of this kind that holds `at`. */
export function windowStart(window: BudgetWindow, at: number): number {
  switch (window) {
    case 'minute':
      return at - mod(at, MINUTE);
    case 'hour':
      return at - mod(at, HOUR);
    case 'day':
      return at - mod(at, DAY);
    case 'week': {
      const day = at - mod(at, DAY);
      // 1970-01-01 was a Thursday: getUTCDay() is 0 on Sunday, so Monday is 6 days back then.
      const sinceMonday = (new Date(day).getUTCDay() + 6) % 7;
      return day - sinceMonday * DAY;
    }
    case 'month': {
      const date = new Date(at);
      return Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1);
    }
  }
}

/** The end (epoch ms, exclusive) of the window of this kind that holds `at`: when it resets. */
export function windowEnd(window: BudgetWindow, at: number): number {
  const start = windowStart(window, at);
  switch (window) {
    case 'minute':
      return start + MINUTE;
    case 'hour':
      return start + HOUR;
    case 'day':
      return start + DAY;
    case 'week':
      return start + 7 * DAY;
    case 'month': {
      const date = new Date(start);
      return Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1);
    }
  }
}

/** The start of every window kind at `at`, as the stores take them. */
export function windowStarts(at: number): Record<BudgetWindow, number> {
  return {
    minute: windowStart('minute', at),
    hour: windowStart('hour', at),
    day: windowStart('day', at),
    week: windowStart('week', at),
    month: windowStart('month', at),
  };
}

const mod = (n: number, m: number) => ((n % m) + m) % m;
