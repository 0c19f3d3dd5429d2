import { describe, expect, it } from 'vitest';
import { parseOpenAiDecisionRequest } from './translate.ts';

/** A body as the door receives it: JSON text parsed, where `__proto__` is an ordinary own key. */
const bodyWithData = (data: string) =>
  JSON.parse(`{
    "model": "vendor/model-1.13",
    "input": [{ "role": "user", "content": [{ "type": "input_json", "data": ${data} }] }],
    "questions": [{ "type": "predicate", "name": "refund", "instructions": "Is this a refund request?" }]
  }`);

describe('parseOpenAiDecisionRequest: input_json data', () => {
  it('keeps every key of the caller’s JSON, __proto__ included, in the state and as written', () => {
    const parsed = parseOpenAiDecisionRequest(bodyWithData('{"__proto__": {"a": 1}, "order": 42}'));
    if (!parsed.ok) throw new Error(parsed.error.message);
    const { request, asWritten } = parsed.value;
    expect(Object.keys(request.state as object)).toEqual(['__proto__', 'order']);
    expect(JSON.stringify(request.state)).toBe('{"__proto__":{"a":1},"order":42}');
    expect(JSON.stringify(asWritten.body.input)).toContain('"data":{"__proto__":{"a":1},"order":42}');
  });

  it('still refuses data that is not an object or an array of objects', () => {
    const parsed = parseOpenAiDecisionRequest(bodyWithData('"text"'));
    if (parsed.ok) throw new Error('expected a refusal');
    expect(parsed.error.code).toBe(40001);
    expect(parsed.error.issues?.[0]?.path[0]).toBe('input');
  });
});

describe('parseOpenAiDecisionRequest: question names', () => {
  it('takes a question named __proto__ as an own question of the gateway’s request', () => {
    const parsed = parseOpenAiDecisionRequest(
      JSON.parse(`{
        "model": "vendor/model-1.13",
        "input": "Please refund the double charge.",
        "questions": [
          { "type": "predicate", "name": "__proto__", "instructions": "Is this a refund request?" },
          { "type": "predicate", "name": "constructor", "instructions": "Is it urgent?" }
        ]
      }`),
    );
    if (!parsed.ok) throw new Error(parsed.error.message);
    const { questions } = parsed.value.request;
    expect(Object.keys(questions)).toEqual(['__proto__', 'constructor']);
    expect(Object.getPrototypeOf(questions)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(questions, '__proto__')?.value).toMatchObject({ type: 'noul' });
  });
});
