import { LATENCY_BOUNDS_MS, latencyBucket } from '../usage/histogram.ts';
import type { SummaryRows } from './store.ts';

/**
 * Usage rollups (docs/usage.md), written by both stores the same way: every usage record is added,
 * in the transaction that writes it, to its UTC minute, hour and day in each rollup table (SQLite
 * sums each group-commit batch in memory, PostgreSQL each `dg_apply` batch, and each row touched is
 * written once); a record changed later (a settled request voided by its release) moves its sums
 * with it. Deleting a record (retention) leaves the rollups as they are: they keep
 * its sums. This module writes the SQL once for both dialects, so the columns and the sums cannot
 * drift apart.
 */

/** The resolutions kept, as the step in milliseconds each rollup row stands for. */
export const ROLLUP_STEPS_MS = { minute: 60_000, hour: 3_600_000, day: 86_400_000 } as const;

/** How long each resolution is kept (docs/usage.md); day rollups, for the key's life. */
export const ROLLUP_KEPT_MS = { minute: 14 * 86_400_000, hour: 400 * 86_400_000 } as const;

/** One count per latency bucket: `lat_5` holds latencies above the bound before it up to 5 ms; `lat_inf` those above 10 s. */
export const LATENCY_COLUMNS = [...LATENCY_BOUNDS_MS.map((bound) => `lat_${bound}`), 'lat_inf'];

type Dialect = 'sqlite' | 'postgres';

const int = (dialect: Dialect, condition: string) =>
  dialect === 'postgres' ? `(${condition})::int` : `(${condition})`;

/**
 * The two rollup tables:
 * - `usage_rollups`, per key, route, upstream and cache outcome: a key's series and totals, and
 *   every split by route, upstream or key;
 * - `usage_totals`, all keys together, one row a step: the all-keys series and totals, which
 *   would otherwise sum a row of every key for every step (on PostgreSQL its rows are taken day,
 *   hour, minute in that order by every writer, so that writers queue rather than deadlock).
 */
export type RollupTableName = 'usage_rollups' | 'usage_totals';

interface Column {
  name: string;
  /** Its value for the record `r`; summed columns are multiplied by `sign`. */
  value(dialect: Dialect, r: string): string;
}

const DIMENSIONS: Record<RollupTableName, Column[]> = {
  usage_rollups: [
    { name: 'step_ms', value: () => 's.ms' },
    { name: 'at', value: (_, r) => `(${r}.at / s.ms) * s.ms` },
    { name: 'key_id', value: (_, r) => `${r}.key_id` },
    // NULL is stored as '' so that upserts meet.
    { name: 'route', value: (_, r) => `COALESCE(${r}.route, '')` },
    { name: 'upstream', value: (_, r) => `COALESCE(${r}.upstream, '')` },
    { name: 'cached', value: (_, r) => `${r}.cached` },
  ],
  usage_totals: [
    { name: 'step_ms', value: () => 's.ms' },
    { name: 'at', value: (_, r) => `(${r}.at / s.ms) * s.ms` },
  ],
};

const latencyColumns: Column[] = LATENCY_BOUNDS_MS.map((bound, i) => {
  const above = LATENCY_BOUNDS_MS[i - 1];
  return {
    name: `lat_${bound}`,
    value: (dialect, r) =>
      int(
        dialect,
        above === undefined
          ? `${r}.elapsed_ms <= ${bound}`
          : `${r}.elapsed_ms > ${above} AND ${r}.elapsed_ms <= ${bound}`,
      ),
  };
});

const COUNTS: Column[] = [
  { name: 'requests', value: () => '1' },
  { name: 'errors', value: (dialect, r) => int(dialect, `${r}.status <> 200`) },
  { name: 'credits_micro', value: (_, r) => `${r}.credits_micro` },
  { name: 'input_tokens', value: (_, r) => `${r}.input_tokens` },
  { name: 'output_tokens', value: (_, r) => `${r}.output_tokens` },
  ...latencyColumns,
  {
    name: 'lat_inf',
    value: (dialect, r) =>
      int(dialect, `${r}.elapsed_ms > ${LATENCY_BOUNDS_MS[LATENCY_BOUNDS_MS.length - 1]}`),
  },
];

const SUMMED: Record<RollupTableName, Column[]> = {
  // Per key, the cache outcome is a dimension; all keys together, a count.
  usage_rollups: COUNTS,
  usage_totals: [...COUNTS, { name: 'cache_hits', value: (dialect, r) => int(dialect, `${r}.cached`) }],
};

/** A rollup table, its key and the index a key's reads use. */
export function rollupTable(dialect: Dialect, table: RollupTableName): string {
  const big = dialect === 'postgres' ? 'bigint' : 'INTEGER';
  const type = (name: string) =>
    name === 'key_id' || name === 'route' || name === 'upstream'
      ? 'text'
      : name === 'cached' && dialect === 'postgres'
        ? 'boolean'
        : big;
  const columns = [...DIMENSIONS[table], ...SUMMED[table]].map((c) => `${c.name} ${type(c.name)} NOT NULL`);
  return `
    CREATE TABLE ${table} (
      ${columns.join(',\n      ')},
      PRIMARY KEY (${DIMENSIONS[table].map((c) => c.name).join(', ')})
    )${dialect === 'sqlite' ? ' WITHOUT ROWID' : ''};${
      table === 'usage_rollups'
        ? '\n    CREATE INDEX usage_rollups_key ON usage_rollups (key_id, step_ms, at);'
        : ''
    }`;
}

/**
 * Both rollup tables, and the upgrade's progress: the records already here when the rollups
 * arrive, from next_id to last_id, still to be folded into them (usage/maintenance.ts).
 */
export function rollupSchema(dialect: Dialect): string {
  const big = dialect === 'postgres' ? 'bigint' : 'INTEGER';
  return `${rollupTable(dialect, 'usage_rollups')}
    ${rollupTable(dialect, 'usage_totals')}
    CREATE TABLE usage_rollup_backfill (
      id integer PRIMARY KEY CHECK (id = 1),
      next_id ${big} NOT NULL,
      last_id ${big} NOT NULL
    );
    INSERT INTO usage_rollup_backfill (id, next_id, last_id)
      SELECT 1, COALESCE(MIN(id), 1), COALESCE(MAX(id), 0) FROM usage_records;`;
}

/** The three resolutions of a record, day first: the order every writer takes the rows in. */
const STEPS_SQL = `(SELECT ${ROLLUP_STEPS_MS.day} AS ms UNION ALL SELECT ${ROLLUP_STEPS_MS.hour} UNION ALL SELECT ${ROLLUP_STEPS_MS.minute}) s`;

const upsertTail = (
  table: RollupTableName,
) => `ON CONFLICT (${DIMENSIONS[table].map((c) => c.name).join(', ')}) DO UPDATE SET
      ${SUMMED[table].map((c) => `${c.name} = ${table}.${c.name} + excluded.${c.name}`).join(',\n      ')}`;

const columnList = (table: RollupTableName) =>
  [...DIMENSIONS[table], ...SUMMED[table]].map((c) => c.name).join(', ');

/** Add (sign 1) or take away (sign -1) one record, `r`, in its three rows of `table`. */
export function addRecordSql(dialect: Dialect, table: RollupTableName, r: string, sign: 1 | -1): string {
  const values = [
    ...DIMENSIONS[table].map((c) => c.value(dialect, r)),
    ...SUMMED[table].map((c) => `${sign} * ${c.value(dialect, r)}`),
  ];
  return `INSERT INTO ${table} (${columnList(table)})
    SELECT ${values.join(', ')} FROM ${STEPS_SQL} WHERE true
    ${upsertTail(table)}`;
}

/**
 * Sum rows of `source` (usage records, aliased `r`, each counted `sign` times) into `table`, one
 * upsert a row, in the order of the table's key: the upgrade's fold, and PostgreSQL's batches.
 */
function sumIntoSql(
  dialect: Dialect,
  table: RollupTableName,
  source: string,
  where: string,
  sign: string,
): string {
  const dims = DIMENSIONS[table].map((c) => c.value(dialect, 'r'));
  const sums = SUMMED[table].map((c) => `SUM(${sign} * ${c.value(dialect, 'r')})`);
  // Day rows first, as every writer takes them (docs/usage.md).
  const order = dims.map((d, i) => (i === 0 ? `${d} DESC` : d));
  return `INSERT INTO ${table} (${columnList(table)})
    SELECT ${[...dims, ...sums].join(', ')}
    FROM ${source} r, ${STEPS_SQL}
    WHERE ${where}
    GROUP BY ${dims.join(', ')}
    ORDER BY ${order.join(', ')}
    ${upsertTail(table)}`;
}

/**
 * Fold usage records `id >= from AND id < until` into the rollups, summed first: the upgrade of
 * a database that has records from before the rollups (docs/usage.md).
 */
export function foldRecordsSql(
  dialect: Dialect,
  table: RollupTableName,
  from: string,
  until: string,
): string {
  return sumIntoSql(dialect, table, 'usage_records', `r.id >= ${from} AND r.id < ${until}`, '1');
}

/**
 * PostgreSQL's batches: the records a `dg_apply` wrote (and the ones it voided, taken away) wait
 * in `dg_pending_rollups` with their sign and transaction; at the end of the batch they are summed
 * into each rollup row once (docs/usage.md).
 */
export function pendingRollupsSql(table: RollupTableName): string {
  return sumIntoSql('postgres', table, 'dg_pending_rollups', 'r.tx = txid_current()', 'r.sign');
}

/** The columns of a usage record the rollups read, for the pending table. */
export const PENDING_COLUMNS =
  'key_id, at, route, upstream, cached, status, credits_micro, input_tokens, output_tokens, elapsed_ms';

/**
 * One rollup row's upsert with its values as parameters, in the order of `rollupRowValues`: for a
 * store that sums a batch of records itself before writing (SQLite's group commit).
 */
export function upsertRowSql(table: RollupTableName): string {
  const columns = [...DIMENSIONS[table], ...SUMMED[table]];
  return `INSERT INTO ${table} (${columnList(table)}) VALUES (${columns.map(() => '?').join(', ')})
    ${upsertTail(table)}`;
}

/** What one usage record adds to its rows (`sign` -1 takes it away), as numbers the upsert binds. */
export interface RecordForRollup {
  keyId: string;
  at: number;
  route: string | null;
  upstream: string | null;
  cached: boolean;
  status: number;
  creditsMicro: number;
  inputTokens: number;
  outputTokens: number;
  elapsedMs: number;
}

/** A rollup row a batch sums: its table, its dimensions and its sums, in the order of upsertRowSql. */
export interface RollupRow {
  table: RollupTableName;
  dims: (string | number)[];
  sums: number[];
}

/** Where the latency counts start among a row's sums (after requests, errors, credits and tokens). */
const FIRST_LATENCY = COUNTS.findIndex((c) => c.name === LATENCY_COLUMNS[0]);
const STEPS = [ROLLUP_STEPS_MS.day, ROLLUP_STEPS_MS.hour, ROLLUP_STEPS_MS.minute];

/** The six rows one record was added to (the all-keys row, then the key's, for a day, an hour and a minute), and what they stand for. */
interface RowsOfRecord {
  route: string;
  upstream: string;
  cached: 0 | 1;
  /** The start of the record's minute: its hour and its day follow from it. */
  minute: number;
  rows: RollupRow[];
}

/**
 * A batch's rollup rows of both tables, summed in memory, keyed by table and dimensions: a row is
 * made once and added to in place, so a batch of many records of one key and minute writes its few
 * rows, not six a record. Written beside the SQL above so that the two ways of adding a record (a
 * trigger, or a store's own batch) sum the same columns.
 */
export class BatchRollups {
  /** Every row the batch touched. */
  readonly rows = new Map<string, RollupRow>();
  /**
   * Each key's last rows: its next record of the same route, upstream, cache outcome and minute
   * (most of a batch under load) adds to them without six row keys made and looked up for it.
   */
  private readonly lastOfKey = new Map<string, RowsOfRecord>();

  /** What `record` adds to its rows (`sign` -1 takes it away); `creditsMicro`, if given, in place of the record's. */
  add(record: RecordForRollup, sign: 1 | -1, creditsMicro = record.creditsMicro): void {
    const latency = FIRST_LATENCY + latencyBucket(record.elapsedMs);
    const route = record.route ?? '';
    const upstream = record.upstream ?? '';
    const cached = record.cached ? 1 : 0;
    const minute = Math.floor(record.at / ROLLUP_STEPS_MS.minute) * ROLLUP_STEPS_MS.minute;
    let last = this.lastOfKey.get(record.keyId);
    if (
      last === undefined ||
      last.minute !== minute ||
      last.route !== route ||
      last.upstream !== upstream ||
      last.cached !== cached
    ) {
      last = {
        route,
        upstream,
        cached,
        minute,
        rows: this.rowsOf(record.keyId, minute, route, upstream, cached),
      };
      this.lastOfKey.set(record.keyId, last);
    }
    const { rows } = last;
    for (let i = 0; i < rows.length; i += 2) {
      const totals = (rows[i] as RollupRow).sums;
      addCounts(totals, record, sign, creditsMicro, latency);
      totals[COUNTS.length] = (totals[COUNTS.length] ?? 0) + sign * cached;
      addCounts((rows[i + 1] as RollupRow).sums, record, sign, creditsMicro, latency);
    }
  }

  private rowsOf(keyId: string, minute: number, route: string, upstream: string, cached: 0 | 1): RollupRow[] {
    const rows: RollupRow[] = [];
    for (const stepMs of STEPS) {
      const at = Math.floor(minute / stepMs) * stepMs;
      rows.push(
        this.row(`t:${stepMs}:${at}`, 'usage_totals', [stepMs, at], SUMMED.usage_totals.length),
        this.row(
          `k:${stepMs}\u0000${at}\u0000${keyId}\u0000${route}\u0000${upstream}\u0000${cached}`,
          'usage_rollups',
          [stepMs, at, keyId, route, upstream, cached],
          COUNTS.length,
        ),
      );
    }
    return rows;
  }

  private row(key: string, table: RollupTableName, dims: (string | number)[], width: number): RollupRow {
    let row = this.rows.get(key);
    if (row === undefined) {
      row = { table, dims, sums: new Array<number>(width).fill(0) };
      this.rows.set(key, row);
    }
    return row;
  }
}

/** The counts of COUNTS, in its order. */
function addCounts(
  sums: number[],
  record: RecordForRollup,
  sign: 1 | -1,
  creditsMicro: number,
  latency: number,
): void {
  sums[0] = (sums[0] ?? 0) + sign;
  if (record.status !== 200) sums[1] = (sums[1] ?? 0) + sign;
  sums[2] = (sums[2] ?? 0) + sign * creditsMicro;
  sums[3] = (sums[3] ?? 0) + sign * record.inputTokens;
  sums[4] = (sums[4] ?? 0) + sign * record.outputTokens;
  sums[latency] = (sums[latency] ?? 0) + sign;
}

/** The sums a read selects from rows of `table`: the same names whichever rows it groups. */
export function summedSql(dialect: Dialect, table: RollupTableName = 'usage_rollups'): string {
  const sum = (expression: string, as: string) =>
    dialect === 'postgres'
      ? `COALESCE(SUM(${expression}), 0)::bigint AS ${as}`
      : `COALESCE(SUM(${expression}), 0) AS ${as}`;
  const hits =
    table === 'usage_totals'
      ? 'cache_hits'
      : dialect === 'postgres'
        ? 'CASE WHEN cached THEN requests ELSE 0 END'
        : 'cached * requests';
  return [
    sum('requests', 'requests'),
    sum('errors', 'errors'),
    sum('credits_micro', 'credits_micro'),
    sum('input_tokens', 'input_tokens'),
    sum('output_tokens', 'output_tokens'),
    sum(hits, 'cache_hits'),
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

/**
 * The WHERE clause selecting spans, with positional placeholders made by `placeholder(i)`. With a
 * key, each span names it too, so that every term is a range of the key's index and the database
 * reads that key's rows of the span only (not all of the key's rows, nor every key's of the span).
 */
export function spansWhere(
  spans: readonly RollupSpan[],
  placeholder: (i: number) => string,
  keyId?: string,
): {
  sql: string;
  params: (string | number)[];
} {
  const params: (string | number)[] = [];
  const parts = spans.map((span) => {
    const key = keyId === undefined ? '' : `key_id = ${placeholder(params.push(keyId))} AND `;
    const step = placeholder(params.push(span.stepMs));
    const from = placeholder(params.push(span.from));
    const to = placeholder(params.push(span.to));
    return `(${key}step_ms = ${step} AND at >= ${from} AND at < ${to})`;
  });
  return { sql: parts.length === 0 ? 'false' : `(${parts.join(' OR ')})`, params };
}

/**
 * A summary's reads over the same rollup rows (totals, by route, by upstream, the 20 keys that
 * spent most, by project), for either dialect: `placeholder(i)` writes its i-th parameter.
 */
export function summaryReads(
  dialect: Dialect,
  spans: readonly RollupSpan[],
  keyId: string | undefined,
  placeholder: (i: number) => string,
): { sql: string; params: (string | number)[] }[] {
  const sums = summedSql(dialect);
  const where = spansWhere(spans, placeholder, keyId);
  const params = where.params;
  const from = `FROM usage_rollups WHERE ${where.sql}`;
  const totals =
    keyId === undefined
      ? `SELECT ${summedSql(dialect, 'usage_totals')} FROM usage_totals WHERE ${where.sql}`
      : `SELECT ${sums} ${from}`;
  return [
    { sql: totals, params },
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
    // docs/budgets.md: each project's keys summed; keys without a project are left out.
    {
      sql: `SELECT g.*, p.name FROM (
              SELECT project_id, ${sums} FROM (
                SELECT u.*, k.project_id FROM usage_rollups u JOIN api_keys k ON k.id = u.key_id
                WHERE k.project_id IS NOT NULL AND ${where.sql}) x
              GROUP BY project_id) g
            JOIN projects p ON p.id = g.project_id ORDER BY g.credits_micro DESC, g.project_id`,
      params,
    },
  ];
}

/** '' is how a rollup row stores "no route" or "no upstream". */
const dimension = (value: unknown) =>
  value === '' || value === null || value === undefined ? null : String(value);

/** The rows of `summaryReads`, in its order, as the Store answers them. */
export function toSummary(results: readonly (readonly SummedRow[])[]): SummaryRows {
  const [totals = [], byRoute = [], byUpstream = [], byKey = [], byProject = []] = results;
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
    byProject: byProject.map((row) => ({
      projectId: String(row.project_id),
      name: String(row.name),
      ...toSums(row),
    })),
  };
}
