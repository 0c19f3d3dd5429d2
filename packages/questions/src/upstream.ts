import type {
  AsWritten,
  DecisionImage,
  EvaluationRequest,
  GatewayFailure,
  Usage,
  UsageDetails,
} from '@decision-gateway/contract';

/** One evaluation handed to an upstream: the validated request and its deadline. */
export interface UpstreamCall {
  request: EvaluationRequest;
  /** Size of the body as received, for the reservation bound of upstreams that don't count. */
  bodyBytes: number;
  requestId: string;
  /** Epoch milliseconds by which the answer must be in, across all attempts (docs/upstreams.md). */
  deadlineAt: number;
  /**
   * The request's images, checked (docs/images.md): asked only of an upstream whose capabilities
   * take them, which sends them in its own wire format. Absent: none.
   */
  images?: readonly DecisionImage[];
  /**
   * The request as its caller wrote it in a door's own dialect, untouched: the upstream kind that
   * speaks `asWritten.dialect` may send it as written; every other kind ignores it.
   */
  asWritten?: AsWritten;
  /**
   * Where the trace of this call continues, while the gateway traces (docs/tracing.md): opaque
   * to upstreams, handed on to the HTTP client with the call.
   */
  trace?: unknown;
}

/**
 * What an upstream returns. Answers and usage are raw: the gateway checks them (docs/upstreams.md) before
 * any caller sees them, whichever upstream made them. Failures are already gateway errors.
 */
export type UpstreamOutcome =
  | {
      ok: true;
      answers: unknown;
      usage: unknown;
      upstreamRequestId?: string;
      /** For upstreams that read logprobs: the lowest share of next-token mass on the offered labels. */
      labelMass?: number;
      /** Usage beyond input and output tokens (`openai-decisions`), for OpenAI-door callers. */
      usageDetails?: UsageDetails;
      /**
       * The upstream blocked the whole input (Google's `prompt_feedback`): every question is
       * declined, and this is the upstream's own account of why, for a door that can show it.
       */
      blocked?: Record<string, unknown>;
    }
  | {
      ok: false;
      failure: GatewayFailure;
      detail?: string;
      /**
       * The failure shows the upstream itself is unwell (unreachable, 5xx or busy after its
       * retries, past its deadline): it counts against the upstream's circuit. A refusal of the
       * caller's input or a malformed answer proves the upstream is up.
       */
      unwell?: boolean;
    };

/** The interface every upstream implements, whatever its kind (apps/gateway/src/upstreams/kinds). */
export interface Upstream {
  readonly name: string;
  /** Its kind, as configured (`GET /admin/upstreams`); a test's own upstream may not say. */
  readonly kind?: string;
  /**
   * The most questions one call may carry; a request with more is asked in groups of at most this
   * many, each with the whole state (docs/upstreams.md#groups). Undefined: no limit.
   */
  readonly maxQuestions?: number;
  /** What it can see (docs/images.md#upstreams); absent: no images at all. */
  readonly capabilities?: ImageCapabilities;
  /** It may decline a question, answering `{"type": "refusal"}` for it (docs/routes.md#refused-questions). */
  readonly refuses?: boolean;
  /** How far its distributions of `n` values may sum from 1, where it rounds them (default 0.02). */
  tolerance?(n: number): number;
  /** Its circuit breaker's state, where it has one (remote upstreams). */
  circuit?(): 'closed' | 'open' | 'half-open';
  /**
   * An upper bound of the usage `call` can incur, reserved before the call (docs/http-api.md#credits):
   * `bodyBytes` without image data, and `imageTokens` added once per group that carries the images.
   */
  usageBound(request: EvaluationRequest, bodyBytes: number, imageTokens?: number): Usage;
  answer(call: UpstreamCall): Promise<UpstreamOutcome>;
  close?(): Promise<void>;
}

/** What an upstream can see (docs/images.md#upstreams): each kind has its defaults, a configuration may change them. */
export interface ImageCapabilities {
  images: boolean;
  /** Images given as URLs, which it fetches itself. */
  imageUrls: boolean;
  /** The `box` question. */
  box: boolean;
  maxImages: number;
}
