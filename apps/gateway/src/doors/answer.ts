import type { AsWritten, GatewayFailure } from '@decision-gateway/contract';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Evaluate, EvaluationCall, EvaluationOutcome, ResponseMeta } from '../core/evaluation/index.ts';
import { type DoorName, sendFailure } from './door.ts';
import { outcomeOf, reportOf } from './door-outcome.ts';
import { retryAfterSeconds, successBody } from './envelope.ts';
import { metaHeaders } from './response-meta.ts';

/**
 * How every door answers: the one success writer, and the one handler of an evaluation. A door
 * only says how its request becomes an evaluation call and how a success is written in its shape;
 * failures take its shape from the table of doors (door.ts).
 */

/** A success: its code for the request's log line, the evaluation's headers if any, JSON text. */
export function sendJson(reply: FastifyReply, body: string, meta?: ResponseMeta): FastifyReply {
  reply.request.outcome ??= { code: 0 };
  if (meta) reply.headers(metaHeaders(meta));
  return reply.type('application/json; charset=utf-8').send(body);
}

/** A success in the envelope of docs/http-api.md#the-success-envelope-http-200 (REST, admin, operations). */
export function sendSuccess(reply: FastifyReply, data: unknown, status = 200): FastifyReply {
  return sendJson(reply.code(status), successBody(data, reply.request.id));
}

export type EvaluationSuccess<W extends AsWritten> = Extract<EvaluationOutcome<W>, { ok: true }>;

/** What a door tells the one evaluation handler. */
export interface EvaluationAnswer<W extends AsWritten> {
  door: DoorName;
  /** The request as an evaluation call: its headers translated, its body (and dialect, if any). */
  call(request: FastifyRequest): EvaluationCall<W>;
  /** A success in the door's own shape, as JSON text. */
  success(outcome: EvaluationSuccess<W>, requestId: string): string;
  /**
   * For a door that must write exactly what another writer would (tRPC's adapter, for its fast
   * path): its media type, its headers, its failure body and its metrics label. Without it, a
   * failure takes the door table's shape and JSON goes out as UTF-8.
   */
  exact?: {
    mediaType: string;
    headers: Record<string, string>;
    failure(f: GatewayFailure, requestId: string): string;
    label: string;
  };
}

/** The handler of a door's evaluation route: evaluate, record the outcome, answer in the door's shape. */
export function answerEvaluation<W extends AsWritten>(evaluate: Evaluate, door: EvaluationAnswer<W>) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const outcome = await evaluate(door.call(request));
    const report = reportOf(request.id, outcome);
    const { exact } = door;
    request.outcome = outcomeOf([report], report.code, exact?.label);
    reply.headers(metaHeaders(outcome.meta));
    if (exact === undefined)
      return outcome.ok
        ? sendJson(reply, door.success(outcome, request.id))
        : sendFailure(reply, outcome.failure, door.door);
    // Bytes, not a string: Fastify would add `; charset=utf-8` to a string's media type.
    reply.headers({ 'content-type': exact.mediaType, ...exact.headers });
    if (outcome.ok) return reply.code(200).send(Buffer.from(door.success(outcome, request.id)));
    const { failure: f } = outcome;
    if (f.retryAfterMs !== undefined) reply.header('retry-after', retryAfterSeconds(f.retryAfterMs));
    return reply.code(f.status).send(Buffer.from(exact.failure(f, request.id)));
  };
}
