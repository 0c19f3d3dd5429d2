import type { Answer, Question, QuestionType } from '@decision-gateway/contract';
import type { QuestionBehaviour, UnsureRule } from './behaviour.ts';
import { box } from './box.ts';
import { choice } from './choice.ts';
import { noul } from './noul.ts';
import { score } from './score.ts';

/**
 * Every question type's behaviour, by type. The mapped type makes a type of the contract without
 * a module here a compile error.
 */
export const QUESTION_BEHAVIOURS: { readonly [T in QuestionType]: QuestionBehaviour<T> } = {
  choice,
  score,
  noul,
  box,
};

/** The behaviour of a question's own type, typed for that question. */
export function behaviourOf<Q extends Question>(question: Q): QuestionBehaviour<Q['type']> {
  // TypeScript cannot correlate `question.type` with the mapped entry; the registry's type guarantees it.
  return QUESTION_BEHAVIOURS[question.type] as unknown as QuestionBehaviour<Q['type']>;
}

/** The behaviour of a type, for code that holds the type alone (a decision record, a calibration group). */
export function behaviourOfType<T extends QuestionType>(type: T): QuestionBehaviour<T> {
  return QUESTION_BEHAVIOURS[type] as unknown as QuestionBehaviour<T>;
}

/** Whether an answer is unsure by a route's rule: its type says which threshold applies. */
export function isUnsure(answer: Answer, rule: UnsureRule): boolean {
  return behaviourOfType(answer.type).unsure(answer, rule);
}

/** An answer in one line of prose: `billing (p=0.80)`, `1.63 on 0 to 2 (likeliest 2, p=0.70)`, `true (p(true)=0.62)`. */
export function summarizeAnswer(answer: Answer): string {
  return behaviourOfType(answer.type).summarize(answer);
}

export * from './behaviour.ts';
export { BOX_IOU_HIT, intersectionOverUnion } from './box.ts';
export { choiceFromWeights, choiceLabels } from './choice.ts';
export { DEFAULT_NOUL_CRITERIA, NOUL_EVIDENCE_BIAS, noulFromWeights } from './noul.ts';
export { scoreFromWeights, scoreLegend } from './score.ts';
