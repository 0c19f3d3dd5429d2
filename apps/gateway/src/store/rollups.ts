import { LATENCY_BOUNDS_MS } from '../usage/histogram.ts';
import type { SummaryRows } from './store.ts';

/**
 * Usage rollups (README.md#usage-at-any-volume), written by both stores the same way: a trigger
 * on `usage_records` adds every record, in the transaction that writes it, to three rows of
 * `usage_rollups` (its UTC minute, hour and day, per key, route, upstream and cache outcome); a
 * record changed later (a settled request voided by its release) moves its sums with it. Deleting
 * a record (retention) leaves the rollups as they are: they keep its sums. This module writes the
 * SQL once for both dialects, so the columns and the sums cannot drift apart.
 */

/** The resolutions kept, as the step in milliseconds each rollup row stands for. */
export const ROLLUP_STEPS_MS = { minute: 60_000, hour: 3_600_000, day: 86_400_000 } as const;

/** How long each resolution is kept (README.md#usage-at-any-volume); day rollups, for the key's life. */
export const ROLLUP_KEPT_MS = { minute: 14 * 86_400_000, hour: 400 * 86_400_000 } as const;

/** One count per latency bucket: `lat_5` holds latencies above the bound before it up to 5 ms; `lat_inf` those above 10 s. */
export const LATENCY_COLUMNS = [...LATENCY_BOUNDS_MS.map((bound) => `lat_${bound}`), 'lat_inf'];

/** The summed columns of a rollup row, in order. */
const SUMMED = ['requests', 'errors', 'credits_micro', 'input_tokens', 'output_tokens', ...LATENCY_COLUMNS];

/** The dimensions of a rollup row: NULL route or upstream is stored as '' so that upserts meet. */
const DIMENSIONS = ['step_ms', 'at', 'key_id', 'route', 'upstream', 'cached'];

type Dialect = 'sqlite' | 'postgres';

const int = (dialect: Dialect, condition: string) =>
  dialect === 'postgres' ? `(${condition})::int` : `(${condition})`;

/** `usage_rollups`, its key and the index a key's reads use. */
export function rollupTable(dialect: Dialect): string {
  const big = dialect === 'postgres' ? 'bigint' : 'INTEGER';
  const flag = dialect === 'postgres' ? 'boolean' : 'INTEGER';
  return `
    CREATE TABLE usage_rollups (
      step_ms ${big} NOT NULL,
      at ${big} NOT NULL,
      key_id text NOT NULL,
      route text NOT NULL,
      upstream text NOT NULL,
      cached ${flag} NOT NULL,
      ${SUMMED.map((column) => `${column} ${big} NOT NULL`).join(',\n      ')},
      PRIMARY KEY (${DIMENSIONS.join(', ')})
    )${dialect === 'sqlite' ? ' WITHOUT ROWID' : ''};
    CREATE INDEX usage_rollups_key ON usage_rollups (key_id, step_ms, at);`;
}

/**
 * The values one record adds to its three rollup rows (`sign` -1 takes them away), from the row
 * alias `r` with the record's columns.
 */
function recordValues(dialect: Dialect, r: string, sign: string): string[] {
  const latency = LATENCY_BOUNDS_MS.map((bound, i) => {
    const above = i === 0 ? undefined : LATENCY_BOUNDS_MS[i - 1];
    const within =
      above === undefined
        ? `${r}.elapsed_ms <= ${bound}`
        : `${r}.elapsed_ms > ${above} AND ${r}.elapsed_ms <= ${bound}`;
    return `${sign} * ${int(dialect, within)}`;
  });
  const last = LATENCY_BOUNDS_MS[LATENCY_BOUNDS_MS.length - 1];
  return [
    's.ms',
    `(${r}.at / s.ms) * s.ms`,
    `${r}.key_id`,
    `COALESCE(${r}.route, '')`,
    `COALESCE(${r}.upstream, '')`,
    `${r}.cached`,
    `${sign}`,
    `${sign} * ${int(dialect, `${r}.status <> 200`)}`,
    `${sign} * ${r}.credits_micro`,
    `${sign} * ${r}.input_tokens`,
    `${sign} * ${r}.output_tokens`,
    ...latency,
    `${sign} * ${int(dialect, `${r}.elapsed_ms > ${last}`)}`,
  ];
}

const STEPS_SQL = `(SELECT ${ROLLUP_STEPS_MS.minute} AS ms UNION ALL SELECT ${ROLLUP_STEPS_MS.hour} UNION ALL SELECT ${ROLLUP_STEPS_MS.day}) s`;

const upsertTail = `ON CONFLICT (${DIMENSIONS.join(', ')}) DO UPDATE SET
      ${SUMMED.map((column) => `${column} = usage_rollups.${column} + excluded.${column}`).join(',\n      ')}`;

/** Add (sign 1) or take away (sign -1) one record, `r`, in its three rollup rows. */
export function addRecordSql(dialect: Dialect, r: string, sign: 1 | -1): string {
  return `INSERT INTO usage_rollups (${[...DIMENSIONS, ...SUMMED].join(', ')})
    SELECT ${recordValues(dialect, r, String(sign)).join(', ')} FROM ${STEPS_SQL} WHERE true
    ${upsertTail}`;
}

/**
 * Fold usage records `id >= from AND id < until` into the rollups, summed first: the upgrade of
 * a database that has records from before the rollups (README.md#usage-at-any-volume).
 */
export function foldRecordsSql(dialect: Dialect, from: string, until: string): string {
  const values = recordValues(dialect, 'r', '1');
  const dims = values.slice(0, DIMENSIONS.length);
  const sums = values.slice(DIMENSIONS.length).map((value) => `SUM(${value})`);
  return `INSERT INTO usage_rollups (${[...DIMENSIONS, ...SUMMED].join(', ')})
    SELECT ${[...dims, ...sums].join(', ')}
    FROM usage_records r, ${STEPS_SQL}
    WHERE r.id >= ${from} AND r.id < ${until}
    GROUP BY ${dims.join(', ')}
    ${upsertTail}`;
}

/** The sums a read selects from rollup rows: the same names whichever rows it groups. */
export function summedSql(dialect: Dialect): string {
  const sum = (expression: string, as: string) =>
    dialect === 'postgres'
      ? `COALESCE(SUM(${expression}), 0)::bigint AS ${as}`
      : `COALESCE(SUM(${expression}), 0) AS ${as}`;
  const hit = dialect === 'postgres' ? 'CASE WHEN cached THEN requests ELSE 0 END' : 'cached * requests';
  return [
    sum('requests', 'requests'),
    sum('errors', 'errors'),
    sum('credits_micro', 'credits_micro'),
    sum('input_tokens', 'input_tokens'),
    sum('output_tokens', 'output_tokens'),
    sum(hit, 'cache_hits'),
    ...LATENCY_COLUMNS.map((column) => sum(column, column)),
  ].join(', ');
}

/** A row of `summedSql`'s columns. */
export type SummedRow = Record<string, number | string | null | undefined>;

/** What rollup rows sum to: every figure a series point or a summary reports, latency as bucket counts. */
export interface RollupSums {
  requests: number;
  errors: number;
  creditsMicro: number;
  inputTokens: number;
  outputTokens: number;
  cacheHits: number;
  /** One count per latency bucket (usage/histogram.ts). */
  latency: number[];
}

export function toSums(row: SummedRow): RollupSums {
  return {
    requests: Number(row.requests ?? 0),
    errors: Number(row.errors ?? 0),
    creditsMicro: Number(row.credits_micro ?? 0),
    inputTokens: Number(row.input_tokens ?? 0),
    outputTokens: Number(row.output_tokens ?? 0),
    cacheHits: Number(row.cache_hits ?? 0),
    latency: LATENCY_COLUMNS.map((column) => Number(row[column] ?? 0)),
  };
}

/**
 * The rows a read covers: rollups of one resolution over [from, to). A summary covers its range
 * with up to five of them (minutes, hours, days, hours, minutes), one query.
 */
export interface RollupSpan {
  stepMs: number;
  from: number;
  to: number;
}

/** The WHERE clause selecting spans, with positional placeholders made by `placeholder(i)`. */
export function spansWhere(
  spans: readonly RollupSpan[],
  placeholder: (i: number) => string,
): {
  sql: string;
  params: number[];
} {
  const params: number[] = [];
  const parts = spans.map((span) => {
    params.push(span.stepMs, span.from, span.to);
    const n = params.length;
    return `(step_ms = ${placeholder(n - 2)} AND at >= ${placeholder(n - 1)} AND at < ${placeholder(n)})`;
  });
  return { sql: parts.length === 0 ? 'false' : `(${parts.join(' OR ')})`, params };
}

/**
 * A summary's four reads over the same rollup rows (totals, by route, by upstream, the 20 keys that
 * spent most), for either dialect: `placeholder(i)` writes its i-th parameter.
 */
export function summaryReads(
  dialect: Dialect,
  spans: readonly RollupSpan[],
  keyId: string | undefined,
  placeholder: (i: number) => string,
): { sql: string; params: (string | number)[] }[] {
  const sums = summedSql(dialect);
  const where = spansWhere(spans, placeholder);
  const filter = keyId === undefined ? '' : ` AND key_id = ${placeholder(where.params.length + 1)}`;
  const params: (string | number)[] = keyId === undefined ? where.params : [...where.params, keyId];
  const from = `FROM usage_rollups WHERE ${where.sql}${filter}`;
  return [
    { sql: `SELECT ${sums} ${from}`, params },
    { sql: `SELECT route, ${sums} ${from} GROUP BY route ORDER BY credits_micro DESC, route`, params },
    {
      sql: `SELECT upstream, ${sums} ${from} GROUP BY upstream ORDER BY credits_micro DESC, upstream`,
      params,
    },
    {
      sql: `SELECT g.*, k.name, k.prefix FROM (
              SELECT key_id, ${sums} ${from} GROUP BY key_id ORDER BY credits_micro DESC, key_id LIMIT 20) g
            JOIN api_keys k ON k.id = g.key_id ORDER BY g.credits_micro DESC, g.key_id`,
      params,
    },
  ];
}

/** '' is how a rollup row stores "no route" or "no upstream". */
const dimension = (value: unknown) =>
  value === '' || value === null || value === undefined ? null : String(value);

/** The rows of `summaryReads`, in its order, as the Store answers them. */
export function toSummary(results: readonly (readonly SummedRow[])[]): SummaryRows {
  const [totals = [], byRoute = [], byUpstream = [], byKey = []] = results;
  return {
    totals: toSums(totals[0] ?? {}),
    byRoute: byRoute.map((row) => ({ route: dimension(row.route), ...toSums(row) })),
    byUpstream: byUpstream.map((row) => ({ upstream: dimension(row.upstream), ...toSums(row) })),
    byKey: byKey.map((row) => ({
      keyId: String(row.key_id),
      name: String(row.name),
      prefix: String(row.prefix),
      ...toSums(row),
    })),
  };
}
