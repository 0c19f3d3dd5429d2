import type { AppRouter } from '@decision-gateway/api';
import {
  createTRPCClient,
  httpBatchLink,
  httpBatchStreamLink,
  httpLink,
  type TRPCClientError,
  type TRPCLink,
} from '@trpc/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, sampleRequest, startGateway, type TestGateway } from './harness.ts';

type Input = Parameters<ReturnType<typeof createTRPCClient<AppRouter>>['evaluate']['mutate']>[0];
const LINKS = {
  httpLink: (url: string, headers: () => Promise<Record<string, string>>) => httpLink({ url, headers }),
  httpBatchLink: (url: string, headers: () => Promise<Record<string, string>>) =>
    httpBatchLink({ url, headers }),
  httpBatchStreamLink: (url: string, headers: () => Promise<Record<string, string>>) =>
    httpBatchStreamLink({ url, headers }),
} satisfies Record<
  string,
  (url: string, headers: () => Promise<Record<string, string>>) => TRPCLink<AppRouter>
>;

/** A client as a create-t3-turbo frontend sets one up: a standard link and an async headers(). */
function clientWith(link: keyof typeof LINKS, base: string, key: string | undefined) {
  return createTRPCClient<AppRouter>({
    links: [LINKS[link](`${base}/trpc`, async () => (key === undefined ? {} : bearer(key)))],
  });
}

async function settle<T>(promise: Promise<T>) {
  try {
    return { ok: true as const, value: await promise };
  } catch (error) {
    return { ok: false as const, error: error as TRPCClientError<AppRouter> };
  }
}

describe.each(Object.keys(LINKS) as (keyof typeof LINKS)[])('tRPC door with @trpc/client %s', (link) => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startGateway();
  });
  afterAll(() => gw.close());

  it('evaluates and lists models', async () => {
    const { key } = await gw.createKey({ credits: 10 });
    const client = clientWith(link, gw.url, key);
    const [evaluated, models] = await Promise.all([
      client.evaluate.mutate(sampleRequest() as Input),
      client.models.query(),
    ]);
    expect(Object.keys(evaluated.result.answers).sort()).toEqual(['refund', 'team', 'urgency']);
    expect(evaluated.creditsUsed).toBeGreaterThan(0);
    expect(models.models[0]?.name).toBe('vendor/model-1.13');
  });

  it('runs each operation of a batch as its own evaluation: own request id, usage record and charge', async () => {
    const { id, key } = await gw.createKey({ credits: 10 });
    const client = clientWith(link, gw.url, key);
    const good = sampleRequest() as Input;
    const bad = { ...sampleRequest(), questions: {} } as Input;
    const wrongModel = { ...sampleRequest(), model: 'x/y' } as unknown as Input;
    // Sent in one tick, so the batch links put them in one HTTP request.
    const results = await Promise.all([
      settle(client.evaluate.mutate(good)),
      settle(client.evaluate.mutate(bad)),
      settle(client.evaluate.mutate(good)),
      settle(client.evaluate.mutate(wrongModel)),
    ]);
    expect(results.map((r) => r.ok)).toEqual([true, false, true, false]);
    const failures = results.flatMap((r) => (r.ok ? [] : [r.error.data]));
    expect(failures.map((d) => d?.code)).toEqual([40002, 40003]);

    const usage = await gw.keys.usage(id, 10);
    if (!usage.ok) throw new Error('usage');
    const records = usage.value.recent;
    expect(records).toHaveLength(4);
    const ids = new Set(records.map((r) => r.requestId));
    expect(ids.size).toBe(4);
    // The batch links sent one HTTP request: its operations are numbered after its id.
    if (link !== 'httpLink') expect([...ids].every((id) => /^req_\w+_[0-3]$/.test(id))).toBe(true);
    // The failures name their own operation's record.
    for (const data of failures) expect(ids.has(data?.requestId as string)).toBe(true);
    expect(records.filter((r) => r.status === 200)).toHaveLength(2);
    const charged = results.reduce((sum, r) => sum + (r.ok ? (r.value.creditsUsed ?? 0) : 0), 0);
    const key2 = await gw.keys.get(id);
    if (!key2.ok) throw new Error('key');
    expect(key2.value.credits).toBeCloseTo(10 - charged, 6);
    expect(await gw.store.ledgerBalance(id)).toBe(Math.round((10 - charged) * 1e6));
  });

  it('refuses a whole batch, operation by operation, for a missing key (40100)', async () => {
    const client = clientWith(link, gw.url, undefined);
    const results = await Promise.all([
      settle(client.evaluate.mutate(sampleRequest() as Input)),
      settle(client.evaluate.mutate(sampleRequest() as Input)),
    ]);
    for (const result of results) {
      expect(result.ok).toBe(false);
      if (!result.ok) expect(result.error.data).toMatchObject({ code: 40100, type: 'missing_api_key' });
    }
  });
});

describe('tRPC batches on the wire', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startGateway({ rateLimitPerMinute: 2 });
  });
  afterAll(() => gw.close());

  const batch = (n: number, key: string) =>
    fetch(`${gw.url}/trpc/${Array(n).fill('evaluate').join(',')}?batch=1`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...bearer(key) },
      body: JSON.stringify(Object.fromEntries(Array.from({ length: n }, (_, i) => [i, sampleRequest()]))),
    });

  it('gives every operation 40001 when a batch holds more than 8, and evaluates none', async () => {
    const { id, key } = await gw.createKey({ credits: 10 });
    const response = await batch(9, key);
    expect(response.status).toBe(400);
    const body: any = await response.json();
    // tRPC answers one error for the whole batch; httpBatchLink hands it to every operation.
    expect(body.error.data).toMatchObject({ code: 40001, type: 'invalid_request' });
    expect(body.error.message).toContain('at most 8');
    const usage = await gw.keys.usage(id, 10);
    expect(usage.ok && usage.value.totals.requests).toBe(0);
  });

  it('takes one rate-limit token per operation, and carries Retry-After when one is refused', async () => {
    const { key } = await gw.createKey({ credits: 10 });
    const response = await batch(3, key);
    const body: any[] = (await response.json()) as any[];
    expect(body).toHaveLength(3);
    const codes = body.map((op) => (op.error ? op.error.data.code : 0));
    expect(codes.filter((c) => c === 0)).toHaveLength(2);
    expect(codes.filter((c) => c === 42900)).toHaveLength(1);
    expect(Number(response.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  });

  it('answers a batch body that is not JSON with 40000 for each operation, after authentication', async () => {
    const { key } = await gw.createKey({ credits: 10 });
    const response = await fetch(`${gw.url}/trpc/evaluate?batch=1`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...bearer(key) },
      body: '{"0": ',
    });
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    const body: any[] = (await response.json()) as any[];
    expect(body[0].error.data).toMatchObject({
      code: 40000,
      requestId: expect.stringMatching(/^req_\w+_0$/),
    });
    const anonymous = await fetch(`${gw.url}/trpc/evaluate?batch=1`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"0": ',
    });
    const refused: any[] = (await anonymous.json()) as any[];
    expect(refused[0].error.data.code).toBe(40100);
  });
});
