import type { ChoiceQuestion } from '@decision-gateway/contract';
import { describe, expect, it } from 'vitest';
import { CHOICE_LABELS, DEFAULT_NOUL_CRITERIA, renderContent, renderQuestion, stableJson } from './render.ts';
import { countTokens } from './tokens.ts';

describe('stableJson', () => {
  it('sorts keys at every level and pretty-prints', () => {
    expect(stableJson({ b: 1, a: { d: [{ z: 1, y: 2 }], c: null } })).toBe(
      '{\n  "a": {\n    "c": null,\n    "d": [\n      {\n        "y": 2,\n        "z": 1\n      }\n    ]\n  },\n  "b": 1\n}',
    );
  });

  it('renders the same content the same way whatever the key order', () => {
    expect(stableJson({ x: 1, y: 2 })).toBe(stableJson({ y: 2, x: 1 }));
  });

  it('keeps a __proto__ key', () => {
    expect(stableJson(JSON.parse('{"__proto__":{"b":1},"a":2}'))).toBe(
      '{\n  "__proto__": {\n    "b": 1\n  },\n  "a": 2\n}',
    );
  });

  it('renders strings as they are and nothing for null', () => {
    expect(renderContent('plain "text"')).toBe('plain "text"');
    expect(renderContent(null)).toBe('');
  });
});

describe('renderQuestion', () => {
  const state = { ticket: 'charged twice', id: 7 };

  it('renders a choice with letter labels, descriptions and the state as stable JSON', () => {
    const rendered = renderQuestion(state, {
      type: 'choice',
      instructions: 'Route the ticket.',
      criteria: { billing: 'payments, refunds', technical: null },
    });
    expect(rendered.labels).toEqual(['A', 'B']);
    expect(rendered.user).toBe(
      [
        '# State\n{\n  "id": 7,\n  "ticket": "charged twice"\n}',
        '# Question\nRoute the ticket.',
        '# Options\nA. billing: payments, refunds\nB. technical',
        'Answer with the letter of the best option (A–B) only.',
      ].join('\n\n'),
    );
  });

  it('renders a subset of a large choice, and refuses more than 26 options at once', () => {
    const criteria = Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`o${i}`, null]));
    const question: ChoiceQuestion = { type: 'choice', criteria };
    expect(renderQuestion('s', question, [27, 3]).user).toContain('A. o27\nB. o3');
    expect(() => renderQuestion('s', question)).toThrow(RangeError);
  });

  it('renders a subset of score levels under their own numbers', () => {
    const rendered = renderQuestion('text', { type: 'score', criteria: ['calm', 'cross', 'angry'] }, [0, 2]);
    expect(rendered.labels).toEqual(['0', '2']);
    expect(rendered.user).toContain('# Levels (lowest first)\n0. calm\n2. angry');
    expect(rendered.user).toContain('Answer with one of the level numbers 0, 2 only.');
  });

  it('renders score levels 0–n with their descriptions, lowest first', () => {
    const rendered = renderQuestion('text', { type: 'score', criteria: ['calm', null, 'angry'] });
    expect(rendered.labels).toEqual(['0', '1', '2']);
    expect(rendered.user).toContain('# Levels (lowest first)\n0. calm\n1.\n2. angry');
    expect(rendered.user).toContain('# Question\nWhich level fits the state best?');
  });

  it('renders a noul with Yes/No and default criteria where none are given', () => {
    const rendered = renderQuestion('text', {
      type: 'noul',
      instructions: 'It is a refund request.',
      criteria: { true: 'asks for money back' },
    });
    expect(rendered.labels).toEqual(['Yes', 'No']);
    expect(rendered.user).toContain(
      `# Criteria\nYes: asks for money back\nNo: ${DEFAULT_NOUL_CRITERIA.false}`,
    );
  });

  it('uses labels that are single tokens (letters and Yes/No also after a space)', () => {
    for (const label of [...CHOICE_LABELS, ...'0123456789'.split(''), 'Yes', 'No']) {
      expect(countTokens(label)).toBe(1);
    }
    for (const label of [...CHOICE_LABELS, 'Yes', 'No']) expect(countTokens(` ${label}`)).toBe(1);
  });
});

describe('countTokens', () => {
  it('counts BPE tokens, not words or characters', () => {
    expect(countTokens('')).toBe(0);
    expect(countTokens('hello')).toBe(1);
    const sentence = 'I was charged twice for my order and want a refund.';
    const count = countTokens(sentence);
    expect(count).toBeGreaterThan(8);
    expect(count).toBeLessThan(sentence.length / 2);
  });
});
