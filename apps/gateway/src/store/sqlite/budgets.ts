import type { BudgetWindow } from '@decision-gateway/contract';
import { windowStarts } from '../../budgets/windows.ts';
import { type BudgetRow, byWindow, toBudgetRow, toProject } from '../budget-rows.ts';
import { capToBudgets, exceededBudgets, readBudgets, spendEvents } from '../budget-rules.ts';
import { toKey } from '../rows.ts';
import type { Budget, BudgetEvent, BudgetExceeded, BudgetHolder, BudgetMethods } from '../store.ts';
import type { SqliteParts } from './parts.ts';

/**
 * Projects and budgets (docs/budgets.md) on SQLite: what operators set and read, and the steps a
 * reservation and a settle take inside their own write (so they are as atomic as the credits).
 */
export function sqliteBudgets({ db, sql, guarded, background }: SqliteParts) {
  /** Live holds of a holder: a key's, or every key's of a project. */
  const heldBy = (row: Pick<BudgetRow, 'holder' | 'kind'>, since: number) =>
    row.kind === 'key'
      ? (sql.keyHeld.get({ keyId: row.holder, since })?.held ?? 0)
      : (sql.projectHeld.get({ projectId: row.holder, since })?.held ?? 0);

  /**
   * A holder's budgets replaced, each seeded with what its holder spent in its window so far. The
   * long sum (a month of a busy key's records) runs on the background thread, up to the record
   * `upTo`; the write adds the few recorded since, in the same transaction that makes the rows, so
   * no debit is missed or counted twice.
   */
  const replaceBudgets = db.transaction(
    (
      holder: BudgetHolder,
      budgets: readonly Budget[],
      starts: Record<BudgetWindow, number>,
      summed: number[],
      upTo: number,
    ) => {
      sql.deleteBudgets.run(holder.id);
      budgets.forEach((budget, i) => {
        const start = starts[budget.window];
        const since =
          holder.kind === 'key'
            ? sql.keySpentAfter.get(upTo, holder.id, start)?.spent
            : sql.projectSpentAfter.get(upTo, holder.id, start)?.spent;
        sql.insertBudget.run({
          holder: holder.id,
          kind: holder.kind,
          period: budget.window,
          limitMicro: budget.limitMicro,
          mode: budget.mode,
          start,
          spent: (summed[i] ?? 0) + (since ?? 0),
        });
      });
    },
  );

  const SUM_UP_TO = {
    key: 'SELECT COALESCE(SUM(credits_micro), 0) AS spent FROM usage_records WHERE id <= ? AND key_id = ? AND at >= ?',
    project: `SELECT COALESCE(SUM(u.credits_micro), 0) AS spent FROM usage_records u JOIN api_keys k ON k.id = u.key_id
              WHERE u.id <= ? AND k.project_id = ? AND u.at >= ?`,
  } as const;

  const methods: BudgetMethods = {
    async createProject(project) {
      guarded(() => sql.insertProject.run(project.id, project.name, project.createdAt));
      return { ...project, keyCount: 0 };
    },
    async listProjects() {
      return sql.projects.all().map(toProject);
    },
    async getProject(id) {
      const row = sql.projectById.get(id);
      return row && toProject(row);
    },
    async renameProject(id, name) {
      guarded(() => sql.renameProject.run(name, id));
      const row = sql.projectById.get(id);
      return row && toProject(row);
    },
    async deleteProject(id) {
      return guarded(
        db.transaction(() => {
          const row = sql.projectById.get(id);
          if (!row) return { ok: false as const, code: 'not_found' as const };
          if (row.key_count > 0) return { ok: false as const, code: 'has_keys' as const };
          sql.deleteBudgets.run(id);
          sql.deleteProject.run(id);
          return { ok: true as const, project: toProject(row) };
        }),
      );
    },
    async setKeyProject(keyId, projectId) {
      return guarded(
        db.transaction(() => {
          if (!sql.keyById.get(keyId)) return { ok: false as const, code: 'not_found' as const };
          if (projectId !== null && !sql.projectById.get(projectId))
            return { ok: false as const, code: 'unknown_project' as const };
          sql.setKeyProject.run(projectId, keyId);
          return { ok: true as const, key: toKeyOf(keyId) };
        }),
      );
    },
    async setBudgets(holder, budgets, at) {
      const starts = windowStarts(at);
      const upTo = sql.lastUsageId.get()?.id ?? 0;
      const summed = await Promise.all(
        budgets.map(async (budget) => {
          const [row] = await background().all<{ spent: number }>({
            sql: SUM_UP_TO[holder.kind],
            params: [upTo, holder.id, starts[budget.window]],
          });
          return Number(row?.spent ?? 0);
        }),
      );
      guarded(() => replaceBudgets.immediate(holder, budgets, starts, summed, upTo));
    },
    async budgets(holder, at, staleBefore) {
      const rows = sql.budgetsOfHolder.all(holder.id);
      return readBudgets(rows, at, heldBy({ holder: holder.id, kind: holder.kind }, staleBefore)).sort(
        byWindow,
      );
    },
  };

  const toKeyOf = (keyId: string) => {
    const row = sql.keyById.get(keyId);
    if (!row) throw new Error(`key ${keyId} vanished inside its own transaction`);
    return toKey(row);
  };

  /** The budgets of a key and of its project. */
  const budgetsOf = (keyId: string, projectId: string | null): BudgetRow[] =>
    sql.budgetsOf.all(keyId, projectId).map(toBudgetRow);

  /**
   * The budgets that `amount` beside the key's live holds could take to a limit (or, soft, to 80%
   * of it): every row the rules below could act on, usually none (statements.ts, `budgetsNear`).
   */
  const budgetsNear = (keyId: string, projectId: string | null, keyHeld: number, amount: number) =>
    sql.budgetsNear.all(keyId, projectId, keyHeld + amount, amount).map(toBudgetRow);

  /** Inside a reservation's write: the hard budgets this amount would take past their limits. */
  const refusal = (
    keyId: string,
    projectId: string | null,
    amount: number,
    at: number,
    since: number,
    keyHeld: number,
  ): BudgetExceeded[] => {
    const rows = budgetsNear(keyId, projectId, keyHeld, amount);
    return exceededBudgets(rows, amount, windowStarts(at), (row) =>
      row.kind === 'key' ? keyHeld : heldBy(row, since),
    );
  };

  /**
   * Inside a settle's write, after its own hold is gone: the debit cut to what each hard budget
   * can still take beside the other live holds, then counted in every budget's window.
   */
  const settleDebit = (
    keyId: string,
    projectId: string | null,
    debit: number,
    at: number,
    since: number,
    keyHeld: number,
  ): { debit: number; events: BudgetEvent[] } => {
    // Only ever asked of a key with budgets (its own or its project's): the debit counts in them all.
    const rows = budgetsNear(keyId, projectId, keyHeld, debit);
    const starts = windowStarts(at);
    const capped = capToBudgets(rows, debit, starts, (row) =>
      row.kind === 'key' ? keyHeld : heldBy(row, since),
    );
    // Named one by one: an object spread from `starts` took better-sqlite3 1.6 µs longer to bind.
    const { minute, hour, day, week, month } = starts;
    if (capped.debit > 0)
      sql.spend.run({ minute, hour, day, week, month, keyId, projectId, debit: capped.debit });
    return { debit: capped.debit, events: [...capped.events, ...spendEvents(rows, capped.debit, starts)] };
  };

  /** A refunded debit (a settled request answered a failure after all) leaves its windows. */
  const refund = (keyId: string, projectId: string | null, debit: number, settledAt: number) => {
    if (debit === 0) return;
    const starts = windowStarts(settledAt);
    for (const row of budgetsOf(keyId, projectId))
      sql.unspend.run({ holder: row.holder, period: row.period, start: starts[row.period], debit });
  };

  return { methods, refusal, settleDebit, refund };
}

export type SqliteBudgets = ReturnType<typeof sqliteBudgets>;
