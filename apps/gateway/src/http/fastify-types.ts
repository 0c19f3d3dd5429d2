import type { EvaluationLog } from '../core/evaluate.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** performance.now() when the request arrived (SPEC §3: elapsedMs counts from here). */
    startedAt: number;
    /** The gateway code the response carried (0 on success), for the request log. */
    gatewayCode: number | undefined;
    /** The Content-Type the client sent, kept by doors that check it after authentication. */
    sentContentType: string | undefined;
    /** A connection-level answer (408) was written for it: Fastify must not answer again. */
    answeredBelowRouter: boolean;
    /** Its log line and metrics are done (by onResponse, or when it was aborted). */
    finished: boolean;
    /** What the evaluation said about itself, for the request log. */
    evaluationLog: EvaluationLog | undefined;
  }
}
