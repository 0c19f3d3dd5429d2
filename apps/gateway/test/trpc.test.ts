import type { AppRouter } from '@decision-gateway/api';
import { MODEL_ID } from '@decision-gateway/contract';
import { createTRPCClient, httpLink, TRPCClientError } from '@trpc/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, post, sampleRequest, startGateway, type TestGateway } from './harness.ts';

function client(url: string, key?: string) {
  return createTRPCClient<AppRouter>({
    links: [httpLink({ url: `${url}/trpc`, headers: () => (key === undefined ? {} : bearer(key)) })],
  });
}

async function rejection(promise: Promise<unknown>): Promise<TRPCClientError<AppRouter>> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof TRPCClientError) return error as TRPCClientError<AppRouter>;
    throw error;
  }
  throw new Error('expected a rejection');
}

describe('tRPC door: same semantics as REST', () => {
  let gw: TestGateway;
  let key: { id: string; key: string };

  beforeAll(async () => {
    gw = await startGateway();
    key = await gw.createKey({ credits: 10 });
  });
  afterAll(() => gw.close());

  it('evaluates with the same answers, usage and credits as REST', async () => {
    const request = sampleRequest() as Parameters<ReturnType<typeof client>['evaluate']['mutate']>[0];
    const viaTrpc = await client(gw.url, key.key).evaluate.mutate(request);
    const viaRest = await post(gw.url, '/v1/systemone', request, bearer(key.key));
    expect(viaTrpc.result.answers).toEqual(viaRest.body.data.result.answers);
    expect(viaTrpc.result.usage).toEqual(viaRest.body.data.result.usage);
    expect(viaTrpc.creditsUsed).toBe(viaRest.body.data.creditsUsed);
    expect(viaTrpc.result.model).toBe(MODEL_ID);
    const usage = await gw.keys.usage(key.id, 10);
    expect(usage.ok && usage.value.totals.requests).toBe(2);
  });

  it('lists models with a key, and refuses without one', async () => {
    expect(await client(gw.url, key.key).models.query()).toEqual({
      models: [expect.objectContaining({ name: MODEL_ID })],
    });
    const error = await rejection(client(gw.url).models.query());
    expect(error.data).toMatchObject({ code: 40100, type: 'missing_api_key', httpStatus: 401 });
  });

  it.each<[string, string | undefined, unknown, number, string, number]>([
    ['40100', undefined, sampleRequest(), 40100, 'missing_api_key', 401],
    ['40101', 'dg_unknown', sampleRequest(), 40101, 'invalid_api_key', 401],
    ['40002', 'KEY', { ...sampleRequest(), questions: {} }, 40002, 'invalid_question_count', 400],
    ['40003', 'KEY', { ...sampleRequest(), model: 'x/y' }, 40003, 'unknown_model', 400],
    ['40001', 'KEY', { ...sampleRequest(), state: null }, 40001, 'invalid_request', 400],
  ])('carries %s in error.data with the request id', async (_, which, input, code, type, status) => {
    const error = await rejection(
      client(gw.url, which === 'KEY' ? key.key : which).evaluate.mutate(input as never),
    );
    expect(error.data).toMatchObject({
      code,
      type,
      httpStatus: status,
      requestId: expect.stringMatching(/^req_/),
    });
    expect(error.shape?.data.code).toBe(code);
    if (code === 40001) {
      expect(error.data?.issues).toEqual([
        { path: ['state'], message: 'must be a string, an object or an array' },
      ]);
      expect(error.message).toBe('state: must be a string, an object or an array');
    }
  });

  it('answers 402 with the tRPC status and the gateway code', async () => {
    const poor = await gw.createKey({ credits: 0 });
    const response = await fetch(`${gw.url}/trpc/evaluate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...bearer(poor.key) },
      body: JSON.stringify(sampleRequest()),
    });
    expect(response.status).toBe(402);
    expect(response.headers.get('x-request-id')).toMatch(/^req_/);
    const body: any = await response.json();
    expect(body.error.data).toMatchObject({ code: 40200, type: 'insufficient_credits' });
    expect(body.error.data.requestId).toBe(response.headers.get('x-request-id'));
  });

  it('keeps the documented order of errors on this door: authentication before the media type and the JSON', async () => {
    const send = (headers: Record<string, string>, body: string) =>
      fetch(`${gw.url}/trpc/evaluate`, { method: 'POST', headers, body }).then(async (r) => ({
        status: r.status,
        data: ((await r.json()) as any).error?.data,
      }));
    // No key: 40100 whatever the body and its media type.
    expect(await send({ 'content-type': 'foo' }, '{"state":')).toMatchObject({
      status: 401,
      data: { code: 40100 },
    });
    expect(await send({ 'content-type': 'application/json' }, '{"state":')).toMatchObject({
      status: 401,
      data: { code: 40100 },
    });
    // A key: then the media type (415, also for one that does not parse), then the JSON (40000).
    const withKey = (contentType: string) => ({ 'content-type': contentType, ...bearer(key.key) });
    const body = JSON.stringify(sampleRequest());
    expect(await send(withKey('text/plain'), body)).toMatchObject({ status: 415, data: { code: 41500 } });
    expect(await send(withKey(';;;'), body)).toMatchObject({ status: 415, data: { code: 41500 } });
    expect(await send(withKey('application/json; charset=utf-8'), '\uFEFF{}')).toMatchObject({
      status: 400,
      data: { code: 40000 },
    });
  });

  it('maps tRPC-level failures: bad JSON → 40000, unknown procedure → 40400, too large → 41300', async () => {
    const badJson = await fetch(`${gw.url}/trpc/evaluate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...bearer(key.key) },
      body: '{"state":',
    });
    expect(badJson.status).toBe(400);
    const badBody: any = await badJson.json();
    expect(badBody.error.data).toMatchObject({ code: 40000, type: 'invalid_json' });
    expect(badBody.error.data.requestId).toBe(badJson.headers.get('x-request-id'));

    const unknown = await fetch(`${gw.url}/trpc/nothing`, { headers: bearer(key.key) });
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as any).error.data).toMatchObject({ code: 40400 });

    const tooLarge = await fetch(`${gw.url}/trpc/evaluate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...bearer(key.key) },
      body: JSON.stringify({ ...sampleRequest(), state: 'x'.repeat(40_000) }),
    });
    expect(tooLarge.status).toBe(413);
    expect(((await tooLarge.json()) as any).error.data).toMatchObject({
      code: 41300,
      type: 'payload_too_large',
    });
  });

  it('sends Retry-After and retryAfterMs on 429', async () => {
    const limited = await gw.createKey({ rateLimitPerMinute: 1 });
    const trpc = client(gw.url, limited.key);
    await trpc.evaluate.mutate(sampleRequest() as never);
    const response = await fetch(`${gw.url}/trpc/evaluate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...bearer(limited.key) },
      body: JSON.stringify(sampleRequest()),
    });
    expect(response.status).toBe(429);
    const body: any = await response.json();
    expect(body.error.data).toMatchObject({ code: 42900, type: 'rate_limited' });
    expect(Number(response.headers.get('retry-after'))).toBe(Math.ceil(body.error.data.retryAfterMs / 1000));
  });

  it('sends no CORS headers', async () => {
    const response = await fetch(`${gw.url}/trpc/models`, {
      headers: { origin: 'https://example.com', ...bearer(key.key) },
    });
    await response.text();
    for (const name of response.headers.keys()) expect(name.startsWith('access-control-')).toBe(false);
  });
});
