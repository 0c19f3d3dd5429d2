import type {
  Answer,
  EvaluationRequest,
  OpenAiOriginal,
  QuestionType,
  Truth,
} from '@decision-gateway/contract';
import type { Attribution } from '../upstreams/route.ts';

/**
 * A decision as the gateway keeps it for its outcomes (README.md#outcomes-and-calibration): per
 * question answered, its type, the answer's distribution and the upstream that gave it, and for a
 * question answered again (escalated, or declined first) the first upstream's answer too. Kept as
 * JSON beside the request id, written with the request's usage record.
 */
export interface KeptAnswer {
  /** The upstream that answered, by configured name. */
  upstream: string;
  /** choice and score: the probabilities in label or level order; noul: the probability of yes. */
  p: number[] | number;
  confidence?: number;
  /** score: the expected level, Σ i·pᵢ. */
  score?: number;
}

export interface KeptQuestion extends KeptAnswer {
  type: QuestionType;
  /** choice: its labels, in the order of the question. */
  labels?: string[];
  /** choice through the OpenAI door: each label's value as the caller typed it (a string or a boolean). */
  values?: (string | boolean)[];
  /** The first upstream's answer, where a later one replaced it. */
  first?: KeptAnswer;
}

export type KeptQuestions = Record<string, KeptQuestion>;

function kept(
  question: EvaluationRequest['questions'][string],
  answer: Answer,
  upstream: string,
): KeptAnswer {
  if (answer.type === 'noul') return { upstream, p: answer.noul };
  if (answer.type === 'choice' && question.type === 'choice') {
    const labels = Object.keys(question.criteria);
    return { upstream, p: labels.map((l) => answer.probabilities[l] ?? 0), confidence: answer.confidence };
  }
  if (answer.type === 'score' && question.type === 'score')
    return {
      upstream,
      p: question.criteria.map((_, i) => answer.probabilities[String(i)] ?? 0),
      confidence: answer.confidence,
      score: answer.score,
    };
  throw new Error(`an answer of type ${answer.type} to a ${question.type} question`);
}

/** The questions answered (refused ones are not: they have no answer to judge). */
export function keptQuestions(
  request: EvaluationRequest,
  answers: Readonly<Record<string, Answer>>,
  upstream: string,
  options: { attribution?: Attribution; refused?: readonly string[]; original?: OpenAiOriginal } = {},
): KeptQuestions {
  const result: KeptQuestions = {};
  for (const [id, answer] of Object.entries(answers)) {
    if (options.refused?.includes(id)) continue;
    const question = request.questions[id];
    if (question === undefined) continue;
    const by = options.attribution?.answeredBy[id] ?? upstream;
    const entry: KeptQuestion = { type: question.type, ...kept(question, answer, by) };
    if (question.type === 'choice') {
      entry.labels = Object.keys(question.criteria);
      const asked = options.original?.questions.get(id);
      if (asked?.type === 'choice') entry.values = asked.choices.map((c) => c.value);
    }
    const replaced = options.attribution?.replaced[id];
    if (replaced) entry.first = kept(question, replaced.answer, replaced.upstream);
    result[id] = entry;
  }
  return result;
}

/** A truth as judged: the index of the true label or level, or the noul's boolean. */
export type Judged = { type: 'choice' | 'score'; index: number } | { type: 'noul'; value: boolean };

/** A truth checked against its question: what it means, or why it does not fit. */
export function judgeTruth(
  question: KeptQuestion,
  truth: Truth,
): { ok: true; judged: Judged } | { ok: false; reason: string } {
  if (question.type === 'noul')
    return typeof truth === 'boolean'
      ? { ok: true, judged: { type: 'noul', value: truth } }
      : { ok: false, reason: 'the truth of a noul is true or false' };
  if (question.type === 'score') {
    const levels = (question.p as number[]).length;
    return Number.isInteger(truth) && (truth as number) >= 0 && (truth as number) < levels
      ? { ok: true, judged: { type: 'score', index: truth as number } }
      : { ok: false, reason: `the truth of this score is a level index from 0 to ${levels - 1}` };
  }
  // A choice: one of its labels; through the OpenAI door, one of its values with its type.
  const index =
    question.values !== undefined
      ? (question.values as readonly Truth[]).indexOf(truth)
      : typeof truth === 'string'
        ? (question.labels ?? []).indexOf(truth)
        : -1;
  if (index >= 0) return { ok: true, judged: { type: 'choice', index } };
  const allowed = (question.values ?? question.labels ?? []).map((v) => JSON.stringify(v)).join(', ');
  return { ok: false, reason: `the truth of this choice is one of ${allowed}` };
}
