import {
  failure,
  type GatewayFailure,
  SERIES_STEPS,
  type SeriesStep,
  type UsagePoint,
} from '@decision-gateway/contract';
import { fromMicro } from '../core/credits.ts';
import type { SeriesBucket } from '../store/store.ts';

/** The most points one series may have (README.md#admin-api). */
export const MAX_SERIES_POINTS = 1000;

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

/**
 * The store's buckets (only steps that have records) as the full series: one point per step,
 * oldest first, empty steps as zeros with no latency (README.md#admin-api).
 */
export function fillSeries(
  buckets: readonly SeriesBucket[],
  from: number,
  to: number,
  step: SeriesStep,
): UsagePoint[] {
  const stepMs = SERIES_STEPS[step];
  const byBucket = new Map(buckets.map((b) => [Number(b.bucket), b]));
  return Array.from({ length: stepsBetween(from, to, step) }, (_, i) => {
    const b = byBucket.get(i);
    return {
      at: new Date(from + i * stepMs).toISOString(),
      requests: b ? Number(b.requests) : 0,
      errors: b ? Number(b.errors) : 0,
      creditsUsed: b ? fromMicro(Number(b.creditsMicro)) : 0,
      input_tokens: b ? Number(b.inputTokens) : 0,
      output_tokens: b ? Number(b.outputTokens) : 0,
      cacheHits: b ? Number(b.cacheHits) : 0,
      p50ElapsedMs: b?.p50ElapsedMs ?? null,
      p95ElapsedMs: b?.p95ElapsedMs ?? null,
    };
  });
}
