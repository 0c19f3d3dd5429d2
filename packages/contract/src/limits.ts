/** The one model this gateway serves (docs/http-api.md#evaluate-post-v1systemone); every default and check uses this constant. */
export const MODEL_ID = 'vendor/model-1.13';
export type ModelId = typeof MODEL_ID;

/**
 * The request's numeric limits (docs/http-api.md#evaluate-post-v1systemone); each question type's own
 * stand in its module (question-types/). Lengths count Unicode code points.
 */
export const LIMITS = {
  maxBodyBytes: 32_768,
  maxDepth: 64,
  minQuestions: 1,
  maxQuestions: 8,
  questionIdLength: { min: 1, max: 128 },
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

/**
 * For the `default` of a switch over a closed union: the compiler proves it unreachable, so a new
 * member (a new question type) is a compile error at every switch that must handle it.
 */
export function unreachable(value: never): never {
  throw new Error(`unhandled case: ${JSON.stringify(value)}`);
}
