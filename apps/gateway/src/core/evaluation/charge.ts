import { failure } from '@decision-gateway/contract';
import { budgetRefusal } from '../../budgets/refusal.ts';
import { needsOf } from '../../images/capabilities.ts';
import { decisionRecord } from '../../outcomes/decision-record.ts';
import type { Route, RouteAnswer, RouteCall, RouteOutcome } from '../../routing/route.ts';
import { StoreUnavailableError } from '../../store/store.ts';
import { costMicro, fromMicro } from '../credits.ts';
import type { StageDeps } from './deps.ts';
import type { Answered, Routed, Stage } from './evaluation-context.ts';
import { refusedAtReservation } from './payer.ts';
import { takeRateVerdict } from './rate-limit.ts';

/**
 * Stage 6, every request the cache did not answer: reserve the worst case, ask the route, cap the
 * cost at the reservation, settle (docs/http-api.md#credits). On success `ctx.answered` holds the checked
 * answers and the debit. Storage trouble is thrown, for the pipeline's one answer to it.
 */
export async function charge(ctx: Routed, deps: StageDeps): Promise<Stage<Answered>> {
  const { route, request, payer } = ctx;
  const bound =
    ctx.images === undefined
      ? route.usageBound(request, ctx.bodyBytes)
      : route.usageBound(request, ctx.bodyBytes, needsOf(request, ctx.images), ctx.imageTokens);
  const boundMicro = costMicro(bound, deps.pricing);
  const reservation = await deps.ledger.reserve(ctx, boundMicro);
  // Reserved beside its rate limit's take (rate-limit.ts): a refused request releases its hold.
  const verdict = takeRateVerdict(ctx);
  const limited = verdict && (await verdict);
  if (limited) {
    if (reservation.ok) ctx.reservation = { id: reservation.reservationId, boundMicro };
    return limited;
  }
  if (!reservation.ok && reservation.code === 'key_refused')
    return refusedAtReservation(ctx, reservation.reason, deps);
  payer.unconfirmed = false;
  if (!reservation.ok && reservation.code === 'budget_exceeded') {
    for (const { holder, window } of reservation.exceeded) deps.onBudgetRefused?.(holder.kind, window);
    return budgetRefusal(reservation.exceeded, deps.clock());
  }
  if (!reservation.ok) {
    const whose = payer.token?.maxCreditsMicro ? 'the token (or its key)' : 'the key';
    return failure(
      'insufficient_credits',
      `this request may cost up to ${fromMicro(boundMicro)} credits; ${whose} has ${fromMicro(reservation.availableMicro)} available`,
    );
  }
  ctx.reservation = { id: reservation.reservationId, boundMicro };
  deps.inFlight.begin(ctx);
  try {
    const outcome = await ask(ctx, route, deps);
    if (!outcome.ok) {
      if (outcome.detail) ctx.log.reason = outcome.detail;
      return outcome.failure;
    }
    // A shutdown released this request's hold while the upstream answered: it is not charged.
    if (!deps.inFlight.settle(ctx.call.requestId))
      return failure('unavailable', 'the gateway shut down before the answer');
    return await settle(ctx, outcome, boundMicro, deps);
  } catch (error) {
    // The store cannot be reached: its hold goes stale by itself (docs/http-api.md#credits).
    if (error instanceof StoreUnavailableError) throw error;
    deps.logger.error({ err: error, requestId: ctx.call.requestId }, 'evaluation failed unexpectedly');
    return failure('internal_error', 'internal error');
  } finally {
    deps.inFlight.end(ctx.call.requestId);
  }
}

/** The route's upstreams, within the route's deadline. */
async function ask(ctx: Routed, route: Route, deps: StageDeps): Promise<RouteOutcome> {
  const started = performance.now();
  const call: RouteCall = {
    request: ctx.request,
    bodyBytes: ctx.bodyBytes,
    requestId: ctx.call.requestId,
    deadlineAt: deps.clock() + route.spec.deadlineMs,
  };
  if (ctx.asWritten) call.asWritten = ctx.asWritten;
  if (ctx.images) call.images = ctx.images;
  if (ctx.call.trace) call.trace = ctx.call.trace;
  if (ctx.call.dialect?.showsRefusals) call.showsRefusals = true;
  if (ctx.call.dialect?.showsBlocks) call.showsBlocks = true;
  if (route.spec.calibrate && deps.calibration) call.calibration = deps.calibration;
  const outcome = await route.answer(call);
  ctx.log.upstreamMs = performance.now() - started;
  return outcome;
}

/** Never more than was reserved: an upstream reporting more is charged the reservation. */
async function settle(
  ctx: Routed,
  outcome: RouteAnswer,
  boundMicro: number,
  deps: StageDeps,
): Promise<Answered> {
  const { log } = ctx;
  log.upstream = outcome.upstream;
  log.usage = outcome.usage;
  if (outcome.upstreamRequestId !== undefined) log.upstreamRequestId = outcome.upstreamRequestId;
  if (outcome.labelMass !== undefined) log.labelMass = outcome.labelMass;
  const reported = costMicro(outcome.usage, deps.pricing);
  if (reported > boundMicro) {
    deps.onDebitCapped?.(ctx.route.spec.name, reported - boundMicro);
    deps.logger.warn(
      {
        requestId: ctx.call.requestId,
        upstream: outcome.upstream,
        usage: outcome.usage,
        reservedMicro: boundMicro,
        reportedMicro: reported,
      },
      'the upstream reported more usage than was reserved; the reservation was charged',
    );
  }
  const kept = deps.keepDecisions
    ? decisionRecord(ctx.request, outcome, ctx.truthValues, ctx.images)
    : undefined;
  const debited = await deps.ledger.settle(
    ctx,
    outcome.usage,
    Math.min(reported, boundMicro),
    outcome.upstream,
    kept,
  );
  // A decision a route marked for review, once it is kept: its item (docs/review.md).
  if (outcome.review && kept && deps.reviews)
    await deps.reviews.keep({
      requestId: ctx.call.requestId,
      keyId: ctx.payer.id,
      route: ctx.route.spec.name,
      request: ctx.request,
      images: ctx.images,
      answers: outcome.answers,
      review: outcome.review,
    });
  const creditsUsed = fromMicro(debited);
  log.creditsUsed = creditsUsed;
  ctx.meta.upstream = outcome.upstream;
  ctx.meta.creditsUsed = creditsUsed;
  if (outcome.calibration) ctx.meta.calibration = outcome.calibration;
  if (outcome.review) ctx.meta.review = outcome.review;
  const answered = ctx as Answered;
  answered.answered = kept ? { decision: outcome, creditsUsed, kept } : { decision: outcome, creditsUsed };
  return answered;
}
