import type { BudgetWindow } from '@decision-gateway/contract';
import { StoreUnavailableError } from '../store.ts';
import { troubleOf } from './deadline.ts';

/** One reserve, settle or release, as `dg_apply` reads it (migration 4); the batcher adds its deadline. */
export type Step = { op: 'reserve' | 'settle' | 'release'; key: string } & Record<
  string,
  string | number | boolean | null | { questions: string; reused: string | null } | Record<string, number>
>;

/** What `dg_apply` answers for one step. */
export interface StepRow {
  step: number;
  granted: boolean;
  reservation: number | null;
  available: number | null;
  debit: number | null;
  refused: string | null;
  /** A reserve refused by budgets: those exceeded; a settle: its budget events (migration 7). */
  events: BudgetEventRow[] | null;
}

/** A budget exceeded (a refusal's rows have no `kind`), capped or crossed, as `dg_apply` writes it. */
export interface BudgetEventRow {
  kind?: 'capped' | 'crossing';
  holder: string;
  holderKind: 'key' | 'project';
  window: BudgetWindow;
  excess?: number;
  threshold?: 0.8 | 1;
}

interface Pending {
  step: Step;
  deadline: number;
  resolve: (row: StepRow) => void;
  reject: (error: unknown) => void;
}

const lateStep = () =>
  new StoreUnavailableError('PostgreSQL did not answer within its deadline (a step came late)');

export interface StepBatcherOptions {
  /** Runs a batch as one statement; `deadline` (epoch ms) bounds it, retries included. */
  apply(steps: Step[], deadline: number): Promise<StepRow[]>;
  /** Most steps in one statement. */
  maxSteps?: number;
  /**
   * Most batches on their way at once (one unless said). More pays only where the batches share
   * one connection, which pipelines them (postgres-store.ts): on a pool's second connection a
   * batch on the same keys only waited for the first one's row locks, and measured at c=64 it
   * halved the throughput on one key.
   */
  maxInFlight?: number;
}

/**
 * Group commit for PostgreSQL: steps asked for while a batch is on its way wait and go together
 * in the next one, one statement, one round trip and one commit for all of them, as the SQLite
 * store's group commit shares one transaction. A lone step goes at once, so an idle gateway adds
 * no wait. Every step is idempotent per request, so a batch may be retried whole; should one step
 * fail for a reason of its own (a bug, not storage trouble), each step runs again alone, so only
 * that one fails.
 */
export function createStepBatcher(options: StepBatcherOptions) {
  const maxSteps = options.maxSteps ?? 256;
  const maxInFlight = options.maxInFlight ?? 1;
  let queue: Pending[] = [];
  let inFlight = 0;
  /** A batch behind the one on its way is gathering this turn's steps. */
  let joining = false;

  async function pump() {
    inFlight++;
    try {
      while (queue.length > 0) {
        const batch = queue.slice(0, maxSteps);
        queue = queue.slice(batch.length);
        await run(batch);
      }
    } finally {
      inFlight--;
    }
  }

  async function run(batch: Pending[]): Promise<void> {
    const now = Date.now();
    const live = batch.filter((p) => {
      if (p.deadline > now) return true;
      p.reject(lateStep());
      return false;
    });
    if (live.length === 0) return;
    const deadline = Math.min(...live.map((p) => p.deadline));
    try {
      const rows = await options.apply(
        // The deadline first: a key added after a spread gives every step a hidden class of its
        // own on V8 11 (docs/performance.md, "Objects that share a shape"). Written first, it
        // holds only because no step the store builds carries a `deadline` of its own.
        live.map((p) => ({ deadline: p.deadline, ...p.step })),
        deadline,
      );
      if (rows.length !== live.length)
        throw new Error(`dg_apply answered ${rows.length} of ${live.length} steps`);
      for (const row of rows) {
        const pending = live[row.step];
        if (row.refused === 'late') pending?.reject(lateStep());
        else pending?.resolve(row);
      }
    } catch (error) {
      if (live.length > 1 && troubleOf(error) === 'other' && !(error instanceof StoreUnavailableError)) {
        for (const p of live) await run([p]);
        return;
      }
      for (const p of live) p.reject(error);
    }
  }

  return function submit(step: Step, deadline: number): Promise<StepRow> {
    return new Promise<StepRow>((resolve, reject) => {
      queue.push({ step, deadline, resolve, reject });
      if (inFlight === 0) void pump();
      else if (inFlight < maxInFlight && !joining) {
        // Behind a batch on its way, the next one waits for the end of this turn of the event
        // loop, taking every step the turn asks for: sent at once it would carry the turn's first
        // step alone, and the rest would wait behind both.
        joining = true;
        setImmediate(() => {
          joining = false;
          if (inFlight < maxInFlight && queue.length > 0) void pump();
        });
      }
    });
  };
}
