import { failure, MODEL_ID } from '@decision-gateway/contract';
import type { Upstream, UpstreamCall, UpstreamOutcome } from '@decision-gateway/questions';
import { describe, expect, it } from 'vitest';
import { createCircuitBreaker, withCircuitBreaker } from './circuit-breaker.ts';

const call: UpstreamCall = {
  request: { model: MODEL_ID, state: 's', questions: { q: { type: 'noul', instructions: 'yes?' } } },
  bodyBytes: 10,
  requestId: 'req_1',
  deadlineAt: Number.MAX_SAFE_INTEGER,
};
const ok: UpstreamOutcome = {
  ok: true,
  answers: { q: { type: 'noul', noul: 0.5 } },
  usage: { input_tokens: 1, output_tokens: 0 },
};
const down: UpstreamOutcome = { ok: false, failure: failure('upstream_error', 'down'), unwell: true };
const refused: UpstreamOutcome = {
  ok: false,
  failure: failure('invalid_request', 'too long'),
  unwell: false,
};

/** An upstream that makes `completions` inner calls per request, like the openai upstream. */
function scripted(outcomes: UpstreamOutcome[], completions = 1) {
  const counts = { requests: 0, completions: 0 };
  const upstream: Upstream = {
    name: 'local',
    usageBound: () => ({ input_tokens: 1, output_tokens: 0 }),
    async answer() {
      counts.requests++;
      counts.completions += completions;
      return outcomes.shift() ?? ok;
    },
  };
  return { upstream, counts };
}

describe('a circuit breaker around whole requests', () => {
  it('opens after the threshold of unwell requests, fails fast, then lets one whole request through', async () => {
    let now = 0;
    const { upstream, counts } = scripted([down, down, ok], 4);
    const guarded = withCircuitBreaker(
      upstream,
      createCircuitBreaker({ threshold: 2, cooldownMs: 1000 }),
      () => now,
    );
    expect((await guarded.answer(call)).ok).toBe(false);
    expect((await guarded.answer(call)).ok).toBe(false);
    const fast = await guarded.answer(call);
    expect(fast).toMatchObject({ ok: false, failure: { code: 50300, retryAfterMs: 1000 } });
    expect(counts.requests).toBe(2);

    now = 1000;
    // Half-open: one trial request, with all four of its completions; a second waits.
    const [trial, second] = await Promise.all([guarded.answer(call), guarded.answer(call)]);
    expect(trial.ok).toBe(true);
    expect(second).toMatchObject({ ok: false, failure: { code: 50300 } });
    expect(counts).toEqual({ requests: 3, completions: 12 });
    expect((await guarded.answer(call)).ok).toBe(true);
  });

  it('does not count a refusal of the caller’s input or a malformed answer against the upstream', async () => {
    const { upstream } = scripted([refused, refused, refused]);
    const guarded = withCircuitBreaker(
      upstream,
      createCircuitBreaker({ threshold: 2, cooldownMs: 1000 }),
      () => 0,
    );
    for (let i = 0; i < 3; i++)
      expect(await guarded.answer(call)).toMatchObject({ failure: { code: 40001 } });
    expect((await guarded.answer(call)).ok).toBe(true);
  });

  it('keeps the upstream’s name', () => {
    const { upstream } = scripted([]);
    expect(withCircuitBreaker(upstream, createCircuitBreaker({ threshold: 1, cooldownMs: 1 })).name).toBe(
      'local',
    );
  });
});
