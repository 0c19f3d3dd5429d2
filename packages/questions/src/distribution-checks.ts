import { isPlainObject } from '@decision-gateway/contract';

/** The checks every type's answer shares (docs/upstreams.md): probabilities, distributions, confidence. */

/** How far an upstream's probabilities may sum from 1 (docs/upstreams.md). */
export const SUM_TOLERANCE = 0.02;

export type Checked<T> = { ok: true; value: T } | { ok: false; reason: string };

export const isProbability = (x: unknown): x is number => typeof x === 'number' && x >= 0 && x <= 1;
export const fail = (reason: string): Checked<never> => ({ ok: false, reason });

/** Every key present, each a probability, nothing else, summing to 1 within the tolerance. */
export function checkDistribution(
  raw: unknown,
  keys: readonly string[],
  what: string,
  tolerance: (n: number) => number,
): Checked<number[]> {
  if (!isPlainObject(raw)) return fail('.probabilities: not an object');
  const given = raw;
  const expected = new Set(keys);
  for (const key of Object.keys(given)) {
    if (!expected.has(key))
      return fail(`.probabilities: ${JSON.stringify(key)} is not a ${what} of the question`);
  }
  const values: number[] = [];
  for (const key of keys) {
    if (!Object.hasOwn(given, key)) return fail(`.probabilities: ${what} ${JSON.stringify(key)} is missing`);
    const p = given[key];
    if (!isProbability(p))
      return fail(`.probabilities.${key}: ${JSON.stringify(p)} is not a probability in [0, 1]`);
    values.push(p);
  }
  const sum = values.reduce((a, b) => a + b, 0);
  if (Math.abs(sum - 1) > tolerance(keys.length)) return fail(`.probabilities: sum to ${sum}, not 1`);
  return { ok: true, value: values };
}

/** A confidence given must be in [0, 1]; a missing one is computed (docs/http-api.md#answers). */
export function checkConfidence(raw: unknown, computed: () => number): Checked<number> {
  if (raw === undefined) return { ok: true, value: computed() };
  return isProbability(raw)
    ? { ok: true, value: raw }
    : fail(`.confidence: ${JSON.stringify(raw)} is not in [0, 1]`);
}
