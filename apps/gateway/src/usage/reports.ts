import {
  failure,
  type GatewayFailure,
  SERIES_STEPS,
  type SeriesStep,
  type UsageFigures,
  type UsagePoint,
  type UsageSeries,
  type UsageSeriesQuery,
  type UsageSummary,
  type UsageSummaryQuery,
} from '@decision-gateway/contract';
import { fromMicro } from '../core/credits.ts';
import { ROLLUP_KEPT_MS, type RollupSpan, type RollupSums } from '../store/rollups.ts';
import type { SeriesRow, Store } from '../store/store.ts';
import { latencyQuantile } from './histogram.ts';

/**
 * What an operator reads of usage (docs/usage.md): series and summaries, from the
 * rollups alone, so that a read costs the same whatever the traffic was.
 */

/** The most points one series may have (docs/operating.md#admin-api). */
export const MAX_SERIES_POINTS = 1000;

/** The longest range a summary may cover. */
export const MAX_SUMMARY_DAYS = 400;

type Result<T> = { ok: true; value: T } | { ok: false; error: GatewayFailure };

const invalid = (path: string, message: string): Result<never> => ({
  ok: false,
  error: failure('invalid_request', message, { issues: [{ path: [path], message }] }),
});

/** How long rollups of each step are kept; day rollups for the key's life. */
const KEPT_MS: Record<SeriesStep, number> = {
  minute: ROLLUP_KEPT_MS.minute,
  hour: ROLLUP_KEPT_MS.hour,
  day: Number.POSITIVE_INFINITY,
};

const floorTo = (t: number, stepMs: number) => Math.floor(t / stepMs) * stepMs;
const ceilTo = (t: number, stepMs: number) => Math.ceil(t / stepMs) * stepMs;

/** How many steps from `from` (inclusive) to `to` (exclusive): a started step counts. */
export function stepsBetween(from: number, to: number, step: SeriesStep): number {
  return Math.ceil((to - from) / SERIES_STEPS[step]);
}

/** 40001 when a series would have more than 1000 points. */
export function seriesTooLong(from: number, to: number, step: SeriesStep): GatewayFailure | undefined {
  const points = stepsBetween(from, to, step);
  if (points <= MAX_SERIES_POINTS) return undefined;
  const message = `${points} points of a ${step} from ${new Date(from).toISOString()}: at most ${MAX_SERIES_POINTS}; take a larger step or a shorter range`;
  return failure('invalid_request', message, { issues: [{ path: ['step'], message }] });
}

/** 40001 when `from` reaches back past the rollups of this step that are still kept. */
function resolutionGone(from: number, now: number, step: SeriesStep): Result<never> | undefined {
  if (from >= now - KEPT_MS[step]) return undefined;
  const days = KEPT_MS[step] / 86_400_000;
  return invalid(
    'from',
    `per-${step} usage is kept ${days} days: ${new Date(from).toISOString()} is older, so that resolution is gone; take a larger step`,
  );
}

/** A series point or a summary entry's figures from rollup sums. */
export function figuresOf(sums: RollupSums): UsageFigures {
  return {
    requests: sums.requests,
    errors: sums.errors,
    creditsUsed: fromMicro(sums.creditsMicro),
    input_tokens: sums.inputTokens,
    output_tokens: sums.outputTokens,
    cacheHits: sums.cacheHits,
    p50ElapsedMs: latencyQuantile(sums.latency, 0.5),
    p95ElapsedMs: latencyQuantile(sums.latency, 0.95),
  };
}

const EMPTY: RollupSums = {
  requests: 0,
  errors: 0,
  creditsMicro: 0,
  inputTokens: 0,
  outputTokens: 0,
  cacheHits: 0,
  latency: [],
};

/**
 * The store's rows (only steps that have any) as the full series: one point per step from `from`,
 * oldest first, empty steps as zeros with no latency (docs/operating.md#admin-api).
 */
export function fillSeries(
  rows: readonly SeriesRow[],
  from: number,
  to: number,
  step: SeriesStep,
): UsagePoint[] {
  const stepMs = SERIES_STEPS[step];
  const byStart = new Map(rows.map((row) => [row.at, row]));
  return Array.from({ length: stepsBetween(from, to, step) }, (_, i) => {
    const at = from + i * stepMs;
    return { at: new Date(at).toISOString(), ...figuresOf(byStart.get(at) ?? EMPTY) };
  });
}

/**
 * The spans of rollups that cover [from, to) with the fewest rows: whole days from day rollups,
 * the hours around them from hour rollups, the minutes at the edges from minute rollups. `from`
 * and `to` are on minute boundaries.
 */
export function spansCovering(from: number, to: number): RollupSpan[] {
  const { minute, hour, day } = SERIES_STEPS;
  const h1 = Math.min(ceilTo(from, hour), to);
  const h2 = Math.max(floorTo(to, hour), h1);
  const d1 = Math.min(ceilTo(h1, day), h2);
  const d2 = Math.max(floorTo(h2, day), d1);
  const spans: RollupSpan[] = [
    { stepMs: minute, from, to: h1 },
    { stepMs: hour, from: h1, to: d1 },
    { stepMs: day, from: d1, to: d2 },
    { stepMs: hour, from: d2, to: h2 },
    { stepMs: minute, from: h2, to },
  ];
  return spans.filter((span) => span.from < span.to);
}

export function createUsageReports(store: Store, clock: () => number = Date.now) {
  const unknownKey = async (keyId: string | undefined): Promise<Result<never> | undefined> => {
    if (keyId === undefined || (await store.getKey(keyId))) return undefined;
    return { ok: false, error: failure('not_found', `no key with id "${keyId}"`) };
  };

  return {
    /** Usage summed per UTC step from `from` rounded down to its step (docs/operating.md#admin-api). */
    async series(query: UsageSeriesQuery): Promise<Result<UsageSeries>> {
      const now = clock();
      const stepMs = SERIES_STEPS[query.step];
      const from = floorTo(Date.parse(query.from), stepMs);
      const to = query.to === undefined ? now : Date.parse(query.to);
      const tooLong = seriesTooLong(from, to, query.step);
      if (tooLong) return { ok: false, error: tooLong };
      const gone = resolutionGone(from, now, query.step);
      if (gone) return gone;
      const missing = await unknownKey(query.keyId);
      if (missing) return missing;
      const rows = await store.usageSeries({
        ...(query.keyId !== undefined && { keyId: query.keyId }),
        stepMs,
        from,
        to: ceilTo(to, stepMs),
      });
      return { ok: true, value: { step: query.step, series: fillSeries(rows, from, to, query.step) } };
    },

    /**
     * Usage over a range (docs/usage.md): `from` rounded down and `to` up to the
     * finest resolution still kept at `from` (a minute within 14 days, an hour within 400, else
     * a day); totals, by route, by upstream and the 20 keys that spent most.
     */
    async summary(query: UsageSummaryQuery): Promise<Result<UsageSummary>> {
      const now = clock();
      const asked = Date.parse(query.from);
      const until = query.to === undefined ? now : Date.parse(query.to);
      if (until - asked > MAX_SUMMARY_DAYS * SERIES_STEPS.day)
        return invalid('to', `a summary covers at most ${MAX_SUMMARY_DAYS} days; take a shorter range`);
      const step: SeriesStep = !resolutionGone(asked, now, 'minute')
        ? 'minute'
        : !resolutionGone(asked, now, 'hour')
          ? 'hour'
          : 'day';
      const from = floorTo(asked, SERIES_STEPS[step]);
      const to = ceilTo(until, SERIES_STEPS[step]);
      const missing = await unknownKey(query.keyId);
      if (missing) return missing;
      const rows = await store.usageSummary({
        ...(query.keyId !== undefined && { keyId: query.keyId }),
        spans: spansCovering(from, to),
      });
      return {
        ok: true,
        value: {
          from: new Date(from).toISOString(),
          to: new Date(to).toISOString(),
          totals: figuresOf(rows.totals),
          byRoute: rows.byRoute.map(({ route, ...sums }) => ({ route, ...figuresOf(sums) })),
          byUpstream: rows.byUpstream.map(({ upstream, ...sums }) => ({ upstream, ...figuresOf(sums) })),
          byKey: rows.byKey.map(({ keyId, name, prefix, ...sums }) => ({
            keyId,
            name,
            prefix,
            ...figuresOf(sums),
          })),
          byProject: rows.byProject.map(({ projectId, name, ...sums }) => ({
            projectId,
            name,
            ...figuresOf(sums),
          })),
        },
      };
    },
  };
}

export type UsageReports = ReturnType<typeof createUsageReports>;
