import {
  type EvaluationData,
  type GatewayFailure,
  nativeError,
  nativeResult,
} from '@decision-gateway/contract';
import type { FastifyReply } from 'fastify';

/** The success envelope of SPEC §3, serialised once. */
export function successBody(data: unknown, requestId: string): string {
  return JSON.stringify({ code: 0, message: 'ok', data, requestId });
}

/** The error envelope of SPEC §4: `data` is null; the type, issues and retry hint sit in `error`. */
export function errorBody(failure: GatewayFailure, requestId: string): string {
  const error: Record<string, unknown> = { type: failure.type };
  if (failure.issues !== undefined) error.issues = failure.issues;
  if (failure.retryAfterMs !== undefined) error.retryAfterMs = failure.retryAfterMs;
  return JSON.stringify({ code: failure.code, message: failure.message, data: null, error, requestId });
}

/** `Retry-After` is whole seconds, rounded up so a caller never comes back too early. */
export function retryAfterSeconds(retryAfterMs: number): string {
  return String(Math.max(1, Math.ceil(retryAfterMs / 1000)));
}

/** Paths of the System One-compatible door (SPEC §11): they answer in the native wire format. */
export function isNativePath(url: string): boolean {
  return url === '/native' || url.startsWith('/native/') || url.startsWith('/native?');
}

/**
 * Every failure the gateway writes goes through here, so each door's shape is decided once: the
 * envelope of SPEC §4, or on `/native` the native `{"detail": …}` body with `retry-after-ms`.
 */
export function sendFailure(reply: FastifyReply, failure: GatewayFailure): FastifyReply {
  reply.request.gatewayCode = failure.code;
  const native = isNativePath(reply.request.url);
  if (failure.retryAfterMs !== undefined) {
    reply.header('retry-after', retryAfterSeconds(failure.retryAfterMs));
    if (native) reply.header('retry-after-ms', String(failure.retryAfterMs));
  }
  return reply
    .code(failure.status)
    .type('application/json; charset=utf-8')
    .send(native ? JSON.stringify(nativeError(failure)) : errorBody(failure, reply.request.id));
}

export function sendSuccess(reply: FastifyReply, data: unknown, status = 200): FastifyReply {
  reply.request.gatewayCode = 0;
  return reply.code(status).type('application/json; charset=utf-8').send(successBody(data, reply.request.id));
}

/** A native success (SPEC §11): the result at the top level, the credits debited in a header. */
export function sendNativeSuccess(reply: FastifyReply, data: EvaluationData): FastifyReply {
  reply.request.gatewayCode = 0;
  if (data.creditsUsed !== undefined) reply.header('x-credits-used', String(data.creditsUsed));
  return reply
    .code(200)
    .type('application/json; charset=utf-8')
    .send(JSON.stringify(nativeResult(data)));
}
