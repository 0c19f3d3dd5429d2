import type { z } from 'zod';
import type { Issue } from './errors.ts';

function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  switch (typeof value) {
    case 'string':
      return 'a string';
    case 'number':
      return 'a number';
    case 'boolean':
      return 'a boolean';
    case 'object':
      return 'an object';
    default:
      return typeof value;
  }
}

const EXPECTED: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  int: 'an integer',
  boolean: 'a boolean',
  object: 'an object',
  record: 'an object',
  array: 'an array',
  null: 'null',
};

/**
 * Zod's messages name Zod's internals ("Invalid input: expected record"); callers get sentences
 * about their JSON instead. Schema-level messages (the `error` option on a schema) win over this.
 */
export const humanError: z.core.$ZodErrorMap = (issue) => {
  switch (issue.code) {
    case 'invalid_type':
      if (issue.input === undefined) return 'is required';
      return `must be ${EXPECTED[issue.expected] ?? issue.expected}, not ${describeValue(issue.input)}`;
    case 'invalid_value':
      return `must be ${issue.values.map((v) => JSON.stringify(v)).join(' or ')}`;
    case 'too_small':
      return issue.origin === 'number' ? `must be at least ${issue.minimum}` : undefined;
    case 'too_big':
      return issue.origin === 'number' ? `must be at most ${issue.maximum}` : undefined;
    case 'invalid_format':
      return issue.format === 'datetime'
        ? 'must be an ISO-8601 date-time'
        : `must be a valid ${issue.format}`;
    case 'invalid_union':
      return `is not valid here (${describeValue(issue.input)})`;
    default:
      return undefined;
  }
};

/** Zod issues as gateway issues: one per unknown field, paths as plain keys and indices. */
export function toIssues(issues: readonly z.core.$ZodIssue[]): Issue[] {
  const out: Issue[] = [];
  for (const issue of issues) {
    const path = issue.path.map((segment) => (typeof segment === 'number' ? segment : String(segment)));
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) out.push({ path: [...path, key], message: 'is not a known field' });
    } else {
      out.push({ path, message: issue.message });
    }
  }
  return out;
}

/**
 * `schema.safeParse(input)` with the issues worded by `humanError`. A parse given an error map runs
 * several times slower even when it succeeds, so the map is only passed to word a failure.
 */
export function parseWorded<T extends z.ZodType>(schema: T, input: unknown) {
  const result = schema.safeParse(input);
  return result.success ? result : schema.safeParse(input, { error: humanError });
}
