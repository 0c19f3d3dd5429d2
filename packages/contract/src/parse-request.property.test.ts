import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MODEL_ID } from './limits.ts';
import { parseEvaluationRequest } from './parse-request.ts';

/** Build an object from entries with every key as an own data property (`__proto__` included). */
function own(entries: [string, unknown][]): Record<string, unknown> {
  return Object.fromEntries(entries);
}

const json = fc.jsonValue({ maxDepth: 2 });
const content = fc.oneof(fc.string(), fc.dictionary(fc.string(), json), fc.array(json));
const description = fc.option(content, { nil: null });
const specialKeys = fc.constantFrom('__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf');
const questionId = fc.oneof(specialKeys, fc.string({ minLength: 1, maxLength: 128 }));
const label = fc.oneof(specialKeys, fc.string({ minLength: 1, maxLength: 40 }));

const choice = fc.record(
  {
    type: fc.constant('choice' as const),
    instructions: fc.option(content, { nil: null }),
    criteria: fc
      .uniqueArray(fc.tuple(label, description), { minLength: 2, maxLength: 30, selector: ([key]) => key })
      .map(own),
  },
  { requiredKeys: ['type', 'criteria'] },
);
const score = fc.record(
  {
    type: fc.constant('score' as const),
    instructions: fc.option(content, { nil: null }),
    criteria: fc.array(description, { minLength: 2, maxLength: 10 }),
  },
  { requiredKeys: ['type', 'criteria'] },
);
const nonEmptyContent = fc.oneof(
  fc.string({ minLength: 1 }),
  fc.dictionary(fc.string(), json, { minKeys: 1 }),
  fc.array(json, { minLength: 1 }),
);
const noul = fc.record(
  {
    type: fc.constant('noul' as const),
    instructions: nonEmptyContent,
    criteria: fc.option(fc.record({ true: description, false: description }, { requiredKeys: [] }), {
      nil: null,
    }),
  },
  { requiredKeys: ['type', 'instructions'] },
);
const question = fc.oneof(choice, score, noul);
const questions = fc
  .uniqueArray(fc.tuple(questionId, question), { minLength: 1, maxLength: 8, selector: ([id]) => id })
  .map(own);
const state = fc.oneof(fc.string(), fc.dictionary(fc.string(), json), fc.array(json));
const validRequest = fc.record({ model: fc.constant(MODEL_ID), state, questions });

const codeOf = (body: unknown) => {
  const parsed = parseEvaluationRequest(body);
  return parsed.ok ? 0 : parsed.error.code;
};

/** Turns a valid request into an invalid one, with the code that must come back. */
type Mutation = (body: Record<string, unknown>) => [unknown, number];

const brokenQuestions: unknown[] = [
  { type: 'choice', criteria: { only: null } },
  { type: 'choice', criteria: [] },
  { type: 'score', criteria: ['one'] },
  { type: 'score', criteria: Array.from({ length: 11 }, () => null) },
  { type: 'noul', instructions: '' },
  { type: 'noul' },
  { type: 'noul', instructions: 'x', criteria: { maybe: null } },
  { type: 'vote', criteria: {} },
  { type: 'noul', instructions: 'x', extra: true },
  42,
];

const mutations: fc.Arbitrary<Mutation>[] = [
  fc.integer({ min: 9, max: 20 }).map(
    (count): Mutation =>
      (body) => {
        const many = own(
          Array.from({ length: count }, (_, i) => [`extra${i}`, { type: 'noul', instructions: 'x' }]),
        );
        return [{ ...body, questions: many, model: 'wrong/model' }, 40002];
      },
  ),
  fc.constant<Mutation>((body) => [{ ...body, questions: {}, state: null }, 40002]),
  fc
    .string()
    .filter((model) => model !== MODEL_ID)
    .map(
      (model): Mutation =>
        (body) => [{ ...body, model, state: null }, 40003],
    ),
  fc.constantFrom(null, 1, true, false).map(
    (bad): Mutation =>
      (body) => [{ ...body, state: bad }, 40001],
  ),
  fc
    .string({ minLength: 1 })
    .filter((key) => !['model', 'state', 'questions'].includes(key))
    .map(
      (key): Mutation =>
        (body) => [own([...Object.entries(body), [key, 1]]), 40001],
    ),
  fc.constantFrom(...brokenQuestions).map(
    (broken): Mutation =>
      (body) => {
        const entries = Object.entries(body.questions as object);
        entries[0] = [entries[0]?.[0] ?? 'q', broken];
        return [{ ...body, questions: own(entries) }, 40001];
      },
  ),
  fc.constantFrom('model', 'state', 'questions').map(
    (field): Mutation =>
      (body) => {
        const { [field]: _dropped, ...rest } = body;
        return [rest, 40001];
      },
  ),
];

describe('parseEvaluationRequest properties', () => {
  it('accepts every valid request and returns it unchanged', () => {
    fc.assert(
      fc.property(validRequest, (body) => {
        const before = JSON.stringify(body);
        const parsed = parseEvaluationRequest(body);
        expect(parsed.ok ? 'ok' : parsed.error.message).toBe('ok');
        expect(parsed.ok && parsed.value).toBe(body);
        expect(JSON.stringify(body)).toBe(before);
      }),
      { numRuns: 300 },
    );
  });

  it('round-trips through JSON: ids and labels survive serialization and parsing', () => {
    fc.assert(
      fc.property(validRequest, (body) => {
        const again = JSON.parse(JSON.stringify(body));
        const parsed = parseEvaluationRequest(again);
        expect(parsed.ok).toBe(true);
        expect(Object.keys(again.questions)).toEqual(Object.keys(body.questions));
      }),
      { numRuns: 200 },
    );
  });

  it('refuses every mutated request with the code its mutation calls for', () => {
    fc.assert(
      fc.property(validRequest, fc.oneof(...mutations), (body, mutate) => {
        const [mutated, code] = mutate(body);
        expect(codeOf(mutated)).toBe(code);
      }),
      { numRuns: 500 },
    );
  });
});
