import type { Logger } from 'pino';
import { warnAtMostEvery } from '../logger.ts';
import { ROLLUP_KEPT_MS, ROLLUP_STEPS_MS } from '../store/rollups.ts';
import type { Store } from '../store/store.ts';

/**
 * The gateway's background work on its store (docs/usage.md): first the upgrade
 * (folding records from before the rollups into them), then retention, each a run of small
 * batches that stops when nothing is left, so that no batch holds up callers for long. A pass runs
 * at start and then every 10 minutes; one instance or many, each batch is its own transaction.
 */

/** Something retention deletes, a batch at a time: resolves with how many rows the batch deleted. */
export interface RetentionTask {
  name: string;
  deleteBatch(now: number, limit: number): Promise<number>;
}

const DAY_MS = 86_400_000;

/** The usage tasks: raw records past USAGE_RETENTION_DAYS, minute rollups past 14 days, hour rollups past 400. */
export function usageRetention(store: Store, usageDays: number): RetentionTask[] {
  return [
    {
      name: 'usage records',
      deleteBatch: (now, limit) => store.deleteUsageBefore(now - usageDays * DAY_MS, limit),
    },
    {
      name: 'minute rollups',
      deleteBatch: (now, limit) =>
        store.deleteRollupsBefore(ROLLUP_STEPS_MS.minute, now - ROLLUP_KEPT_MS.minute, limit),
    },
    {
      name: 'hour rollups',
      deleteBatch: (now, limit) =>
        store.deleteRollupsBefore(ROLLUP_STEPS_MS.hour, now - ROLLUP_KEPT_MS.hour, limit),
    },
  ];
}

/** Decision records past DECISION_RETENTION_DAYS, with their outcomes (0 keeps none: every one goes). */
export function decisionRetention(store: Store, decisionDays: number): RetentionTask {
  return {
    name: 'decision records',
    deleteBatch: (now, limit) => store.deleteDecisionsBefore(now - decisionDays * DAY_MS, limit),
  };
}

/** Review items (docs/review.md): kept REVIEW_RETENTION_DAYS, or until a day after their review. */
export function reviewRetention(store: Store, reviewDays: number): RetentionTask {
  return {
    name: 'review items',
    deleteBatch: (now, limit) => store.deleteReviewItems(now - reviewDays * DAY_MS, now - DAY_MS, limit),
  };
}

export interface MaintenanceOptions {
  store: Store;
  tasks: readonly RetentionTask[];
  logger: Logger;
  clock?: () => number;
  /** Rows per batch: small enough that a batch never holds the database for long. */
  batchSize?: number;
  /** Between passes (default 10 minutes). */
  intervalMs?: number;
  /**
   * After each batch, while callers are writing, a rest of this many times the batch's own
   * duration (default 4): the batches take at most a fifth of the time, so callers of the same
   * database keep most of theirs; with nobody writing, batches follow each other (docs/usage.md).
   */
  restFactor?: number;
  /** How a rest is waited out; a test's own. */
  sleep?: (ms: number) => Promise<void>;
}

export interface PassReport {
  folded: number;
  deleted: Record<string, number>;
}

export function startMaintenance(options: MaintenanceOptions) {
  const { store, tasks, logger } = options;
  const clock = options.clock ?? Date.now;
  const batchSize = options.batchSize ?? 500;
  const intervalMs = options.intervalMs ?? 600_000;
  const restFactor = options.restFactor ?? 4;
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  /** The newest usage record's id at the last look: callers wrote when it has moved since. */
  let newest: string | null = null;
  /** Whether callers wrote since the last look; unsure (the store did not answer): they did. */
  const callersWrote = async () => {
    const now = await store.newestUsageId().catch(() => undefined);
    const wrote = now === undefined || now !== newest;
    if (now !== undefined) newest = now;
    return wrote;
  };
  /** One batch, then the rest it earned if callers wrote meanwhile. */
  async function batch<T>(run: () => Promise<T>): Promise<T> {
    const started = performance.now();
    const result = await run();
    const rest = (performance.now() - started) * restFactor;
    if (rest >= 1 && !stopped && (await callersWrote())) await sleep(rest);
    return result;
  }
  const warn = warnAtMostEvery(logger, 60_000);
  let stopped = false;
  let running: Promise<PassReport | undefined> | undefined;
  let timer: NodeJS.Timeout | undefined;

  async function pass(): Promise<PassReport> {
    const report: PassReport = { folded: 0, deleted: {} };
    await callersWrote(); // where the pass starts from
    // The upgrade first: retention must not delete a record before the rollups hold it.
    for (let left = 1; left > 0 && !stopped; ) {
      const folded = await batch(() => store.foldIntoRollups(batchSize));
      report.folded += folded.folded;
      left = folded.left;
    }
    for (const task of tasks) {
      let total = 0;
      for (let deleted = batchSize; deleted >= batchSize && !stopped; ) {
        deleted = await batch(() => task.deleteBatch(clock(), batchSize));
        total += deleted;
      }
      if (total > 0) report.deleted[task.name] = total;
    }
    return report;
  }

  const run = () => {
    running ??= pass()
      .then((report) => {
        if (report.folded > 0 || Object.keys(report.deleted).length > 0)
          logger.info(
            { maintenance: report },
            'usage maintenance: upgraded and deleted what retention allows',
          );
        return report;
      })
      .catch((error: unknown) => {
        // The store is unreachable or busy: the next pass takes up where this one stopped.
        warn(error, 'usage maintenance could not finish a pass; it is tried again at the next');
        return undefined;
      })
      .finally(() => {
        running = undefined;
        if (!stopped) timer = setTimeout(run, intervalMs).unref();
      });
    return running;
  };

  timer = setTimeout(run, 0).unref();

  return {
    /** Runs a pass now (or waits for the one running) and resolves with what it did. */
    async runPass(): Promise<PassReport | undefined> {
      clearTimeout(timer);
      return run();
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}

export type Maintenance = ReturnType<typeof startMaintenance>;
