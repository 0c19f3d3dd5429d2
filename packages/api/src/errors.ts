import { type ErrorType, failure, type GatewayFailure, type Issue } from '@decision-gateway/contract';
import { TRPCError } from '@trpc/server';
import { type TRPC_ERROR_CODE_KEY, TRPC_ERROR_CODES_BY_KEY } from '@trpc/server/rpc';

/**
 * The tRPC code whose HTTP status equals the gateway status, so both doors answer alike (431 has
 * no tRPC code: it is answered below the router, before tRPC sees the request).
 */
const TRPC_CODE_BY_TYPE: Record<ErrorType, TRPC_ERROR_CODE_KEY> = {
  invalid_json: 'PARSE_ERROR',
  invalid_request: 'BAD_REQUEST',
  invalid_question_count: 'BAD_REQUEST',
  unknown_model: 'BAD_REQUEST',
  unknown_route: 'BAD_REQUEST',
  missing_api_key: 'UNAUTHORIZED',
  invalid_api_key: 'UNAUTHORIZED',
  insufficient_credits: 'PAYMENT_REQUIRED',
  budget_exceeded: 'PAYMENT_REQUIRED',
  forbidden: 'FORBIDDEN',
  not_found: 'NOT_FOUND',
  method_not_allowed: 'METHOD_NOT_SUPPORTED',
  request_timeout: 'TIMEOUT',
  payload_too_large: 'PAYLOAD_TOO_LARGE',
  unsupported_media_type: 'UNSUPPORTED_MEDIA_TYPE',
  headers_too_large: 'BAD_REQUEST',
  rate_limited: 'TOO_MANY_REQUESTS',
  internal_error: 'INTERNAL_SERVER_ERROR',
  upstream_error: 'BAD_GATEWAY',
  unavailable: 'SERVICE_UNAVAILABLE',
  upstream_timeout: 'GATEWAY_TIMEOUT',
};

/** tRPC's own failures (bad JSON, unknown procedure, …) in the gateway's terms. */
const TYPE_BY_TRPC_CODE: Partial<Record<TRPC_ERROR_CODE_KEY, ErrorType>> = {
  PARSE_ERROR: 'invalid_json',
  BAD_REQUEST: 'invalid_request',
  NOT_FOUND: 'not_found',
  METHOD_NOT_SUPPORTED: 'method_not_allowed',
  PAYLOAD_TOO_LARGE: 'payload_too_large',
  UNSUPPORTED_MEDIA_TYPE: 'unsupported_media_type',
};

/** Carries a gateway failure (and the request id of its operation) through tRPC as an error's cause. */
export class GatewayFailureError extends Error {
  constructor(
    readonly failure: GatewayFailure,
    readonly requestId?: string,
  ) {
    super(failure.message);
    this.name = 'GatewayFailureError';
  }
}

export function toTrpcError(gatewayFailure: GatewayFailure, requestId?: string): TRPCError {
  return new TRPCError({
    code: TRPC_CODE_BY_TYPE[gatewayFailure.type],
    message: gatewayFailure.message,
    cause: new GatewayFailureError(gatewayFailure, requestId),
  });
}

/** The request id of the operation a tRPC error came from, when the gateway knows it. */
export function requestIdOfTrpcError(error: TRPCError): string | undefined {
  return error.cause instanceof GatewayFailureError ? error.cause.requestId : undefined;
}

/** The gateway failure behind any error tRPC reports; unexpected ones never show their detail. */
export function failureOfTrpcError(error: TRPCError): GatewayFailure {
  if (error.cause instanceof GatewayFailureError) return error.cause.failure;
  // tRPC reports a body that is not JSON as BAD_REQUEST caused by JSON.parse's SyntaxError.
  if (error.cause instanceof SyntaxError)
    return failure('invalid_json', `the body is not valid JSON: ${error.message}`);
  // tRPC's own check of a batch's size (maxBatchSize): every operation is refused (docs/http-api.md#the-other-doors).
  if (error.message === 'Batch call exceeds maximum size')
    return failure('invalid_request', `a batch holds at most ${MAX_BATCH_OPERATIONS} operations`);
  const type = TYPE_BY_TRPC_CODE[error.code];
  return type ? failure(type, error.message) : failure('internal_error', 'internal error');
}

/** What `error.data` holds on every tRPC error (docs/http-api.md#the-other-doors): the gateway code, type, issues, request id. */
export interface GatewayErrorData {
  code: number;
  type: ErrorType;
  httpStatus: number;
  issues?: Issue[];
  retryAfterMs?: number;
  requestId?: string;
  path?: string;
}

export function gatewayErrorData(
  f: GatewayFailure,
  requestId: string | undefined,
  path?: string,
): GatewayErrorData {
  const data: GatewayErrorData = { code: f.code, type: f.type, httpStatus: f.status };
  if (f.issues !== undefined) data.issues = f.issues;
  if (f.retryAfterMs !== undefined) data.retryAfterMs = f.retryAfterMs;
  if (requestId !== undefined) data.requestId = requestId;
  if (path !== undefined) data.path = path;
  return data;
}

/** docs/http-api.md#the-other-doors: a batch holds at most this many operations; more and every operation gets 40001. */
export const MAX_BATCH_OPERATIONS = 8;

/**
 * A tRPC error response body (tRPC's HTTP RPC format, shaped as the router's errorFormatter
 * shapes it) for failures answered outside tRPC's resolver: a 413 while reading, a 408 or the
 * drain's 503 below the router. `httpBatchLink` gives a non-array error body to every operation.
 */
export function trpcErrorBody(f: GatewayFailure, requestId: string, path?: string): string {
  const code = TRPC_CODE_BY_TYPE[f.type];
  return JSON.stringify({
    error: {
      message: f.message,
      code: TRPC_ERROR_CODES_BY_KEY[code],
      data: gatewayErrorData(f, requestId, path),
    },
  });
}
