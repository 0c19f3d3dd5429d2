import type { EvaluationRequest } from '@decision-gateway/contract';

/**
 * The canonical text of a decision (docs/routes.md#decision-cache): equal for requests that must get the same answer,
 * different for any change that can change one.
 *
 * - Whitespace of the body is gone (the request is already parsed).
 * - Question IDs are sorted: their order changes nothing.
 * - Everything else keeps its order: a choice's options (ties go to the first label), a score's
 *   levels (they are numbered), and the keys inside the state, instructions and descriptions
 *   (the prompt renders them as sent).
 *
 * IDs travel as array entries, never as object keys, so `__proto__` is an ordinary ID here too.
 */
export function canonicalDecision(request: EvaluationRequest): string {
  const questions = Object.keys(request.questions)
    .sort()
    .map((id) => [id, request.questions[id]]);
  return JSON.stringify([request.model, request.state, questions]);
}
