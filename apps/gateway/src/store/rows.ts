import type { KeyRecord, UsageEntry } from './store.ts';

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
}

export const KEY_COLUMNS =
  'id, name, prefix, credits_micro, rate_limit_per_minute, route, created_at, expires_at, revoked_at, last_used_at';

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
  };
}
