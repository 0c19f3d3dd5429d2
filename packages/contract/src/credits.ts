import { z } from 'zod';

/** Credits are kept as integer micro-credits, so amounts carry at most 6 decimals. */
export const credits = z
  .number()
  .refine((n) => Number.isFinite(n) && Math.abs(n * 1e6 - Math.round(n * 1e6)) < 1e-6, {
    error: 'must have at most 6 decimal places',
  })
  .refine((n) => Math.abs(n) <= 1e9, { error: 'must be at most 1000000000 in size' });
