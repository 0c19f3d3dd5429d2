import { z } from 'zod';
import { boundedText, JsonObject } from '../content.ts';
import { IMAGE_DETAILS, IMAGE_LIMITS } from '../images.ts';
import { LIMITS, MODEL_ID } from '../limits.ts';
import { CHOICE_LIMITS } from '../question-types/choice.ts';
import { SCORE_LIMITS } from '../question-types/score.ts';
import type { AsWritten } from '../request.ts';

/**
 * OpenAI's Decisions API (`POST /v1/decisions`) as the official `openai` SDK (7.57) types it in
 * `resources/decisions.d.ts`: the published wire format that the door `/openai/v1` speaks to
 * callers and the upstream kind `openai-decisions` speaks to OpenAI and Fireworks (docs/openai.md).
 * Only shapes live here; the door translates (apps/gateway/src/doors/openai/).
 */

/** The body's limit leaves out the data of `input_image` parts (docs/images.md): with them, 32 MiB in all. */
export const OPENAI_LIMITS = {
  maxBodyBytes: 1_048_576,
  minQuestions: 1,
  maxQuestions: 400,
  maxImages: IMAGE_LIMITS.maxDialectImages,
} as const;

const CacheBreakpoint = z
  .strictObject({ mode: z.literal('explicit') })
  .nullable()
  .optional();
const InputText = z.strictObject({
  type: z.literal('input_text'),
  text: z.string(),
  prompt_cache_breakpoint: CacheBreakpoint,
});
const InputJson = z.strictObject({
  type: z.literal('input_json'),
  data: z.union([JsonObject, z.array(JsonObject)], { error: 'must be an object or an array of objects' }),
});
const imagePart = {
  type: z.literal('input_image'),
  image_url: z.string({ error: 'is required: a data: URL or an https:// URL' }),
  detail: z.enum(IMAGE_DETAILS).nullable().optional(),
};
/** `DecisionInputImage`: in a user message. */
const InputImage = z.strictObject({ ...imagePart, prompt_cache_breakpoint: CacheBreakpoint });
/** `DecisionQuestionInputImage`: in a question's instructions. */
const QuestionInputImage = z.strictObject(imagePart);
export type OpenAiInputImage = z.infer<typeof InputImage>;
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
    message('user', z.discriminatedUnion('type', [InputText, InputImage, InputJson])),
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
      QuestionInputImage,
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
 * A request that came through the OpenAI door, as its caller wrote it: the evaluation core carries
 * it untouched, and an `openai-decisions` upstream is sent exactly this (only `model` is its own).
 */
export interface OpenAiAsWritten extends AsWritten {
  readonly dialect: 'openai-decisions';
  body: OpenAiDecisionRequest;
  /** The question of each gateway question ID (its `name`, or `#<index>`). */
  questions: ReadonlyMap<string, OpenAiQuestion>;
}

/** Whether a request as written is in OpenAI's dialect. */
export const isOpenAiAsWritten = (written: AsWritten | undefined): written is OpenAiAsWritten =>
  written?.dialect === 'openai-decisions';

/** A question's ID in the gateway: its name, or `#<index>` when it has none. */
export const questionIdOf = (question: OpenAiQuestion, index: number) => question.name ?? `#${index}`;

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
