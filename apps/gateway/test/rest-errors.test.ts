import { failure } from '@decision-gateway/contract';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bearer,
  get,
  post,
  sampleRequest,
  scriptedUpstream,
  startGateway,
  type TestGateway,
} from './harness.ts';
import { rawRequest } from './raw-http.ts';

/** Every row of the error table (docs/http-api.md#errors), provoked over real HTTP, in the documented envelope. */
describe('REST error table', () => {
  let gw: TestGateway;
  let key: string;

  beforeAll(async () => {
    gw = await startGateway();
    key = (await gw.createKey()).key;
  });
  afterAll(() => gw.close());

  function expectEnvelope(
    response: { status: number; headers: Headers | Record<string, unknown>; body: any },
    code: number,
    status: number,
    type: string,
  ) {
    expect(response.status).toBe(status);
    expect(response.body).toMatchObject({ code, data: null, error: { type } });
    expect(typeof response.body.message).toBe('string');
    expect(response.body.requestId).toMatch(/^req_[0-9a-f]{32}$/);
    const header =
      response.headers instanceof Headers
        ? response.headers.get('x-request-id')
        : response.headers['x-request-id'];
    expect(header).toBe(response.body.requestId);
  }

  it('40000: empty body, invalid JSON, byte-order mark, invalid UTF-8', async () => {
    for (const body of [
      new Uint8Array(),
      '{"model":',
      new Uint8Array([0xef, 0xbb, 0xbf, ...new TextEncoder().encode(JSON.stringify(sampleRequest()))]),
      new Uint8Array([0x7b, 0x22, 0xc3, 0x28, 0x22, 0x3a, 0x31, 0x7d]),
    ]) {
      expectEnvelope(await post(gw.url, '/v1/systemone', body, bearer(key)), 40000, 400, 'invalid_json');
    }
  });

  it('40001: a broken rule, with the issue path and a message for people', async () => {
    const body = sampleRequest();
    (body.questions as Record<string, unknown>).team = { type: 'choice', criteria: { only: null } };
    const response = await post(gw.url, '/v1/systemone', body, bearer(key));
    expectEnvelope(response, 40001, 400, 'invalid_request');
    expect(response.body.message).toBe('questions.team.criteria: a choice needs at least 2 options');
    expect(response.body.error.issues).toEqual([
      { path: ['questions', 'team', 'criteria'], message: 'a choice needs at least 2 options' },
    ]);
  });

  it('40001: nesting deeper than 64 levels', async () => {
    let state: unknown = [];
    for (let i = 0; i < 100; i++) state = [state];
    const response = await post(gw.url, '/v1/systemone', { ...sampleRequest(), state }, bearer(key));
    expectEnvelope(response, 40001, 400, 'invalid_request');
  });

  it('40002: zero or nine questions', async () => {
    expectEnvelope(
      await post(gw.url, '/v1/systemone', { ...sampleRequest(), questions: {} }, bearer(key)),
      40002,
      400,
      'invalid_question_count',
    );
    const nine = Object.fromEntries(
      Array.from({ length: 9 }, (_, i) => [`q${i}`, { type: 'noul', instructions: 'x' }]),
    );
    expectEnvelope(
      await post(gw.url, '/v1/systemone', { ...sampleRequest(), questions: nine }, bearer(key)),
      40002,
      400,
      'invalid_question_count',
    );
  });

  it('40003: another model', async () => {
    const response = await post(
      gw.url,
      '/v1/systemone',
      { ...sampleRequest(), model: 'vendor/model-2.0' },
      bearer(key),
    );
    expectEnvelope(response, 40003, 400, 'unknown_model');
  });

  it('40100: no Authorization, another scheme, an empty token', async () => {
    for (const headers of <Record<string, string>[]>[
      {},
      { authorization: `Basic ${key}` },
      { authorization: 'Bearer ' },
      { authorization: 'Bearer' },
    ]) {
      expectEnvelope(
        await post(gw.url, '/v1/systemone', sampleRequest(), headers),
        40100,
        401,
        'missing_api_key',
      );
    }
  });

  it('40101: an unknown key, without echoing it', async () => {
    const response = await post(gw.url, '/v1/systemone', sampleRequest(), bearer('dg_not-a-real-key'));
    expectEnvelope(response, 40101, 401, 'invalid_api_key');
    expect(response.text).not.toContain('dg_not-a-real-key');
    expect(response.body.message).toBe('the API key is not known');
  });

  it('40101: a revoked key and an expired key, each saying which', async () => {
    const revoked = await gw.createKey();
    await gw.keys.revoke(revoked.id);
    const r = await post(gw.url, '/v1/systemone', sampleRequest(), bearer(revoked.key));
    expectEnvelope(r, 40101, 401, 'invalid_api_key');
    expect(r.body.message).toBe('the API key has been revoked');

    // Expiry on the gateway's own clock, moved on by the test: no race with the machine's speed.
    let now = Date.now();
    const timed = await startGateway({ clock: () => now });
    try {
      const expiring = await timed.createKey({ expiresAt: new Date(now + 60_000).toISOString() });
      expect((await post(timed.url, '/v1/systemone', sampleRequest(), bearer(expiring.key))).status).toBe(
        200,
      );
      now += 60_000;
      const e = await post(timed.url, '/v1/systemone', sampleRequest(), bearer(expiring.key));
      expectEnvelope(e, 40101, 401, 'invalid_api_key');
      expect(e.body.message).toBe('the API key has expired');
    } finally {
      await timed.close();
    }
  });

  it('40200: a key that cannot cover the request', async () => {
    const poor = await gw.createKey({ credits: 0.001 });
    const response = await post(gw.url, '/v1/systemone', sampleRequest(), bearer(poor.key));
    expectEnvelope(response, 40200, 402, 'insufficient_credits');
    expect((await gw.keys.get(poor.id)).ok && (await gw.keys.get(poor.id))).toMatchObject({
      value: { credits: 0.001 },
    });
  });

  it('40400: an unknown path', async () => {
    expectEnvelope(await get(gw.url, '/v2/systemone'), 40400, 404, 'not_found');
    expectEnvelope(await post(gw.url, '/admin/keys', {}), 40400, 404, 'not_found');
  });

  it('40500: a known path with the wrong method, with Allow', async () => {
    const response = await get(gw.url, '/v1/systemone');
    expectEnvelope(response, 40500, 405, 'method_not_allowed');
    expect(response.headers.get('allow')).toBe('POST');
    const models = await post(gw.url, '/v1/models', {});
    expect(models.status).toBe(405);
    expect(models.headers.get('allow')).toBe('GET, HEAD');
  });

  it('41300: over 32768 bytes by Content-Length, before authentication', async () => {
    const big = JSON.stringify({ ...sampleRequest(), state: 'x'.repeat(33_000) });
    const response = await post(gw.url, '/v1/systemone', big);
    expectEnvelope(response, 41300, 413, 'payload_too_large');
  });

  it('41300: over 32768 bytes chunked, with no Content-Length', async () => {
    const chunk = 'x'.repeat(8192);
    const response = await rawRequest(gw.url, {
      path: '/v1/systemone',
      headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked', ...bearer(key) },
      chunks: ['{"model":"vendor/model-1.13","state":"', chunk, chunk, chunk, chunk, chunk, '"}'],
    });
    expectEnvelope(response, 41300, 413, 'payload_too_large');
  });

  it('accepts exactly 32768 bytes', async () => {
    const base = JSON.stringify({ ...sampleRequest(), state: '' });
    const exact = JSON.stringify({ ...sampleRequest(), state: 'x'.repeat(32_768 - Buffer.byteLength(base)) });
    expect(Buffer.byteLength(exact)).toBe(32_768);
    expect((await post(gw.url, '/v1/systemone', exact, bearer(key))).status).toBe(200);
    const over = JSON.stringify({ ...sampleRequest(), state: 'x'.repeat(32_769 - Buffer.byteLength(base)) });
    expect((await post(gw.url, '/v1/systemone', over, bearer(key))).status).toBe(413);
  });

  it('41500: no Content-Type or another media type', async () => {
    const bytes = new TextEncoder().encode(JSON.stringify(sampleRequest()));
    expectEnvelope(
      await post(gw.url, '/v1/systemone', bytes, { ...bearer(key), 'content-type': 'text/plain' }),
      41500,
      415,
      'unsupported_media_type',
    );
    const none = await rawRequest(gw.url, { path: '/v1/systemone', headers: bearer(key), chunks: [bytes] });
    expectEnvelope(none, 41500, 415, 'unsupported_media_type');
    expectEnvelope(
      await post(gw.url, '/v1/systemone', bytes, { ...bearer(key), 'content-type': 'application/jsonx' }),
      41500,
      415,
      'unsupported_media_type',
    );
  });

  it('matches the media type and the Bearer scheme case-insensitively, with parameters', async () => {
    const response = await post(gw.url, '/v1/systemone', sampleRequest(), {
      authorization: `bEaReR ${key}`,
      'content-type': 'Application/JSON; charset=UTF-8',
    });
    expect(response.status).toBe(200);
  });
});

describe('REST errors from the rate limiter and the upstream', () => {
  it('42900: over the key rate limit, with Retry-After and retryAfterMs', async () => {
    const gw = await startGateway({ rateLimitPerMinute: 600 });
    try {
      const { key } = await gw.createKey({ rateLimitPerMinute: 2 });
      expect((await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key))).status).toBe(200);
      expect((await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key))).status).toBe(200);
      const limited = await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key));
      expect(limited.status).toBe(429);
      expect(limited.body).toMatchObject({ code: 42900, error: { type: 'rate_limited' } });
      expect(limited.body.error.retryAfterMs).toBeGreaterThan(20_000);
      expect(limited.body.error.retryAfterMs).toBeLessThanOrEqual(30_000);
      expect(Number(limited.headers.get('retry-after'))).toBe(
        Math.ceil(limited.body.error.retryAfterMs / 1000),
      );
    } finally {
      await gw.close();
    }
  });

  it('uses RATE_LIMIT_PER_MINUTE when the key has no limit of its own, and 0 turns it off', async () => {
    const limited = await startGateway({ rateLimitPerMinute: 1 });
    const open = await startGateway({ rateLimitPerMinute: 0 });
    try {
      const a = await limited.createKey();
      expect((await post(limited.url, '/v1/systemone', sampleRequest(), bearer(a.key))).status).toBe(200);
      expect((await post(limited.url, '/v1/systemone', sampleRequest(), bearer(a.key))).status).toBe(429);
      const b = await open.createKey();
      for (let i = 0; i < 5; i++) {
        expect((await post(open.url, '/v1/systemone', sampleRequest(), bearer(b.key))).status).toBe(200);
      }
    } finally {
      await limited.close();
      await open.close();
    }
  });

  it.each([
    ['50000', () => Promise.reject(new Error('boom: secret internals')), 500, 50000, 'internal_error'],
    [
      '50200',
      async () => ({ ok: true as const, answers: {}, usage: { input_tokens: 1, output_tokens: 0 } }),
      502,
      50200,
      'upstream_error',
    ],
    [
      '50300',
      async () => ({
        ok: false as const,
        failure: failure('unavailable', 'the upstream is overloaded', { retryAfterMs: 2000 }),
      }),
      503,
      50300,
      'unavailable',
    ],
    [
      '50400',
      async () => ({
        ok: false as const,
        failure: failure('upstream_timeout', 'the upstream did not answer in time'),
      }),
      504,
      50400,
      'upstream_timeout',
    ],
  ])('%s from the upstream', async (_, answer, status, code, type) => {
    const upstream = scriptedUpstream(answer);
    const gw = await startGateway({ upstream });
    try {
      const { id, key } = await gw.createKey({ credits: 10 });
      const response = await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key));
      expect(response.status).toBe(status);
      expect(response.body).toMatchObject({ code, data: null, error: { type } });
      expect(response.text).not.toContain('secret internals');
      expect(response.text).not.toContain('at ');
      if (code === 50300) {
        expect(response.headers.get('retry-after')).toBe('2');
        expect(response.body.error.retryAfterMs).toBe(2000);
      }
      // A failed request is never charged, and its reservation is released.
      const after = await gw.keys.get(id);
      expect(after.ok && after.value.credits).toBe(10);
      const usage = await gw.keys.usage(id, 10);
      expect(usage.ok && usage.value.recent[0]).toMatchObject({ status, creditsUsed: 0 });
      expect(upstream.calls).toBe(1);
    } finally {
      await gw.close();
    }
  });

  it('50200 names what was wrong with the answer', async () => {
    const upstream = scriptedUpstream(async ({ request }) => ({
      ok: true,
      answers: Object.fromEntries(
        Object.keys(request.questions).map((id) => [id, { type: 'noul', noul: 0.5 }]),
      ),
      usage: { input_tokens: 1, output_tokens: 0 },
    }));
    const gw = await startGateway({ upstream });
    try {
      const { key } = await gw.createKey();
      const response = await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key));
      expect(response.body.message).toBe(
        'the upstream returned an invalid answer: answers.team.type: "noul" answers a choice question',
      );
    } finally {
      await gw.close();
    }
  });
});

describe('precedence: 404/405 → 413 → 40100 → 40101 → 429 → 415 → 40000 → 40002 → 40003 → 40001 → 402', () => {
  let gw: TestGateway;
  let poorKey: string;
  let limitedKey: string;
  const big = 'x'.repeat(33_000);

  beforeAll(async () => {
    gw = await startGateway();
    poorKey = (await gw.createKey({ credits: 0 })).key;
    limitedKey = (await gw.createKey({ rateLimitPerMinute: 1 })).key;
    await post(gw.url, '/v1/systemone', sampleRequest(), bearer(limitedKey));
  });
  afterAll(() => gw.close());

  const code = async (
    path: string,
    method: string,
    body: string | Uint8Array,
    headers: Record<string, string>,
  ) => {
    const response = await fetch(`${gw.url}${path}`, {
      method,
      body: method === 'GET' ? undefined : body,
      headers,
    });
    return ((await response.json()) as { code: number }).code;
  };
  const json = { 'content-type': 'application/json' };

  it('405 before 413', async () => {
    expect(await code('/v1/systemone', 'PUT', big, json)).toBe(40500);
  });
  it('413 before 40100', async () => {
    expect(await code('/v1/systemone', 'POST', big, json)).toBe(41300);
  });
  it('40100 before 40101, 415 and 40000', async () => {
    expect(await code('/v1/systemone', 'POST', '{', { 'content-type': 'text/plain' })).toBe(40100);
  });
  it('40101 before 429, 415 and 40000', async () => {
    expect(
      await code('/v1/systemone', 'POST', '{', { 'content-type': 'text/plain', ...bearer('dg_unknown') }),
    ).toBe(40101);
  });
  it('429 before 415', async () => {
    expect(
      await code('/v1/systemone', 'POST', '{', { 'content-type': 'text/plain', ...bearer(limitedKey) }),
    ).toBe(42900);
  });
  it('415 before 40000', async () => {
    expect(
      await code('/v1/systemone', 'POST', '{', { 'content-type': 'text/plain', ...bearer(poorKey) }),
    ).toBe(41500);
  });
  it('40000 before 40002', async () => {
    expect(await code('/v1/systemone', 'POST', '{"questions":{}', { ...json, ...bearer(poorKey) })).toBe(
      40000,
    );
  });
  it('40002 before 40003 before 40001 before 402', async () => {
    const send = (body: unknown) =>
      code('/v1/systemone', 'POST', JSON.stringify(body), { ...json, ...bearer(poorKey) });
    expect(await send({ model: 'm', state: null, questions: {} })).toBe(40002);
    expect(await send({ ...sampleRequest(), model: 'm', state: null })).toBe(40003);
    expect(await send({ ...sampleRequest(), state: null })).toBe(40001);
    expect(await send(sampleRequest())).toBe(40200);
  });
});
