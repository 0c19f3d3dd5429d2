import type {
  AsWritten,
  BudgetWindow,
  EvaluationData,
  EvaluationRequest,
  GatewayFailure,
  Parsed,
  QuestionType,
  Usage,
  UsageDetails,
} from '@decision-gateway/contract';
import type { Logger } from 'pino';
import type { Authenticate } from '../../auth/authenticate.ts';
import type { CacheScope, DecisionCache } from '../../cache/decision-cache.ts';
import type { MapLookup } from '../../calibration-maps/calibrate.ts';
import type { ImageSource } from '../../images/decision-images.ts';
import type { ImageBudget } from '../../images/image-budget.ts';
import type { RateLimiter } from '../../rate-limit/rate-limiter.ts';
import type { Reviews } from '../../reviews/review-service.ts';
import type { Route } from '../../routing/route.ts';
import type { Store } from '../../store/store.ts';
import type { TraceParent } from '../../telemetry/spans.ts';
import type { Pricing } from '../credits.ts';

/** What the evaluation pipeline is built from: the composition root (`app.ts`) hands these over. */
export interface EvaluationDeps {
  authenticate: Authenticate;
  /** Credits only: reserve, settle and release. Keys are checked by `authenticate`. */
  store: Store;
  /** The routes of the configuration, by name; one is `default` (docs/routes.md). */
  routes: ReadonlyMap<string, Route>;
  /** The decision cache of routes that have one (docs/routes.md#decision-cache). */
  cache?: DecisionCache;
  cacheScope?: CacheScope;
  /** Told of each cache outcome on a route with a cache, for metrics. */
  onCacheOutcome?(route: string, outcome: CacheOutcome): void;
  /** Told when an upstream reported more usage than was reserved: the excess is not charged. */
  onDebitCapped?(route: string, excessMicro: number): void;
  /** Told of each hard budget a refused reservation would have exceeded (docs/budgets.md). */
  onBudgetRefused?(holder: 'key' | 'project', window: BudgetWindow): void;
  /** IMAGE_BYTES_IN_FLIGHT (docs/images.md#memory): image bytes requests in flight may hold together. */
  imageBudget?: ImageBudget;
  /** STORE_TIMEOUT_MS: the longest one store call takes before it fails. */
  storeTimeoutMs?: number;
  /** Keep each answered decision for its outcomes (DECISION_RETENTION_DAYS > 0, docs/outcomes.md). */
  keepDecisions?: boolean;
  rateLimiter: RateLimiter;
  pricing: Pricing;
  /** Per-key default when a key has no limit of its own; 0 = off. */
  defaultRateLimitPerMinute: number;
  logger: Logger;
  clock?: () => number;
  /** The active calibration maps, for routes with `calibrate` (docs/calibration-maps.md). */
  calibration?: MapLookup;
  /** Where a route's marked decisions become review items (docs/review.md). */
  reviews?: Pick<Reviews, 'keep'>;
}

/**
 * The body as each door receives it: REST and `/native` hand over bytes; tRPC hands over a reader
 * of one operation's input, read only once the media type has been judged (the order of
 * docs/http-api.md#errors).
 */
export type EvaluationBody = (
  | { kind: 'bytes'; bytes: Uint8Array | undefined; contentType: string | undefined }
  | { kind: 'lazy'; contentType: string | undefined; bytes: number; read(): Promise<Parsed<unknown>> }
  | { kind: 'multipart'; contentType: string | undefined; form: MultipartForm }
) & {
  /**
   * On a door whose JSON may carry image data: the most bytes the body may hold without it
   * (docs/images.md#rules); more → 41300. Elsewhere the door's reader has held the limit already.
   */
  textLimit?: number;
};

/**
 * A `multipart/form-data` evaluation (docs/images.md#multipart) as the REST door read it off the
 * socket, unjudged: the `request` part (the JSON body) and one file part per image.
 */
export interface MultipartForm {
  readonly kind: 'multipart';
  /** The JSON body, from a field or a file part named `request`. */
  request?: Buffer;
  /** The `request` part was longer than 32768 bytes. */
  requestTooLarge?: boolean;
  /** File parts by name; one past an image's size limit is `oversized`. */
  files: Map<string, Buffer | 'oversized'>;
  /** Parts that have no place: fields other than `request`, a name sent twice, too many files. */
  stray: string[];
  /** Why the body is not multipart at all (no boundary, cut short, malformed). */
  malformed?: string;
  /** Bytes of the whole body. */
  bytes: number;
}

/**
 * How a door's request body becomes the gateway's request, for a door that speaks another
 * dialect of decisions (the OpenAI door). Without one, the body is the gateway's own request.
 * The door owns its dialect: the core never reads what `asWritten` holds.
 */
export interface Dialect<W extends AsWritten = AsWritten> {
  /** The body's JSON → the gateway's request and the caller's own as written; or the failure. */
  parse(value: unknown): Parsed<Translated<W>>;
  /** The door has a shape for a question an upstream declined (docs/routes.md#refused-questions). */
  showsRefusals: boolean;
  /** The door has a shape for an input an upstream blocked (the Gemini door's `prompt_feedback`). */
  showsBlocks?: boolean;
}

/** A request in a door's dialect, translated. */
export interface Translated<W extends AsWritten = AsWritten> {
  request: EvaluationRequest;
  /** The request as its caller wrote it, carried untouched to the upstreams (and back to the door). */
  asWritten: W;
  /**
   * How the caller names each choice's options when it reports a truth (docs/outcomes.md), where
   * not by the gateway's string labels (a boolean value stays a boolean).
   */
  truthValues?: ReadonlyMap<string, readonly (string | boolean)[]>;
  /** The images its caller sent, unchecked (docs/images.md): each named and placed in `request`. */
  images?: ImageSource[];
}

/** One evaluation as a door hands it over: the request's headers, translated, and its body. */
export interface EvaluationCall<W extends AsWritten = AsWritten> {
  requestId: string;
  /** performance.now() when the request arrived: elapsedMs counts from here. */
  startedAt: number;
  authorization: string | undefined;
  /** The `x-dg-route` header, when sent. */
  route?: string | undefined;
  /** The `Cache-Control` header, when sent. */
  cacheControl?: string | undefined;
  /** The `Origin` header: a browser's request (docs/browsers.md). */
  origin?: string | undefined;
  body: EvaluationBody;
  dialect?: Dialect<W>;
  /** Where this evaluation's spans attach (its request's span, or a tRPC operation's), while tracing. */
  trace?: TraceParent | undefined;
}

/** What the request log line says about an evaluation, whatever its outcome. Written, never read. */
export interface EvaluationLog {
  keyPrefix?: string;
  questions?: number;
  usage?: Usage;
  creditsUsed?: number;
  upstreamMs?: number;
  /** The route taken, once known. */
  route?: string;
  /** On a route with a decision cache. */
  cache?: CacheOutcome;
  /** The upstream(s) that answered, by configured name (`a+b` after an escalation). */
  upstream?: string;
  /** The upstream's own request id, logged beside the gateway's. */
  upstreamRequestId?: string;
  /** Logprob upstreams: the lowest share of next-token mass that fell on the offered labels. */
  labelMass?: number;
  /** Images the request carried, and their decoded bytes (never the images themselves). */
  images?: number;
  imageBytes?: number;
  /** How many questions of each type the request asked. */
  questionTypes?: Partial<Record<QuestionType, number>>;
  reason?: string;
}

/**
 * What every door tells its caller beside the body (docs/http-api.md#headers), written as headers
 * by one function (`doors/response-meta.ts`). Fields appear once the evaluation has learnt them.
 */
export interface ResponseMeta {
  requestId: string;
  /** Credits debited (successes of API-key and token requests). */
  creditsUsed?: number;
  /** The route the request took, once it is known. */
  route?: string;
  /** Which upstream(s) answered: `name`, or `first+escalated`. */
  upstream?: string;
  /** On a route with a decision cache. */
  cache?: 'hit' | 'miss' | 'bypass';
  /** A hit: whole seconds since the decision was stored. */
  age?: number;
  /** The calibration maps applied (docs/calibration-maps.md). */
  calibration?: string[];
  /** The questions marked for review (docs/review.md). */
  review?: string[];
}

/** A hit, an identical request's answer waited for, a miss, or a lookup skipped by Cache-Control. */
export type CacheOutcome = 'hit' | 'coalesced' | 'miss' | 'bypass';

export type EvaluationOutcome<W extends AsWritten = AsWritten> =
  | {
      ok: true;
      data: EvaluationData;
      meta: ResponseMeta;
      log: EvaluationLog;
      /** Questions declined by every upstream asked (only on a door whose dialect shows refusals). */
      refused: string[];
      /** Usage beyond input and output tokens, where an upstream reported it. */
      usageDetails?: UsageDetails;
      /** An upstream blocked the input (only on a door whose dialect shows blocks): no answers. */
      blocked?: Record<string, unknown>;
      /** The request as its caller wrote it, for a door with a dialect of its own. */
      asWritten?: W;
    }
  | { ok: false; failure: GatewayFailure; meta: ResponseMeta; log: EvaluationLog };

/**
 * The one evaluation path every door calls. Checks run in the order of docs/http-api.md#errors;
 * a failed request is never charged; every authenticated request leaves one usage record.
 */
export type Evaluate = <W extends AsWritten = AsWritten>(
  call: EvaluationCall<W>,
) => Promise<EvaluationOutcome<W>>;

export interface Evaluator {
  evaluate: Evaluate;
  /**
   * For a shutdown that can wait no longer: release every reservation still held, each with a
   * usage record (status 503), and make sure those requests are never settled afterwards.
   * Returns how many were released.
   */
  abandonInFlight(): Promise<number>;
  /** How many evaluations have begun so far: a calibration refit rests between pages while it grows. */
  begun(): number;
}
