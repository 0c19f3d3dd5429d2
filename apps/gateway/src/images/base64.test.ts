import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { isStandardBase64 } from './base64.ts';

/** The rule as a regular expression: what the loop must agree with, character for character. */
const STANDARD_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

describe('isStandardBase64', () => {
  it('takes what an encoder writes, of every length of bytes', () => {
    for (let size = 1; size <= 64; size++)
      expect(isStandardBase64(randomBytes(size).toString('base64'))).toBe(true);
  });

  it('refuses URL-safe characters, padding out of place, a short group, and text outside ASCII', () => {
    for (const text of [
      'QUJD-w==',
      'QUJD_w==',
      'QU=D',
      'QUJDR===',
      '====',
      'QUJ',
      'QUJD\nRA==',
      'QUJDRÉ==',
      'QUJDR一==',
    ])
      expect(isStandardBase64(text), text).toBe(false);
  });

  it('agrees with the rule as a regular expression on 100,000 random short texts', () => {
    const characters = ['A', 'z', '0', '+', '/', '=', '-', '_', ' ', 'é', 'Ł', '一'];
    let disagreements = 0;
    for (let n = 0; n < 100_000; n++) {
      let text = '';
      for (let i = Math.floor(Math.random() * 13); i > 0; i--)
        text += characters[Math.floor(Math.random() * characters.length)];
      if (isStandardBase64(text) !== STANDARD_BASE64.test(text)) disagreements++;
    }
    expect(disagreements).toBe(0);
  });
});
