import { failure, type GatewayFailure } from '@decision-gateway/contract';
import type { BudgetExceeded } from '../store/store.ts';
import { windowEnd } from './windows.ts';

/**
 * 402 (40202) for a reservation that would take hard budgets past their limits
 * (docs/budgets.md): the message names each holder and window and when it resets; Retry-After
 * is the wait until the latest of those resets, when the request could fit again.
 */
export function budgetRefusal(exceeded: readonly BudgetExceeded[], at: number): GatewayFailure {
  const resets = exceeded.map((e) => windowEnd(e.window, at));
  const latest = Math.max(...resets);
  const named = exceeded.map(
    (e, i) =>
      `the ${e.holder.kind} ${e.holder.id}'s ${e.window} budget (resets at ${new Date(resets[i] as number).toISOString()})`,
  );
  return failure('budget_exceeded', `this request would exceed ${named.join(' and ')}`, {
    retryAfterMs: Math.max(1, latest - at),
  });
}
