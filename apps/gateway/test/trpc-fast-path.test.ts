import { failure, type GatewayFailure } from '@decision-gateway/contract';
import { createLexicalUpstream } from '@decision-gateway/questions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, sampleRequest, scriptedUpstream, startGateway, type TestGateway } from './harness.ts';

/** Upstream failures chosen by the request's state, so one gateway can produce every code. */
const SCRIPTED: Record<string, GatewayFailure | 'throw'> = {
  'upstream 502': failure('upstream_error', 'the upstream failed (HTTP 500)'),
  'upstream 503': failure('unavailable', 'the upstream is busy; try again shortly', { retryAfterMs: 2000 }),
  'upstream 504': failure('upstream_timeout', 'the upstream did not answer in time'),
  'upstream throws': 'throw',
};

const FORMAT_HEADERS = [
  'content-type',
  'vary',
  'retry-after',
  'x-dg-route',
  'x-dg-upstream',
  'x-credits-used',
];

/** Status, the headers of tRPC's format and the body, with what differs per request taken out. */
async function shape(response: Response) {
  const text = await response.text();
  const requestId = response.headers.get('x-request-id') as string;
  const normalised = text
    .replaceAll(requestId, '<request id>')
    .replace(/"elapsedMs":\d+/, '"elapsedMs":"<ms>"')
    .replace(/"retryAfterMs":\d+/, '"retryAfterMs":"<ms>"');
  const headers = Object.fromEntries(FORMAT_HEADERS.map((name) => [name, response.headers.get(name)]));
  return { status: response.status, headers, body: normalised };
}

describe('the tRPC fast path writes what the adapter writes', () => {
  let gw: TestGateway;
  let key: string;
  let broke: string;
  let slow: string;
  const lexical = createLexicalUpstream();
  beforeAll(async () => {
    gw = await startGateway({
      upstream: scriptedUpstream(
        async (call) => {
          const scripted = SCRIPTED[call.request.state as string];
          if (scripted === 'throw') throw new Error('a bug in an upstream');
          return scripted === undefined ? lexical.answer(call) : { ok: false, failure: scripted };
        },
        (request, bytes) => lexical.usageBound(request, bytes),
      ),
    });
    key = (await gw.createKey({ credits: 100 })).key;
    broke = (await gw.createKey({ credits: 0 })).key;
    slow = (await gw.createKey({ credits: 100, rateLimitPerMinute: 1 })).key;
  });
  afterAll(() => gw.close());

  const json = (body: unknown) => JSON.stringify(body);
  const cases: [string, () => { body: string; headers: Record<string, string> }][] = [
    ['a success', () => ({ body: json(sampleRequest()), headers: bearer(key) })],
    ['40000 (not JSON)', () => ({ body: '{"model": ', headers: bearer(key) })],
    ['40000 (empty)', () => ({ body: '', headers: bearer(key) })],
    ['40001', () => ({ body: json({ ...sampleRequest(), state: null }), headers: bearer(key) })],
    ['40002', () => ({ body: json({ ...sampleRequest(), questions: {} }), headers: bearer(key) })],
    ['40003', () => ({ body: json({ ...sampleRequest(), model: 'x/y' }), headers: bearer(key) })],
    ['40004', () => ({ body: json(sampleRequest()), headers: { ...bearer(key), 'x-dg-route': 'nope' } })],
    ['40100', () => ({ body: json(sampleRequest()), headers: {} })],
    ['40101', () => ({ body: json(sampleRequest()), headers: bearer('dg_unknown') })],
    ['40200', () => ({ body: json(sampleRequest()), headers: bearer(broke) })],
    [
      '41300',
      () => ({ body: json({ ...sampleRequest(), state: 'x'.repeat(40_000) }), headers: bearer(key) }),
    ],
    [
      '41500',
      () => ({ body: json(sampleRequest()), headers: { ...bearer(key), 'content-type': 'text/plain' } }),
    ],
    ['42900', () => ({ body: json(sampleRequest()), headers: bearer(slow) })],
    ['50000', () => ({ body: json({ ...sampleRequest(), state: 'upstream throws' }), headers: bearer(key) })],
    ['50200', () => ({ body: json({ ...sampleRequest(), state: 'upstream 502' }), headers: bearer(key) })],
    ['50300', () => ({ body: json({ ...sampleRequest(), state: 'upstream 503' }), headers: bearer(key) })],
    ['50400', () => ({ body: json({ ...sampleRequest(), state: 'upstream 504' }), headers: bearer(key) })],
  ];

  it.each(cases)('%s', async (name, make) => {
    const { body, headers } = make();
    const send = (query: string) =>
      fetch(`${gw.url}/trpc/evaluate${query}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body,
      });
    // The rate-limited key spends its one token here, so both answers below are 429s.
    if (name === '42900') await send('');
    const fast = await shape(await send(''));
    // `?batch=0` is still one call, but any query takes tRPC's own adapter.
    const adapter = await shape(await send('?batch=0'));
    expect(fast).toEqual(adapter);
    const code = name === 'a success' ? undefined : Number(name.slice(0, 5));
    if (code === undefined) expect(fast.status).toBe(200);
    else expect(JSON.parse(fast.body).error.data.code).toBe(code);
  });
});
