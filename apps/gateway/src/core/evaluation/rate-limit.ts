import { failure, type GatewayFailure } from '@decision-gateway/contract';
import type { StageDeps } from './deps.ts';
import type { Authenticated, Payer } from './evaluation-context.ts';

/**
 * Stage 2: a token from the key's bucket for every request, and from a browser token's own bucket
 * on top of it (docs/operating.md#configuration). 429 when either is empty.
 */
export function rateLimit(
  ctx: Authenticated,
  deps: Pick<StageDeps, 'rateLimiter' | 'defaultRateLimitPerMinute' | 'clock'>,
): Promise<GatewayFailure | undefined> | undefined {
  return rateLimitOf(ctx.payer, deps);
}

/** Who takes the tokens: a key, and the browser token it came with (also outcomes, docs/outcomes.md). */
export type Bucketed = Pick<Payer, 'id' | 'rateLimitPerMinute'> & {
  token?: { id: string; rateLimitPerMinute: number | null } | null | undefined;
};

export function rateLimitOf(
  payer: Bucketed,
  deps: Pick<StageDeps, 'rateLimiter' | 'defaultRateLimitPerMinute' | 'clock'>,
): Promise<GatewayFailure | undefined> | undefined {
  const limit = payer.rateLimitPerMinute ?? deps.defaultRateLimitPerMinute;
  const tokenLimit = payer.token?.rateLimitPerMinute;
  // No bucket to take from (limits off): nothing to wait for.
  if (limit <= 0 && !tokenLimit) return undefined;
  return takeTokens(payer, deps, limit, tokenLimit);
}

async function takeTokens(
  payer: Bucketed,
  deps: Pick<StageDeps, 'rateLimiter' | 'clock'>,
  limit: number,
  tokenLimit: number | null | undefined,
): Promise<GatewayFailure | undefined> {
  if (limit > 0) {
    const over = await overLimit(deps, payer.id, limit, 'the key');
    if (over) return over;
  }
  if (payer.token && tokenLimit) return overLimit(deps, `token:${payer.token.id}`, tokenLimit, 'the token');
  return undefined;
}

async function overLimit(
  deps: Pick<StageDeps, 'rateLimiter' | 'clock'>,
  bucket: string,
  perMinute: number,
  whose: string,
): Promise<GatewayFailure | undefined> {
  const decision = await deps.rateLimiter.take(bucket, perMinute, deps.clock());
  if (decision.ok) return undefined;
  const message = `${whose} is over its rate limit of ${perMinute} requests per minute`;
  return failure('rate_limited', message, { retryAfterMs: decision.retryAfterMs });
}
