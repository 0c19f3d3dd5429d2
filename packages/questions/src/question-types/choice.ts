import type { ChoiceAnswer, ChoiceQuestion, Truth } from '@decision-gateway/contract';
import { argmax, choiceConfidence, keyed, normalize, probability } from '../distribution.ts';
import { checkConfidence, checkDistribution, fail } from '../distribution-checks.ts';
import { bm25Scores } from '../lexical/bm25.ts';
import { terms } from '../lexical/terms.ts';
import { CHOICE_LABELS, instructionsBlock, renderContent, SYSTEM_PROMPT } from '../prompt.ts';
import type { KeptQuestion, QuestionBehaviour } from './behaviour.ts';
import { scoreOneOf } from './one-of-options.ts';

/** The option labels of a choice, in the order the caller listed them. */
export function choiceLabels(question: ChoiceQuestion): string[] {
  return Object.keys(question.criteria);
}

/** A choice answer from one weight per label (in label order); the weights are renormalised. */
export function choiceFromWeights(question: ChoiceQuestion, weights: readonly number[]): ChoiceAnswer {
  const labels = choiceLabels(question);
  const p = normalize(weights);
  return {
    type: 'choice',
    choice: labels[argmax(p)] as string,
    confidence: choiceConfidence(p),
    // keyed keeps a label such as "__proto__" an ordinary key.
    probabilities: keyed(labels, p),
  };
}

export const choice: QuestionBehaviour<'choice'> = {
  optionCount: (question) => choiceLabels(question).length,

  render(stateText, question, offered) {
    if (offered.length > CHOICE_LABELS.length) {
      throw new RangeError(`a rendered choice takes at most ${CHOICE_LABELS.length} options`);
    }
    const names = choiceLabels(question);
    const labels = CHOICE_LABELS.slice(0, offered.length);
    const lines = offered.map((index, i) => {
      const option = names[index] as string;
      const description = renderContent(question.criteria[option]);
      return description === '' ? `${labels[i]}. ${option}` : `${labels[i]}. ${option}: ${description}`;
    });
    const user = [
      stateText,
      instructionsBlock(question.instructions, 'Which option fits the state best?'),
      `# Options\n${lines.join('\n')}`,
      `Answer with the letter of the best option (${labels[0]}–${labels[labels.length - 1]}) only.`,
    ].join('\n\n');
    return { system: SYSTEM_PROMPT, user, labels };
  },

  fromWeights: choiceFromWeights,

  check(question, raw, tolerance) {
    const labels = choiceLabels(question);
    const p = checkDistribution(raw.probabilities, labels, 'label', tolerance);
    if (!p.ok) return p;
    if (typeof raw.choice !== 'string' || !Object.hasOwn(question.criteria, raw.choice)) {
      return fail(`.choice: ${JSON.stringify(raw.choice)} is not a label of the question`);
    }
    const confidence = checkConfidence(raw.confidence, () => choiceConfidence(p.value));
    if (!confidence.ok) return confidence;
    return {
      ok: true,
      value: {
        type: 'choice',
        choice: raw.choice,
        confidence: confidence.value,
        probabilities: keyed(labels, p.value),
      },
    };
  },

  lexicalScores: (query, question) =>
    bm25Scores(
      query,
      choiceLabels(question).map((label) => terms(`${label}\n${renderContent(question.criteria[label])}`)),
    ),

  unsureBy: 'confidence',
  summarize: (answer) => `${answer.choice} (p=${probability(answer.probabilities[answer.choice] ?? 0)})`,

  unsure: (answer, rule) => rule.confidenceBelow !== undefined && answer.confidence < rule.confidenceBelow,

  keepQuestion: (question) => ({ labels: choiceLabels(question) }),

  keep: (question, answer) => ({
    p: choiceLabels(question).map((label) => answer.probabilities[label] ?? 0),
    confidence: answer.confidence,
  }),

  judge(kept: KeptQuestion, truth: Truth) {
    // One of its labels; through the OpenAI door, one of its values with its type.
    const index =
      kept.values !== undefined
        ? (kept.values as readonly Truth[]).indexOf(truth)
        : typeof truth === 'string'
          ? (kept.labels ?? []).indexOf(truth)
          : -1;
    if (index >= 0) return { ok: true, judged: { type: 'choice', index } };
    const allowed = (kept.values ?? kept.labels ?? []).map((v) => JSON.stringify(v)).join(', ');
    return { ok: false, reason: `the truth of this choice is one of ${allowed}` };
  },

  score: (kept, truth) => scoreOneOf(kept.p as number[], truth),
};
