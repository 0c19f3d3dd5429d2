/** The one model this gateway serves (docs/http-api.md#evaluate-post-v1systemone); every default and check uses this constant. */
export const MODEL_ID = 'vendor/model-1.13';
export type ModelId = typeof MODEL_ID;

/** Every numeric limit of docs/http-api.md#evaluate-post-v1systemone, in one place. Lengths count Unicode code points. */
export const LIMITS = {
  maxBodyBytes: 32_768,
  maxDepth: 64,
  minQuestions: 1,
  maxQuestions: 8,
  questionIdLength: { min: 1, max: 128 },
  choiceOptions: { min: 2, max: 255 },
  optionLabelLength: { min: 1, max: 256 },
  scoreLevels: { min: 2, max: 10 },
} as const;

/** Length in Unicode code points (a surrogate pair is one character), as docs/http-api.md#evaluate-post-v1systemone counts lengths. */
export function codePointLength(text: string): number {
  let length = text.length;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    // A high surrogate followed by a low one is a single code point.
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        length--;
        i++;
      }
    }
  }
  return length;
}
