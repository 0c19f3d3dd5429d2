import type { GatewayFailure } from '@decision-gateway/contract';
import { refusedKeyFailure } from '../../auth/api-keys.ts';
import type { Credentials, Principal } from '../../auth/authenticate.ts';
import type { StageDeps } from './deps.ts';
import type { Authenticated, EvaluationContext, Payer, Stage } from './evaluation-context.ts';

const credentialsOf = (ctx: EvaluationContext, cached: boolean): Credentials => ({
  authorization: ctx.call.authorization,
  origin: ctx.call.origin,
  cached,
});

/**
 * Stage 1: who pays. A key or token may come from authentication's cache of recently seen ones;
 * it is confirmed before any answer the reservation does not confirm (`confirmPayer`).
 */
export async function authenticateCaller(
  ctx: EvaluationContext,
  deps: Pick<StageDeps, 'authenticate'>,
): Promise<Stage<Authenticated>> {
  const auth = await deps.authenticate(credentialsOf(ctx, true));
  if (!auth.ok) return auth.failure;
  const { principal } = auth;
  const authenticated = ctx as Authenticated;
  authenticated.payer = payerOf(principal, auth.fromCache);
  ctx.log.keyPrefix = principal.key.prefix;
  return authenticated;
}

/**
 * The payer, field by field. Not `{ ...principal.key, token, unconfirmed }`: keys added after a
 * spread give every copy a hidden class of its own on V8 11 (3 µs in a loop, against 0.05), and
 * every later read of the payer missed its inline cache (docs/performance.md, "Objects that share
 * a shape").
 */
function payerOf(principal: Principal, fromCache: boolean): Payer {
  const { key } = principal;
  return {
    id: key.id,
    prefix: key.prefix,
    rateLimitPerMinute: key.rateLimitPerMinute,
    route: key.route,
    expiresAt: key.expiresAt,
    revokedAt: key.revokedAt,
    token: principal.kind === 'token' ? principal.token : null,
    unconfirmed: fromCache,
  };
}

/**
 * A payer read from authentication's cache, read again from the store before an answer that the
 * reservation did not confirm (docs/http-api.md#keys). Its refusal if it was revoked or has expired since:
 * then the request acts for no one, and nothing is recorded for it.
 */
export async function confirmPayer(
  ctx: EvaluationContext,
  deps: Pick<StageDeps, 'authenticate'>,
): Promise<GatewayFailure | undefined> {
  const payer = ctx.payer;
  if (payer === undefined || !payer.unconfirmed) return undefined;
  const fresh = await deps.authenticate(credentialsOf(ctx, false));
  if (fresh.ok) {
    payer.unconfirmed = false;
    return undefined;
  }
  refuse(ctx);
  return fresh.failure;
}

/**
 * The reservation found the key revoked or expired since authentication read it: refused as
 * authentication words it, read afresh (docs/http-api.md#keys).
 */
export async function refusedAtReservation(
  ctx: Authenticated,
  reason: Parameters<typeof refusedKeyFailure>[0],
  deps: Pick<StageDeps, 'authenticate'>,
): Promise<GatewayFailure> {
  ctx.payer.unconfirmed = true;
  const refused = (await confirmPayer(ctx, deps)) ?? refusedKeyFailure(reason);
  refuse(ctx);
  return refused;
}

/** The key was refused after all: no one pays, nothing is recorded, the headers say only the id. */
export function refuse(ctx: EvaluationContext): void {
  ctx.payer = undefined;
  ctx.meta = { requestId: ctx.call.requestId };
}
