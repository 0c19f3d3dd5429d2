import { describe, expect, it } from 'vitest';
import { latencyBucket } from '../usage/histogram.ts';
import { type NewKey, type NewToken, type Store, StoreUnavailableError, type UsageEntry } from './store.ts';

/**
 * The one contract every Store implementation passes (SQLite and PostgreSQL), including docs/http-api.md#credits's
 * invariants under concurrency across two connections to one database, as two instances have.
 */
export interface StoreFixture {
  /** A store on a fresh, empty database. */
  store: Store;
  /** Another store on the same database: another instance of the gateway. */
  openAnother(): Promise<Store>;
  /**
   * Another store on the same database whose calls end by a deadline of `timeoutMs`, and a way to
   * keep that database busy for `ms` (a statement that sends rows and then outlives the deadline on
   * the store's own pool; a write lock held by another connection), so that deadlines fire.
   */
  openUnderDeadline(timeoutMs: number): Promise<{ store: Store; occupy(ms: number): Promise<void> }>;
  /**
   * Another fresh database whose schema stops before the rollups (a gateway of the last release),
   * written as that release wrote it, and `upgrade()` opening it with this release's store.
   */
  openBeforeRollups(): Promise<{ legacy: LegacyWriter; upgrade(): Promise<Store> }>;
  cleanup(): Promise<void>;
}

/** Writes a key and its usage records the way the release before the rollups did. */
export interface LegacyWriter {
  createKey(key: NewKey): Promise<void>;
  insertUsage(entry: UsageEntry): Promise<void>;
  close(): Promise<void>;
}

const MICRO = 1_000_000;
let keys = 0;

export function newKey(overrides: Partial<NewKey> = {}): NewKey {
  keys++;
  return {
    id: `key_${keys}_${Math.random().toString(36).slice(2, 8)}`,
    name: `key ${keys}`,
    prefix: 'dg_abcd',
    hash: `${keys}-${Math.random()}`.padEnd(64, 'h'),
    creditsMicro: 10 * MICRO,
    rateLimitPerMinute: null,
    route: null,
    createdAt: 1_000_000 + keys,
    expiresAt: null,
    ...overrides,
  };
}

/** A usage record of 1 question, status 200, on `default` by `lexical`: what most tests of the store write. */
export function usageEntry(
  keyId: string,
  requestId: string,
  creditsMicro: number,
  at = Date.now(),
): UsageEntry {
  return {
    requestId,
    keyId,
    creditsMicro,
    inputTokens: Math.floor(creditsMicro / 1000),
    outputTokens: 0,
    questions: 1,
    status: 200,
    elapsedMs: 3,
    at,
    route: 'default',
    upstream: 'lexical',
    cached: false,
    tokenId: null,
    subject: null,
  };
}

function newToken(keyId: string, overrides: Partial<NewToken> = {}): NewToken {
  const id = `tok_${Math.random().toString(36).slice(2, 10)}`;
  return {
    id,
    keyId,
    hash: `${id}`.padEnd(64, 't'),
    expiresAt: 9_999_999_999_999,
    maxCreditsMicro: null,
    origins: null,
    subject: null,
    rateLimitPerMinute: null,
    route: null,
    createdAt: 1_000,
    ...overrides,
  };
}

/** Runs a test on a fresh fixture, and cleans it up whatever happens. */
export async function withFixture(
  open: () => Promise<StoreFixture>,
  run: (fixture: StoreFixture) => Promise<void>,
) {
  const fixture = await open();
  try {
    await run(fixture);
  } finally {
    await fixture.cleanup();
  }
}

export function storeContract(name: string, open: () => Promise<StoreFixture>) {
  describe(`Store contract: ${name}`, () => {
    const withStore = (run: (fixture: StoreFixture) => Promise<void>) => withFixture(open, run);

    it('creates keys, finds them by hash only, and counts them', () =>
      withStore(async ({ store }) => {
        const key = newKey({ rateLimitPerMinute: 7, route: 'cheap', expiresAt: 9_999_999_999_999 });
        const created = await store.createKey(key);
        expect(created).toMatchObject({
          id: key.id,
          creditsMicro: 10 * MICRO,
          rateLimitPerMinute: 7,
          route: 'cheap',
        });
        expect(await store.findKeyByHash(key.hash)).toEqual({
          id: key.id,
          prefix: 'dg_abcd',
          rateLimitPerMinute: 7,
          route: 'cheap',
          expiresAt: 9_999_999_999_999,
          revokedAt: null,
        });
        expect(await store.findKeyByHash('no-such-hash')).toBeUndefined();
        expect(await store.getKey('key_none')).toBeUndefined();
        expect(await store.countKeys()).toBe(1);
        expect(await store.ledgerBalance(key.id)).toBe(10 * MICRO);
      }));

    it('lists keys newest first, a page at a time, each key once', () =>
      withStore(async ({ store }) => {
        const created: string[] = [];
        for (let i = 0; i < 25; i++) {
          // Some share a creation time: the id orders them.
          const key = newKey({ createdAt: 5_000 + Math.floor(i / 3) });
          await store.createKey(key);
          created.push(key.id);
        }
        const seen: string[] = [];
        let page = await store.listKeys(10);
        const sizes = [page.keys.length];
        seen.push(...page.keys.map((k) => k.id));
        while (page.next !== null) {
          page = await store.listKeys(10, page.next);
          sizes.push(page.keys.length);
          seen.push(...page.keys.map((k) => k.id));
        }
        expect(sizes).toEqual([10, 10, 5]);
        expect(new Set(seen).size).toBe(25);
        expect(seen.sort()).toEqual([...created].sort());
        const all = (await store.listKeys(100)).keys;
        for (let i = 1; i < all.length; i++) {
          const [a, b] = [all[i - 1], all[i]] as [(typeof all)[0], (typeof all)[0]];
          expect(a.createdAt > b.createdAt || (a.createdAt === b.createdAt && a.id > b.id)).toBe(true);
        }
        expect((await store.listKeys(25)).next).toBeNull();
      }));

    it('adjusts credits in the ledger, never below 0 and never on an unlimited key', () =>
      withStore(async ({ store }) => {
        const key = newKey();
        await store.createKey(key);
        expect(await store.adjustCredits(key.id, -11 * MICRO, 1)).toEqual({
          ok: false,
          code: 'would_go_negative',
        });
        const adjusted = await store.adjustCredits(key.id, -4 * MICRO, 1);
        expect(adjusted.ok && adjusted.key.creditsMicro).toBe(6 * MICRO);
        expect(await store.ledgerBalance(key.id)).toBe(6 * MICRO);
        expect(await store.adjustCredits('key_none', 1, 1)).toEqual({ ok: false, code: 'not_found' });
        const unlimited = newKey({ creditsMicro: null });
        await store.createKey(unlimited);
        expect(await store.adjustCredits(unlimited.id, 1, 1)).toEqual({ ok: false, code: 'unlimited' });
      }));

    it('a revocation through one instance is seen by another on its next lookup', () =>
      withStore(async ({ store, openAnother }) => {
        const other = await openAnother();
        try {
          const key = newKey();
          await store.createKey(key);
          expect((await other.findKeyByHash(key.hash))?.revokedAt).toBeNull();
          const revoked = await store.revokeKey(key.id, 42);
          expect(revoked?.revokedAt).toBe(42);
          expect((await other.findKeyByHash(key.hash))?.revokedAt).toBe(42);
          // Revoking again keeps the first time.
          expect((await other.revokeKey(key.id, 99))?.revokedAt).toBe(42);
          expect(await store.revokeKey('key_none', 1)).toBeUndefined();
        } finally {
          await other.close();
        }
      }));

    it('reserves against the balance minus live reservations; unlimited keys need none', () =>
      withStore(async ({ store }) => {
        const key = newKey({ creditsMicro: MICRO });
        await store.createKey(key);
        const now = Date.now();
        const first = await store.reserve(key.id, 'r1', 700_000, now, now - 60_000);
        expect(first.ok).toBe(true);
        expect(await store.reserve(key.id, 'r2', 400_000, now, now - 60_000)).toEqual({
          ok: false,
          code: 'insufficient_credits',
          availableMicro: 300_000,
        });
        if (!first.ok) return;
        expect(await store.settle(first.reservationId, usageEntry(key.id, 'r1', 650_000), now - 60_000)).toBe(
          650_000,
        );
        expect((await store.getKey(key.id))?.creditsMicro).toBe(350_000);
        const unlimited = newKey({ creditsMicro: null });
        await store.createKey(unlimited);
        expect(await store.reserve(unlimited.id, 'r3', 10 ** 12, now, 0)).toEqual({
          ok: true,
          reservationId: null,
        });
        expect(await store.settle(null, usageEntry(unlimited.id, 'r3', 5), 0)).toBe(5);
        expect(await store.reserve('key_none', 'r4', 1, now, 0)).toEqual({
          ok: false,
          code: 'key_refused',
          reason: 'unknown',
        });
      }));

    it('re-checks the key at reserve: a revoked or expired key, or an expired token, holds nothing', () =>
      withStore(async ({ store, openAnother }) => {
        const now = Date.now();
        const revoked = newKey();
        const expiring = newKey({ expiresAt: now + 1_000 });
        const forToken = newKey();
        for (const key of [revoked, expiring, forToken]) await store.createKey(key);
        const token = newToken(forToken.id, { expiresAt: now + 1_000 });
        await store.createToken(token);
        // Revoked through another instance, as an operator would.
        const other = await openAnother();
        await other.revokeKey(revoked.id, now);
        const refused = (reason: string) => ({ ok: false, code: 'key_refused', reason });
        expect(await store.reserve(revoked.id, 'a', 1, now, 0)).toEqual(refused('revoked'));
        expect(await store.reserve(expiring.id, 'b', 1, now + 1_000, 0)).toEqual(refused('expired'));
        expect((await store.reserve(expiring.id, 'c', 1, now + 999, 0)).ok).toBe(true);
        expect(await store.reserve(forToken.id, 'd', 1, now + 1_000, 0, token.id)).toEqual(
          refused('token_expired'),
        );
        expect((await store.reserve(forToken.id, 'e', 1, now, 0, token.id)).ok).toBe(true);
        // Nothing was held for the refused requests.
        expect((await store.getKey(revoked.id))?.creditsMicro).toBe(10 * MICRO);
        expect((await store.reserve(forToken.id, 'f', 10 * MICRO - 1, now, 0)).ok).toBe(true);
      }));

    it('each step asked again for the same request does nothing twice (a retry after a lost answer)', () =>
      withStore(async ({ store }) => {
        const key = newKey({ creditsMicro: MICRO });
        await store.createKey(key);
        const now = Date.now();
        const first = await store.reserve(key.id, 'same', 600_000, now, 0);
        const again = await store.reserve(key.id, 'same', 600_000, now, 0);
        expect(first.ok && again.ok && again.reservationId === first.reservationId).toBe(true);
        // Only one hold: 400,000 are still available.
        expect(await store.reserve(key.id, 'other', 400_001, now, 0)).toMatchObject({
          code: 'insufficient_credits',
          availableMicro: 400_000,
        });
        if (!first.ok) return;
        expect(await store.settle(first.reservationId, usageEntry(key.id, 'same', 500_000), 0)).toBe(500_000);
        expect(await store.settle(first.reservationId, usageEntry(key.id, 'same', 500_000), 0)).toBe(500_000);
        const failed = await store.reserve(key.id, 'failed', 1, now, 0);
        if (!failed.ok) throw new Error('expected a hold');
        await store.release(failed.reservationId, { ...usageEntry(key.id, 'failed', 0), status: 502 });
        await store.release(failed.reservationId, { ...usageEntry(key.id, 'failed', 0), status: 502 });
        const usage = await store.usage(key.id, 10);
        expect(usage.recent.map((r) => [r.requestId, r.status, r.creditsMicro]).sort()).toEqual([
          ['failed', 502, 0],
          ['same', 200, 500_000],
        ]);
        expect((await store.getKey(key.id))?.creditsMicro).toBe(500_000);
        expect(await store.ledgerBalance(key.id)).toBe(500_000);
      }));

    it('a failed request is never charged: its release undoes a settle whose answer was lost, and frees a hold by request id', () =>
      withStore(async ({ store, openAnother }) => {
        const key = newKey({ creditsMicro: MICRO });
        await store.createKey(key);
        const now = Date.now();
        const lost = await store.reserve(key.id, 'lost-settle', 300_000, now, 0);
        if (!lost.ok) throw new Error('expected a hold');
        expect(await store.settle(lost.reservationId, usageEntry(key.id, 'lost-settle', 250_000), 0)).toBe(
          250_000,
        );
        // The caller was answered 503: released later, from another instance, without the hold's id.
        const other = await openAnother();
        await other.release(null, { ...usageEntry(key.id, 'lost-settle', 0), status: 503 });
        await other.release(null, { ...usageEntry(key.id, 'lost-settle', 0), status: 503 });
        // A reserve whose answer was lost: its hold is found by the request id.
        expect((await store.reserve(key.id, 'lost-reserve', 400_000, now, 0)).ok).toBe(true);
        await other.release(null, { ...usageEntry(key.id, 'lost-reserve', 0), status: 503 });
        expect((await store.reserve(key.id, 'whole', MICRO, now, 0)).ok).toBe(true);
        expect((await store.getKey(key.id))?.creditsMicro).toBe(MICRO);
        expect(await store.ledgerBalance(key.id)).toBe(MICRO);
        const records = (await store.usage(key.id, 10)).recent.map((r) => [
          r.requestId,
          r.status,
          r.creditsMicro,
        ]);
        expect(records.sort()).toEqual([
          ['lost-reserve', 503, 0],
          ['lost-settle', 503, 0],
        ]);
      }));

    it('never debits more than was reserved, a hold of 0 included, and keeps token counts up to 2^31 − 1', () =>
      withStore(async ({ store }) => {
        const key = newKey({ creditsMicro: 500 * MICRO });
        await store.createKey(key);
        const now = Date.now();
        const hold = await store.reserve(key.id, 'big', 720_000, now, 0);
        if (!hold.ok) throw new Error('expected a hold');
        const huge = {
          ...usageEntry(key.id, 'big', 5_000_000 * 1000),
          inputTokens: 2 ** 31 - 1,
          outputTokens: 2 ** 31 - 1,
        };
        expect(await store.settle(hold.reservationId, huge, 0)).toBe(720_000);
        expect((await store.getKey(key.id))?.creditsMicro).toBe(500 * MICRO - 720_000);
        const [record] = (await store.usage(key.id, 1)).recent;
        expect(record).toMatchObject({
          creditsMicro: 720_000,
          inputTokens: 2 ** 31 - 1,
          outputTokens: 2 ** 31 - 1,
        });
        expect(await store.ledgerBalance(key.id)).toBe(500 * MICRO - 720_000);
        // A hold of 0 credits is a hold all the same: its settle debits 0, and a retry nothing more.
        const free = await store.reserve(key.id, 'free', 0, now, 0);
        if (!free.ok) throw new Error('expected a hold');
        expect(free.reservationId).not.toBeNull();
        for (let attempt = 0; attempt < 2; attempt++)
          expect(await store.settle(free.reservationId, usageEntry(key.id, 'free', MICRO), 0)).toBe(0);
        expect(
          (await store.usage(key.id, 5)).recent.map((record) => record.creditsMicro).sort((a, b) => a - b),
        ).toEqual([0, 720_000]);
        expect(await store.ledgerBalance(key.id)).toBe(500 * MICRO - 720_000);
      }));

    it('a settle takes no more than the balance covers beside the other live holds, its own not counted', () =>
      withStore(async ({ store }) => {
        const key = newKey({ creditsMicro: 10 * MICRO });
        await store.createKey(key);
        const now = Date.now();
        const first = await store.reserve(key.id, 'first', 6 * MICRO, now, now - 60_000);
        const second = await store.reserve(key.id, 'second', 4 * MICRO, now, now - 60_000);
        if (!first.ok || !second.ok) throw new Error('expected two holds');
        // An operator lowers the balance beneath what the holds hold.
        expect((await store.adjustCredits(key.id, -2 * MICRO, now)).ok).toBe(true);
        // 8 left, 4 of them still held by the second request: the first pays 4 of its 6.
        expect(
          await store.settle(first.reservationId, usageEntry(key.id, 'first', 6 * MICRO), now - 60_000),
        ).toBe(4 * MICRO);
        // Nothing else is held now: the second pays its 4 in full, and the balance reaches 0.
        expect(
          await store.settle(second.reservationId, usageEntry(key.id, 'second', 4 * MICRO), now - 60_000),
        ).toBe(4 * MICRO);
        expect((await store.getKey(key.id))?.creditsMicro).toBe(0);
        expect(await store.ledgerBalance(key.id)).toBe(0);
      }));

    it('holds a balance at most at the ceiling of 1,000,000,000 credits', () =>
      withStore(async ({ store }) => {
        const key = newKey({ creditsMicro: 0 });
        await store.createKey(key);
        const ceiling = 1_000_000_000 * MICRO;
        expect(await store.adjustCredits(key.id, ceiling + 1, 1)).toEqual({
          ok: false,
          code: 'over_ceiling',
        });
        expect((await store.adjustCredits(key.id, ceiling, 1)).ok).toBe(true);
        expect(await store.adjustCredits(key.id, 1, 2)).toEqual({ ok: false, code: 'over_ceiling' });
        expect((await store.getKey(key.id))?.creditsMicro).toBe(ceiling);
        expect(await store.ledgerBalance(key.id)).toBe(ceiling);
      }));

    it('60 simultaneous requests from two instances on 2 credits: never below 0, ledger exact, one record each', () =>
      withStore(async ({ store, openAnother }) => {
        const other = await openAnother();
        try {
          const key = newKey({ creditsMicro: 2 * MICRO });
          await store.createKey(key);
          const now = Date.now();
          const debits = await Promise.all(
            Array.from({ length: 60 }, async (_, i) => {
              const instance = i % 2 === 0 ? store : other;
              const requestId = `burst_${i}`;
              const reservation = await instance.reserve(key.id, requestId, 150_000, now, now - 60_000);
              if (!reservation.ok) {
                await instance.release(null, { ...usageEntry(key.id, requestId, 0), status: 402 });
                return 0;
              }
              // Actual costs vary around the reservation, sometimes above it.
              const cost = 100_000 + (i % 7) * 10_000;
              return instance.settle(
                reservation.reservationId,
                usageEntry(key.id, requestId, cost),
                now - 60_000,
              );
            }),
          );
          const balance = (await store.getKey(key.id))?.creditsMicro as number;
          const debited = debits.reduce((a, b) => a + b, 0);
          expect(balance).toBeGreaterThanOrEqual(0);
          expect(2 * MICRO - balance).toBe(debited);
          expect(await store.ledgerBalance(key.id)).toBe(balance);
          const usage = await store.usage(key.id, 1000);
          expect(usage.totals.requests).toBe(60);
          expect(usage.totals.creditsMicro).toBe(debited);
          expect(debits.filter((d) => d > 0).length).toBeGreaterThanOrEqual(13);
        } finally {
          await other.close();
        }
      }));

    it('a reservation left by a crash counts nowhere once stale: every later request pays in full', () =>
      withStore(async ({ store }) => {
        const key = newKey({ creditsMicro: 10 * MICRO });
        await store.createKey(key);
        const now = Date.now();
        // A crashed process left 9.5 credits reserved a while ago; nothing will release them.
        const dead = await store.reserve(key.id, 'dead', 9_500_000, now - 120_000, now - 180_000);
        expect(dead.ok).toBe(true);
        // While it is live it counts: only 0.5 credits are available. (This also runs the store's
        // once-a-minute sweep while the reservation is live, so it stays in place below.)
        expect(await store.reserve(key.id, 'early', MICRO, now - 1_000, now - 180_000)).toMatchObject({
          ok: false,
          availableMicro: 500_000,
        });
        const staleBefore = now - 60_000; // the dead reservation is now older than that
        for (let i = 0; i < 3; i++) {
          const live = await store.reserve(key.id, `live_${i}`, MICRO, now, staleBefore);
          expect(live.ok).toBe(true);
          if (!live.ok) return;
          expect(
            await store.settle(live.reservationId, usageEntry(key.id, `live_${i}`, MICRO), staleBefore),
          ).toBe(MICRO);
        }
        expect((await store.getKey(key.id))?.creditsMicro).toBe(7 * MICRO);
        expect(await store.ledgerBalance(key.id)).toBe(7 * MICRO);
      }));

    it('a late release of a reservation swept as stale leaves the newer reservations alone', () =>
      withStore(async ({ store }) => {
        const key = newKey({ creditsMicro: 1_000 });
        await store.createKey(key);
        const now = Date.now();
        const stalled = await store.reserve(key.id, 'req_stalled', 960, now - 3_600_000, 0);
        const live = await store.reserve(key.id, 'req_live', 50, now, now - 60_000);
        if (!stalled.ok || !live.ok) throw new Error('reserve failed');
        await store.release(stalled.reservationId, { ...usageEntry(key.id, 'req_stalled', 0), status: 504 });
        // req_live still holds its 50.
        expect(await store.reserve(key.id, 'req_next', 951, now, now - 60_000)).toMatchObject({
          ok: false,
          availableMicro: 950,
        });
      }));

    it('a failed request releases its hold and leaves a usage record with 0 credits', () =>
      withStore(async ({ store }) => {
        const key = newKey({ creditsMicro: MICRO });
        await store.createKey(key);
        const now = Date.now();
        const held = await store.reserve(key.id, 'failed', MICRO, now, now - 60_000);
        if (!held.ok) throw new Error('reserve failed');
        await store.release(held.reservationId, { ...usageEntry(key.id, 'failed', 0, now), status: 502 });
        expect((await store.reserve(key.id, 'next', MICRO, now, now - 60_000)).ok).toBe(true);
        const usage = await store.usage(key.id, 10);
        expect(usage.recent).toEqual([{ ...usageEntry(key.id, 'failed', 0, now), status: 502 }]);
        expect((await store.getKey(key.id))?.lastUsedAt).toBe(now);
      }));

    it('keeps each record’s route, upstream(s) and cache outcome, nulls included', () =>
      withStore(async ({ store }) => {
        const key = newKey({ creditsMicro: null });
        await store.createKey(key);
        const escalated = {
          ...usageEntry(key.id, 'esc', 2000, 10),
          route: 'smart',
          upstream: 'local+hosted',
        };
        const hit = { ...usageEntry(key.id, 'hit', 0, 11), upstream: 'local', cached: true };
        const failed = { ...usageEntry(key.id, 'failed', 0, 12), route: null, upstream: null, status: 400 };
        await store.settle(null, escalated, 0);
        await store.settle(null, hit, 0);
        await store.release(null, failed);
        expect((await store.usage(key.id, 10)).recent).toEqual([failed, hit, escalated]);
      }));

    it('finds a token by its hash with its key as it stands now', () =>
      withStore(async ({ store }) => {
        const key = newKey({ rateLimitPerMinute: 9, route: 'cheap' });
        await store.createKey(key);
        const token = newToken(key.id, {
          maxCreditsMicro: 5 * MICRO,
          origins: ['https://app.example.com'],
          subject: 'user-42',
          rateLimitPerMinute: 3,
          route: 'default',
        });
        await store.createToken(token);
        const { hash: _hash, createdAt: _createdAt, ...shown } = token;
        expect(await store.findTokenByHash(token.hash)).toEqual({
          token: shown,
          key: {
            id: key.id,
            prefix: 'dg_abcd',
            rateLimitPerMinute: 9,
            route: 'cheap',
            expiresAt: null,
            revokedAt: null,
          },
        });
        await store.revokeKey(key.id, 5_000);
        expect((await store.findTokenByHash(token.hash))?.key.revokedAt).toBe(5_000);
        expect(await store.findTokenByHash('no-such-hash')).toBeUndefined();
      }));

    it('30 requests on a capped token from two instances: exactly what the cap covers, never more', () =>
      withStore(async ({ store, openAnother }) => {
        const other = await openAnother();
        try {
          const key = newKey({ creditsMicro: null }); // the cap alone limits: an unlimited key
          await store.createKey(key);
          const token = newToken(key.id, { maxCreditsMicro: 1_000_000 });
          await store.createToken(token);
          const now = Date.now();
          const debits = await Promise.all(
            Array.from({ length: 30 }, async (_, i) => {
              const instance = i % 2 === 0 ? store : other;
              const requestId = `capped_${i}`;
              const held = await instance.reserve(key.id, requestId, 150_000, now, now - 60_000, token.id);
              const record = { ...usageEntry(key.id, requestId, 0), tokenId: token.id, subject: 'u' };
              if (!held.ok) {
                await instance.release(null, { ...record, status: 402 });
                return 0;
              }
              return instance.settle(held.reservationId, { ...record, creditsMicro: 150_000 }, now - 60_000);
            }),
          );
          // ⌊1 / 0.15⌋ = 6 requests fit the cap; the rest were refused, none overspent.
          expect(debits.filter((d) => d > 0)).toHaveLength(6);
          expect(debits.reduce((a, b) => a + b, 0)).toBe(900_000);
          const usage = await store.usage(key.id, 100);
          expect(usage.recent).toHaveLength(30);
          expect(usage.recent.every((r) => r.tokenId === token.id && r.subject === 'u')).toBe(true);
          // A settle never charges past the cap, even when the upstream's usage says more.
          const last = await store.reserve(key.id, 'over', 100_000, now, now - 60_000, token.id);
          if (!last.ok) throw new Error('the cap still covers 0.1');
          const over = { ...usageEntry(key.id, 'over', 500_000), tokenId: token.id, subject: null };
          expect(await store.settle(last.reservationId, over, now - 60_000)).toBe(100_000);
          expect((await store.reserve(key.id, 'none', 1, now, now - 60_000, token.id)).ok).toBe(false);
        } finally {
          await other.close();
        }
      }));

    it('adds every record to its minute, hour and day rollups, latencies in buckets, failures as errors', () =>
      withStore(async ({ store }) => {
        const a = newKey({ creditsMicro: null });
        const b = newKey({ creditsMicro: null });
        await store.createKey(a);
        await store.createKey(b);
        const minute = 60_000;
        const t0 = 1_800_000_000_000; // on an hour's boundary
        // Minute 0: ten records of a, elapsed 1..10 ms, one failed, two cache hits; minute 2: one of b.
        for (let i = 1; i <= 10; i++) {
          const record = { ...usageEntry(a.id, `s${i}`, 1000 * i, t0 + i), elapsedMs: i, cached: i > 8 };
          if (i === 5) await store.release(null, { ...record, status: 502 });
          else await store.settle(null, record, 0);
        }
        await store.settle(
          null,
          { ...usageEntry(b.id, 'other', 7000, t0 + 2 * minute + 5), elapsedMs: 40 },
          0,
        );
        // Outside the window: before `from` and at `to` (exclusive).
        await store.settle(null, { ...usageEntry(a.id, 'early', 1, t0 - 1), elapsedMs: 20_000 }, 0);
        await store.settle(null, usageEntry(a.id, 'late', 1, t0 + 3 * minute), 0);

        const buckets = (counts: Record<number, number>) =>
          Array.from({ length: 12 }, (_, i) => counts[i] ?? 0);
        const all = await store.usageSeries({ stepMs: minute, from: t0, to: t0 + 3 * minute });
        expect(all).toEqual([
          {
            at: t0,
            requests: 10,
            errors: 1,
            creditsMicro: 50_000,
            inputTokens: 55,
            outputTokens: 0,
            cacheHits: 2,
            latency: buckets({ 0: 5, 1: 5 }),
          },
          {
            at: t0 + 2 * minute,
            requests: 1,
            errors: 0,
            creditsMicro: 7000,
            inputTokens: 7,
            outputTokens: 0,
            cacheHits: 0,
            latency: buckets({ 3: 1 }),
          },
        ]);
        const onlyB = await store.usageSeries({ keyId: b.id, stepMs: minute, from: t0, to: t0 + 3 * minute });
        expect(onlyB.map((point) => [point.at, point.requests])).toEqual([[t0 + 2 * minute, 1]]);
        // The hour and the day hold the same records, the early one in the hour before.
        const hours = await store.usageSeries({
          keyId: a.id,
          stepMs: 3_600_000,
          from: t0 - 3_600_000,
          to: t0 + 3_600_000,
        });
        expect(hours.map((h) => [h.at, h.requests, h.creditsMicro, h.latency[11]])).toEqual([
          [t0 - 3_600_000, 1, 1, 1],
          [t0, 11, 50_001, 0],
        ]);
        const day = Math.floor(t0 / 86_400_000) * 86_400_000;
        const days = await store.usageSeries({ stepMs: 86_400_000, from: day, to: day + 86_400_000 });
        expect(days.map((d) => [d.at, d.requests, d.errors, d.creditsMicro])).toEqual([[day, 13, 1, 57_002]]);
      }));

    it('keeps the rollups’ sums equal to the records’ sums under concurrency on two instances', () =>
      withStore(async ({ store, openAnother }) => {
        const other = await openAnother();
        try {
          const keys = Array.from({ length: 3 }, () => newKey({ creditsMicro: 50 * MICRO }));
          for (const key of keys) await store.createKey(key);
          const t0 = Date.now();
          let n = 0;
          // Each call: reserve, then settle, or release (a failure), or settle then release (voided).
          const call = async (instance: Store, key: NewKey) => {
            const id = `c${n++}`;
            const at = t0 + (n % 7) * 60_000;
            const elapsedMs = (n * 37) % 3000;
            const held = await instance.reserve(key.id, id, 40_000, Date.now(), Date.now() - 60_000);
            if (!held.ok) throw new Error('reserve failed');
            const record = { ...usageEntry(key.id, id, 10_000 + (n % 13) * 1000, at), elapsedMs };
            const fate = n % 5;
            if (fate === 0) await instance.release(held.reservationId, { ...record, status: 502 });
            else {
              await instance.settle(held.reservationId, record, Date.now() - 60_000);
              if (fate === 1) await instance.release(held.reservationId, { ...record, status: 503 });
            }
          };
          await Promise.all(
            Array.from({ length: 240 }, (_, i) => call(i % 2 === 0 ? store : other, keys[i % 3] as NewKey)),
          );
          for (const key of keys) {
            const { recent } = await store.usage(key.id, 1000);
            expect(recent).toHaveLength(80);
            const hours = await store.usageSeries({
              keyId: key.id,
              stepMs: 3_600_000,
              from: Math.floor(t0 / 3_600_000) * 3_600_000,
              to: t0 + 3_600_000 * 2,
            });
            const sum = (pick: (row: (typeof hours)[number]) => number) =>
              hours.reduce((t, row) => t + pick(row), 0);
            expect(sum((h) => h.requests)).toBe(80);
            expect(sum((h) => h.errors)).toBe(recent.filter((r) => r.status !== 200).length);
            expect(sum((h) => h.creditsMicro)).toBe(recent.reduce((t, r) => t + r.creditsMicro, 0));
            expect(sum((h) => h.inputTokens)).toBe(recent.reduce((t, r) => t + r.inputTokens, 0));
            const latency = hours.reduce(
              (t, row) => t.map((count, i) => count + (row.latency[i] ?? 0)),
              Array.from({ length: 12 }, () => 0),
            );
            const expected = Array.from({ length: 12 }, () => 0);
            for (const r of recent) {
              const bucket = latencyBucket(r.elapsedMs);
              expected[bucket] = (expected[bucket] ?? 0) + 1;
            }
            expect(latency).toEqual(expected);
            const balance = (await store.getKey(key.id))?.creditsMicro;
            expect(await store.ledgerBalance(key.id)).toBe(balance);
          }
        } finally {
          await other.close();
        }
      }));

    it('moves a voided settle in the rollups, so that their sums stay the records’ sums', () =>
      withStore(async ({ store }) => {
        const key = newKey();
        await store.createKey(key);
        const now = Date.now();
        const held = await store.reserve(key.id, 'voided', 200_000, now, now - 60_000);
        if (!held.ok) throw new Error('reserve failed');
        await store.settle(held.reservationId, usageEntry(key.id, 'voided', 150_000, now), now - 60_000);
        // Its caller was answered a failure after all: the debit is undone, the record fails.
        await store.release(held.reservationId, { ...usageEntry(key.id, 'voided', 0, now), status: 503 });
        const [minute] = await store.usageSeries({
          keyId: key.id,
          stepMs: 60_000,
          from: now - 60_000,
          to: now + 60_000,
        });
        expect(minute).toMatchObject({ requests: 1, errors: 1, creditsMicro: 0 });
        expect((await store.usage(key.id, 5)).totals).toMatchObject({ requests: 1, creditsMicro: 0 });
        expect(await store.ledgerBalance(key.id)).toBe(10 * MICRO);
      }));

    it('sums a summary over spans of every resolution: totals, by route, by upstream, the keys that spent most', () =>
      withStore(async ({ store }) => {
        const day = 86_400_000;
        const t0 = Math.floor(1_800_000_000_000 / day) * day;
        const spenders = [
          newKey({ creditsMicro: null, name: 'small' }),
          newKey({ creditsMicro: null, name: 'big' }),
        ];
        for (const key of spenders) await store.createKey(key);
        const [small, big] = spenders as [NewKey, NewKey];
        await store.settle(null, { ...usageEntry(small.id, 'x1', 1000, t0 + 5 * 60_000), route: 'cheap' }, 0);
        await store.settle(null, { ...usageEntry(big.id, 'x2', 9000, t0 + 2 * day), upstream: 'strong' }, 0);
        await store.release(null, {
          ...usageEntry(big.id, 'x3', 0, t0 + 3 * day),
          route: null,
          upstream: null,
          status: 502,
        });
        const spans = [
          { stepMs: 60_000, from: t0, to: t0 + 3_600_000 },
          { stepMs: 3_600_000, from: t0 + 3_600_000, to: t0 + day },
          { stepMs: day, from: t0 + day, to: t0 + 4 * day },
        ];
        const summary = await store.usageSummary({ spans });
        expect(summary.totals).toMatchObject({ requests: 3, errors: 1, creditsMicro: 10_000 });
        expect(summary.byRoute.map((r) => [r.route, r.requests, r.creditsMicro])).toEqual([
          ['default', 1, 9000],
          ['cheap', 1, 1000],
          [null, 1, 0],
        ]);
        expect(summary.byUpstream.map((r) => [r.upstream, r.requests])).toEqual([
          ['strong', 1],
          ['lexical', 1],
          [null, 1],
        ]);
        expect(summary.byKey.map((k) => [k.name, k.requests, k.creditsMicro])).toEqual([
          ['big', 2, 9000],
          ['small', 1, 1000],
        ]);
        // Spans select rows of their own resolution only: the minute of x1 is not counted twice.
        const minutesOnly = await store.usageSummary({ keyId: small.id, spans: spans.slice(0, 1) });
        expect(minutesOnly.totals.requests).toBe(1);
        expect((await store.usageSummary({ spans: [] })).totals.requests).toBe(0);
      }));

    it('tells the newest usage record: it moves when a request is recorded (maintenance rests only then)', () =>
      withStore(async ({ store }) => {
        const key = newKey({ creditsMicro: null });
        await store.createKey(key);
        expect(await store.newestUsageId()).toBeNull();
        expect(await store.newestUsageId()).toBeNull();
        const now = Date.now();
        await store.settle(null, usageEntry(key.id, 'old', 1000, now - 2 * 86_400_000), 0);
        const first = await store.newestUsageId();
        expect(first).not.toBeNull();
        await store.settle(null, usageEntry(key.id, 'new', 1000, now), 0);
        const newest = await store.newestUsageId();
        expect(newest).not.toBeNull();
        expect(newest).not.toBe(first);
        // Maintenance's own deletes (of the oldest records) are not callers writing.
        expect(await store.deleteUsageBefore(now - 86_400_000, 10)).toBe(1);
        expect(await store.newestUsageId()).toBe(newest);
        await store.release(null, { ...usageEntry(key.id, 'failed', 0, now), status: 502 });
        expect(await store.newestUsageId()).not.toBe(newest);
      }));

    it('deletes old records and old rollups in batches; totals, balances and coarser series keep their sums', () =>
      withStore(async ({ store }) => {
        const key = newKey();
        await store.createKey(key);
        const day = 86_400_000;
        const old = Math.floor(Date.now() / day) * day - 100 * day;
        for (let i = 0; i < 7; i++) {
          const held = await store.reserve(key.id, `old${i}`, 10_000, Date.now(), Date.now() - 60_000);
          if (!held.ok) throw new Error('reserve failed');
          await store.settle(
            held.reservationId,
            usageEntry(key.id, `old${i}`, 10_000, old + i * 60_000),
            Date.now() - 60_000,
          );
        }
        await store.settle(null, usageEntry(key.id, 'new', 1000, Date.now()), Date.now() - 60_000);
        const cutoff = old + day;
        expect(await store.deleteUsageBefore(cutoff, 3)).toBe(3);
        expect(await store.deleteUsageBefore(cutoff, 3)).toBe(3);
        expect(await store.deleteUsageBefore(cutoff, 3)).toBe(1);
        expect(await store.deleteUsageBefore(cutoff, 3)).toBe(0);
        const usage = await store.usage(key.id, 20);
        expect(usage.recent.map((r) => r.requestId)).toEqual(['new']);
        expect(usage.totals).toMatchObject({ requests: 8, creditsMicro: 71_000 });
        const balance = (await store.getKey(key.id))?.creditsMicro;
        expect(balance).toBe(10 * MICRO - 71_000);
        expect(await store.ledgerBalance(key.id)).toBe(balance);
        // Minute rollups past their 14 days go (7 of the key, 7 of all keys); the day's rollup of the same records stays.
        expect(await store.deleteRollupsBefore(60_000, cutoff, 100)).toBe(14);
        expect(await store.deleteRollupsBefore(60_000, cutoff, 100)).toBe(0);
        expect(await store.usageSeries({ keyId: key.id, stepMs: 60_000, from: old, to: cutoff })).toEqual([]);
        const [oldDay] = await store.usageSeries({ keyId: key.id, stepMs: day, from: old, to: cutoff });
        expect(oldDay).toMatchObject({ at: old, requests: 7, creditsMicro: 70_000 });
      }));

    it('folds the records of a database from before the rollups into them, ready only once done', async () => {
      const fixture = await open();
      const { legacy, upgrade } = await fixture.openBeforeRollups();
      try {
        const key = newKey({ creditsMicro: null });
        await legacy.createKey(key);
        const t0 = 1_800_000_000_000;
        for (let i = 0; i < 25; i++)
          await legacy.insertUsage({
            ...usageEntry(key.id, `legacy${i}`, 1000 + i, t0 + i * 30_000),
            elapsedMs: i * 10,
          });
        await legacy.insertUsage({ ...usageEntry(key.id, 'failed', 0, t0 + 5), status: 500 });
        await legacy.close();

        const store = await upgrade();
        try {
          await expect(store.checkWritable()).rejects.toThrow(/26 usage records still to fold/);
          // Written during the upgrade: counted as it is written, never by the fold.
          await store.settle(null, usageEntry(key.id, 'during', 5, t0 + 60_000), 0);
          // A record from before, voided before the fold reaches it: the fold takes it as it is then.
          await store.release(null, { ...usageEntry(key.id, 'legacy0', 0, t0), status: 503 });
          const batches = [await store.foldIntoRollups(10), await store.foldIntoRollups(10)];
          await expect(store.checkWritable()).rejects.toThrow(/6 usage records still to fold/);
          batches.push(await store.foldIntoRollups(10), await store.foldIntoRollups(10));
          expect(batches).toEqual([
            { folded: 10, left: 16 },
            { folded: 10, left: 6 },
            { folded: 6, left: 0 },
            { folded: 0, left: 0 },
          ]);
          await expect(store.checkWritable()).resolves.toBeUndefined();
          const series = await store.usageSeries({
            keyId: key.id,
            stepMs: 3_600_000,
            from: t0,
            to: t0 + 3_600_000,
          });
          expect(series).toHaveLength(1);
          expect(series[0]).toMatchObject({
            requests: 27,
            errors: 2,
            creditsMicro: 24 * 1000 + (24 * 25) / 2 + 5,
          });
          expect(series[0]?.latency.reduce((sum, n) => sum + n, 0)).toBe(27);
          expect((await store.usage(key.id, 1)).totals.requests).toBe(27);
        } finally {
          await store.close();
        }
      } finally {
        await fixture.cleanup();
      }
    });

    it('keeps calibration maps: newest first, one active per upstream and type, read by any instance', () =>
      withStore(async ({ store, openAnother }) => {
        const map = (id: string, fittedAt: number, active: boolean, type: 'noul' | 'choice' = 'noul') => ({
          id,
          upstream: 'cheap',
          type,
          fittedAt,
          outcomes: 250,
          params: type === 'noul' ? '{"a":0.4,"b":-0.3}' : '{"temperature":2.5}',
          heldOut: '{"n":50}',
          active,
        });
        await store.saveCalibrationMaps([map('cal_1', 1000, true), map('cal_2', 1000, true, 'choice')]);
        await store.saveCalibrationMaps([map('cal_3', 2000, false)]);
        await store.saveCalibrationMaps([]);
        const other = await openAnother();
        try {
          expect((await other.calibrationMaps({ activeOnly: true })).map((m) => m.id).sort()).toEqual([
            'cal_1',
            'cal_2',
          ]);
          // A newer active fit takes the place of the active map of its upstream and type only.
          await other.saveCalibrationMaps([map('cal_4', 3000, true)]);
          const all = await store.calibrationMaps({ activeOnly: false });
          expect(all.map((m) => [m.id, m.active])).toEqual([
            ['cal_4', true],
            ['cal_3', false],
            ['cal_2', true],
            ['cal_1', false],
          ]);
          expect(all[0]).toEqual(map('cal_4', 3000, true));
        } finally {
          await other.close();
        }
      }));

    it('keeps review items: oldest first in pages, a review done once with its truths as outcomes, retention', () =>
      withStore(async ({ store, openAnother }) => {
        const key = newKey();
        await store.createKey(key);
        const now = Date.now();
        const held = await store.reserve(key.id, 'r1', 100_000, now, now - 60_000);
        if (!held.ok) throw new Error('reserve failed');
        const questions = JSON.stringify({
          team: { type: 'choice', upstream: 'cheap', p: [0.5, 0.5], labels: ['a', 'b'] },
        });
        await store.settle(held.reservationId, usageEntry(key.id, 'r1', 1000, now), now - 60_000, {
          questions,
          reused: null,
        });
        const item = (id: string, requestId: string, at: number, route = 'default') => ({
          id,
          requestId,
          keyId: key.id,
          route,
          at,
          status: 'open' as const,
          item: `{"state":"${id}"}`,
          outcomes: null,
          reviewer: null,
          reviewedAt: null,
        });
        await store.saveReviewItem(item('rev_b', 'r1', now));
        await store.saveReviewItem(item('rev_a', 'r2', now));
        await store.saveReviewItem(item('rev_c', 'r3', now + 5, 'cheap'));
        // A request marks one item: saved again, the first stands.
        await store.saveReviewItem({ ...item('rev_z', 'r1', now), item: '{}' });
        const other = await openAnother();
        try {
          expect(await other.openReviews()).toBe(3);
          const page = await other.reviewItems({ status: 'open', limit: 2 });
          expect(page.map((i) => i.id)).toEqual(['rev_a', 'rev_b']);
          const next = await other.reviewItems({ status: 'open', limit: 2, after: { at: now, id: 'rev_b' } });
          expect(next.map((i) => i.id)).toEqual(['rev_c']);
          expect((await other.reviewItems({ route: 'cheap', limit: 10 })).map((i) => i.id)).toEqual([
            'rev_c',
          ]);
          expect(await other.reviewItem('rev_b')).toEqual(item('rev_b', 'r1', now));
          expect(await other.reviewItem('nope')).toBeUndefined();

          const review = { outcomes: '{"team":"b"}', reviewer: 'ana', at: now + 10 };
          expect(await store.completeReview('rev_b', review, [{ questionId: 'team', truth: '"b"' }])).toBe(
            true,
          );
          expect(await other.completeReview('rev_b', review, [{ questionId: 'team', truth: '"a"' }])).toBe(
            false,
          );
          expect(await other.reviewItem('rev_b')).toMatchObject({
            status: 'done',
            outcomes: '{"team":"b"}',
            reviewer: 'ana',
            reviewedAt: now + 10,
          });
          expect(await other.openReviews()).toBe(2);
          const [judged] = await other.judgedDecisions({ from: now, to: now + 60_000 });
          expect(judged).toMatchObject({ outcomes: { team: '"b"' }, reviewed: ['team'] });
          // A caller's later outcome takes the reviewer's place.
          await other.recordOutcomes('r1', [{ questionId: 'team', truth: '"a"' }], now + 20);
          const [again] = await store.judgedDecisions({ from: now, to: now + 60_000 });
          expect(again).toMatchObject({ outcomes: { team: '"a"' }, reviewed: [] });

          // Retention: made before `before`, or reviewed before `reviewedBefore`.
          expect(await other.deleteReviewItems(now, now + 11, 100)).toBe(1);
          expect(await other.reviewItem('rev_b')).toBeUndefined();
          expect(await other.deleteReviewItems(now + 1, 0, 100)).toBe(1);
          expect((await other.reviewItems({ limit: 10 })).map((i) => i.id)).toEqual(['rev_c']);
        } finally {
          await other.close();
        }
      }));

    it('keeps a decision with its settle, records and replaces outcomes, reads them back and deletes them by age', () =>
      withStore(async ({ store, openAnother }) => {
        const key = newKey();
        await store.createKey(key);
        const now = Date.now();
        const held = await store.reserve(key.id, 'd1', 100_000, now, now - 60_000);
        if (!held.ok) throw new Error('reserve failed');
        const questions = JSON.stringify({
          team: { type: 'choice', upstream: 'cheap', p: [0.7, 0.3], labels: ['a', 'b'] },
        });
        await store.settle(held.reservationId, usageEntry(key.id, 'd1', 1000, now), now - 60_000, {
          questions,
          reused: null,
        });
        // Settled again (a retried call): the first decision stands, nothing is written twice.
        await store.settle(held.reservationId, usageEntry(key.id, 'd1', 1000, now), now - 60_000, {
          questions: '{}',
          reused: null,
        });
        // A cache hit's record points at the decision it reused.
        await store.release(
          null,
          { ...usageEntry(key.id, 'd2', 0, now + 1), cached: true },
          { questions, reused: 'd1' },
        );
        // A failed request keeps none.
        await store.release(null, { ...usageEntry(key.id, 'd3', 0, now + 2), status: 502 });
        const other = await openAnother();
        try {
          expect(await other.findDecision('d1')).toEqual({
            requestId: 'd1',
            keyId: key.id,
            route: 'default',
            at: now,
            reused: null,
            questions,
          });
          expect(await other.findDecision('d2')).toMatchObject({ reused: 'd1', at: now + 1 });
          expect(await other.findDecision('d3')).toBeUndefined();
          expect(await other.findDecision('nope')).toBeUndefined();

          expect(await store.recordOutcomes('d1', [{ questionId: 'team', truth: '"a"' }], now)).toBe(0);
          expect(
            await other.recordOutcomes(
              'd1',
              [
                { questionId: 'team', truth: '"b"' },
                { questionId: 'other', truth: 'true' },
              ],
              now + 5,
            ),
          ).toBe(1);
          await store.recordOutcomes('d2', [{ questionId: 'team', truth: '"a"' }], now);
          const judged = await other.judgedDecisions({ from: now, to: now + 60_000 });
          expect(judged).toEqual([
            {
              id: expect.any(Number),
              route: 'default',
              at: now,
              questions,
              outcomes: { team: '"b"', other: 'true' },
              reviewed: [],
            },
            {
              id: expect.any(Number),
              route: 'default',
              at: now + 1,
              questions,
              outcomes: { team: '"a"' },
              reviewed: [],
            },
          ]);
          // Read in pages of decisions, from where the last page ended.
          const [first] = await other.judgedDecisions({ from: now, to: now + 60_000, limit: 1 });
          expect(first?.at).toBe(now);
          const rest = await other.judgedDecisions({ from: now, to: now + 60_000, after: first?.id ?? 0 });
          expect(rest.map((d) => d.at)).toEqual([now + 1]);
          expect(
            await other.judgedDecisions({ from: now + 1, to: now + 60_000, keyId: key.id }),
          ).toHaveLength(1);
          expect(await other.judgedDecisions({ from: now, to: now + 60_000, keyId: 'someone' })).toEqual([]);
          expect(await other.judgedDecisions({ from: now, to: now + 60_000, route: 'cheap' })).toEqual([]);

          // Retention: the oldest first, with their outcomes.
          expect(await store.deleteDecisionsBefore(now + 1, 10)).toBe(1);
          expect(await store.findDecision('d1')).toBeUndefined();
          expect(await other.judgedDecisions({ from: 0, to: now + 60_000 })).toHaveLength(1);
          expect(await store.deleteDecisionsBefore(now + 1, 10)).toBe(0);
        } finally {
          await other.close();
        }
      }));

    it('reports usage totals and the most recent records first, up to a limit', () =>
      withStore(async ({ store }) => {
        const key = newKey({ creditsMicro: null });
        await store.createKey(key);
        for (let i = 0; i < 5; i++)
          await store.settle(null, usageEntry(key.id, `u${i}`, 1000 * (i + 1), 100 + i), 0);
        const usage = await store.usage(key.id, 2);
        expect(usage.totals).toEqual({ requests: 5, creditsMicro: 15_000, inputTokens: 15, outputTokens: 0 });
        expect(usage.recent.map((r) => r.requestId)).toEqual(['u4', 'u3']);
      }));

    it('is writable while healthy', () =>
      withStore(async ({ store }) => {
        await expect(store.checkWritable()).resolves.toBeUndefined();
      }));

    it(
      'while deadlines fire at random, every answer is the right one or StoreUnavailableError',
      () =>
        withStore(async ({ store, openUnderDeadline }) => {
          const t0 = 1_700_000_040_000; // on a minute's boundary
          const readers = Array.from({ length: 8 }, (_, i) =>
            newKey({ name: `reader ${i}`, creditsMicro: null }),
          );
          const payers = Array.from({ length: 4 }, (_, i) =>
            newKey({ name: `payer ${i}`, creditsMicro: 1_000 * MICRO }),
          );
          for (const key of [...readers, ...payers]) await store.createKey(key);
          // Each reader has its own number of records, so another key's totals can never pass for its own.
          for (const [i, key] of readers.entries())
            for (let n = 0; n < 20 + i; n++)
              await store.settle(null, usageEntry(key.id, `${key.id}-${n}`, 1_000 + n, t0 + n * 60_000), 0);
          const allIds = [...readers, ...payers].map((key) => key.id).sort();

          const stressed = await openUnderDeadline(40);
          const wrong: string[] = [];
          const counts = { answered: 0, unavailable: 0 };
          const pick = <T>(items: readonly T[]) => items[Math.floor(Math.random() * items.length)] as T;
          const expectThat = (ok: boolean, what: string) => {
            if (!ok) wrong.push(what);
          };
          let request = 0;
          const operations: (() => Promise<void>)[] = [
            async () => {
              const key = pick(readers);
              const found = await stressed.store.getKey(key.id);
              expectThat(
                found?.id === key.id && found.name === key.name,
                `getKey(${key.id}) gave ${found?.id}`,
              );
            },
            async () => {
              const key = pick([...readers, ...payers]);
              const found = await stressed.store.findKeyByHash(key.hash);
              expectThat(found?.id === key.id, `findKeyByHash of ${key.id} gave ${found?.id}`);
            },
            async () => {
              const index = Math.floor(Math.random() * readers.length);
              const key = readers[index] as NewKey;
              const usage = await stressed.store.usage(key.id, 5);
              expectThat(
                usage.totals.requests === 20 + index &&
                  usage.recent.length === 5 &&
                  usage.recent.every((record) => record.keyId === key.id),
                `usage(${key.id}) gave ${usage.totals.requests} requests, records of ${usage.recent.map((r) => r.keyId)}`,
              );
            },
            async () => {
              const index = Math.floor(Math.random() * readers.length);
              const key = readers[index] as NewKey;
              const series = await stressed.store.usageSeries({
                keyId: key.id,
                from: t0,
                to: t0 + 3_600_000,
                stepMs: 60_000,
              });
              const requests = series.reduce((sum, point) => sum + point.requests, 0);
              expectThat(
                requests === 20 + index &&
                  series.every((point) => point.at >= t0 && point.at < t0 + 3_600_000),
                `usageSeries(${key.id}) summed ${requests} requests over ${series.length} points`,
              );
            },
            async () => {
              const page = await stressed.store.listKeys(100);
              const ids = page.keys.map((key) => key.id).sort();
              expectThat(ids.join() === allIds.join(), `listKeys gave ${ids.length} keys`);
            },
            async () => {
              const key = pick(payers);
              const requestId = `stress-${request++}`;
              const held = await stressed.store.reserve(
                key.id,
                requestId,
                5_000,
                Date.now(),
                Date.now() - 60_000,
              );
              expectThat(held.ok, `reserve on ${key.id} gave ${JSON.stringify(held)}`);
              if (!held.ok) return;
              if (Math.random() < 0.5) {
                const debit = await stressed.store.settle(
                  held.reservationId,
                  usageEntry(key.id, requestId, 3_000),
                  0,
                );
                expectThat(debit === 3_000 || debit === 0, `settle on ${key.id} debited ${debit}`);
              } else {
                await stressed.store.release(held.reservationId, {
                  ...usageEntry(key.id, requestId, 0),
                  status: 502,
                });
              }
            },
          ];
          const occupy = () => stressed.occupy(40 + Math.random() * 80);

          const worker = async () => {
            for (let i = 0; i < 150; i++) {
              if (Math.random() < 0.15) {
                await occupy();
                continue;
              }
              try {
                await pick(operations)();
                counts.answered++;
              } catch (error) {
                if (error instanceof StoreUnavailableError) counts.unavailable++;
                else wrong.push(`threw ${(error as Error).message}`);
              }
            }
          };
          try {
            await Promise.all(Array.from({ length: 6 }, worker));
          } finally {
            await stressed.store.close();
          }
          expect(wrong).toEqual([]);
          expect(counts.answered).toBeGreaterThan(0);
          expect(counts.unavailable).toBeGreaterThan(0);
          // Whatever the deadlines cut short, the ledger of every key that paid is exact.
          for (const key of payers)
            expect(await store.ledgerBalance(key.id)).toBe((await store.getKey(key.id))?.creditsMicro);
        }),
      120_000,
    );
  });
}
