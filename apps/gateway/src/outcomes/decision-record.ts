import {
  type Answer,
  type DecisionImage,
  type EvaluationRequest,
  type KeptImage,
  type Question,
  setOwn,
  type Truth,
} from '@decision-gateway/contract';
import {
  behaviourOf,
  behaviourOfType,
  type Judged,
  type KeptAnswer,
  type KeptQuestion,
} from '@decision-gateway/questions';
import { rawOf } from '../calibration-maps/calibrate.ts';
import { keptImages } from '../images/decision-images.ts';
import type { Attribution } from '../routing/route.ts';
import type { KeptDecision } from '../store/store.ts';

export type { Judged, KeptAnswer, KeptQuestion };

/**
 * A decision as the gateway keeps it for its outcomes (docs/outcomes.md): per question answered,
 * its type, the answer's distribution and the upstream that gave it (each type's module says what
 * it keeps), and for a question answered again (escalated, or declined first) the first upstream's
 * answer too. Kept as JSON beside the request id, written with the request's usage record.
 */
export type KeptQuestions = Record<string, KeptQuestion>;

function kept(question: Question, answer: Answer, upstream: string): KeptAnswer {
  if (answer.type !== question.type)
    throw new Error(`an answer of type ${answer.type} to a ${question.type} question`);
  const behaviour = behaviourOf(question);
  // A calibrated answer keeps the raw one too: measurement and the fits read the raw.
  const from = rawOf(answer);
  if (from === undefined) return { upstream, ...behaviour.keep(question, answer) };
  return {
    upstream,
    ...behaviour.keep(question, from.raw),
    calibrated: { ...behaviour.keep(question, answer), map: from.map },
  };
}

/** The questions answered (refused ones are not: they have no answer to judge). */
export function keptQuestions(
  request: EvaluationRequest,
  answers: Readonly<Record<string, Answer>>,
  upstream: string,
  options: {
    attribution?: Attribution;
    refused?: readonly string[];
    /** Each choice's options as its caller names them in truths, where a door's dialect types them. */
    truthValues?: ReadonlyMap<string, readonly (string | boolean)[]>;
  } = {},
): KeptQuestions {
  const result: KeptQuestions = {};
  for (const [id, answer] of Object.entries(answers)) {
    if (options.refused?.includes(id)) continue;
    const question = request.questions[id];
    if (question === undefined) continue;
    const by = options.attribution?.answeredBy[id] ?? upstream;
    const entry: KeptQuestion = {
      type: question.type,
      ...kept(question, answer, by),
      ...behaviourOf(question).keepQuestion(question),
    };
    const values = options.truthValues?.get(id);
    if (values) entry.values = [...values];
    const replaced = options.attribution?.replaced[id];
    if (replaced) entry.first = kept(question, replaced.answer, replaced.upstream);
    setOwn(result, id, entry);
  }
  return result;
}

/** A truth checked against its question: what it means, or why it does not fit. */
export function judgeTruth(
  question: KeptQuestion,
  truth: Truth,
): { ok: true; judged: Judged } | { ok: false; reason: string } {
  return behaviourOfType(question.type).judge(question, truth);
}

/**
 * The decision as a store keeps it for its outcomes: each question's answer, who gave it, what it
 * replaced, and how the caller names choice options in truths (docs/outcomes.md).
 */
export function decisionRecord(
  request: EvaluationRequest,
  outcome: {
    answers: Readonly<Record<string, Answer>>;
    upstream: string;
    refused: readonly string[];
    attribution?: Attribution;
  },
  truthValues?: ReadonlyMap<string, readonly (string | boolean)[]>,
  images?: readonly DecisionImage[],
): KeptDecision {
  const questions = keptQuestions(request, outcome.answers, outcome.upstream, {
    refused: outcome.refused,
    ...(outcome.attribution && { attribution: outcome.attribution }),
    ...(truthValues && { truthValues }),
  });
  return { questions: keptText(questions, images === undefined ? [] : keptImages(images)), reused: null };
}

/**
 * A kept decision's stored text: its questions (an object, as ever), or with images
 * `[questions, images]`, each image only `{ref, format, width, height, sha256}` (docs/images.md).
 * An array cannot be mistaken for the questions, so records written before images read as they were.
 */
export function keptText(questions: KeptQuestions, images: readonly KeptImage[]): string {
  return JSON.stringify(images.length === 0 ? questions : [questions, images]);
}

/** A kept decision's stored text, read back. */
export function readKept(text: string): { questions: KeptQuestions; images: KeptImage[] } {
  const kept = JSON.parse(text) as KeptQuestions | [KeptQuestions, KeptImage[]];
  return Array.isArray(kept) ? { questions: kept[0], images: kept[1] } : { questions: kept, images: [] };
}
