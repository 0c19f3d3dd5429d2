import { failure } from '@decision-gateway/contract';
import type { Upstream } from '@decision-gateway/questions';

/**
 * A simple circuit breaker: after `threshold` consecutive failed requests the upstream is taken
 * as down for `cooldownMs`; callers fail fast (503) instead of queueing behind it. After the
 * cool-down one trial request goes through: success closes the circuit, failure opens it again.
 */
export interface CircuitBreaker {
  /** Whether a request may go to the upstream now; if not, how long until it may. */
  admit(now: number): { ok: true } | { ok: false; retryAfterMs: number };
  success(): void;
  failure(now: number): void;
  readonly state: 'closed' | 'open' | 'half-open';
}

export function createCircuitBreaker(options: { threshold: number; cooldownMs: number }): CircuitBreaker {
  let state: CircuitBreaker['state'] = 'closed';
  let failures = 0;
  let openedAt = 0;
  let trialInFlight = false;

  return {
    get state() {
      return state;
    },
    admit(now) {
      if (state === 'closed') return { ok: true };
      const remaining = openedAt + options.cooldownMs - now;
      if (state === 'open' && remaining > 0) return { ok: false, retryAfterMs: remaining };
      // Cool-down over: let exactly one trial through.
      if (trialInFlight) return { ok: false, retryAfterMs: Math.max(1, Math.min(1000, options.cooldownMs)) };
      state = 'half-open';
      trialInFlight = true;
      return { ok: true };
    },
    success() {
      state = 'closed';
      failures = 0;
      trialInFlight = false;
    },
    failure(now) {
      trialInFlight = false;
      failures++;
      if (state === 'half-open' || failures >= options.threshold) {
        state = 'open';
        openedAt = now;
      }
    },
  };
}

/**
 * The upstream behind a breaker that counts whole requests: one admission per request however
 * many calls it makes (an openai request makes several), and one verdict when it ends.
 */
export function withCircuitBreaker(
  upstream: Upstream,
  breaker: CircuitBreaker,
  clock: () => number = Date.now,
): Upstream {
  return {
    ...upstream,
    async answer(call) {
      const admitted = breaker.admit(clock());
      if (!admitted.ok) {
        return {
          ok: false,
          failure: failure('unavailable', 'the upstream is unavailable; try again shortly', {
            retryAfterMs: admitted.retryAfterMs,
          }),
          detail: 'circuit open',
          unwell: true,
        };
      }
      const outcome = await upstream.answer(call);
      if (!outcome.ok && outcome.unwell === true) breaker.failure(clock());
      else breaker.success();
      return outcome;
    },
  };
}
