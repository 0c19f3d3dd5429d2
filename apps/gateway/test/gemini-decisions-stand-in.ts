import type { Decisions } from '@google/genai';
import type { SeenRequest } from './stand-in-upstream.ts';

/**
 * Google's Gemini Decisions API as the official `@google/genai` package (3.3.0) types it
 * (`Decisions.CreateDecisionRequest` / `CreateDecisionResponse`): answers keyed by question ID,
 * confidence the top probability, a score's legend its levels. Built from the SDK's types, not ours.
 */

/** Google's answer to each question of a request seen by a stand-in: the first option most likely. */
export function googleAnswers(
  request: SeenRequest,
  usage: Decisions.CreateDecisionResponse['usage'] = {
    total_input_tokens: 321,
    total_output_tokens: 4,
    total_tokens: 325,
  },
): Decisions.CreateDecisionResponse {
  const asked: Decisions.CreateDecisionRequest = request.body;
  const answers: Record<string, Decisions.Answer> = {};
  for (const [id, question] of Object.entries(asked.questions)) {
    if (question.type === 'noul') answers[id] = { type: 'noul', noul: 0.8, confidence: 0.8 };
    if (question.type === 'choice') {
      const labels = Object.keys(question.criteria);
      const probabilities = Object.fromEntries(
        labels.map((l, i) => [l, i === 0 ? 0.7 : 0.3 / (labels.length - 1)]),
      );
      answers[id] = { type: 'choice', choice: labels[0] as string, probabilities, confidence: 0.7 };
    }
    if (question.type === 'score') {
      const n = question.criteria.length;
      answers[id] = {
        type: 'score',
        score: n - 1,
        probabilities: Object.fromEntries(question.criteria.map((_, i) => [String(i), i === n - 1 ? 1 : 0])),
        legend: Object.fromEntries(question.criteria.map((c, i) => [String(i), c])),
        confidence: 1,
      };
    }
  }
  return { answers, ...(usage && { usage }) };
}

/** Google's answer to an input it blocked: feedback and usage, no answers. */
export const blockedInput = (
  feedback: Decisions.PromptFeedback = { block_reason: 'safety', block_reason_message: 'unsafe input' },
): Decisions.CreateDecisionResponse => ({
  prompt_feedback: feedback,
  usage: { total_input_tokens: 57, total_output_tokens: 0, total_tokens: 57 },
});
