import { describe, expect, it } from 'vitest';
import { buildQuestions, EXAMPLE_QUESTION, retype } from './questions.ts';

describe('the question editor', () => {
  it('opens with an example choice that makes a valid request', () => {
    expect(buildQuestions([EXAMPLE_QUESTION])).toEqual({
      ok: true,
      questions: {
        team: {
          type: 'choice',
          instructions: 'Which team should handle this ticket?',
          criteria: { billing: 'payments, refunds', technical: 'bugs, crashes', sales: 'pricing, plans' },
        },
      },
    });
  });

  it('builds scores (levels lowest first) and nouls, keeping option order', () => {
    const score = { ...retype(EXAMPLE_QUESTION, 'score'), id: 'urgency', levels: ' low \n\nhigh' } as const;
    const noul = { id: 'refund', type: 'noul', instructions: 'Is it a refund?' } as const;
    const choice = { ...EXAMPLE_QUESTION, id: 'z', options: 'b\na: first' };
    expect(buildQuestions([score, noul, choice])).toMatchObject({
      ok: true,
      questions: {
        urgency: { type: 'score', criteria: ['low', 'high'] },
        refund: { type: 'noul', instructions: 'Is it a refund?' },
        z: { criteria: { b: null, a: 'first' } },
      },
    });
    const built = buildQuestions([choice]);
    expect(built.ok && Object.keys(built.questions.z as object)).toEqual([
      'type',
      'instructions',
      'criteria',
    ]);
  });

  it.each([
    [[{ ...EXAMPLE_QUESTION, options: 'only one' }], 'team: a choice needs at least 2 options'],
    [[{ id: 'q', type: 'score', instructions: '', levels: 'one' }], 'q: a score needs at least 2 levels'],
    [[{ id: 'q', type: 'noul', instructions: ' ' }], 'q: a noul needs its statement'],
    [[EXAMPLE_QUESTION, EXAMPLE_QUESTION], 'the ID "team" is used twice'],
    [[{ ...EXAMPLE_QUESTION, id: ' ' }], 'every question needs an ID'],
    [[], 'ask at least one question'],
  ] as const)('says what is wrong: %#', (editor, problem) => {
    expect(buildQuestions(editor as never)).toEqual({ ok: false, problem });
  });
});
