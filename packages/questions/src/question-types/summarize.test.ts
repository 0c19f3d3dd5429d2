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
    expect(line).toBe('1.63 on 0 to 2 (likeliest 2, p=0.70)');
  });

  it('a noul says which way it leans and the probability of true', () => {
    expect(summarizeAnswer({ type: 'noul', noul: 0.62 })).toBe('true (p(true)=0.62)');
    expect(summarizeAnswer({ type: 'noul', noul: 0.1 })).toBe('false (p(true)=0.10)');
  });

  it('the words of every type’s line are plain ASCII (only a caller’s own labels can be otherwise), so the answer they are written into stays a one-byte string', () => {
    const lines = [
      summarizeAnswer({
        type: 'choice',
        choice: 'billing',
        confidence: 0.6,
        probabilities: { billing: 0.8, technical: 0.2 },
      }),
      summarizeAnswer({
        type: 'score',
        score: 0.5,
        confidence: 0.5,
        legend: { '0': 'low', '1': 'high' },
        probabilities: { '0': 0.5, '1': 0.5 },
      }),
      summarizeAnswer({ type: 'noul', noul: 0.5 }),
      summarizeAnswer({
        type: 'box',
        box: { top: 0.1, bottom: 0.9, left: 0.2, right: 0.8 },
        confidence: 0.7,
      }),
    ];
    for (const line of lines) expect(line).toMatch(/^[\x20-\x7e]+$/);
    expect(lines[3]).toBe('top 0.10, bottom 0.90, left 0.20, right 0.80 (confidence 0.70)');
  });
});
