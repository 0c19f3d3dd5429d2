import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, bearer, get, post, sampleRequest, startGateway, type TestGateway } from './harness.ts';
import { rawRequest } from './raw-http.ts';

const admin = bearer(ADMIN_TOKEN);

describe('admin API', () => {
  let gw: TestGateway;

  beforeAll(async () => {
    gw = await startGateway({ adminToken: ADMIN_TOKEN });
  });
  afterAll(() => gw.close());

  it('creates a key (201) and shows the plain key only then', async () => {
    const created = await post(
      gw.url,
      '/admin/keys',
      { name: 'svc', credits: 10, rateLimitPerMinute: 60 },
      admin,
    );
    expect(created.status).toBe(201);
    const data = created.body.data;
    expect(data).toMatchObject({
      name: 'svc',
      credits: 10,
      rateLimitPerMinute: 60,
      expiresAt: null,
      revokedAt: null,
      lastUsedAt: null,
    });
    expect(data.id).toMatch(/^key_/);
    expect(data.key).toMatch(/^dg_[A-Za-z0-9_-]{43}$/);
    expect(data.key.startsWith(data.prefix)).toBe(true);
    expect(new Date(data.createdAt).toISOString()).toBe(data.createdAt);

    const shown = await get(gw.url, `/admin/keys/${data.id}`, admin);
    expect(shown.body.data).not.toHaveProperty('key');
    expect(shown.text).not.toContain(data.key);
    const listed = await get(gw.url, '/admin/keys', admin);
    expect(listed.body.data.keys.map((k: { id: string }) => k.id)).toContain(data.id);
    expect(listed.text).not.toContain(data.key);

    // The new key works at once.
    expect((await post(gw.url, '/v1/systemone', sampleRequest(), bearer(data.key))).status).toBe(200);
  });

  it('creates unlimited and expiring keys', async () => {
    const unlimited = await post(gw.url, '/admin/keys', { name: 'unl', credits: null }, admin);
    expect(unlimited.body.data.credits).toBeNull();
    const expiresAt = new Date(Date.now() + 86_400_000).toISOString();
    const expiring = await post(gw.url, '/admin/keys', { name: 'exp', credits: 1, expiresAt }, admin);
    expect(expiring.body.data.expiresAt).toBe(expiresAt);
  });

  it.each<[string, unknown, string[]]>([
    ['no name', { credits: 1 }, ['name']],
    ['an empty name', { name: '', credits: 1 }, ['name']],
    ['a name over 100 characters', { name: 'n'.repeat(101), credits: 1 }, ['name']],
    ['negative credits', { name: 'x', credits: -1 }, ['credits']],
    ['credits with 7 decimals', { name: 'x', credits: 0.0000001 }, ['credits']],
    ['a bad date', { name: 'x', credits: 1, expiresAt: 'tomorrow' }, ['expiresAt']],
    ['a past date', { name: 'x', credits: 1, expiresAt: '2001-01-01T00:00:00Z' }, ['expiresAt']],
    ['a zero rate limit', { name: 'x', credits: 1, rateLimitPerMinute: 0 }, ['rateLimitPerMinute']],
    ['an unknown field', { name: 'x', credits: 1, admin: true }, ['admin']],
  ])('refuses a key with %s (40001)', async (_, body, path) => {
    const response = await post(gw.url, '/admin/keys', body, admin);
    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({ code: 40001, error: { type: 'invalid_request' } });
    expect(response.body.error.issues[0].path).toEqual(path);
  });

  it('refuses invalid JSON (40000) and another media type (41500)', async () => {
    expect((await post(gw.url, '/admin/keys', '{"name":', admin)).body.code).toBe(40000);
    const response = await rawRequest(gw.url, {
      path: '/admin/keys',
      headers: { ...admin, 'content-type': 'text/plain' },
      chunks: ['{}'],
    });
    expect(response.body.code).toBe(41500);
  });

  it('adds and removes credits, never below 0 and never on an unlimited key', async () => {
    const { data } = (await post(gw.url, '/admin/keys', { name: 'c', credits: 1 }, admin)).body;
    const add = await post(gw.url, `/admin/keys/${data.id}/credits`, { amount: 2.5 }, admin);
    expect(add.body.data.credits).toBe(3.5);
    const remove = await post(gw.url, `/admin/keys/${data.id}/credits`, { amount: -3 }, admin);
    expect(remove.body.data.credits).toBe(0.5);
    const tooMuch = await post(gw.url, `/admin/keys/${data.id}/credits`, { amount: -1 }, admin);
    expect(tooMuch.body).toMatchObject({ code: 40001, message: 'amount: the balance may not go below 0' });
    expect((await gw.store.ledgerBalance(data.id)) / 1e6).toBe(0.5);

    const unl = (await post(gw.url, '/admin/keys', { name: 'u', credits: null }, admin)).body.data;
    const onUnlimited = await post(gw.url, `/admin/keys/${unl.id}/credits`, { amount: 1 }, admin);
    expect(onUnlimited.body.code).toBe(40001);
    expect((await post(gw.url, `/admin/keys/${data.id}/credits`, { amount: 'ten' }, admin)).body.code).toBe(
      40001,
    );
  });

  it('revokes a key: refused on its next request', async () => {
    const { data } = (await post(gw.url, '/admin/keys', { name: 'r', credits: 5 }, admin)).body;
    expect((await post(gw.url, '/v1/systemone', sampleRequest(), bearer(data.key))).status).toBe(200);
    const revoked = await post(gw.url, `/admin/keys/${data.id}/revoke`, undefined, admin);
    expect(revoked.status).toBe(200);
    expect(revoked.body.data.revokedAt).not.toBeNull();
    const after = await post(gw.url, '/v1/systemone', sampleRequest(), bearer(data.key));
    expect(after.body).toMatchObject({ code: 40101, message: 'the API key has been revoked' });
  });

  it('reports usage with totals and recent records, limit defaulting to 20', async () => {
    const { data } = (await post(gw.url, '/admin/keys', { name: 'u', credits: 50 }, admin)).body;
    const sent = [];
    for (let i = 0; i < 3; i++)
      sent.push(await post(gw.url, '/v1/systemone', sampleRequest(), bearer(data.key)));
    await post(gw.url, '/v1/systemone', { ...sampleRequest(), state: null }, bearer(data.key));
    const usage = await get(gw.url, `/admin/keys/${data.id}/usage?limit=2`, admin);
    expect(usage.body.data.totals.requests).toBe(4);
    expect(usage.body.data.totals.creditsUsed).toBeCloseTo(
      sent.reduce((s, r) => s + r.body.data.creditsUsed, 0),
      9,
    );
    expect(usage.body.data.recent).toHaveLength(2);
    expect(usage.body.data.recent[0]).toMatchObject({ status: 400, creditsUsed: 0 });
    expect(usage.body.data.recent[0]).toEqual({
      requestId: expect.stringMatching(/^req_/),
      creditsUsed: 0,
      input_tokens: 0,
      output_tokens: 0,
      questions: 0,
      status: 400,
      elapsedMs: expect.any(Number),
      at: expect.any(String),
      route: 'default',
      upstream: null,
      cached: false,
      subject: null,
    });
    expect((await get(gw.url, `/admin/keys/${data.id}/usage`, admin)).body.data.recent).toHaveLength(4);
    expect((await get(gw.url, `/admin/keys/${data.id}/usage?limit=1001`, admin)).body.code).toBe(40001);
    expect((await get(gw.url, `/admin/keys/${data.id}/usage?limit=0`, admin)).body.code).toBe(40001);
  });

  it('answers 40400 for an unknown key id', async () => {
    for (const [method, path] of [
      ['GET', '/admin/keys/key_nope'],
      ['POST', '/admin/keys/key_nope/revoke'],
      ['GET', '/admin/keys/key_nope/usage'],
    ] as const) {
      const response =
        method === 'GET' ? await get(gw.url, path, admin) : await post(gw.url, path, undefined, admin);
      expect(response.body).toMatchObject({ code: 40400, error: { type: 'not_found' } });
    }
    expect((await post(gw.url, '/admin/keys/key_nope/credits', { amount: 1 }, admin)).body.code).toBe(40400);
  });

  it('needs the admin token: none → 40100, anything else → 40101 (an API key too)', async () => {
    expect((await get(gw.url, '/admin/keys')).body.code).toBe(40100);
    expect((await get(gw.url, '/admin/keys', bearer('wrong-token-of-some-length'))).body.code).toBe(40101);
    const apiKey = (await gw.createKey()).key;
    expect((await get(gw.url, '/admin/keys', bearer(apiKey))).body.code).toBe(40101);
    expect((await post(gw.url, '/admin/keys', '{bad json', {})).body.code).toBe(40100);
  });

  it('sends 405 with Allow for a wrong method on an admin path', async () => {
    const response = await fetch(`${gw.url}/admin/keys/abc`, { method: 'DELETE', headers: admin });
    expect(response.status).toBe(405);
    expect(response.headers.get('allow')).toBe('GET, HEAD, PATCH');
  });

  it('never logs the admin token or a plain key', async () => {
    const created = await post(gw.url, '/admin/keys', { name: 'log', credits: 1 }, admin);
    const all = gw.logs.join('\n');
    expect(all).not.toContain(ADMIN_TOKEN);
    expect(all).not.toContain(created.body.data.key);
  });
});

describe('GET /admin/keys pages', () => {
  it('returns keys newest first, limit at a time (100 by default, at most 1000), following nextCursor', async () => {
    const gw = await startGateway({ adminToken: ADMIN_TOKEN });
    try {
      const created: string[] = [];
      for (let i = 0; i < 230; i++) created.push((await gw.createKey()).id);
      const first = await get(gw.url, '/admin/keys', admin);
      expect(first.body.data.keys).toHaveLength(100);
      expect(typeof first.body.data.nextCursor).toBe('string');
      const listed: { id: string; createdAt: string }[] = [...first.body.data.keys];
      let cursor: string | null = first.body.data.nextCursor;
      while (cursor !== null) {
        const page = await get(gw.url, `/admin/keys?limit=100&cursor=${encodeURIComponent(cursor)}`, admin);
        expect(page.status).toBe(200);
        listed.push(...page.body.data.keys);
        cursor = page.body.data.nextCursor;
      }
      expect(listed).toHaveLength(230);
      expect(new Set(listed.map((k) => k.id))).toEqual(new Set(created));
      // Newest first, across every page.
      const times = listed.map((k) => Date.parse(k.createdAt));
      expect(times).toEqual([...times].sort((a, b) => b - a));
      const small = await get(gw.url, '/admin/keys?limit=7', admin);
      expect(small.body.data.keys).toHaveLength(7);
      const all = await get(gw.url, '/admin/keys?limit=1000', admin);
      expect(all.body.data).toMatchObject({ nextCursor: null });
      expect(all.body.data.keys).toHaveLength(230);
    } finally {
      await gw.close();
    }
  });

  it.each([
    ['limit=0', 'limit'],
    ['limit=1001', 'limit'],
    ['limit=ten', 'limit'],
    ['cursor=not-a-cursor', 'cursor'],
    ['page=2', ''],
  ])('refuses ?%s with 40001 naming the parameter', async (query, name) => {
    const gw = await startGateway({ adminToken: ADMIN_TOKEN });
    try {
      const refused = await get(gw.url, `/admin/keys?${query}`, admin);
      expect(refused.status).toBe(400);
      expect(refused.body.code).toBe(40001);
      if (name) expect(refused.body.error.issues[0].path).toEqual([name]);
    } finally {
      await gw.close();
    }
  });
});

describe('admin API switched off', () => {
  it('answers 404 on every admin path when ADMIN_TOKEN is unset', async () => {
    const gw = await startGateway();
    try {
      expect((await get(gw.url, '/admin/keys', admin)).body.code).toBe(40400);
      expect((await post(gw.url, '/admin/keys', { name: 'x', credits: 1 }, admin)).body.code).toBe(40400);
    } finally {
      await gw.close();
    }
  });
});

describe('admin API for the console', () => {
  it('sums usage per step, every step present, one key or all, and refuses more than 1000 points', async () => {
    let now = Date.parse('2026-11-23T10:30:00Z');
    const gw = await startGateway({ adminToken: ADMIN_TOKEN, clock: () => now });
    try {
      const a = await gw.createKey({ credits: 10 });
      const b = await gw.createKey({ credits: 10 });
      const spent = (await post(gw.url, '/v1/systemone', sampleRequest(), bearer(a.key))).body.data
        .creditsUsed;
      await post(gw.url, '/v1/systemone', { ...sampleRequest(), state: null }, bearer(a.key));
      now += 3_600_000;
      await post(gw.url, '/v1/systemone', sampleRequest(), bearer(b.key));
      const from = '2026-11-23T09:00:00Z';
      const to = '2026-11-23T13:00:00Z';
      const one = await get(
        gw.url,
        `/admin/usage/series?keyId=${a.id}&from=${from}&to=${to}&step=hour`,
        admin,
      );
      expect(one.body.data.step).toBe('hour');
      expect(
        one.body.data.series.map((p: { at: string; requests: number; errors: number }) => [
          p.at,
          p.requests,
          p.errors,
        ]),
      ).toEqual([
        ['2026-11-23T09:00:00.000Z', 0, 0],
        ['2026-11-23T10:00:00.000Z', 2, 1],
        ['2026-11-23T11:00:00.000Z', 0, 0],
        ['2026-11-23T12:00:00.000Z', 0, 0],
      ]);
      expect(one.body.data.series[1]).toMatchObject({ creditsUsed: spent, p50ElapsedMs: expect.any(Number) });
      const all = await get(gw.url, `/admin/usage/series?from=${from}&to=${to}&step=hour`, admin);
      expect(all.body.data.series.map((p: { requests: number }) => p.requests)).toEqual([0, 2, 1, 0]);
      // `to` defaults to now: 10:30 → 11:30 is two started hours.
      const untilNow = await get(gw.url, '/admin/usage/series?from=2026-11-23T10:00:00Z&step=hour', admin);
      expect(untilNow.body.data.series).toHaveLength(2);

      const tooMany = await get(
        gw.url,
        `/admin/usage/series?from=2026-11-01T00:00:00Z&to=${to}&step=minute`,
        admin,
      );
      expect(tooMany.body).toMatchObject({ code: 40001 });
      expect(tooMany.body.message).toContain('at most 1000');
      expect((await get(gw.url, `/admin/usage/series?from=${from}&step=week`, admin)).body.code).toBe(40001);
      expect(
        (await get(gw.url, `/admin/usage/series?keyId=key_none&from=${from}&step=hour`, admin)).body.code,
      ).toBe(40400);
    } finally {
      await gw.close();
    }
  });

  it('rounds a series down to its UTC step, and refuses a resolution no longer kept', async () => {
    const now = Date.parse('2026-11-23T10:30:30Z');
    const gw = await startGateway({ adminToken: ADMIN_TOKEN, clock: () => now });
    try {
      const { key } = await gw.createKey({ credits: 10 });
      await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key));
      const rounded = await get(gw.url, '/admin/usage/series?from=2026-11-23T10:17:42Z&step=minute', admin);
      expect(rounded.body.data.series[0].at).toBe('2026-11-23T10:17:00.000Z');
      expect(rounded.body.data.series.at(-1)).toMatchObject({ at: '2026-11-23T10:30:00.000Z', requests: 1 });
      // Minute rollups are kept 14 days, hour rollups 400: older, that resolution is gone.
      const minuteGone = await get(
        gw.url,
        '/admin/usage/series?from=2026-11-09T10:00:00Z&to=2026-11-09T11:00:00Z&step=minute',
        admin,
      );
      expect(minuteGone.body).toMatchObject({ code: 40001, error: { issues: [{ path: ['from'] }] } });
      expect(minuteGone.body.message).toContain('kept 14 days');
      const minuteKept = await get(
        gw.url,
        '/admin/usage/series?from=2026-11-09T11:00:00Z&to=2026-11-09T12:00:00Z&step=minute',
        admin,
      );
      expect(minuteKept.status).toBe(200);
      const hourGone = await get(
        gw.url,
        '/admin/usage/series?from=2025-10-01T00:00:00Z&to=2025-10-02T00:00:00Z&step=hour',
        admin,
      );
      expect(hourGone.body.message).toContain('kept 400 days');
      const days = await get(
        gw.url,
        '/admin/usage/series?from=2025-10-01T00:00:00Z&to=2025-10-02T00:00:00Z&step=day',
        admin,
      );
      expect(days.body.data.series).toHaveLength(1);
    } finally {
      await gw.close();
    }
  });

  it('summarises a range: totals, by route, by upstream and the keys that spent most, with percentiles', async () => {
    let now = Date.parse('2026-11-23T10:30:30Z');
    const gw = await startGateway({ adminToken: ADMIN_TOKEN, clock: () => now });
    try {
      const small = await gw.createKey({ credits: 10 });
      const big = await gw.createKey({ credits: 10 });
      const one = (await post(gw.url, '/v1/systemone', sampleRequest(), bearer(small.key))).body.data
        .creditsUsed;
      now += 2 * 86_400_000;
      await post(gw.url, '/v1/systemone', sampleRequest(), bearer(big.key));
      await post(gw.url, '/v1/systemone', sampleRequest(), bearer(big.key));
      await post(gw.url, '/v1/systemone', { ...sampleRequest(), state: null }, bearer(big.key));
      const summary = await get(gw.url, '/admin/usage/summary?from=2026-11-23T10:29:10Z', admin);
      expect(summary.status).toBe(200);
      const data = summary.body.data;
      expect(data.from).toBe('2026-11-23T10:29:00.000Z');
      expect(data.to).toBe('2026-11-25T10:31:00.000Z');
      expect(data.totals).toMatchObject({ requests: 4, errors: 1, cacheHits: 0 });
      expect(data.totals.creditsUsed).toBeCloseTo(3 * one, 6);
      expect(data.totals.p50ElapsedMs).toEqual(expect.any(Number));
      expect(data.totals.p95ElapsedMs).toBeGreaterThanOrEqual(data.totals.p50ElapsedMs);
      expect(data.byRoute).toEqual([expect.objectContaining({ route: 'default', requests: 4 })]);
      expect(data.byUpstream.map((u: { upstream: string }) => u.upstream)).toContain('lexical');
      expect(data.byKey.map((k: { keyId: string; requests: number }) => [k.keyId, k.requests])).toEqual([
        [big.id, 3],
        [small.id, 1],
      ]);
      const mine = await get(
        gw.url,
        `/admin/usage/summary?from=2026-11-23T00:00:00Z&keyId=${small.id}`,
        admin,
      );
      expect(mine.body.data.totals.requests).toBe(1);
      expect(mine.body.data.byKey).toEqual([
        expect.objectContaining({ keyId: small.id, name: expect.any(String) }),
      ]);

      const long = await get(
        gw.url,
        '/admin/usage/summary?from=2025-10-01T00:00:00Z&to=2026-11-23T00:00:00Z',
        admin,
      );
      expect(long.body).toMatchObject({ code: 40001, error: { issues: [{ path: ['to'] }] } });
      expect((await get(gw.url, '/admin/usage/summary', admin)).body).toMatchObject({
        code: 40001,
        error: { issues: [{ path: ['from'] }] },
      });
      expect(
        (await get(gw.url, '/admin/usage/summary?from=2026-11-23T00:00:00Z&to=2026-11-22T00:00:00Z', admin))
          .body.code,
      ).toBe(40001);
      expect(
        (await get(gw.url, '/admin/usage/summary?from=2026-11-23T00:00:00Z&keyId=key_none', admin)).body.code,
      ).toBe(40400);
      expect((await get(gw.url, '/admin/usage/summary?from=2026-11-23T00:00:00Z', {})).body.code).toBe(40100);
    } finally {
      await gw.close();
    }
  });

  it('shows the upstreams with their circuit and counts, and the routes', async () => {
    const gw = await startGateway({ adminToken: ADMIN_TOKEN });
    try {
      const { key } = await gw.createKey();
      await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key));
      await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key));
      const health = await get(gw.url, '/admin/upstreams', admin);
      expect(health.body.data).toEqual({
        upstreams: [{ name: 'lexical', kind: 'lexical', circuit: 'closed', calls: 2, failures: 0 }],
        routes: [
          { name: 'default', upstreams: ['lexical'], weights: null, escalateTo: null, cacheTtlSeconds: 0 },
        ],
      });
      expect((await get(gw.url, '/admin/upstreams', bearer(key))).body.code).toBe(40101);
    } finally {
      await gw.close();
    }
  });
});
