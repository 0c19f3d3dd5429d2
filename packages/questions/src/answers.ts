import type { Answer, Question } from '@decision-gateway/contract';
import { behaviourOf } from './question-types/index.ts';

/** The answer a question gets from a distribution over its options/levels/[true, false]. */
export function answerFromWeights(question: Question, weights: readonly number[]): Answer {
  return behaviourOf(question).fromWeights(question, weights);
}
