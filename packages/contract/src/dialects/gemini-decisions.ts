import { z } from 'zod';
import { boundedText } from '../content.ts';
import { IMAGE_LIMITS } from '../images.ts';
import { LIMITS, MODEL_ID } from '../limits.ts';
import { ownKeyRecord } from '../own-key-record.ts';
import { CHOICE_LIMITS } from '../question-types/choice.ts';
import type { AsWritten } from '../request.ts';

/**
 * Google's Gemini Decisions API (`POST /{apiVersion}/decisions`) as the official `@google/genai`
 * package (3.3.0) types it in `Decisions.CreateDecisionRequest` / `CreateDecisionResponse`: the
 * published wire format that the door `/gemini` speaks to callers and the upstream kind
 * `gemini-decisions` speaks to Google (docs/gemini.md). Only shapes live here; the door translates
 * (apps/gateway/src/doors/gemini/).
 */

/** The body's limit leaves out the data of image contents (docs/images.md): with them, 32 MiB in all. */
export const GEMINI_LIMITS = {
  maxBodyBytes: 1_048_576,
  minQuestions: 1,
  maxQuestions: 1000,
  maxImages: IMAGE_LIMITS.maxDialectImages,
  /** Google's own bounds on options and levels; this gateway's scores stop at 10 levels. */
  options: { min: 2, max: 255 },
  levels: { min: 2, max: 255 },
} as const;

/** The model the door serves, by either of the names Google's clients use. */
export const GEMINI_MODEL_NAMES: readonly string[] = [MODEL_ID, `models/${MODEL_ID}`];

/** The API versions the door answers under, as the SDK composes its paths. */
export const GEMINI_API_VERSIONS = ['v1beta', 'v1'] as const;

/** `interactions.TextContent`: `annotations` are Google's own output; a caller's are kept as written. */
const TextContent = z.strictObject({
  type: z.literal('text'),
  text: z.string(),
  annotations: z.array(z.unknown()).optional(),
});

/** `interactions.ImageContent`: bytes (`data`, base64, with its `mime_type`) or a `uri`. */
const ImageContent = z.strictObject({
  type: z.literal('image'),
  data: z.string().optional(),
  mime_type: z.string().optional(),
  uri: z.string().optional(),
  resolution: z.string().optional(),
});
export type GeminiImageContent = z.infer<typeof ImageContent>;

/** The media this gateway takes; audio, video and documents are refused by name before parsing. */
export const GEMINI_UNSUPPORTED_CONTENT = ['audio', 'video', 'document'] as const;

const InputContent = z.discriminatedUnion('type', [TextContent, ImageContent], {
  error: 'type must be text or image',
});
export type GeminiInputContent = z.infer<typeof InputContent>;

const nonEmptyText = z.string().min(1, { error: 'must not be empty' });

/** `NoulQuestionInstructions` and the others: a string or text contents. */
const Instructions = z.union(
  [nonEmptyText, TextContent, z.array(TextContent).min(1, { error: 'needs at least one text content' })],
  { error: 'must be a string, a text content or an array of text contents' },
);
export type GeminiInstructions = z.infer<typeof Instructions>;

/** A choice's option: Google's rule (no control characters, no white space at either end) within the gateway's length. */
const OptionId = boundedText(CHOICE_LIMITS.labelLength.min, CHOICE_LIMITS.labelLength.max, 'an option')
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it refuses.
  .refine((label) => !/[\u0000-\u001f\u007f-\u009f]/.test(label), {
    error: 'an option must not contain control characters',
  })
  .refine((label) => label.trim() === label, { error: 'an option must not begin or end with white space' });

export const GeminiQuestion = z.discriminatedUnion(
  'type',
  [
    z.strictObject({
      type: z.literal('noul'),
      instructions: Instructions,
      criteria: z
        .strictObject({ true_description: z.string().optional(), false_description: z.string().optional() })
        .optional(),
    }),
    z.strictObject({
      type: z.literal('choice'),
      instructions: Instructions,
      criteria: ownKeyRecord(OptionId, z.string(), {
        min: GEMINI_LIMITS.options.min,
        max: GEMINI_LIMITS.options.max,
        tooFew: `a choice needs at least ${GEMINI_LIMITS.options.min} options`,
        tooMany: `a choice takes at most ${GEMINI_LIMITS.options.max} options`,
      }),
    }),
    z.strictObject({
      type: z.literal('score'),
      instructions: Instructions,
      criteria: z
        .array(z.string())
        .min(GEMINI_LIMITS.levels.min, { error: `a score needs at least ${GEMINI_LIMITS.levels.min} levels` })
        .max(GEMINI_LIMITS.levels.max, { error: `a score takes at most ${GEMINI_LIMITS.levels.max} levels` }),
    }),
  ],
  { error: 'type must be noul, choice or score' },
);
export type GeminiQuestion = z.infer<typeof GeminiQuestion>;

const QuestionId = boundedText(LIMITS.questionIdLength.min, LIMITS.questionIdLength.max, 'a question ID');

export const GeminiDecisionRequest = z
  .strictObject({
    model: z.string(),
    input: z.union(
      [nonEmptyText, InputContent, z.array(InputContent).min(1, { error: 'needs at least one content' })],
      {
        error: 'must be a non-empty string, a content or an array of contents',
      },
    ),
    questions: ownKeyRecord(QuestionId, GeminiQuestion, {
      min: GEMINI_LIMITS.minQuestions,
      max: GEMINI_LIMITS.maxQuestions,
      tooFew: `needs at least ${GEMINI_LIMITS.minQuestions} question`,
      tooMany: `takes at most ${GEMINI_LIMITS.maxQuestions} questions`,
    }),
  })
  .meta({
    id: 'GeminiDecisionRequest',
    description: "Google's Decisions request (`ai.decisions.create`), questions keyed by ID.",
  });
export type GeminiDecisionRequest = z.infer<typeof GeminiDecisionRequest>;

/**
 * A request that came through the Gemini door, as its caller wrote it: the evaluation core carries
 * it untouched, and a `gemini-decisions` upstream is sent exactly this (only `model` is its own).
 */
export interface GeminiAsWritten extends AsWritten {
  readonly dialect: 'gemini-decisions';
  body: GeminiDecisionRequest;
}

/** Whether a request as written is in Google's dialect. */
export const isGeminiAsWritten = (written: AsWritten | undefined): written is GeminiAsWritten =>
  written?.dialect === 'gemini-decisions';

const probability = z.number().min(0).max(1);
const count = z.int().min(0);

/** `interactions.Usage`, as far as this gateway reports it. */
export const GeminiUsage = z.strictObject({
  total_input_tokens: count,
  total_output_tokens: count,
  total_tokens: count,
  total_cached_tokens: count.optional(),
  total_thought_tokens: count.optional(),
});
export type GeminiUsage = z.infer<typeof GeminiUsage>;

export const GeminiAnswer = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('noul'), noul: probability, confidence: probability }),
  z.strictObject({
    type: z.literal('choice'),
    choice: z.string(),
    probabilities: z.record(z.string(), probability),
    confidence: probability.meta({ description: 'The top probability.' }),
  }),
  z.strictObject({
    type: z.literal('score'),
    score: z.number(),
    probabilities: z.record(z.string(), probability).meta({ description: 'Keyed by level index.' }),
    legend: z.record(z.string(), z.string()).meta({ description: "The question's own levels, by index." }),
    confidence: probability.meta({ description: 'The top probability.' }),
  }),
]);
export type GeminiAnswer = z.infer<typeof GeminiAnswer>;

/** `PromptFeedback`: Google blocked the input; no answers come with it. */
export const GeminiPromptFeedback = z.looseObject({
  block_reason: z.string().optional(),
  block_reason_message: z.string().optional(),
});
export type GeminiPromptFeedback = z.infer<typeof GeminiPromptFeedback>;

export const GeminiDecisionResponse = z
  .strictObject({
    answers: z.record(z.string(), GeminiAnswer).optional(),
    prompt_feedback: GeminiPromptFeedback.optional(),
    usage: GeminiUsage,
  })
  .meta({
    id: 'GeminiDecision',
    description: "Google's `CreateDecisionResponse`: answers by question ID, or a blocked input's feedback.",
  });

/** Google's `status` for each HTTP status the gateway answers (docs/gemini.md#errors). */
export const GEMINI_STATUS = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  402: 'FAILED_PRECONDITION',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  405: 'INVALID_ARGUMENT',
  408: 'DEADLINE_EXCEEDED',
  413: 'INVALID_ARGUMENT',
  415: 'INVALID_ARGUMENT',
  431: 'INVALID_ARGUMENT',
  429: 'RESOURCE_EXHAUSTED',
  500: 'INTERNAL',
  502: 'INTERNAL',
  503: 'UNAVAILABLE',
  504: 'DEADLINE_EXCEEDED',
} as const satisfies Record<number, string>;

export const GeminiErrorBody = z
  .strictObject({
    error: z.strictObject({ code: z.int(), message: z.string(), status: z.string() }),
    gateway_code: z.int().meta({ description: "The gateway's numeric code (docs/http-api.md#errors)." }),
  })
  .meta({ id: 'GeminiError' });

/** Google's `ListModelsResponse`, with the one model this gateway serves. */
export const GeminiModelList = z
  .strictObject({
    models: z.array(
      z.strictObject({
        name: z.string(),
        baseModelId: z.string(),
        version: z.string(),
        displayName: z.string(),
        description: z.string(),
        supportedGenerationMethods: z.array(z.string()),
      }),
    ),
  })
  .meta({ id: 'GeminiModelList' });
