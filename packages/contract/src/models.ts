import { z } from 'zod';
import { MODEL_ID } from './limits.ts';

export const ModelInfo = z.strictObject({
  name: z.string(),
  description: z.string(),
  release_date: z.string(),
});
export type ModelInfo = z.infer<typeof ModelInfo>;

export const ModelList = z.strictObject({ models: z.array(ModelInfo) }).meta({ id: 'ModelList' });
export type ModelList = z.infer<typeof ModelList>;

/** What `GET /v1/models` and the tRPC models query list: the one model this gateway serves. */
export const MODELS: ModelList = {
  models: [
    {
      name: MODEL_ID,
      description:
        'Typed decisions (choice, score, noul) over a shared state, answered by the configured upstream.',
      release_date: '2025-11-01',
    },
  ],
};
