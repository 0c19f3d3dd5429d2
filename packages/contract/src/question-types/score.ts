import { z } from 'zod';
import { Content, Probability } from '../content.ts';

/** `score`: evaluate against ordered levels, lowest first; level numbers are array indices from 0. */

export const SCORE_LIMITS = { levels: { min: 2, max: 10 } } as const;

export const ScoreQuestion = z
  .strictObject({
    type: z.literal('score'),
    instructions: Content.nullable().optional(),
    criteria: z
      .array(Content.nullable())
      .min(SCORE_LIMITS.levels.min, { error: `a score needs at least ${SCORE_LIMITS.levels.min} levels` })
      .max(SCORE_LIMITS.levels.max, { error: `a score takes at most ${SCORE_LIMITS.levels.max} levels` }),
  })
  .meta({
    id: 'ScoreQuestion',
    description: 'Evaluate against ordered levels, lowest first; level numbers are array indices from 0.',
  });
export type ScoreQuestion = z.infer<typeof ScoreQuestion>;

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
export type ScoreAnswer = z.infer<typeof ScoreAnswer>;

/** A score's truth: a level index. */
export const ScoreTruth = z.number();

export const scoreExample = {
  state: { ticket: 'The app is down for everyone!' },
  questions: {
    urgency: { type: 'score', instructions: 'How urgent?', criteria: ['low', 'medium', 'high'] },
  },
} satisfies { state: unknown; questions: Record<string, ScoreQuestion> };
