import { z } from 'zod';
import { isPlainObject } from '../own-key-record.ts';
import { BoxAnswer, BoxQuestion, BoxTruth, boxExample } from './box.ts';
import { ChoiceAnswer, ChoiceQuestion, ChoiceTruth, choiceExample } from './choice.ts';
import { NoulAnswer, NoulQuestion, NoulTruth, noulExample } from './noul.ts';
import { ScoreAnswer, ScoreQuestion, ScoreTruth, scoreExample } from './score.ts';

/**
 * The question types, one module each (`choice.ts`, `score.ts`, `noul.ts`, `box.ts`): its question and
 * answer schemas, its limits, its truth and an example. Adding a type is a module here, its line in
 * each list below, and its behaviour in `@decision-gateway/questions` (question-types/); the
 * compiler then names every mapping that must learn it.
 */
export const QUESTION_TYPES = ['choice', 'score', 'noul', 'box'] as const;
export type QuestionType = (typeof QUESTION_TYPES)[number];

export const Question = z.discriminatedUnion(
  'type',
  [ChoiceQuestion, ScoreQuestion, NoulQuestion, BoxQuestion],
  {
    error: (issue) =>
      isPlainObject(issue.input)
        ? `must be one of ${QUESTION_TYPES.join(', ')}`
        : 'must be an object (a question definition)',
  },
);
export type Question = z.infer<typeof Question>;
export type QuestionInput = z.input<typeof Question>;

export const Answer = z.discriminatedUnion('type', [ChoiceAnswer, ScoreAnswer, NoulAnswer, BoxAnswer]);
export type Answer = z.infer<typeof Answer>;

/** The question and the answer of one type. */
export type QuestionOf<T extends QuestionType> = Extract<Question, { type: T }>;
export type AnswerOf<T extends QuestionType> = Extract<Answer, { type: T }>;

/**
 * A question's truth (docs/outcomes.md): which one a question takes is checked against the
 * decision it belongs to.
 */
export const Truth = z.union([ChoiceTruth, ScoreTruth, NoulTruth, BoxTruth], {
  error: 'must be a label, a level index, a boolean or a box',
});
export type Truth = z.infer<typeof Truth>;

/** One example decision per type, for the API reference. */
export const QUESTION_EXAMPLES = {
  choice: choiceExample,
  score: scoreExample,
  noul: noulExample,
  box: boxExample,
} satisfies Record<QuestionType, { state: unknown; questions: Record<string, Question>; assets?: unknown }>;

export * from './box.ts';
export * from './choice.ts';
export * from './noul.ts';
export * from './score.ts';
