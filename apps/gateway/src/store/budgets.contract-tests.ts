import { describe, expect, it } from 'vitest';
import { newKey, type StoreFixture, usageEntry, withFixture } from './store.contract-tests.ts';
import type { Budget, BudgetEvent, BudgetHolder, Store } from './store.ts';

/**
 * Budgets and projects (docs/budgets.md), the same contract for every Store: hard budgets exact
 * under concurrency and across instances, windows that reset by arithmetic, soft budgets that
 * only tell, holds left by a crash that stop counting.
 */

const MICRO = 1_000_000;
const DAY: Budget = { window: 'day', limitMicro: MICRO, mode: 'hard' };
const at = (iso: string) => Date.parse(iso);

/** One request through a store as the gateway runs it: reserve, then settle or release. */
async function request(
  store: Store,
  keyId: string,
  requestId: string,
  costMicro: number,
  now: number,
  staleBefore = now - 60_000,
) {
  const held = await store.reserve(keyId, requestId, costMicro, now, staleBefore);
  if (!held.ok) {
    await store.release(null, { ...usageEntry(keyId, requestId, 0, now), status: 402 });
    return { held, debit: 0 };
  }
  const debit = await store.settle(
    held.reservationId,
    usageEntry(keyId, requestId, costMicro, now),
    staleBefore,
  );
  return { held, debit };
}

/** A new key in `store`, and the budget events the store tells from now on. */
async function keyTellingEvents(store: Store) {
  const events: BudgetEvent[] = [];
  store.onBudgetEvent = (event) => events.push(event);
  const key = newKey();
  await store.createKey(key);
  return { key, events, now: Date.now() };
}

async function spent(store: Store, holder: BudgetHolder, now: number) {
  return (await store.budgets(holder, now, now - 60_000)).map((b) => [b.window, b.spentMicro]);
}

export function budgetContract(name: string, open: () => Promise<StoreFixture>) {
  describe(`Store contract, budgets and projects: ${name}`, () => {
    const withStore = (run: (fixture: StoreFixture) => Promise<void>) => withFixture(open, run);

    it('keeps projects: created, listed newest first, renamed, counting their keys, deleted only empty', () =>
      withStore(async ({ store }) => {
        await store.createProject({ id: 'prj_a', name: 'support', createdAt: 1_000 });
        await store.createProject({ id: 'prj_b', name: 'search', createdAt: 2_000 });
        expect((await store.listProjects()).map((p) => p.id)).toEqual(['prj_b', 'prj_a']);
        const key = newKey();
        await store.createKey(key);
        const moved = await store.setKeyProject(key.id, 'prj_a');
        expect(moved.ok && moved.key.projectId).toBe('prj_a');
        expect((await store.getKey(key.id))?.projectId).toBe('prj_a');
        expect(await store.setKeyProject(key.id, 'prj_none')).toEqual({ ok: false, code: 'unknown_project' });
        expect(await store.setKeyProject('key_none', 'prj_a')).toEqual({ ok: false, code: 'not_found' });
        expect(await store.getProject('prj_a')).toEqual({
          id: 'prj_a',
          name: 'support',
          createdAt: 1_000,
          keyCount: 1,
        });
        expect((await store.renameProject('prj_a', 'care'))?.name).toBe('care');
        expect(await store.deleteProject('prj_a')).toEqual({ ok: false, code: 'has_keys' });
        await store.setKeyProject(key.id, null);
        expect((await store.deleteProject('prj_a')).ok).toBe(true);
        expect(await store.getProject('prj_a')).toBeUndefined();
        expect(await store.deleteProject('prj_a')).toEqual({ ok: false, code: 'not_found' });
      }));

    it('40 concurrent requests on two instances against a hard budget: the last that fits is served, never more', () =>
      withStore(async ({ store, openAnother }) => {
        const other = await openAnother();
        try {
          const key = newKey({ creditsMicro: null }); // the budget alone limits
          await store.createKey(key);
          const now = Date.now();
          await store.setBudgets({ kind: 'key', id: key.id }, [DAY], now);
          const outcomes = await Promise.all(
            Array.from({ length: 40 }, (_, i) =>
              request(i % 2 === 0 ? store : other, key.id, `b_${i}`, 150_000, now),
            ),
          );
          const debits = outcomes.map((o) => o.debit);
          // ⌊1 / 0.15⌋ = 6 fit; the rest were refused by the budget, naming it.
          expect(debits.filter((d) => d > 0)).toHaveLength(6);
          const total = debits.reduce((a, b) => a + b, 0);
          expect(total).toBe(900_000);
          for (const { held } of outcomes)
            if (!held.ok)
              expect(held).toEqual({
                ok: false,
                code: 'budget_exceeded',
                exceeded: [{ holder: { kind: 'key', id: key.id }, window: 'day' }],
              });
          expect(await spent(store, { kind: 'key', id: key.id }, now)).toEqual([['day', total]]);
          // One more that fits exactly is served: 0.1 of the 1 credit is left.
          expect((await request(other, key.id, 'last', 100_000, now)).debit).toBe(100_000);
          expect((await request(store, key.id, 'none', 1, now)).held.ok).toBe(false);
        } finally {
          await other.close();
        }
      }));

    it('a project’s budget is shared by its keys, on any instance; a key’s own budget beside it', () =>
      withStore(async ({ store, openAnother }) => {
        const other = await openAnother();
        try {
          const now = Date.now();
          await store.createProject({ id: 'prj_team', name: 'team', createdAt: now });
          const [a, b] = [newKey(), newKey()];
          for (const key of [a, b]) {
            await store.createKey(key);
            await store.setKeyProject(key.id, 'prj_team');
          }
          await store.setBudgets(
            { kind: 'project', id: 'prj_team' },
            [{ window: 'hour', limitMicro: MICRO, mode: 'hard' }],
            now,
          );
          await store.setBudgets(
            { kind: 'key', id: b.id },
            [{ window: 'minute', limitMicro: 300_000, mode: 'hard' }],
            now,
          );
          const outcomes = await Promise.all(
            Array.from({ length: 24 }, (_, i) =>
              request(i % 2 === 0 ? store : other, i % 3 === 0 ? b.id : a.id, `p_${i}`, 100_000, now),
            ),
          );
          const byKey = (id: string) =>
            outcomes
              .filter((_, i) => (i % 3 === 0 ? b.id : a.id) === id)
              .reduce((sum, o) => sum + o.debit, 0);
          expect(byKey(a.id) + byKey(b.id)).toBe(MICRO);
          expect(byKey(b.id)).toBeLessThanOrEqual(300_000);
          expect(await spent(store, { kind: 'project', id: 'prj_team' }, now)).toEqual([['hour', MICRO]]);
          expect(await spent(store, { kind: 'key', id: b.id }, now)).toEqual([['minute', byKey(b.id)]]);
          const refused = await store.reserve(a.id, 'over', 1, now, now - 60_000);
          expect(refused).toEqual({
            ok: false,
            code: 'budget_exceeded',
            exceeded: [{ holder: { kind: 'project', id: 'prj_team' }, window: 'hour' }],
          });
        } finally {
          await other.close();
        }
      }));

    it('keys of one project, one request at a time on each of four instances: never two holds where one fits', () =>
      withStore(async ({ store, openAnother }) => {
        const others = [await openAnother(), await openAnother(), await openAnother()];
        try {
          const now = Date.now();
          await store.createProject({ id: 'prj_lanes', name: 'lanes', createdAt: now });
          await store.setBudgets(
            { kind: 'project', id: 'prj_lanes' },
            [{ window: 'hour', limitMicro: MICRO, mode: 'hard' }],
            now,
          );
          const keys = [store, ...others].map(() => newKey({ creditsMicro: null }));
          for (const key of keys) {
            await store.createKey(key);
            await store.setKeyProject(key.id, 'prj_lanes');
          }
          // 0.07 of the 1 credit is left: room for one hold of 0.07 at a time.
          expect((await request(store, keys[0]?.id as string, 'fill', 930_000, now)).debit).toBe(930_000);
          // Each instance sends its key's requests one after another, so each of its batches holds
          // one step: the instances race one another on the project alone. A granted hold is
          // counted until its release begins, and held a moment so that a second would overlap it.
          let live = 0;
          let most = 0;
          let granted = 0;
          const lanes = [store, ...others].map(async (instance, lane) => {
            const keyId = (keys[lane] as { id: string }).id;
            for (let i = 0; i < 25; i++) {
              const requestId = `lane_${lane}_${i}`;
              const held = await instance.reserve(keyId, requestId, 70_000, now, now - 60_000);
              if (!held.ok) {
                await instance.release(null, { ...usageEntry(keyId, requestId, 0, now), status: 402 });
                continue;
              }
              granted++;
              most = Math.max(most, ++live);
              await new Promise((resolve) => setTimeout(resolve, 1));
              live--;
              await instance.release(held.reservationId, {
                ...usageEntry(keyId, requestId, 0, now),
                status: 500,
              });
            }
          });
          await Promise.all(lanes);
          expect(granted).toBeGreaterThan(0);
          expect(most).toBe(1);
          expect(await spent(store, { kind: 'project', id: 'prj_lanes' }, now)).toEqual([['hour', 930_000]]);
        } finally {
          for (const other of others) await other.close();
        }
      }));

    it('spend starts from 0 at each window’s boundary, by arithmetic: a minute, a leap day’s month, the year’s end', () =>
      withStore(async ({ store }) => {
        const key = newKey({ creditsMicro: null });
        await store.createKey(key);
        const holder = { kind: 'key', id: key.id } as const;
        const start = at('2028-02-29T23:58:30Z');
        await store.setBudgets(
          holder,
          [
            { window: 'minute', limitMicro: 500_000, mode: 'hard' },
            { window: 'month', limitMicro: 800_000, mode: 'hard' },
          ],
          start,
        );
        expect((await request(store, key.id, 'm1', 400_000, start)).debit).toBe(400_000);
        // The same minute is full; the next one is not, but the month is nearly.
        expect(
          (await request(store, key.id, 'm2', 200_000, at('2028-02-29T23:58:59.999Z'))).held,
        ).toMatchObject({ code: 'budget_exceeded' });
        expect((await request(store, key.id, 'm3', 300_000, at('2028-02-29T23:59:00Z'))).debit).toBe(300_000);
        const refused = await store.reserve(key.id, 'm4', 200_000, at('2028-02-29T23:59:30Z'), 0);
        expect(refused).toEqual({
          ok: false,
          code: 'budget_exceeded',
          exceeded: [{ holder, window: 'month' }],
        });
        // March 1st: a new month, a new minute.
        expect((await request(store, key.id, 'm5', 500_000, at('2028-03-01T00:00:00Z'))).debit).toBe(500_000);
        expect(await spent(store, holder, at('2028-03-01T00:00:10Z'))).toEqual([
          ['minute', 500_000],
          ['month', 500_000],
        ]);
        expect(await spent(store, holder, at('2028-03-01T00:01:00Z'))).toEqual([
          ['minute', 0],
          ['month', 500_000],
        ]);
        // A week across the year's end (Monday 2026-12-28 to Monday 2027-01-04), on a key of its own.
        const weekly = newKey({ creditsMicro: null });
        await store.createKey(weekly);
        await store.setBudgets(
          { kind: 'key', id: weekly.id },
          [{ window: 'week', limitMicro: 500_000, mode: 'hard' }],
          at('2026-12-31T10:00:00Z'),
        );
        expect((await request(store, weekly.id, 'w1', 500_000, at('2026-12-31T10:00:00Z'))).debit).toBe(
          500_000,
        );
        expect((await request(store, weekly.id, 'w2', 1, at('2027-01-03T23:59:59Z'))).held.ok).toBe(false);
        expect((await request(store, weekly.id, 'w3', 500_000, at('2027-01-04T00:00:00Z'))).debit).toBe(
          500_000,
        );
      }));

    it('a hold left by a crash counts for the budget until it is stale, then nowhere', () =>
      withStore(async ({ store }) => {
        const key = newKey();
        await store.createKey(key);
        const now = Date.now();
        await store.setBudgets({ kind: 'key', id: key.id }, [DAY], now);
        const crashed = await store.reserve(key.id, 'crashed', 900_000, now - 120_000, now - 600_000);
        expect(crashed.ok).toBe(true);
        // While it may still be settled, it holds its share.
        expect((await store.reserve(key.id, 'while', 200_000, now, now - 600_000)).ok).toBe(false);
        // Once stale (created before staleBefore), it counts nowhere, for the budget as for the balance.
        const after = await store.reserve(key.id, 'after', 200_000, now, now - 60_000);
        expect(after.ok).toBe(true);
        expect(await store.budgets({ kind: 'key', id: key.id }, now, now - 60_000)).toEqual([
          { window: 'day', limitMicro: MICRO, mode: 'hard', spentMicro: 200_000 },
        ]);
      }));

    it('a settle never takes a hard budget past its limit: the debit is capped and the excess told', () =>
      withStore(async ({ store }) => {
        const { key, events, now } = await keyTellingEvents(store);
        const held = await store.reserve(key.id, 'r', 500_000, now, now - 60_000);
        if (!held.ok) throw new Error('no budget yet: the balance covers it');
        // A budget set while the request was in flight: it can take only 0.3 more.
        await store.setBudgets(
          { kind: 'key', id: key.id },
          [{ window: 'day', limitMicro: 300_000, mode: 'hard' }],
          now,
        );
        expect(
          await store.settle(held.reservationId, usageEntry(key.id, 'r', 500_000, now), now - 60_000),
        ).toBe(300_000);
        expect(events).toEqual([
          { kind: 'capped', holder: { kind: 'key', id: key.id }, window: 'day', excessMicro: 200_000 },
        ]);
        expect((await store.getKey(key.id))?.creditsMicro).toBe(10 * MICRO - 300_000);
      }));

    it('a soft budget never refuses; crossing 80% and 100% is told once each', () =>
      withStore(async ({ store }) => {
        const { key, events, now } = await keyTellingEvents(store);
        await store.setBudgets(
          { kind: 'key', id: key.id },
          [{ window: 'day', limitMicro: MICRO, mode: 'soft' }],
          now,
        );
        for (const [i, cost] of [500_000, 300_000, 100_000, 200_000, 400_000].entries())
          expect((await request(store, key.id, `s_${i}`, cost, now)).debit).toBe(cost);
        const holder = { kind: 'key', id: key.id };
        expect(events).toEqual([
          { kind: 'crossing', holder, window: 'day', threshold: 0.8 },
          { kind: 'crossing', holder, window: 'day', threshold: 1 },
        ]);
        expect(await spent(store, holder as BudgetHolder, now)).toEqual([['day', 1_500_000]]);
      }));

    it('writes that share a commit each see the ones before them: debits, then a refund', () =>
      withStore(async ({ store }) => {
        const { key, events, now } = await keyTellingEvents(store);
        const holder = { kind: 'key', id: key.id } as const;
        await store.setBudgets(holder, [{ window: 'day', limitMicro: MICRO, mode: 'soft' }], now);
        const costs = [500_000, 300_000, 100_000, 200_000];
        const holds = await Promise.all(
          costs.map((cost, i) => store.reserve(key.id, `b_${i}`, cost, now, now - 60_000)),
        );
        // Settled together, without a turn between them: the store may run them in one commit.
        await Promise.all(
          holds.map((held, i) => {
            if (!held.ok) throw new Error('a soft budget never refuses');
            return store.settle(
              held.reservationId,
              usageEntry(key.id, `b_${i}`, costs[i] as number, now),
              now - 60_000,
            );
          }),
        );
        expect(events).toEqual([
          { kind: 'crossing', holder, window: 'day', threshold: 0.8 },
          { kind: 'crossing', holder, window: 'day', threshold: 1 },
        ]);
        expect(await spent(store, holder, now)).toEqual([['day', 1_100_000]]);

        // A refund (0.5 answered a failure after all) and the next debit together: 0.6 + 0.3.
        events.length = 0;
        const next = await store.reserve(key.id, 'after', 300_000, now, now - 60_000);
        if (!next.ok) throw new Error('a soft budget never refuses');
        await Promise.all([
          store.release(null, { ...usageEntry(key.id, 'b_0', 0, now), status: 503 }),
          store.settle(next.reservationId, usageEntry(key.id, 'after', 300_000, now), now - 60_000),
        ]);
        expect(await spent(store, holder, now)).toEqual([['day', 900_000]]);
        expect(events).toEqual([{ kind: 'crossing', holder, window: 'day', threshold: 0.8 }]);
      }));

    it('a budget set mid-window counts what was spent in it; a refunded debit leaves it', () =>
      withStore(async ({ store }) => {
        const key = newKey();
        await store.createKey(key);
        const now = Date.now();
        await request(store, key.id, 'before', 400_000, now);
        const holder = { kind: 'key', id: key.id } as const;
        await store.setBudgets(holder, [DAY], now);
        expect(await spent(store, holder, now)).toEqual([['day', 400_000]]);
        // Settled, then answered a failure after all (a lost acknowledgement): never charged.
        const held = await store.reserve(key.id, 'lost', 300_000, now, now - 60_000);
        if (!held.ok) throw new Error('0.6 left');
        await store.settle(held.reservationId, usageEntry(key.id, 'lost', 300_000, now), now - 60_000);
        expect(await spent(store, holder, now)).toEqual([['day', 700_000]]);
        await store.release(null, { ...usageEntry(key.id, 'lost', 0, now), status: 503 });
        expect(await spent(store, holder, now)).toEqual([['day', 400_000]]);
        // Replacing the list keeps the truth: spend is counted again from the records.
        await store.setBudgets(holder, [DAY, { window: 'hour', limitMicro: MICRO, mode: 'soft' }], now);
        expect(await spent(store, holder, now)).toEqual([
          ['hour', 400_000],
          ['day', 400_000],
        ]);
        await store.setBudgets(holder, [], now);
        expect(await store.budgets(holder, now, now)).toEqual([]);
      }));
  });
}
