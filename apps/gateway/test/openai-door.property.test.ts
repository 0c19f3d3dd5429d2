import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, post, startGateway, type TestGateway } from './harness.ts';

// Fuzzing the OpenAI door as the seed door is fuzzed: whatever the body, never a 5xx, and every
// answer is either OpenAI's success shape or its error body with the gateway's code.

const text = fc.oneof(fc.string({ maxLength: 40 }), fc.constant(''), fc.constant('#0'), fc.constant('true'));
const part = fc.oneof(
  fc.record({ type: fc.constant('input_text'), text }),
  fc.record({
    type: fc.constant('input_json'),
    data: fc.oneof(fc.object(), fc.array(fc.object()), fc.jsonValue()),
  }),
  fc.record({ type: fc.constant('input_image'), image_url: text }),
  fc.record({ type: text, text }),
);
const question = fc.oneof(
  fc.record(
    {
      type: fc.constant('predicate'),
      name: fc.option(text, { nil: undefined }),
      instructions: fc.oneof(text, fc.array(part, { maxLength: 3 })),
    },
    { requiredKeys: ['type', 'instructions'] },
  ),
  fc.record(
    {
      type: fc.constant('choice'),
      name: fc.option(text, { nil: undefined }),
      instructions: text,
      choices: fc.array(
        fc.record(
          {
            value: fc.oneof(text, fc.boolean(), fc.integer()),
            description: fc.option(text, { nil: undefined }),
          },
          { requiredKeys: ['value'] },
        ),
        { maxLength: 5 },
      ),
    },
    { requiredKeys: ['type', 'choices'] },
  ),
  fc.record({
    type: fc.constant('score'),
    instructions: text,
    levels: fc.array(
      fc.record(
        { label: text, description: fc.option(text, { nil: undefined }) },
        { requiredKeys: ['label'] },
      ),
      { maxLength: 12 },
    ),
  }),
  fc.jsonValue(),
);
const message = fc.record({
  role: fc.oneof(
    fc.constant('user'),
    fc.constant('system'),
    fc.constant('developer'),
    fc.constant('assistant'),
    text,
  ),
  content: fc.oneof(text, fc.array(part, { maxLength: 3 })),
  type: fc.option(fc.oneof(fc.constant('message'), fc.constant('function_call'), text), { nil: undefined }),
});
const body = fc.oneof(
  fc.record(
    {
      model: fc.oneof(fc.constant('vendor/model-1.13'), text, fc.jsonValue()),
      input: fc.oneof(text, fc.array(message, { maxLength: 3 }), fc.jsonValue()),
      questions: fc.oneof(fc.array(question, { maxLength: 6 }), fc.jsonValue()),
      safety_identifier: fc.option(fc.oneof(text, fc.jsonValue()), { nil: undefined }),
      extra: fc.option(fc.jsonValue(), { nil: undefined }),
    },
    { requiredKeys: ['model'] },
  ),
  fc.jsonValue(),
);

describe('the OpenAI door under arbitrary bodies', () => {
  let gw: TestGateway;
  let key: string;
  beforeAll(async () => {
    gw = await startGateway();
    key = (await gw.createKey({ credits: 1_000 })).key;
  });
  afterAll(async () => {
    await gw.close();
  });

  it('never answers 5xx, and always in OpenAI’s shape', async () => {
    await fc.assert(
      fc.asyncProperty(body, async (sent) => {
        const answer = await post(gw.url, '/openai/v1/decisions', sent, bearer(key));
        expect(answer.status).toBeLessThan(500);
        if (answer.status === 200) {
          expect(Array.isArray(answer.body.answers)).toBe(true);
          expect(answer.body.answers).toHaveLength((sent as { questions: unknown[] }).questions.length);
        } else {
          expect(answer.body.gateway_code).toBe(answer.status * 100 + (answer.body.gateway_code % 100));
          expect(typeof answer.body.error.message).toBe('string');
        }
      }),
      { numRuns: 300 },
    );
  });
});
