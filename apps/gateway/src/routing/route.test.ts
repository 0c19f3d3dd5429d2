import { failure, MODEL_ID } from '@decision-gateway/contract';
import type { Upstream, UpstreamCall, UpstreamOutcome } from '@decision-gateway/questions';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { sameHiddenClass } from '../../test/support/hidden-class.ts';
import { createRoute, type RouteOutcome, type RouteSpec } from './route.ts';

const logger = pino({ level: 'silent' });
const request = {
  model: MODEL_ID,
  state: 'the ticket',
  questions: {
    team: { type: 'choice', criteria: { billing: 'money', tech: 'bugs' } },
    refund: { type: 'noul', instructions: 'a refund?' },
  },
} as UpstreamCall['request'];
const call = (deadlineAt = Number.MAX_SAFE_INTEGER): UpstreamCall => ({
  request,
  bodyBytes: 100,
  requestId: 'req_1',
  deadlineAt,
});

const sure = {
  team: { type: 'choice', choice: 'billing', confidence: 0.9, probabilities: { billing: 0.95, tech: 0.05 } },
  refund: { type: 'noul', noul: 0.95 },
};
const usage = (n: number) => ({ input_tokens: n, output_tokens: 0 });
const fail = (type: Parameters<typeof failure>[0], message: string = type) =>
  ({ ok: false, failure: failure(type, message), unwell: true }) as UpstreamOutcome;

/** An upstream answering from a script, recording every call it gets. */
function scripted(name: string, answer: (call: UpstreamCall) => UpstreamOutcome) {
  const calls: UpstreamCall[] = [];
  const upstream: Upstream = {
    name,
    usageBound: () => usage(name.length * 100),
    async answer(c) {
      calls.push(c);
      return answer(c);
    },
  };
  return { upstream, calls, member: { upstream, timeoutMs: 1000 } };
}

const spec = (over: Partial<RouteSpec> & Pick<RouteSpec, 'members'>): RouteSpec => ({
  name: 'default',
  deadlineMs: 2000,
  cacheTtlSeconds: 0,
  ...over,
});

describe('a route: its answers', () => {
  it('are of one hidden class, request after request', async () => {
    const a = scripted('a', () => ({ ok: true, answers: sure, usage: usage(10), upstreamRequestId: 'up_1' }));
    const route = createRoute(spec({ members: [a.member] }), { logger });
    const outcomes: RouteOutcome[] = [];
    // Many, as V8 warms up: its first few copies of a spread share a class even when later ones do not.
    for (let i = 0; i < 60; i++) outcomes.push(await route.answer(call()));
    const first = outcomes[0] as RouteOutcome;
    expect(first.ok).toBe(true);
    expect(outcomes.filter((outcome) => !sameHiddenClass(outcome, first))).toHaveLength(0);
  });
});

describe('a route: fallbacks', () => {
  it.each(['upstream_error', 'unavailable', 'upstream_timeout'] as const)(
    'moves on after %s, and reports who answered',
    async (type) => {
      const a = scripted('a', () => fail(type));
      const b = scripted('b', () => ({ ok: true, answers: sure, usage: usage(7) }));
      const route = createRoute(spec({ members: [a.member, b.member] }), { logger });
      const outcome = await route.answer(call());
      expect(outcome).toMatchObject({ ok: true, upstream: 'b', usage: usage(7) });
      expect([a.calls.length, b.calls.length]).toEqual([1, 1]);
    },
  );

  it('moves on after an answer that fails the checks', async () => {
    const a = scripted('a', () => ({ ok: true, answers: { team: sure.team }, usage: usage(1) }));
    const b = scripted('b', () => ({ ok: true, answers: sure, usage: usage(2) }));
    const outcome = await createRoute(spec({ members: [a.member, b.member] }), { logger }).answer(call());
    expect(outcome).toMatchObject({ ok: true, upstream: 'b' });
  });

  it('ends at once on a refusal of the caller’s input (40001)', async () => {
    const a = scripted('a', () => ({ ok: false, failure: failure('invalid_request', 'too many tokens') }));
    const b = scripted('b', () => ({ ok: true, answers: sure, usage: usage(2) }));
    const outcome = await createRoute(spec({ members: [a.member, b.member] }), { logger }).answer(call());
    expect(outcome).toMatchObject({ ok: false, failure: { code: 40001, message: 'too many tokens' } });
    expect(b.calls).toHaveLength(0);
  });

  it('gives the last failure, naming every upstream tried with its failure, in order', async () => {
    const a = scripted('a', () => fail('upstream_error', 'the upstream could not be reached'));
    const b = scripted('b', () => fail('upstream_timeout', 'the upstream did not answer in time'));
    const outcome = await createRoute(spec({ members: [a.member, b.member] }), { logger }).answer(call());
    expect(outcome).toMatchObject({
      ok: false,
      failure: {
        code: 50400,
        message:
          'every upstream failed: a: the upstream could not be reached (50200); b: the upstream did not answer in time (50400)',
      },
    });
  });

  it('bounds each attempt by its own timeout and the route deadline, and starts none after it', async () => {
    let now = 0;
    const a = scripted('a', () => {
      now = 5000; // a slow failure uses up the route's deadline
      return fail('upstream_timeout');
    });
    const b = scripted('b', () => ({ ok: true, answers: sure, usage: usage(2) }));
    const route = createRoute(spec({ members: [a.member, b.member] }), { logger, clock: () => now });
    const outcome = await route.answer(call(2000));
    expect(a.calls[0]?.deadlineAt).toBe(1000); // its own timeoutMs came before the route's 2000
    expect(b.calls).toHaveLength(0);
    expect(outcome).toMatchObject({ ok: false, failure: { code: 50400 } });
  });

  it('draws the first upstream by weight, the rest following in order', async () => {
    const a = scripted('a', () => ({ ok: true, answers: sure, usage: usage(1) }));
    const b = scripted('b', () => ({ ok: true, answers: sure, usage: usage(1) }));
    const route = createRoute(spec({ members: [a.member, b.member], weights: { a: 90, b: 10 } }), { logger });
    const n = 2000;
    for (let i = 0; i < n; i++) await route.answer(call());
    // Binomial(2000, 0.9): mean 1800, σ ≈ 13.4; ±6σ never fails by chance in practice.
    expect(a.calls.length).toBeGreaterThan(1800 - 81);
    expect(a.calls.length).toBeLessThan(1800 + 81);
    expect(a.calls.length + b.calls.length).toBe(n);
  });
});

describe('a route: escalation', () => {
  const unsure = {
    team: { type: 'choice', choice: 'billing', probabilities: { billing: 0.55, tech: 0.45 } }, // confidence 0.1
    refund: { type: 'noul', noul: 0.95 },
  };
  const rule = (to: ReturnType<typeof scripted>) => ({
    to: to.member,
    confidenceBelow: 0.6,
    noulWithin: [0.25, 0.75] as const,
  });

  it('asks exactly the unsure questions again in one call with the same state, keeping the sure ones', async () => {
    const local = scripted('local', () => ({ ok: true, answers: unsure, usage: usage(10) }));
    const hosted = scripted('hosted', () => ({
      ok: true,
      answers: {
        team: { type: 'choice', choice: 'tech', confidence: 0.8, probabilities: { billing: 0.1, tech: 0.9 } },
      },
      usage: usage(4),
    }));
    const route = createRoute(spec({ members: [local.member], escalate: rule(hosted) }), { logger });
    const outcome = await route.answer(call());
    expect(hosted.calls).toHaveLength(1);
    expect(Object.keys(hosted.calls[0]?.request.questions ?? {})).toEqual(['team']);
    expect(hosted.calls[0]?.request.state).toBe('the ticket');
    expect(outcome).toMatchObject({ ok: true, upstream: 'local+hosted', usage: usage(14) });
    if (!outcome.ok) throw new Error('no answer');
    expect(outcome.answers.team).toMatchObject({ choice: 'tech' });
    expect(outcome.answers.refund).toEqual({ type: 'noul', noul: 0.95 });
  });

  it.each([
    [0.25, true],
    [0.75, true],
    [0.2499, false],
    [0.7501, false],
  ])('takes a noul of %s as unsure: %s (bounds included)', async (noul, escalates) => {
    const answers = { ...sure, refund: { type: 'noul', noul } };
    const local = scripted('local', () => ({ ok: true, answers, usage: usage(1) }));
    const hosted = scripted('hosted', () => ({
      ok: true,
      answers: { refund: { type: 'noul', noul: 0.9 } },
      usage: usage(1),
    }));
    await createRoute(spec({ members: [local.member], escalate: rule(hosted) }), { logger }).answer(call());
    expect(hosted.calls.length).toBe(escalates ? 1 : 0);
  });

  it('keeps the first answers when the escalation fails, and never escalates the target’s own answers', async () => {
    const local = scripted('local', () => ({ ok: true, answers: unsure, usage: usage(10) }));
    const hosted = scripted('hosted', () => fail('upstream_error'));
    const route = createRoute(spec({ members: [local.member], escalate: rule(hosted) }), { logger });
    expect(await route.answer(call())).toMatchObject({ ok: true, upstream: 'local', usage: usage(10) });

    const onlyHosted = scripted('hosted', () => ({ ok: true, answers: unsure, usage: usage(3) }));
    const own = createRoute(spec({ members: [onlyHosted.member], escalate: rule(onlyHosted) }), { logger });
    expect(await own.answer(call())).toMatchObject({ ok: true, upstream: 'hosted' });
    expect(onlyHosted.calls).toHaveLength(1);
  });

  it('reserves the largest bound of its upstreams plus the escalation target’s', () => {
    const a = scripted('a', () => fail('upstream_error')); // bound 100
    const bbb = scripted('bbb', () => fail('upstream_error')); // bound 300
    const hosted = scripted('hosted', () => fail('upstream_error')); // bound 600
    expect(createRoute(spec({ members: [a.member, bbb.member] }), { logger }).usageBound(request, 1)).toEqual(
      usage(300),
    );
    const escalating = createRoute(spec({ members: [a.member, bbb.member], escalate: rule(hosted) }), {
      logger,
    });
    expect(escalating.usageBound(request, 1)).toEqual(usage(900));
  });
});

describe('a route: question IDs such as __proto__', () => {
  it('records who answered a declined __proto__ question as an own member of the attribution', async () => {
    const questions = JSON.parse(
      '{"team":{"type":"choice","criteria":{"billing":"money","tech":"bugs"}},"__proto__":{"type":"noul","instructions":"a refund?"}}',
    );
    const declining = scripted('local', () => ({
      ok: true,
      answers: JSON.parse(`{"team":${JSON.stringify(sure.team)},"__proto__":{"type":"refusal"}}`),
      usage: usage(5),
    }));
    const local = {
      ...declining,
      member: { upstream: { ...declining.upstream, refuses: true }, timeoutMs: 1000 },
    };
    const hosted = scripted('hosted', () => ({
      ok: true,
      answers: JSON.parse('{"__proto__":{"type":"noul","noul":0.9}}'),
      usage: usage(4),
    }));
    const route = createRoute(spec({ members: [local.member, hosted.member] }), { logger });
    const outcome = await route.answer({ ...call(), request: { ...request, questions } });
    if (!outcome.ok) throw new Error(outcome.failure.message);
    expect(outcome.upstream).toBe('local+hosted');
    const answeredBy = outcome.attribution?.answeredBy ?? {};
    expect(Object.getPrototypeOf(answeredBy)).toBe(Object.prototype);
    expect(Object.entries(answeredBy)).toEqual([
      ['team', 'local'],
      ['__proto__', 'hosted'],
    ]);
  });
});
