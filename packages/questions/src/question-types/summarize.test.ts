import { describe, expect, it } from 'vitest';
import { summarizeAnswer } from './index.ts';

describe('summarizeAnswer: one line per answer, as the MCP door writes it', () => {
  it('a choice says its most probable label and that label’s probability (not its confidence margin)', () => {
    const line = summarizeAnswer({
      type: 'choice',
      choice: 'billing',
      confidence: 0.6,
      probabilities: { billing: 0.8, technical: 0.2 },
    });
    expect(line).toBe('billing (p=0.80)');
  });

  it('a score says its expected level on its scale, and its likeliest level with that level’s probability', () => {
    const line = summarizeAnswer({
      type: 'score',
      score: 1.625,
      confidence: 0.5,
      legend: { '0': 'low', '1': 'medium', '2': 'high' },
      probabilities: { '0': 0.075, '1': 0.225, '2': 0.7 },
    });
    expect(line).toBe('1.63 on 0–2 (likeliest 2, p=0.70)');
  });

  it('a noul says which way it leans and the probability of true', () => {
    expect(summarizeAnswer({ type: 'noul', noul: 0.62 })).toBe('true (p(true)=0.62)');
    expect(summarizeAnswer({ type: 'noul', noul: 0.1 })).toBe('false (p(true)=0.10)');
  });
});
