import { describe, expect, it } from 'vitest';
import { costMicro, fromMicro, pricingFromCredits, toMicro } from './credits.ts';

describe('credits maths', () => {
  it('bills input tokens at 1 credit per 1K by default, output at 0', () => {
    const pricing = pricingFromCredits(1, 0);
    expect(costMicro({ input_tokens: 412, output_tokens: 999 }, pricing)).toBe(412_000);
    expect(fromMicro(412_000)).toBe(0.412);
  });

  it('rounds half up to whole micro-credits', () => {
    const pricing = pricingFromCredits(0.0015, 0); // 1.5 micro-credits per token
    expect(costMicro({ input_tokens: 1, output_tokens: 0 }, pricing)).toBe(2);
    expect(costMicro({ input_tokens: 3, output_tokens: 0 }, pricing)).toBe(5); // 4.5 → 5
    expect(costMicro({ input_tokens: 2, output_tokens: 0 }, pricing)).toBe(3);
  });

  it('adds output tokens at their own price, exactly for large counts', () => {
    const pricing = pricingFromCredits(1000, 1000);
    expect(costMicro({ input_tokens: 9_000_000, output_tokens: 1 }, pricing)).toBe(9_000_001_000_000);
  });

  it('converts credits to micro-credits without float drift', () => {
    expect(toMicro(0.1 + 0.2)).toBe(300_000);
    expect(toMicro(99.845)).toBe(99_845_000);
  });
});
