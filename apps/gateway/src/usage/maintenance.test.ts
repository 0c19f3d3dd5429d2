import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { openSqliteStore } from '../store/sqlite/sqlite-store.ts';
import { usageEntry } from '../store/store.contract-tests.ts';
import type { Store } from '../store/store.ts';
import { decisionRetention, startMaintenance, usageRetention } from './maintenance.ts';

const DAY = 86_400_000;
const now = Date.parse('2026-11-25T12:00:00Z');
const silent = pino({ level: 'silent' });

const record = (keyId: string, requestId: string, at: number) => usageEntry(keyId, requestId, 1000, at);

describe('usage maintenance (retention on a real SQLite file)', () => {
  let dir: string;
  let store: Store;
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function seeded() {
    dir = mkdtempSync(join(tmpdir(), 'dg-maintenance-'));
    store = openSqliteStore(join(dir, 'gateway.db'));
    await store.createKey({
      id: 'key_m',
      name: 'm',
      prefix: 'dg_m',
      hash: 'h'.repeat(64),
      creditsMicro: null,
      rateLimitPerMinute: null,
      route: null,
      createdAt: 0,
      expiresAt: null,
    });
    // 25 records 100 days old, 5 records 20 days old, 5 today.
    for (let i = 0; i < 25; i++) await store.settle(null, record('key_m', `old${i}`, now - 100 * DAY + i), 0);
    for (let i = 0; i < 5; i++) await store.settle(null, record('key_m', `mid${i}`, now - 20 * DAY + i), 0);
    for (let i = 0; i < 5; i++) await store.settle(null, record('key_m', `new${i}`, now + i), 0);
  }

  it('deletes, in batches until none is left, what each retention setting no longer keeps', async () => {
    await seeded();
    const maintenance = startMaintenance({
      store,
      tasks: usageRetention(store, 90),
      logger: silent,
      clock: () => now,
      batchSize: 4,
    });
    const report = await maintenance.runPass();
    await maintenance.stop();
    // 25 old records; minute rollups: the old minute and the 20-day-old one, per key and for all
    // keys; no hour older than 400 days.
    expect(report).toEqual({ folded: 0, deleted: { 'usage records': 25, 'minute rollups': 4 } });
    const usage = await store.usage('key_m', 100);
    expect(usage.recent).toHaveLength(10);
    expect(usage.totals.requests).toBe(35);
    const days = await store.usageSeries({
      keyId: 'key_m',
      stepMs: DAY,
      from: now - 101 * DAY,
      to: now + DAY,
    });
    expect(days.map((d) => d.requests)).toEqual([25, 5, 5]);
    const hours = await store.usageSeries({
      keyId: 'key_m',
      stepMs: 3_600_000,
      from: now - 101 * DAY,
      to: now + DAY,
    });
    expect(hours.map((h) => h.requests)).toEqual([25, 5, 5]);
  });

  it('rests after a batch only while callers are writing', async () => {
    await seeded();
    const rests: number[] = [];
    let writing = false;
    const looked = { times: 0 };
    // The real store, but callers' writing as the test says (the store's own answer has its contract test).
    let newest = 100;
    const watched: Store = Object.assign(Object.create(store) as Store, {
      newestUsageId: async () => {
        looked.times++;
        if (writing) newest++;
        return String(newest);
      },
    });
    const options = {
      store: watched,
      logger: silent,
      clock: () => now,
      batchSize: 4,
      // So large that every batch earns a rest, however fast the machine.
      restFactor: 1e9,
      sleep: async (ms: number) => void rests.push(ms),
    };
    const idle = startMaintenance({ ...options, tasks: usageRetention(watched, 90) });
    await idle.runPass();
    await idle.stop();
    expect(looked.times).toBeGreaterThanOrEqual(7); // 25 records in batches of 4, and the rollups'
    expect(rests).toEqual([]);

    writing = true;
    const busy = startMaintenance({ ...options, tasks: usageRetention(watched, 10) });
    const report = await busy.runPass();
    await busy.stop();
    expect(report?.deleted['usage records']).toBe(5);
    expect(rests.length).toBeGreaterThanOrEqual(2);
    for (const ms of rests) expect(ms).toBeGreaterThan(0);
  });

  it('keeps the records a longer retention still keeps', async () => {
    await seeded();
    const maintenance = startMaintenance({
      store,
      tasks: usageRetention(store, 120),
      logger: silent,
      clock: () => now,
    });
    expect(await maintenance.runPass()).toEqual({ folded: 0, deleted: { 'minute rollups': 4 } });
    await maintenance.stop();
    expect((await store.usage('key_m', 100)).recent).toHaveLength(35);
  });

  it('starts its first pass by itself, without being asked', async () => {
    await seeded();
    const maintenance = startMaintenance({
      store,
      tasks: usageRetention(store, 1),
      logger: silent,
      clock: () => now,
    });
    try {
      const deadline = Date.now() + 20_000;
      while ((await store.usage('key_m', 100)).recent.length > 5 && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 20));
      expect((await store.usage('key_m', 100)).recent.map((r) => r.requestId).sort()).toEqual([
        'new0',
        'new1',
        'new2',
        'new3',
        'new4',
      ]);
    } finally {
      await maintenance.stop();
    }
  });

  it('deletes decisions past DECISION_RETENTION_DAYS with the same pass, their outcomes with them', async () => {
    await seeded();
    const questions = JSON.stringify({ refund: { type: 'noul', upstream: 'lexical', p: 0.9 } });
    const decide = (requestId: string, at: number) =>
      store.settle(null, record('key_m', requestId, at), 0, { questions, reused: null });
    await decide('old-decision', now - 40 * DAY);
    await decide('new-decision', now - DAY);
    await store.recordOutcomes('old-decision', [{ questionId: 'refund', truth: 'true' }], now);
    const maintenance = startMaintenance({
      store,
      tasks: [decisionRetention(store, 30)],
      logger: silent,
      clock: () => now,
    });
    expect(await maintenance.runPass()).toEqual({ folded: 0, deleted: { 'decision records': 1 } });
    await maintenance.stop();
    expect(await store.findDecision('old-decision')).toBeUndefined();
    expect(await store.findDecision('new-decision')).toBeDefined();
    expect(await store.judgedDecisions({ from: 0, to: now + DAY })).toEqual([]);
  });
});
