import type { Decisions } from '@google/genai';
import { afterEach, describe, expect, it } from 'vitest';
import { googleAnswers } from '../../../../test/gemini-decisions-stand-in.ts';
import { bearer, configuredRoutes, post, startGateway } from '../../../../test/harness.ts';
import { json, type SeenRequest, startStandIn } from '../../../../test/stand-in-upstream.ts';
import { inlineAsset, makeImage } from '../../../../test/support/images.ts';
import { loadConfig } from '../../../config/environment.ts';

// docs/upstreams.md#googles-gemini-decisions-api: the stand-in answers in the types of Google's
// own SDK (`Decisions.CreateDecisionResponse` of @google/genai), never in this gateway's schemas.

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()?.();
});

async function setup(handler: Parameters<typeof startStandIn>[0], fields = '') {
  const standIn = await startStandIn(handler);
  const gw = await startGateway({
    routes: configuredRoutes(
      `upstreams:\n  gemini: { kind: gemini-decisions, baseUrl: "${standIn.url}", model: models/gemini-3-flash, apiKey: g-key, maxRetries: 1${fields} }\nroutes:\n  default: { upstreams: [gemini] }\n`,
    ),
  });
  cleanups.push(standIn.close, gw.close);
  const key = await gw.createKey();
  return { standIn, gw, send: (body: unknown) => post(gw.url, '/v1/systemone', body, bearer(key.key)) };
}

const request = {
  model: 'vendor/model-1.13',
  state: { ticket: 'I was charged twice.' },
  questions: {
    refund: {
      type: 'noul',
      instructions: 'Is this a refund request?',
      criteria: { true: 'asks for money back' },
    },
    team: { type: 'choice', criteria: { billing: 'payments', technical: null } },
    urgency: { type: 'score', instructions: 'How urgent?', criteria: ['not urgent', null] },
  },
};

describe('the gemini-decisions kind', () => {
  it('asks POST {baseUrl}/v1beta/decisions with x-goog-api-key, the questions keyed by ID, and bills Google’s usage', async () => {
    const { standIn, send } = await setup((req, res) => json(res, 200, googleAnswers(req)));
    const res = await send(request);
    expect(res.status).toBe(200);
    const seen = standIn.seen[0] as SeenRequest;
    expect(seen.path).toBe('/v1beta/decisions');
    expect(seen.headers['x-goog-api-key']).toBe('g-key');
    expect(seen.headers.authorization).toBeUndefined();
    const body: Decisions.CreateDecisionRequest = seen.body;
    expect(body).toEqual({
      model: 'models/gemini-3-flash',
      input: [{ type: 'text', text: '{"ticket":"I was charged twice."}' }],
      questions: {
        refund: {
          type: 'noul',
          instructions: 'Is this a refund request?',
          criteria: { true_description: 'asks for money back' },
        },
        team: {
          type: 'choice',
          instructions: 'Choose the option that fits best.',
          criteria: { billing: 'payments', technical: 'technical' },
        },
        urgency: { type: 'score', instructions: 'How urgent?', criteria: ['not urgent', 'Level 1'] },
      },
    });
    const { refund, team, urgency } = res.body.data.result.answers;
    expect(refund).toEqual({ type: 'noul', noul: 0.8 });
    // Google's confidence is its top probability; the gateway's is computed by its own formula.
    expect(team.choice).toBe('billing');
    expect(team.confidence).not.toBe(0.7);
    expect(team.confidence).toBeCloseTo((0.7 - 0.5) / 0.5, 9);
    expect(urgency).toMatchObject({ type: 'score', score: 1, legend: { '0': 'not urgent', '1': null } });
    expect(res.body.data.result.usage).toEqual({ input_tokens: 321, output_tokens: 4 });
    expect(res.body.data.creditsUsed).toBe(0.321);
  });

  it('sends a string state as it is, and images after it, each after the text `Image <ref>:`', async () => {
    const png = await makeImage('png', 20, 10);
    const { standIn, send } = await setup((req, res) => json(res, 200, googleAnswers(req)));
    expect((await send({ ...request, state: 'plain text' })).status).toBe(200);
    expect(standIn.seen[0]?.body.input).toBe('plain text');
    const res = await send({
      model: 'vendor/model-1.13',
      state: 'See p1.',
      questions: { damaged: { type: 'noul', instructions: 'Is p1 damaged?' } },
      assets: { p1: inlineAsset('png', png) },
    });
    expect(res.status).toBe(200);
    expect(standIn.seen[1]?.body.input).toEqual([
      { type: 'text', text: 'See p1.' },
      { type: 'text', text: 'Image p1:' },
      { type: 'image', mime_type: 'image/png', data: png.toString('base64') },
    ]);
  });

  it('an input Google blocked (prompt_feedback, no answers) declines every question: 502 on REST', async () => {
    const blocked: Decisions.CreateDecisionResponse = {
      prompt_feedback: { block_reason: 'SAFETY' },
      usage: { total_input_tokens: 50, total_output_tokens: 0 },
    };
    const { send } = await setup((_req, res) => json(res, 200, blocked));
    const res = await send(request);
    expect(res.status).toBe(502);
    expect(res.body.message).toContain('every upstream declined');
  });

  it.each([
    [
      'an answer missing',
      (req: SeenRequest) => ({ ...googleAnswers(req), answers: {} }),
      /"refund" is missing/,
    ],
    [
      'an answer to no question',
      (req: SeenRequest) => {
        const given = googleAnswers(req);
        return {
          ...given,
          answers: { ...given.answers, other: { type: 'noul', noul: 0.5, confidence: 0.5 } },
        };
      },
      /no question "other"/,
    ],
    ['no usage', (req: SeenRequest) => ({ answers: googleAnswers(req).answers }), /usage: missing/],
  ])('%s is an invalid answer (502)', async (_what, answer, reason) => {
    const { send } = await setup((req, res) => json(res, 200, answer(req)));
    const res = await send(request);
    expect(res.status).toBe(502);
    expect(res.body.message).toMatch(reason);
  });

  it('Google’s errors: 400 is the caller’s (40001, Google’s message); 403 is the gateway’s (502); 429 is retried', async () => {
    const error = (code: number, status: string, message: string) => ({ error: { code, message, status } });
    const refused = await setup((_req, res) =>
      json(res, 400, error(400, 'INVALID_ARGUMENT', 'input too long')),
    );
    const bad = await refused.send(request);
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe(40001);
    expect(bad.body.message).toContain('input too long');
    const forbidden = await setup((_req, res) =>
      json(res, 403, error(403, 'PERMISSION_DENIED', 'key revoked')),
    );
    const denied = await forbidden.send(request);
    expect(denied.status).toBe(502);
    expect(denied.body.message).toBe('the upstream refused the gateway');
    const busy = await setup((req, res, n) =>
      n === 1
        ? json(res, 429, error(429, 'RESOURCE_EXHAUSTED', 'slow down'), { 'retry-after': '0' })
        : json(res, 200, googleAnswers(req)),
    );
    expect((await busy.send(request)).status).toBe(200);
    expect(busy.standIn.seen).toHaveLength(2);
  });

  it('is configured by UPSTREAM=gemini-decisions with UPSTREAM_MODEL, which must be models/<name>', () => {
    const loaded = loadConfig({
      UPSTREAM: 'gemini-decisions',
      UPSTREAM_MODEL: 'models/gemini-3-flash',
      UPSTREAM_API_KEY: 'k',
    });
    expect(loaded.ok && loaded.config.upstream.config).toMatchObject({
      kind: 'gemini-decisions',
      baseUrl: 'https://generativelanguage.googleapis.com',
      apiVersion: 'v1beta',
      model: 'models/gemini-3-flash',
      maxQuestions: 1000,
    });
    const missing = loadConfig({ UPSTREAM: 'gemini-decisions' });
    expect(missing.ok).toBe(false);
    const wrong = loadConfig({ UPSTREAM: 'gemini-decisions', UPSTREAM_MODEL: 'gemini-3-flash' });
    expect(!wrong.ok && wrong.problems.join('\n')).toContain('must be models/<name>');
  });
});
