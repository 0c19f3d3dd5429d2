import { createTypeSafeAi } from '@ai-sdk/typesafe-ai';
import { APICallError, experimental_decide as decide } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, post, startGateway, type TestGateway } from './harness.ts';

// The AI SDK's experimental_decide with its unchanged @ai-sdk/typesafe-ai provider, pointed at the
// gateway's System One-compatible door (docs/openai.md#the-ai-sdk): no door of its own.

const QUESTIONS = {
  department: {
    type: 'choice',
    instructions: 'Which team should handle this?',
    criteria: { billing: 'Charges and refunds', support: 'Other requests' },
  },
  requestsRefund: { type: 'boolean', instructions: 'Is the customer requesting money back?' },
  urgency: { type: 'score', instructions: 'How urgent is it?', criteria: ['not urgent', 'soon', 'now'] },
} as const;

describe('the AI SDK (experimental_decide) through /native/v1', () => {
  let gw: TestGateway;
  let key: { id: string; key: string };
  beforeAll(async () => {
    gw = await startGateway();
    key = await gw.createKey({ credits: 100 });
  });
  afterAll(async () => {
    await gw.close();
  });

  // @ai-sdk/typesafe-ai 3.0.0 is typed on @ai-sdk/provider 4.0.16 (EvaluationModelV4) and ai 7.0.173
  // on 4.0.38 (DecisionModel): the same object at run time, two names for it in the published types.
  const modelFor = (apiKey: string) =>
    createTypeSafeAi({ apiKey, baseURL: `${gw.url}/native/v1` }).evaluationModel(
      'vendor/model-1.13',
    ) as unknown as Parameters<typeof decide>[0]['model'];

  it('answers every question, with usage, and is charged like any request', async () => {
    const { answers, usage } = await decide({
      model: modelFor(key.key),
      state: 'I was charged twice. Please refund the duplicate.',
      questions: QUESTIONS,
      maxRetries: 0,
    });
    expect(answers.department.type).toBe('choice');
    expect(['billing', 'support']).toContain(answers.department.choice);
    expect(answers.requestsRefund.type).toBe('boolean');
    expect(answers.urgency.type).toBe('score');
    expect(usage.inputTokens).toBeGreaterThan(0);
    const record = (await gw.store.usage(key.id, 1)).recent[0];
    expect(record).toMatchObject({
      status: 200,
      questions: 3,
      creditsMicro: (usage.inputTokens ?? 0) * 1000,
    });
  });

  it('a wrong key is the SDK’s 401; a bad question its 400', async () => {
    const unauthorized = await decide({
      model: modelFor('dg_not_a_key'),
      state: 'x',
      questions: { q: { type: 'boolean', instructions: 'A refund?' } },
      maxRetries: 0,
    }).catch((error: unknown) => error);
    expect(APICallError.isInstance(unauthorized)).toBe(true);
    expect((unauthorized as APICallError).statusCode).toBe(401);

    const bad = await decide({
      model: modelFor(key.key),
      state: 'x',
      questions: { q: { type: 'choice', instructions: 'Which?', criteria: { only: 'one option' } } },
      maxRetries: 0,
    }).catch((error: unknown) => error);
    expect(APICallError.isInstance(bad)).toBe(true);
    expect((bad as APICallError).statusCode).toBe(400);
    expect((bad as APICallError).responseBody).toContain('at least 2');
  });

  it('a short-lived token minted by a server works as the key does', async () => {
    const minted = await post(gw.url, '/v1/tokens', { ttlSeconds: 60, subject: 'user-7' }, bearer(key.key));
    expect(minted.status).toBe(201);
    const { answers } = await decide({
      model: modelFor(minted.body.data.token),
      state: 'Please refund my double charge.',
      questions: { requestsRefund: QUESTIONS.requestsRefund },
      maxRetries: 0,
    });
    expect(answers.requestsRefund.type).toBe('boolean');
    expect((await gw.store.usage(key.id, 1)).recent[0]?.subject).toBe('user-7');
  });
});
