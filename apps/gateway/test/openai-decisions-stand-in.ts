import type { ServerResponse } from 'node:http';
import type { Decision, DecisionCreateParams } from 'openai/resources/decisions';
import { json, type SeenRequest } from './stand-in-upstream.ts';

/**
 * OpenAI's Decisions API as the official `openai` SDK types it (`resources/decisions.d.ts`):
 * answers in question order with each question's `name` (or null), probabilities as arrays rounded
 * to two decimals, usage with its details, `x-request-id`. Built from the SDK's types, not ours.
 */

type AskedQuestion = DecisionCreateParams['questions'][number];
type GivenAnswer = Decision['answers'][number];

/** Two decimals, as OpenAI rounds: a first value of `lead`, the rest shared (their sum may be off 1 by rounding). */
function rounded(count: number, lead: number): number[] {
  const rest = count > 1 ? (1 - lead) / (count - 1) : 0;
  return Array.from({ length: count }, (_, i) => Math.round((i === 0 ? lead : rest) * 100) / 100);
}

/** A plausible answer of OpenAI's to one question: the first option most likely. */
export function answerTo(question: AskedQuestion, lead = 0.7): GivenAnswer {
  const name = question.name ?? null;
  if (question.type === 'predicate') return { type: 'predicate', name, probability: lead };
  if (question.type === 'choice') {
    const p = rounded(question.choices.length, lead);
    return {
      type: 'choice',
      name,
      choice: question.choices[0]?.value as string | boolean,
      confidence: Math.round(lead * 100) / 100,
      probabilities: question.choices.map((choice, i) => ({
        value: choice.value,
        probability: p[i] as number,
      })),
    };
  }
  const p = rounded(question.levels.length, lead);
  return {
    type: 'score',
    name,
    score: Math.round(p.reduce((sum, pi, i) => sum + pi * i, 0) * 100) / 100,
    confidence: Math.round(lead * 100) / 100,
    probabilities: question.levels.map((level, value) => ({
      value,
      label: level.label,
      probability: p[value] as number,
    })),
  };
}

export function decision(
  body: DecisionCreateParams,
  answer: (question: AskedQuestion, index: number) => GivenAnswer = (question) => answerTo(question),
  inputTokens = 120,
): Decision {
  return {
    model: body.model,
    answers: body.questions.map(answer),
    usage: {
      input_tokens: inputTokens,
      input_tokens_details: { cached_tokens: 20, cache_write_tokens: 0 },
      output_tokens: 3,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: inputTokens + 3,
    },
  };
}

/** Answers a `POST /decisions` as OpenAI does, with its request id header. */
export function answerDecision(
  request: SeenRequest,
  res: ServerResponse,
  answer?: (question: AskedQuestion, index: number) => GivenAnswer,
) {
  res.setHeader('x-request-id', `req_openai_${request.body.questions.length}`);
  json(res, 200, decision(request.body as DecisionCreateParams, answer));
}

/** OpenAI's error body: `{"error": {message, type, param, code}}`. */
export function openAiErrorBody(message: string, type: string, code: string | null = null) {
  return { error: { message, type, param: null, code } };
}
