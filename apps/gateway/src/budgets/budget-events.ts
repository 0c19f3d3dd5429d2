import type { Logger } from 'pino';
import { fromMicro } from '../core/credits.ts';
import type { GatewayMetrics } from '../metrics.ts';
import type { BudgetEvent } from '../store/store.ts';

/**
 * What the gateway does with a settle's budget events (docs/budgets.md): a soft budget crossing
 * 80% or 100% is logged as a warning and counted (the store tells each crossing once per window
 * and holder: spend only grows within one); a debit a hard budget cut is logged and counted.
 */
export function budgetEventReporter(metrics: GatewayMetrics, logger: Logger) {
  return (event: BudgetEvent) => {
    const { holder, window } = event;
    if (event.kind === 'crossing') {
      metrics.budgetCrossings.inc({ holder: holder.kind, window, threshold: String(event.threshold) });
      logger.warn(
        { holder: holder.kind, holderId: holder.id, window, threshold: event.threshold },
        `the ${holder.kind} ${holder.id}'s soft ${window} budget is at ${event.threshold * 100}% of its limit`,
      );
    } else {
      metrics.budgetCapped.inc({ holder: holder.kind, window });
      logger.warn(
        { holder: holder.kind, holderId: holder.id, window, excessCredits: fromMicro(event.excessMicro) },
        `the ${holder.kind} ${holder.id}'s ${window} budget capped a debit; the excess is not charged`,
      );
    }
  };
}
