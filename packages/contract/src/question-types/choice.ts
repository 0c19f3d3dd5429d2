import { z } from 'zod';
import { boundedText, Content, Probability } from '../content.ts';
import { ownKeyRecord } from '../own-key-record.ts';

/** `choice`: select one option; criteria maps each option label to its description. */

export const CHOICE_LIMITS = {
  options: { min: 2, max: 255 },
  labelLength: { min: 1, max: 256 },
} as const;

export const OptionLabel = boundedText(
  CHOICE_LIMITS.labelLength.min,
  CHOICE_LIMITS.labelLength.max,
  'an option label',
);

export const ChoiceQuestion = z
  .strictObject({
    type: z.literal('choice'),
    instructions: Content.nullable().optional(),
    criteria: ownKeyRecord(OptionLabel, Content.nullable(), {
      min: CHOICE_LIMITS.options.min,
      max: CHOICE_LIMITS.options.max,
      tooFew: `a choice needs at least ${CHOICE_LIMITS.options.min} options`,
      tooMany: `a choice takes at most ${CHOICE_LIMITS.options.max} options`,
    }),
  })
  .meta({
    id: 'ChoiceQuestion',
    description: 'Select one option; criteria maps each option label to its description.',
  });
export type ChoiceQuestion = z.infer<typeof ChoiceQuestion>;

export const ChoiceAnswer = z
  .strictObject({
    type: z.literal('choice'),
    choice: z.string().meta({ description: 'The most probable label (ties: the label listed first).' }),
    confidence: Probability,
    probabilities: z.record(z.string(), Probability).meta({ description: 'Every label of the question.' }),
  })
  .meta({ id: 'ChoiceAnswer' });
export type ChoiceAnswer = z.infer<typeof ChoiceAnswer>;

/** A choice's truth: one of its labels (on an OpenAI-door decision, the value with its type). */
export const ChoiceTruth = z.union([z.string(), z.boolean()]);

export const choiceExample = {
  state: 'I was charged twice for my order.',
  questions: {
    team: {
      type: 'choice',
      instructions: 'Which team?',
      criteria: { billing: 'payments, refunds', technical: null },
    },
  },
} satisfies { state: unknown; questions: Record<string, ChoiceQuestion> };
