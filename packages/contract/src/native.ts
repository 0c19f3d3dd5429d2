import { z } from 'zod';
import { type EvaluationData, Usage } from './answer.ts';
import { IssueSchema } from './envelope.ts';
import { ERROR_TABLE, ERROR_TYPES, type GatewayFailure } from './errors.ts';
import { MODEL_ID } from './limits.ts';
import { Answer } from './question-types/index.ts';

/**
 * The System One wire format served under `/native` (docs/http-api.md#the-other-doors), so the official SDKs and every
 * community client work through the gateway: the same answers as the envelope's `data.result`,
 * at the top level and without `elapsedMs`; the gateway's extras travel in headers.
 */
export const NativeResult = z
  .strictObject({
    model: z.literal(MODEL_ID),
    answers: z.record(z.string(), Answer).meta({ description: 'One answer per question ID sent.' }),
    usage: Usage,
  })
  .meta({ id: 'NativeResult' });
export type NativeResult = z.infer<typeof NativeResult>;

const codes = Object.values(ERROR_TABLE).map((row) => row.code);

/** `{"detail": {error_type, message, code}}`: the native error body, with the codes of docs/http-api.md#errors. */
export const NativeError = z
  .strictObject({
    detail: z.strictObject({
      error_type: z.enum(ERROR_TYPES),
      message: z.string(),
      code: z
        .number()
        .int()
        .refine((code) => codes.includes(code as never)),
      issues: z.array(IssueSchema).optional(),
    }),
  })
  .meta({ id: 'NativeError' });
export type NativeError = z.infer<typeof NativeError>;

export function nativeResult(data: EvaluationData): NativeResult {
  const { model, answers, usage } = data.result;
  return { model, answers, usage };
}

export function nativeError(failure: GatewayFailure): NativeError {
  return {
    detail: {
      error_type: failure.type,
      message: failure.message,
      code: failure.code,
      ...(failure.issues !== undefined && { issues: failure.issues }),
    },
  };
}
