import OpenAI from 'openai';
import type { DecisionCreateParams } from 'openai/resources/decisions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configuredRoutes, startGateway, type TestGateway } from './harness.ts';
import { json, nativeAnswer, startStandIn } from './stand-in-upstream.ts';

// docs/http-api.md#credits: asked in groups, a request reserves the state once per group and each
// question once. 400 short predicates through the OpenAI door to a System One upstream that takes 8
// at a time are 50 groups: the bound used to count the whole body 50 times.

const QUESTIONS: DecisionCreateParams['questions'] = Array.from({ length: 400 }, (_, i) => ({
  type: 'predicate',
  name: `q${i}`,
  instructions: `Is statement ${i} true?`,
}));

describe('the reservation of a grouped request', () => {
  let gw: TestGateway;
  let standIn: Awaited<ReturnType<typeof startStandIn>>;

  beforeAll(async () => {
    // Each group of 8 costs 60 input tokens: 50 groups, 3000 tokens, 3 credits.
    standIn = await startStandIn((request, res) =>
      json(res, 200, nativeAnswer(request, { input_tokens: 60, output_tokens: 0 })),
    );
    gw = await startGateway({
      routes: configuredRoutes(
        `upstreams:\n  small: { kind: systemone, baseUrl: "${standIn.url}", maxQuestions: 8 }\nroutes:\n  default: { upstreams: [small] }\n`,
      ),
    });
  });
  afterAll(async () => {
    await gw.close();
    await standIn.close();
  });

  // The bound still holds 256 tokens for each question (102.4 credits for 400 at 1 credit per 1000
  // input tokens), so the key holds 150: under the old bound the same request reserved ~1,400.
  it('400 short questions on a key holding 150 credits are served and charged what the upstream reported', async () => {
    const key = await gw.createKey({ credits: 150 });
    const client = new OpenAI({ apiKey: key.key, baseURL: `${gw.url}/openai/v1`, maxRetries: 0 });
    const { data, response } = await client.decisions
      .create({ model: 'vendor/model-1.13', input: 'A one-line state.', questions: QUESTIONS })
      .withResponse();
    expect(data.answers).toHaveLength(400);
    expect(standIn.seen).toHaveLength(50);
    expect(response.headers.get('x-credits-used')).toBe('3');
    const after = await gw.keys.get(key.id);
    expect(after.ok && after.value.credits).toBeCloseTo(147, 9);
  });
});
