import type { Usage } from '@decision-gateway/contract';

/** Credits are stored and moved as integer micro-credits (docs/http-api.md#credits): 1 credit = 1,000,000. */
export const MICRO = 1_000_000;

export function toMicro(credits: number): number {
  return Math.round(credits * MICRO);
}

/** Micro-credits → credits, with at most 6 decimals by construction. */
export function fromMicro(micro: number): number {
  return micro / MICRO;
}

/** Prices as integer micro-credits per 1,000 tokens. */
export interface Pricing {
  microPer1kInput: number;
  microPer1kOutput: number;
}

export function pricingFromCredits(creditsPer1kInput: number, creditsPer1kOutput: number): Pricing {
  return { microPer1kInput: toMicro(creditsPer1kInput), microPer1kOutput: toMicro(creditsPer1kOutput) };
}

/**
 * Cost of `usage` in micro-credits: tokens/1000 × price, rounded half up to a whole micro-credit.
 * BigInt keeps the product exact for any token count the gateway can see.
 */
export function costMicro(usage: Usage, pricing: Pricing): number {
  const numerator =
    BigInt(usage.input_tokens) * BigInt(pricing.microPer1kInput) +
    BigInt(usage.output_tokens) * BigInt(pricing.microPer1kOutput);
  return Number((numerator + 500n) / 1000n);
}
