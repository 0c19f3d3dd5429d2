import { toUsage } from '../rows.ts';
import type { BudgetEvent, KeptDecision, ReserveResult, Store, UsageEntry } from '../store.ts';
import type { SqliteBudgets } from './budgets.ts';
import type { SqliteParts } from './parts.ts';
import type { BalanceValues } from './statements.ts';

type CreditMethods = Pick<Store, 'reserve' | 'settle' | 'release' | 'ledgerBalance'>;

/**
 * Credits (docs/http-api.md#credits): a request's hold, its settlement with its usage record and
 * decision, its release; each a write of the group commit.
 */
export function sqliteCredits(
  { sql, write, rollups }: SqliteParts,
  budgets: SqliteBudgets,
  /** Told of a settle's budget events once its batch has committed. */
  onBudgetEvent: (event: BudgetEvent) => void,
): CreditMethods {
  /**
   * Stale reservations only stop counting (`since`); rows are swept at most once a minute. (If a
   * batch is rolled back and replayed, its sweep may be skipped: the next one catches up.)
   */
  let lastSweep = 0;

  /** The key as it stands, with what its live holds hold (statements.ts `balance`); undefined if unknown. */
  const balanceOf = (keyId: string, since: number): BalanceValues | undefined =>
    sql.balance.get(keyId, since, keyId, since, keyId);

  /** What a capped token can still spend beside its live reservations; undefined when uncapped. */
  const tokenAvailable = (tokenId: string | null | undefined, since: number): number | undefined => {
    if (tokenId === null || tokenId === undefined) return undefined;
    const budget = sql.tokenBudget.get({ tokenId, since });
    if (!budget || budget.cap === null) return undefined;
    return budget.cap - budget.spent - budget.held;
  };

  const reserve = (
    keyId: string,
    requestId: string,
    amount: number,
    at: number,
    staleBefore: number,
    tokenId: string | null = null,
  ): ReserveResult => {
    if (at - lastSweep > 60_000) {
      sql.dropStale.run(staleBefore);
      lastSweep = at;
    }
    const row = balanceOf(keyId, staleBefore);
    // The key as it stands now: authentication may have read it from a cache (docs/http-api.md#keys).
    if (!row) return { ok: false, code: 'key_refused', reason: 'unknown' };
    const [credits, revokedAt, expiresAt, projectId, reserved, budgetCount] = row;
    if (revokedAt !== null) return { ok: false, code: 'key_refused', reason: 'revoked' };
    if (expiresAt !== null && expiresAt <= at) return { ok: false, code: 'key_refused', reason: 'expired' };
    // What a capped token can still spend beside its live reservations; undefined when uncapped.
    let tokenLeft: number | undefined;
    if (tokenId !== null) {
      const token = sql.tokenBudget.get({ tokenId, since: staleBefore });
      if (!token || token.expiresAt <= at) return { ok: false, code: 'key_refused', reason: 'token_expired' };
      if (token.cap !== null) tokenLeft = token.cap - token.spent - token.held;
    }
    // Budgets need a hold even on an unlimited key: it is what the next request's check counts.
    if (credits === null && tokenLeft === undefined && budgetCount === 0)
      return { ok: true, reservationId: null };
    const keyLeft = credits === null ? Number.MAX_SAFE_INTEGER : credits - reserved;
    const available = Math.min(keyLeft, tokenLeft ?? Number.MAX_SAFE_INTEGER);
    // Then the budgets (docs/budgets.md: 40202 after 40200), in the same write.
    const exceeded =
      available >= amount && budgetCount > 0
        ? budgets.refusal(keyId, projectId, amount, at, staleBefore, reserved)
        : [];
    if (available >= amount && exceeded.length === 0) {
      const inserted = sql.insertReservation.run(keyId, requestId, amount, at, tokenId);
      if (inserted.changes === 1) return { ok: true, reservationId: String(inserted.lastInsertRowid) };
    }
    // Asked again for the same request (a retried call): the hold it already has, which the
    // live holds above already count.
    const existing = sql.reservationOf.get(requestId, keyId);
    if (existing) return { ok: true, reservationId: String(existing.id) };
    if (available < amount)
      return { ok: false, code: 'insufficient_credits', availableMicro: Math.max(0, available) };
    if (exceeded.length > 0) return { ok: false, code: 'budget_exceeded', exceeded };
    throw new Error(`request ${requestId} holds a reservation of another key`);
  };

  /** The request's usage record, with what was debited for it, and its rollups. */
  const insertUsage = (entry: UsageEntry, debitMicro: number) => {
    rollups.add(entry, 1, debitMicro);
    return sql.insertUsage.run(
      entry.requestId,
      entry.keyId,
      debitMicro,
      entry.inputTokens,
      entry.outputTokens,
      entry.questions,
      entry.status,
      entry.elapsedMs,
      entry.at,
      entry.route,
      entry.upstream,
      entry.cached ? 1 : 0,
      entry.tokenId,
      entry.subject,
    );
  };

  const keepDecision = (entry: UsageEntry, decision: KeptDecision | undefined) => {
    if (decision !== undefined)
      sql.insertDecision.run(
        entry.requestId,
        entry.keyId,
        entry.route,
        entry.at,
        decision.reused,
        decision.questions,
      );
  };

  const settle = (
    reservationId: string | null,
    entry: UsageEntry,
    staleBefore: number,
    decision?: KeptDecision,
  ): { debit: number; events: BudgetEvent[] } => {
    let debit = entry.creditsMicro;
    const held =
      reservationId === null ? undefined : sql.deleteReservation.get(Number(reservationId), entry.requestId);
    // Never more than was reserved (docs/http-api.md#credits).
    if (held !== undefined) debit = Math.min(debit, held);
    else {
      // No hold (an unlimited key, a retried call, a hold swept as stale): settled already, the
      // first debit stands and nothing is written twice.
      const recorded = sql.recordedDebit.get(entry.requestId, entry.keyId);
      if (recorded) return { debit: recorded.debit, events: [] };
    }
    // Live reservations of other requests count against the cap; stale ones (left by a crashed
    // process) count nowhere, even before the sweep removes them (docs/http-api.md#credits).
    const [credits = null, , , projectId = null, reserved = 0, budgetCount = 0] =
      balanceOf(entry.keyId, staleBefore) ?? [];
    // A capped token never spends past its cap, beside its other live reservations (docs/browsers.md).
    const tokenLeft = tokenAvailable(entry.tokenId, staleBefore);
    if (tokenLeft !== undefined) debit = Math.min(debit, Math.max(0, tokenLeft));
    // Never more than the key can still cover beside its other in-flight reservations.
    if (credits !== null) debit = Math.min(debit, Math.max(0, credits - reserved));
    // Nor than any hard budget can still take; every budget's window counts the debit.
    let events: BudgetEvent[] = [];
    if (budgetCount > 0)
      ({ debit, events } = budgets.settleDebit(
        entry.keyId,
        projectId,
        debit,
        entry.at,
        staleBefore,
        reserved,
      ));
    if (credits !== null) sql.debitAndTouch.run(debit, entry.at, entry.keyId);
    else sql.touch.run(entry.at, entry.keyId);
    insertUsage(entry, debit);
    keepDecision(entry, decision);
    return { debit, events };
  };

  const release = (reservationId: string | null, entry: UsageEntry, decision?: KeptDecision) => {
    // A hold still there means nothing was recorded for the request yet.
    const held =
      reservationId === null ? undefined : sql.deleteReservation.get(Number(reservationId), entry.requestId);
    if (held === undefined) {
      const recorded = sql.recordedDebit.get(entry.requestId, entry.keyId);
      if (recorded) {
        // Settled, yet its caller was answered a failure: a failed request is never charged.
        if (recorded.status === 200 && entry.status !== 200) {
          // Its rollups move with it, unless the upgrade has yet to fold it (the fold takes it as it is then).
          const progress = sql.backfill.get();
          if (!(progress && recorded.id >= progress.next && recorded.id <= progress.last)) {
            const was = toUsage(recorded);
            rollups.add(was, -1);
            rollups.add({ ...was, creditsMicro: 0, status: entry.status }, 1);
          }
          sql.voidUsage.run(entry.status, entry.requestId, entry.keyId);
          sql.refund.run(recorded.debit, entry.keyId);
          const key = sql.keyById.get(entry.keyId);
          budgets.refund(entry.keyId, key?.project_id ?? null, recorded.debit, recorded.at);
        }
        return;
      }
      sql.deleteReservationOf.run(entry.requestId, entry.keyId);
    }
    insertUsage(entry, 0);
    sql.touch.run(entry.at, entry.keyId);
    keepDecision(entry, decision);
  };

  return {
    reserve: (keyId, requestId, amount, at, staleBefore, tokenId) =>
      write(() => reserve(keyId, requestId, amount, at, staleBefore, tokenId ?? null)),
    async settle(reservationId, entry, staleBefore, decision) {
      const { debit, events } = await write(() => settle(reservationId, entry, staleBefore, decision));
      for (const event of events) onBudgetEvent(event);
      return debit;
    },
    release: (reservationId, entry, decision) => write(() => release(reservationId, entry, decision)),
    async ledgerBalance(keyId) {
      return sql.ledgerBalance.get(keyId, keyId)?.total ?? 0;
    },
  };
}
