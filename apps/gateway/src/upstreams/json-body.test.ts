import { randomBytes } from 'node:crypto';
import type { DecisionImage } from '@decision-gateway/contract';
import { describe, expect, it } from 'vitest';
import { Base64Text, jsonBody, withImagesSpliced } from './json-body.ts';

/** The payload with every Base64Text as its plain text: the JSON the body must be, byte for byte. */
const plainly = (payload: unknown) => Buffer.from(JSON.stringify(payload));

describe('jsonBody', () => {
  it('is the JSON of a payload without base64, as JSON.stringify writes it', () => {
    const payload = { state: 'naïve “quotes” \\ \n 一', questions: { q: { type: 'noul', criteria: null } } };
    expect(jsonBody(payload).equals(plainly(payload))).toBe(true);
  });

  it('splices each base64 text in, with or without a prefix, wherever it stands', () => {
    const one = new Base64Text(randomBytes(70_000).toString('base64'));
    const two = new Base64Text(randomBytes(5).toString('base64'), 'data:image/png;base64,');
    const payload = {
      model: 'm',
      state: 'é “x” 一',
      input: [{ role: 'user', content: [{ type: 'input_text', text: 'Image a:' }, { image_url: two }] }],
      assets: { 'a "b"': { type: 'image', data_base64: one }, again: one },
      tail: ['\u2028', 1, null],
    };
    const body = jsonBody(payload);
    expect(body.equals(plainly(payload))).toBe(true);
    expect(JSON.parse(body.toString()).input[0].content[1].image_url).toBe(
      `data:image/png;base64,${two.base64}`,
    );
  });

  it("writes a payload plainly when a caller's text holds the mark that stands for base64", () => {
    // The mark, as a Base64Text gives it while a body is being made (the first call; the second
    // is the plain way, taken since the spy's text holds no mark).
    const given: string[] = [];
    const spy = {
      toJSON: () => {
        given.push(new Base64Text('QQ==').toJSON());
        return 'x';
      },
    };
    expect(JSON.parse(jsonBody({ spy }).toString())).toEqual({ spy: 'x' });
    const [mark = ''] = given;
    expect(mark).toMatch(/^dg-base64-/);
    const payload = { state: mark, assets: { a: { data_base64: new Base64Text('QUJD') } } };
    expect(jsonBody(payload).equals(plainly(payload))).toBe(true);
    expect(JSON.parse(jsonBody(payload).toString())).toEqual({
      state: mark,
      assets: { a: { data_base64: 'QUJD' } },
    });
  });

  it('is its whole text wherever else it is made JSON', () => {
    const text = new Base64Text('QUJD', 'data:image/gif;base64,');
    expect(JSON.stringify({ url: text })).toBe('{"url":"data:image/gif;base64,QUJD"}');
  });

  describe('withImagesSpliced', () => {
    const base64 = randomBytes(30_000).toString('base64');
    const image = { ref: 'image-0', source: 'bytes', format: 'png', base64 } as DecisionImage;
    // A caller's body as its door parsed it (strings of its own, not the image's): the image as
    // inline data and as a data URL, under a "__proto__" member, beside text.
    const body = JSON.parse(
      `{"input": [{"type": "image", "data": "${base64}"}, {"type": "input_image", "image_url": "data:image/png;base64,${base64}"}],
        "questions": {"q": {"instructions": [{"text": "é “x”"}, {"url": "data:\\"odd\\n,${base64}"}]}},
        "__proto__": {"data": "${base64}"}}`,
    );

    it("takes an image's base64 and its data URLs as bytes, and writes the body as it was", () => {
      const sent = withImagesSpliced(body, [image]) as typeof body;
      expect(sent.input[0].data).toBeInstanceOf(Base64Text);
      expect(sent.input[1].image_url).toEqual(new Base64Text(base64, 'data:image/png;base64,'));
      expect(Object.hasOwn(sent, '__proto__')).toBe(true);
      // A prefix JSON would escape stays text.
      expect(typeof sent.questions.q.instructions[1].url).toBe('string');
      expect(jsonBody(sent).equals(plainly(body))).toBe(true);
    });

    it('leaves a body whose images are not given as bytes as the same value', () => {
      const url = { ref: 'image-0', source: 'url', url: 'https://example.com/a.png' } as DecisionImage;
      expect(withImagesSpliced(body, [url])).toBe(body);
      expect(withImagesSpliced(body, undefined)).toBe(body);
    });
  });
});
