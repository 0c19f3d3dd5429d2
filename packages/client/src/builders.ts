import type { Content } from '@decision-gateway/contract';

/** Text or JSON given to a question: a string, an object or an array (docs/http-api.md#evaluate-post-v1systemone "content"). */
export type QuestionContent = Content;

export interface ChoiceDefinition<Criteria extends Record<string, QuestionContent | null>> {
  type: 'choice';
  instructions?: QuestionContent | null;
  criteria: Criteria;
}

export interface ScoreDefinition<Levels extends readonly (QuestionContent | null)[]> {
  type: 'score';
  instructions?: QuestionContent | null;
  criteria: Levels;
}

export interface NoulCriteria {
  true?: QuestionContent | null;
  false?: QuestionContent | null;
}

export interface NoulDefinition {
  type: 'noul';
  instructions: QuestionContent;
  criteria?: NoulCriteria | null;
}

export type QuestionDefinition =
  | ChoiceDefinition<Record<string, QuestionContent | null>>
  | ScoreDefinition<readonly (QuestionContent | null)[]>
  | NoulDefinition;

/**
 * A choice among named options: `criteria` maps each label to its description (or null).
 * The labels stay literal types, so the answer's `choice` is their union.
 */
export function choice<const Criteria extends Record<string, QuestionContent | null>>(
  instructions: QuestionContent | null,
  criteria: Criteria,
): ChoiceDefinition<Criteria> {
  return { type: 'choice', instructions, criteria };
}

/** A score over ordered levels, lowest first; the answer is keyed by level index ("0", "1", …). */
export function score<const Levels extends readonly (QuestionContent | null)[]>(
  instructions: QuestionContent | null,
  levels: Levels,
): ScoreDefinition<Levels> {
  return { type: 'score', instructions, criteria: levels };
}

/** The probability that a yes/no statement is true, with optional criteria for each side. */
export function noul(instructions: QuestionContent, criteria?: NoulCriteria | null): NoulDefinition {
  return criteria === undefined ? { type: 'noul', instructions } : { type: 'noul', instructions, criteria };
}
