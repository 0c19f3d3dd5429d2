import type { GatewayFailure } from '@decision-gateway/contract';

/** The success envelope of docs/http-api.md#the-success-envelope-http-200, serialised once. */
export function successBody(data: unknown, requestId: string): string {
  return JSON.stringify({ code: 0, message: 'ok', data, requestId });
}

/** The error envelope of docs/http-api.md#errors: `data` is null; the type, issues and retry hint sit in `error`. */
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
