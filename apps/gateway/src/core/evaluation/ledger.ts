import type { Usage } from '@decision-gateway/contract';
import type { Logger } from 'pino';
import type { KeptDecision } from '../../store/store.ts';
import { type Store, StoreUnavailableError, type UsageEntry } from '../../store/store.ts';
import { inSpan } from '../../telemetry/spans.ts';
import type { Authenticated, EvaluationContext } from './evaluation-context.ts';

const NO_USAGE: Usage = { input_tokens: 0, output_tokens: 0 };

/** How a failed request is recorded once the store is back: waits from 250 ms to 5 s, for 15 minutes. */
const RECONCILE = { firstWaitMs: 250, maxWaitMs: 5_000, giveUpAfterMs: 15 * 60_000 } as const;

/**
 * A reservation lives from its own store call through the route's upstream calls to the settle,
 * each store call bounded by the store's deadline: never longer than the longest route deadline
 * plus two store deadlines. One older than that (and a second of slack) was left by a crashed
 * process: from then on it counts nowhere (docs/http-api.md#credits). A store that stalls cannot make a
 * live reservation look stale, since the calls around it end by their deadlines.
 */
export const staleAfterMs = (longestDeadlineMs: number, storeTimeoutMs: number) =>
  longestDeadlineMs + 2 * storeTimeoutMs + 1_000;

export interface LedgerDeps {
  store: Store;
  clock: () => number;
  logger: Logger;
  /** How old a reservation is when it was surely left by a crashed process. */
  staleAfterMs: number;
}

/**
 * The only code that writes credits and usage records: a reservation, a settlement, the record of
 * a failure (its hold released, 0 credits) and of a cache hit. So "a failed request is never
 * charged; every authenticated request leaves one usage record" (docs/http-api.md#credits) holds here,
 * whatever stage a request ended at. Each store step of a request is its own span (docs/tracing.md).
 */
export function createLedger({ store, clock, logger, staleAfterMs }: LedgerDeps) {
  const staleBefore = (now: number) => now - staleAfterMs;

  function entry(
    ctx: EvaluationContext,
    usage: Usage,
    creditsMicro: number,
    status: number,
    upstream: string | null = null,
    cached = false,
  ): UsageEntry {
    const payer = ctx.payer;
    if (payer === undefined) throw new Error('a usage record needs the key that pays');
    return {
      requestId: ctx.call.requestId,
      keyId: payer.id,
      tokenId: payer.token?.id ?? null,
      subject: payer.token?.subject ?? null,
      creditsMicro,
      inputTokens: usage.input_tokens,
      outputTokens: usage.output_tokens,
      questions: ctx.questions,
      status,
      elapsedMs: Math.round(performance.now() - ctx.call.startedAt),
      at: clock(),
      route: ctx.route?.spec.name ?? null,
      upstream,
      cached,
    };
  }

  return {
    /** Hold `boundMicro` against the payer's key (and token) for this request. */
    reserve(ctx: Authenticated, boundMicro: number) {
      const { payer } = ctx;
      const now = clock();
      return inSpan('dg.store.reserve', ctx.call.trace, undefined, () =>
        store.reserve(payer.id, ctx.call.requestId, boundMicro, now, staleBefore(now), payer.token?.id),
      );
    },

    /** Debit what the answer cost (already capped at the reservation); returns the debit. */
    settle(
      ctx: EvaluationContext,
      usage: Usage,
      costMicro: number,
      upstream: string,
      decision?: KeptDecision,
    ): Promise<number> {
      const record = entry(ctx, usage, costMicro, 200, upstream);
      return inSpan('dg.store.settle', ctx.call.trace, undefined, () =>
        store.settle(ctx.reservation?.id ?? null, record, staleBefore(clock()), decision),
      );
    },

    /** A failed request: whatever it holds released, a record with `status` and 0 credits. */
    release(ctx: EvaluationContext, status: number): Promise<void> {
      const record = entry(ctx, NO_USAGE, 0, status);
      return inSpan('dg.store.release', ctx.call.trace, undefined, () =>
        store.release(ctx.reservation?.id ?? null, record),
      );
    },

    /** A decision served from the cache: nothing held or spent, a record all the same. */
    recordHit(ctx: EvaluationContext, upstream: string, decision?: KeptDecision): Promise<void> {
      const record = entry(ctx, NO_USAGE, 0, 200, upstream, true);
      // Nothing was held, so nothing is released: the span says what the store did.
      return inSpan('dg.store.record', ctx.call.trace, undefined, () =>
        store.release(null, record, decision),
      );
    },

    /**
     * A request the store could not take in time: released and recorded in the background, retried
     * with growing waits while the store is unavailable, for at most RECONCILE.giveUpAfterMs. Its
     * debit is undone should a settle whose answer was lost have gone through. A request whose key
     * could not even be looked up is `identify`-ed first, once the store answers: a valid key's
     * request is recorded like any other, a refused one is not.
     */
    releaseLater(
      ctx: EvaluationContext,
      status: number,
      identify: (ctx: EvaluationContext) => Promise<boolean>,
    ): void {
      // What the record says of the request is what was true when it was answered.
      const { at, elapsedMs } = {
        at: clock(),
        elapsedMs: Math.round(performance.now() - ctx.call.startedAt),
      };
      const started = clock();
      let waitMs: number = RECONCILE.firstWaitMs;
      const record = async () => {
        if (ctx.payer === undefined && !(await identify(ctx))) return undefined;
        const written = { ...entry(ctx, NO_USAGE, 0, status), at, elapsedMs };
        await store.release(null, written);
        return written;
      };
      const attempt = () => {
        record().then(
          (written) =>
            written &&
            logger.info(
              { requestId: written.requestId },
              'recorded a request the store could not take in time',
            ),
          (error: unknown) => {
            if (!(error instanceof StoreUnavailableError) || clock() - started > RECONCILE.giveUpAfterMs) {
              logger.error(
                { err: error, requestId: ctx.call.requestId },
                'could not record a failed request',
              );
              return;
            }
            setTimeout(attempt, waitMs).unref();
            waitMs = Math.min(RECONCILE.maxWaitMs, waitMs * 2);
          },
        );
      };
      setTimeout(attempt, waitMs).unref();
    },
  };
}

export type Ledger = ReturnType<typeof createLedger>;
