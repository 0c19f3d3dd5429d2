/**
 * From a probability distribution to an answer (docs/http-api.md#answers). Pure arithmetic, no I/O: the lexical
 * baseline, the OpenAI-compatible upstream and the answer checks all share these formulas.
 */
import { SCORE_LIMITS, setOwn } from '@decision-gateway/contract';

/** Weights → probabilities summing to 1. Non-finite, negative or all-zero weights give uniform. */
export function normalize(weights: readonly number[]): number[] {
  let sum = 0;
  for (const w of weights) {
    if (!Number.isFinite(w) || w < 0) return uniform(weights.length);
    sum += w;
  }
  return sum > 0 ? weights.map((w) => w / sum) : uniform(weights.length);
}

export function uniform(n: number): number[] {
  return Array.from({ length: n }, () => 1 / n);
}

/** Softmax with a temperature; shifted by the maximum so large scores cannot overflow. */
export function softmax(scores: readonly number[], temperature: number): number[] {
  const max = Math.max(...scores);
  return normalize(scores.map((s) => Math.exp((s - max) / temperature)));
}

/** Index of the largest value; ties go to the first listed (the lowest index). */
export function argmax(values: readonly number[]): number {
  let best = 0;
  for (let i = 1; i < values.length; i++) {
    if ((values[i] as number) > (values[best] as number)) best = i;
  }
  return best;
}

const clamp01 = (x: number) => Math.min(1, Math.max(0, x));

/** choice confidence = (p_max − 1/n) / (1 − 1/n), clamped to [0, 1]. */
export function choiceConfidence(probabilities: readonly number[]): number {
  const n = probabilities.length;
  if (n < 2) return 1;
  const pMax = Math.max(...probabilities);
  return clamp01((pMax - 1 / n) / (1 - 1 / n));
}

/** Expected level index, Σ i·pᵢ. */
export function expectedScore(probabilities: readonly number[]): number {
  let score = 0;
  probabilities.forEach((p, i) => {
    score += i * p;
  });
  return score;
}

/**
 * score confidence = max(0, 1 − Σ pᵢ·|i − m| / U): m is the most likely level (lowest on ties) and
 * U = (1/n)·Σᵢ |i − (n−1)/2|, the mean distance from the middle (what a uniform spread scores).
 */
export function scoreConfidence(probabilities: readonly number[]): number {
  const n = probabilities.length;
  const m = argmax(probabilities);
  let spread = 0;
  let u = 0;
  for (let i = 0; i < n; i++) {
    spread += (probabilities[i] as number) * Math.abs(i - m);
    u += Math.abs(i - (n - 1) / 2);
  }
  u /= n;
  return u === 0 ? 1 : Math.min(1, Math.max(0, 1 - spread / u));
}

/** A probability as prose shows it: two decimals. */
export function probability(p: number): string {
  return p.toFixed(2);
}

/**
 * `{[keys[i]]: values[i]}`, written key by key: every checked answer builds its probabilities this
 * way, and `Object.fromEntries` over mapped pairs made an array per key first. A label such as
 * "__proto__" stays an ordinary own key, as with `fromEntries` (`setOwn`).
 */
export function keyed<T>(keys: readonly string[], values: readonly T[]): Record<string, T> {
  const out: Record<string, T> = {};
  for (let i = 0; i < keys.length; i++) setOwn(out, keys[i] as string, values[i] as T);
  return out;
}

const LEVEL_NAMES: (readonly string[])[] = [];

/**
 * A score question's level names for `n` levels ("0", "1", …), made once per `n` up to the most a
 * score may have; beyond it (no valid question) made anew, so the cache stays bounded.
 */
export function levelNames(n: number): readonly string[] {
  const cached = LEVEL_NAMES[n];
  if (cached !== undefined) return cached;
  const names = Array.from({ length: n }, (_, i) => String(i));
  if (n <= SCORE_LIMITS.levels.max) LEVEL_NAMES[n] = names;
  return names;
}
