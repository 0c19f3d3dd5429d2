import type { GatewayFailure } from '@decision-gateway/contract';
import type { KeyAuth, Store } from '../store/store.ts';
import { keyCheckFailure, verifyApiKey } from './api-keys.ts';

/** Who a request acts for. Today an API key; short-lived tokens join this union. */
export type Principal = { kind: 'key'; key: KeyAuth };

export type Authentication = { ok: true; principal: Principal } | { ok: false; failure: GatewayFailure };

/**
 * The one check of an `Authorization` header (SPEC §5): every door and the evaluation core call
 * this, never the store. Judged by the core's clock, so expiry is seen alike everywhere.
 */
export type Authenticate = (authorization: string | undefined) => Promise<Authentication>;

export function createAuthenticate(store: Store, clock: () => number): Authenticate {
  return async (authorization) => {
    const check = await verifyApiKey(store, authorization, clock());
    return check.ok
      ? { ok: true, principal: { kind: 'key', key: check.key } }
      : { ok: false, failure: keyCheckFailure(check) };
  };
}
