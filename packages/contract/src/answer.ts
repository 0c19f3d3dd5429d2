import { z } from 'zod';
import { MODEL_ID } from './limits.ts';
import { Answer } from './question-types/index.ts';

export const Usage = z
  .strictObject({
    input_tokens: z.number().int().min(0),
    output_tokens: z.number().int().min(0),
  })
  .meta({ id: 'Usage' });
export type Usage = z.infer<typeof Usage>;

/** Usage beyond input and output tokens, where an upstream reports it (`openai-decisions`), summed over its calls. */
export interface UsageDetails {
  cached_tokens: number;
  cache_write_tokens: number;
  reasoning_tokens: number;
}

export const EvaluationResult = z
  .strictObject({
    model: z.literal(MODEL_ID),
    answers: z.record(z.string(), Answer).meta({ description: 'One answer per question ID sent.' }),
    usage: Usage,
    elapsedMs: z.number().int().min(0).meta({ description: 'Whole gateway request, in milliseconds.' }),
  })
  .meta({ id: 'EvaluationResult' });
export type EvaluationResult = z.infer<typeof EvaluationResult>;

export const EvaluationData = z
  .strictObject({
    result: EvaluationResult,
    creditsUsed: z.number().min(0).optional().meta({ description: 'Credits debited (API-key requests).' }),
    review: z.array(z.string()).optional().meta({
      description: 'On a route that reviews: the questions whose answers were marked for a person.',
    }),
  })
  .meta({ id: 'EvaluationData' });
export type EvaluationData = z.infer<typeof EvaluationData>;
