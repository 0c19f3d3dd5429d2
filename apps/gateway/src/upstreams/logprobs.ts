/** One entry of an OpenAI-compatible `top_logprobs` list. */
export interface TopLogprob {
  token: string;
  logprob: number;
}

/**
 * Weights for `labels` from a single generated token's top alternatives. Variants of a label's
 * token are summed (" A", "a", "A"; for yes/no also "true"/"false" via `aliases`). Labels the
 * server did not return share the probability mass it left unaccounted for, evenly; the result
 * is renormalised by the caller.
 */
export function labelWeights(
  top: readonly TopLogprob[],
  labels: readonly string[],
  aliases: Readonly<Record<string, readonly string[]>> = {},
): number[] {
  const index = new Map<string, number>();
  labels.forEach((label, i) => {
    for (const variant of [label, ...(aliases[label] ?? [])]) index.set(variant.toLowerCase(), i);
  });
  const weights = labels.map(() => 0);
  const seen = labels.map(() => false);
  let total = 0;
  for (const { token, logprob } of top) {
    const p = Math.exp(logprob);
    if (!Number.isFinite(p)) continue;
    total += p;
    const i = index.get(token.trim().toLowerCase());
    if (i === undefined) continue;
    weights[i] = (weights[i] as number) + p;
    seen[i] = true;
  }
  const unseen = seen.filter((s) => !s).length;
  if (unseen > 0) {
    const residual = Math.max(0, 1 - total) / unseen;
    seen.forEach((s, i) => {
      if (!s) weights[i] = residual;
    });
  }
  return weights;
}

/** Noul reads yes/no, and true/false as the same answers. */
export const NOUL_ALIASES: Record<string, readonly string[]> = { Yes: ['true'], No: ['false'] };
