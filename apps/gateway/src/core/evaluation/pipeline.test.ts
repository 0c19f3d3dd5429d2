import { failure } from '@decision-gateway/contract';
import { describe, expect, it } from 'vitest';
import {
  callOf,
  fakeAuthenticate,
  fakeDeps,
  fakeRoute,
  noulRequest,
} from '../../../test/support/evaluation-fakes.ts';
import { createMemoryCache } from '../../cache/memory-cache.ts';
import type { RateDecision, RateLimiter } from '../../rate-limit/rate-limiter.ts';
import { StoreUnavailableError } from '../../store/store.ts';
import { createEvaluator } from './index.ts';

const revoked = { ok: false as const, failure: failure('invalid_api_key', 'the API key has been revoked') };

describe('the evaluation pipeline', () => {
  it('a success: reserved, asked, settled at the reported cost, one usage record, headers from the meta', async () => {
    const deps = fakeDeps();
    const outcome = await createEvaluator(deps).evaluate(callOf());
    expect(outcome.ok).toBe(true);
    if (!outcome.ok) return;
    expect(outcome.data.result.answers).toEqual({ refund: { type: 'noul', noul: 0.9 } });
    expect(outcome.data.creditsUsed).toBe(0.1);
    expect(outcome.meta).toMatchObject({ route: 'default', upstream: 'fake', creditsUsed: 0.1 });
    expect(deps.store.reserved).toHaveLength(1);
    expect(deps.store.settled).toMatchObject([
      { status: 200, creditsMicro: 100_000, upstream: 'fake', questions: 1 },
    ]);
    expect(deps.store.released).toEqual([]);
  });

  it('every failure after authentication leaves one record with 0 credits and its status; none before', async () => {
    const cases = [
      { call: callOf('{'), status: 400 },
      { call: callOf({ ...noulRequest, questions: {} }), status: 400 },
      { call: callOf(noulRequest, { route: 'missing' }), status: 400 },
    ];
    for (const { call, status } of cases) {
      const deps = fakeDeps();
      const outcome = await createEvaluator(deps).evaluate(call);
      expect(outcome.ok).toBe(false);
      expect(deps.store.released.map(({ entry }) => [entry.status, entry.creditsMicro])).toEqual([
        [status, 0],
      ]);
      expect(deps.store.settled).toEqual([]);
    }
    const unauthenticated = fakeDeps({ authenticate: fakeAuthenticate({ refusal: revoked }) });
    const refused = await createEvaluator(unauthenticated).evaluate(callOf());
    expect(!refused.ok && refused.failure.code).toBe(40101);
    expect(unauthenticated.store.released).toEqual([]);
  });

  it('an upstream failure releases the hold it reserved, uncharged, and keeps the route header', async () => {
    const route = fakeRoute(() => ({
      ok: false,
      failure: failure('upstream_error', 'boom'),
      detail: 'boom',
    }));
    const deps = fakeDeps({ routes: new Map([['default', route]]) });
    const outcome = await createEvaluator(deps).evaluate(callOf());
    expect(!outcome.ok && outcome.failure.code).toBe(50200);
    expect(outcome.meta).toEqual({ requestId: expect.any(String), route: 'default' });
    expect(outcome.log.reason).toBe('boom');
    expect(deps.store.released).toMatchObject([
      { reservationId: 'res_1', entry: { status: 502, creditsMicro: 0 } },
    ]);
  });

  it('402 without calling the upstream when the key cannot cover the bound', async () => {
    const deps = fakeDeps();
    deps.store.nextReserve = { ok: false, code: 'insufficient_credits', availableMicro: 500 };
    const route = deps.routes.get('default') as ReturnType<typeof fakeRoute>;
    const outcome = await createEvaluator(deps).evaluate(callOf());
    expect(!outcome.ok && outcome.failure.message).toBe(
      'this request may cost up to 1 credits; the key has 0.0005 available',
    );
    expect(route.calls).toBe(0);
    expect(deps.store.released).toMatchObject([{ entry: { status: 402 } }]);
  });

  it('a key the reservation refuses is answered as authentication words it, with no record', async () => {
    const deps = fakeDeps({ authenticate: fakeAuthenticate({ fromCache: true, freshRefusal: revoked }) });
    deps.store.nextReserve = { ok: false, code: 'key_refused', reason: 'revoked' };
    const outcome = await createEvaluator(deps).evaluate(callOf());
    expect(!outcome.ok && outcome.failure.message).toBe('the API key has been revoked');
    expect(outcome.meta).toEqual({ requestId: expect.any(String) });
    expect(deps.store.released).toEqual([]);
  });

  it('a cached key revoked since is refused before a 400 is recorded for it', async () => {
    const deps = fakeDeps({ authenticate: fakeAuthenticate({ fromCache: true, freshRefusal: revoked }) });
    const outcome = await createEvaluator(deps).evaluate(callOf('{'));
    expect(!outcome.ok && outcome.failure.code).toBe(40101);
    expect(deps.store.released).toEqual([]);
  });

  it('caps the debit at the reservation and says so', async () => {
    const capped: number[] = [];
    const route = fakeRoute(() => ({
      ok: true,
      answers: { refund: { type: 'noul', noul: 0.5 } },
      usage: { input_tokens: 5_000, output_tokens: 0 },
      upstream: 'fake',
      refused: [],
    }));
    const deps = fakeDeps({
      routes: new Map([['default', route]]),
      onDebitCapped: (_r, excess) => capped.push(excess),
    });
    const outcome = await createEvaluator(deps).evaluate(callOf());
    expect(outcome.ok && outcome.data.creditsUsed).toBe(1);
    expect(capped).toEqual([4_000_000]);
  });

  it('an unexpected error after the reservation is a 500 that releases the hold', async () => {
    const route = fakeRoute(() => {
      throw new Error('a bug');
    });
    const deps = fakeDeps({ routes: new Map([['default', route]]) });
    const outcome = await createEvaluator(deps).evaluate(callOf());
    expect(!outcome.ok && outcome.failure.code).toBe(50000);
    expect(deps.store.released).toMatchObject([{ reservationId: 'res_1', entry: { status: 500 } }]);
  });

  it('storage trouble is a 503 whose record is written once the store is back', async () => {
    const deps = fakeDeps();
    deps.store.failWith = new StoreUnavailableError('down');
    const outcome = await createEvaluator(deps).evaluate(callOf());
    expect(!outcome.ok && [outcome.failure.code, outcome.failure.retryAfterMs]).toEqual([50300, 1000]);
    deps.store.failWith = undefined;
    const deadline = Date.now() + 10_000;
    while (deps.store.released.length === 0 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    expect(deps.store.released).toMatchObject([
      { reservationId: null, entry: { status: 503, creditsMicro: 0 } },
    ]);
  });

  it('a 503 met while reading the key is recorded once the key can be read; a key refused then, never', async () => {
    for (const refusedLater of [false, true]) {
      let down = true;
      let reads = 0;
      const authenticate = async () => {
        reads++;
        if (down) throw new StoreUnavailableError('PostgreSQL did not answer within its deadline (find key)');
        return refusedLater
          ? revoked
          : await fakeAuthenticate()({
              authorization: 'Bearer dg_anything',
              origin: undefined,
              cached: false,
            });
      };
      const deps = fakeDeps({ authenticate: authenticate as never });
      const outcome = await createEvaluator(deps).evaluate(callOf());
      expect(!outcome.ok && outcome.failure.code).toBe(50300);
      down = false;
      const deadline = Date.now() + 10_000;
      const settled = () => (refusedLater ? reads >= 2 : deps.store.released.length > 0);
      while (!settled() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      // A refusal's absence of a record is decided in the same turn as the read.
      await new Promise((r) => setImmediate(r));
      expect(deps.store.released).toMatchObject(
        refusedLater
          ? []
          : [{ reservationId: null, entry: { keyId: 'key_1', status: 503, creditsMicro: 0 } }],
      );
    }
  });

  it('a shutdown releases what is held; the request answering afterwards is neither settled nor recorded twice', async () => {
    let answer: () => void = () => {};
    const route = fakeRoute(
      () =>
        new Promise((resolve) => {
          answer = () =>
            resolve({
              ok: true,
              answers: { refund: { type: 'noul', noul: 1 } },
              usage: { input_tokens: 1, output_tokens: 0 },
              upstream: 'fake',
              refused: [],
            });
        }),
    );
    const deps = fakeDeps({ routes: new Map([['default', route]]) });
    const evaluator = createEvaluator(deps);
    const pending = evaluator.evaluate(callOf());
    while (route.calls === 0) await new Promise((r) => setTimeout(r, 1));
    expect(await evaluator.abandonInFlight()).toBe(1);
    answer();
    const outcome = await pending;
    expect(!outcome.ok && outcome.failure.code).toBe(50300);
    expect(deps.store.settled).toEqual([]);
    expect(deps.store.released).toMatchObject([{ reservationId: 'res_1', entry: { status: 503 } }]);
    expect(await evaluator.abandonInFlight()).toBe(0);
  });

  describe('on a route that keeps decisions', () => {
    function cachedDeps() {
      const route = fakeRoute(undefined, { cacheTtlSeconds: 60 });
      const outcomes: string[] = [];
      const deps = fakeDeps({
        routes: new Map([['default', route]]),
        cache: createMemoryCache({ maxBytes: 1 << 20 }),
        onCacheOutcome: (_route, outcome) => outcomes.push(outcome),
      });
      return { deps, route, outcomes };
    }

    it('a hit is served without credits or the upstream, with a record of its own', async () => {
      const { deps, route, outcomes } = cachedDeps();
      const evaluator = createEvaluator(deps);
      const first = await evaluator.evaluate(callOf());
      const second = await evaluator.evaluate(callOf());
      expect(first.meta.cache).toBe('miss');
      expect(second.meta).toMatchObject({ cache: 'hit', creditsUsed: 0, upstream: 'fake', age: 0 });
      expect(second.ok && second.data.result.usage).toEqual({ input_tokens: 0, output_tokens: 0 });
      expect(route.calls).toBe(1);
      expect(outcomes).toEqual(['miss', 'hit']);
      expect(deps.store.released).toMatchObject([
        { reservationId: null, entry: { cached: true, status: 200, upstream: 'fake' } },
      ]);
    });

    it('no-store neither looks up nor keeps; a failure is never kept', async () => {
      const { deps, route } = cachedDeps();
      const evaluator = createEvaluator(deps);
      const bypass = await evaluator.evaluate(callOf(noulRequest, { cacheControl: 'no-store' }));
      expect(bypass.meta.cache).toBe('bypass');
      expect((await evaluator.evaluate(callOf())).meta.cache).toBe('miss');
      expect(route.calls).toBe(2);
    });

    it('identical requests at once make one upstream call; the others are answered as hits', async () => {
      let release: () => void = () => {};
      const gate = new Promise<void>((resolve) => (release = resolve));
      const route = fakeRoute(
        async () => {
          await gate;
          return {
            ok: true,
            answers: { refund: { type: 'noul', noul: 0.7 } },
            usage: { input_tokens: 10, output_tokens: 0 },
            upstream: 'fake',
            refused: [],
          };
        },
        { cacheTtlSeconds: 60 },
      );
      const deps = fakeDeps({
        routes: new Map([['default', route]]),
        cache: createMemoryCache({ maxBytes: 1 << 20 }),
      });
      const evaluator = createEvaluator(deps);
      const all = [1, 2, 3].map(() => evaluator.evaluate(callOf()));
      while (route.calls === 0) await new Promise((r) => setTimeout(r, 1));
      release();
      const outcomes = await Promise.all(all);
      expect(route.calls).toBe(1);
      expect(outcomes.map((o) => o.meta.cache).sort()).toEqual(['hit', 'hit', 'miss']);
      expect(outcomes.map((o) => o.log.cache).sort()).toEqual(['coalesced', 'coalesced', 'miss']);
    });
  });
});

describe('with a rate limiter asked over the network', () => {
  /** A remote limiter whose answers the test gives, one take at a time, in the order asked. */
  function remoteLimiter() {
    const asked: { bucket: string; answer: (decision: RateDecision) => void }[] = [];
    const limiter: RateLimiter = {
      remote: true,
      take: (bucket) => new Promise((answer) => asked.push({ bucket, answer })),
    };
    /** Waits for the next take still unanswered, then answers it. */
    async function answerNext(decision: RateDecision) {
      await until(() => asked.length > 0);
      (asked.shift() as (typeof asked)[number]).answer(decision);
    }
    return { limiter, asked, answerNext };
  }

  /** Lets every ready promise run, then checks. */
  async function until(done: () => boolean) {
    for (let turn = 0; !done(); turn++) {
      if (turn > 1_000) throw new Error('never happened');
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  function limitedDeps(overrides: Parameters<typeof fakeDeps>[0] = {}) {
    const remote = remoteLimiter();
    const deps = fakeDeps({ rateLimiter: remote.limiter, defaultRateLimitPerMinute: 60, ...overrides });
    const route = deps.routes.get('default') as ReturnType<typeof fakeRoute>;
    return { deps, route, ...remote, evaluator: createEvaluator(deps) };
  }

  it('waits for the first answer about a key; then reserves beside the take while the bucket has room', async () => {
    const { deps, route, asked, answerNext, evaluator } = limitedDeps();
    /** Once `takes` takes are asked, and a turn later, the holds reserved are still `holds`. */
    async function waitingWith(takes: number, holds: number) {
      await until(() => asked.length === takes);
      await new Promise((resolve) => setImmediate(resolve));
      expect(deps.store.reserved).toHaveLength(holds);
    }
    const first = evaluator.evaluate(callOf());
    // Nothing known of the bucket yet: nothing is reserved before the answer.
    await waitingWith(1, 0);
    await answerNext({ ok: true, left: 1 });
    expect((await first).ok).toBe(true);

    // One token left: the next request is reserved while its take is still unanswered…
    const second = evaluator.evaluate(callOf());
    await until(() => deps.store.reserved.length === 2);
    expect(asked).toHaveLength(1);
    // …and asks no upstream before the answer.
    expect(route.calls).toBe(1);
    // Its take is on its way and would use that token: a third waits for its own answer.
    const third = evaluator.evaluate(callOf());
    await waitingWith(2, 2);
    await answerNext({ ok: true, left: 0 });
    expect((await second).ok).toBe(true);
    await answerNext({ ok: false, retryAfterMs: 1_000 });
    const refused = await third;
    expect(!refused.ok && refused.failure.code).toBe(42900);
    expect(route.calls).toBe(2);
    expect(deps.store.reserved).toHaveLength(2);
  });

  it('a request refused after it went on: 429, its hold released uncharged, no upstream asked', async () => {
    const { deps, route, answerNext, evaluator } = limitedDeps();
    await Promise.all([evaluator.evaluate(callOf()), answerNext({ ok: true, left: 5 })]);
    const [refused] = await Promise.all([
      evaluator.evaluate(callOf()),
      // Another instance took the last tokens meanwhile.
      until(() => deps.store.reserved.length === 2).then(() =>
        answerNext({ ok: false, retryAfterMs: 2_000 }),
      ),
    ]);
    expect(!refused.ok && refused.failure).toMatchObject({ code: 42900, retryAfterMs: 2_000 });
    expect(route.calls).toBe(1);
    expect(deps.store.settled).toHaveLength(1);
    expect(deps.store.released).toMatchObject([
      { reservationId: 'res_2', entry: { status: 429, creditsMicro: 0 } },
    ]);
    // Told and recorded as a request refused before it was read: the bucket is now known empty,
    // so the next request waits for its answer, and both come out alike.
    const [waited] = await Promise.all([
      evaluator.evaluate(callOf()),
      answerNext({ ok: false, retryAfterMs: 2_000 }),
    ]);
    expect(deps.store.reserved).toHaveLength(2);
    const [wentOn, waitedFirst] = [refused, waited].map(({ meta, log }) => ({
      meta: { ...meta, requestId: 'r' },
      log,
    }));
    expect(wentOn).toEqual(waitedFirst);
    expect(wentOn?.log).toEqual({ keyPrefix: 'dg_test' });
    const [first, second] = deps.store.released.map(({ entry }) => ({
      ...entry,
      requestId: 'r',
      at: 0,
      elapsedMs: 0,
    }));
    expect(first).toEqual(second);
    expect(first).toMatchObject({ route: null, questions: 0 });
  });

  it('a 429 still comes before a broken request, and before a key with too few credits', async () => {
    const { deps, answerNext, evaluator } = limitedDeps();
    await Promise.all([evaluator.evaluate(callOf()), answerNext({ ok: true, left: 5 })]);
    const [invalid] = await Promise.all([
      evaluator.evaluate(callOf({ ...noulRequest, questions: {} })),
      answerNext({ ok: false, retryAfterMs: 1_000 }),
    ]);
    expect(!invalid.ok && invalid.failure.code).toBe(42900);
    deps.store.nextReserve = { ok: false, code: 'insufficient_credits', availableMicro: 0 };
    const [poor] = await Promise.all([
      evaluator.evaluate(callOf()),
      answerNext({ ok: false, retryAfterMs: 1_000 }),
    ]);
    expect(!poor.ok && poor.failure.code).toBe(42900);
    expect(deps.store.released.map(({ entry }) => entry.status)).toEqual([429, 429]);
  });

  it('a cached decision is not served to a request its limiter refuses', async () => {
    const route = fakeRoute(undefined, { cacheTtlSeconds: 60 });
    const { answerNext, evaluator } = limitedDeps({
      routes: new Map([['default', route]]),
      cache: createMemoryCache({ maxBytes: 1 << 20 }),
    });
    await Promise.all([evaluator.evaluate(callOf()), answerNext({ ok: true, left: 5 })]);
    const [refused] = await Promise.all([
      evaluator.evaluate(callOf()),
      answerNext({ ok: false, retryAfterMs: 1_000 }),
    ]);
    expect(!refused.ok && refused.failure.code).toBe(42900);
    const [served] = await Promise.all([evaluator.evaluate(callOf()), answerNext({ ok: true, left: 3 })]);
    expect(served.meta.cache).toBe('hit');
    expect(route.calls).toBe(1);
  });
});
