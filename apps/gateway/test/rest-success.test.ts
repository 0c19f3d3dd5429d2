import { rmSync } from 'node:fs';
import { MODEL_ID } from '@decision-gateway/contract';
import { lexicalUsage } from '@decision-gateway/questions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, bearer, get, post, sampleRequest, startGateway, type TestGateway } from './harness.ts';

describe('POST /v1/systemone success', () => {
  let gw: TestGateway;
  let key: { id: string; key: string };

  beforeAll(async () => {
    gw = await startGateway();
    key = await gw.createKey({ credits: 100 });
  });
  afterAll(() => gw.close());

  it('answers every question in the success envelope, billed by input tokens', async () => {
    const body = sampleRequest();
    const response = await post(gw.url, '/v1/systemone', body, bearer(key.key));
    expect(response.status).toBe(200);
    const { code, message, data, requestId } = response.body;
    expect({ code, message }).toEqual({ code: 0, message: 'ok' });
    expect(requestId).toBe(response.headers.get('x-request-id'));
    expect(data.result.model).toBe(MODEL_ID);
    expect(Object.keys(data.result.answers)).toEqual(['team', 'urgency', 'refund']);
    expect(data.result.answers.team).toMatchObject({ type: 'choice', choice: 'billing' });
    expect(data.result.answers.urgency).toMatchObject({
      type: 'score',
      legend: { '0': 'not urgent', '1': 'soon', '2': 'now' },
    });
    expect(data.result.answers.refund.type).toBe('noul');
    expect(data.result.answers.refund.noul).toBeGreaterThan(0.5);
    expect(data.result.answers.refund).not.toHaveProperty('confidence');

    const usage = lexicalUsage(body as never);
    expect(data.result.usage).toEqual(usage);
    expect(Number.isInteger(data.result.elapsedMs)).toBe(true);
    expect(data.result.elapsedMs).toBeGreaterThanOrEqual(0);
    expect(data.creditsUsed).toBe(usage.input_tokens / 1000);
  });

  it('debits exactly creditsUsed and records the usage', async () => {
    const fresh = await gw.createKey({ credits: 5 });
    const response = await post(gw.url, '/v1/systemone', sampleRequest(), bearer(fresh.key));
    const after = await gw.keys.get(fresh.id);
    expect(after.ok && after.value.credits).toBeCloseTo(5 - response.body.data.creditsUsed, 9);
    const usage = await gw.keys.usage(fresh.id, 5);
    if (!usage.ok) throw new Error('usage failed');
    expect(usage.value.totals).toMatchObject({ requests: 1, creditsUsed: response.body.data.creditsUsed });
    expect(usage.value.recent[0]).toMatchObject({
      requestId: response.body.requestId,
      status: 200,
      questions: 3,
      input_tokens: response.body.data.result.usage.input_tokens,
    });
    expect(after.ok && after.value.lastUsedAt).not.toBeNull();
  });

  it('gives every request its own id', async () => {
    const a = await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key.key));
    const b = await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key.key));
    expect(a.body.requestId).not.toBe(b.body.requestId);
  });

  it('round-trips question IDs such as __proto__, constructor and toString end to end', async () => {
    const raw = `{"model":"${MODEL_ID}","state":"refund please","questions":{
      "__proto__":{"type":"noul","instructions":"Is this a refund request?"},
      "constructor":{"type":"choice","criteria":{"__proto__":"refunds","toString":"crashes"}},
      "toString":{"type":"score","criteria":["low","high"]}}}`;
    const response = await post(gw.url, '/v1/systemone', raw, bearer(key.key));
    expect(response.status).toBe(200);
    const answers = JSON.parse(response.text).data.result.answers;
    expect(Object.keys(answers)).toEqual(['__proto__', 'constructor', 'toString']);
    expect(Object.getOwnPropertyDescriptor(answers, '__proto__')?.value).toMatchObject({ type: 'noul' });
    expect(answers.constructor).toMatchObject({ type: 'choice', choice: '__proto__' });
    expect(Object.keys(answers.constructor.probabilities)).toEqual(['__proto__', 'toString']);
    expect(answers.toString).toMatchObject({ type: 'score' });
  });

  it('sends no CORS headers and keeps the connection alive', async () => {
    const response = await fetch(`${gw.url}/v1/systemone`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: 'https://example.com', ...bearer(key.key) },
      body: JSON.stringify(sampleRequest()),
    });
    await response.text();
    for (const name of response.headers.keys()) expect(name.startsWith('access-control-')).toBe(false);
    const preflight = await fetch(`${gw.url}/v1/systemone`, {
      method: 'OPTIONS',
      headers: { origin: 'https://example.com' },
    });
    expect(preflight.status).toBe(405);
    expect(preflight.headers.get('access-control-allow-origin')).toBeNull();
    expect(response.headers.get('connection')).not.toBe('close');
  });

  it('lists the model with a key', async () => {
    const response = await get(gw.url, '/v1/models', bearer(key.key));
    expect(response.status).toBe(200);
    expect(response.body.data.models).toEqual([
      expect.objectContaining({ name: MODEL_ID, release_date: expect.any(String) }),
    ]);
    expect((await get(gw.url, '/v1/models')).body.code).toBe(40100);
    expect((await get(gw.url, '/v1/models', bearer('dg_nope'))).body.code).toBe(40101);
  });

  it('answers /healthz and /readyz', async () => {
    expect((await get(gw.url, '/healthz')).body).toMatchObject({ code: 0, data: { status: 'ok' } });
    expect((await get(gw.url, '/readyz')).body).toMatchObject({ code: 0, data: { status: 'ready' } });
  });

  it('is not ready once its SQLite files are deleted under it (logged once), and writes nothing more', async () => {
    const own = await startGateway({ adminToken: ADMIN_TOKEN });
    try {
      const { id, key } = await own.createKey({ credits: 10 });
      expect((await post(own.url, '/v1/systemone', sampleRequest(), bearer(key))).status).toBe(200);
      for (const suffix of ['', '-wal', '-shm']) rmSync(`${own.dbPath}${suffix}`, { force: true });
      for (let i = 0; i < 3; i++) {
        const ready = await get(own.url, '/readyz');
        expect(ready.status).toBe(503);
        expect(ready.body).toMatchObject({ code: 50300, error: { type: 'unavailable' } });
        expect(ready.body.message).toContain('was removed');
      }
      expect(own.logs.filter((line) => line.includes('"not ready"'))).toHaveLength(1);
      // An evaluation can no longer be recorded, so it is not served: storage trouble, never a 500.
      const refused = await post(own.url, '/v1/systemone', sampleRequest(), bearer(key));
      expect(refused.status).toBe(503);
      expect(refused.body).toMatchObject({ code: 50300, error: { type: 'unavailable' } });
      expect(refused.headers.get('retry-after')).toBe('1');
      // Every door says so in its own format.
      const native = await post(own.url, '/native/v1/systemone', sampleRequest(), bearer(key));
      expect([native.status, native.body.detail.error_type, native.headers.get('retry-after-ms')]).toEqual([
        503,
        'unavailable',
        '1000',
      ]);
      const trpc = await post(own.url, '/trpc/evaluate', sampleRequest(), bearer(key));
      expect([trpc.status, trpc.body.error.data.code]).toEqual([503, 50300]);
      const minted = await post(own.url, '/trpc/tokens.create', {}, bearer(key));
      expect([minted.status, minted.body.error.data.code]).toEqual([503, 50300]);
      const admin = await post(own.url, `/admin/keys/${id}/credits`, { amount: 1 }, bearer(ADMIN_TOKEN));
      expect([admin.status, admin.body.code, admin.headers.get('retry-after')]).toEqual([503, 50300, '1']);
      expect(own.logs.some((line) => line.includes('"level":50') && line.includes('unhandled'))).toBe(false);
    } finally {
      await own.close();
    }
  });

  it('writes one log line per request with its id, never the key', async () => {
    const response = await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key.key));
    const lines = gw.logs.filter((line) => line.includes(response.body.requestId));
    expect(lines).toHaveLength(1);
    const line = JSON.parse(lines[0] as string);
    expect(line).toMatchObject({
      msg: 'request',
      requestId: response.body.requestId,
      status: 200,
      code: 0,
      questions: 3,
      keyPrefix: key.key.slice(0, 11),
      creditsUsed: response.body.data.creditsUsed,
    });
    expect(gw.logs.join('\n')).not.toContain(key.key);
  });
});
