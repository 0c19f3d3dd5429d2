import { z } from 'zod';
import { credits } from './credits.ts';

/**
 * Budgets and projects (docs/budgets.md): a limit of credits per UTC calendar window, on a key or
 * on a project that groups keys.
 */

export const BUDGET_WINDOWS = ['minute', 'hour', 'day', 'week', 'month'] as const;
export const BudgetWindow = z.enum(BUDGET_WINDOWS, { error: 'must be minute, hour, day, week or month' });
export type BudgetWindow = z.infer<typeof BudgetWindow>;

export const BudgetMode = z
  .enum(['hard', 'soft'], { error: 'must be hard or soft' })
  .meta({ description: 'hard refuses a request past the limit (402, 40202); soft only warns and counts.' });
export type BudgetMode = z.infer<typeof BudgetMode>;

export const BudgetSpec = z
  .strictObject({
    window: BudgetWindow,
    limit: credits.refine((n) => n > 0, { error: 'must be more than 0' }),
    mode: BudgetMode.default('hard'),
  })
  .meta({ id: 'BudgetSpec' });
export type BudgetSpec = z.output<typeof BudgetSpec>;

/** A holder's budgets: at most one per window. */
export const BudgetList = z.array(BudgetSpec).superRefine((budgets, ctx) => {
  const seen = new Set<string>();
  budgets.forEach((budget, i) => {
    if (seen.has(budget.window))
      ctx.addIssue({
        code: 'custom',
        path: [i, 'window'],
        message: `a second budget on the ${budget.window} window: one per window`,
      });
    seen.add(budget.window);
  });
});

export const BudgetState = z
  .strictObject({
    window: BudgetWindow,
    limit: z.number(),
    mode: BudgetMode,
    spent: z
      .number()
      .meta({ description: 'Debits settled in the current window plus reservations in flight.' }),
    remaining: z.number().meta({ description: 'max(0, limit − spent).' }),
    resetsAt: z.string().meta({ description: 'When the current window ends (ISO-8601).' }),
  })
  .meta({ id: 'BudgetState' });
export type BudgetState = z.infer<typeof BudgetState>;

const projectName = z
  .string({ error: 'must be a string' })
  .min(1, { error: 'must not be empty' })
  .max(100, { error: 'must be at most 100 characters' });

export const CreateProjectBody = z
  .strictObject({ name: projectName, budgets: BudgetList.optional() })
  .meta({ id: 'CreateProjectBody' });
export type CreateProjectBody = z.output<typeof CreateProjectBody>;

export const PatchProjectBody = z
  .strictObject({
    name: projectName.optional(),
    budgets: BudgetList.optional().meta({ description: 'Replaces the whole list.' }),
  })
  .meta({ id: 'PatchProjectBody' });
export type PatchProjectBody = z.output<typeof PatchProjectBody>;

export const ProjectObject = z
  .strictObject({
    id: z.string(),
    name: z.string(),
    createdAt: z.string(),
    keyCount: z.number().int(),
    budgets: z.array(BudgetState),
  })
  .meta({ id: 'ProjectObject' });
export type ProjectObject = z.infer<typeof ProjectObject>;

export const ProjectList = z.strictObject({ projects: z.array(ProjectObject) }).meta({ id: 'ProjectList' });
export type ProjectList = z.infer<typeof ProjectList>;

/** `PATCH /admin/keys/{id}`: its project (null: none) and its budgets (replacing the whole list). */
export const PatchKeyBody = z
  .strictObject({
    projectId: z.string().min(1).nullable().optional(),
    budgets: BudgetList.optional().meta({ description: 'Replaces the whole list.' }),
  })
  .meta({ id: 'PatchKeyBody' });
export type PatchKeyBody = z.output<typeof PatchKeyBody>;
