import { z } from 'zod';
import { codePointLength, LIMITS } from './limits.ts';
import { isPlainObject, ownKeyRecord } from './own-key-record.ts';

/** A string whose length, counted in code points, lies in [min, max]. */
export function boundedText(min: number, max: number, what: string) {
  return z
    .string()
    .refine((text) => codePointLength(text) >= min, { error: `${what} must have at least ${min} character` })
    .refine((text) => codePointLength(text) <= max, { error: `${what} must have at most ${max} characters` })
    .meta({ minLength: min, maxLength: max });
}

const JsonObject = z.record(z.string(), z.unknown());
const JsonArray = z.array(z.unknown());

/** "Content" (docs/http-api.md#evaluate-post-v1systemone): a string, a JSON object or a JSON array. */
export const Content = z
  .union([z.string(), JsonObject, JsonArray], { error: 'must be a string, an object or an array' })
  .meta({ id: 'Content', description: 'A string, a JSON object or a JSON array.' });
export type Content = z.infer<typeof Content>;

export const QuestionId = boundedText(
  LIMITS.questionIdLength.min,
  LIMITS.questionIdLength.max,
  'a question ID',
);
export const OptionLabel = boundedText(
  LIMITS.optionLabelLength.min,
  LIMITS.optionLabelLength.max,
  'an option label',
);

export const ChoiceQuestion = z
  .strictObject({
    type: z.literal('choice'),
    instructions: Content.nullable().optional(),
    criteria: ownKeyRecord(OptionLabel, Content.nullable(), {
      min: LIMITS.choiceOptions.min,
      max: LIMITS.choiceOptions.max,
      tooFew: `a choice needs at least ${LIMITS.choiceOptions.min} options`,
      tooMany: `a choice takes at most ${LIMITS.choiceOptions.max} options`,
    }),
  })
  .meta({
    id: 'ChoiceQuestion',
    description: 'Select one option; criteria maps each option label to its description.',
  });

export const ScoreQuestion = z
  .strictObject({
    type: z.literal('score'),
    instructions: Content.nullable().optional(),
    criteria: z
      .array(Content.nullable())
      .min(LIMITS.scoreLevels.min, { error: `a score needs at least ${LIMITS.scoreLevels.min} levels` })
      .max(LIMITS.scoreLevels.max, { error: `a score takes at most ${LIMITS.scoreLevels.max} levels` }),
  })
  .meta({
    id: 'ScoreQuestion',
    description: 'Evaluate against ordered levels, lowest first; level numbers are array indices from 0.',
  });

const nonEmpty = (value: unknown) =>
  typeof value === 'string'
    ? value.length > 0
    : Array.isArray(value)
      ? value.length > 0
      : isPlainObject(value) && Object.keys(value).length > 0;

export const NoulInstructions = z
  .union([z.string(), JsonObject, JsonArray], {
    error: (issue) =>
      issue.input === undefined
        ? 'a noul question needs instructions'
        : 'must be a non-empty string, object or array',
  })
  .refine(nonEmpty, { error: 'must not be empty' });

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

export const QUESTION_TYPES = ['choice', 'score', 'noul'] as const;
export type QuestionType = (typeof QUESTION_TYPES)[number];

export const Question = z.discriminatedUnion('type', [ChoiceQuestion, ScoreQuestion, NoulQuestion], {
  error: (issue) =>
    isPlainObject(issue.input)
      ? `must be one of ${QUESTION_TYPES.join(', ')}`
      : 'must be an object (a question definition)',
});

export type ChoiceQuestion = z.infer<typeof ChoiceQuestion>;
export type ScoreQuestion = z.infer<typeof ScoreQuestion>;
export type NoulQuestion = z.infer<typeof NoulQuestion>;
export type Question = z.infer<typeof Question>;
export type QuestionInput = z.input<typeof Question>;
