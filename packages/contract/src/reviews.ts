import { z } from 'zod';
import { ownKeyRecord } from './own-key-record.ts';
import { Answer, Truth } from './question-types/index.ts';
import { Questions, State } from './request.ts';

/**
 * Review by a person (docs/review.md): a route marks its unsure answers, an operator gives the
 * truth, and the truth becomes an outcome (docs/outcomes.md) with `source: "review"`.
 */

export const REVIEW_STATUSES = ['open', 'done'] as const;

/** An image of a review item as its caller sent it: its bytes, or its URL. */
export const ReviewAsset = z.union([
  z.strictObject({
    type: z.literal('image'),
    format: z.enum(['png', 'jpeg', 'webp']),
    data_base64: z.string(),
  }),
  z.strictObject({ type: z.literal('image'), url: z.string() }),
]);

export const ReviewItem = z
  .strictObject({
    id: z.string().meta({ description: '`rev_…`' }),
    requestId: z.string(),
    keyId: z.string(),
    route: z.string(),
    at: z.iso.datetime({ offset: true }),
    status: z.enum(REVIEW_STATUSES),
    state: State,
    assets: z.record(z.string(), ReviewAsset).meta({ description: 'The images, by ref, as sent.' }),
    questions: Questions,
    answers: z.record(z.string(), Answer).meta({ description: 'The final answers, as the caller got them.' }),
    review: z.array(z.string()).meta({ description: 'The question IDs marked unsure.' }),
    outcomes: z.record(z.string(), Truth).nullable(),
    reviewer: z.string().nullable(),
    reviewedAt: z.iso.datetime({ offset: true }).nullable(),
  })
  .meta({ id: 'ReviewItem' });
export type ReviewItem = z.infer<typeof ReviewItem>;

export const ReviewList = z
  .strictObject({
    reviews: z.array(ReviewItem).meta({ description: 'Oldest first.' }),
    nextCursor: z.string().nullable(),
  })
  .meta({ id: 'ReviewList' });
export type ReviewList = z.infer<typeof ReviewList>;

/** `GET /admin/reviews`. */
export const ReviewQuery = z.strictObject({
  status: z.enum(REVIEW_STATUSES, { error: 'must be open or done' }).optional(),
  route: z.string().min(1).optional(),
  limit: z.coerce
    .number({ error: 'must be a number' })
    .int({ error: 'must be a whole number' })
    .min(1, { error: 'must be 1 to 100' })
    .max(100, { error: 'must be 1 to 100' })
    .default(20),
  cursor: z.string().min(1).optional(),
});
export type ReviewQuery = z.infer<typeof ReviewQuery>;

/** `POST /admin/reviews/{id}`: the truths of the item's questions, and who gave them. */
export const SubmitReviewBody = z
  .strictObject({
    // Keyed by question IDs, which may be any text, `__proto__` included.
    outcomes: ownKeyRecord(z.string(), Truth, {
      min: 1,
      tooFew: 'give the truth of at least one question',
    }),
    reviewer: z
      .string({ error: 'is required: who reviewed, 1 to 100 characters' })
      .min(1, { error: 'must be 1 to 100 characters' })
      .max(100, { error: 'must be 1 to 100 characters' }),
  })
  .meta({ id: 'SubmitReviewBody' });
export type SubmitReviewBody = z.infer<typeof SubmitReviewBody>;
