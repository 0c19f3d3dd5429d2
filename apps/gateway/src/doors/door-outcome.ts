import type { EvaluationLog } from '../core/evaluation/index.ts';

/** One evaluation a request ran: a tRPC batch runs several, each with its own request id. */
export interface EvaluationReport {
  requestId: string;
  code: number;
  log: EvaluationLog;
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
  }
}
