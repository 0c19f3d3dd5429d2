import { MODEL_ID } from '@decision-gateway/contract';
import pino from 'pino';
import type { Authenticate, Authentication } from '../../src/auth/authenticate.ts';
import { pricingFromCredits } from '../../src/core/credits.ts';
import type { EvaluationCall, EvaluationDeps } from '../../src/core/evaluation/index.ts';
import { createMemoryRateLimiter } from '../../src/rate-limit/rate-limiter.ts';
import type { Route, RouteOutcome } from '../../src/routing/route.ts';
import type { KeyAuth, ReserveResult, Store, UsageEntry } from '../../src/store/store.ts';

/**
 * Fakes for the evaluation pipeline's unit tests: no HTTP server, no database. The store keeps
 * what each credit step asked for, so a test can read the ledger the pipeline wrote.
 */

export const KEY: KeyAuth = {
  id: 'key_1',
  prefix: 'dg_test',
  rateLimitPerMinute: null,
  route: null,
  expiresAt: null,
  revokedAt: null,
};

/** A browser token of KEY, with its own rate limit or route where a test gives one. */
export function tokenOf(overrides: { rateLimitPerMinute?: number | null; route?: string | null } = {}) {
  return {
    id: 'tok_1',
    keyId: KEY.id,
    expiresAt: Number.MAX_SAFE_INTEGER,
    maxCreditsMicro: null,
    origins: null,
    subject: null,
    rateLimitPerMinute: overrides.rateLimitPerMinute ?? null,
    route: overrides.route ?? null,
  };
}

export interface FakeStore extends Store {
  reserved: { requestId: string; amount: number }[];
  settled: UsageEntry[];
  released: { reservationId: string | null; entry: UsageEntry }[];
  /** What the next reserve answers; ok by default. */
  nextReserve?: ReserveResult;
  /** Every credit step throws this while set (storage trouble). */
  failWith?: Error;
}

export function fakeStore(): FakeStore {
  const store = {
    reserved: [],
    settled: [],
    released: [],
    async reserve(_key: string, requestId: string, amount: number) {
      if (store.failWith) throw store.failWith;
      store.reserved.push({ requestId, amount });
      const answer = store.nextReserve ?? { ok: true, reservationId: `res_${store.reserved.length}` };
      store.nextReserve = undefined;
      return answer;
    },
    async settle(_reservationId: string | null, entry: UsageEntry) {
      if (store.failWith) throw store.failWith;
      store.settled.push(entry);
      return entry.creditsMicro;
    },
    async release(reservationId: string | null, entry: UsageEntry) {
      if (store.failWith) throw store.failWith;
      store.released.push({ reservationId, entry });
    },
  } as unknown as FakeStore;
  return store;
}

/** Authentication that knows one key (or answers `refusal`); `fromCache` says whether it came from a cache. */
export function fakeAuthenticate(
  options: { fromCache?: boolean; refusal?: Authentication; freshRefusal?: Authentication } = {},
): Authenticate & { calls: { cached: boolean | undefined }[] } {
  const calls: { cached: boolean | undefined }[] = [];
  const authenticate = async ({ cached }: { cached?: boolean }): Promise<Authentication> => {
    calls.push({ cached });
    if (options.refusal) return options.refusal;
    if (!cached && options.freshRefusal) return options.freshRefusal;
    return {
      ok: true,
      principal: { kind: 'key', key: KEY },
      fromCache: cached === true && options.fromCache === true,
    };
  };
  return Object.assign(authenticate, { calls });
}

/** A route whose upstreams answer whatever `answer` returns, counting its calls. */
export function fakeRoute(
  answer: () => Promise<RouteOutcome> | RouteOutcome = () => ({
    ok: true,
    answers: { refund: { type: 'noul', noul: 0.9 } },
    usage: { input_tokens: 100, output_tokens: 0 },
    upstream: 'fake',
    refused: [],
  }),
  spec: Partial<Route['spec']> = {},
): Route & { calls: number } {
  const route = {
    calls: 0,
    spec: { name: 'default', members: [], deadlineMs: 1_000, cacheTtlSeconds: 0, ...spec },
    refuses: () => undefined,
    usageBound: () => ({ input_tokens: 1_000, output_tokens: 0 }),
    async answer() {
      route.calls++;
      return answer();
    },
  };
  return route;
}

export function fakeDeps(overrides: Partial<EvaluationDeps> = {}): EvaluationDeps & { store: FakeStore } {
  const route = fakeRoute();
  return {
    authenticate: fakeAuthenticate(),
    store: fakeStore(),
    routes: new Map([['default', route]]),
    rateLimiter: createMemoryRateLimiter(),
    pricing: pricingFromCredits(1, 0),
    defaultRateLimitPerMinute: 0,
    logger: pino({ level: 'silent' }),
    ...overrides,
  } as EvaluationDeps & { store: FakeStore };
}

export const noulRequest = {
  model: MODEL_ID,
  state: 'I was charged twice.',
  questions: { refund: { type: 'noul', instructions: 'Is this a refund request?' } },
};

/** A call as the REST door hands it over, with `body` as JSON bytes. */
export function callOf(body: unknown = noulRequest, headers: Partial<EvaluationCall> = {}): EvaluationCall {
  return {
    requestId: `req_${Math.random().toString(16).slice(2)}`,
    startedAt: performance.now(),
    authorization: 'Bearer dg_anything',
    body: {
      kind: 'bytes',
      bytes: typeof body === 'string' ? Buffer.from(body) : Buffer.from(JSON.stringify(body)),
      contentType: 'application/json',
    },
    ...headers,
  };
}
