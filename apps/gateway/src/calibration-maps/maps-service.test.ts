import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { openSqliteStore } from '../store/sqlite/sqlite-store.ts';
import type { Store } from '../store/store.ts';
import { createCalibrationMaps } from './maps-service.ts';

const DAY = 86_400_000;
const now = Date.parse('2026-11-29T12:00:00Z');
/** Decisions kept, each with one outcome: more than two pages of the refit's reads (200 a page). */
const DECISIONS = 450;

describe('a calibration refit beside callers (a real SQLite file)', () => {
  let dir: string;
  let store: Store;
  const services: { close(): Promise<void> }[] = [];
  afterEach(async () => {
    for (const service of services.splice(0)) await service.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function seeded() {
    dir = mkdtempSync(join(tmpdir(), 'dg-refit-'));
    const path = join(dir, 'gateway.db');
    store = openSqliteStore(path);
    const db = new Database(path);
    const decision = db.prepare(
      'INSERT INTO decision_records (request_id, key_id, route, at, reused, questions) VALUES (?, ?, ?, ?, NULL, ?)',
    );
    const outcome = db.prepare(
      'INSERT INTO decision_outcomes (request_id, question_id, truth, recorded_at) VALUES (?, ?, ?, ?)',
    );
    db.transaction(() => {
      for (let i = 0; i < DECISIONS; i++) {
        const p = (i % 9) / 10 + 0.05;
        const at = now - DAY + i;
        decision.run(
          `req_${i}`,
          'key_r',
          'default',
          at,
          JSON.stringify({ urgent: { type: 'noul', upstream: 'cheap', p } }),
        );
        outcome.run(`req_${i}`, 'urgent', JSON.stringify(i % 3 === 0), at);
      }
    })();
    db.close();
  }

  /** A refit with callers that begin `perPage` requests between any two looks, and the rests it took. */
  async function refitBeside(perPage: number) {
    const rests: number[] = [];
    let begun = 0;
    const maps = createCalibrationMaps({
      store,
      logger: pino({ level: 'silent' }),
      clock: () => now,
      windowDays: 30,
      minOutcomes: 100,
      refitMinutes: 0,
      requestsBegun: () => {
        begun += perPage;
        return begun;
      },
      rest: async (ms) => {
        rests.push(ms);
      },
    });
    services.push(maps);
    const fits = await maps.refit();
    return { fits, rests };
  }

  it('rests after each page while callers keep beginning requests, and fits all the same', async () => {
    seeded();
    const { fits, rests } = await refitBeside(1);
    // Three pages (200, 200, 50): a rest after each of the two full ones.
    expect(rests).toHaveLength(2);
    for (const ms of rests) expect(ms).toBeGreaterThan(0);
    expect(fits).toMatchObject([{ upstream: 'cheap', type: 'noul', outcomes: DECISIONS }]);
  });

  it('reads page after page when nobody calls', async () => {
    seeded();
    const { fits, rests } = await refitBeside(0);
    expect(rests).toEqual([]);
    expect(fits).toMatchObject([{ upstream: 'cheap', type: 'noul', outcomes: DECISIONS }]);
  });
});
