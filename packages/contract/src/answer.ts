import { z } from 'zod';
import { MODEL_ID } from './limits.ts';
import { Content } from './question.ts';

export const Probability = z.number().min(0).max(1);

export const ChoiceAnswer = z
  .strictObject({
    type: z.literal('choice'),
    choice: z.string().meta({ description: 'The most probable label (ties: the label listed first).' }),
    confidence: Probability,
    probabilities: z.record(z.string(), Probability).meta({ description: 'Every label of the question.' }),
  })
  .meta({ id: 'ChoiceAnswer' });

export const ScoreAnswer = z
  .strictObject({
    type: z.literal('score'),
    score: z.number().min(0).meta({ description: 'Expected level index, Σ i·pᵢ, in [0, n−1].' }),
    confidence: Probability,
    legend: z
      .record(z.string(), Content.nullable())
      .meta({ description: '{"0": description of level 0, …}' }),
    probabilities: z.record(z.string(), Probability).meta({ description: '{"0": p₀, …}' }),
  })
  .meta({ id: 'ScoreAnswer' });

export const NoulAnswer = z
  .strictObject({
    type: z.literal('noul'),
    noul: Probability.meta({ description: 'Probability that the statement is true.' }),
  })
  .meta({ id: 'NoulAnswer' });

export const Answer = z.discriminatedUnion('type', [ChoiceAnswer, ScoreAnswer, NoulAnswer]);

export type ChoiceAnswer = z.infer<typeof ChoiceAnswer>;
export type ScoreAnswer = z.infer<typeof ScoreAnswer>;
export type NoulAnswer = z.infer<typeof NoulAnswer>;
export type Answer = z.infer<typeof Answer>;

export const Usage = z
  .strictObject({
    input_tokens: z.number().int().min(0),
    output_tokens: z.number().int().min(0),
  })
  .meta({ id: 'Usage' });
export type Usage = z.infer<typeof Usage>;

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
  })
  .meta({ id: 'EvaluationData' });
export type EvaluationData = z.infer<typeof EvaluationData>;
