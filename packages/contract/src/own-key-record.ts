import { z } from 'zod';
import { parseWorded } from './zod-issues.ts';

/**
 * A record keyed by caller-chosen strings (question IDs, option labels).
 *
 * Zod's own `z.record` deliberately skips an own `__proto__` key: neither validated nor kept. Here
 * such keys are ordinary data, so this record validates every own key of the caller's JSON. The
 * contract never rebuilds caller objects (a valid body is used as parsed by JSON.parse, where
 * `__proto__` is a plain own property), so IDs like `__proto__` and `constructor` round-trip.
 *
 * The returned schema infers the same type as `z.record(key, value)`; `recordShapeOf` gives that
 * record back so JSON Schema / OpenAPI generation can describe it.
 */
export function ownKeyRecord<Key extends z.ZodType<string>, Value extends z.ZodType>(
  key: Key,
  value: Value,
  size: { min: number; max?: number; tooFew: string; tooMany?: string },
  description?: string,
) {
  const shape = z.record(key, value);
  const schema = z
    .custom<z.output<typeof shape>>((input) => isPlainObject(input), {
      error: (issue) =>
        issue.input === undefined
          ? 'is required'
          : `must be an object, not ${Array.isArray(issue.input) ? 'an array' : String(issue.input === null ? 'null' : typeof issue.input)}`,
    })
    .superRefine((input, ctx) => {
      const keys = Object.keys(input);
      if (keys.length < size.min) ctx.addIssue({ code: 'custom', message: size.tooFew });
      if (size.max !== undefined && keys.length > size.max)
        ctx.addIssue({ code: 'custom', message: size.tooMany });
      for (const k of keys) {
        const keyResult = parseWorded(key, k);
        if (!keyResult.success) {
          for (const issue of keyResult.error.issues) {
            ctx.addIssue({ code: 'custom', path: [k], message: issue.message });
          }
          continue;
        }
        const valueResult = parseWorded(value, (input as Record<string, unknown>)[k]);
        if (!valueResult.success) {
          for (const issue of valueResult.error.issues) {
            // Re-homed under this key; the original code is kept for unknown-field expansion.
            ctx.addIssue({ ...(issue as z.core.$ZodRawIssue), path: [k, ...issue.path] });
          }
        }
      }
    });
  const described = description === undefined ? schema : schema.meta({ description });
  // The shape carries the size limits too, so generated JSON Schema states them.
  const documented = shape.meta({
    ...(description !== undefined && { description }),
    minProperties: size.min,
    ...(size.max !== undefined && { maxProperties: size.max }),
  });
  RECORD_SHAPES.set(described, documented);
  return described;
}

const RECORD_SHAPES = new WeakMap<z.ZodType, z.ZodType>();

/**
 * A JSON object whose members may be anything (content: a state, instructions, a description),
 * judged as the caller sent it. `z.record` would hand a refinement its copy, which leaves out an
 * own `__proto__` key, so `{"__proto__": 1}` would read as empty; this looks at the caller's own
 * object, and makes no copy. Documented as the record it stands for.
 */
export function anyJsonObject() {
  const shape = z.record(z.string(), z.unknown());
  const schema = z.custom<z.output<typeof shape>>(isPlainObject);
  RECORD_SHAPES.set(schema, shape);
  return schema;
}

/** For schema generators: the `z.record` a custom own-key record stands for, if `schema` is one. */
export function recordShapeOf(schema: unknown): z.ZodType | undefined {
  return typeof schema === 'object' && schema !== null ? RECORD_SHAPES.get(schema as z.ZodType) : undefined;
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/**
 * Sets `key` as an own member of `record`, `__proto__` included: assigning that one would set the
 * prototype instead (or do nothing), and the member would be lost.
 */
export function setOwn<T>(record: Record<string, T>, key: string, value: T): void {
  if (key === '__proto__')
    Object.defineProperty(record, key, { value, enumerable: true, writable: true, configurable: true });
  else record[key] = value;
}
