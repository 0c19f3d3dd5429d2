/**
 * Persistence for keys, credits and usage. Every method is one atomic step, so a SQLite file
 * shared by several gateway processes (or, later, PostgreSQL) keeps SPEC §7's invariants.
 * Amounts are integer micro-credits; times are epoch milliseconds.
 */

export interface KeyRecord {
  id: string;
  name: string;
  prefix: string;
  /** Current balance; null = unlimited. */
  creditsMicro: number | null;
  rateLimitPerMinute: number | null;
  createdAt: number;
  expiresAt: number | null;
  revokedAt: number | null;
  lastUsedAt: number | null;
}

/** What authenticating a request reads of a key (SPEC §5): no balance, which changes every request. */
export type KeyAuth = Pick<KeyRecord, 'id' | 'prefix' | 'rateLimitPerMinute' | 'expiresAt' | 'revokedAt'>;

export interface NewKey {
  id: string;
  name: string;
  prefix: string;
  hash: string;
  creditsMicro: number | null;
  rateLimitPerMinute: number | null;
  createdAt: number;
  expiresAt: number | null;
}

/** One line of usage: every authenticated evaluation has one, failed ones with 0 credits. */
export interface UsageEntry {
  requestId: string;
  keyId: string;
  creditsMicro: number;
  inputTokens: number;
  outputTokens: number;
  questions: number;
  status: number;
  elapsedMs: number;
  at: number;
}

export interface UsageTotals {
  requests: number;
  creditsMicro: number;
  inputTokens: number;
  outputTokens: number;
}

export type ReserveResult =
  | { ok: true; reservationId: string | null }
  | { ok: false; code: 'insufficient_credits'; availableMicro: number };

export type AdjustResult =
  | { ok: true; key: KeyRecord }
  | { ok: false; code: 'not_found' | 'unlimited' | 'would_go_negative' };

export interface Store {
  createKey(key: NewKey): Promise<KeyRecord>;
  /** The key with this hash, as it stands now: a revocation anywhere is seen at once. */
  findKeyByHash(hash: string): Promise<KeyAuth | undefined>;
  getKey(id: string): Promise<KeyRecord | undefined>;
  listKeys(): Promise<KeyRecord[]>;
  countKeys(): Promise<number>;
  /** Add (or, negative, remove) credits; never below 0, never on an unlimited key. */
  adjustCredits(id: string, deltaMicro: number, at: number): Promise<AdjustResult>;
  revokeKey(id: string, at: number): Promise<KeyRecord | undefined>;

  /**
   * Hold `amountMicro` against the key for the request `requestId`, if the balance minus the key's
   * in-flight reservations covers it. Reservations created before `staleBefore` (left by a crashed
   * process) no longer count. Unlimited keys need none (`reservationId` null).
   */
  reserve(
    keyId: string,
    requestId: string,
    amountMicro: number,
    at: number,
    staleBefore: number,
  ): Promise<ReserveResult>;
  /**
   * Debit the actual cost, capped at what the key can still cover, release the reservation and
   * write the usage entry, in one step. Returns the micro-credits debited. `entry.requestId` names
   * the request the reservation was made for.
   */
  settle(reservationId: string | null, entry: UsageEntry): Promise<number>;
  /** Release the reservation (if any) and write the usage entry of a failed request (0 credits). */
  release(reservationId: string | null, entry: UsageEntry): Promise<void>;

  usage(keyId: string, limit: number): Promise<{ totals: UsageTotals; recent: UsageEntry[] }>;
  /** Credits granted to a key minus its debits (what its balance must equal), for audits and tests. */
  ledgerBalance(keyId: string): Promise<number>;
  ping(): Promise<void>;
  close(): Promise<void>;
}
