import { createHash, hash, randomBytes, timingSafeEqual } from 'node:crypto';
import { failure, type GatewayFailure } from '@decision-gateway/contract';
import type { KeyAuth, Store } from '../store/store.ts';

const KEY_PREFIX = 'dg_';
/** Characters of the key shown in listings and logs, enough to tell keys apart, never to use one. */
const DISPLAY_LENGTH = KEY_PREFIX.length + 8;

/** A new plain key: `dg_` + 32 random bytes (256 bits) in base64url. Shown once, never stored. */
export function generateApiKey(): { key: string; hash: string; prefix: string } {
  const key = `${KEY_PREFIX}${randomBytes(32).toString('base64url')}`;
  return { key, hash: hashCredential(key), prefix: key.slice(0, DISPLAY_LENGTH) };
}

/**
 * Only this SHA-256 of a key or token is stored: a leaked database does not leak usable
 * credentials. (One-shot `hash`: every request hashes its credential, at a third of createHash's cost.)
 */
export function hashCredential(credential: string): string {
  return hash('sha256', credential, 'hex');
}

const BEARER = /^bearer[ \t]+(\S(?:.*\S)?)[ \t]*$/i;

/** The token of an `Authorization: Bearer <token>` header (scheme matched case-insensitively). */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  return BEARER.exec(header)?.[1];
}

export type KeyCheck =
  | { ok: true; key: KeyAuth }
  | { ok: false; code: 'missing_api_key' }
  | { ok: false; code: 'invalid_api_key'; reason: 'unknown' | 'revoked' | 'expired' };

/** Authenticate an `Authorization` header against the store (docs/http-api.md#keys): the store answers as the
 * key stands now. */
export async function verifyApiKey(
  store: Pick<Store, 'findKeyByHash'>,
  header: string | undefined,
  now: number,
): Promise<KeyCheck> {
  const token = bearerToken(header);
  if (token === undefined) return { ok: false, code: 'missing_api_key' };
  return judgeKey(await store.findKeyByHash(hashCredential(token)), now);
}

/** The key found for a credential (or none), judged at `now`: unknown, revoked, expired or good. */
export function judgeKey(key: KeyAuth | undefined, now: number): KeyCheck {
  if (!key) return { ok: false, code: 'invalid_api_key', reason: 'unknown' };
  if (key.revokedAt !== null) return { ok: false, code: 'invalid_api_key', reason: 'revoked' };
  if (key.expiresAt !== null && key.expiresAt <= now)
    return { ok: false, code: 'invalid_api_key', reason: 'expired' };
  return { ok: true, key };
}

const INVALID_KEY_MESSAGES = {
  unknown: 'the API key is not known',
  revoked: 'the API key has been revoked',
  expired: 'the API key has expired',
} as const;

/** The 40101 for a key the reservation found revoked or expired (docs/http-api.md#keys), worded as authentication words it. */
export function refusedKeyFailure(
  reason: 'unknown' | 'revoked' | 'expired' | 'token_expired',
): GatewayFailure {
  return failure(
    'invalid_api_key',
    reason === 'token_expired' ? 'the token has expired' : INVALID_KEY_MESSAGES[reason],
  );
}

/** The gateway error for a refused key: 40100 without one, 40101 saying why (never echoing it). */
export function keyCheckFailure(check: Exclude<KeyCheck, { ok: true }>): GatewayFailure {
  return check.code === 'missing_api_key'
    ? failure('missing_api_key', 'send the API key as "Authorization: Bearer <API_KEY>"')
    : failure('invalid_api_key', INVALID_KEY_MESSAGES[check.reason]);
}

/** Admin token check in constant time (hashing first makes the lengths equal). */
export function isAdminToken(candidate: string, adminToken: string): boolean {
  const a = createHash('sha256').update(candidate).digest();
  const b = createHash('sha256').update(adminToken).digest();
  return timingSafeEqual(a, b);
}
