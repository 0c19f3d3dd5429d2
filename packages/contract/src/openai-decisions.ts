import { z } from 'zod';
import { boundedText } from './content.ts';
import { failure, type GatewayFailure, type Issue, summarizeIssues } from './errors.ts';
import { LIMITS, MODEL_ID } from './limits.ts';
import { isPlainObject } from './own-key-record.ts';
import { nestingDepth, type Parsed } from './parse-request.ts';
import { CHOICE_LIMITS } from './question-types/choice.ts';
import type { Answer } from './question-types/index.ts';
import { SCORE_LIMITS } from './question-types/score.ts';
import type { EvaluationRequest } from './request.ts';
import { parseWorded, toIssues } from './zod-issues.ts';

/**
 * OpenAI's Decisions API (`POST /v1/decisions`), as the official `openai` SDK (7.57) types it in
 * `resources/decisions.d.ts`: the door `/openai/v1` speaks it to callers and the upstream kind
 * `openai-decisions` speaks it to OpenAI and Fireworks (docs/openai.md). This gateway takes text
 * and JSON: images and tool items are refused with their path.
 */

export const OPENAI_LIMITS = { maxBodyBytes: 1_048_576, minQuestions: 1, maxQuestions: 400 } as const;

const TEXT_AND_JSON_ONLY = 'this gateway takes text and JSON: images and tool calls are not accepted';

const CacheBreakpoint = z
  .strictObject({ mode: z.literal('explicit') })
  .nullable()
  .optional();
const InputText = z.strictObject({
  type: z.literal('input_text'),
  text: z.string(),
  prompt_cache_breakpoint: CacheBreakpoint,
});
const JsonObject = z.record(z.string(), z.unknown());
const InputJson = z.strictObject({
  type: z.literal('input_json'),
  data: z.union([JsonObject, z.array(JsonObject)], { error: 'must be an object or an array of objects' }),
});
const OutputText = z.strictObject({ type: z.literal('output_text'), text: z.string() });
const RefusalPart = z.strictObject({ type: z.literal('refusal'), refusal: z.string() });

const nonEmptyText = z.string().min(1, { error: 'must not be empty' });
const parts = <T extends z.ZodType>(part: T) => z.array(part).min(1, { error: 'needs at least one part' });

const message = <R extends string, P extends z.ZodType>(role: R, part: P) =>
  z.strictObject({
    role: z.literal(role),
    content: z.union([nonEmptyText, parts(part)]),
    type: z.literal('message').optional(),
  });

export const OpenAiInputMessage = z.discriminatedUnion(
  'role',
  [
    message('user', z.discriminatedUnion('type', [InputText, InputJson])),
    message('developer', InputText),
    message('system', InputText),
    z.strictObject({
      role: z.literal('assistant'),
      content: z.union([nonEmptyText, parts(z.discriminatedUnion('type', [OutputText, RefusalPart]))]),
      type: z.literal('message').optional(),
      phase: z.enum(['commentary', 'final_answer']).nullable().optional(),
    }),
  ],
  { error: 'role must be user, developer, system or assistant' },
);
export type OpenAiInputMessage = z.infer<typeof OpenAiInputMessage>;

const Instructions = z.union([
  nonEmptyText,
  parts(
    z.discriminatedUnion('type', [
      z.strictObject({ type: z.literal('input_text'), text: z.string() }),
      InputJson,
    ]),
  ),
]);
const QuestionName = boundedText(LIMITS.questionIdLength.min, LIMITS.questionIdLength.max, 'a name');
const Label = boundedText(CHOICE_LIMITS.labelLength.min, CHOICE_LIMITS.labelLength.max, 'a value');

export const OpenAiQuestion = z.discriminatedUnion(
  'type',
  [
    z.strictObject({
      type: z.literal('predicate'),
      name: QuestionName.optional(),
      instructions: Instructions,
    }),
    z.strictObject({
      type: z.literal('choice'),
      name: QuestionName.optional(),
      instructions: Instructions,
      choices: z
        .array(z.strictObject({ value: z.union([Label, z.boolean()]), description: z.string().optional() }))
        .min(CHOICE_LIMITS.options.min, { error: `needs at least ${CHOICE_LIMITS.options.min} choices` })
        .max(CHOICE_LIMITS.options.max, { error: `takes at most ${CHOICE_LIMITS.options.max} choices` }),
    }),
    z.strictObject({
      type: z.literal('score'),
      name: QuestionName.optional(),
      instructions: Instructions,
      levels: z
        .array(z.strictObject({ label: Label, description: z.string().optional() }))
        .min(SCORE_LIMITS.levels.min, { error: `needs at least ${SCORE_LIMITS.levels.min} levels` })
        .max(SCORE_LIMITS.levels.max, { error: `takes at most ${SCORE_LIMITS.levels.max} levels` }),
    }),
  ],
  { error: 'type must be predicate, choice or score' },
);
export type OpenAiQuestion = z.infer<typeof OpenAiQuestion>;

export const OpenAiDecisionRequest = z
  .strictObject({
    model: z.string(),
    input: z.union([
      nonEmptyText,
      z.array(OpenAiInputMessage).min(1, { error: 'needs at least one message' }),
    ]),
    questions: z.array(OpenAiQuestion),
    safety_identifier: z.string().max(256).nullable().optional(),
    prompt_cache_key: z.string().max(256).nullable().optional(),
    prompt_cache_options: z
      .strictObject({
        mode: z.enum(['implicit', 'explicit']).nullable().optional(),
        ttl: z.literal('30m').optional(),
      })
      .nullable()
      .optional(),
  })
  .meta({
    id: 'OpenAiDecisionRequest',
    description: "OpenAI's Decisions request (`client.decisions.create`).",
  });
export type OpenAiDecisionRequest = z.infer<typeof OpenAiDecisionRequest>;

/**
 * A request that came through the OpenAI door, kept as its caller wrote it: an `openai-decisions`
 * upstream is sent exactly this (only `model` is its own), and the answers go back in its shape.
 */
export interface OpenAiOriginal {
  body: OpenAiDecisionRequest;
  /** The question of each gateway question ID (its `name`, or `#<index>`). */
  questions: ReadonlyMap<string, OpenAiQuestion>;
}

/** The OpenAI door's request, as the gateway's own (for every other kind of upstream) and as sent. */
export interface OpenAiDecision {
  request: EvaluationRequest;
  original: OpenAiOriginal;
}

/** A question's ID in the gateway: its name, or `#<index>` when it has none. */
export const questionIdOf = (question: OpenAiQuestion, index: number) => question.name ?? `#${index}`;

/**
 * The body of `POST /openai/v1/decisions` → the decision, or the gateway error of the first rule
 * broken in the order of docs/http-api.md#errors: 40002 (0 or more than 400 questions) → 40003
 * (another model) → 40001 (every other rule, each issue with its path).
 */
export function parseOpenAiDecisionRequest(body: unknown): Parsed<OpenAiDecision> {
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
  if (clashes.length > 0) return invalid(clashes);
  return { ok: true, value: toGatewayRequest(request) };
}

/** Images and tool items, wherever they stand: refused with their path. */
function unsupportedParts(body: Record<string, unknown>): Issue[] {
  const issues: Issue[] = [];
  const refuse = (path: (string | number)[]) => issues.push({ path, message: TEXT_AND_JSON_ONLY });
  const scan = (items: unknown, path: (string | number)[]) => {
    if (!Array.isArray(items)) return;
    items.forEach((item, i) => {
      if (isPlainObject(item) && item.type === 'input_image') refuse([...path, i]);
    });
  };
  if (Array.isArray(body.input))
    body.input.forEach((item, i) => {
      if (!isPlainObject(item)) return;
      if (typeof item.type === 'string' && item.type !== 'message') refuse(['input', i]);
      else scan(item.content, ['input', i, 'content']);
    });
  if (Array.isArray(body.questions))
    body.questions.forEach((question, i) => {
      if (isPlainObject(question)) scan(question.instructions, ['questions', i, 'instructions']);
    });
  return issues;
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

/** Text or JSON parts as the gateway's content: one text part is its text, one JSON part its data. */
function contentOf(
  instructions: OpenAiQuestion['instructions'],
): string | Record<string, unknown> | unknown[] {
  if (typeof instructions === 'string') return instructions;
  const [only] = instructions;
  if (instructions.length === 1 && only) return only.type === 'input_text' ? only.text : only.data;
  return instructions.map((part) => (part.type === 'input_text' ? part.text : part.data));
}

/** The input as the gateway's state (docs/openai.md#for-other-kinds-of-upstream). */
function stateOf(input: OpenAiDecisionRequest['input']): EvaluationRequest['state'] {
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
  return input.map(({ role, content }) => ({ role, content }));
}

function toGatewayRequest(body: OpenAiDecisionRequest): OpenAiDecision {
  const questions: Record<string, unknown> = {};
  const byId = new Map<string, OpenAiQuestion>();
  body.questions.forEach((question, i) => {
    const id = questionIdOf(question, i);
    byId.set(id, question);
    const instructions = contentOf(question.instructions);
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
    Object.defineProperty(questions, id, {
      value: own,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  });
  const request = { model: MODEL_ID, state: stateOf(body.input), questions } as unknown as EvaluationRequest;
  return { request, original: { body, questions: byId } };
}

const count = z.int().min(0);

/** What the door answers for a usage: OpenAI's shape, details 0 unless an upstream reported them. */
export const OpenAiUsage = z.strictObject({
  input_tokens: count,
  input_tokens_details: z.strictObject({ cached_tokens: count, cache_write_tokens: count }),
  output_tokens: count,
  output_tokens_details: z.strictObject({ reasoning_tokens: count }),
  total_tokens: count,
});
export type OpenAiUsage = z.infer<typeof OpenAiUsage>;

/** Usage details an `openai-decisions` upstream reported, summed over its calls. */
export interface UsageDetails {
  cached_tokens: number;
  cache_write_tokens: number;
  reasoning_tokens: number;
}

const probability = z.number().min(0).max(1);
const answerName = z
  .string()
  .nullable()
  .meta({ description: "The question's name, or null when it had none." });

export const OpenAiAnswer = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('predicate'), name: answerName, probability }),
  z.strictObject({
    type: z.literal('choice'),
    name: answerName,
    choice: z.union([z.string(), z.boolean()]),
    confidence: probability,
    probabilities: z.array(z.strictObject({ value: z.union([z.string(), z.boolean()]), probability })),
  }),
  z.strictObject({
    type: z.literal('score'),
    name: answerName,
    score: z.number(),
    confidence: probability,
    probabilities: z.array(z.strictObject({ value: z.int(), label: z.string(), probability })),
  }),
  z.strictObject({ type: z.literal('refusal'), name: answerName }),
]);
export type OpenAiAnswer = z.infer<typeof OpenAiAnswer>;

export const OpenAiDecisionResponse = z
  .strictObject({
    model: z.literal(MODEL_ID),
    answers: z.array(OpenAiAnswer).meta({ description: "In the questions' order." }),
    usage: OpenAiUsage,
  })
  .meta({
    id: 'OpenAiDecision',
    description: "OpenAI's Decision, as `client.decisions.create` resolves it.",
  });

export const OpenAiErrorBody = z
  .strictObject({
    error: z.strictObject({
      message: z.string(),
      type: z.string(),
      param: z.string().nullable(),
      code: z.string().meta({ description: "The gateway's error type, e.g. `invalid_api_key`." }),
    }),
    gateway_code: z.int().meta({ description: "The gateway's numeric code (docs/http-api.md#errors)." }),
  })
  .meta({ id: 'OpenAiError' });

export const OpenAiModelList = z
  .strictObject({
    object: z.literal('list'),
    data: z.array(
      z.strictObject({ id: z.string(), object: z.literal('model'), created: z.int(), owned_by: z.string() }),
    ),
  })
  .meta({ id: 'OpenAiModelList' });

/** The gateway's answers → OpenAI's, in the questions' order, each value with its type. */
export function openAiAnswers(
  original: OpenAiOriginal,
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
      const typedValue = (label: string) =>
        question.choices.find((c) => String(c.value) === label)?.value ?? label;
      return {
        type: 'choice',
        name,
        choice: typedValue(answer.choice),
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
