import { type AsWritten, type GatewayFailure, MODEL_ID, type Usage } from '@decision-gateway/contract';
import { createCoalescer } from '../../cache/coalesce.ts';
import type { CachedDecision } from '../../cache/decision-cache.ts';
import { storeTroubleFailure } from '../store-trouble.ts';
import { type Found, keep, lookUp, reusedDecision } from './cached-decision.ts';
import { charge } from './charge.ts';
import type { StageDeps } from './deps.ts';
import {
  type Answered,
  type EvaluationContext,
  failed,
  newContext,
  type RequestCache,
  type Routed,
} from './evaluation-context.ts';
import { createInFlight } from './in-flight.ts';
import { createLedger, staleAfterMs } from './ledger.ts';
import { authenticateCaller, confirmPayer } from './payer.ts';
import { createRateForecast, rateLimit, takeRateVerdict } from './rate-limit.ts';
import { readRequest } from './read-request.ts';
import { resolveRoute } from './resolve-route.ts';
import type { Evaluate, EvaluationCall, EvaluationDeps, EvaluationOutcome, Evaluator } from './types.ts';

export type * from './types.ts';

/**
 * The evaluation pipeline: a fixed order of small stages, each working on one context and
 * returning a failure or nothing (docs/http-api.md#errors gives the order):
 *
 *   authenticate → rate limit → read the request (and its images) → resolve the route
 *     → [decision cache: a hit is served] → charge (reserve → ask → cap → settle)
 *
 * A rate limiter asked over the network may answer later: a request its bucket has room for goes
 * on meanwhile, and its verdict is awaited before the cache, an upstream or any answer (rate-limit.ts).
 *
 * `fail` is the one place a failure becomes an outcome, and the ledger the only code that writes
 * credits and usage records, so a failed request is never charged and every authenticated request
 * leaves one usage record by construction. The stages are called one after another here rather
 * than through a middleware chain: this is the hot path of every door.
 */
export function createEvaluator(evaluation: EvaluationDeps): Evaluator {
  const clock = evaluation.clock ?? Date.now;
  const longestDeadlineMs = Math.max(
    ...[...evaluation.routes.values()].map((route) => route.spec.deadlineMs),
  );
  const deps: StageDeps = {
    ...evaluation,
    clock,
    inFlight: createInFlight(),
    coalescer: createCoalescer(),
    forecast: evaluation.rateLimiter.remote === true ? createRateForecast() : undefined,
    ledger: createLedger({
      store: evaluation.store,
      clock,
      logger: evaluation.logger,
      staleAfterMs: staleAfterMs(longestDeadlineMs, evaluation.storeTimeoutMs ?? 2_000),
    }),
  };

  /** Evaluations begun so far: background work rests while it grows. */
  let begun = 0;

  async function run(call: EvaluationCall): Promise<EvaluationOutcome> {
    begun++;
    const ctx = newContext(call);
    try {
      const authenticated = await authenticateCaller(ctx, deps);
      if (failed(authenticated)) return await fail(ctx, authenticated);
      const stop =
        (await rateLimit(authenticated, deps)) ?? (await readRequest(authenticated, deps.imageBudget));
      if (stop) return await fail(ctx, stop);
      const routed = resolveRoute(authenticated, deps);
      if (failed(routed)) return await fail(ctx, routed);
      // Awaited, not returned: an async function returning a promise pays two more microtasks.
      return routed.cache === undefined ? await charged(routed) : await cached(routed, routed.cache);
    } catch (error) {
      // Storage trouble is never a 500 (docs/operating.md#timeouts-and-what-sigterm-guarantees): try again shortly.
      const unavailable = storeTroubleFailure(error);
      if (!unavailable) throw error;
      deps.logger.warn({ err: error, requestId: call.requestId }, 'the store is unavailable');
      ctx.log.reason = (error as Error).message;
      // Whatever the store did or did not do for this request, it ends as a failure: recorded once
      // the store answers again, its hold freed, its debit undone should a lost settle have landed.
      // Its key too may not have been read yet: it is then looked up first (a refused key: no record).
      if (!ctx.abandoned && call.authorization !== undefined)
        deps.ledger.releaseLater(ctx, 503, async (later) => !failed(await authenticateCaller(later, deps)));
      return { ok: false, failure: unavailable, meta: ctx.meta, log: ctx.log };
    } finally {
      // The image bytes this request held are free for others once it is answered.
      if (ctx.imageHold !== undefined) deps.imageBudget?.give(ctx.imageHold);
    }
  }

  /** The one place a failure becomes an outcome: confirmed, released and recorded once. */
  async function fail(ctx: EvaluationContext, failure: GatewayFailure): Promise<EvaluationOutcome> {
    // A request that went on while its rate limit was asked: a 429 comes before any later failure.
    const verdict = takeRateVerdict(ctx);
    if (verdict !== undefined) failure = (await verdict) ?? failure;
    const refused = await confirmPayer(ctx, deps);
    if (refused) return { ok: false, failure: refused, meta: ctx.meta, log: ctx.log };
    // A request a shutdown abandoned was recorded then.
    if (ctx.payer && !ctx.abandoned) await deps.ledger.release(ctx, failure.status);
    return { ok: false, failure, meta: ctx.meta, log: ctx.log };
  }

  async function charged(ctx: Routed): Promise<EvaluationOutcome> {
    const charged = await charge(ctx, deps);
    return failed(charged) ? fail(ctx, charged) : answered(charged);
  }

  /** On a route that keeps decisions: a hit is served; else this request may lead identical ones. */
  async function cached(ctx: Routed, cache: RequestCache): Promise<EvaluationOutcome> {
    const verdict = takeRateVerdict(ctx);
    const limited = verdict && (await verdict);
    if (limited) return fail(ctx, limited);
    const { found, lead } = await lookUp(ctx, cache, deps);
    if (found) return served(ctx, found);
    let decision: CachedDecision | undefined;
    try {
      const outcome = await charged(ctx);
      // Only successful decisions, after their settlement, and none with a refusal in it.
      if (outcome.ok && ctx.answered && ctx.answered.decision.refused.length === 0)
        decision = await keep(cache, ctx.answered, deps, ctx.call.requestId);
      return outcome;
    } finally {
      lead?.done(decision);
    }
  }

  /** A decision from the cache (or an identical request's): nothing spent, a usage record all the same. */
  async function served(ctx: Routed, { decision, how }: Found): Promise<EvaluationOutcome> {
    const refused = await confirmPayer(ctx, deps);
    if (refused) return { ok: false, failure: refused, meta: ctx.meta, log: ctx.log };
    const route = ctx.route.spec.name;
    Object.assign(ctx.log, { cache: how, upstream: decision.upstream, usage: NO_USAGE, creditsUsed: 0 });
    const kept = deps.keepDecisions ? reusedDecision(ctx, decision) : undefined;
    await deps.ledger.recordHit(ctx, decision.upstream, kept);
    deps.onCacheOutcome?.(route, how);
    ctx.meta.upstream = decision.upstream;
    ctx.meta.creditsUsed = 0;
    ctx.meta.cache = 'hit';
    ctx.meta.age = Math.max(0, Math.floor((clock() - decision.storedAt) / 1000));
    const hit = ctx as Answered;
    hit.answered = {
      decision: { answers: decision.answers, refused: [], usage: NO_USAGE, upstream: decision.upstream },
      creditsUsed: 0,
    };
    return answered(hit);
  }

  function answered(ctx: Answered): EvaluationOutcome {
    const { decision, creditsUsed } = ctx.answered;
    const { answers, refused, usage, usageDetails, blocked, review } = decision;
    const elapsedMs = Math.round(performance.now() - ctx.call.startedAt);
    const outcome: EvaluationOutcome = {
      ok: true,
      log: ctx.log,
      meta: ctx.meta,
      data: {
        result: { model: MODEL_ID, answers, usage, elapsedMs },
        creditsUsed,
        ...(review && { review }),
      },
      refused,
    };
    if (usageDetails) outcome.usageDetails = usageDetails;
    if (blocked) outcome.blocked = blocked;
    if (ctx.asWritten) outcome.asWritten = ctx.asWritten;
    return outcome;
  }

  async function abandonInFlight(): Promise<number> {
    const pending = deps.inFlight.abandonAll();
    await Promise.all(pending.map((ctx) => deps.ledger.release(ctx, 503)));
    return pending.length;
  }

  // The request as written that an outcome carries back is the one this call's own dialect parsed.
  const evaluate: Evaluate = <W extends AsWritten>(call: EvaluationCall<W>) =>
    run(call) as Promise<EvaluationOutcome<W>>;

  return { evaluate, abandonInFlight, begun: () => begun };
}

const NO_USAGE: Usage = { input_tokens: 0, output_tokens: 0 };
