import type { Content } from '@decision-gateway/contract';
import { type ImageFormat, inspectImage } from '@decision-gateway/contract/image-facts';

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

export interface BoxDefinition {
  type: 'box';
  instructions: QuestionContent;
}

export type QuestionDefinition =
  | ChoiceDefinition<Record<string, QuestionContent | null>>
  | ScoreDefinition<readonly (QuestionContent | null)[]>
  | NoulDefinition
  | BoxDefinition;

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

/**
 * Where in an image something is (docs/images.md#the-box-question): only in a request that carries
 * an image. The answer is a box (fractions of the image from its top-left corner) and a confidence;
 * it always comes, even where the thing is absent, so ask a `noul` beside it.
 */
export function box(instructions: QuestionContent): BoxDefinition {
  return { type: 'box', instructions };
}

/** An image as a request's `assets` entry (System One `jev-1.14.0`'s shape). */
export interface ImageAssetDefinition {
  type: 'image';
  format: ImageFormat;
  data_base64: string;
}

/**
 * An image for `assets`, from its bytes: the format is read from them (PNG, JPEG or WebP) unless
 * given; the gateway reads it again and refuses bytes that contradict it. Works in browsers too.
 */
export function image(bytes: Uint8Array, format?: ImageFormat): ImageAssetDefinition {
  const found = inspectImage(bytes);
  if (!found.ok) throw new TypeError(`image(): ${found.reason}`);
  return { type: 'image', format: format ?? found.value.format, data_base64: toBase64(bytes) };
}

/** Standard base64 in any runtime: Buffer where there is one, else btoa over 32 KiB slices. */
function toBase64(bytes: Uint8Array): string {
  const NodeBuffer = (globalThis as { Buffer?: { from(b: Uint8Array): { toString(e: 'base64'): string } } })
    .Buffer;
  if (NodeBuffer) return NodeBuffer.from(bytes).toString('base64');
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000)
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}
