import { z } from 'zod';
import { codePointLength } from './limits.ts';
import { anyJsonObject, isPlainObject } from './own-key-record.ts';

/** What every question type builds on: bounded text, "content", probabilities. */

/** A string whose length, counted in code points, lies in [min, max]. */
export function boundedText(min: number, max: number, what: string) {
  return z
    .string()
    .refine((text) => codePointLength(text) >= min, { error: `${what} must have at least ${min} character` })
    .refine((text) => codePointLength(text) <= max, { error: `${what} must have at most ${max} characters` })
    .meta({ minLength: min, maxLength: max });
}

export const JsonObject = anyJsonObject();
export const JsonArray = z.array(z.unknown());

/** "Content" (docs/http-api.md#evaluate-post-v1systemone): a string, a JSON object or a JSON array. */
export const Content = z
  .union([z.string(), JsonObject, JsonArray], { error: 'must be a string, an object or an array' })
  .meta({ id: 'Content', description: 'A string, a JSON object or a JSON array.' });
export type Content = z.infer<typeof Content>;

const nonEmpty = (value: unknown) =>
  typeof value === 'string'
    ? value.length > 0
    : Array.isArray(value)
      ? value.length > 0
      : isPlainObject(value) && Object.keys(value).length > 0;

/** Content that must be there and must not be empty (a noul's statement), `what` naming it when missing. */
export function requiredContent(missing: string) {
  return z
    .union([z.string(), JsonObject, JsonArray], {
      error: (issue) => (issue.input === undefined ? missing : 'must be a non-empty string, object or array'),
    })
    .refine(nonEmpty, { error: 'must not be empty' });
}

export const Probability = z.number().min(0).max(1);
