// Types only: the client never loads server code (checked by bundle.test.ts).
import type { AppRouter } from '@decision-gateway/api';
import type {
  CreatedToken,
  CreateTokenBody,
  ModelList,
  RecordedOutcomes,
  State,
} from '@decision-gateway/contract';
import { MODEL_ID, type ModelId } from '@decision-gateway/contract/limits';
import { createTRPCClient, httpLink, type TRPCClient, type TRPCLink } from '@trpc/client';
import { observable } from '@trpc/server/observable';
import type { Evaluation, EvaluationMeta, OutcomesOf } from './answers.ts';
import type { ImageAssetDefinition, QuestionDefinition } from './builders.ts';
import { type GatewayError, GatewayNetworkError, toGatewayError } from './errors.ts';

export interface RetryOptions {
  /** How many times a 429 or 503 is retried (default 0: off). */
  maxRetries: number;
  /** Never wait longer than this for one retry, whatever the gateway asks (default 30000). */
  maxDelayMs?: number;
}

export interface GatewayClientOptions {
  /** The gateway's base URL, e.g. `http://127.0.0.1:8787` (the client calls `<url>/trpc`). */
  url: string;
  /** An API key (`dg_…`). Keys belong on trusted servers, never in a browser. */
  apiKey?: string;
  /**
   * A short-lived token (`dgt_…`) minted by your server, for browsers: a string, or a function
   * returning one (or a promise of one), called before the first call and again, once, when the
   * gateway says the token expired.
   */
  token?: string | (() => string | Promise<string>);
  /** A fetch implementation (defaults to the global one). */
  fetch?: typeof fetch;
  /** Extra headers for every call. */
  headers?: Record<string, string>;
  /** Retries for 429 and 503, waiting `retryAfterMs` (bounded by `maxDelayMs`). Off by default. */
  retry?: RetryOptions;
  /** Allow an API key in a browser-like environment. Only for trusted, internal tools. */
  dangerouslyAllowBrowser?: boolean;
}

export interface EvaluateRequest<Questions extends Record<string, QuestionDefinition>> {
  state: State;
  questions: Questions;
  /** Images by ref, each made with `image(bytes)`; the state or instructions mention each ref. */
  assets?: Record<string, ImageAssetDefinition>;
  /** Defaults to the gateway's model, `vendor/model-1.13`. */
  model?: ModelId;
  /** A route of the gateway's configuration, sent as `x-dg-route` (default: the key's, else `default`). */
  route?: string;
  /**
   * On a route with a decision cache, sent as `Cache-Control`: `no-cache` asks the upstream afresh
   * (and stores the answer), `no-store` neither looks up nor stores.
   */
  cache?: 'no-cache' | 'no-store';
}

export interface GatewayClient {
  /** Evaluate 1–8 questions over a shared state; answers are typed per question ID. */
  evaluate<const Questions extends Record<string, QuestionDefinition>>(
    request: EvaluateRequest<Questions>,
  ): Promise<Evaluation<Questions>>;
  /** The models this gateway serves. */
  listModels(): Promise<ModelList>;
  /** Mints a short-lived token for a browser (API key only; on your server). */
  createToken(options?: CreateTokenBody): Promise<CreatedToken>;
  /**
   * Reports what turned out true for a decision (docs/outcomes.md). Given the
   * decision `evaluate` returned, each truth is typed by its question: a choice takes one of its
   * labels, a score a level index, a noul a boolean. Given only its request id, name the questions'
   * type (`recordOutcome<typeof questions>(id, …)`) to keep that typing. Recording again replaces.
   */
  recordOutcome<
    const Questions extends Record<string, QuestionDefinition> = Record<string, QuestionDefinition>,
  >(decision: Evaluation<Questions> | string, outcomes: OutcomesOf<Questions>): Promise<RecordedOutcomes>;
  /** The raw typed tRPC proxy, for advanced use (errors are TRPCClientError there). */
  readonly trpc: TRPCClient<AppRouter>;
}

/** True in browsers and web workers: anywhere an API key would be exposed to end users. */
function isBrowserLike(): boolean {
  const g = globalThis as {
    window?: { document?: unknown };
    importScripts?: unknown;
    navigator?: { product?: string };
  };
  return (g.window !== undefined && g.window.document !== undefined) || typeof g.importScripts === 'function';
}

const RETRYABLE = new Set([42900, 50300]);

const CACHE_OUTCOMES = new Set(['hit', 'miss', 'bypass']);

/** Reads what the gateway said in its response headers into the caller's `meta` holder. */
const metaLink: TRPCLink<AppRouter> =
  () =>
  ({ next, op }) =>
    observable((observer) =>
      next(op).subscribe({
        next(value) {
          const response = (value.context as { response?: Response } | undefined)?.response;
          const holder = op.context.meta as Partial<EvaluationMeta> | undefined;
          if (response && holder) {
            const header = (name: string) => response.headers.get(name);
            const cache = header('x-dg-cache');
            holder.requestId = header('x-request-id') ?? '';
            holder.route = header('x-dg-route');
            holder.upstream = header('x-dg-upstream');
            holder.cache =
              cache !== null && CACHE_OUTCOMES.has(cache) ? (cache as EvaluationMeta['cache']) : null;
          }
          observer.next(value);
        },
        error: (error) => observer.error(error),
        complete: () => observer.complete(),
      }),
    );

/** A typed client of the gateway's tRPC door (docs/http-api.md#the-other-doors). */
export function createGatewayClient(options: GatewayClientOptions): GatewayClient {
  if (options.apiKey !== undefined && isBrowserLike() && options.dangerouslyAllowBrowser !== true) {
    throw new Error(
      'Decision Gateway API keys must stay on a trusted server: this looks like a browser. ' +
        'Call the gateway from your server instead, or pass dangerouslyAllowBrowser: true if you understand the risk.',
    );
  }
  const base = options.url.replace(/\/+$/, '');
  const headers: Record<string, string> = { ...options.headers };
  if (options.apiKey !== undefined) headers.authorization = `Bearer ${options.apiKey}`;
  // The token, fetched once and kept until the gateway says it expired.
  const tokenSource = options.token;
  let token: Promise<string> | undefined;
  const currentToken = () => {
    if (tokenSource === undefined) return undefined;
    token ??= Promise.resolve(typeof tokenSource === 'function' ? tokenSource() : tokenSource);
    return token;
  };

  // A reply that is not JSON (a proxy's error page, a wrong URL) is no gateway answer at all.
  const baseFetch = options.fetch ?? globalThis.fetch;
  const gatewayFetch: typeof fetch = async (input, init) => {
    const response = await baseFetch(input, init);
    const contentType = response.headers.get('content-type') ?? '';
    if (!/\bjson\b/i.test(contentType)) {
      throw new GatewayNetworkError({
        message: `${base} did not answer as a Decision Gateway (HTTP ${response.status}, ${contentType || 'no content type'})`,
        code: 0,
        type: 'invalid_response',
        status: response.status,
        requestId: response.headers.get('x-request-id') ?? undefined,
      });
    }
    return response;
  };

  const trpc = createTRPCClient<AppRouter>({
    links: [
      metaLink,
      httpLink({
        url: `${base}/trpc`,
        // Per-call headers (x-dg-route) travel in the operation's context.
        headers: async ({ op }) => {
          const bearer = await currentToken();
          return {
            ...headers,
            ...(bearer !== undefined && { authorization: `Bearer ${bearer}` }),
            ...(op.context.headers as Record<string, string> | undefined),
          };
        },
        fetch: gatewayFetch,
      }),
    ],
  });

  const maxRetries = options.retry?.maxRetries ?? 0;
  const maxDelayMs = options.retry?.maxDelayMs ?? 30_000;

  async function call<T>(run: () => Promise<T>): Promise<T> {
    let refreshed = false;
    for (let attempt = 0; ; attempt++) {
      try {
        return await run();
      } catch (error) {
        const failure: GatewayError = toGatewayError(error);
        // An expired token is fetched again, once, if the caller gave a way to fetch one.
        if (
          failure.code === 40101 &&
          /expired/.test(failure.message) &&
          typeof tokenSource === 'function' &&
          !refreshed
        ) {
          refreshed = true;
          token = undefined;
          attempt--;
          continue;
        }
        if (attempt >= maxRetries || !RETRYABLE.has(failure.code)) throw failure;
        const wait = Math.min(failure.retryAfterMs ?? 1000 * 2 ** attempt, maxDelayMs);
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
    }
  }

  return {
    trpc,
    async evaluate(request) {
      const input = {
        model: request.model ?? MODEL_ID,
        state: request.state,
        questions: request.questions,
        ...(request.assets !== undefined && { assets: request.assets }),
      };
      const callHeaders: Record<string, string> = {};
      if (request.route !== undefined) callHeaders['x-dg-route'] = request.route;
      if (request.cache !== undefined) callHeaders['cache-control'] = request.cache;
      const meta: Partial<EvaluationMeta> = {};
      const data = await call(() =>
        trpc.evaluate.mutate(input as never, { context: { headers: callHeaders, meta } }),
      );
      // The router's output is the contract's untyped-by-question answers; the client narrows
      // it to the questions sent, which the gateway guarantees (one answer per ID, same type).
      return { review: [], ...data, meta: meta as EvaluationMeta } as unknown as Evaluation<
        typeof request.questions
      >;
    },
    listModels() {
      return call(() => trpc.models.query());
    },
    createToken(tokenOptions = {}) {
      return call(() => trpc.tokens.create.mutate(tokenOptions));
    },
    recordOutcome(decision, outcomes) {
      const requestId = typeof decision === 'string' ? decision : decision.meta.requestId;
      return call(() =>
        trpc.outcomes.record.mutate({
          requestId,
          outcomes: outcomes as Record<string, string | number | boolean>,
        }),
      );
    },
  };
}
