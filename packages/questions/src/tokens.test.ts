import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { countTokens } from './tokens.ts';

const exact = createRequire(import.meta.url)('gpt-tokenizer/encoding/o200k_base') as {
  countTokens(text: string): number;
};

describe('countTokens', () => {
  it('counts ordinary text exactly (o200k_base)', () => {
    const text = 'Hi, I was charged twice for my order last week. Please refund the double charge. '.repeat(
      50,
    );
    expect(countTokens(text)).toBe(exact.countTokens(text));
    expect(countTokens('')).toBe(0);
  });

  it('counts a long run without white space in slices: within one token per 64 characters of exact', () => {
    const blob = Buffer.from(Array.from({ length: 1500 }, (_, i) => (i * 7919) % 256)).toString('base64');
    const text = `before ${blob} between ${'x'.repeat(3000)} after`;
    const slices = Math.ceil(blob.length / 64) + Math.ceil(3000 / 64);
    expect(Math.abs(countTokens(text) - exact.countTokens(text))).toBeLessThanOrEqual(slices);
    // A run of one letter is where the cost used to explode: its slices count it exactly.
    expect(countTokens('x'.repeat(3000))).toBe(exact.countTokens('x'.repeat(3000)));
  });
});
