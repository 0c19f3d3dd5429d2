import type { Questions } from '@decision-gateway/contract';
import { describe, expect, it } from 'vitest';
import { checkAnswers, checkUsage } from './checks.ts';

const questions: Questions = {
  triage: { type: 'choice', criteria: { billing: 'payments', technical: 'bugs' } },
  urgency: { type: 'score', criteria: ['low', 'mid', 'high'] },
  refund: { type: 'noul', instructions: 'Is this a refund request?' },
};

const good = () => ({
  triage: {
    type: 'choice',
    choice: 'billing',
    confidence: 0.6,
    probabilities: { billing: 0.8, technical: 0.2 },
  },
  urgency: { type: 'score', score: 1.43, confidence: 0.355, probabilities: { '0': 0, '1': 0.57, '2': 0.43 } },
  refund: { type: 'noul', noul: 0.97 },
});

function reasonOf(answers: unknown): string {
  const checked = checkAnswers(questions, answers);
  if (checked.ok) throw new Error('expected the check to fail');
  return checked.reason;
}

describe('checkAnswers', () => {
  it('passes valid answers through and adds the legend as sent', () => {
    const checked = checkAnswers(questions, good());
    expect(checked).toEqual({
      ok: true,
      value: {
        ...good(),
        urgency: { ...good().urgency, legend: { '0': 'low', '1': 'mid', '2': 'high' } },
      },
    });
  });

  it('computes a missing confidence by the documented formula', () => {
    const answers = good() as Record<string, Record<string, unknown>>;
    delete answers.triage?.confidence;
    delete answers.urgency?.confidence;
    const checked = checkAnswers(questions, answers);
    if (!checked.ok) throw new Error(checked.reason);
    expect(checked.value.triage).toMatchObject({ confidence: expect.closeTo(0.6, 10) });
    expect(checked.value.urgency).toMatchObject({ confidence: expect.closeTo(0.355, 3) });
  });

  it('drops answers for IDs that were not asked, and unknown fields of an answer', () => {
    const checked = checkAnswers(questions, {
      ...good(),
      extra: { type: 'noul', noul: 1 },
      refund: { type: 'noul', noul: 0.5, why: 'x' },
    });
    if (!checked.ok) throw new Error(checked.reason);
    expect(Object.keys(checked.value)).toEqual(['triage', 'urgency', 'refund']);
    expect(checked.value.refund).toEqual({ type: 'noul', noul: 0.5 });
  });

  it('tolerates probabilities summing to 1 within 0.02', () => {
    const answers = good();
    answers.triage.probabilities = { billing: 0.8, technical: 0.215 };
    expect(checkAnswers(questions, answers).ok).toBe(true);
    answers.triage.probabilities = { billing: 0.8, technical: 0.23 };
    expect(reasonOf(answers)).toMatch(/^answers\.triage\.probabilities: sum to 1\.03/);
  });

  it.each<[string, (a: ReturnType<typeof good>) => unknown, string]>([
    ['not an object', () => [], 'answers: not an object'],
    ['a missing answer', (a) => ({ triage: a.triage, urgency: a.urgency }), 'answers.refund: missing'],
    [
      'a wrong type',
      (a) => ({ ...a, refund: { type: 'choice', noul: 0.5 } }),
      'answers.refund.type: "choice" answers a noul question',
    ],
    [
      'noul above 1',
      (a) => ({ ...a, refund: { type: 'noul', noul: 1.2 } }),
      'answers.refund.noul: 1.2 is not a probability in [0, 1]',
    ],
    [
      'noul as a string',
      (a) => ({ ...a, refund: { type: 'noul', noul: '0.5' } }),
      'answers.refund.noul: "0.5" is not a probability in [0, 1]',
    ],
    [
      'an alien choice label',
      (a) => ({ ...a, triage: { ...a.triage, choice: 'sales' } }),
      'answers.triage.choice: "sales" is not a label of the question',
    ],
    [
      'an alien probability key',
      (a) => ({ ...a, triage: { ...a.triage, probabilities: { billing: 0.8, technical: 0.1, sales: 0.1 } } }),
      'answers.triage.probabilities: "sales" is not a label of the question',
    ],
    [
      'a missing label',
      (a) => ({ ...a, triage: { ...a.triage, probabilities: { billing: 1 } } }),
      'answers.triage.probabilities: label "technical" is missing',
    ],
    [
      'a negative probability',
      (a) => ({ ...a, triage: { ...a.triage, probabilities: { billing: 1.1, technical: -0.1 } } }),
      'answers.triage.probabilities.billing: 1.1 is not a probability in [0, 1]',
    ],
    [
      'a confidence above 1',
      (a) => ({ ...a, triage: { ...a.triage, confidence: 2 } }),
      'answers.triage.confidence: 2 is not in [0, 1]',
    ],
    [
      'a score out of range',
      (a) => ({ ...a, urgency: { ...a.urgency, score: 2.5 } }),
      'answers.urgency.score: 2.5 is not in [0, 2]',
    ],
    [
      'a level that does not exist',
      (a) => ({ ...a, urgency: { ...a.urgency, probabilities: { '0': 0, '1': 0.5, '2': 0.4, '3': 0.1 } } }),
      'answers.urgency.probabilities: "3" is not a level of the question',
    ],
    [
      'missing probabilities',
      (a) => ({ ...a, urgency: { type: 'score', score: 1 } }),
      'answers.urgency.probabilities: not an object',
    ],
  ])('refuses %s', (_, mutate, reason) => {
    expect(reasonOf(mutate(good()))).toBe(reason);
  });

  it('keeps a choice labelled __proto__ as an ordinary key of its probabilities', () => {
    const questions: Questions = JSON.parse(
      '{"q":{"type":"choice","criteria":{"__proto__":"the first","other":"the second"}}}',
    );
    const checked = checkAnswers(
      questions,
      JSON.parse(
        '{"q":{"type":"choice","choice":"__proto__","probabilities":{"__proto__":0.75,"other":0.25}}}',
      ),
    );
    if (!checked.ok) throw new Error(checked.reason);
    const answer = checked.value.q as { probabilities: Record<string, number> };
    expect(Object.keys(answer.probabilities)).toEqual(['__proto__', 'other']);
    expect(Object.getPrototypeOf(answer.probabilities)).toBe(Object.prototype);
    expect(JSON.stringify(answer.probabilities)).toBe('{"__proto__":0.75,"other":0.25}');
  });

  it('answers a __proto__ ID as an ordinary key', () => {
    const proto: Questions = JSON.parse('{"__proto__":{"type":"noul","instructions":"x"}}');
    const checked = checkAnswers(proto, JSON.parse('{"__proto__":{"type":"noul","noul":0.25}}'));
    if (!checked.ok) throw new Error(checked.reason);
    expect(Object.keys(checked.value)).toEqual(['__proto__']);
    expect(JSON.stringify(checked.value)).toBe('{"__proto__":{"type":"noul","noul":0.25}}');
    expect(checkAnswers(proto, {})).toEqual({ ok: false, reason: 'answers.__proto__: missing' });
  });
});

describe('checkUsage', () => {
  it('accepts counts up to 2^31 − 1, what a usage record holds', () => {
    expect(checkUsage({ input_tokens: 2 ** 31 - 1, output_tokens: 2 ** 31 - 1 }).ok).toBe(true);
  });

  it('accepts non-negative integer counts', () => {
    expect(checkUsage({ input_tokens: 412, output_tokens: 0, cached: 3 })).toEqual({
      ok: true,
      value: { input_tokens: 412, output_tokens: 0 },
    });
  });

  it.each([
    undefined,
    null,
    {},
    { input_tokens: 1 },
    { input_tokens: -1, output_tokens: 0 },
    { input_tokens: 1.5, output_tokens: 0 },
    { input_tokens: '3', output_tokens: 0 },
    { input_tokens: 2 ** 31, output_tokens: 0 },
    { input_tokens: 0, output_tokens: 1e12 },
  ])('refuses %j', (usage) => {
    expect(checkUsage(usage).ok).toBe(false);
  });
});
