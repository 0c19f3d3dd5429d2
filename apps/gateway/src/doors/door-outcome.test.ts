import type { FastifyRequest } from 'fastify';
import { describe, expect, it } from 'vitest';
import { sameHiddenClass } from '../../test/support/hidden-class.ts';
import { type DoorOutcome, outcomeOf, recordCode } from './door-outcome.ts';

/** A request as the door leaves it before its answer: an outcome begun (tRPC's), or none. */
const requestWith = (outcome: DoorOutcome | undefined) => ({ outcome }) as FastifyRequest;

describe('recordCode', () => {
  it('records the code on an outcome the door began, keeping what it holds', () => {
    const request = requestWith({ evaluations: [], route: '/trpc/decide' });
    recordCode(request, 42901);
    expect(request.outcome).toEqual({ evaluations: [], route: '/trpc/decide', code: 42901 });
    recordCode(request, 0);
    expect(request.outcome?.code).toBe(0);
  });

  it('begins the outcome when the door had none', () => {
    const request = requestWith(undefined);
    recordCode(request, 40001);
    expect(request.outcome).toEqual({ code: 40001 });
  });

  it('leaves the outcomes of many requests of one hidden class', () => {
    // Many, as V8 warms up: its first few copies of a spread share a class even when later ones do not.
    const outcomes = Array.from({ length: 60 }, (_, i) => {
      const request = requestWith({ evaluations: [], route: '/trpc/decide' });
      recordCode(request, i);
      return request.outcome as DoorOutcome;
    });
    const first = outcomes[0] as DoorOutcome;
    expect(outcomes.filter((outcome) => !sameHiddenClass(outcome, first))).toHaveLength(0);
  });
});

describe('outcomeOf', () => {
  it('holds what is known, and no key for what is not', () => {
    expect(outcomeOf([], 0, '/mcp/decide')).toEqual({ evaluations: [], code: 0, route: '/mcp/decide' });
    expect(Object.keys(outcomeOf([], undefined, undefined))).toEqual(['evaluations']);
  });

  it('makes the outcomes of many requests of one hidden class', () => {
    // Many, as V8 warms up: its first few copies of a spread share a class even when later ones do not.
    const outcomes = Array.from({ length: 60 }, (_, i) => outcomeOf([], i, '/mcp/decide'));
    const first = outcomes[0] as DoorOutcome;
    expect(outcomes.filter((outcome) => !sameHiddenClass(outcome, first))).toHaveLength(0);
  });
});
