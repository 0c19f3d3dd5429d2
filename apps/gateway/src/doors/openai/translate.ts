import {
  type Answer,
  type EvaluationRequest,
  failure,
  type GatewayFailure,
  type ImageDetail,
  type ImageFormat,
  type Issue,
  isPlainObject,
  LIMITS,
  MODEL_ID,
  nestingDepth,
  OPENAI_LIMITS,
  type OpenAiAnswer,
  type OpenAiAsWritten,
  OpenAiDecisionRequest,
  type OpenAiQuestion,
  type OpenAiUsage,
  type Parsed,
  parseWorded,
  questionIdOf,
  setOwn,
  summarizeIssues,
  toIssues,
  type UsageDetails,
} from '@decision-gateway/contract';
import type { Translated } from '../../core/evaluation/index.ts';
import type { ImageSource } from '../../images/decision-images.ts';

/**
 * The OpenAI door's translation (docs/openai.md): OpenAI's request → the gateway's, and the
 * gateway's answers, usage and failures → OpenAI's. This gateway takes text, JSON and images: tool
 * items are refused with their path.
 */

const NO_TOOLS = 'this gateway takes text, JSON and images: tool calls are not accepted';

/**
 * The body of `POST /openai/v1/decisions` → the decision, or the gateway error of the first rule
 * broken in the order of docs/http-api.md#errors: 40002 (0 or more than 400 questions) → 40003
 * (another model) → 40001 (every other rule, each issue with its path).
 */
export function parseOpenAiDecisionRequest(body: unknown): Parsed<Translated<OpenAiAsWritten>> {
  if (!isPlainObject(body)) return invalid([{ path: [], message: 'the body must be a JSON object' }]);
  const { questions, model } = body;
  if (Array.isArray(questions)) {
    const count = questions.length;
    if (count < OPENAI_LIMITS.minQuestions || count > OPENAI_LIMITS.maxQuestions)
      return {
        ok: false,
        error: failure(
          'invalid_question_count',
          `questions: ${count} questions sent; a request takes ${OPENAI_LIMITS.minQuestions} to ${OPENAI_LIMITS.maxQuestions}`,
          { issues: [{ path: ['questions'], message: `has ${count} entries; 1 to 400 are accepted` }] },
        ),
      };
  }
  if (typeof model === 'string' && model !== MODEL_ID)
    return {
      ok: false,
      error: failure(
        'unknown_model',
        `model: unknown model "${model.slice(0, 64)}"; this gateway serves "${MODEL_ID}"`,
        {
          issues: [{ path: ['model'], message: `must be "${MODEL_ID}"` }],
        },
      ),
    };
  if (nestingDepth(body, LIMITS.maxDepth) > LIMITS.maxDepth)
    return invalid([{ path: [], message: `the body nests deeper than ${LIMITS.maxDepth} levels` }]);
  const unsupported = unsupportedParts(body);
  if (unsupported.length > 0) return invalid(unsupported);
  const parsed = parseWorded(OpenAiDecisionRequest, body);
  if (!parsed.success) return invalid(toIssues(parsed.error.issues));
  const request = parsed.data;
  const clashes = idClashes(request.questions);
  const images = imagesOf(request);
  if (clashes.length > 0 || images.issues.length > 0) return invalid([...clashes, ...images.issues]);
  return { ok: true, value: toGatewayRequest(request, images.sources) };
}

/** Tool items, wherever they stand: refused with their path. */
function unsupportedParts(body: Record<string, unknown>): Issue[] {
  const issues: Issue[] = [];
  if (Array.isArray(body.input))
    body.input.forEach((item, i) => {
      if (isPlainObject(item) && typeof item.type === 'string' && item.type !== 'message')
        issues.push({ path: ['input', i], message: NO_TOOLS });
    });
  return issues;
}

const DATA_URL = /^data:image\/(png|jpeg|webp);base64,/;

/**
 * Every `input_image` part, in order of appearance (the input, then each question's
 * instructions), named `image-<i>` (docs/images.md#names); more than 128, or a data URL of
 * another kind, is refused at its path.
 */
function imagesOf(body: OpenAiDecisionRequest): FoundImages {
  const found: FoundImages = { sources: [], issues: [] };
  if (typeof body.input !== 'string')
    for (const [m, message] of body.input.entries())
      if (typeof message.content !== 'string')
        for (const [p, part] of message.content.entries()) takeImage(found, part, ['input', m, 'content', p]);
  for (const [q, question] of body.questions.entries())
    if (typeof question.instructions !== 'string')
      for (const [p, part] of question.instructions.entries())
        takeImage(found, part, ['questions', q, 'instructions', p]);
  return found;
}

interface FoundImages {
  sources: ImageSource[];
  issues: Issue[];
}

/**
 * One content part: an image is added to what was found, or an issue at its path. Not a closure
 * in imagesOf: run through tsx, a closure made per request also names itself (docs/performance.md).
 */
function takeImage(
  { sources, issues }: FoundImages,
  part: { type: string; image_url?: string; detail?: ImageDetail | null },
  path: (string | number)[],
): void {
  if (part.type !== 'input_image' || part.image_url === undefined) return;
  const ref = `image-${sources.length}`;
  const detail = part.detail ?? undefined;
  if (sources.length === OPENAI_LIMITS.maxImages)
    issues.push({ path, message: `a request takes at most ${OPENAI_LIMITS.maxImages} images` });
  const url = part.image_url;
  if (url.startsWith('data:')) {
    const format = DATA_URL.exec(url)?.[1] as ImageFormat | undefined;
    if (format === undefined)
      issues.push({
        path: [...path, 'image_url'],
        message: 'a data URL must be data:image/png, image/jpeg or image/webp with ;base64,',
      });
    sources.push({
      ref,
      path: [...path, 'image_url'],
      detail,
      base64: url.slice(url.indexOf(',') + 1),
      declared: format,
    });
  } else sources.push({ ref, path: [...path, 'image_url'], detail, url });
}

/** Names repeated, an unnamed question's `#i` taken by a name, a choice's value twice or `true` beside `"true"`. */
function idClashes(questions: readonly OpenAiQuestion[]): Issue[] {
  const issues: Issue[] = [];
  const seen = new Map<string, number>();
  questions.forEach((question, i) => {
    const id = questionIdOf(question, i);
    const first = seen.get(id);
    if (first !== undefined)
      issues.push({
        path: ['questions', i, 'name'],
        message:
          question.name === undefined || questions[first]?.name === undefined
            ? `"${id}" is the ID of question ${question.name === undefined ? first : i}'s unnamed question: names must not take the form #<index> of another question`
            : `"${id}" names question ${first} already: names must be unique`,
      });
    else seen.set(id, i);
    if (question.type !== 'choice') return;
    const labels = new Map<string, number>();
    question.choices.forEach((choice, c) => {
      const label = String(choice.value);
      const earlier = labels.get(label);
      if (earlier === undefined) labels.set(label, c);
      else
        issues.push({
          path: ['questions', i, 'choices', c, 'value'],
          message:
            typeof choice.value === typeof question.choices[earlier]?.value
              ? `${JSON.stringify(choice.value)} is choice ${earlier} already: choices must be unique`
              : `${JSON.stringify(choice.value)} and ${JSON.stringify(question.choices[earlier]?.value)} are one label in this gateway: use one of them`,
        });
    });
  });
  return issues;
}

/** Where an image stood, the gateway's own request holds its name as text (docs/images.md#names). */
type Placeholders = { next: number };
const placeholder = (names: Placeholders) => `[image-${names.next++}]`;

/**
 * Text, JSON and image parts as the gateway's content: one text part is its text, one JSON part
 * its data, an image its `[image-<i>]`.
 */
function contentOf(
  instructions: OpenAiQuestion['instructions'],
  names: Placeholders,
): string | Record<string, unknown> | unknown[] {
  if (typeof instructions === 'string') return instructions;
  const parts = instructions.map((part) =>
    part.type === 'input_text' ? part.text : part.type === 'input_json' ? part.data : placeholder(names),
  );
  return parts.length === 1 ? (parts[0] as string | Record<string, unknown>) : parts;
}

/** The input as the gateway's state (docs/openai.md#for-other-kinds-of-upstream), images by their names. */
function stateOf(input: OpenAiDecisionRequest['input'], names: Placeholders): EvaluationRequest['state'] {
  if (typeof input === 'string') return input;
  const [first] = input;
  if (
    input.length === 1 &&
    first?.role === 'user' &&
    Array.isArray(first.content) &&
    first.content.length === 1
  ) {
    const part = first.content[0];
    if (part?.type === 'input_text') return part.text;
    if (part?.type === 'input_json') return part.data;
  }
  return input.map(({ role, content }) => ({
    role,
    content:
      typeof content === 'string'
        ? content
        : content.map((part) =>
            part.type === 'input_image' ? { type: 'input_text', text: placeholder(names) } : part,
          ),
  }));
}

function toGatewayRequest(body: OpenAiDecisionRequest, images: ImageSource[]): Translated<OpenAiAsWritten> {
  const questions: Record<string, unknown> = {};
  const byId = new Map<string, OpenAiQuestion>();
  // Named in the order imagesOf found them: the input first, then the questions.
  const names: Placeholders = { next: 0 };
  const state = stateOf(body.input, names);
  body.questions.forEach((question, i) => {
    const id = questionIdOf(question, i);
    byId.set(id, question);
    const instructions = contentOf(question.instructions, names);
    const own =
      question.type === 'predicate'
        ? { type: 'noul', instructions }
        : question.type === 'choice'
          ? {
              type: 'choice',
              instructions,
              criteria: Object.fromEntries(
                question.choices.map((c) => [String(c.value), c.description ?? null]),
              ),
            }
          : {
              type: 'score',
              instructions,
              criteria: question.levels.map((level) =>
                level.description === undefined ? level.label : `${level.label}: ${level.description}`,
              ),
            };
    setOwn(questions, id, own);
  });
  const request = { model: MODEL_ID, state, questions } as unknown as EvaluationRequest;
  return {
    request,
    ...(images.length > 0 && { images }),
    asWritten: { dialect: 'openai-decisions', body, questions: byId },
    truthValues: truthValuesOf(byId),
  };
}

/** A choice's values as its caller typed them (a boolean stays a boolean): truths are given in them. */
function truthValuesOf(questions: ReadonlyMap<string, OpenAiQuestion>): Map<string, (string | boolean)[]> {
  const values = new Map<string, (string | boolean)[]>();
  for (const [id, question] of questions)
    if (question.type === 'choice')
      values.set(
        id,
        question.choices.map((choice) => choice.value),
      );
  return values;
}

/** The gateway's answers → OpenAI's, in the questions' order, each value with its type. */
export function openAiAnswers(
  original: OpenAiAsWritten,
  answers: Readonly<Record<string, Answer>>,
  refused: readonly string[],
): OpenAiAnswer[] {
  return original.body.questions.map((question, i): OpenAiAnswer => {
    const id = questionIdOf(question, i);
    const name = question.name ?? null;
    const answer = Object.hasOwn(answers, id) ? answers[id] : undefined;
    if (answer === undefined || refused.includes(id)) return { type: 'refusal', name };
    if (answer.type === 'noul') return { type: 'predicate', name, probability: answer.noul };
    if (answer.type === 'choice' && question.type === 'choice') {
      const chosen = answer.choice;
      return {
        type: 'choice',
        name,
        choice: question.choices.find((c) => String(c.value) === chosen)?.value ?? chosen,
        confidence: answer.confidence,
        probabilities: question.choices.map((c) => ({
          value: c.value,
          probability: answer.probabilities[String(c.value)] ?? 0,
        })),
      };
    }
    if (answer.type === 'score' && question.type === 'score')
      return {
        type: 'score',
        name,
        score: answer.score,
        confidence: answer.confidence,
        probabilities: question.levels.map((level, value) => ({
          value,
          label: level.label,
          probability: answer.probabilities[String(value)] ?? 0,
        })),
      };
    return { type: 'refusal', name };
  });
}

export function openAiUsage(
  usage: { input_tokens: number; output_tokens: number },
  details?: UsageDetails,
): OpenAiUsage {
  return {
    input_tokens: usage.input_tokens,
    input_tokens_details: {
      cached_tokens: details?.cached_tokens ?? 0,
      cache_write_tokens: details?.cache_write_tokens ?? 0,
    },
    output_tokens: usage.output_tokens,
    output_tokens_details: { reasoning_tokens: details?.reasoning_tokens ?? 0 },
    total_tokens: usage.input_tokens + usage.output_tokens,
  };
}

/** OpenAI's error `type` for each status, so the SDKs raise their own error classes. */
function openAiErrorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 402) return 'insufficient_quota';
  if (status === 403) return 'permission_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

/** `{"error": {message, type, param, code}, "gateway_code"}`: the OpenAI door's error body. */
export function openAiError(f: GatewayFailure) {
  const first = f.issues?.[0];
  return {
    error: {
      message: f.message,
      type: openAiErrorType(f.status),
      param: first && first.path.length > 0 ? first.path.join('.') : null,
      code: f.type,
    },
    gateway_code: f.code,
  };
}

function invalid(issues: Issue[]): Parsed<never> {
  return { ok: false, error: failure('invalid_request', summarizeIssues(issues), { issues }) };
}
