import { z } from 'zod';
import { ERROR_TABLE, ERROR_TYPES } from './errors.ts';

const codes = Object.values(ERROR_TABLE).map((row) => row.code);

export const IssueSchema = z.strictObject({
  path: z.array(z.union([z.string(), z.number().int()])),
  message: z.string(),
});

export const ErrorEnvelope = z
  .strictObject({
    code: z
      .number()
      .int()
      .refine((code) => codes.includes(code as never)),
    message: z.string(),
    data: z.null(),
    error: z.strictObject({
      type: z.enum(ERROR_TYPES),
      issues: z.array(IssueSchema).optional(),
      retryAfterMs: z.number().int().min(0).optional(),
    }),
    requestId: z.string(),
  })
  .meta({ id: 'ErrorEnvelope' });
export type ErrorEnvelope = z.infer<typeof ErrorEnvelope>;

/** The success envelope around any `data` (docs/http-api.md#the-success-envelope-http-200). */
export function successEnvelope<Data extends z.ZodType>(data: Data) {
  return z.strictObject({
    code: z.literal(0),
    message: z.literal('ok'),
    data,
    requestId: z.string(),
  });
}
