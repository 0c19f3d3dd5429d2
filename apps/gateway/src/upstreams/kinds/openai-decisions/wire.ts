import {
  type Content,
  type DecisionImage,
  type EvaluationRequest,
  isPlainObject,
  mimeTypeOf,
  type OpenAiAsWritten,
  type OpenAiDecisionRequest,
  type OpenAiQuestion,
  type Question,
  type QuestionOf,
  setOwn,
  type UsageDetails,
  unreachable,
} from '@decision-gateway/contract';
import { choiceLabels } from '@decision-gateway/questions';
import { Base64Text } from '../../json-body.ts';

/**
 * The gateway's request in OpenAI's Decisions shape, and OpenAI's answers in the gateway's
 * (docs/openai.md#the-upstream-kind-openai-decisions). Pure functions: the client only sends them.
 */

/** Content as text: a string as it is, JSON as its compact text. */
const textOf = (content: Content) => (typeof content === 'string' ? content : JSON.stringify(content));

/** The state as OpenAI's `input`: a string; objects (or an array of only objects) as one JSON part; else JSON text. */
export function inputOf(state: EvaluationRequest['state']): OpenAiDecisionRequest['input'] {
  if (typeof state === 'string') return state;
  const objects = !Array.isArray(state) || state.every((item) => isPlainObject(item));
  if (objects)
    return [{ role: 'user', content: [{ type: 'input_json', data: state as Record<string, unknown> }] }];
  return JSON.stringify(state);
}

/** An `input_image` part's URL: a data URL of the image's bytes (spliced in as bytes), or its URL. */
export function imageUrlOf(image: DecisionImage): string | Base64Text {
  return image.source === 'url'
    ? image.url
    : new Base64Text(image.base64, `data:${mimeTypeOf(image.format)};base64,`);
}

/**
 * The state and the images (docs/images.md#upstreams): one user message, the state's part first,
 * then each image as an `input_image` part after an `input_text` part `Image <ref>:`.
 */
export function inputWithImages(
  state: EvaluationRequest['state'],
  images: readonly DecisionImage[],
): SentInput {
  const stated = inputOf(state);
  const first =
    typeof stated === 'string'
      ? [{ type: 'input_text' as const, text: stated }]
      : ((stated[0] as { content: OpenAiUserPart[] }).content ?? []);
  const parts: (OpenAiUserPart | SentImagePart)[] = [...first];
  for (const image of images) {
    parts.push({ type: 'input_text', text: `Image ${image.ref}:` });
    parts.push({
      type: 'input_image',
      image_url: imageUrlOf(image),
      ...(image.detail !== undefined && { detail: image.detail }),
    });
  }
  return [{ role: 'user', content: parts }];
}

/** An image part as sent: its data URL's base64 is spliced into the body as bytes (json-body.ts). */
type SentImagePart = Omit<Extract<OpenAiUserPart, { type: 'input_image' }>, 'image_url'> & {
  image_url: string | Base64Text;
};
type SentInput =
  | OpenAiDecisionRequest['input']
  | { role: 'user'; content: (OpenAiUserPart | SentImagePart)[] }[];
/** The body as sent: OpenAI's request, with an image's data URL as a Base64Text. */
export type SentDecisionRequest = Omit<OpenAiDecisionRequest, 'input'> & { input: SentInput };

type OpenAiUserPart = Extract<
  Extract<OpenAiDecisionRequest['input'], unknown[]>[number],
  { role: 'user' }
>['content'] extends infer C
  ? C extends readonly (infer P)[]
    ? P
    : never
  : never;

/** One gateway question as OpenAI's, named by its ID. */
export function questionOf(id: string, question: Question): OpenAiQuestion {
  switch (question.type) {
    case 'noul':
      return predicateOf(id, question);
    case 'choice':
      return {
        type: 'choice',
        name: id,
        instructions:
          question.instructions === undefined || question.instructions === null
            ? 'Choose the option that fits best.'
            : textOf(question.instructions),
        choices: choiceLabels(question).map((label) => {
          const description = question.criteria[label];
          return description === null || description === undefined
            ? { value: label }
            : { value: label, description: textOf(description) };
        }),
      };
    case 'score':
      return {
        type: 'score',
        name: id,
        instructions:
          question.instructions === undefined || question.instructions === null
            ? 'Rate the input on these levels.'
            : textOf(question.instructions),
        levels: question.criteria.map((description, i) =>
          description === null
            ? { label: String(i) }
            : { label: String(i), description: textOf(description) },
        ),
      };
    case 'box':
      // Capabilities keep a box from this kind (docs/images.md): OpenAI's Decisions API has no box.
      throw new Error('a box question is never asked of an openai-decisions upstream');
    default:
      return unreachable(question);
  }
}

/** A noul as OpenAI's predicate: its criteria become "True if" and "False if" lines. */
function predicateOf(id: string, question: QuestionOf<'noul'>): OpenAiQuestion {
  const criteria = question.criteria ?? {};
  const lines = [
    criteria.true === undefined || criteria.true === null ? undefined : `True if: ${textOf(criteria.true)}`,
    criteria.false === undefined || criteria.false === null
      ? undefined
      : `False if: ${textOf(criteria.false)}`,
  ].filter((line): line is string => line !== undefined);
  const instructions = textOf(question.instructions);
  return {
    type: 'predicate',
    name: id,
    instructions: lines.length > 0 ? `${instructions}\n\n${lines.join('\n')}` : instructions,
  };
}

/**
 * The body sent: the caller's own when the request came through the OpenAI door (only `model` is
 * the upstream's), else the gateway's request mapped. The questions are those asked of this call
 * (a group, or the questions being escalated), in the request's order.
 */
export function decisionsBody(
  request: EvaluationRequest,
  model: string,
  original: OpenAiAsWritten | undefined,
  images?: readonly DecisionImage[],
): { body: SentDecisionRequest; ids: string[] } {
  const ids = Object.keys(request.questions);
  if (original) {
    const { body } = original;
    return {
      ids,
      body: {
        model,
        input: body.input,
        questions: ids.map((id) => original.questions.get(id) as OpenAiQuestion),
        ...(body.safety_identifier != null && { safety_identifier: body.safety_identifier }),
        ...(body.prompt_cache_key != null && { prompt_cache_key: body.prompt_cache_key }),
        ...(body.prompt_cache_options != null && { prompt_cache_options: body.prompt_cache_options }),
      },
    };
  }
  return {
    ids,
    body: {
      model,
      input: images && images.length > 0 ? inputWithImages(request.state, images) : inputOf(request.state),
      questions: ids.map((id) => questionOf(id, request.questions[id] as Question)),
    },
  };
}

type Read =
  | { ok: true; answers: Record<string, unknown>; usage: unknown; details?: UsageDetails }
  | { ok: false; reason: string };

/**
 * OpenAI's answers → the gateway's raw answers by question ID (the checks judge them next), matched
 * by `name`, or by position for a caller's own questions (which may have no name). Each question
 * exactly once; a type other than its question's, or `refusal`, makes the answer invalid.
 */
export function readDecision(
  body: unknown,
  ids: readonly string[],
  request: EvaluationRequest,
  byPosition: boolean,
): Read {
  if (!isPlainObject(body) || !Array.isArray(body.answers))
    return { ok: false, reason: 'answers: not an array' };
  const given = body.answers as unknown[];
  if (given.length !== ids.length)
    return { ok: false, reason: `answers: ${given.length} for ${ids.length} questions` };
  const answers: Record<string, unknown> = {};
  for (const [i, raw] of given.entries()) {
    if (!isPlainObject(raw)) return { ok: false, reason: `answers[${i}]: not an object` };
    const id = byPosition ? ids[i] : typeof raw.name === 'string' ? raw.name : undefined;
    if (id === undefined || !ids.includes(id))
      return { ok: false, reason: `answers[${i}]: no question named ${JSON.stringify(raw.name)}` };
    if (Object.hasOwn(answers, id)) return { ok: false, reason: `answers[${i}]: "${id}" answered twice` };
    const answer = answerOf(raw, request.questions[id] as Question);
    if (typeof answer === 'string') return { ok: false, reason: `answers[${i}]${answer}` };
    setOwn(answers, id, answer);
  }
  const usage = isPlainObject(body.usage) ? body.usage : undefined;
  const details = usage ? detailsOf(usage) : undefined;
  return { ok: true, answers, usage, ...(details && { details }) };
}

const TYPES = { predicate: 'noul', choice: 'choice', score: 'score' } as const;

/** One OpenAI answer in the gateway's shape, or the reason it answers another type. */
function answerOf(raw: Record<string, unknown>, question: Question): unknown {
  if (raw.type === 'refusal') return { type: 'refusal' };
  if (TYPES[raw.type as keyof typeof TYPES] !== question.type)
    return `.type: ${JSON.stringify(raw.type)} answers a ${question.type} question`;
  switch (question.type) {
    case 'noul':
      return { type: 'noul', noul: raw.probability };
    case 'choice':
    case 'score':
      return distributionAnswerOf(raw, question);
    default:
      return unreachable(question);
  }
}

/** A choice's or a score's answer: OpenAI lists `{value, probability}` pairs where the gateway keys them. */
function distributionAnswerOf(
  raw: Record<string, unknown>,
  question: QuestionOf<'choice'> | QuestionOf<'score'>,
): unknown {
  const pairs = Array.isArray(raw.probabilities) ? raw.probabilities : undefined;
  if (pairs === undefined) return '.probabilities: not an array';
  const probabilities: Record<string, unknown> = {};
  for (const pair of pairs) {
    if (!isPlainObject(pair)) return '.probabilities: an entry is not an object';
    const key = String(pair.value);
    if (Object.hasOwn(probabilities, key)) return `.probabilities: ${JSON.stringify(pair.value)} twice`;
    setOwn(probabilities, key, pair.probability);
  }
  return question.type === 'choice'
    ? {
        type: 'choice',
        choice: typeof raw.choice === 'boolean' ? String(raw.choice) : raw.choice,
        confidence: raw.confidence,
        probabilities,
      }
    : { type: 'score', score: raw.score, confidence: raw.confidence, probabilities };
}

function detailsOf(usage: Record<string, unknown>): UsageDetails | undefined {
  const input = isPlainObject(usage.input_tokens_details) ? usage.input_tokens_details : {};
  const output = isPlainObject(usage.output_tokens_details) ? usage.output_tokens_details : {};
  const count = (value: unknown) =>
    Number.isInteger(value) && (value as number) >= 0 ? (value as number) : 0;
  const details = {
    cached_tokens: count(input.cached_tokens),
    cache_write_tokens: count(input.cache_write_tokens),
    reasoning_tokens: count(output.reasoning_tokens),
  };
  return details.cached_tokens || details.cache_write_tokens || details.reasoning_tokens
    ? details
    : undefined;
}
