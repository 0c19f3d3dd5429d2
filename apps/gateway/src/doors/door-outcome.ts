import type { FastifyRequest } from 'fastify';
import type { EvaluationLog, EvaluationOutcome, ResponseMeta } from '../core/evaluation/index.ts';

/** One evaluation a request ran: a tRPC batch runs several, each with its own request id. */
export interface EvaluationReport {
  requestId: string;
  code: number;
  log: EvaluationLog;
  /** What its response headers said (route, cache, credits). */
  meta: ResponseMeta;
}

/** The report of an evaluation, for the request's log line, metrics and trace. */
export function reportOf(requestId: string, outcome: EvaluationOutcome): EvaluationReport {
  const code = outcome.ok ? 0 : outcome.failure.code;
  return { requestId, code, log: outcome.log, meta: outcome.meta };
}

/**
 * What a door's answer came to, recorded once by the door's writer and read by the request's log
 * line and metrics: the gateway code, the evaluations it ran, and whether it was answered below
 * the router (on the socket, so Fastify must not answer again).
 */
export interface DoorOutcome {
  code?: number;
  /** The metrics label, where the route pattern says too little (a tRPC procedure). */
  route?: string;
  evaluations?: EvaluationReport[];
  belowRouter?: true;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** performance.now() when the request arrived (docs/http-api.md#the-success-envelope-http-200: elapsedMs counts from here). */
    startedAt: number;
    outcome: DoorOutcome | undefined;
    /**
     * Its log line and metrics are done (by onResponse, or when it was abandoned): a flag on the
     * request rather than a WeakSet of requests, which every garbage collection would have to walk.
     */
    accounted: boolean;
  }
}

/**
 * Records the gateway code a request's answer came to, on the outcome its door may have begun.
 * Set on that object rather than copied with a spread: a key added after a spread gives every copy
 * a hidden class of its own on V8 11 (docs/performance.md, "Objects that share a shape").
 */
export function recordCode(request: FastifyRequest, code: number): void {
  if (request.outcome === undefined) request.outcome = { code };
  else request.outcome.code = code;
}

/**
 * A door's outcome of the evaluations it ran, with its code and metrics label where known: every
 * door makes its outcome here, so the hooks that read it (log line, metrics) see one shape. Built
 * field by field: a literal that begins with a spread (`{ ...(code && { code }), evaluations }`)
 * gives every outcome a hidden class of its own on V8 11.
 */
export function outcomeOf(
  evaluations: EvaluationReport[],
  code: number | undefined,
  route: string | undefined,
): DoorOutcome {
  const outcome: DoorOutcome = { evaluations };
  if (code !== undefined) outcome.code = code;
  if (route !== undefined) outcome.route = route;
  return outcome;
}
