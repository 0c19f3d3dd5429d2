import type { EvaluationLog } from '../core/evaluate.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** performance.now() when the request arrived (SPEC §3: elapsedMs counts from here). */
    startedAt: number;
    /** The gateway code the response carried (0 on success), for the request log. */
    gatewayCode: number | undefined;
    /** The Content-Type the client sent, kept by doors that check it after authentication. */
    sentContentType: string | undefined;
    /** What the evaluation said about itself, for the request log. */
    evaluationLog: EvaluationLog | undefined;
  }
}
