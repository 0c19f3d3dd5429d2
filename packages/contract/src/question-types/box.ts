import { z } from 'zod';
import { Probability, requiredContent } from '../content.ts';

/**
 * `box` (System One `jev-1.14.0`): where in an image something is. Only in a request that carries
 * an image. An upstream always returns a box, even where the thing is absent: ask a noul beside it.
 */

export const BoxInstructions = requiredContent('a box question needs instructions');

export const BoxQuestion = z
  .strictObject({ type: z.literal('box'), instructions: BoxInstructions })
  .meta({ id: 'BoxQuestion', description: 'Where in an image something is (a request with an image).' });
export type BoxQuestion = z.infer<typeof BoxQuestion>;

const Edge = z.number().min(0).max(1);

/** Fractions of the image from its top-left corner: `top ≤ bottom`, `left ≤ right`. */
export const Box = z
  .strictObject({ top: Edge, bottom: Edge, left: Edge, right: Edge })
  .refine((box) => box.top <= box.bottom, { error: 'top must not be below bottom', path: ['top'] })
  .refine((box) => box.left <= box.right, { error: 'left must not be right of right', path: ['left'] })
  .meta({ id: 'Box', description: 'Fractions of the image from its top-left corner, each in [0, 1].' });
export type Box = z.infer<typeof Box>;

export const BoxAnswer = z
  .strictObject({ type: z.literal('box'), box: Box, confidence: Probability })
  .meta({ id: 'BoxAnswer' });
export type BoxAnswer = z.infer<typeof BoxAnswer>;

/** A box's truth: where the thing really was. */
export const BoxTruth = Box;

export const boxExample = {
  state: { photo: 'parcel-1' },
  questions: { dent: { type: 'box', instructions: 'Where on the parcel in `photo` is the dent?' } },
  // A 4×4 PNG: a box is asked only in a request with an image.
  assets: {
    'parcel-1': {
      type: 'image',
      format: 'png',
      data_base64:
        'iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAACXBIWXMAAAPoAAAD6AG1e1JrAAAAEElEQVR42mOoiLKBIwbiOAC6wxDhrfkH8gAAAABJRU5ErkJggg==',
    },
  },
} satisfies { state: unknown; questions: Record<string, BoxQuestion>; assets: Record<string, unknown> };
