import { randomBytes } from 'node:crypto';
import {
  type BudgetSpec,
  type BudgetState,
  type CreateProjectBody,
  failure,
  type GatewayFailure,
  type PatchProjectBody,
  type ProjectList,
  type ProjectObject,
} from '@decision-gateway/contract';
import { fromMicro, toMicro } from '../core/credits.ts';
import type { BudgetHolder, ProjectRecord, Store } from '../store/store.ts';
import { windowEnd } from './windows.ts';

export type BudgetResult<T> = { ok: true; value: T } | { ok: false; error: GatewayFailure };

const projectNotFound = (id: string) => failure('not_found', `no project with id "${id}"`);

/** A field naming a project that does not exist (docs/budgets.md: 40001 naming it). */
export const unknownProjectField = (id: string) =>
  failure('invalid_request', `projectId: no project with id "${id}"`, {
    issues: [{ path: ['projectId'], message: `no project with id "${id}"` }],
  });

/**
 * Projects and budgets as operators manage them (docs/budgets.md), for the admin API, the CLI
 * and the console alike. Enforcement is the store's, inside the reservation.
 */
export function createBudgetService(
  store: Store,
  clock: () => number,
  /** How old a hold is when it surely belongs to a crashed process: such holds count nowhere. */
  staleAfterMs: number,
) {
  /** A holder's budgets as the admin API shows them: spent, remaining and when each resets. */
  async function statesOf(holder: BudgetHolder): Promise<BudgetState[]> {
    const now = clock();
    const readings = await store.budgets(holder, now, now - staleAfterMs);
    return readings.map((b) => ({
      window: b.window,
      limit: fromMicro(b.limitMicro),
      mode: b.mode,
      spent: fromMicro(b.spentMicro),
      remaining: fromMicro(Math.max(0, b.limitMicro - b.spentMicro)),
      resetsAt: new Date(windowEnd(b.window, now)).toISOString(),
    }));
  }

  const toStore = (budgets: readonly BudgetSpec[]) =>
    budgets.map((b) => ({ window: b.window, limitMicro: toMicro(b.limit), mode: b.mode }));

  async function projectObject(project: ProjectRecord): Promise<ProjectObject> {
    return {
      id: project.id,
      name: project.name,
      createdAt: new Date(project.createdAt).toISOString(),
      keyCount: project.keyCount,
      budgets: await statesOf({ kind: 'project', id: project.id }),
    };
  }

  return {
    statesOf,

    /** Replaces a holder's budgets (the whole list). */
    async setBudgets(holder: BudgetHolder, budgets: readonly BudgetSpec[]) {
      await store.setBudgets(holder, toStore(budgets), clock());
    },

    async createProject(body: CreateProjectBody): Promise<BudgetResult<ProjectObject>> {
      const project = await store.createProject({
        id: `prj_${randomBytes(9).toString('base64url')}`,
        name: body.name,
        createdAt: clock(),
      });
      if (body.budgets)
        await store.setBudgets({ kind: 'project', id: project.id }, toStore(body.budgets), clock());
      return { ok: true, value: await projectObject(project) };
    },

    async listProjects(): Promise<BudgetResult<ProjectList>> {
      const projects = await store.listProjects();
      return { ok: true, value: { projects: await Promise.all(projects.map(projectObject)) } };
    },

    async getProject(id: string): Promise<BudgetResult<ProjectObject>> {
      const project = await store.getProject(id);
      return project
        ? { ok: true, value: await projectObject(project) }
        : { ok: false, error: projectNotFound(id) };
    },

    async patchProject(id: string, body: PatchProjectBody): Promise<BudgetResult<ProjectObject>> {
      let project = await store.getProject(id);
      if (!project) return { ok: false, error: projectNotFound(id) };
      if (body.name !== undefined) project = (await store.renameProject(id, body.name)) ?? project;
      if (body.budgets !== undefined)
        await store.setBudgets({ kind: 'project', id }, toStore(body.budgets), clock());
      return { ok: true, value: await projectObject(project) };
    },

    /** Only a project without keys may go; its budgets go with it. */
    async deleteProject(id: string): Promise<BudgetResult<ProjectObject>> {
      const before = await store.getProject(id);
      if (!before) return { ok: false, error: projectNotFound(id) };
      const shown = await projectObject(before);
      const deleted = await store.deleteProject(id);
      if (deleted.ok) return { ok: true, value: { ...shown, budgets: [] } };
      if (deleted.code === 'not_found') return { ok: false, error: projectNotFound(id) };
      const keys = Math.max(1, before.keyCount); // a key may have joined since it was read
      return {
        ok: false,
        error: failure(
          'invalid_request',
          `the project has ${keys} key${keys === 1 ? '' : 's'}: move ${keys === 1 ? 'it' : 'them'} out (PATCH /admin/keys/{id} {"projectId": null}) first`,
        ),
      };
    },
  };
}

export type BudgetService = ReturnType<typeof createBudgetService>;
