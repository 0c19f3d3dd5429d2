import { randomBytes } from 'node:crypto';
import type { CreatedToken, CreateTokenBody, GatewayFailure } from '@decision-gateway/contract';
import { toMicro } from '../core/credits.ts';
import { unknownRouteField } from '../routing/route-field.ts';
import type { Store } from '../store/store.ts';
import { hashCredential } from './api-keys.ts';

/** Browser tokens are `dgt_…`, so one glance (and `authenticate`) tells them from API keys. */
export const TOKEN_PREFIX = 'dgt_';
const DEFAULT_TTL_SECONDS = 600;

export type MintResult = { ok: true; value: CreatedToken } | { ok: false; error: GatewayFailure };

/**
 * Mints short-lived tokens for a key (docs/browsers.md): `POST /v1/tokens`, tRPC `tokens.create` and
 * `POST /admin/keys/{id}/tokens` all come here. The token is random (256 bits), shown once, and
 * stored only as its SHA-256, in the store every instance shares, so it works everywhere and
 * across restarts; its key's revocation or expiry ends it at its next request.
 */
export function createTokenService(store: Store, clock: () => number, routeNames: readonly string[]) {
  return {
    async mint(keyId: string, body: CreateTokenBody): Promise<MintResult> {
      const route = body.route ?? null;
      const unknown = unknownRouteField(route, routeNames);
      if (unknown) return { ok: false, error: unknown };
      const token = `${TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
      const now = clock();
      const expiresAt = now + (body.ttlSeconds ?? DEFAULT_TTL_SECONDS) * 1000;
      const record = {
        id: `tok_${randomBytes(9).toString('base64url')}`,
        keyId,
        hash: hashCredential(token),
        expiresAt,
        maxCreditsMicro: body.maxCredits === undefined ? null : toMicro(body.maxCredits),
        origins: body.origins ?? null,
        subject: body.subject ?? null,
        rateLimitPerMinute: body.rateLimitPerMinute ?? null,
        route,
        createdAt: now,
      };
      await store.createToken(record);
      return {
        ok: true,
        value: {
          token,
          expiresAt: new Date(expiresAt).toISOString(),
          maxCredits: body.maxCredits ?? null,
          origins: record.origins,
          subject: record.subject,
          route,
        },
      };
    },
  };
}

export type TokenService = ReturnType<typeof createTokenService>;
