import {
  type CreatedToken,
  CreateTokenBody,
  failure,
  type GatewayFailure,
  MODELS,
  type ModelList,
  type Parsed,
  parseAdminInput,
  type RecordedOutcomes,
  RecordOutcomesBody,
} from '@decision-gateway/contract';
import type { Authenticate, Credentials } from '../auth/authenticate.ts';
import type { TokenService } from '../auth/tokens.ts';
import { rateLimitOf } from '../core/evaluation/rate-limit.ts';
import type { Outcomes } from '../outcomes/outcome-service.ts';
import type { RateLimiter } from '../rate-limit/rate-limiter.ts';

export type Result<T> = { ok: true; value: T } | { ok: false; error: GatewayFailure };

/**
 * What a caller may do besides evaluating, written once for every door that offers it (REST,
 * `/native`, tRPC): list the models, and mint a browser token with an API key (docs/browsers.md).
 * Each door only reads its request and writes the result in its own format.
 */
export function createCallerActions(deps: {
  authenticate: Authenticate;
  tokens: TokenService;
  outcomes: Outcomes;
  rateLimiter: RateLimiter;
  defaultRateLimitPerMinute: number;
  clock: () => number;
}) {
  return {
    async listModels(credentials: Credentials): Promise<Result<ModelList>> {
      const auth = await deps.authenticate(credentials);
      return auth.ok ? { ok: true, value: MODELS } : { ok: false, error: auth.failure };
    },

    /**
     * An API key mints a token for its own key; a token may not mint (40300). The body is read
     * only after authentication, so a caller without a key learns nothing about it; no body at
     * all means every default.
     */
    async mintToken(
      credentials: Credentials,
      readBody: () => Promise<Parsed<unknown>> | Parsed<unknown>,
    ): Promise<Result<CreatedToken>> {
      const auth = await deps.authenticate(credentials);
      if (!auth.ok) return { ok: false, error: auth.failure };
      if (auth.principal.kind === 'token')
        return { ok: false, error: failure('forbidden', 'a token cannot mint tokens: use an API key') };
      const read = await readBody();
      const body = read.ok ? parseAdminInput(CreateTokenBody, read.value ?? {}) : read;
      if (!body.ok) return body;
      return deps.tokens.mint(auth.principal.key.id, body.value);
    },

    /**
     * `POST /v1/outcomes` (docs/outcomes.md): an API key, or a token of the key
     * that asked, reports what turned out true. It takes a rate-limit token like an evaluation;
     * no credits, no usage record.
     */
    async recordOutcomes(
      credentials: Credentials,
      readBody: () => Promise<Parsed<unknown>> | Parsed<unknown>,
    ): Promise<Result<RecordedOutcomes>> {
      const auth = await deps.authenticate({ ...credentials, cached: false });
      if (!auth.ok) return { ok: false, error: auth.failure };
      const { key } = auth.principal;
      const token = auth.principal.kind === 'token' ? auth.principal.token : undefined;
      const limited = await rateLimitOf(
        { id: key.id, rateLimitPerMinute: key.rateLimitPerMinute, token },
        deps,
      );
      if (limited) return { ok: false, error: limited };
      const read = await readBody();
      const body = read.ok ? parseAdminInput(RecordOutcomesBody, read.value) : read;
      if (!body.ok) return body;
      return deps.outcomes.record(key.id, body.value);
    },
  };
}

export type CallerActions = ReturnType<typeof createCallerActions>;
