import type { BudgetWindow } from '@decision-gateway/contract';
import { windowStarts } from '../budgets/windows.ts';
import type { BudgetRow } from './budget-rows.ts';
import type { BudgetEvent, BudgetExceeded, BudgetReading } from './store.ts';

/**
 * The budget rules of docs/budgets.md as the SQLite store applies them inside its writes (the
 * PostgreSQL store's functions apply the same ones in SQL): a row's spend counts only in its own
 * window; a hard budget refuses what would take it past its limit beside its holder's live holds;
 * a settle never takes one past it; a soft one says when spend crosses 80% and 100%.
 */

type Starts = Record<BudgetWindow, number>;

/** A row's spend in the current window: a row last moved in an earlier window has spent nothing in this one. */
export const spentNow = (row: BudgetRow, starts: Starts) =>
  row.windowStart === starts[row.period] ? row.spentMicro : 0;

const holderOf = (row: BudgetRow) => ({ kind: row.kind, id: row.holder });

export function exceededBudgets(
  rows: readonly BudgetRow[],
  amount: number,
  starts: Starts,
  held: (row: BudgetRow) => number,
): BudgetExceeded[] {
  const exceeded: BudgetExceeded[] = [];
  for (const row of rows)
    if (row.mode === 'hard' && spentNow(row, starts) + held(row) + amount > row.limitMicro)
      exceeded.push({ holder: holderOf(row), window: row.period });
  return exceeded;
}

export function capToBudgets(
  rows: readonly BudgetRow[],
  debit: number,
  starts: Starts,
  othersHeld: (row: BudgetRow) => number,
): { debit: number; events: BudgetEvent[] } {
  let capped = debit;
  const events: BudgetEvent[] = [];
  for (const row of rows) {
    if (row.mode !== 'hard') continue;
    const room = Math.max(0, row.limitMicro - spentNow(row, starts) - othersHeld(row));
    if (capped > room) {
      events.push({ kind: 'capped', holder: holderOf(row), window: row.period, excessMicro: capped - room });
      capped = room;
    }
  }
  return { debit: capped, events };
}

/** Soft budgets whose spend this debit takes from below 80% (or 100%) of the limit to at or above it. */
export function spendEvents(rows: readonly BudgetRow[], debit: number, starts: Starts): BudgetEvent[] {
  const events: BudgetEvent[] = [];
  if (debit === 0) return events;
  for (const row of rows) {
    if (row.mode !== 'soft') continue;
    const before = spentNow(row, starts);
    for (const threshold of [0.8, 1] as const)
      if (!reaches(before, row.limitMicro, threshold) && reaches(before + debit, row.limitMicro, threshold))
        events.push({ kind: 'crossing', holder: holderOf(row), window: row.period, threshold });
  }
  return events;
}

/** Whether spend is at or past a share of the limit, in integers (as dg_step_settle compares them). */
const reaches = (spent: number, limit: number, threshold: 0.8 | 1) =>
  threshold === 1 ? spent >= limit : spent * 5 >= limit * 4;

/** A holder's budgets as read: spend in the current window plus its live holds. */
export function readBudgets(rows: readonly BudgetRow[], at: number, held: number): BudgetReading[] {
  const now = windowStarts(at);
  return rows.map((row) => ({
    window: row.period,
    limitMicro: row.limitMicro,
    mode: row.mode,
    spentMicro: spentNow(row, now) + held,
  }));
}
