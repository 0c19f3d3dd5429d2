import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { decodeStandardBase64 } from './base64.ts';

/** The rule as a regular expression: what the decoder's checks must agree with, text for text. */
const STANDARD_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

describe('decodeStandardBase64', () => {
  it('gives back the bytes an encoder wrote, of every length', () => {
    for (let size = 0; size <= 64; size++) {
      const bytes = randomBytes(size);
      expect(decodeStandardBase64(bytes.toString('base64'))?.equals(bytes)).toBe(true);
    }
  });

  it('refuses URL-safe characters, padding out of place, a short group, spaces and text outside ASCII', () => {
    // 'Ł' is U+0141: its low byte is 'A', which Node's own decoder would read.
    for (const text of [
      'QUJD-w==',
      'QUJD_w==',
      'QU=D',
      'QUJDR===',
      '====',
      'QUJ',
      'QUJD\nRA==',
      'QUJDRÉ==',
      'QUJŁ',
      'QUJDR一==',
    ])
      expect(decodeStandardBase64(text), text).toBeUndefined();
  });

  it('agrees with the rule as a regular expression on 200,000 random short texts', () => {
    const characters = [
      'A',
      'z',
      '0',
      '+',
      '/',
      '=',
      '-',
      '_',
      ' ',
      '\n',
      '.',
      '\u0000',
      'é',
      'Ł',
      'ī',
      '一',
    ];
    const disagreeing: string[] = [];
    for (let n = 0; n < 200_000; n++) {
      let text = '';
      for (let i = Math.floor(Math.random() * 17); i > 0; i--)
        text += characters[Math.floor(Math.random() * characters.length)];
      const decoded = decodeStandardBase64(text);
      if ((decoded !== undefined) !== STANDARD_BASE64.test(text)) disagreeing.push(text);
      else if (decoded !== undefined) expect(decoded.equals(Buffer.from(text, 'base64'))).toBe(true);
    }
    expect(disagreeing.slice(0, 5)).toEqual([]);
  });
});
