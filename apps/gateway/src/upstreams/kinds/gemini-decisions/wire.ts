import {
  type Content,
  type DecisionImage,
  type EvaluationRequest,
  type GeminiAsWritten,
  isPlainObject,
  mimeTypeOf,
  type Question,
  setOwn,
  unreachable,
} from '@decision-gateway/contract';
import { choiceLabels } from '@decision-gateway/questions';
import { Base64Text } from '../../json-body.ts';

/**
 * The gateway's request in Google's Gemini Decisions shape (`Decisions.CreateDecisionRequest` of
 * `@google/genai`), and Google's answers in the gateway's (docs/upstreams.md#googles-gemini-decisions-api).
 * Pure functions: the client only sends them.
 */

/** Content as text: a string as it is, JSON as its compact text. */
const textOf = (content: Content) => (typeof content === 'string' ? content : JSON.stringify(content));

type TextContent = { type: 'text'; text: string };
type ImageContent = { type: 'image'; mime_type?: string; data?: Base64Text; uri?: string };
export type GeminiInput = string | (TextContent | ImageContent)[];

/**
 * The state as Google's `input`: a string as it is, any other state as one text content of its
 * compact JSON; images after it, each after a text content `Image <ref>:` (docs/images.md).
 */
export function inputOf(
  state: EvaluationRequest['state'],
  images: readonly DecisionImage[] = [],
): GeminiInput {
  if (images.length === 0 && typeof state === 'string') return state;
  const contents: (TextContent | ImageContent)[] = [{ type: 'text', text: textOf(state) }];
  for (const image of images) {
    contents.push({ type: 'text', text: `Image ${image.ref}:` });
    contents.push(
      image.source === 'bytes'
        ? { type: 'image', mime_type: mimeTypeOf(image.format), data: new Base64Text(image.base64) }
        : { type: 'image', uri: image.url },
    );
  }
  return contents;
}

/** One gateway question as Google's; a `null` description is the label (choice) or `Level <i>` (score). */
export function questionOf(question: Question): Record<string, unknown> {
  switch (question.type) {
    case 'noul': {
      const criteria = question.criteria ?? {};
      const given = {
        ...(criteria.true != null && { true_description: textOf(criteria.true) }),
        ...(criteria.false != null && { false_description: textOf(criteria.false) }),
      };
      return {
        type: 'noul',
        instructions: textOf(question.instructions),
        ...(Object.keys(given).length > 0 && { criteria: given }),
      };
    }
    case 'choice':
      return {
        type: 'choice',
        instructions:
          question.instructions == null ? 'Choose the option that fits best.' : textOf(question.instructions),
        criteria: Object.fromEntries(
          choiceLabels(question).map((label) => {
            const description = question.criteria[label];
            return [label, description == null ? label : textOf(description)];
          }),
        ),
      };
    case 'score':
      return {
        type: 'score',
        instructions:
          question.instructions == null ? 'Rate the input on these levels.' : textOf(question.instructions),
        criteria: question.criteria.map((description, i) =>
          description === null ? `Level ${i}` : textOf(description),
        ),
      };
    case 'box':
      // Capabilities keep a box from this kind (docs/images.md): Google's Decisions API has no box.
      throw new Error('a box question is never asked of a gemini-decisions upstream');
    default:
      return unreachable(question);
  }
}

/**
 * The body of `POST {baseUrl}/{apiVersion}/decisions`, the questions keyed by the gateway's IDs:
 * the caller's own when the request came through the Gemini door (only `model` is the upstream's),
 * else the gateway's request mapped. The questions are those asked of this call (a group, or the
 * questions being escalated or asked again).
 */
export function decisionBody(
  request: EvaluationRequest,
  model: string,
  original: GeminiAsWritten | undefined,
  images?: readonly DecisionImage[],
) {
  const questions: Record<string, unknown> = {};
  for (const id of Object.keys(request.questions))
    setOwn(
      questions,
      id,
      original ? original.body.questions[id] : questionOf(request.questions[id] as Question),
    );
  return { model, input: original ? original.body.input : inputOf(request.state, images), questions };
}

type Read =
  | { ok: true; answers: Record<string, unknown>; usage: unknown; blocked?: Record<string, unknown> }
  | { ok: false; reason: string };

/**
 * Google's answers → the gateway's raw answers by question ID (the checks judge them next): every
 * ID exactly once. Google's `confidence` is the top probability, not the gateway's, so it is left
 * out and computed again. A blocked input (`prompt_feedback`, no answers) declines every question.
 */
export function readDecision(body: unknown, request: EvaluationRequest): Read {
  if (!isPlainObject(body)) return { ok: false, reason: 'the body is not an object' };
  const usage = readUsage(body.usage);
  if (usage === undefined) return { ok: false, reason: 'usage: missing' };
  const ids = Object.keys(request.questions);
  if (body.answers === undefined && isPlainObject(body.prompt_feedback))
    return {
      ok: true,
      usage,
      answers: Object.fromEntries(ids.map((id) => [id, { type: 'refusal' }])),
      blocked: body.prompt_feedback,
    };
  if (!isPlainObject(body.answers)) return { ok: false, reason: 'answers: not an object' };
  const given = body.answers;
  const answers: Record<string, unknown> = {};
  for (const id of Object.keys(given))
    if (!Object.hasOwn(request.questions, id))
      return { ok: false, reason: `answers: no question ${JSON.stringify(id)}` };
  for (const id of ids) {
    if (!Object.hasOwn(given, id)) return { ok: false, reason: `answers: ${JSON.stringify(id)} is missing` };
    const raw = given[id];
    if (!isPlainObject(raw)) return { ok: false, reason: `answers.${id}: not an object` };
    const { confidence: _google, legend: _legend, ...ours } = raw;
    setOwn(answers, id, ours);
  }
  return { ok: true, answers, usage };
}

/** Google's `total_input_tokens` and `total_output_tokens` as the gateway's usage; undefined when absent. */
function readUsage(usage: unknown): { input_tokens: unknown; output_tokens: unknown } | undefined {
  if (!isPlainObject(usage) || usage.total_input_tokens === undefined) return undefined;
  return { input_tokens: usage.total_input_tokens, output_tokens: usage.total_output_tokens ?? 0 };
}
