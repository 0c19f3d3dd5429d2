import { describe, expect, it } from 'vitest';
import { LATENCY_BOUNDS_MS } from '../usage/histogram.ts';
import { BatchRollups, type RecordForRollup, ROLLUP_STEPS_MS } from './rollups.ts';

/** What one record adds, written out plainly: requests, errors, credits, tokens, then a count per latency bucket. */
function countsOf(record: RecordForRollup, sign: number, creditsMicro: number): number[] {
  const bucket = LATENCY_BOUNDS_MS.findIndex((bound) => record.elapsedMs <= bound);
  const latency = new Array<number>(LATENCY_BOUNDS_MS.length + 1).fill(0);
  latency[bucket === -1 ? LATENCY_BOUNDS_MS.length : bucket] = sign;
  return [
    sign,
    record.status === 200 ? 0 : sign,
    sign * creditsMicro,
    sign * record.inputTokens,
    sign * record.outputTokens,
    ...latency,
  ];
}

/** The rows `added` sum to, grouped from scratch: table and dimensions, then sums. */
function expectedRows(added: { record: RecordForRollup; sign: 1 | -1; creditsMicro: number }[]) {
  const rows = new Map<string, number[]>();
  const add = (key: string, sums: number[]) => {
    const row = rows.get(key) ?? new Array<number>(sums.length).fill(0);
    rows.set(
      key,
      row.map((value, i) => value + (sums[i] ?? 0)),
    );
  };
  for (const { record, sign, creditsMicro } of added) {
    const counts = countsOf(record, sign, creditsMicro);
    for (const step of Object.values(ROLLUP_STEPS_MS)) {
      const at = Math.floor(record.at / step) * step;
      const cached = record.cached ? 1 : 0;
      add(JSON.stringify(['usage_totals', step, at]), [...counts, sign * cached]);
      const dims = [step, at, record.keyId, record.route ?? '', record.upstream ?? '', cached];
      add(JSON.stringify(['usage_rollups', ...dims]), counts);
    }
  }
  return rows;
}

/** A small random generator with a seed, so that a failure can be replayed. */
function generator(seed: number) {
  let state = seed;
  const next = () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state / 2 ** 31;
  };
  return <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T;
}

describe('a batch of rollups', () => {
  it('sums every record into its rows of both tables, whatever order keys, routes and minutes come in', () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const pick = generator(seed);
      // Around a day's end, so that records of one batch meet in some rows and not in others.
      const midnight = Date.UTC(2026, 10, 28);
      const times = [-3_600_001, -60_001, -1, 0, 1, 59_999, 60_000, 3_600_000, 86_400_000].map(
        (offset) => midnight + offset,
      );
      const batch = new BatchRollups();
      const added: { record: RecordForRollup; sign: 1 | -1; creditsMicro: number }[] = [];
      for (let i = 0; i < 400; i++) {
        const record: RecordForRollup = {
          keyId: pick(['key_a', 'key_b', 'key_c']),
          at: pick(times),
          route: pick(['default', 'fast', null]),
          upstream: pick(['systemone', 'lexical', null]),
          cached: pick([true, false]),
          status: pick([200, 200, 502]),
          creditsMicro: pick([0, 1_234, 90_000]),
          inputTokens: pick([0, 17, 234]),
          outputTokens: pick([0, 3]),
          elapsedMs: pick([0, 5, 6, 240, 12_000]),
        };
        const sign = pick([1, 1, -1] as const);
        // A settle debits what the answer cost, which may differ from the record as built.
        const creditsMicro = pick([record.creditsMicro, 500]);
        if (creditsMicro === record.creditsMicro) batch.add(record, sign);
        else batch.add(record, sign, creditsMicro);
        added.push({ record, sign, creditsMicro });
      }
      const got = new Map(
        [...batch.rows.values()].map((row) => [JSON.stringify([row.table, ...row.dims]), row.sums]),
      );
      expect(got).toEqual(expectedRows(added));
    }
  });

  it('keeps the rows of another key apart, even in the same minute', () => {
    const batch = new BatchRollups();
    const record = (keyId: string): RecordForRollup => ({
      keyId,
      at: Date.UTC(2026, 10, 28, 12, 30, 15),
      route: 'default',
      upstream: 'systemone',
      cached: false,
      status: 200,
      creditsMicro: 1_000,
      inputTokens: 10,
      outputTokens: 0,
      elapsedMs: 3,
    });
    batch.add(record('key_a'), 1);
    batch.add(record('key_b'), 1);
    batch.add(record('key_a'), 1);
    const minuteRows = [...batch.rows.values()].filter(
      (row) => row.table === 'usage_rollups' && row.dims[0] === ROLLUP_STEPS_MS.minute,
    );
    expect(minuteRows.map((row) => [row.dims[2], row.sums[0]])).toEqual([
      ['key_a', 2],
      ['key_b', 1],
    ]);
    const minuteTotal = [...batch.rows.values()].find(
      (row) => row.table === 'usage_totals' && row.dims[0] === ROLLUP_STEPS_MS.minute,
    );
    expect(minuteTotal?.sums[0]).toBe(3);
  });
});
