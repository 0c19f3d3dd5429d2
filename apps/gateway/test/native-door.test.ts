import { MODEL_ID, MODELS } from '@decision-gateway/contract';
import {
  APIError,
  AuthenticationError,
  BadRequestError,
  choice,
  NotFoundError,
  noul,
  type Questions,
  RateLimitError,
  score,
  TypeSafeClient,
} from '@typesafe-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, get, post, startGateway, type TestGateway } from './harness.ts';

// The official System One SDK, unchanged, pointed at the gateway's `/native` door (docs/http-api.md#the-other-doors).
let gw: TestGateway;
beforeAll(async () => {
  gw = await startGateway();
});
afterAll(async () => {
  await gw.close();
});

function sdk(apiKey: string) {
  return new TypeSafeClient({
    apiKey,
    baseURL: `${gw.url}/native`,
    defaultModel: MODEL_ID,
    logLevel: 'off',
    retry: { maxRetries: 0 },
  });
}

/** The SDK's rejection, for assertions on its own error classes. */
async function rejection(promise: Promise<unknown>): Promise<APIError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof APIError)) throw new Error(`expected an APIError, got ${String(error)}`);
  return error;
}

const state = 'I was charged twice for my order last week. Please refund the double charge.';

describe('the /native door, driven by the official @typesafe-ai/sdk', () => {
  it('answers all three question types, typed by the SDK, and charges what x-credits-used says', async () => {
    const key = await gw.createKey({ credits: 10 });
    const { data, response, requestId } = await sdk(key.key)
      .systemOne({
        state,
        questions: {
          team: choice('Which team should handle this?', { billing: 'payments, refunds', technical: null }),
          urgency: score('How urgent is it?', ['not urgent', 'soon', 'now']),
          refund: noul('The customer asks for a refund.'),
        },
      })
      .withResponse();

    expect(data.model).toBe(MODEL_ID);
    expect(Object.keys(data.answers)).toEqual(['team', 'urgency', 'refund']);
    expect(data.answers.team.choice).toBe('billing');
    expect(data.answers.team.probabilities.billing + data.answers.team.probabilities.technical).toBeCloseTo(
      1,
      6,
    );
    expect(data.answers.urgency.legend).toEqual({ 0: 'not urgent', 1: 'soon', 2: 'now' });
    expect(data.answers.urgency.score).toBeGreaterThanOrEqual(0);
    expect(data.answers.urgency.score).toBeLessThanOrEqual(2);
    expect(data.answers.refund.noul).toBeGreaterThan(0.5);
    expect(data.usage.input_tokens).toBeGreaterThan(0);
    expect(data).not.toHaveProperty('code');
    expect(data).not.toHaveProperty('elapsedMs');

    // The gateway's extras travel in headers; the SDK finds its request id where it looks.
    expect(requestId).toMatch(/^req_/);
    expect(response.headers.get('x-request-id')).toBe(requestId);
    const charged = Number(response.headers.get('x-credits-used'));
    expect(charged).toBeCloseTo(data.usage.input_tokens / 1000, 6);
    const after = await gw.keys.get(key.id);
    expect(after.ok && after.value.credits).toBeCloseTo(10 - charged, 9);

    // One usage record, like any other door.
    const usage = await gw.keys.usage(key.id, 10);
    expect(usage.ok && usage.value.recent).toMatchObject([{ requestId, status: 200, creditsUsed: charged }]);
  });

  it('lists the models through models.list()', async () => {
    const key = await gw.createKey();
    expect(await sdk(key.key).models.list()).toEqual(MODELS.models);
  });

  it('raises AuthenticationError for an unknown key, with the native error body', async () => {
    const error = await rejection(
      sdk('dg_not_a_key_at_all').systemOne({ state, questions: { q: noul('Is it?') } }),
    );
    expect(error).toBeInstanceOf(AuthenticationError);
    expect(error.status).toBe(401);
    expect(error.body).toEqual({
      detail: { error_type: 'invalid_api_key', message: expect.any(String), code: 40101 },
    });
    expect(error.message).toContain('401');
    expect(error.requestId).toMatch(/^req_/);
  });

  it.each<[string, { model: string; questions: Questions }, number, string]>([
    [
      'too many questions',
      {
        model: MODEL_ID,
        questions: Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`q${i}`, noul('Is it?')])),
      },
      40002,
      'invalid_question_count',
    ],
    ['another model', { model: 'jev-1.13.0', questions: { q: noul('Is it?') } }, 40003, 'unknown_model'],
    [
      'a choice with one option',
      { model: MODEL_ID, questions: { triage: choice('Which?', { only: null }) } },
      40001,
      'invalid_request',
    ],
  ])('raises BadRequestError for %s (code %i)', async (_, request, code, type) => {
    const key = await gw.createKey({ credits: 10 });
    const error = await rejection(sdk(key.key).systemOne({ state, ...request }));
    expect(error).toBeInstanceOf(BadRequestError);
    expect(error.body).toMatchObject({ detail: { error_type: type, code } });
    if (code === 40001) {
      expect(error.body).toMatchObject({
        detail: { issues: [{ path: ['questions', 'triage', 'criteria'], message: expect.any(String) }] },
      });
    }
    const after = await gw.keys.get(key.id);
    expect(after.ok && after.value.credits).toBe(10);
  });

  it('answers 402 when the key cannot cover the request, as a plain APIError', async () => {
    const key = await gw.createKey({ credits: 0.000001 });
    const error = await rejection(sdk(key.key).systemOne({ state, questions: { q: noul('Is it?') } }));
    expect(error.constructor).toBe(APIError);
    expect(error.status).toBe(402);
    expect(error.body).toMatchObject({ detail: { error_type: 'insufficient_credits', code: 40200 } });
  });

  it('raises RateLimitError with the retry delay the SDK reads from retry-after-ms', async () => {
    const key = await gw.createKey({ credits: 10, rateLimitPerMinute: 1 });
    const client = sdk(key.key);
    await client.systemOne({ state, questions: { q: noul('Is it?') } });
    const error = await rejection(client.systemOne({ state, questions: { q: noul('Is it?') } }));
    expect(error).toBeInstanceOf(RateLimitError);
    const retryAfterMs = (error as RateLimitError).retryAfterMs as number;
    expect(retryAfterMs).toBeGreaterThan(50_000);
    expect(retryAfterMs).toBeLessThanOrEqual(60_000);
    expect(Number(error.headers.get('retry-after'))).toBe(Math.ceil(retryAfterMs / 1000));
    expect(error.body).toMatchObject({ detail: { error_type: 'rate_limited', code: 42900 } });
  });

  it('keeps the native shape below the router: unknown paths and wrong methods', async () => {
    const key = await gw.createKey();
    const missing = await get(gw.url, '/native/v1/nothing', bearer(key.key));
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({
      detail: { error_type: 'not_found', message: expect.any(String), code: 40400 },
    });
    expect(missing.headers.get('x-typesafe-request-id')).toBe(missing.headers.get('x-request-id'));
    const wrongMethod = await get(gw.url, '/native/v1/systemone', bearer(key.key));
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get('allow')).toBe('POST');
    expect(wrongMethod.body.detail.code).toBe(40500);
    const tooLarge = await post(gw.url, '/native/v1/systemone', 'x'.repeat(40_000), bearer(key.key));
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.body.detail.code).toBe(41300);
    // The SDK's NotFoundError is what a client meets on a wrong base URL.
    const error = await rejection(
      new TypeSafeClient({
        apiKey: key.key,
        baseURL: `${gw.url}/native/nowhere`,
        logLevel: 'off',
        retry: { maxRetries: 0 },
      }).models.list(),
    );
    expect(error).toBeInstanceOf(NotFoundError);
  });

  it('leaves the envelope doors as they were', async () => {
    const key = await gw.createKey();
    const rest = await get(gw.url, '/v1/models', bearer(key.key));
    expect(rest.body).toMatchObject({ code: 0, message: 'ok', data: MODELS });
    expect(rest.headers.get('x-typesafe-request-id')).toBeNull();
  });
});
