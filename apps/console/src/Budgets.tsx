import type { BudgetState } from '@decision-gateway/contract';

/**
 * A holder's budgets as bars (docs/budgets.md): each a meter of what was spent in its current
 * window against its limit, marked high past 80%, with when it resets.
 */
export function Budgets({ budgets, holder }: { budgets: readonly BudgetState[]; holder: string }) {
  if (budgets.length === 0) return <p>No budgets.</p>;
  return (
    <ul className="budgets">
      {budgets.map((b) => (
        <li key={b.window}>
          <BudgetBar budget={b} label={`${holder}: ${b.window} budget`} />
        </li>
      ))}
    </ul>
  );
}

export function BudgetBar({ budget: b, label }: { budget: BudgetState; label: string }) {
  return (
    <div className="budget">
      <span>
        {b.window} ({b.mode}): {b.spent} of {b.limit} credits · {sharePercent(b)}% · resets {b.resetsAt}
      </span>
      <meter
        aria-label={label}
        min={0}
        max={b.limit}
        value={Math.min(b.spent, b.limit)}
        low={0.8 * b.limit}
        high={0.8 * b.limit}
        optimum={0}
      />
    </div>
  );
}

/** How much of its limit a budget has spent, in whole percent. */
export const sharePercent = (b: Pick<BudgetState, 'spent' | 'limit'>) =>
  Math.round((100 * b.spent) / b.limit);

/** Past 80% of its limit: the Overview lists it. */
export const pastEightyPercent = (b: Pick<BudgetState, 'spent' | 'limit'>) => b.spent >= 0.8 * b.limit;
