import type { AsWritten, DecisionImage, EvaluationRequest, GatewayFailure } from '@decision-gateway/contract';
import type { DecisionCache, DecisionKey } from '../../cache/decision-cache.ts';
import type { Route, RouteAnswer } from '../../routing/route.ts';
import type { KeptDecision, KeyAuth, TokenAuth } from '../../store/store.ts';
import type { PendingRateVerdict } from './rate-limit.ts';
import type { EvaluationCall, EvaluationLog, ResponseMeta } from './types.ts';

/** Who pays for a request: its key, and the browser token it came with, if any. */
export interface Payer extends KeyAuth {
  token: TokenAuth['token'] | null;
  /** Read from authentication's cache and not yet confirmed against the store. */
  unconfirmed: boolean;
}

/** The decision cache as one request uses it: where its decision lives, and what Cache-Control asked. */
export interface RequestCache {
  store: DecisionCache;
  key: DecisionKey;
  directive: 'no-cache' | 'no-store' | undefined;
  ttlSeconds: number;
}

/** The route's decision as it answered it (or the cache's), and what it cost the payer. */
export interface AnsweredDecision {
  decision: Pick<
    RouteAnswer,
    'answers' | 'refused' | 'usage' | 'usageDetails' | 'upstream' | 'blocked' | 'review'
  >;
  creditsUsed: number;
  /** The decision as kept for its outcomes (docs/outcomes.md), where decisions are kept. */
  kept?: KeptDecision;
}

/**
 * One evaluation on its way through the pipeline. Each stage reads what the stages before it
 * learnt and adds its own; `log` is written for the request's log line and never read to decide
 * anything; `meta` is what the response's headers will say.
 */
export interface EvaluationContext {
  readonly call: EvaluationCall;
  readonly log: EvaluationLog;
  meta: ResponseMeta;
  /** Set by authentication; cleared when the key turns out to be refused (nothing is recorded then). */
  payer?: Payer;
  /**
   * The rate limit's verdict, while a remote limiter answers and the request goes on (rate-limit.ts):
   * taken, and awaited, before the request is answered, served from the cache or asked of an upstream.
   */
  rateVerdict?: PendingRateVerdict;
  /** Bytes of the body as received (the reservation's bound counts them). */
  bodyBytes: number;
  request?: EvaluationRequest;
  /** The request as written in its door's dialect, and how its caller names choice options (Translated). */
  asWritten?: AsWritten;
  truthValues?: ReadonlyMap<string, readonly (string | boolean)[]>;
  /** The request's images, checked (docs/images.md), and the reservation's tokens for them. */
  images?: DecisionImage[];
  imageTokens?: number;
  /** Image bytes this request holds of the instance's budget, given back when it ends. */
  imageHold?: number;
  /** How many questions the request asked (0 until it is read). */
  questions: number;
  /** A 40001 found while reading, answered once the route is known (docs/http-api.md#errors). */
  invalid?: GatewayFailure;
  route?: Route;
  cache?: RequestCache;
  /** The hold on the key's credits, once reserved: its id (null on an unlimited key) and amount. */
  reservation?: { id: string | null; boundMicro: number };
  answered?: AnsweredDecision;
  /** A shutdown that could wait no longer released its hold and recorded it: nothing more is written. */
  abandoned?: true;
}

/**
 * What each stage establishes, as tRPC's `protectedProcedure` narrows `ctx`: a stage takes the
 * context its predecessors made and returns it narrowed, or a failure.
 */
/** Authenticated: who pays is known. */
export type Authenticated = EvaluationContext & { payer: Payer };
/** Routed: the request holds every rule and its route is known. */
export type Routed = Authenticated & { request: EvaluationRequest; route: Route };
/** Answered: the decision, its usage and its debit. */
export type Answered = Routed & { answered: AnsweredDecision };

/** A stage's result: the context narrowed, or the failure that ends the request. */
export type Stage<C extends EvaluationContext> = C | GatewayFailure;

/** A failure, not a context (a context always has its call). */
export const failed = <C extends EvaluationContext>(result: Stage<C>): result is GatewayFailure =>
  !('call' in result);

export function newContext(call: EvaluationCall): EvaluationContext {
  return { call, log: {}, meta: { requestId: call.requestId }, bodyBytes: 0, questions: 0 };
}
