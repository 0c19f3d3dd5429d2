import type { KeyRecord, TokenAuth, UsageEntry } from './store.ts';

/**
 * The rows both stores read: SQLite and PostgreSQL name the columns alike (snake_case), so one
 * mapping turns them into the Store's records.
 */
export interface KeyRow {
  id: string;
  name: string;
  prefix: string;
  credits_micro: number | null;
  rate_limit_per_minute: number | null;
  route: string | null;
  created_at: number;
  expires_at: number | null;
  revoked_at: number | null;
  last_used_at: number | null;
  project_id: string | null;
}

export interface UsageRow {
  request_id: string;
  key_id: string;
  credits_micro: number;
  input_tokens: number;
  output_tokens: number;
  questions: number;
  status: number;
  elapsed_ms: number;
  at: number;
  route: string | null;
  upstream: string | null;
  /** SQLite stores booleans as 0/1. */
  cached: boolean | number;
  token_id: string | null;
  subject: string | null;
}

export const KEY_COLUMNS =
  'id, name, prefix, credits_micro, rate_limit_per_minute, route, created_at, expires_at, revoked_at, last_used_at, project_id';

export function toKey(row: KeyRow): KeyRecord {
  return {
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    creditsMicro: row.credits_micro,
    rateLimitPerMinute: row.rate_limit_per_minute,
    route: row.route,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    revokedAt: row.revoked_at,
    lastUsedAt: row.last_used_at,
    projectId: row.project_id,
  };
}

export function toUsage(row: UsageRow): UsageEntry {
  return {
    requestId: row.request_id,
    keyId: row.key_id,
    creditsMicro: row.credits_micro,
    inputTokens: row.input_tokens,
    outputTokens: row.output_tokens,
    questions: row.questions,
    status: row.status,
    elapsedMs: row.elapsed_ms,
    at: row.at,
    route: row.route,
    upstream: row.upstream,
    cached: Boolean(row.cached),
    tokenId: row.token_id,
    subject: row.subject,
  };
}

export interface TokenRow {
  id: string;
  key_id: string;
  expires_at: number;
  max_credits_micro: number | null;
  /** JSON text: an array of origins. */
  origins: string | null;
  subject: string | null;
  rate_limit_per_minute: number | null;
  route: string | null;
}

/** The token and key columns a token lookup reads, joined in one statement by both stores. */
export const TOKEN_AUTH_COLUMNS = `t.id, t.key_id, t.expires_at, t.max_credits_micro, t.origins, t.subject,
  t.rate_limit_per_minute, t.route, k.prefix AS key_prefix, k.rate_limit_per_minute AS key_rate_limit,
  k.route AS key_route, k.expires_at AS key_expires_at, k.revoked_at AS key_revoked_at`;

export function toTokenAuth(
  row: TokenRow & {
    key_prefix: string;
    key_rate_limit: number | null;
    key_route: string | null;
    key_expires_at: number | null;
    key_revoked_at: number | null;
  },
): TokenAuth {
  return {
    token: {
      id: row.id,
      keyId: row.key_id,
      expiresAt: Number(row.expires_at),
      maxCreditsMicro: row.max_credits_micro === null ? null : Number(row.max_credits_micro),
      origins: row.origins === null ? null : (JSON.parse(row.origins) as string[]),
      subject: row.subject,
      rateLimitPerMinute: row.rate_limit_per_minute,
      route: row.route,
    },
    key: {
      id: row.key_id,
      prefix: row.key_prefix,
      rateLimitPerMinute: row.key_rate_limit,
      route: row.key_route,
      expiresAt: row.key_expires_at === null ? null : Number(row.key_expires_at),
      revokedAt: row.key_revoked_at === null ? null : Number(row.key_revoked_at),
    },
  };
}
