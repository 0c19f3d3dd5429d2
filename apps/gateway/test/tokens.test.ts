import type { AppRouter } from '@decision-gateway/api';
import { MODEL_ID } from '@decision-gateway/contract';
import { createLexicalUpstream } from '@decision-gateway/questions';
import { createTRPCClient, httpLink, type TRPCClientError } from '@trpc/client';
import { TypeSafeClient } from '@typesafe-ai/sdk';
import { afterAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, bearer, get, post, sampleRequest, startGateway, type TestGateway } from './harness.ts';

const PAGE = 'http://127.0.0.1:5173';
const OTHER = 'https://elsewhere.example.com';
const gateways: TestGateway[] = [];
afterAll(async () => {
  await Promise.all(gateways.map((gw) => gw.close()));
});

async function gateway(options: Parameters<typeof startGateway>[0] = {}) {
  const gw = await startGateway({ corsOrigins: [PAGE], adminToken: ADMIN_TOKEN, ...options });
  gateways.push(gw);
  return gw;
}

async function mint(gw: TestGateway, key: string, body: unknown = {}) {
  const response = await post(gw.url, '/v1/tokens', body, bearer(key));
  if (response.status !== 201) throw new Error(JSON.stringify(response.body));
  return response.body.data as { token: string; expiresAt: string; maxCredits: number | null };
}

describe('minting tokens (POST /v1/tokens)', () => {
  it('mints a dgt_ token with defaults, shown once, stored only as a hash', async () => {
    let now = Date.parse('2026-11-23T10:00:00Z');
    const gw = await gateway({ clock: () => now });
    const { key } = await gw.createKey();
    const response = await post(gw.url, '/v1/tokens', undefined as unknown as string, bearer(key));
    expect(response.status).toBe(201);
    expect(response.body.data).toEqual({
      token: expect.stringMatching(/^dgt_[A-Za-z0-9_-]{43}$/),
      expiresAt: '2026-11-23T10:10:00.000Z',
      maxCredits: null,
      origins: null,
      subject: null,
      route: null,
    });
    now += 1;
    const full = await mint(gw, key, {
      ttlSeconds: 60,
      maxCredits: 1.5,
      origins: [PAGE],
      subject: 'user-7',
      rateLimitPerMinute: 5,
      route: 'default',
    });
    expect(full).toMatchObject({ expiresAt: '2026-11-23T10:01:00.001Z', maxCredits: 1.5, origins: [PAGE] });
    expect(gw.logs.join('\n')).not.toContain(full.token);
  });

  it.each<[string, unknown, string]>([
    ['a ttl below 10', { ttlSeconds: 5 }, 'ttlSeconds: must be at least 10'],
    ['a ttl above 3600', { ttlSeconds: 7200 }, 'ttlSeconds: must be at most 3600'],
    ['a cap of 0', { maxCredits: 0 }, 'maxCredits: must be above 0'],
    ['a cap with 7 decimals', { maxCredits: 0.0000001 }, 'maxCredits: must have at most 6 decimal places'],
    [
      'an origin with a path',
      { origins: ['https://a.example.com/app'] },
      'origins.0: must be an exact origin',
    ],
    ['no origins', { origins: [] }, 'origins: give 1 to 16 origins'],
    ['a long subject', { subject: 'x'.repeat(129) }, 'subject: must be at most 128 characters'],
    ['an unknown field', { scope: 'all' }, 'scope'],
    ['an unknown route', { route: 'nope' }, 'route: no route named "nope"; the routes are: default'],
  ])('refuses %s with 40001 naming the field', async (_, body, message) => {
    const gw = await gateway();
    const { key } = await gw.createKey();
    const response = await post(gw.url, '/v1/tokens', body, bearer(key));
    expect(response.body).toMatchObject({ code: 40001, error: { type: 'invalid_request' } });
    expect(response.body.message).toContain(message);
  });

  it('needs an API key: 40100 without, 40300 for a token, 415 and 40000 after authentication', async () => {
    const gw = await gateway();
    const { key } = await gw.createKey();
    const { token } = await mint(gw, key);
    expect((await post(gw.url, '/v1/tokens', {})).body.code).toBe(40100);
    const byToken = await post(gw.url, '/v1/tokens', {}, bearer(token));
    expect([byToken.status, byToken.body.code]).toEqual([403, 40300]);
    expect(
      (await post(gw.url, '/v1/tokens', {}, { ...bearer(key), 'content-type': 'text/plain' })).body.code,
    ).toBe(41500);
    expect((await post(gw.url, '/v1/tokens', '{', bearer(key))).body.code).toBe(40000);
  });

  it('is also tRPC’s tokens.create and the admin API’s POST /admin/keys/{id}/tokens', async () => {
    const gw = await gateway();
    const { id, key } = await gw.createKey();
    const trpc = createTRPCClient<AppRouter>({
      links: [httpLink({ url: `${gw.url}/trpc`, headers: bearer(key) })],
    });
    const viaTrpc = await trpc.tokens.create.mutate({ subject: 'u1' });
    expect(viaTrpc.token).toMatch(/^dgt_/);
    const byToken = createTRPCClient<AppRouter>({
      links: [httpLink({ url: `${gw.url}/trpc`, headers: bearer(viaTrpc.token) })],
    });
    const refused = (await byToken.tokens.create
      .mutate({})
      .catch((e: unknown) => e)) as TRPCClientError<AppRouter>;
    expect(refused.data).toMatchObject({ code: 40300, httpStatus: 403 });

    const admin = await post(gw.url, `/admin/keys/${id}/tokens`, { origins: [PAGE] }, bearer(ADMIN_TOKEN));
    expect([admin.status, admin.body.data.origins]).toEqual([201, [PAGE]]);
    expect((await post(gw.url, '/admin/keys/key_none/tokens', {}, bearer(ADMIN_TOKEN))).body.code).toBe(
      40400,
    );
    // A token is no admin credential.
    expect((await get(gw.url, '/admin/keys', bearer(viaTrpc.token))).body.code).toBe(40101);
  });
});

describe('using a token', () => {
  it('evaluates and lists models on REST, tRPC and /native, its subject on every usage record', async () => {
    const gw = await gateway();
    const { id, key } = await gw.createKey({ credits: 10 });
    const { token } = await mint(gw, key, { subject: 'user-42' });
    const rest = await post(gw.url, '/v1/systemone', sampleRequest(), bearer(token));
    expect(rest.status).toBe(200);
    expect((await get(gw.url, '/v1/models', bearer(token))).status).toBe(200);
    const trpc = createTRPCClient<AppRouter>({
      links: [httpLink({ url: `${gw.url}/trpc`, headers: bearer(token) })],
    });
    expect((await trpc.evaluate.mutate(sampleRequest() as never)).creditsUsed).toBeGreaterThan(0);
    expect((await trpc.models.query()).models[0]?.name).toBe(MODEL_ID);
    const sdk = new TypeSafeClient({
      apiKey: token,
      baseURL: `${gw.url}/native`,
      logLevel: 'off',
      retry: { maxRetries: 0 },
    });
    const native = await sdk.systemOne({
      model: MODEL_ID,
      state: 's',
      questions: { q: { type: 'noul', instructions: 'yes?' } },
    });
    expect(native.answers.q?.type).toBe('noul');

    const usage = await get(gw.url, `/admin/keys/${id}/usage`, bearer(ADMIN_TOKEN));
    expect(usage.body.data.recent.map((r: { subject: string }) => r.subject)).toEqual([
      'user-42',
      'user-42',
      'user-42',
    ]);
    // Debited from its key.
    const spent = usage.body.data.totals.creditsUsed;
    expect((await gw.keys.get(id)).ok && (await gw.store.ledgerBalance(id))).toBe(
      Math.round((10 - spent) * 1e6),
    );
  });

  it('is refused once expired (saying so), and when its key is revoked', async () => {
    let now = Date.now();
    const gw = await gateway({ clock: () => now });
    const { id, key } = await gw.createKey();
    const { token } = await mint(gw, key, { ttlSeconds: 10 });
    expect((await post(gw.url, '/v1/systemone', sampleRequest(), bearer(token))).status).toBe(200);
    now += 10_000;
    const expired = await post(gw.url, '/v1/systemone', sampleRequest(), bearer(token));
    expect(expired.body).toMatchObject({ code: 40101, message: 'the token has expired' });

    const { token: second } = await mint(gw, key);
    await gw.keys.revoke(id);
    const revoked = await post(gw.url, '/v1/systemone', sampleRequest(), bearer(second));
    expect(revoked.body).toMatchObject({ code: 40101, message: "the token's API key has been revoked" });
    expect((await post(gw.url, '/v1/systemone', sampleRequest(), bearer('dgt_unknown'))).body.message).toBe(
      'the token is not known',
    );
  });

  it('works on another instance and is ended there by a revocation made on the first', async () => {
    const first = await gateway();
    const second = await gateway({ dbPath: first.dbPath });
    const { id, key } = await first.createKey();
    const { token } = await mint(first, key);
    expect((await post(second.url, '/v1/systemone', sampleRequest(), bearer(token))).status).toBe(200);
    await post(first.url, `/admin/keys/${id}/revoke`, {}, bearer(ADMIN_TOKEN));
    expect((await post(second.url, '/v1/systemone', sampleRequest(), bearer(token))).body.code).toBe(40101);
  });

  it('spends exactly ⌊cap / cost⌋ requests under 30 concurrent ones across two instances', async () => {
    const lexical = createLexicalUpstream();
    const first = await gateway({ upstream: lexical });
    const second = await gateway({ upstream: lexical, dbPath: first.dbPath });
    const { id, key } = await first.createKey({ credits: 100 });
    const cost = (await post(first.url, '/v1/systemone', sampleRequest(), bearer(key))).body.data
      .creditsUsed as number;
    const cap = Math.round(cost * 4.5 * 1e6) / 1e6;
    const { token } = await mint(first, key, { maxCredits: cap });
    const before = await first.store.ledgerBalance(id);
    const responses = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        post(i % 2 === 0 ? first.url : second.url, '/v1/systemone', sampleRequest(), bearer(token)),
      ),
    );
    const ok = responses.filter((r) => r.status === 200);
    expect(ok).toHaveLength(Math.floor(cap / cost));
    expect(responses.filter((r) => r.body.code === 40200)).toHaveLength(30 - ok.length);
    const charged = ok.reduce((sum, r) => sum + r.body.data.creditsUsed, 0);
    expect(charged).toBeLessThanOrEqual(cap);
    expect(before - (await first.store.ledgerBalance(id))).toBe(Math.round(charged * 1e6));
  });

  it('takes from its own rate-limit bucket on top of the key’s', async () => {
    const gw = await gateway();
    const { key } = await gw.createKey({ rateLimitPerMinute: 100 });
    const { token } = await mint(gw, key, { rateLimitPerMinute: 1 });
    expect((await post(gw.url, '/v1/systemone', sampleRequest(), bearer(token))).status).toBe(200);
    const limited = await post(gw.url, '/v1/systemone', sampleRequest(), bearer(token));
    expect(limited.body).toMatchObject({
      code: 42900,
      message: 'the token is over its rate limit of 1 requests per minute',
    });
    expect((await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key))).status).toBe(200);
  });
});

describe('origins and CORS', () => {
  const fromPage = (credential: string, origin = PAGE) => ({ ...bearer(credential), origin });

  it('answers the preflight on the four paths for a listed origin only', async () => {
    const gw = await gateway();
    for (const path of [
      '/v1/systemone',
      '/v1/models',
      '/trpc/evaluate',
      '/native/v1/systemone',
      '/native/v1/models',
    ]) {
      const response = await fetch(`${gw.url}${path}`, {
        method: 'OPTIONS',
        headers: {
          origin: PAGE,
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'authorization',
        },
      });
      expect(response.status).toBe(204);
      expect(response.headers.get('access-control-allow-origin')).toBe(PAGE);
      expect(response.headers.get('access-control-allow-methods')).toBe('GET, POST');
      expect(response.headers.get('access-control-allow-headers')).toContain(
        'authorization, content-type, cache-control, x-dg-route',
      );
      expect(response.headers.get('access-control-allow-headers')).toContain('trpc-accept');
      expect(response.headers.get('access-control-max-age')).toBe('600');
      expect(response.headers.get('vary')).toContain('Origin');
      const stranger = await fetch(`${gw.url}${path}`, { method: 'OPTIONS', headers: { origin: OTHER } });
      expect(stranger.headers.get('access-control-allow-origin')).toBeNull();
    }
  });

  it('puts CORS headers on token requests from a listed origin, errors included, never on API-key requests', async () => {
    const gw = await gateway();
    const { key } = await gw.createKey({ credits: 10 });
    const { token } = await mint(gw, key);
    const ok = await post(gw.url, '/v1/systemone', sampleRequest(), fromPage(token));
    expect(ok.status).toBe(200);
    expect(ok.headers.get('access-control-allow-origin')).toBe(PAGE);
    expect(ok.headers.get('access-control-expose-headers')).toBe(
      'x-request-id, x-credits-used, x-dg-route, x-dg-upstream, x-dg-cache, x-dg-calibration, x-dg-review, retry-after',
    );
    const invalid = await post(gw.url, '/v1/systemone', { ...sampleRequest(), state: null }, fromPage(token));
    expect([invalid.status, invalid.headers.get('access-control-allow-origin')]).toEqual([400, PAGE]);
    const fromServer = await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key));
    expect(fromServer.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('refuses an API key from a listed origin (40300, saying to mint a token), without CORS headers', async () => {
    const gw = await gateway();
    const { key } = await gw.createKey();
    const response = await post(gw.url, '/v1/systemone', sampleRequest(), fromPage(key));
    expect([response.status, response.body.code]).toEqual([403, 40300]);
    expect(response.body.message).toContain('mint a short-lived token');
    expect(response.headers.get('access-control-allow-origin')).toBeNull();
    // An origin the gateway does not serve is no browser of ours: the key works (a server may send one).
    expect((await post(gw.url, '/v1/systemone', sampleRequest(), fromPage(key, OTHER))).status).toBe(200);
  });

  it('refuses a token from an origin it does not allow; a server without Origin may use it', async () => {
    const gw = await gateway();
    const { key } = await gw.createKey({ credits: 10 });
    const { token } = await mint(gw, key, { origins: ['https://app.example.com'] });
    const refused = await post(gw.url, '/v1/systemone', sampleRequest(), fromPage(token));
    expect([refused.status, refused.body.code]).toEqual([403, 40300]);
    const unlisted = await mint(gw, key);
    expect(
      (await post(gw.url, '/v1/systemone', sampleRequest(), fromPage(unlisted.token, OTHER))).body.code,
    ).toBe(40300);
    expect((await post(gw.url, '/v1/systemone', sampleRequest(), bearer(token))).status).toBe(200);
    // 40300 comes after authentication (40101) and before the rate limit and the body's checks.
    expect((await post(gw.url, '/v1/systemone', '{', fromPage(token))).body.code).toBe(40300);
    expect((await post(gw.url, '/v1/systemone', sampleRequest(), fromPage('dgt_nope'))).body.code).toBe(
      40101,
    );
  });
});
