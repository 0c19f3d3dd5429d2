import { type BudgetMode, type BudgetWindow, setOwn } from '@decision-gateway/contract';
import type { RollupSpan, RollupSums } from './rollups.ts';

/**
 * Persistence for keys, credits and usage, implemented on SQLite (one file, embedded) and on
 * PostgreSQL (any number of instances). Every method is one atomic step, so docs/http-api.md#credits's invariants
 * hold under any concurrency and across instances; `store.contract-tests.ts` is the one test suite both
 * implementations pass. Amounts are integer micro-credits; times are epoch milliseconds.
 */

export interface KeyRecord {
  id: string;
  name: string;
  prefix: string;
  /** Current balance; null = unlimited. */
  creditsMicro: number | null;
  rateLimitPerMinute: number | null;
  /** The route its requests take without an `x-dg-route` header; null = `default` (docs/routes.md). */
  route: string | null;
  createdAt: number;
  expiresAt: number | null;
  revokedAt: number | null;
  lastUsedAt: number | null;
  /** The project it belongs to (docs/budgets.md); null = none. */
  projectId: string | null;
}

/** What authenticating a request reads of a key (docs/http-api.md#keys): no balance, which changes every request. */
export type KeyAuth = Pick<
  KeyRecord,
  'id' | 'prefix' | 'rateLimitPerMinute' | 'route' | 'expiresAt' | 'revokedAt'
>;

export interface NewKey {
  id: string;
  name: string;
  prefix: string;
  hash: string;
  creditsMicro: number | null;
  rateLimitPerMinute: number | null;
  route: string | null;
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
  /** The route taken and the upstream(s) that answered (docs/routes.md); null where none did. */
  route: string | null;
  upstream: string | null;
  /** Answered from the decision cache (docs/routes.md#decision-cache). */
  cached: boolean;
  /** The browser token the request came with (docs/browsers.md), and its end user. */
  tokenId: string | null;
  subject: string | null;
}

/** What a decision keeps beside its usage record: the questions as `outcomes/decision-record.ts` writes them, as JSON. */
export interface KeptDecision {
  questions: string;
  /** A cache hit: the request id of the decision it reused. */
  reused: string | null;
}

/** A decision as kept, with its request. */
export interface DecisionRecord extends KeptDecision {
  requestId: string;
  keyId: string;
  route: string | null;
  at: number;
}

/** A short-lived browser token (docs/browsers.md): only its hash is stored. */
export interface NewToken {
  id: string;
  keyId: string;
  hash: string;
  expiresAt: number;
  /** The most it may ever spend; null = the key's balance is the limit. */
  maxCreditsMicro: number | null;
  /** Exact origins it may be used from; null = any origin in CORS_ORIGINS. */
  origins: string[] | null;
  subject: string | null;
  rateLimitPerMinute: number | null;
  route: string | null;
  createdAt: number;
}

/** What authenticating a token reads: the token and its key as they stand now. */
export interface TokenAuth {
  token: Omit<NewToken, 'hash' | 'createdAt'>;
  key: KeyAuth;
}

export interface UsageTotals {
  requests: number;
  creditsMicro: number;
  inputTokens: number;
  outputTokens: number;
}

/**
 * Why a reservation refused a key that authentication had let through: the key (or the token) was
 * revoked or expired since it was read (docs/http-api.md#keys). Reserve re-checks it under the key's row lock,
 * so a key read from a cache is confirmed at the one step every paid request takes.
 */
export type KeyRefusal = 'revoked' | 'expired' | 'token_expired' | 'unknown';

export type ReserveResult =
  | { ok: true; reservationId: string | null }
  | { ok: false; code: 'insufficient_credits'; availableMicro: number }
  | { ok: false; code: 'budget_exceeded'; exceeded: BudgetExceeded[] }
  | { ok: false; code: 'key_refused'; reason: KeyRefusal };

/** Who holds a budget (docs/budgets.md): a key, or a project of keys. */
export type BudgetHolder = { kind: 'key' | 'project'; id: string };

/** A limit per window, as an operator sets it. */
export interface Budget {
  window: BudgetWindow;
  limitMicro: number;
  mode: BudgetMode;
}

/** A budget as it stands: what its holder spent in the current window, with its holds in flight. */
export interface BudgetReading extends Budget {
  spentMicro: number;
}

/** A hard budget a reservation would take past its limit. */
export interface BudgetExceeded {
  holder: BudgetHolder;
  window: BudgetWindow;
}

/**
 * What a settle tells about budgets (logs and metrics): a soft budget's spend crossing 80% or 100%
 * of its limit (once per window: spend only grows within one), and a debit cut to what a hard
 * budget could still take.
 */
export type BudgetEvent =
  | { kind: 'crossing'; holder: BudgetHolder; window: BudgetWindow; threshold: 0.8 | 1 }
  | { kind: 'capped'; holder: BudgetHolder; window: BudgetWindow; excessMicro: number };

export interface ProjectRecord {
  id: string;
  name: string;
  createdAt: number;
  keyCount: number;
}

export type ProjectChange =
  | { ok: true; project: ProjectRecord }
  | { ok: false; code: 'not_found' | 'has_keys' };

export type KeyProjectChange =
  | { ok: true; key: KeyRecord }
  | { ok: false; code: 'not_found' | 'unknown_project' };

/** Where a page of keys (newest first) starts: after this key. */
export interface KeyCursor {
  createdAt: number;
  id: string;
}

export interface KeyPage {
  keys: KeyRecord[];
  /** The cursor of the next page, or null when this page is the last. */
  next: KeyCursor | null;
}

export type AdjustResult =
  | { ok: true; key: KeyRecord }
  | { ok: false; code: 'not_found' | 'unlimited' | 'would_go_negative' | 'over_ceiling' };

/** The most a balance may hold (docs/operating.md#admin-api): 1,000,000,000 credits, far below 2^53 micro-credits. */
export const CREDIT_CEILING_MICRO = 1_000_000_000 * 1_000_000;

/**
 * The store could not be reached, or did not answer within its deadline (`STORE_TIMEOUT_MS`,
 * docs/operating.md). Every store throws this, and only this, for storage trouble: the caller answers 503
 * with Retry-After. Anything else a store throws is a bug, answered 500 and logged.
 */
export class StoreUnavailableError extends Error {
  override readonly name = 'StoreUnavailableError';
  /** How long a caller should wait before trying again. */
  readonly retryAfterMs = 1_000;
}

export interface Store {
  createKey(key: NewKey): Promise<KeyRecord>;
  /** The key with this hash, as it stands now: a revocation anywhere is seen at once. */
  findKeyByHash(hash: string): Promise<KeyAuth | undefined>;
  createToken(token: NewToken): Promise<void>;
  /** The token with this hash and its key, as they stand now (docs/browsers.md). */
  findTokenByHash(hash: string): Promise<TokenAuth | undefined>;
  getKey(id: string): Promise<KeyRecord | undefined>;
  /** Keys newest first, `limit` at a time, starting after `after` (docs/operating.md#admin-api). */
  listKeys(limit: number, after?: KeyCursor): Promise<KeyPage>;
  countKeys(): Promise<number>;
  /** Add (or, negative, remove) credits; never below 0 nor above the ceiling, never on an unlimited key. */
  adjustCredits(id: string, deltaMicro: number, at: number): Promise<AdjustResult>;
  revokeKey(id: string, at: number): Promise<KeyRecord | undefined>;

  /** Projects (docs/budgets.md): groups of keys that share budgets. Newest first. */
  createProject(project: { id: string; name: string; createdAt: number }): Promise<ProjectRecord>;
  listProjects(): Promise<ProjectRecord[]>;
  getProject(id: string): Promise<ProjectRecord | undefined>;
  renameProject(id: string, name: string): Promise<ProjectRecord | undefined>;
  /** Only a project without keys may go. */
  deleteProject(id: string): Promise<ProjectChange>;
  /** Moves a key into a project, or (null) out of any. */
  setKeyProject(keyId: string, projectId: string | null): Promise<KeyProjectChange>;
  /**
   * Replaces a holder's budgets. Each starts with what the holder spent so far in its current
   * window (its settled debits then), so a budget set mid-window counts the window whole.
   */
  setBudgets(holder: BudgetHolder, budgets: readonly Budget[], at: number): Promise<void>;
  /** A holder's budgets as they stand at `at`: spend in the current window plus live holds (those from `staleBefore` on). */
  budgets(holder: BudgetHolder, at: number, staleBefore: number): Promise<BudgetReading[]>;
  /** Told of each budget event a settle caused, once it is written (set by the composition root). */
  onBudgetEvent?: ((event: BudgetEvent) => void) | undefined;

  /**
   * Hold `amountMicro` against the key for the request `requestId`, if the key is still neither
   * revoked nor expired at `at` (nor the token expired), the balance minus the key's
   * in-flight reservations covers it, and every hard budget of the key and of its project can take
   * it beside its holder's spend in the window and live holds (docs/budgets.md). Idempotent per request: asked again, it returns the same hold. Reservations created before `staleBefore` (left by a crashed
   * process) no longer count. Unlimited keys need none (`reservationId` null). With a token, the
   * token's own cap must cover it too: its cap minus what it spent and what it holds (docs/browsers.md).
   */
  reserve(
    keyId: string,
    requestId: string,
    amountMicro: number,
    at: number,
    staleBefore: number,
    tokenId?: string | null,
  ): Promise<ReserveResult>;
  /**
   * Debit the actual cost, capped at what the key can still cover beside its other live
   * reservations (those created before `staleBefore` count nowhere, docs/http-api.md#credits) and, for a token with
   * a cap, at what the token can still spend beside its other reservations, and at what each hard
   * budget can still take (its spend counters move with the debit), release the
   * reservation and write the usage entry, in one step. The debit never exceeds the reservation
   * (docs/http-api.md#credits). Returns the micro-credits debited. `entry.requestId` names the request the
   * reservation was made for; settling it again returns the first debit and writes nothing.
   */
  settle(
    reservationId: string | null,
    entry: UsageEntry,
    staleBefore: number,
    decision?: KeptDecision,
  ): Promise<number>;
  /**
   * Release the reservation and write the usage entry of a failed request (0 credits). Without a
   * reservation id, whatever the request holds is released. Idempotent per request, like settle;
   * should the request have been settled after all (a settle whose answer was lost), its debit is
   * undone, since its caller was answered a failure (docs/http-api.md#errors: a failed request is never charged).
   */
  release(reservationId: string | null, entry: UsageEntry, decision?: KeptDecision): Promise<void>;

  /**
   * Decisions and their outcomes (docs/outcomes.md). A settle (or the record of
   * a cache hit) given a decision keeps it in the same transaction as its usage record.
   */
  findDecision(requestId: string): Promise<DecisionRecord | undefined>;
  /** Records (or replaces) truths of a decision; resolves with how many replaced one recorded before. */
  recordOutcomes(
    requestId: string,
    outcomes: readonly { questionId: string; truth: string }[],
    at: number,
  ): Promise<number>;
  /**
   * Every decision from `from` (inclusive) to `to` (exclusive) with at least one outcome, with its
   * outcomes, oldest first; `limit` decisions from `after` (a decision's `id`) for reading in pages.
   */
  judgedDecisions(query: {
    from: number;
    to: number;
    keyId?: string;
    route?: string;
    after?: number;
    limit?: number;
  }): Promise<JudgedDecision[]>;
  /** Deletes up to `limit` decisions older than `before`, with their outcomes (retention). */
  deleteDecisionsBefore(before: number, limit: number): Promise<number>;

  /**
   * Calibration maps (docs/calibration-maps.md): the fits of a refit, in one transaction. A fit
   * saved active takes the place of the active map of its upstream and type.
   */
  saveCalibrationMaps(maps: readonly StoredCalibrationMap[]): Promise<void>;
  /** Every fit kept (or the active ones), newest first. */
  calibrationMaps(query: { activeOnly: boolean }): Promise<StoredCalibrationMap[]>;

  /** Review items (docs/review.md): written after the decision's settle, off the request's answer. */
  saveReviewItem(item: StoredReviewItem): Promise<void>;
  /** Oldest first, by (`at`, `id`) after `after`, of one status and route if given. */
  reviewItems(query: {
    status?: ReviewStatus;
    route?: string;
    limit: number;
    after?: { at: number; id: string };
  }): Promise<StoredReviewItem[]>;
  reviewItem(id: string): Promise<StoredReviewItem | undefined>;
  /**
   * A reviewer's truths, in one transaction: recorded as the decision's outcomes with source
   * `review` (replacing a caller's), and the item done. False if it was done already.
   */
  completeReview(
    id: string,
    review: { outcomes: string; reviewer: string; at: number },
    truths: readonly { questionId: string; truth: string }[],
  ): Promise<boolean>;
  /** Open items. */
  openReviews(): Promise<number>;
  /** Deletes up to `limit` items made before `before`, or reviewed before `reviewedBefore` (retention). */
  deleteReviewItems(before: number, reviewedBefore: number, limit: number): Promise<number>;

  /**
   * A key's totals, from its rollups (so they survive retention), and its most recent records
   * still kept, newest first.
   */
  usage(keyId: string, limit: number): Promise<{ totals: UsageTotals; recent: UsageEntry[] }>;
  /**
   * Rollups of one resolution (`stepMs`) summed per step from `from` (inclusive) to `to`
   * (exclusive), oldest first; only the steps that have any (the caller fills the gaps).
   */
  usageSeries(query: { keyId?: string; stepMs: number; from: number; to: number }): Promise<SeriesRow[]>;
  /** Rollups over the spans (docs/usage.md): totals, by route, by upstream, the 20 keys that spent most. */
  usageSummary(query: { keyId?: string; spans: readonly RollupSpan[] }): Promise<SummaryRows>;
  /** Credits granted to a key minus its debits (what its balance must equal), for audits and tests; debits from the rollups. */
  ledgerBalance(keyId: string): Promise<number>;

  /**
   * Background work (usage/maintenance.ts), never on a caller's path. Each call is one small
   * batch and resolves with how many rows it changed.
   * - `foldIntoRollups`: the upgrade, folding up to `limit` records written before the rollups
   *   existed; resolves with how many it folded and how many are still to fold.
   * - `deleteUsageBefore`: deletes up to `limit` usage records older than `before`; the
   *   rollups keep their sums.
   * - `deleteRollupsBefore`: deletes up to `limit` rollup rows of the resolution `stepMs` older than `before`.
   */
  foldIntoRollups(limit: number): Promise<{ folded: number; left: number }>;
  /**
   * The newest usage record's id (null when there is none), as text: it moves whenever a request
   * is recorded, by this gateway or another instance sharing the store, and never for
   * maintenance's own deletes of the oldest. Maintenance rests between its batches only while it
   * moves (docs/usage.md).
   */
  newestUsageId(): Promise<string | null>;
  deleteUsageBefore(before: number, limit: number): Promise<number>;
  deleteRollupsBefore(stepMs: number, before: number, limit: number): Promise<number>;
  /**
   * Resolves when the store can be reached and written (readiness, docs/operating.md),
   * and its upgrade is done: every usage record is in the rollups. Rejects saying why.
   */
  checkWritable(): Promise<void>;
  close(): Promise<void>;
}

/** What each store's budgets module implements (docs/budgets.md); reserve and settle apply budgets too. */
export type BudgetMethods = Pick<
  Store,
  | 'createProject'
  | 'listProjects'
  | 'getProject'
  | 'renameProject'
  | 'deleteProject'
  | 'setKeyProject'
  | 'setBudgets'
  | 'budgets'
>;

/** A page from `limit + 1` rows, newest first: the extra row only says that a next page exists. */
export function pageOf(keys: KeyRecord[], limit: number): KeyPage {
  if (keys.length <= limit) return { keys, next: null };
  const page = keys.slice(0, limit);
  const last = page[page.length - 1] as KeyRecord;
  return { keys: page, next: { createdAt: last.createdAt, id: last.id } };
}

/** One step of a usage series: its start and its rollups' sums. */
export interface SeriesRow extends RollupSums {
  at: number;
}

/** What a summary reads (usage/reports.ts makes the answer of it). */
export interface SummaryRows {
  totals: RollupSums;
  byRoute: (RollupSums & { route: string | null })[];
  byUpstream: (RollupSums & { upstream: string | null })[];
  byKey: (RollupSums & { keyId: string; name: string; prefix: string })[];
  byProject: (RollupSums & { projectId: string; name: string })[];
}

/** A decision with its outcomes, as calibration and the fits read it. */
export interface JudgedDecision {
  /** Its row's id: the order decisions were kept in, and where a page of them ends. */
  id: number;
  route: string | null;
  at: number;
  questions: string;
  /** Each truth as JSON text, by question ID. */
  outcomes: Record<string, string>;
  /** The question IDs whose truth a reviewer gave (docs/review.md); the others came from the caller. */
  reviewed: string[];
}

/**
 * A decision's questions on the first of its rows only (its outcomes ordered by question ID, as
 * `groupJudged` reads them): the text is not sent again with each outcome. A refit reads 100,000
 * outcomes; repeated, their decisions' questions were ~8 times the text read and parsed on the
 * thread that serves requests (docs/calibration-maps.md).
 */
export const QUESTIONS_ONCE = `CASE WHEN ROW_NUMBER() OVER (PARTITION BY d.id ORDER BY o.question_id) = 1
    THEN d.questions END AS questions`;

/** One row per outcome, ordered by decision, as both stores read them → one entry per decision. */
export function groupJudged(
  rows: readonly {
    id: number | string;
    route: string | null;
    at: number | string;
    /** On a decision's first row only (`QUESTIONS_ONCE`). */
    questions: string | null;
    question_id: string;
    truth: string;
    source: string;
  }[],
): JudgedDecision[] {
  const decisions: JudgedDecision[] = [];
  let last: JudgedDecision | undefined;
  for (const row of rows) {
    const id = Number(row.id);
    if (last?.id !== id) {
      if (row.questions === null) throw new Error(`decision ${id}: its questions were not on its first row`);
      last = {
        id,
        route: row.route,
        at: Number(row.at),
        questions: row.questions,
        outcomes: {},
        reviewed: [],
      };
      decisions.push(last);
    }
    setOwn(last.outcomes, row.question_id, row.truth);
    if (row.source === 'review') last.reviewed.push(row.question_id);
  }
  return decisions;
}

/** A calibration map as both stores keep it; `params` and `heldOut` are JSON text. */
export interface StoredCalibrationMap {
  id: string;
  upstream: string;
  type: 'noul' | 'choice' | 'score';
  fittedAt: number;
  outcomes: number;
  params: string;
  heldOut: string;
  active: boolean;
}

export type ReviewStatus = 'open' | 'done';

/** A review item as both stores keep it; `item` is its state, assets, questions and answers as JSON text. */
export interface StoredReviewItem {
  id: string;
  requestId: string;
  keyId: string;
  route: string;
  at: number;
  status: ReviewStatus;
  item: string;
  outcomes: string | null;
  reviewer: string | null;
  reviewedAt: number | null;
}
