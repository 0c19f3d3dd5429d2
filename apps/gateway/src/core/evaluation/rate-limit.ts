import { failure, type GatewayFailure } from '@decision-gateway/contract';
import type { StageDeps } from './deps.ts';
import type { Authenticated, EvaluationContext, Payer } from './evaluation-context.ts';
import type { EvaluationLog, ResponseMeta } from './types.ts';

type RateDeps = Pick<StageDeps, 'rateLimiter' | 'defaultRateLimitPerMinute' | 'clock'> & {
  forecast?: RateForecast | undefined;
};

/**
 * Stage 2: a token from the key's bucket for every request, and from a browser token's own bucket
 * on top of it (docs/operating.md#configuration). 429 when either is empty.
 *
 * A limiter asked over the network (Redis) costs a round trip. A request its buckets' last answers
 * leave room for goes on while it answers: it is read and routed, and its reservation is sent
 * beside the take. Its verdict (`ctx.rateVerdict`) is awaited before anything is answered, served
 * from the cache or asked of an upstream, so a 429 still wins over every later failure and a
 * refused request never reaches an upstream; a hold it took is released. A key at its limit waits
 * for each answer, so its refused requests cost no more than they did (docs/scaling-out.md, "The
 * rate limit beside the reservation").
 */
export function rateLimit(
  ctx: Authenticated,
  deps: RateDeps,
): Promise<GatewayFailure | undefined> | undefined {
  const { payer } = ctx;
  const limits = limitsOf(payer, deps);
  if (limits === undefined) return undefined;
  const { forecast } = deps;
  if (forecast === undefined) return takeTokens(payer, deps, limits);
  const ahead =
    (limits.key <= 0 || forecast.roomFor(payer.id)) &&
    (limits.token <= 0 || forecast.roomFor(tokenBucketOf(payer)));
  const verdict = takeTokens(payer, deps, limits);
  if (!ahead) return verdict;
  // Nothing awaits it until the reservation: a limiter that throws must not be an unhandled rejection.
  verdict.catch(() => {});
  ctx.rateVerdict = { verdict, meta: { ...ctx.meta }, log: { ...ctx.log } };
  return undefined;
}

/** A request gone on before its rate limit's answer: the answer, and what the request had said of itself then. */
export interface PendingRateVerdict {
  verdict: Promise<GatewayFailure | undefined>;
  meta: ResponseMeta;
  log: EvaluationLog;
}

/**
 * The verdict of a request that went on while its limiter answered, handed over once (then it is
 * known); undefined when there is none to wait for. A refused request is then told and recorded
 * as one refused before it was read: no route, no questions, the headers and log fields it had.
 */
export function takeRateVerdict(ctx: EvaluationContext): Promise<GatewayFailure | undefined> | undefined {
  const pending = ctx.rateVerdict;
  if (pending === undefined) return undefined;
  ctx.rateVerdict = undefined;
  return pending.verdict.then((refused) => {
    if (refused !== undefined) unread(ctx, pending);
    return refused;
  });
}

function unread(ctx: EvaluationContext, before: PendingRateVerdict): void {
  ctx.meta = before.meta;
  const log = ctx.log as Record<string, unknown>;
  for (const field of Object.keys(log)) if (!(field in before.log)) delete log[field];
  Object.assign(log, before.log);
  ctx.questions = 0;
  ctx.route = undefined;
  ctx.cache = undefined;
}

/**
 * What a remote limiter's answers said of each bucket (the pipeline keeps one only for a limiter
 * asked over the network: one in memory answers within the turn): the whole tokens it held at its last
 * answer, and the takes asked since. A request goes on unanswered only if the bucket has a token
 * for it after every take still on its way, so no more requests go ahead than the bucket held
 * (other instances' takes aside). It forgets the buckets it has not heard of longest.
 */
export interface RateForecast {
  /** Whether `bucket` has a token for one more request. */
  roomFor(bucket: string): boolean;
  asked(bucket: string): void;
  answered(bucket: string, left: number): void;
}

export function createRateForecast(maxBuckets = 10_000): RateForecast {
  const buckets = new Map<string, { left: number; asked: number }>();
  return {
    roomFor(bucket) {
      const known = buckets.get(bucket);
      return known !== undefined && known.left - known.asked >= 1;
    },
    asked(bucket) {
      const known = buckets.get(bucket);
      if (known !== undefined) known.asked++;
      else {
        if (buckets.size >= maxBuckets) buckets.delete(buckets.keys().next().value as string);
        buckets.set(bucket, { left: 0, asked: 1 });
      }
    },
    answered(bucket, left) {
      const known = buckets.get(bucket);
      if (known === undefined) return;
      known.left = left;
      if (known.asked > 0) known.asked--;
      // Heard of last: forgotten last.
      buckets.delete(bucket);
      buckets.set(bucket, known);
    },
  };
}

/** Who takes the tokens: a key, and the browser token it came with (also outcomes, docs/outcomes.md). */
export type Bucketed = Pick<Payer, 'id' | 'rateLimitPerMinute'> & {
  token?: { id: string; rateLimitPerMinute: number | null } | null | undefined;
};

export function rateLimitOf(
  payer: Bucketed,
  deps: RateDeps,
): Promise<GatewayFailure | undefined> | undefined {
  const limits = limitsOf(payer, deps);
  return limits === undefined ? undefined : takeTokens(payer, deps, limits);
}

/** Each bucket's limit a minute (0: none); undefined when there is no bucket to take from. */
function limitsOf(payer: Bucketed, deps: RateDeps): { key: number; token: number } | undefined {
  const key = payer.rateLimitPerMinute ?? deps.defaultRateLimitPerMinute;
  const token = payer.token?.rateLimitPerMinute ?? 0;
  return key <= 0 && token <= 0 ? undefined : { key, token };
}

const tokenBucketOf = (payer: Bucketed) => `token:${payer.token?.id}`;

async function takeTokens(
  payer: Bucketed,
  deps: RateDeps,
  limits: { key: number; token: number },
): Promise<GatewayFailure | undefined> {
  if (limits.key > 0) {
    const over = await overLimit(deps, payer.id, limits.key, 'the key');
    if (over) return over;
  }
  if (limits.token > 0) return overLimit(deps, tokenBucketOf(payer), limits.token, 'the token');
  return undefined;
}

async function overLimit(
  deps: RateDeps,
  bucket: string,
  perMinute: number,
  whose: string,
): Promise<GatewayFailure | undefined> {
  deps.forecast?.asked(bucket);
  const decision = await deps.rateLimiter.take(bucket, perMinute, deps.clock());
  deps.forecast?.answered(bucket, decision.ok ? decision.left : 0);
  if (decision.ok) return undefined;
  const message = `${whose} is over its rate limit of ${perMinute} requests per minute`;
  return failure('rate_limited', message, { retryAfterMs: decision.retryAfterMs });
}
