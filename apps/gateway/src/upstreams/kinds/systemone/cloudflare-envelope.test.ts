import { afterEach, describe, expect, it } from 'vitest';
import { bearer, configuredRoutes, post, sampleRequest, startGateway } from '../../../../test/harness.ts';
import { json, nativeAnswer, type SeenRequest, startStandIn } from '../../../../test/stand-in-upstream.ts';
import { loadConfigText } from '../../../../test/support/config-text.ts';
import { CLOUDFLARE_ERRORS } from './cloudflare-envelope.ts';

// Cloudflare's Clef (docs/upstreams.md#cloudflares-clef): Workers AI serves System One bodies and
// wraps every answer in {result, success, errors, messages}, answering some failures with a 2xx.

const PATH = '/client/v4/accounts/acc123/ai/run/@cf/cloudflare/clef';
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()?.();
});

/** Workers AI's envelope, as its REST API documents it. */
const envelope = (result: unknown, success = true, errors: { code: number; message: string }[] = []) => ({
  result,
  success,
  errors,
  messages: [],
});

/** A gateway whose one route is a Clef stand-in answering each call (n from 1) with `answer`. */
async function clef(answer: (request: SeenRequest, n: number) => { status: number; body: unknown }) {
  const standIn = await startStandIn((request, res, n) => {
    const { status, body } = answer(request, n);
    json(res, status, body);
  });
  const gw = await startGateway({
    routes: configuredRoutes(
      `upstreams:\n  clef: { kind: systemone, baseUrl: "${standIn.url}", path: "${PATH}", envelope: cloudflare, maxRetries: 2 }\nroutes:\n  default: { upstreams: [clef] }\n`,
    ),
  });
  cleanups.push(standIn.close, gw.close);
  const key = await gw.createKey({ credits: 10 });
  const send = (body: unknown = sampleRequest()) => post(gw.url, '/v1/systemone', body, bearer(key.key));
  return { standIn, gw, send };
}

describe('a systemone upstream with envelope: cloudflare (Clef)', () => {
  it('reads the answer inside the envelope, on the path of the Workers AI route', async () => {
    const { standIn, send } = await clef((request) => ({
      status: 200,
      body: envelope(nativeAnswer(request, { input_tokens: 300, output_tokens: 0 })),
    }));
    const response = await send();
    expect(response.status).toBe(200);
    expect(response.body.data.creditsUsed).toBe(0.3);
    expect(Object.keys(response.body.data.result.answers)).toEqual(['team', 'urgency', 'refund']);
    expect(standIn.seen[0]?.path).toBe(PATH);
  });

  it('success: false on a 200 is a failure: 5006 (a schema error) is the caller’s 40001', async () => {
    const { standIn, send } = await clef(() => ({
      status: 200,
      body: envelope(null, false, [
        { code: CLOUDFLARE_ERRORS.schema, message: 'Type mismatch of questions.team' },
      ]),
    }));
    const response = await send();
    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({
      code: 40001,
      message: 'the upstream refused the request: Cloudflare error 5006: Type mismatch of questions.team',
    });
    expect(standIn.seen).toHaveLength(1);
  });

  it('3036 (the daily allocation is spent, HTTP 429) is a 502, not retried', async () => {
    const { standIn, send } = await clef(() => ({
      status: 429,
      body: envelope(null, false, [
        { code: CLOUDFLARE_ERRORS.dailyAllocation, message: 'daily free allocation used' },
      ]),
    }));
    const response = await send();
    expect(response.status).toBe(502);
    expect(response.body.code).toBe(50200);
    expect(standIn.seen).toHaveLength(1);
  });

  it('3040 (out of capacity, HTTP 429) is retried, then a 503 with Retry-After', async () => {
    const { standIn, send } = await clef(() => ({
      status: 429,
      body: envelope(null, false, [{ code: CLOUDFLARE_ERRORS.outOfCapacity, message: 'out of capacity' }]),
    }));
    const response = await send();
    expect(response.status).toBe(503);
    expect(response.body.code).toBe(50300);
    expect(response.headers.get('retry-after')).not.toBeNull();
    expect(standIn.seen).toHaveLength(3);
  });

  it('3040 once, then an answer: served on the retry', async () => {
    const { standIn, send } = await clef((request, n) =>
      n === 1
        ? {
            status: 429,
            body: envelope(null, false, [{ code: CLOUDFLARE_ERRORS.outOfCapacity, message: 'busy' }]),
          }
        : { status: 200, body: envelope(nativeAnswer(request)) },
    );
    expect((await send()).status).toBe(200);
    expect(standIn.seen).toHaveLength(2);
  });

  it('any other code is a 502', async () => {
    const failing = await clef(() => ({
      status: 200,
      body: envelope(null, false, [{ code: 7000, message: 'no such route' }]),
    }));
    const response = await failing.send();
    expect(response.status).toBe(502);
    expect(response.body.message).toBe('the upstream failed (HTTP 502)');
  });

  it('takes 64 questions a call by default, and no more than 64', async () => {
    const { standIn, send } = await clef((request) => ({
      status: 200,
      body: envelope(nativeAnswer(request)),
    }));
    const questions = Object.fromEntries(
      Array.from({ length: 8 }, (_, i) => [`q${i}`, { type: 'noul', instructions: `Statement ${i}?` }]),
    );
    expect((await send({ ...sampleRequest(), questions })).status).toBe(200);
    expect(standIn.seen).toHaveLength(1); // 8 questions, one call (the plain System One API also takes 8)
    const refused = loadConfigText(
      'upstreams:\n  clef: { kind: systemone, baseUrl: "https://api.cloudflare.com", envelope: cloudflare, maxQuestions: 65 }\nroutes:\n  default: { upstreams: [clef] }\n',
    );
    expect(refused.ok).toBe(false);
    if (!refused.ok) expect(refused.problems.join('\n')).toContain('maxQuestions: must be at most 64');
    const plain = loadConfigText(
      'upstreams:\n  s1: { kind: systemone, baseUrl: "https://api.typesafe.ai", maxQuestions: 9 }\nroutes:\n  default: { upstreams: [s1] }\n',
    );
    expect(plain.ok).toBe(false);
    if (!plain.ok) expect(plain.problems.join('\n')).toContain('maxQuestions: must be at most 8');
  });
});
