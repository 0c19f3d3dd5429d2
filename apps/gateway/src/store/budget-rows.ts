import type { BudgetMode, BudgetWindow } from '@decision-gateway/contract';
import type { Budget, BudgetHolder, ProjectRecord } from './store.ts';

/** Budget and project rows as both stores read them (docs/budgets.md). */

export interface BudgetRow {
  holder: string;
  kind: BudgetHolder['kind'];
  period: BudgetWindow;
  limitMicro: number;
  mode: BudgetMode;
  windowStart: number;
  spentMicro: number;
}

export const BUDGET_COLUMNS =
  'holder, holder_kind AS kind, period, limit_micro AS "limitMicro", mode, window_start AS "windowStart", spent_micro AS "spentMicro"';

/** The same columns as values, in this order, for a store that reads rows as arrays (toBudgetRow). */
export const BUDGET_VALUES = 'holder, holder_kind, period, limit_micro, mode, window_start, spent_micro';
export type BudgetValues = [
  holder: string,
  kind: BudgetRow['kind'],
  period: BudgetWindow,
  limitMicro: number,
  mode: BudgetMode,
  windowStart: number,
  spentMicro: number,
];

export const toBudgetRow = (row: BudgetValues): BudgetRow => ({
  holder: row[0],
  kind: row[1],
  period: row[2],
  limitMicro: row[3],
  mode: row[4],
  windowStart: row[5],
  spentMicro: row[6],
});

export interface ProjectRow {
  id: string;
  name: string;
  created_at: number;
  key_count: number;
}

export const PROJECT_SELECT =
  'SELECT p.id, p.name, p.created_at, (SELECT COUNT(*) FROM api_keys k WHERE k.project_id = p.id) AS key_count FROM projects p';

export function toProject(row: ProjectRow): ProjectRecord {
  return { id: row.id, name: row.name, createdAt: Number(row.created_at), keyCount: Number(row.key_count) };
}

/** The budgets in the order every read gives them: minute to month. */
export const WINDOW_ORDER: Record<BudgetWindow, number> = { minute: 0, hour: 1, day: 2, week: 3, month: 4 };

export const byWindow = (a: Pick<Budget, 'window'>, b: Pick<Budget, 'window'>) =>
  WINDOW_ORDER[a.window] - WINDOW_ORDER[b.window];
