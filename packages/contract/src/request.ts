import { z } from 'zod';
import { boundedText, JsonObject } from './content.ts';
import { Assets } from './images.ts';
import { LIMITS, MODEL_ID } from './limits.ts';
import { ownKeyRecord } from './own-key-record.ts';
import { Question } from './question-types/index.ts';

export const QuestionId = boundedText(
  LIMITS.questionIdLength.min,
  LIMITS.questionIdLength.max,
  'a question ID',
);

export const Model = z.literal(MODEL_ID, {
  error: (issue) => (issue.input === undefined ? 'is required' : `must be "${MODEL_ID}"`),
});

export const State = z
  .union([z.string(), JsonObject, z.array(z.unknown())], {
    error: (issue) => (issue.input === undefined ? 'is required' : 'must be a string, an object or an array'),
  })
  .meta({ description: 'Decision context shared by every question.' });

export const Questions = ownKeyRecord(
  QuestionId,
  Question,
  {
    min: LIMITS.minQuestions,
    max: LIMITS.maxQuestions,
    tooFew: `needs at least ${LIMITS.minQuestions} question`,
    tooMany: `takes at most ${LIMITS.maxQuestions} questions`,
  },
  'Key: a client-chosen question ID. Value: the question definition.',
);

/** The body of `POST /v1/systemone` (docs/http-api.md#evaluate-post-v1systemone). Closed: any other field is an error. */
export const EvaluationRequest = z
  .strictObject({
    model: Model,
    state: State,
    questions: Questions,
    assets: Assets.optional().meta({
      description: 'Images the state, instructions or criteria mention by ref.',
    }),
  })
  .meta({ id: 'EvaluationRequest' });

export type EvaluationRequest = z.infer<typeof EvaluationRequest>;

/**
 * A request as its caller wrote it in a dialect of its own (OpenAI's, through its door): the
 * evaluation core carries it untouched, never reading it, to the upstream kind that speaks
 * `dialect`, which may send it as written.
 */
export interface AsWritten {
  readonly dialect: string;
}
export type Questions = EvaluationRequest['questions'];
export type State = EvaluationRequest['state'];
