import { describe, expect, it } from 'vitest';
import { MICRO } from '../src/core/credits.ts';
import { bearer, post, sampleRequest, scriptedUpstream, startGateway, type TestGateway } from './harness.ts';

/** The credit invariants for one key (docs/http-api.md#credits), checked against the store. */
async function expectInvariants(gw: TestGateway, keyId: string, granted: number, creditsUsed: number[]) {
  const key = await gw.keys.get(keyId);
  if (!key.ok || key.value.credits === null) throw new Error('key missing');
  const balanceMicro = Math.round(key.value.credits * MICRO);
  const usedMicro = creditsUsed.reduce((sum, c) => sum + Math.round(c * MICRO), 0);
  expect(balanceMicro).toBeGreaterThanOrEqual(0);
  // credits granted − Σ debits = balance, exactly (in micro-credits); Σ creditsUsed = Σ debits.
  expect(Math.round(granted * MICRO) - usedMicro).toBe(balanceMicro);
  expect(await gw.store.ledgerBalance(keyId)).toBe(balanceMicro);
  return balanceMicro;
}

describe('credits under concurrency', () => {
  it('a key with 2 credits and 60 simultaneous requests: never below 0, 2 − balance = Σ creditsUsed', async () => {
    const gw = await startGateway();
    try {
      const { id, key } = await gw.createKey({ credits: 2 });
      const responses = await Promise.all(
        Array.from({ length: 60 }, (_, i) =>
          post(
            gw.url,
            '/v1/systemone',
            { ...sampleRequest(), state: `request ${i}: ${'refund '.repeat(40)}` },
            bearer(key),
          ),
        ),
      );
      const statuses = responses.map((r) => r.status);
      expect(statuses.every((s) => s === 200 || s === 402)).toBe(true);
      expect(statuses.filter((s) => s === 200).length).toBeGreaterThan(0);
      expect(statuses.filter((s) => s === 402).length).toBeGreaterThan(0);
      const used = responses.filter((r) => r.status === 200).map((r) => r.body.data.creditsUsed as number);
      const balance = await expectInvariants(gw, id, 2, used);
      // The refused requests were refused because the rest did not fit.
      const cost = Math.round((used[0] as number) * MICRO);
      expect(balance).toBeLessThan(cost);
      // Every request authenticated, so every one has a usage record; refused ones cost 0.
      const usage = await gw.keys.usage(id, 1000);
      if (!usage.ok) throw new Error('usage');
      expect(usage.value.totals.requests).toBe(60);
      expect(usage.value.recent.filter((r) => r.status === 402).every((r) => r.creditsUsed === 0)).toBe(true);
      expect(Math.round(usage.value.totals.creditsUsed * MICRO)).toBe(
        used.reduce((s, c) => s + Math.round(c * MICRO), 0),
      );
    } finally {
      await gw.close();
    }
  });

  it('holds across two gateway instances sharing one SQLite file', async () => {
    const a = await startGateway();
    const b = await startGateway({ dbPath: a.dbPath });
    try {
      const { id, key } = await a.createKey({ credits: 1.5 });
      const responses = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          post(
            i % 2 ? a.url : b.url,
            '/v1/systemone',
            { ...sampleRequest(), state: `r${i} ${'refund '.repeat(40)}` },
            bearer(key),
          ),
        ),
      );
      expect(responses.every((r) => r.status === 200 || r.status === 402)).toBe(true);
      const used = responses.filter((r) => r.status === 200).map((r) => r.body.data.creditsUsed as number);
      expect(used.length).toBeGreaterThan(0);
      await expectInvariants(a, id, 1.5, used);
    } finally {
      await b.close();
      await a.close();
    }
  });

  it('returns 402 before the upstream is called', async () => {
    const upstream = scriptedUpstream(async () => {
      throw new Error('must not be called');
    });
    const gw = await startGateway({ upstream });
    try {
      const { key } = await gw.createKey({ credits: 0.5 }); // the bound is 1000 tokens = 1 credit
      const response = await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key));
      expect(response.body.code).toBe(40200);
      expect(upstream.calls).toBe(0);
    } finally {
      await gw.close();
    }
  });

  it('charges an upstream reporting more usage than was reserved the reservation, and counts the excess', async () => {
    const upstream = scriptedUpstream(
      async ({ request }) => ({
        ok: true,
        answers: Object.fromEntries(
          Object.keys(request.questions).map((qid) => [qid, { type: 'noul', noul: 0.5 }]),
        ),
        usage: { input_tokens: 1_000_000, output_tokens: 0 },
      }),
      () => ({ input_tokens: 10, output_tokens: 0 }),
    );
    const gw = await startGateway({ upstream });
    try {
      const { id, key } = await gw.createKey({ credits: 2 });
      const response = await post(
        gw.url,
        '/v1/systemone',
        { ...sampleRequest(), questions: { q: { type: 'noul', instructions: 'x' } } },
        bearer(key),
      );
      expect(response.status).toBe(200);
      // The reservation was 10 tokens' worth: 0.01 credits, not the 1,000 reported (docs/http-api.md#credits).
      expect(response.body.data.creditsUsed).toBe(0.01);
      await expectInvariants(gw, id, 2, [0.01]);
      const metrics = { text: await (await fetch(`${gw.url}/metrics`)).text() };
      expect(metrics.text).toMatch(/dg_debit_capped_total\{route="default"\} 1\b/);
      expect(metrics.text).toMatch(/dg_debit_capped_micro_credits_total\{route="default"\} 999990000\b/);
      expect(gw.logs.some((line) => line.includes('more usage than was reserved'))).toBe(true);
    } finally {
      await gw.close();
    }
  });

  it('lets in-flight reservations block others, and releases them on failure', async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const upstream = scriptedUpstream(async () => {
      await gate;
      return { ok: false, failure: { type: 'upstream_error', code: 50200, status: 502, message: 'down' } };
    });
    const gw = await startGateway({ upstream });
    try {
      const { id, key } = await gw.createKey({ credits: 1.5 }); // each request reserves 1 credit
      const first = post(gw.url, '/v1/systemone', sampleRequest(), bearer(key));
      await new Promise((resolve) => setTimeout(resolve, 100));
      const second = await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key));
      expect(second.body.code).toBe(40200);
      release();
      expect((await first).status).toBe(502);
      const after = await gw.keys.get(id);
      expect(after.ok && after.value.credits).toBe(1.5);
      // With the reservation released, the next request may reserve again.
      expect(upstream.calls).toBe(1);
      await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key));
      expect(upstream.calls).toBe(2);
    } finally {
      await gw.close();
    }
  });

  it('releases a reservation left by a crashed process once it is older than the deadline', async () => {
    const gw = await startGateway({ upstreamTimeoutMs: 1000 });
    try {
      const { id, key } = await gw.createKey({ credits: 1 });
      const now = Date.now();
      // A fresh reservation of the whole balance blocks…
      const live = await gw.store.reserve(id, 'req_live', MICRO, now, 0);
      if (!live.ok) throw new Error('reserve failed');
      expect((await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key))).body.code).toBe(40200);
      await gw.store.release(live.reservationId, {
        requestId: 'req_live',
        keyId: id,
        creditsMicro: 0,
        route: null,
        upstream: null,
        cached: false,
        tokenId: null,
        subject: null,
        inputTokens: 0,
        outputTokens: 0,
        questions: 0,
        status: 500,
        elapsedMs: 0,
        at: now,
      });
      // …one left an hour ago by a crashed process does not.
      await gw.store.reserve(id, 'req_crashed', MICRO, now - 3_600_000, 0);
      expect((await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key))).status).toBe(200);
    } finally {
      await gw.close();
    }
  });

  it('unlimited keys are never refused for credits and report what the request cost', async () => {
    const gw = await startGateway();
    try {
      const { id, key } = await gw.createKey({ credits: null });
      const response = await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key));
      expect(response.status).toBe(200);
      expect(response.body.data.creditsUsed).toBeGreaterThan(0);
      const after = await gw.keys.get(id);
      expect(after.ok && after.value.credits).toBeNull();
    } finally {
      await gw.close();
    }
  });
});
