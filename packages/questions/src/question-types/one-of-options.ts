import type { Judged, ScoredAnswer } from './behaviour.ts';

/** What choice and score share: a distribution over options, judged by the index of the true one. */

const EPSILON = 1e-15;

/** The most likely option: the first on ties. */
export function top(p: readonly number[]): number {
  let best = 0;
  for (let i = 1; i < p.length; i++) if ((p[i] as number) > (p[best] as number)) best = i;
  return best;
}

/** Brier over the one-hot truth, log loss of the truth clamped at 1e−15, right when the top option is true. */
export function scoreOneOf(p: readonly number[], truth: Judged): ScoredAnswer {
  const index = truth.type === 'choice' || truth.type === 'score' ? truth.index : -1;
  const best = top(p);
  const correct = best === index;
  return {
    binned: p[best] as number,
    correct,
    observed: correct,
    brier: p.reduce((sum, pk, k) => sum + (pk - (k === index ? 1 : 0)) ** 2, 0),
    logLoss: -Math.log(Math.max((p[index] as number | undefined) ?? 0, EPSILON)),
  };
}
