import { failure, type GatewayFailure } from '@decision-gateway/contract';
import { describe, expect, it } from 'vitest';
import {
  callOf,
  fakeAuthenticate,
  fakeDeps,
  fakeRoute,
  KEY,
  noulRequest,
  tokenOf,
} from '../../../test/support/evaluation-fakes.ts';
import { sameHiddenClass } from '../../../test/support/hidden-class.ts';
import type { Authenticate } from '../../auth/authenticate.ts';
import { createMemoryCache } from '../../cache/memory-cache.ts';
import {
  type Authenticated,
  type EvaluationContext,
  failed,
  newContext,
  type Payer,
  type Stage,
} from './evaluation-context.ts';
import { authenticateCaller, confirmPayer } from './payer.ts';
import { createRateForecast, rateLimit, takeRateVerdict } from './rate-limit.ts';
import { readRequest } from './read-request.ts';
import { resolveRoute } from './resolve-route.ts';

const revoked = { ok: false as const, failure: failure('invalid_api_key', 'the API key has been revoked') };

/** A context its authentication made: the payer given. */
const paidBy = (ctx: EvaluationContext, payer: Payer): Authenticated => Object.assign(ctx, { payer });

/** A stage's failure, or undefined where it passed the context on. */
const failureOf = <C extends EvaluationContext>(result: Stage<C>): GatewayFailure | undefined =>
  failed(result) ? result : undefined;

describe('stage: authenticate', () => {
  it('makes the key the payer, from the cache when it may', async () => {
    const ctx = newContext(callOf());
    const authenticate = fakeAuthenticate({ fromCache: true });
    expect(await authenticateCaller(ctx, { authenticate })).toBe(ctx);
    expect(ctx.payer).toMatchObject({ id: KEY.id, token: null, unconfirmed: true });
    expect(ctx.log.keyPrefix).toBe(KEY.prefix);
    expect(authenticate.calls).toEqual([{ cached: true }]);
  });

  it('makes every payer of one hidden class, whatever object its key came in', async () => {
    // As the store gives keys (a row object), as a cache keeps them (a copy), as JSON reads them;
    // many times over, as V8 warms up: its first few copies of a spread share a class even when
    // the later ones do not.
    const keys = [KEY, { ...KEY, id: 'key_2' }, JSON.parse(JSON.stringify(KEY))];
    const payers: Payer[] = [];
    for (let i = 0; i < 60; i++) {
      const key = keys[i % keys.length];
      const ctx = newContext(callOf());
      const authenticate: Authenticate = async () => ({
        ok: true,
        principal: { kind: 'key', key },
        fromCache: false,
      });
      await authenticateCaller(ctx, { authenticate });
      payers.push(ctx.payer as Payer);
    }
    const first = payers[0] as Payer;
    expect(payers.filter((payer) => !sameHiddenClass(payer, first))).toHaveLength(0);
  });

  it('stops at a refused key, with no payer', async () => {
    const ctx = newContext(callOf());
    const stop = await authenticateCaller(ctx, { authenticate: fakeAuthenticate({ refusal: revoked }) });
    expect(failureOf(stop)?.code).toBe(40101);
    expect(ctx.payer).toBeUndefined();
  });

  it('confirms a cached key against the store once; a revocation since drops the payer and the headers', async () => {
    const ctx = newContext(callOf());
    const authenticate = fakeAuthenticate({ fromCache: true, freshRefusal: revoked });
    await authenticateCaller(ctx, { authenticate });
    ctx.meta.route = 'default';
    expect((await confirmPayer(ctx, { authenticate }))?.code).toBe(40101);
    expect(ctx.payer).toBeUndefined();
    expect(ctx.meta).toEqual({ requestId: ctx.call.requestId });

    const fine = newContext(callOf());
    const fresh = fakeAuthenticate({ fromCache: true });
    await authenticateCaller(fine, { authenticate: fresh });
    expect(await confirmPayer(fine, { authenticate: fresh })).toBeUndefined();
    expect(fine.payer?.unconfirmed).toBe(false);
    expect(await confirmPayer(fine, { authenticate: fresh })).toBeUndefined();
    expect(fresh.calls).toEqual([{ cached: true }, { cached: false }]);
  });
});

describe('stage: rate limit', () => {
  async function limited(perMinute: number, tokenPerMinute?: number) {
    const deps = fakeDeps({ defaultRateLimitPerMinute: perMinute });
    const ctx = paidBy(newContext(callOf()), {
      ...KEY,
      unconfirmed: false,
      token: tokenPerMinute === undefined ? null : tokenOf({ rateLimitPerMinute: tokenPerMinute }),
    });
    const deps2 = { ...deps, clock: () => 1_000_000 };
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push((await rateLimit(ctx, deps2))?.code ?? 0);
    return answers;
  }

  it('takes a token from the key’s bucket: the third of two a minute is 429 with a retry delay', async () => {
    expect(await limited(2)).toEqual([0, 0, 42900]);
  });
  it('a limit of 0 is off', async () => {
    expect(await limited(0)).toEqual([0, 0, 0]);
  });
  it('a token’s own bucket applies on top of its key’s', async () => {
    expect(await limited(0, 1)).toEqual([0, 42900, 42900]);
    const deps = { ...fakeDeps({ defaultRateLimitPerMinute: 1 }), clock: () => 5 };
    const ctx = paidBy(newContext(callOf()), { ...KEY, unconfirmed: false, token: null });
    await rateLimit(ctx, deps);
    const over = await rateLimit(ctx, deps);
    expect(over?.retryAfterMs).toBeGreaterThan(0);
    expect(over?.message).toContain('the key is over its rate limit of 1');
  });
});

describe('the rate forecast', () => {
  it('has room for a request only while the last answer left a token for it beside the takes on their way', () => {
    const forecast = createRateForecast();
    expect(forecast.roomFor('k')).toBe(false);
    forecast.asked('k');
    expect(forecast.roomFor('k')).toBe(false);
    forecast.answered('k', 2);
    expect(forecast.roomFor('k')).toBe(true);
    forecast.asked('k');
    expect(forecast.roomFor('k')).toBe(true);
    forecast.asked('k');
    expect(forecast.roomFor('k')).toBe(false);
    // Another instance took some: the bucket's word wins.
    forecast.answered('k', 0);
    expect(forecast.roomFor('k')).toBe(false);
    forecast.answered('k', 3);
    expect(forecast.roomFor('k')).toBe(true);
    expect(forecast.roomFor('other')).toBe(false);
  });

  it('goes on for a browser token only while its own bucket, and its key’s, have room', async () => {
    const asked: string[] = [];
    const left: Record<string, number> = { key_1: 5, 'token:tok_1': 1 };
    const deps = {
      rateLimiter: {
        remote: true,
        take: async (bucket: string) => {
          asked.push(bucket);
          return { ok: true as const, left: left[bucket] ?? 0 };
        },
      },
      defaultRateLimitPerMinute: 60,
      clock: () => 0,
      forecast: createRateForecast(),
    };
    const request = () =>
      paidBy(newContext(callOf()), {
        ...KEY,
        unconfirmed: false,
        token: tokenOf({ rateLimitPerMinute: 10 }),
      });
    // Nothing known: the stage hands the take back to be awaited.
    const first = request();
    expect(await rateLimit(first, deps)).toBeUndefined();
    expect(first.rateVerdict).toBeUndefined();
    expect(asked).toEqual(['key_1', 'token:tok_1']);
    // Both buckets had a token to spare: the next goes on, its verdict left on the context.
    const second = request();
    expect(rateLimit(second, deps)).toBeUndefined();
    expect(await takeRateVerdict(second)).toBeUndefined();
    // The token's bucket said it held none: the third waits again, however full the key's.
    left['token:tok_1'] = 0;
    const third = request();
    expect(rateLimit(third, deps)).toBeUndefined();
    await takeRateVerdict(third);
    const fourth = request();
    expect(rateLimit(fourth, deps)).toBeInstanceOf(Promise);
    expect(fourth.rateVerdict).toBeUndefined();
  });

  it('forgets the bucket it heard of longest ago once it knows its most', () => {
    const forecast = createRateForecast(2);
    for (const bucket of ['a', 'b']) {
      forecast.asked(bucket);
      forecast.answered(bucket, 5);
    }
    forecast.asked('a');
    forecast.answered('a', 5);
    forecast.asked('c');
    forecast.answered('c', 5);
    expect(['a', 'b', 'c'].map((bucket) => forecast.roomFor(bucket))).toEqual([true, false, true]);
  });
});

describe('stage: read the request', () => {
  it('refuses a wrong media type before reading the JSON', () => {
    const ctx = newContext(
      callOf('not json', { body: { kind: 'bytes', bytes: Buffer.from('x'), contentType: 'text/plain' } }),
    );
    expect((readRequest(ctx) as { code: number }).code).toBe(41500);
  });
  it('40000 for bytes that are not JSON, 40002 for no question, 40003 for another model', () => {
    expect((readRequest(newContext(callOf('{"model":'))) as { code: number }).code).toBe(40000);
    expect(
      (readRequest(newContext(callOf({ ...noulRequest, questions: {} }))) as { code: number }).code,
    ).toBe(40002);
    expect(
      (readRequest(newContext(callOf({ ...noulRequest, model: 'other' }))) as { code: number }).code,
    ).toBe(40003);
  });
  it('keeps a 40001 for after the route, and counts the questions of a valid request', () => {
    const bad = newContext(callOf({ ...noulRequest, extra: 1 }));
    expect(readRequest(bad)).toBeUndefined();
    expect(bad.invalid?.code).toBe(40001);
    const good = newContext(callOf());
    expect(readRequest(good)).toBeUndefined();
    expect(good.questions).toBe(1);
    expect(good.log.questionTypes).toEqual({ noul: 1 });
    expect(good.bodyBytes).toBe(Buffer.byteLength(JSON.stringify(noulRequest)));
  });
  it('reads a lazy body (a tRPC operation) only after judging its media type', async () => {
    let reads = 0;
    const lazy = (contentType: string) =>
      newContext(
        callOf(undefined, {
          body: {
            kind: 'lazy',
            contentType,
            bytes: 10,
            read: async () => {
              reads++;
              return { ok: true, value: noulRequest };
            },
          },
        }),
      );
    expect(((await readRequest(lazy('text/plain'))) as { code: number }).code).toBe(41500);
    expect(reads).toBe(0);
    const ctx = lazy('application/json');
    expect(await readRequest(ctx)).toBeUndefined();
    expect(reads).toBe(1);
    expect(ctx.request?.questions).toHaveProperty('refund');
  });
});

describe('stage: resolve the route', () => {
  const routes = new Map([
    ['default', fakeRoute()],
    ['cheap', fakeRoute(undefined, { name: 'cheap', cacheTtlSeconds: 60 })],
  ]);
  function contextFor(call = callOf(), keyRoute: string | null = null, tokenRoute?: string) {
    const ctx = newContext(call);
    readRequest(ctx);
    return paidBy(ctx, {
      ...KEY,
      route: keyRoute,
      unconfirmed: false,
      token: tokenRoute === undefined ? null : tokenOf({ route: tokenRoute }),
    });
  }

  it('a token’s route, else the header, else the key’s, else default', () => {
    const pick = (ctx: ReturnType<typeof contextFor>) => {
      expect(resolveRoute(ctx, { routes })).toBe(ctx);
      return ctx.meta.route;
    };
    expect(pick(contextFor())).toBe('default');
    expect(pick(contextFor(callOf(), 'cheap'))).toBe('cheap');
    expect(pick(contextFor(callOf(undefined, { route: 'default' }), 'cheap'))).toBe('default');
    expect(pick(contextFor(callOf(undefined, { route: 'default' }), null, 'cheap'))).toBe('cheap');
  });

  it('an unknown route is 40004 naming the routes, before a broken rule (40001)', () => {
    const ctx = contextFor(callOf({ ...noulRequest, extra: 1 }, { route: 'nope' }));
    const stop = failureOf(resolveRoute(ctx, { routes }));
    expect(stop?.code).toBe(40004);
    expect(stop?.message).toContain('the routes are: cheap, default');
    const known = contextFor(callOf({ ...noulRequest, extra: 1 }));
    expect(failureOf(resolveRoute(known, { routes }))?.code).toBe(40001);
    expect(known.meta.route).toBe('default');
  });

  it('on a route with a cache: miss or bypass as Cache-Control says, and where the decision lives', () => {
    const cache = createMemoryCache({ maxBytes: 1 << 20 });
    const miss = contextFor(callOf(), 'cheap');
    expect(resolveRoute(miss, { routes, cache })).toBe(miss);
    expect(miss.meta.cache).toBe('miss');
    expect(miss.cache?.directive).toBeUndefined();
    expect(miss.cache?.key.owner).toBe(KEY.id);
    const bypass = contextFor(callOf(undefined, { cacheControl: 'no-store' }), 'cheap');
    resolveRoute(bypass, { routes, cache });
    expect(bypass.meta.cache).toBe('bypass');
    expect(bypass.cache?.directive).toBe('no-store');
    const none = contextFor();
    resolveRoute(none, { routes, cache });
    expect(none.cache).toBeUndefined();
    expect(none.meta.cache).toBeUndefined();
  });
});
