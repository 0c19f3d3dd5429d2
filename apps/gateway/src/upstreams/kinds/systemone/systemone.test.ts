import { afterEach, describe, expect, it } from 'vitest';
import {
  bearer,
  configuredRoutes,
  post,
  sampleRequest,
  startGateway,
  type TestGateway,
} from '../../../../test/harness.ts';
import {
  gatewayEnvelope,
  type Handler,
  json,
  nativeAnswer,
  startStandIn,
} from '../../../../test/stand-in-upstream.ts';
import { loadConfig } from '../../../config/environment.ts';
import { createUpstream, type UpstreamTuning } from '../../registry.ts';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()?.();
});

/** A gateway with UPSTREAM=systemone pointed at a stand-in answering with `handler`. */
async function setup(handler: Handler, env: Record<string, string> = {}, tuning: UpstreamTuning = {}) {
  const standIn = await startStandIn(handler);
  const loaded = loadConfig({
    UPSTREAM: 'systemone',
    UPSTREAM_BASE_URL: standIn.url,
    UPSTREAM_API_KEY: 'upstream-secret-key',
    UPSTREAM_TIMEOUT_MS: '2000',
    ...env,
  });
  if (!loaded.ok) throw new Error(loaded.problems.join('\n'));
  const gw: TestGateway = await startGateway({
    upstream: (logger) =>
      createUpstream(loaded.config.upstream, logger, { backoff: { initialMs: 10, maxMs: 40 }, ...tuning }),
    upstreamTimeoutMs: loaded.config.upstream.config.timeoutMs,
  });
  cleanups.push(standIn.close, gw.close);
  const key = await gw.createKey({ credits: 10 });
  const send = (body: unknown = sampleRequest()) => post(gw.url, '/v1/systemone', body, bearer(key.key));
  const balance = async () => {
    const k = await gw.keys.get(key.id);
    return k.ok ? k.value.credits : undefined;
  };
  return { standIn, gw, key, send, balance };
}

describe('UPSTREAM=systemone', () => {
  it('passes native answers and usage through, mapping the model and sending the upstream key', async () => {
    const { standIn, gw, send, balance } = await setup((req, res) =>
      json(res, 200, nativeAnswer(req), { 'x-typesafe-request-id': 'ts_req_123' }),
    );
    const response = await send();
    expect(response.status).toBe(200);
    const sent = standIn.seen[0];
    expect(sent?.path).toBe('/v1/systemone');
    expect(sent?.headers.authorization).toBe('Bearer upstream-secret-key');
    expect(sent?.body).toEqual({ ...sampleRequest(), model: 'jev-1.13.0' });
    expect(response.body.data.result.answers).toEqual({
      team: {
        type: 'choice',
        choice: 'billing',
        confidence: 0.55,
        probabilities: { billing: 0.7, technical: 0.3 },
      },
      urgency: {
        type: 'score',
        score: 1,
        confidence: expect.closeTo(0, 10),
        legend: { '0': 'not urgent', '1': 'soon', '2': 'now' },
        probabilities: { '0': 1 / 3, '1': 1 / 3, '2': 1 / 3 },
      },
      refund: { type: 'noul', noul: 0.97 },
    });
    expect(response.body.data.result.usage).toEqual({ input_tokens: 412, output_tokens: 0 });
    expect(response.body.data.creditsUsed).toBe(0.412);
    expect(await balance()).toBeCloseTo(10 - 0.412, 9);
    const line = gw.logs.find((l) => l.includes(response.body.requestId) && l.includes('"request"'));
    expect(JSON.parse(line as string)).toMatchObject({ upstreamRequestId: 'ts_req_123' });
    expect(gw.logs.join('\n')).not.toContain('upstream-secret-key');
  });

  it('maps the model to UPSTREAM_MODEL and keeps a base path (e.g. OpenRouter-style /api)', async () => {
    const { standIn, send } = await setup(
      (req, res) =>
        req.path === '/api/v1/systemone'
          ? json(res, 200, nativeAnswer(req))
          : json(res, 404, { detail: 'no' }),
      { UPSTREAM_MODEL: 'jev-2.0.0' },
    );
    const withPath = await setup((req, res) => json(res, 200, nativeAnswer(req)), {
      UPSTREAM_BASE_URL: `${standIn.url}/api/`,
    });
    expect((await withPath.send()).status).toBe(200);
    expect(standIn.seen.at(-1)).toMatchObject({ path: '/api/v1/systemone', body: { model: 'jev-1.13.0' } });
    // Without the prefix the stand-in answers 404: an upstream 404 is a 502 for the caller.
    const response = await send();
    expect(response.body.code).toBe(50200);
    expect(standIn.seen.at(-1)).toMatchObject({ path: '/v1/systemone', body: { model: 'jev-2.0.0' } });
  });

  it.each<[string, number, unknown, string]>([
    ['a string detail', 422, { detail: 'state is too long' }, 'state is too long'],
    [
      '{error_type, message}',
      400,
      { detail: { error_type: 'invalid_question', message: 'bad criteria' } },
      'invalid_question: bad criteria',
    ],
    ['{error_type} alone', 400, { detail: { error_type: 'max_tokens_exceeded' } }, 'max_tokens_exceeded'],
    [
      'a validation list',
      422,
      { detail: [{ loc: ['body', 'state'], msg: 'field required', type: 'missing' }] },
      'body.state: field required',
    ],
  ])('turns a %s on %i into 40001 with the reason', async (_, status, body, reason) => {
    const { send, balance } = await setup((_req, res) => json(res, status, body));
    const response = await send();
    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({
      code: 40001,
      message: `the upstream refused the request: ${reason}`,
    });
    expect(await balance()).toBe(10);
  });

  it.each([401, 403])('turns %i into 502 and only logs the reason', async (status) => {
    const { gw, send, balance } = await setup((_req, res) =>
      json(res, status, { detail: 'the key sk-live-abc is wrong' }),
    );
    const response = await send();
    expect(response.body).toMatchObject({ code: 50200, message: 'the upstream refused the gateway' });
    expect(response.text).not.toContain('sk-live-abc');
    expect(gw.logs.some((l) => l.includes('the key sk-live-abc is wrong'))).toBe(true);
    expect(await balance()).toBe(10);
  });

  it.each<[string, Handler]>([
    ['503', (_r, res) => json(res, 503, { detail: 'overloaded' })],
    ['529', (_r, res) => json(res, 529, { detail: { error_type: 'overloaded', message: 'busy' } })],
    ['429', (_r, res) => json(res, 429, { detail: 'slow down' }, { 'retry-after-ms': '20' })],
  ])('retries a %s and then succeeds on the native body', async (_, busy) => {
    const { standIn, send, balance } = await setup((req, res, n) =>
      n === 1 ? busy(req, res, n) : json(res, 200, nativeAnswer(req)),
    );
    const response = await send();
    expect(response.status).toBe(200);
    expect(response.body.data.result.answers.refund).toEqual({ type: 'noul', noul: 0.97 });
    expect(standIn.seen).toHaveLength(2);
    expect(await balance()).toBeCloseTo(10 - 0.412, 9);
  });

  it("reads this gateway's own envelope too, so one gateway can front another", async () => {
    const { send, balance } = await setup((req, res) => json(res, 200, gatewayEnvelope(nativeAnswer(req))));
    const response = await send();
    expect(response.status).toBe(200);
    expect(response.body.data.result.answers.team).toMatchObject({ choice: 'billing', confidence: 0.55 });
    expect(response.body.data.creditsUsed).toBe(0.412);
    expect(await balance()).toBeCloseTo(10 - 0.412, 9);
  });

  it.each<[string, Handler, number, number]>([
    ['429', (_r, res) => json(res, 429, { detail: 'slow down' }, { 'retry-after-ms': '20' }), 503, 50300],
    ['529', (_r, res) => json(res, 529, { detail: { error_type: 'overloaded' } }), 503, 50300],
    ['500', (_r, res) => json(res, 500, { detail: 'boom' }), 502, 50200],
    ['a connection reset', (_r, res) => res.socket?.destroy(), 502, 50200],
  ])('exhausts retries on %s', async (_, handler, status, code) => {
    const { standIn, send, balance } = await setup(handler, { UPSTREAM_MAX_RETRIES: '2' });
    const response = await send();
    expect(response.status).toBe(status);
    expect(response.body.code).toBe(code);
    expect(standIn.seen).toHaveLength(3);
    if (code === 50300) expect(Number(response.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await balance()).toBe(10);
  });

  it('does not start a wait that would pass the deadline', async () => {
    const { standIn, send } = await setup(
      (_r, res) => json(res, 429, { detail: 'later' }, { 'retry-after': '30' }),
      {
        UPSTREAM_TIMEOUT_MS: '1500',
      },
    );
    const started = performance.now();
    const response = await send();
    expect(response.body.code).toBe(50300);
    expect(response.body.error.retryAfterMs).toBe(30_000);
    expect(standIn.seen).toHaveLength(1);
    // It did not sit out the 30 s the upstream asked for (a bound far from the machine's speed).
    expect(performance.now() - started).toBeLessThan(15_000);
  });

  it('answers 50400 when the upstream hangs past the deadline, and charges nothing', async () => {
    const { send, balance } = await setup(() => {}, { UPSTREAM_TIMEOUT_MS: '300' });
    const started = performance.now();
    const response = await send();
    expect(response.status).toBe(504);
    expect(response.body.code).toBe(50400);
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    expect(await balance()).toBe(10);
  });

  it('answers 50400 when the upstream stops halfway through its body: the deadline covers the body', async () => {
    const { send, balance } = await setup(
      (_r, res) => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
        res.write('{"answers":{');
      },
      { UPSTREAM_TIMEOUT_MS: '300' },
    );
    const started = performance.now();
    const response = await send();
    expect(response.status).toBe(504);
    expect(response.body.code).toBe(50400);
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    expect(await balance()).toBe(10);
  });

  it.each<[string, Handler, RegExp]>([
    [
      'malformed JSON',
      (_r, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"code":0,'),
      /not JSON/,
    ],
    [
      'neither answers nor data.result',
      (_r, res) => json(res, 200, { code: 0, message: 'ok', data: {} }),
      /neither answers \(native\) nor data\.result/,
    ],
    [
      'a missing answer',
      (req, res) => {
        const body = nativeAnswer(req);
        delete (body.answers as Record<string, unknown>).refund;
        json(res, 200, body);
      },
      /answers\.refund: missing/,
    ],
    [
      'an out-of-range noul',
      (req, res) => {
        const body = nativeAnswer(req);
        (body.answers as any).refund.noul = 1.5;
        json(res, 200, body);
      },
      /answers\.refund\.noul: 1\.5/,
    ],
    [
      'an alien choice label',
      (req, res) => {
        const body = nativeAnswer(req);
        (body.answers as any).team.choice = 'sales';
        json(res, 200, body);
      },
      /answers\.team\.choice: "sales" is not a label/,
    ],
    [
      'missing usage',
      (req, res) => {
        const body = nativeAnswer(req);
        delete (body as any).usage;
        json(res, 200, body);
      },
      /usage: missing/,
    ],
  ])('refuses %s with 502 and no charge', async (_, handler, message) => {
    const { send, balance } = await setup(handler);
    const response = await send();
    expect(response.status).toBe(502);
    expect(response.body.message).toMatch(message);
    expect(await balance()).toBe(10);
  });

  it('drops answers for IDs that were not asked', async () => {
    const { send } = await setup((req, res) => {
      const body = nativeAnswer(req);
      (body.answers as any).extra = { type: 'noul', noul: 0.1 };
      json(res, 200, body);
    });
    expect(Object.keys((await send()).body.data.result.answers)).toEqual(['team', 'urgency', 'refund']);
  });

  it('opens the circuit after repeated failures, fails fast, then tries again after the cool-down', async () => {
    let now = Date.now();
    const { standIn, send } = await setup(
      (_r, res) => json(res, 500, { detail: 'down' }),
      { UPSTREAM_MAX_RETRIES: '0' },
      // The breaker's own clock, moved on by the test: no race with the machine's speed.
      { breakerThreshold: 2, breakerCooldownMs: 300, clock: () => now },
    );
    expect((await send()).body.code).toBe(50200);
    expect((await send()).body.code).toBe(50200);
    const fast = await send();
    expect(fast.body.code).toBe(50300);
    expect(fast.headers.get('retry-after')).toBe('1');
    expect(standIn.seen).toHaveLength(2);
    now += 350;
    standIn.setHandler((req, res) => json(res, 200, nativeAnswer(req)));
    expect((await send()).status).toBe(200);
    expect(standIn.seen).toHaveLength(3);
    expect((await send()).status).toBe(200);
  });
});

describe('every System One-shaped service: path, headers and liberal reading', () => {
  /** A gateway over one systemone upstream defined in a configuration file. */
  async function viaFile(handler: Handler, fields: string) {
    const standIn = await startStandIn(handler);
    const gw = await startGateway({
      routes: configuredRoutes(
        `upstreams:\n  svc: { kind: systemone, baseUrl: "${standIn.url}", maxRetries: 1, timeoutMs: 3000${fields} }\nroutes:\n  default: { upstreams: [svc] }`,
        { PORTKEY_KEY: 'pk-secret' },
      ),
    });
    cleanups.push(standIn.close, gw.close);
    const key = await gw.createKey({ credits: 10 });
    return { standIn, gw, key, send: () => post(gw.url, '/v1/systemone', sampleRequest(), bearer(key.key)) };
  }

  it('Portkey: its path and its own headers, values read from the environment', async () => {
    const { standIn, send } = await viaFile(
      (req, res) => json(res, 200, nativeAnswer(req)),
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the configuration file's own ${NAME}, read from the environment
      ', path: /v1/decisions, headers: { x-portkey-api-key: "${PORTKEY_KEY}", x-portkey-provider: typesafe }',
    );
    expect((await send()).status).toBe(200);
    expect(standIn.seen[0]?.path).toBe('/v1/decisions');
    expect(standIn.seen[0]?.headers).toMatchObject({
      'x-portkey-api-key': 'pk-secret',
      'x-portkey-provider': 'typesafe',
    });
  });

  it('OpenRouter: fields it adds are ignored and a missing confidence is computed', async () => {
    const { send } = await viaFile((req, res) => {
      const body = nativeAnswer(req) as unknown as {
        answers: Record<string, Record<string, unknown>>;
        usage: Record<string, unknown>;
      };
      for (const answer of Object.values(body.answers)) {
        delete answer.confidence;
        delete answer.legend;
        answer.x_label_mass = 0.98;
      }
      body.usage.cost = 0.0004;
      json(res, 200, { id: 'gen-123', provider: 'TypeSafe', ...body });
    }, ', path: /decisions');
    const sent = await send();
    expect(sent.status).toBe(200);
    const { team, urgency } = sent.body.data.result.answers;
    // (0.7 − 1/2) / (1 − 1/2) for the choice; the score's legend is the question's own levels.
    expect(team.confidence).toBeCloseTo(0.4, 10);
    expect(urgency.legend).toEqual({ '0': 'not urgent', '1': 'soon', '2': 'now' });
    expect(team).not.toHaveProperty('x_label_mass');
  });

  it('an answer without probabilities is invalid: 502, uncharged', async () => {
    const { send } = await viaFile((req, res) => {
      const body = nativeAnswer(req) as unknown as { answers: Record<string, Record<string, unknown>> };
      delete body.answers.team?.probabilities;
      json(res, 200, body);
    }, '');
    const sent = await send();
    expect(sent.status).toBe(502);
    expect(sent.body.message).toContain('answers.team.probabilities');
  });

  it.each<[string, number, number, number, RegExp]>([
    ['SGLang’s 422 for bad input: the caller’s 40001 with its reason', 422, 400, 40001, /too long/],
    ['402 (no funds upstream): a 502, not retried', 402, 502, 50200, /HTTP 402/],
    ['524 (a proxy’s timeout): retried, then 504', 524, 504, 50400, /did not answer in time/],
    ['529 (overloaded): retried, then 503', 529, 503, 50300, /busy/],
  ])('%s', async (_what, upstreamStatus, status, code, message) => {
    const { standIn, send } = await viaFile(
      (_req, res) => json(res, upstreamStatus, { detail: { error_type: 'x', message: 'input too long' } }),
      '',
    );
    const sent = await send();
    expect([sent.status, sent.body.code]).toEqual([status, code]);
    expect(sent.body.message).toMatch(message);
    // Retried only where the status says to come back: maxRetries 1 is two calls.
    expect(standIn.seen).toHaveLength(upstreamStatus === 524 || upstreamStatus === 529 ? 2 : 1);
  });
});

describe('the reservation bound with images (docs/images.md#billing)', () => {
  it('adds the images once per group that carries them, beside the body without image data', async () => {
    const { byteBound } = await import('./systemone-upstream.ts');
    const questions = Object.fromEntries(
      Array.from({ length: 10 }, (_, i) => [`q${i}`, { type: 'noul', instructions: 'x' }]),
    ) as never;
    const state = 'a state';
    const stateBytes = JSON.stringify(state).length;
    // 10 questions, 8 a call: 2 groups, each carrying the images' 1852 tokens.
    expect(byteBound({ state, questions }, 500, 8, 1852)).toEqual({
      input_tokens: 500 + (stateBytes + 64) + 2 * 1852 + 2560,
      output_tokens: 2560,
    });
    expect(byteBound({ state, questions }, 500, 16, 1852).input_tokens).toBe(500 + 1852 + 2560);
  });
});
