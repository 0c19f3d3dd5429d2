import type { Lead } from '../../cache/coalesce.ts';
import type { CachedDecision } from '../../cache/decision-cache.ts';
import { keptImages } from '../../images/decision-images.ts';
import { keptQuestions, keptText } from '../../outcomes/decision-record.ts';
import type { KeptDecision } from '../../store/store.ts';
import type { StageDeps } from './deps.ts';
import type { AnsweredDecision, RequestCache, Routed } from './evaluation-context.ts';

/** A decision from the cache, or from an identical request that was in flight. */
export interface Found {
  decision: CachedDecision;
  how: 'hit' | 'coalesced';
}

/** What the lookup came to: a decision, or none and perhaps the lead of identical requests. */
export type LookedUp = { found: Found; lead?: undefined } | { found?: undefined; lead?: Lead };

/**
 * Stage 5, on a route that keeps decisions (docs/routes.md#decision-cache): the same decision asked
 * before. After validation and the rate limit, before any credit is held: a hit needs none. An
 * identical request in flight is waited for, never past this request's own deadline; the first
 * of them leads, unless Cache-Control skipped the lookup.
 */
export async function lookUp(
  ctx: Routed,
  cache: RequestCache,
  deps: Pick<StageDeps, 'coalescer' | 'onCacheOutcome'>,
): Promise<LookedUp> {
  const route = ctx.route.spec;
  if (cache.directive !== undefined) {
    deps.onCacheOutcome?.(route.name, 'bypass');
    return {};
  }
  const found = await cache.store.get(cache.key);
  if (found) return { found: { decision: found, how: 'hit' } };
  const joined = deps.coalescer.join(cache.key.hash, route.deadlineMs);
  if ('follow' in joined) {
    const led = await joined.follow;
    if (led) return { found: { decision: led, how: 'coalesced' } };
  }
  deps.onCacheOutcome?.(route.name, 'miss');
  return 'lead' in joined ? { lead: joined.lead } : {};
}

/** A successful decision, kept after its settlement (unless `Cache-Control: no-store`). */
export async function keep(
  cache: RequestCache,
  answered: AnsweredDecision,
  deps: Pick<StageDeps, 'clock'>,
  requestId: string,
): Promise<CachedDecision> {
  const decision: CachedDecision = {
    answers: answered.decision.answers,
    upstream: answered.decision.upstream,
    storedAt: deps.clock(),
    requestId,
  };
  if (answered.kept) decision.kept = answered.kept.questions;
  if (cache.directive !== 'no-store') await cache.store.set(cache.key, decision, cache.ttlSeconds);
  return decision;
}

/** A hit's decision record: the decision it reused, whose upstream answered it (docs/outcomes.md). */
export function reusedDecision(ctx: Routed, decision: CachedDecision): KeptDecision {
  return {
    questions:
      decision.kept ??
      keptText(keptQuestions(ctx.request, decision.answers, decision.upstream), keptImages(ctx.images ?? [])),
    reused: decision.requestId ?? null,
  };
}
