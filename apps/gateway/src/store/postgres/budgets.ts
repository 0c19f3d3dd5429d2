import { windowStarts } from '../../budgets/windows.ts';
import {
  BUDGET_COLUMNS,
  type BudgetRow,
  byWindow,
  PROJECT_SELECT,
  type ProjectRow,
  toProject,
} from '../budget-rows.ts';
import { readBudgets } from '../budget-rules.ts';
import { type KeyRow, toKey } from '../rows.ts';
import type { BudgetEvent, BudgetMethods } from '../store.ts';
import type { Sql } from './client.ts';
import type { BudgetEventRow } from './step-batcher.ts';

type Call = <T>(what: string, run: () => Promise<T>, idempotent?: boolean) => Promise<T>;

/**
 * Projects and budgets (docs/budgets.md) on PostgreSQL: what operators set and read. The request
 * path's checks are in the schema's functions (functions.ts), under the keys' and projects' locks.
 */
export function postgresBudgets(sql: Sql, call: Call, keyColumns: ReturnType<Sql['unsafe']>): BudgetMethods {
  /** Live holds of a holder: a key's, or every key's of a project. */
  const heldBy = async (tx: Sql, holder: { kind: 'key' | 'project'; id: string }, since: number) => {
    const [row] =
      holder.kind === 'key'
        ? await tx<{ held: number }[]>`
            SELECT COALESCE(SUM(amount_micro), 0)::bigint AS held FROM reservations
            WHERE key_id = ${holder.id} AND created_at >= ${since}`
        : await tx<{ held: number }[]>`SELECT dg_project_held(${holder.id}, ${since}) AS held`;
    return Number(row?.held ?? 0);
  };

  return {
    createProject: (project) =>
      call(
        'create project',
        async () => {
          await sql`INSERT INTO projects (id, name, created_at) VALUES (${project.id}, ${project.name}, ${project.createdAt})`;
          return { ...project, keyCount: 0 };
        },
        false,
      ),

    listProjects: () =>
      call('list projects', async () => {
        const rows = await sql<
          ProjectRow[]
        >`${sql.unsafe(PROJECT_SELECT)} ORDER BY p.created_at DESC, p.id DESC`;
        return rows.map(toProject);
      }),

    getProject: (id) =>
      call('get project', async () => {
        const [row] = await sql<ProjectRow[]>`${sql.unsafe(PROJECT_SELECT)} WHERE p.id = ${id}`;
        return row && toProject(row);
      }),

    renameProject: (id, name) =>
      call('rename project', async () => {
        await sql`UPDATE projects SET name = ${name} WHERE id = ${id}`;
        const [row] = await sql<ProjectRow[]>`${sql.unsafe(PROJECT_SELECT)} WHERE p.id = ${id}`;
        return row && toProject(row);
      }),

    deleteProject: (id) =>
      call(
        'delete project',
        () =>
          sql.begin(async (tx) => {
            const [row] = await tx<
              ProjectRow[]
            >`${tx.unsafe(PROJECT_SELECT)} WHERE p.id = ${id} FOR UPDATE OF p`;
            if (!row) return { ok: false, code: 'not_found' } as const;
            if (Number(row.key_count) > 0) return { ok: false, code: 'has_keys' } as const;
            await tx`DELETE FROM budgets WHERE holder = ${id}`;
            await tx`DELETE FROM projects WHERE id = ${id}`;
            return { ok: true, project: toProject(row) } as const;
          }),
        false,
      ),

    setKeyProject: (keyId, projectId) =>
      call(
        'move key',
        () =>
          sql.begin(async (tx) => {
            const [key] = await tx<
              KeyRow[]
            >`SELECT ${keyColumns} FROM api_keys WHERE id = ${keyId} FOR UPDATE`;
            if (!key) return { ok: false, code: 'not_found' } as const;
            if (projectId !== null) {
              const [project] = await tx`SELECT 1 FROM projects WHERE id = ${projectId} FOR UPDATE`;
              if (!project) return { ok: false, code: 'unknown_project' } as const;
            }
            await tx`UPDATE api_keys SET project_id = ${projectId} WHERE id = ${keyId}`;
            return { ok: true, key: toKey({ ...key, project_id: projectId }) } as const;
          }),
        false,
      ),

    // Under its holder's lock, as dg_apply takes it: no settle moves a counter while it is seeded.
    setBudgets: (holder, budgets, at) =>
      call(
        'set budgets',
        () =>
          sql.begin(async (tx) => {
            if (holder.kind === 'key') await tx`SELECT 1 FROM api_keys WHERE id = ${holder.id} FOR UPDATE`;
            else await tx`SELECT 1 FROM projects WHERE id = ${holder.id} FOR UPDATE`;
            await tx`DELETE FROM budgets WHERE holder = ${holder.id}`;
            const starts = windowStarts(at);
            for (const budget of budgets) {
              const start = starts[budget.window];
              const [spent] =
                holder.kind === 'key'
                  ? await tx<{ spent: number }[]>`
                      SELECT COALESCE(SUM(credits_micro), 0)::bigint AS spent FROM usage_records
                      WHERE key_id = ${holder.id} AND at >= ${start}`
                  : await tx<{ spent: number }[]>`
                      SELECT COALESCE(SUM(u.credits_micro), 0)::bigint AS spent FROM usage_records u
                      JOIN api_keys k ON k.id = u.key_id WHERE k.project_id = ${holder.id} AND u.at >= ${start}`;
              await tx`
                INSERT INTO budgets (holder, holder_kind, period, limit_micro, mode, window_start, spent_micro)
                VALUES (${holder.id}, ${holder.kind}, ${budget.window}, ${budget.limitMicro}, ${budget.mode},
                        ${start}, ${Number(spent?.spent ?? 0)})`;
            }
          }),
        false,
      ),

    budgets: (holder, at, staleBefore) =>
      call('read budgets', async () => {
        const rows = await sql<
          BudgetRow[]
        >`SELECT ${sql.unsafe(BUDGET_COLUMNS)} FROM budgets WHERE holder = ${holder.id}`;
        if (rows.length === 0) return [];
        return readBudgets(rows, at, await heldBy(sql, holder, staleBefore)).sort(byWindow);
      }),
  };
}

/** `dg_apply`'s rows of budgets exceeded or events, as the Store says them. */
export function budgetEventOf(row: BudgetEventRow): BudgetEvent {
  const holder = { kind: row.holderKind, id: row.holder };
  return row.kind === 'capped'
    ? { kind: 'capped', holder, window: row.window, excessMicro: Number(row.excess ?? 0) }
    : { kind: 'crossing', holder, window: row.window, threshold: row.threshold === 1 ? 1 : 0.8 };
}
