import {
  foldRecordsSql,
  ROLLUP_STEPS_MS,
  type SummedRow,
  summaryReads,
  summedSql,
  toSummary,
  toSums,
} from '../rollups.ts';
import { toUsage, type UsageRow } from '../rows.ts';
import { usageTotals } from '../shared-rules.ts';
import type { SeriesRow, Store } from '../store.ts';
import type { SqliteParts } from './parts.ts';

type UsageMethods = Pick<
  Store,
  | 'usageSeries'
  | 'usageSummary'
  | 'usage'
  | 'foldIntoRollups'
  | 'newestUsageId'
  | 'deleteUsageBefore'
  | 'deleteRollupsBefore'
>;

const SUMS = summedSql('sqlite');

/** The reads run on the background connection (docs/usage.md). */
const READS = {
  series: `SELECT at, ${summedSql('sqlite', 'usage_totals')} FROM usage_totals
           WHERE step_ms = ? AND at >= ? AND at < ? GROUP BY at ORDER BY at`,
  keySeries: `SELECT at, ${SUMS} FROM usage_rollups WHERE key_id = ? AND step_ms = ? AND at >= ? AND at < ?
              GROUP BY at ORDER BY at`,
  keyTotals: `SELECT ${SUMS} FROM usage_rollups WHERE key_id = ? AND step_ms = ${ROLLUP_STEPS_MS.day}`,
  recent: 'SELECT * FROM usage_records WHERE key_id = ? ORDER BY at DESC, id DESC LIMIT ?',
};

/**
 * Retention deletes from the oldest records by id, a batch at a time, those older than the cutoff:
 * records are written in the order their requests end, so id order is time order give or take a
 * request's deadline, and no index on \`at\` is needed (nor paid on every insert). A record that
 * ended out of order waits for the next pass.
 */
const DELETE_OLDEST = `DELETE FROM usage_records WHERE id IN (
  SELECT id FROM (SELECT id, at FROM usage_records ORDER BY id LIMIT ?) WHERE at < ?)`;

/** Folds records from a batch's start (or from next_id, should another process have folded part of it) until its end. */
const FOLDS = (['usage_totals', 'usage_rollups'] as const).map((table) =>
  foldRecordsSql('sqlite', table, 'MAX(?, (SELECT next_id FROM usage_rollup_backfill WHERE id = 1))', '?'),
);

/** What operators read of usage, the upgrade's fold and retention: all on the background connection. */
export function sqliteUsage({ background }: SqliteParts): UsageMethods {
  return {
    async usageSeries({ keyId, stepMs, from, to }) {
      const rows = await background().all<SummedRow & { at: number }>(
        keyId === undefined
          ? { sql: READS.series, params: [stepMs, from, to] }
          : { sql: READS.keySeries, params: [keyId, stepMs, from, to] },
      );
      return rows.map((row): SeriesRow => ({ at: Number(row.at), ...toSums(row) }));
    },
    async usageSummary({ keyId, spans }) {
      const reads = summaryReads('sqlite', spans, keyId, () => '?');
      return toSummary(await Promise.all(reads.map((read) => background().all<SummedRow>(read))));
    },
    async usage(keyId, limit) {
      const [totals, recent] = await Promise.all([
        background().all<SummedRow>({ sql: READS.keyTotals, params: [keyId] }),
        background().all<UsageRow>({ sql: READS.recent, params: [keyId, limit] }),
      ]);
      return { totals: usageTotals(toSums(totals[0] ?? {})), recent: recent.map(toUsage) };
    },
    async newestUsageId() {
      const [row] = await background().all<{ id: string | null }>({
        sql: 'SELECT CAST(MAX(id) AS TEXT) AS id FROM usage_records',
        params: [],
      });
      return row?.id ?? null;
    },
    async foldIntoRollups(limit) {
      const [progress] = await background().all<{ next: number; last: number }>({
        sql: 'SELECT next_id AS next, last_id AS last FROM usage_rollup_backfill WHERE id = 1',
        params: [],
      });
      if (progress === undefined || progress.next > progress.last) return { folded: 0, left: 0 };
      const until = Math.min(progress.next + limit, progress.last + 1);
      // The batch and the move of next_id commit together; a batch another process folded first
      // (next_id moved) folds nothing.
      await background().transaction([
        ...FOLDS.map((sql) => ({ sql, params: [progress.next, until] })),
        {
          sql: 'UPDATE usage_rollup_backfill SET next_id = MAX(next_id, ?) WHERE id = 1',
          params: [until],
        },
      ]);
      return { folded: until - progress.next, left: progress.last + 1 - until };
    },
    async deleteUsageBefore(before, limit) {
      const [changed] = await background().transaction([
        {
          sql: DELETE_OLDEST,
          params: [limit, before],
        },
      ]);
      return changed ?? 0;
    },
    async deleteRollupsBefore(stepMs, before, limit) {
      const changed = await background().transaction([
        {
          sql: `DELETE FROM usage_rollups WHERE (step_ms, at, key_id, route, upstream, cached) IN (
                  SELECT step_ms, at, key_id, route, upstream, cached FROM usage_rollups
                  WHERE step_ms = ? AND at < ? LIMIT ?)`,
          params: [stepMs, before, limit],
        },
        {
          sql: `DELETE FROM usage_totals WHERE (step_ms, at) IN (
                  SELECT step_ms, at FROM usage_totals WHERE step_ms = ? AND at < ? LIMIT ?)`,
          params: [stepMs, before, limit],
        },
      ]);
      return changed.reduce((sum, n) => sum + n, 0);
    },
  };
}
