import type { ChoiceQuestion, ScoreQuestion } from '@decision-gateway/contract';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  argmax,
  choiceConfidence,
  expectedScore,
  levelNames,
  normalize,
  scoreConfidence,
  softmax,
} from './distribution.ts';
import { choiceFromWeights, noulFromWeights, scoreFromWeights } from './question-types/index.ts';

const choice = (labels: string[]): ChoiceQuestion => ({
  type: 'choice',
  criteria: Object.fromEntries(labels.map((l) => [l, null])),
});
const score = (levels: (string | null)[]): ScoreQuestion => ({ type: 'score', criteria: levels });

describe('worked numbers of the documented answer formulas', () => {
  it('score probabilities {0, 0.57, 0.43} → score 1.43, confidence ≈ 0.355', () => {
    const answer = scoreFromWeights(score(['low', 'mid', 'high']), [0, 0.57, 0.43]);
    expect(answer.score).toBeCloseTo(1.43, 10);
    expect(answer.confidence).toBeCloseTo(0.355, 3);
    expect(answer.probabilities).toEqual({ '0': 0, '1': 0.57, '2': 0.43 });
    expect(answer.legend).toEqual({ '0': 'low', '1': 'mid', '2': 'high' });
  });

  it('choice probabilities {0.8, 0.15, 0.05} → confidence 0.7', () => {
    const answer = choiceFromWeights(choice(['a', 'b', 'c']), [0.8, 0.15, 0.05]);
    expect(answer).toMatchObject({ type: 'choice', choice: 'a' });
    expect(answer.confidence).toBeCloseTo(0.7, 10);
  });

  it('a uniform choice has confidence 0; a certain one has 1', () => {
    expect(choiceConfidence([0.25, 0.25, 0.25, 0.25])).toBe(0);
    expect(choiceConfidence([0, 1, 0])).toBe(1);
  });

  it('a certain score has confidence 1; an even split between the ends has 0', () => {
    expect(scoreConfidence([0, 0, 1, 0])).toBe(1);
    // n=2: U = 0.5; m = 0; spread = 0.5 → 0
    expect(scoreConfidence([0.5, 0.5])).toBe(0);
    expect(scoreConfidence([0.5, 0, 0, 0, 0.5])).toBe(0);
  });

  it('ties go to the label listed first and to the lowest level', () => {
    expect(choiceFromWeights(choice(['z', 'a', 'm']), [1, 2, 2]).choice).toBe('a');
    expect(argmax([0.2, 0.4, 0.4])).toBe(1);
  });
});

describe('renormalisation', () => {
  it('scales weights to sum 1 and falls back to uniform when they cannot', () => {
    expect(normalize([2, 6])).toEqual([0.25, 0.75]);
    expect(normalize([0, 0, 0])).toEqual([1 / 3, 1 / 3, 1 / 3]);
    expect(normalize([1, Number.NaN])).toEqual([0.5, 0.5]);
    expect(normalize([1, -1])).toEqual([0.5, 0.5]);
  });

  it('softmax survives huge scores', () => {
    const p = softmax([1000, 999], 0.5);
    expect(p[0]).toBeCloseTo(1 / (1 + Math.exp(-2)), 12);
  });

  it('noul is the normalised weight of true', () => {
    expect(noulFromWeights(3, 1)).toEqual({ type: 'noul', noul: 0.75 });
  });

  it('keeps __proto__ as an ordinary label', () => {
    const question: ChoiceQuestion = {
      type: 'choice',
      criteria: JSON.parse('{"__proto__":null,"other":null}'),
    };
    const answer = choiceFromWeights(question, [3, 1]);
    expect(answer.choice).toBe('__proto__');
    expect(Object.keys(answer.probabilities)).toEqual(['__proto__', 'other']);
    expect(JSON.parse(JSON.stringify(answer)).probabilities).toEqual(
      JSON.parse('{"__proto__":0.75,"other":0.25}'),
    );
  });
});

describe('answer properties for any weights', () => {
  const weights = (min: number, max: number) =>
    fc.array(fc.double({ min: 0, max: 1e6, noNaN: true }), { minLength: min, maxLength: max });

  it('choice: probabilities sum to 1 within 1e-6, confidence in [0, 1], the choice is the argmax', () => {
    fc.assert(
      fc.property(weights(2, 255), (w) => {
        const labels = w.map((_, i) => `label ${i}`);
        const answer = choiceFromWeights(choice(labels), w);
        const p = Object.values(answer.probabilities);
        expect(Math.abs(p.reduce((a, b) => a + b, 0) - 1)).toBeLessThan(1e-6);
        expect(answer.confidence).toBeGreaterThanOrEqual(0);
        expect(answer.confidence).toBeLessThanOrEqual(1);
        expect(answer.probabilities[answer.choice]).toBe(Math.max(...p));
      }),
    );
  });

  it('score: expected index in [0, n−1], confidence in [0, 1]', () => {
    fc.assert(
      fc.property(weights(2, 10), (w) => {
        const answer = scoreFromWeights(score(w.map(() => null)), w);
        const p = Object.values(answer.probabilities);
        expect(Math.abs(p.reduce((a, b) => a + b, 0) - 1)).toBeLessThan(1e-6);
        expect(answer.score).toBeGreaterThanOrEqual(0);
        expect(answer.score).toBeLessThanOrEqual(w.length - 1 + 1e-9);
        expect(answer.score).toBeCloseTo(expectedScore(p), 12);
        expect(answer.confidence).toBeGreaterThanOrEqual(0);
        expect(answer.confidence).toBeLessThanOrEqual(1);
      }),
    );
  });
});

describe('levelNames', () => {
  it("names a score's levels by their indices, made once for any valid count", () => {
    expect(levelNames(3)).toEqual(['0', '1', '2']);
    expect(levelNames(10)).toBe(levelNames(10));
  });

  it('keeps no counts past the most a score may have, so its cache stays bounded', () => {
    expect(levelNames(12)).toHaveLength(12);
    expect(levelNames(12)).not.toBe(levelNames(12));
  });
});
