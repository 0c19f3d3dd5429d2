import type {
  Answer,
  ChoiceAnswer,
  ChoiceQuestion,
  NoulAnswer,
  Question,
  ScoreAnswer,
  ScoreQuestion,
} from '@decision-gateway/contract';
import { argmax, choiceConfidence, expectedScore, normalize, scoreConfidence } from './distribution.ts';

/** The option labels of a choice, in the order the caller listed them. */
export function choiceLabels(question: ChoiceQuestion): string[] {
  return Object.keys(question.criteria);
}

/** `{"0": description of level 0, …}` as sent. */
export function scoreLegend(question: ScoreQuestion): ScoreAnswer['legend'] {
  return Object.fromEntries(question.criteria.map((description, i) => [String(i), description]));
}

/** A choice answer from one weight per label (in label order); the weights are renormalised. */
export function choiceFromWeights(question: ChoiceQuestion, weights: readonly number[]): ChoiceAnswer {
  const labels = choiceLabels(question);
  const p = normalize(weights);
  return {
    type: 'choice',
    choice: labels[argmax(p)] as string,
    confidence: choiceConfidence(p),
    // fromEntries defines own properties, so a label such as "__proto__" stays an ordinary key.
    probabilities: Object.fromEntries(labels.map((label, i) => [label, p[i] as number])),
  };
}

/** A score answer from one weight per level (lowest level first); the weights are renormalised. */
export function scoreFromWeights(question: ScoreQuestion, weights: readonly number[]): ScoreAnswer {
  const p = normalize(weights);
  return {
    type: 'score',
    score: expectedScore(p),
    confidence: scoreConfidence(p),
    legend: scoreLegend(question),
    probabilities: Object.fromEntries(p.map((pi, i) => [String(i), pi])),
  };
}

/** A noul answer from the weights of "true" and "false". */
export function noulFromWeights(trueWeight: number, falseWeight: number): NoulAnswer {
  const [pTrue] = normalize([trueWeight, falseWeight]);
  return { type: 'noul', noul: pTrue as number };
}

/** The answer a question gets from a distribution over its options/levels/[true, false]. */
export function answerFromWeights(question: Question, weights: readonly number[]): Answer {
  switch (question.type) {
    case 'choice':
      return choiceFromWeights(question, weights);
    case 'score':
      return scoreFromWeights(question, weights);
    case 'noul':
      return noulFromWeights(weights[0] ?? 0, weights[1] ?? 0);
  }
}
