import { failure, type GatewayFailure } from '@decision-gateway/contract';
import { LRUCache } from 'lru-cache';
import type { KeyAuth, Store, TokenAuth } from '../store/store.ts';
import { bearerToken, hashCredential, judgeKey, keyCheckFailure } from './api-keys.ts';
import { TOKEN_PREFIX } from './tokens.ts';

/** Who a request acts for: an API key (a trusted server), or a short-lived token (a browser). */
export type Principal =
  | { kind: 'key'; key: KeyAuth }
  | { kind: 'token'; key: KeyAuth; token: TokenAuth['token'] };

export type Authentication =
  | {
      ok: true;
      principal: Principal;
      /**
       * The key (or token) was read from the cache of recently seen ones: it may have been revoked
       * since. The caller confirms it before answering: the reservation re-checks it under the
       * key's row lock, and any other answer authenticates again with `cached: false` (docs/http-api.md#keys).
       */
      fromCache: boolean;
    }
  | { ok: false; failure: GatewayFailure };

/** What a request shows of itself: its `Authorization` header, and its `Origin` when a browser sent it. */
export interface Credentials {
  authorization: string | undefined;
  origin: string | undefined;
  /** May answer from the cache of recently seen keys and tokens (the evaluation core confirms). */
  cached?: boolean;
}

/**
 * The one check of a request's credentials (docs/http-api.md#keys, docs/browsers.md): every door and the evaluation core call
 * this, never the store. Judged by the core's clock, so expiry is seen alike everywhere. It also
 * holds the origin rules (40300): a token only from its origins, an API key never from a browser
 * origin the gateway serves.
 */
export type Authenticate = (credentials: Credentials) => Promise<Authentication>;

/** How many keys and tokens the cache holds, and for how long: memory's bound, not correctness'. */
const CACHE = { max: 10_000, ttlMs: 60_000 } as const;

const MINT_A_TOKEN =
  'an API key may not be used from a browser: mint a short-lived token on your server (POST /v1/tokens) and use that';

export function createAuthenticate(
  store: Store,
  clock: () => number,
  /** CORS_ORIGINS: the browser origins the gateway serves. */
  corsOrigins: readonly string[] = [],
): Authenticate {
  // Keys and tokens as last read, by hash. Only what was found is kept (guessed keys must not grow
  // memory); a fresh read replaces what is kept, so a refusal found anywhere is remembered here.
  const seenKeys = new LRUCache<string, KeyAuth>({ max: CACHE.max, ttl: CACHE.ttlMs });
  const seenTokens = new LRUCache<string, TokenAuth>({ max: CACHE.max, ttl: CACHE.ttlMs });
  const remember = <T extends {}>(cache: LRUCache<string, T>, hash: string, value: T | undefined) => {
    if (value === undefined) cache.delete(hash);
    else cache.set(hash, value);
    return value;
  };

  return async ({ authorization, origin, cached = false }) => {
    const bearer = bearerToken(authorization);
    if (bearer === undefined)
      return { ok: false, failure: keyCheckFailure({ ok: false, code: 'missing_api_key' }) };
    if (bearer.startsWith(TOKEN_PREFIX)) return checkToken(bearer, origin, cached);
    const hash = hashCredential(bearer);
    // A hit costs no store call: this runs on every request.
    const hit = cached ? seenKeys.get(hash) : undefined;
    const check = judgeKey(hit ?? remember(seenKeys, hash, await store.findKeyByHash(hash)), clock());
    if (!check.ok) return { ok: false, failure: keyCheckFailure(check) };
    if (origin !== undefined && corsOrigins.includes(origin))
      return { ok: false, failure: failure('forbidden', MINT_A_TOKEN) };
    return { ok: true, principal: { kind: 'key', key: check.key }, fromCache: hit !== undefined };
  };

  async function checkToken(
    token: string,
    origin: string | undefined,
    cached: boolean,
  ): Promise<Authentication> {
    const hash = hashCredential(token);
    const hit = cached ? seenTokens.get(hash) : undefined;
    const found = hit ?? remember(seenTokens, hash, await store.findTokenByHash(hash));
    const refuse = (message: string): Authentication => ({
      ok: false,
      failure: failure('invalid_api_key', message),
    });
    if (!found) return refuse('the token is not known');
    const now = clock();
    if (found.token.expiresAt <= now) return refuse('the token has expired');
    if (found.key.revokedAt !== null) return refuse("the token's API key has been revoked");
    if (found.key.expiresAt !== null && found.key.expiresAt <= now)
      return refuse("the token's API key has expired");
    // A request with no Origin (a server) is not refused for it.
    const allowed = found.token.origins ?? corsOrigins;
    if (origin !== undefined && !allowed.includes(origin))
      return {
        ok: false,
        failure: failure('forbidden', `this token may not be used from the origin ${origin.slice(0, 200)}`),
      };
    return {
      ok: true,
      principal: { kind: 'token', key: found.key, token: found.token },
      fromCache: hit !== undefined,
    };
  }
}
