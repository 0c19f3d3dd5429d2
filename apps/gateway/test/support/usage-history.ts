import type Database from 'better-sqlite3';
import { LATENCY_COLUMNS } from '../../src/store/rollups.ts';

/**
 * A gateway's history written straight into a SQLite file: `keys` keys, each with an hour and a
 * day rollup for every hour and day of the last `days` days, and minute rollups for the last
 * `minutes` minutes. What an operator's reads meet after months of traffic, made in a second
 * instead of the hours the requests would take.
 */
export function seedRollupHistory(
  db: Database.Database,
  options: { keys: number; days: number; minutes?: number; now: number },
): void {
  const { keys, days, now } = options;
  const minutes = options.minutes ?? 0;
  const hour = 3_600_000;
  const day = 86_400_000;
  const counts = `requests, errors, credits_micro, input_tokens, output_tokens, ${LATENCY_COLUMNS.join(', ')}`;
  // 100 requests a row: latencies spread over the buckets, one error, 1000 micro-credits each.
  const latencies = [10, 20, 30, 20, 10, 5, 3, 1, 1, 0, 0, 0];
  const sums = `100, 1, 100000, 100, 0, ${latencies.join(', ')}`;
  // The same for all keys together: one row a step.
  const totals = `${100 * keys}, ${keys}, ${100_000 * keys}, ${100 * keys}, 0, ${latencies.map((n) => n * keys).join(', ')}, 0`;
  const rows = (stepMs: number, count: number) => `
    WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i < ${keys - 1}),
                   s(j) AS (SELECT 1 UNION ALL SELECT j + 1 FROM s WHERE j < ${count})
    INSERT INTO usage_rollups (step_ms, at, key_id, route, upstream, cached, ${counts})
    SELECT ${stepMs}, (${Math.floor(now / stepMs)} - j) * ${stepMs}, 'key_history_' || i, 'default',
           CASE WHEN i % 2 = 0 THEN 'lexical' ELSE 'strong' END, 0, ${sums}
    FROM k, s;
    WITH RECURSIVE s(j) AS (SELECT 1 UNION ALL SELECT j + 1 FROM s WHERE j < ${count})
    INSERT INTO usage_totals (step_ms, at, ${counts}, cache_hits)
    SELECT ${stepMs}, (${Math.floor(now / stepMs)} - j) * ${stepMs}, ${totals} FROM s`;
  db.transaction(() => {
    db.exec(`
      WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i < ${keys - 1})
      INSERT INTO api_keys (id, name, prefix, hash, credits_micro, created_at)
      SELECT 'key_history_' || i, 'history ' || i, 'dg_h' || i, 'history-hash-' || i, NULL, ${now - days * day} FROM k`);
    db.exec(rows(hour, days * 24));
    db.exec(rows(day, days));
    if (minutes > 0) db.exec(rows(60_000, minutes));
  })();
}
