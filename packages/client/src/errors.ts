import type { ErrorType, Issue } from '@decision-gateway/contract/errors';
import { TRPCClientError } from '@trpc/client';

/** A failure reported by the gateway (docs/http-api.md#errors), or a transport failure (see GatewayNetworkError). */
export class GatewayError extends Error {
  override readonly name: string = 'GatewayError';
  /** The gateway's numeric code (e.g. 40001), or 0 when no gateway answered. */
  readonly code: number;
  readonly type: ErrorType | 'network_error' | 'invalid_response';
  /** HTTP status, or 0 when no gateway answered. */
  readonly status: number;
  readonly issues: Issue[];
  readonly requestId: string | undefined;
  readonly retryAfterMs: number | undefined;

  constructor(init: {
    message: string;
    code: number;
    type: GatewayError['type'];
    status: number;
    issues?: Issue[] | undefined;
    requestId?: string | undefined;
    retryAfterMs?: number | undefined;
    cause?: unknown;
  }) {
    super(init.message, { cause: init.cause });
    this.code = init.code;
    this.type = init.type;
    this.status = init.status;
    this.issues = init.issues ?? [];
    this.requestId = init.requestId;
    this.retryAfterMs = init.retryAfterMs;
  }
}

/** No usable answer reached the client: connection refused or reset, DNS, TLS, or a non-gateway reply. */
export class GatewayNetworkError extends GatewayError {
  override readonly name = 'GatewayNetworkError';
}

interface GatewayErrorData {
  code?: number;
  type?: ErrorType;
  httpStatus?: number;
  issues?: Issue[];
  requestId?: string;
  retryAfterMs?: number;
}

/** Any failure of a call → GatewayError (gateway errors) or GatewayNetworkError (transport). */
export function toGatewayError(error: unknown): GatewayError {
  if (error instanceof GatewayError) return error;
  if (error instanceof Error && error.cause instanceof GatewayError) return error.cause;
  if (error instanceof TRPCClientError) {
    const data = (error.data ?? undefined) as GatewayErrorData | undefined;
    if (data && typeof data.code === 'number' && data.type !== undefined) {
      return new GatewayError({
        message: error.message,
        code: data.code,
        type: data.type,
        status: data.httpStatus ?? 0,
        issues: data.issues,
        requestId: data.requestId,
        retryAfterMs: data.retryAfterMs,
        cause: error,
      });
    }
  }
  const cause = error instanceof Error && error.cause instanceof Error ? error.cause : error;
  const reason = cause instanceof Error ? cause.message : String(cause);
  // A browser hides why a request failed; the commonest reason is CORS, so say so.
  const origin = (globalThis as { location?: { origin?: string } }).location?.origin;
  const likely =
    origin === undefined
      ? ''
      : ` (from a browser the likely cause is CORS: the gateway answers this page, ${origin}, only if its CORS_ORIGINS lists it and the call uses a token, never an API key)`;
  return new GatewayNetworkError({
    message: `the gateway did not answer${likely}: ${reason}`,
    code: 0,
    type: 'network_error',
    status: 0,
    cause: error,
  });
}
