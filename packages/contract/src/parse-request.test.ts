import { describe, expect, it } from 'vitest';
import { LIMITS, MODEL_ID } from './limits.ts';
import { decodeJsonBody, nestingDepth, parseEvaluationRequest } from './parse-request.ts';
import { nouls, options, validRequest } from './test-helpers.ts';

function codeOf(body: unknown): number {
  const parsed = parseEvaluationRequest(body);
  return parsed.ok ? 0 : parsed.error.code;
}

function errorOf(body: unknown) {
  const parsed = parseEvaluationRequest(body);
  if (parsed.ok) throw new Error('expected a failure');
  return parsed.error;
}

function withQuestions(questions: unknown) {
  return { ...validRequest(), questions };
}

function withQuestion(question: unknown) {
  return withQuestions({ q: question });
}

describe('parseEvaluationRequest: valid requests', () => {
  it('accepts one question of each type and returns the caller object itself', () => {
    const body = validRequest();
    const parsed = parseEvaluationRequest(body);
    expect(parsed).toEqual({ ok: true, value: body });
    expect(parsed.ok && parsed.value).toBe(body);
  });

  it.each([
    ['a string', 'plain text'],
    ['an empty string', ''],
    ['an object', { a: 1 }],
    ['an array', [1, 'two']],
  ])('accepts state as %s', (_, state) => {
    expect(codeOf({ ...validRequest(), state })).toBe(0);
  });

  it('accepts media types of content: strings, objects, arrays and null descriptions', () => {
    const body = withQuestions({
      a: {
        type: 'choice',
        instructions: { ask: 'which?' },
        criteria: { x: ['list'], y: { obj: 1 }, z: null },
      },
      b: { type: 'score', instructions: null, criteria: [null, 'mid', { high: true }] },
      c: { type: 'noul', instructions: ['is', 'it'], criteria: { true: 'yes', false: null } },
      d: { type: 'noul', instructions: { statement: 'x' }, criteria: {} },
      e: { type: 'noul', instructions: 'x', criteria: null },
    });
    expect(codeOf(body)).toBe(0);
  });
});

describe('parseEvaluationRequest: boundaries', () => {
  it.each([
    [1, 0],
    [8, 0],
    [0, 40002],
    [9, 40002],
  ])('%i questions → code %i', (count, code) => {
    expect(codeOf(withQuestions(nouls(count)))).toBe(code);
  });

  it.each([
    [1, 40001],
    [2, 0],
    [255, 0],
    [256, 40001],
  ])('a choice with %i options → code %i', (count, code) => {
    expect(codeOf(withQuestion({ type: 'choice', criteria: options(count) }))).toBe(code);
  });

  it.each([
    [1, 40001],
    [2, 0],
    [10, 0],
    [11, 40001],
  ])('a score with %i levels → code %i', (count, code) => {
    expect(
      codeOf(
        withQuestion({ type: 'score', criteria: Array.from({ length: count }, (_, i) => `level ${i}`) }),
      ),
    ).toBe(code);
  });

  it.each([
    [0, 40001],
    [1, 0],
    [128, 0],
    [129, 40001],
  ])('a question ID of %i characters → code %i', (length, code) => {
    expect(codeOf(withQuestions({ ['x'.repeat(length)]: { type: 'noul', instructions: 'y' } }))).toBe(code);
  });

  it('counts ID length in code points, not UTF-16 units', () => {
    const emoji = '😀'.repeat(128); // 256 UTF-16 units, 128 code points
    expect(codeOf(withQuestions({ [emoji]: { type: 'noul', instructions: 'y' } }))).toBe(0);
    expect(codeOf(withQuestions({ [`${emoji}a`]: { type: 'noul', instructions: 'y' } }))).toBe(40001);
  });

  it.each([
    [256, 0],
    [257, 40001],
  ])('an option label of %i characters → code %i', (length, code) => {
    expect(
      codeOf(withQuestion({ type: 'choice', criteria: { ['l'.repeat(length)]: null, other: null } })),
    ).toBe(code);
  });

  it('refuses an empty option label', () => {
    expect(errorOf(withQuestion({ type: 'choice', criteria: { '': null, other: null } })).issues).toEqual([
      { path: ['questions', 'q', 'criteria', ''], message: 'an option label must have at least 1 character' },
    ]);
  });

  it('accepts 64 levels of nesting and refuses 65', () => {
    const nest = (levels: number) => {
      let value: unknown = [];
      for (let i = 1; i < levels; i++) value = [value];
      return value;
    };
    // The body is level 1, so a state array adds 63 levels at most.
    expect(codeOf({ ...validRequest(), state: nest(63) })).toBe(0);
    const deep = errorOf({ ...validRequest(), state: nest(64) });
    expect(deep.code).toBe(40001);
    expect(deep.message).toBe('the body nests deeper than 64 levels');
  });

  it('finds the deepest branch wherever it is, and counts members only', () => {
    expect(nestingDepth({ a: [1], b: { c: { d: [] } }, e: 'x' }, LIMITS.maxDepth)).toBe(4);
    expect(nestingDepth([[], [[[]]], {}], LIMITS.maxDepth)).toBe(4);
    expect(nestingDepth({ a: null, b: [null, 'x', 2] }, LIMITS.maxDepth)).toBe(2);
    expect(nestingDepth('leaf', LIMITS.maxDepth)).toBe(0);
    // What an object inherits is not its member.
    const inherited = Object.create({ deep: [[[[]]]] }) as object;
    expect(nestingDepth({ only: inherited }, LIMITS.maxDepth)).toBe(2);
  });

  it('handles very deep nesting without recursion', () => {
    let value: unknown = 'leaf';
    for (let i = 0; i < 200_000; i++) value = [value];
    expect(nestingDepth(value, LIMITS.maxDepth)).toBe(LIMITS.maxDepth + 1);
    expect(codeOf({ ...validRequest(), state: value })).toBe(40001);
  });
});

describe('parseEvaluationRequest: the documented request rules, with messages for people', () => {
  it.each<[string, unknown, (string | number)[], string]>([
    ['a missing model', { state: 's', questions: nouls(1) }, ['model'], 'is required'],
    ['a numeric model', { model: 13, state: 's', questions: nouls(1) }, ['model'], `must be "${MODEL_ID}"`],
    ['a missing state', { model: MODEL_ID, questions: nouls(1) }, ['state'], 'is required'],
    [
      'a null state',
      { model: MODEL_ID, state: null, questions: nouls(1) },
      ['state'],
      'must be a string, an object or an array',
    ],
    [
      'a numeric state',
      { model: MODEL_ID, state: 1, questions: nouls(1) },
      ['state'],
      'must be a string, an object or an array',
    ],
    [
      'a boolean state',
      { model: MODEL_ID, state: true, questions: nouls(1) },
      ['state'],
      'must be a string, an object or an array',
    ],
    ['missing questions', { model: MODEL_ID, state: 's' }, ['questions'], 'is required'],
    [
      'questions as an array',
      { model: MODEL_ID, state: 's', questions: [] },
      ['questions'],
      'must be an object, not an array',
    ],
    ['an unknown top-level field', { ...validRequest(), stream: true }, ['stream'], 'is not a known field'],
  ])('%s', (_, body, path, message) => {
    const error = errorOf(body);
    expect(error.code).toBe(40001);
    expect(error.issues).toContainEqual({ path, message });
  });

  it.each<[string, unknown, (string | number)[], string]>([
    ['an unknown type', { type: 'rank' }, ['type'], 'must be one of choice, score, noul, box'],
    ['a missing type', { instructions: 'x' }, ['type'], 'must be one of choice, score, noul, box'],
    ['a question that is not an object', 'noul', [], 'must be an object (a question definition)'],
    ['a choice without criteria', { type: 'choice' }, ['criteria'], 'is required'],
    [
      'a choice with array criteria',
      { type: 'choice', criteria: ['a', 'b'] },
      ['criteria'],
      'must be an object, not an array',
    ],
    [
      'a choice with one option',
      { type: 'choice', criteria: { only: null } },
      ['criteria'],
      'a choice needs at least 2 options',
    ],
    [
      'a choice option of a number',
      { type: 'choice', criteria: { a: 1, b: null } },
      ['criteria', 'a'],
      'must be a string, an object or an array',
    ],
    [
      'a score with object criteria',
      { type: 'score', criteria: { a: 1 } },
      ['criteria'],
      'must be an array, not an object',
    ],
    [
      'a score with one level',
      { type: 'score', criteria: ['x'] },
      ['criteria'],
      'a score needs at least 2 levels',
    ],
    ['a noul without instructions', { type: 'noul' }, ['instructions'], 'a noul question needs instructions'],
    [
      'a noul with empty instructions',
      { type: 'noul', instructions: '' },
      ['instructions'],
      'must not be empty',
    ],
    [
      'a noul with an empty object',
      { type: 'noul', instructions: {} },
      ['instructions'],
      'must not be empty',
    ],
    ['a noul with an empty array', { type: 'noul', instructions: [] }, ['instructions'], 'must not be empty'],
    [
      'a noul with null instructions',
      { type: 'noul', instructions: null },
      ['instructions'],
      'must be a non-empty string, object or array',
    ],
    [
      'noul criteria with another key',
      { type: 'noul', instructions: 'x', criteria: { maybe: 'x' } },
      ['criteria', 'maybe'],
      'is not a known field',
    ],
    [
      'noul criteria as a string',
      { type: 'noul', instructions: 'x', criteria: 'yes' },
      ['criteria'],
      'must be an object, not a string',
    ],
    [
      'an unknown question field',
      { type: 'noul', instructions: 'x', weight: 2 },
      ['weight'],
      'is not a known field',
    ],
  ])('%s', (_, question, path, message) => {
    const error = errorOf(withQuestion(question));
    expect(error.code).toBe(40001);
    expect(error.issues).toContainEqual({ path: ['questions', 'q', ...path], message });
  });

  it('writes the message as path: reason, and counts further issues', () => {
    const error = errorOf(withQuestions({ triage: { type: 'choice', criteria: { only: null } } }));
    expect(error.message).toBe('questions.triage.criteria: a choice needs at least 2 options');
    const two = errorOf({ ...validRequest(), state: null, extra: 1 });
    expect(two.message).toMatch(/ \(and 1 more\)$/);
    expect(two.issues).toHaveLength(2);
  });

  it('refuses a body that is not an object', () => {
    for (const body of [[], 'text', 3, null]) {
      expect(errorOf(body)).toMatchObject({
        code: 40001,
        issues: [{ path: [], message: 'the body must be a JSON object' }],
      });
    }
  });
});

describe('parseEvaluationRequest: precedence 40002 → 40003 → 40001', () => {
  it('reports the question count before an unknown model and other issues', () => {
    expect(codeOf({ model: 'other/model', state: null, questions: nouls(9), extra: 1 })).toBe(40002);
    expect(codeOf({ model: 'other/model', state: null, questions: {} })).toBe(40002);
  });

  it('reports an unknown model before other issues', () => {
    const error = errorOf({ model: 'vendor/model-1.12', state: null, questions: nouls(2), extra: 1 });
    expect(error.code).toBe(40003);
    expect(error.type).toBe('unknown_model');
    expect(error.message).toContain('vendor/model-1.12');
  });

  it('reports 40001 for a model that is not a string', () => {
    expect(codeOf({ model: null, state: 's', questions: nouls(1) })).toBe(40001);
  });
});

describe('question IDs such as __proto__ are ordinary IDs', () => {
  const raw = `{"model":"${MODEL_ID}","state":"s","questions":{
    "__proto__":{"type":"noul","instructions":"a"},
    "constructor":{"type":"choice","criteria":{"__proto__":"first","toString":null}},
    "toString":{"type":"score","criteria":["low","high"]},
    "hasOwnProperty":{"type":"noul","instructions":"b"}}}`;

  it('keeps every ID as an own key, in order, with its definition', () => {
    const decoded = decodeJsonBody(new TextEncoder().encode(raw));
    if (!decoded.ok) throw new Error('decode failed');
    const parsed = parseEvaluationRequest(decoded.value);
    if (!parsed.ok) throw new Error(parsed.error.message);
    const { questions } = parsed.value;
    expect(Object.keys(questions)).toEqual(['__proto__', 'constructor', 'toString', 'hasOwnProperty']);
    expect(Object.getPrototypeOf(questions)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(questions, '__proto__')?.value).toEqual({
      type: 'noul',
      instructions: 'a',
    });
    const constructorQuestion = questions['constructor' as string];
    expect(Object.keys(constructorQuestion?.type === 'choice' ? constructorQuestion.criteria : {})).toEqual([
      '__proto__',
      'toString',
    ]);
    expect(JSON.parse(JSON.stringify(questions))).toEqual(JSON.parse(raw).questions);
  });

  it('validates the definition under a __proto__ ID', () => {
    const body = JSON.parse(
      `{"model":"${MODEL_ID}","state":"s","questions":{"__proto__":{"type":"choice","criteria":{}}}}`,
    );
    expect(errorOf(body).issues).toEqual([
      { path: ['questions', '__proto__', 'criteria'], message: 'a choice needs at least 2 options' },
    ]);
  });

  it('counts a __proto__ ID toward the question limit', () => {
    const nine = { ...nouls(8) };
    Object.defineProperty(nine, '__proto__', {
      value: { type: 'noul', instructions: 'x' },
      enumerable: true,
    });
    expect(Object.keys(nine)).toHaveLength(9);
    expect(codeOf(withQuestions(nine))).toBe(40002);
  });

  it('counts a __proto__ key of content as content: a noul whose instructions hold only that key', () => {
    const body = JSON.parse(
      `{"model":"${MODEL_ID}","state":{"__proto__":{"a":1}},"questions":{"q":{"type":"noul","instructions":{"__proto__":false}}}}`,
    );
    const parsed = parseEvaluationRequest(body);
    expect(parsed.ok ? 'ok' : parsed.error.message).toBe('ok');
    expect(parsed.ok && parsed.value).toBe(body);
    expect(errorOf(withQuestion({ type: 'noul', instructions: {} })).issues).toEqual([
      { path: ['questions', 'q', 'instructions'], message: 'must not be empty' },
    ]);
  });

  it('refuses __proto__ as an unknown top-level field', () => {
    const body = JSON.parse(
      `{"model":"${MODEL_ID}","state":"s","questions":{"q":{"type":"noul","instructions":"a"}},"__proto__":{}}`,
    );
    expect(errorOf(body).issues).toEqual([{ path: ['__proto__'], message: 'is not a known field' }]);
  });
});

describe('decodeJsonBody', () => {
  const bytes = (text: string) => new TextEncoder().encode(text);

  it('decodes UTF-8 JSON', () => {
    expect(decodeJsonBody(bytes('{"a":"é"}'))).toEqual({ ok: true, value: { a: 'é' } });
  });

  it.each<[string, Uint8Array | undefined, RegExp]>([
    ['no body', undefined, /empty/],
    ['an empty body', new Uint8Array(), /empty/],
    ['a byte-order mark', new Uint8Array([0xef, 0xbb, 0xbf, 0x7b, 0x7d]), /byte-order mark/],
    ['invalid UTF-8', new Uint8Array([0x7b, 0x22, 0xff, 0x22, 0x7d]), /UTF-8/],
    ['invalid JSON', bytes('{"a":'), /not valid JSON/],
    ['trailing garbage', bytes('{} x'), /not valid JSON/],
  ])('refuses %s with 40000', (_, body, message) => {
    const decoded = decodeJsonBody(body);
    expect(decoded.ok).toBe(false);
    if (!decoded.ok) {
      expect(decoded.error.code).toBe(40000);
      expect(decoded.error.status).toBe(400);
      expect(decoded.error.message).toMatch(message);
    }
  });
});
