import type { EvaluationContext } from './evaluation-context.ts';

interface Flight {
  ctx: EvaluationContext;
  /** Its settlement has begun: a shutdown lets it finish rather than release it. */
  settling: boolean;
}

/**
 * The requests between their reservation and their settlement, so that a shutdown that can wait
 * no longer can release what they hold (docs/operating.md#timeouts-and-what-sigterm-guarantees) and make sure none of them
 * is settled afterwards.
 */
export function createInFlight() {
  const flights = new Map<string, Flight>();
  return {
    begin(ctx: EvaluationContext) {
      flights.set(ctx.call.requestId, { ctx, settling: false });
    },
    end(requestId: string) {
      flights.delete(requestId);
    },
    /** Its settlement begins: true unless a shutdown released its hold first. */
    settle(requestId: string): boolean {
      const flight = flights.get(requestId);
      if (flight === undefined) return true;
      if (flight.ctx.abandoned) return false;
      flight.settling = true;
      return true;
    },
    /** Marks every request not yet settling as abandoned and returns them. */
    abandonAll(): EvaluationContext[] {
      const pending = [...flights.values()].filter((flight) => !flight.ctx.abandoned && !flight.settling);
      for (const flight of pending) flight.ctx.abandoned = true;
      return pending.map((flight) => flight.ctx);
    },
  };
}

export type InFlight = ReturnType<typeof createInFlight>;
