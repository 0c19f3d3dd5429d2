import type { RollupSums } from './rollups.ts';
import { type AdjustResult, CREDIT_CEILING_MICRO, type UsageTotals } from './store.ts';

/**
 * The rules both stores apply the same way, written once: each store only reads and writes its
 * own database around them (docs/http-api.md#credits, docs/usage.md).
 */

/** A migration: its SQL, applied once, in version order, and recorded in `schema_migrations`. */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** The migrations a database has yet to apply (not in `applied`, at most `upTo`), in order. */
export function pendingMigrations(
  all: readonly Migration[],
  applied: ReadonlySet<number>,
  upTo = Number.POSITIVE_INFINITY,
): Migration[] {
  return all.filter((step) => !applied.has(step.version) && step.version <= upTo);
}

/**
 * An operator's credit adjustment: the new balance, or why there is none (an unlimited key, a
 * balance below 0 or above the ceiling of 1,000,000,000 credits).
 */
export function adjustedBalance(
  creditsMicro: number | null,
  deltaMicro: number,
): { ok: true; balanceMicro: number } | Extract<AdjustResult, { ok: false }> {
  if (creditsMicro === null) return { ok: false, code: 'unlimited' };
  const balanceMicro = creditsMicro + deltaMicro;
  if (balanceMicro < 0) return { ok: false, code: 'would_go_negative' };
  if (balanceMicro > CREDIT_CEILING_MICRO) return { ok: false, code: 'over_ceiling' };
  return { ok: true, balanceMicro };
}

/** A key's usage totals, from its summed rollups. */
export function usageTotals(sums: RollupSums): UsageTotals {
  return {
    requests: sums.requests,
    creditsMicro: sums.creditsMicro,
    inputTokens: sums.inputTokens,
    outputTokens: sums.outputTokens,
  };
}

/**
 * Readiness while the upgrade folds old usage records into the rollups: not ready until every
 * record from `next` to `last` is folded, so that once ready every series is exact (docs/usage.md).
 */
export function assertUpgraded(progress: { next: number; last: number } | undefined): void {
  if (progress !== undefined && progress.next <= progress.last)
    throw new Error(
      `upgrading: ${progress.last - progress.next + 1} usage records still to fold into the rollups`,
    );
}
