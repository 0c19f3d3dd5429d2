import { randomBytes } from 'node:crypto';
import { MODEL_ID } from '@decision-gateway/contract';
import { createLexicalUpstream, type UpstreamCall } from '@decision-gateway/questions';
import { TypeSafeClient } from '@typesafe-ai/sdk';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createMemoryCache } from '../src/cache/memory-cache.ts';
import { createRedisCache } from '../src/cache/redis-cache.ts';
import {
  ADMIN_TOKEN,
  bearer,
  post,
  sampleRequest,
  scriptedUpstream,
  startGateway,
  type TestGateway,
  type TestGatewayOptions,
} from './harness.ts';
import { TEST_REDIS_URL } from './services.ts';

const lexical = createLexicalUpstream();
const gateways: TestGateway[] = [];
afterAll(async () => {
  await Promise.all(gateways.map((gw) => gw.close()));
});

/** A gateway whose default route keeps decisions, over an upstream that counts its calls. */
async function cachingGateway(
  options: Partial<TestGatewayOptions> & { fail?: (call: UpstreamCall) => boolean } = {},
) {
  const upstream = scriptedUpstream(
    (call) =>
      options.fail?.(call)
        ? { ok: false, failure: { type: 'upstream_error', code: 50200, status: 502, message: 'down' } }
        : lexical.answer(call),
    (request, bytes) => lexical.usageBound(request, bytes),
  );
  const gw = await startGateway({
    upstream,
    cache: createMemoryCache({ maxBytes: 1_000_000 }),
    cacheTtlSeconds: 3600,
    adminToken: ADMIN_TOKEN,
    ...options,
  });
  gateways.push(gw);
  return { gw, upstream };
}

const ask = (
  gw: TestGateway,
  key: string,
  body: unknown = sampleRequest(),
  headers: Record<string, string> = {},
) => post(gw.url, '/v1/systemone', body, { ...bearer(key), ...headers });

describe('the decision cache', () => {
  it('answers the same decision again without the upstream: zero usage, 0 credits, age, a cached record', async () => {
    const { gw, upstream } = await cachingGateway();
    const { id, key } = await gw.createKey({ credits: 10 });
    const first = await ask(gw, key);
    expect(first.headers.get('x-dg-cache')).toBe('miss');
    const second = await ask(gw, key);
    expect(upstream.calls).toBe(1);
    expect(second.headers.get('x-dg-cache')).toBe('hit');
    expect(Number(second.headers.get('age'))).toBeGreaterThanOrEqual(0);
    expect(second.headers.get('x-dg-upstream')).toBe('scripted');
    expect(second.body.data.result.answers).toEqual(first.body.data.result.answers);
    expect(second.body.data.result.usage).toEqual({ input_tokens: 0, output_tokens: 0 });
    expect(second.body.data.creditsUsed).toBe(0);
    const balance = await gw.keys.get(id);
    expect(balance.ok && balance.value.credits).toBeCloseTo(10 - first.body.data.creditsUsed, 9);
    const usage = await gw.keys.usage(id, 10);
    expect(usage.ok && usage.value.recent.map((r) => [r.status, r.creditsUsed, r.cached])).toEqual([
      [200, 0, true],
      [200, first.body.data.creditsUsed, false],
    ]);
  });

  it('ignores whitespace and the order of question IDs, but not the order of a choice’s options', async () => {
    const { gw, upstream } = await cachingGateway();
    const { key } = await gw.createKey({ credits: 10 });
    const request = sampleRequest() as { questions: Record<string, { criteria?: unknown }> };
    await ask(gw, key, request);
    const reordered = {
      ...request,
      questions: Object.fromEntries(Object.entries(request.questions).reverse()),
    };
    const spaced = await ask(gw, key, JSON.stringify(reordered, null, 4));
    expect(spaced.headers.get('x-dg-cache')).toBe('hit');
    const team = request.questions.team as { criteria: Record<string, string> };
    const swapped = { ...team, criteria: Object.fromEntries(Object.entries(team.criteria).reverse()) };
    const options = await ask(gw, key, { ...request, questions: { ...request.questions, team: swapped } });
    expect(options.headers.get('x-dg-cache')).toBe('miss');
    expect(upstream.calls).toBe(2);
  });

  it('serves a decision only to the key that paid for it, unless the scope is global', async () => {
    const perKey = await cachingGateway();
    const a = await perKey.gw.createKey();
    const b = await perKey.gw.createKey();
    await ask(perKey.gw, a.key);
    expect((await ask(perKey.gw, b.key)).headers.get('x-dg-cache')).toBe('miss');

    const global = await cachingGateway({ cacheScope: 'global' });
    const c = await global.gw.createKey();
    const d = await global.gw.createKey();
    await ask(global.gw, c.key);
    expect((await ask(global.gw, d.key)).headers.get('x-dg-cache')).toBe('hit');
  });

  it('with no-cache asks afresh and stores the answer; with no-store neither looks up nor stores', async () => {
    const { gw, upstream } = await cachingGateway();
    const { key } = await gw.createKey({ credits: 10 });
    const fresh = await ask(gw, key, sampleRequest(), { 'cache-control': 'no-cache' });
    expect(fresh.headers.get('x-dg-cache')).toBe('bypass');
    expect((await ask(gw, key)).headers.get('x-dg-cache')).toBe('hit');
    expect(
      (await ask(gw, key, sampleRequest(), { 'cache-control': 'no-cache' })).headers.get('x-dg-cache'),
    ).toBe('bypass');
    expect(upstream.calls).toBe(2);

    const other = { ...sampleRequest(), state: 'a state never asked' };
    expect((await ask(gw, key, other, { 'cache-control': 'no-store' })).headers.get('x-dg-cache')).toBe(
      'bypass',
    );
    expect((await ask(gw, key, other)).headers.get('x-dg-cache')).toBe('miss');
  });

  it('never caches a failure', async () => {
    let failing = true;
    const { gw, upstream } = await cachingGateway({ fail: () => failing });
    const { key } = await gw.createKey({ credits: 10 });
    expect((await ask(gw, key)).body.code).toBe(50200);
    failing = false;
    const next = await ask(gw, key);
    expect([next.status, next.headers.get('x-dg-cache')]).toEqual([200, 'miss']);
    expect(upstream.calls).toBe(2);
  });

  it('serves a hit to a key at 0 credits, but refuses it a miss', async () => {
    const { gw } = await cachingGateway({ cacheScope: 'global' });
    const payer = await gw.createKey({ credits: 10 });
    const broke = await gw.createKey({ credits: 0 });
    await ask(gw, payer.key);
    const hit = await ask(gw, broke.key);
    expect([hit.status, hit.headers.get('x-dg-cache')]).toEqual([200, 'hit']);
    const miss = await ask(gw, broke.key, { ...sampleRequest(), state: 'something new' });
    expect(miss.body.code).toBe(40200);
  });

  it('takes a rate-limit token for a hit too', async () => {
    const { gw } = await cachingGateway();
    const { key } = await gw.createKey({ rateLimitPerMinute: 2 });
    await ask(gw, key);
    expect((await ask(gw, key)).headers.get('x-dg-cache')).toBe('hit');
    expect((await ask(gw, key)).body.code).toBe(42900);
  });

  it('makes one upstream call for 20 identical requests at once, and charges once', async () => {
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const upstream = scriptedUpstream(
      async (call) => {
        await held;
        return lexical.answer(call);
      },
      (request, bytes) => lexical.usageBound(request, bytes),
    );
    const { gw } = await cachingGateway({ upstream });
    const { id, key } = await gw.createKey({ credits: 10 });
    const answers = Array.from({ length: 20 }, () => ask(gw, key));
    // Released once all 20 are in the gateway (and the first has reached the upstream).
    const deadline = Date.now() + 15_000;
    while (upstream.calls === 0 || ((await gw.metrics.inFlight.get()).values[0]?.value ?? 0) < 20) {
      if (Date.now() > deadline) throw new Error('the requests never all arrived');
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    release();
    const responses = await Promise.all(answers);
    expect(upstream.calls).toBe(1);
    expect(responses.every((r) => r.status === 200)).toBe(true);
    expect(responses.filter((r) => r.headers.get('x-dg-cache') === 'miss')).toHaveLength(1);
    const charged = responses.reduce((sum, r) => sum + r.body.data.creditsUsed, 0);
    expect(charged).toBe(
      responses.find((r) => r.headers.get('x-dg-cache') === 'miss')?.body.data.creditsUsed,
    );
    expect(await gw.store.ledgerBalance(id)).toBe(Math.round((10 - charged) * 1e6));
    const usage = await gw.keys.usage(id, 100);
    expect(usage.ok && usage.value.recent.filter((r) => r.cached)).toHaveLength(19);
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    expect(metrics).toMatch(/dg_cache_requests_total\{route="default",outcome="(coalesced|hit)"\} \d+/);
  });

  it('carries the headers on tRPC and /native, and /native reports zero usage on a hit', async () => {
    const { gw } = await cachingGateway();
    const { key } = await gw.createKey({ credits: 10 });
    const trpc = (headers: Record<string, string> = {}) =>
      fetch(`${gw.url}/trpc/evaluate`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...bearer(key), ...headers },
        body: JSON.stringify(sampleRequest()),
      });
    expect((await trpc()).headers.get('x-dg-cache')).toBe('miss');
    const hit = await trpc();
    expect([hit.headers.get('x-dg-cache'), hit.headers.get('age')]).toEqual([
      'hit',
      expect.stringMatching(/^\d+$/),
    ]);
    expect((await trpc({ 'cache-control': 'no-store' })).headers.get('x-dg-cache')).toBe('bypass');

    const sdk = new TypeSafeClient({
      apiKey: key,
      baseURL: `${gw.url}/native`,
      logLevel: 'off',
      retry: { maxRetries: 0 },
    });
    const { model: _model, ...request } = sampleRequest() as {
      model: string;
      state: string;
      questions: never;
    };
    const native = await sdk.systemOne({ model: MODEL_ID, ...request }).withResponse();
    expect(native.response.headers.get('x-dg-cache')).toBe('hit');
    expect(native.data.usage).toEqual({ input_tokens: 0, output_tokens: 0 });
    expect(native.response.headers.get('x-credits-used')).toBe('0');
  });

  it('purges all decisions or one key’s through the admin API', async () => {
    const { gw } = await cachingGateway();
    const a = await gw.createKey();
    const b = await gw.createKey();
    await ask(gw, a.key);
    await ask(gw, b.key);
    const admin = bearer(ADMIN_TOKEN);
    const purgeA = await fetch(`${gw.url}/admin/cache?keyId=${a.id}`, { method: 'DELETE', headers: admin });
    expect(((await purgeA.json()) as { data: unknown }).data).toEqual({ purged: 1 });
    expect((await ask(gw, a.key)).headers.get('x-dg-cache')).toBe('miss');
    expect((await ask(gw, b.key)).headers.get('x-dg-cache')).toBe('hit');
    const all = await fetch(`${gw.url}/admin/cache`, { method: 'DELETE', headers: admin });
    expect(((await all.json()) as { data: unknown }).data).toEqual({ purged: 2 });
  });

  it('forgets a decision after its TTL', async () => {
    const { gw } = await cachingGateway({ cacheTtlSeconds: 1 });
    const { key } = await gw.createKey();
    await ask(gw, key);
    // Waiting for the TTL to pass (a lower bound of time, whatever the machine's speed).
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    expect((await ask(gw, key)).headers.get('x-dg-cache')).toBe('miss');
  });
});

describe('the decision cache in Redis', () => {
  const keyPrefix = `dg_test_${randomBytes(4).toString('hex')}:`;
  afterAll(async () => {
    const redis = new Redis(TEST_REDIS_URL);
    const left = await redis.keys(`${keyPrefix}*`);
    if (left.length > 0) await redis.del(...left);
    redis.disconnect();
  });

  it('is shared by every instance: one stores, another hits', async () => {
    const redisCache = async () => {
      const cache = createRedisCache({ url: TEST_REDIS_URL, keyPrefix, onUnavailable: () => {} });
      await cache.connect();
      return cache;
    };
    const first = await cachingGateway({ cache: await redisCache() });
    const second = await cachingGateway({ cache: await redisCache(), dbPath: first.gw.dbPath });
    const { key } = await first.gw.createKey();
    expect((await ask(first.gw, key)).headers.get('x-dg-cache')).toBe('miss');
    expect((await ask(second.gw, key)).headers.get('x-dg-cache')).toBe('hit');
    expect(second.upstream.calls).toBe(0);
  });

  it('misses, never fails, when Redis cannot be reached', async () => {
    let unavailable = 0;
    const cache = createRedisCache({
      url: 'redis://127.0.0.1:1',
      keyPrefix,
      onUnavailable: () => unavailable++,
    });
    await cache.connect().catch(() => {});
    const { gw, upstream } = await cachingGateway({ cache });
    const { key } = await gw.createKey();
    for (let i = 0; i < 2; i++) {
      const response = await ask(gw, key);
      expect([response.status, response.headers.get('x-dg-cache')]).toEqual([200, 'miss']);
    }
    expect(upstream.calls).toBe(2);
    expect(unavailable).toBeGreaterThan(0);
    await cache.close?.();
  });
});
