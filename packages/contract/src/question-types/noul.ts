import { z } from 'zod';
import { Content, Probability, requiredContent } from '../content.ts';

/** `noul`: estimate the probability that a yes/no statement is true. */

export const NoulInstructions = requiredContent('a noul question needs instructions');

export const NoulCriteria = z
  .strictObject({ true: Content.nullable().optional(), false: Content.nullable().optional() })
  .meta({ id: 'NoulCriteria', description: 'What makes the statement true and what makes it false.' });

export const NoulQuestion = z
  .strictObject({
    type: z.literal('noul'),
    instructions: NoulInstructions,
    criteria: NoulCriteria.nullable().optional(),
  })
  .meta({ id: 'NoulQuestion', description: 'Estimate the probability that a yes/no statement is true.' });
export type NoulQuestion = z.infer<typeof NoulQuestion>;

export const NoulAnswer = z
  .strictObject({
    type: z.literal('noul'),
    noul: Probability.meta({ description: 'Probability that the statement is true.' }),
  })
  .meta({ id: 'NoulAnswer' });
export type NoulAnswer = z.infer<typeof NoulAnswer>;

/** A noul's truth: whether the statement was true. */
export const NoulTruth = z.boolean();

export const noulExample = {
  state: ['I want my money back.'],
  questions: {
    refund: {
      type: 'noul',
      instructions: 'The customer asks for a refund.',
      criteria: { true: 'asks for money back' },
    },
  },
} satisfies { state: unknown; questions: Record<string, NoulQuestion> };
