import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, bearer, get, post, sampleRequest, startGateway, type TestGateway } from './harness.ts';
import { seedRollupHistory } from './support/usage-history.ts';

/**
 * No caller waits for an operator (docs/usage.md): on SQLite the operator's reads
 * run on their own thread, so a caller's p99 rises by at most 25 ms while the console reads
 * series, summaries and usage back to back over a month of history from 300 keys.
 */
describe('a caller while an operator reads usage continuously (real gateway, SQLite)', () => {
  let gw: TestGateway;
  let key: string;
  let keyId: string;
  const admin = bearer(ADMIN_TOKEN);
  const now = Date.now();

  beforeAll(async () => {
    gw = await startGateway({ adminToken: ADMIN_TOKEN });
    const db = new Database(gw.dbPath);
    seedRollupHistory(db, { keys: 300, days: 30, minutes: 600, now });
    db.close();
    ({ key, id: keyId } = await gw.createKey({ credits: null }));
  }, 60_000);
  afterAll(() => gw.close());

  const p99 = (samples: number[]) => {
    const sorted = [...samples].sort((a, b) => a - b);
    return sorted[Math.ceil(0.99 * sorted.length) - 1] as number;
  };

  async function callerLatencies(count: number): Promise<number[]> {
    const latencies: number[] = [];
    for (let i = 0; i < count; i++) {
      const started = performance.now();
      const sent = await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key));
      latencies.push(performance.now() - started);
      expect(sent.status).toBe(200);
    }
    return latencies;
  }

  /** The console's reads, back to back, until told to stop; resolves with how many it made. */
  function operatorReading() {
    let stop = false;
    let reads = 0;
    const month = new Date(now - 30 * 86_400_000).toISOString();
    const paths = [
      `/admin/usage/series?from=${month}&step=hour`,
      `/admin/usage/summary?from=${month}`,
      `/admin/usage/series?from=${new Date(now - 600 * 60_000).toISOString()}&step=minute`,
      `/admin/keys/${keyId}/usage?limit=1000`,
      `/admin/usage/summary?from=${new Date(now - 86_400_000).toISOString()}`,
    ];
    const done = (async () => {
      while (!stop) {
        const read = await get(gw.url, paths[reads % paths.length] as string, admin);
        if (read.status !== 200) throw new Error(`an operator read failed: ${JSON.stringify(read.body)}`);
        reads++;
      }
      return reads;
    })();
    return {
      async stop() {
        stop = true;
        return done;
      },
    };
  }

  it('reads a month of 300 keys’ history: the series and summary sums are the seeded ones', async () => {
    const month = new Date(Math.floor(now / 86_400_000) * 86_400_000 - 29 * 86_400_000).toISOString();
    // Up to the current hour: the seeded rows have hours for today but no day row yet, which a
    // summary ending at midnight would read instead.
    const hour = new Date(Math.floor(now / 3_600_000) * 3_600_000).toISOString();
    const summary = await get(gw.url, `/admin/usage/summary?from=${month}&to=${hour}`, admin);
    expect(summary.status).toBe(200);
    expect(summary.body.data.byKey).toHaveLength(20);
    expect(summary.body.data.byUpstream.map((u: { upstream: string }) => u.upstream).sort()).toEqual([
      'lexical',
      'strong',
    ]);
    // Each seeded row: 100 requests, 10/20/30/20/10/5/3/1/1 in the buckets up to 2.5 s. The median
    // is rank 50, in (10, 25] after 30: 10 + 15 × 20/30 = 20 ms; p95 is rank 95, the top of (100, 250].
    expect(summary.body.data.totals).toMatchObject({ p50ElapsedMs: 20, p95ElapsedMs: 250 });
    // 29 whole days from day rollups, then today's whole hours from hour rollups (the seeded rows
    // end an hour before now): 100 requests, 1 error and 0.1 credits a row.
    const rows = 300 * (29 + Math.floor((now % 86_400_000) / 3_600_000));
    expect(summary.body.data.totals).toMatchObject({ requests: rows * 100, errors: rows });
    expect(summary.body.data.totals.creditsUsed).toBeCloseTo(rows * 0.1, 6);
  });

  it('a caller’s p99 rises by at most 25 ms while the operator reads', async () => {
    await callerLatencies(50); // warm
    // Rounds side by side, so that whatever else the machine does falls on both; the median round counts.
    const rises: number[] = [];
    const quiets: number[] = [];
    const reads: number[] = [];
    for (let round = 0; round < 3; round++) {
      const quiet = p99(await callerLatencies(300));
      const operator = operatorReading();
      const busy = p99(await callerLatencies(300));
      reads.push(await operator.stop());
      quiets.push(quiet);
      rises.push(busy - quiet);
    }
    expect(Math.min(...reads)).toBeGreaterThan(3);
    const median = (values: number[]) => [...values].sort((a, b) => a - b)[1] as number;
    // 25 ms is the bar (docs/usage.md; pnpm bench:usage measures it). On a machine so loaded that a
    // quiet p99 is already past 25 ms, the test holds the p99 to at most doubling instead: a read
    // on the serving thread would make callers wait for whole reads (the month's summary and
    // series take 50–120 ms each at their median on a 2-core machine doing nothing else).
    const allowed = Math.max(25, median(quiets));
    expect(
      median(rises),
      `p99 quiet per round: ${quiets.map((q) => q.toFixed(1)).join(', ')} ms; rises: ${rises.map((r) => r.toFixed(1)).join(', ')} ms`,
    ).toBeLessThanOrEqual(allowed);
  }, 240_000);
});
