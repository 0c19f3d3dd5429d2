import type { GatewayFailure } from '@decision-gateway/contract';
import { ErrorCode } from '@modelcontextprotocol/sdk/types.js';
import { retryAfterSeconds } from '../envelope.ts';

/**
 * How the MCP door writes a failure of the HTTP exchange itself (no credential, a closed session,
 * a body that is not JSON): a JSON-RPC error, as the SDK's own transport writes its errors, with
 * the gateway's code in `data`. A failure of a tool call is a tool result instead (tools.ts).
 */
export function jsonRpcFailure(f: GatewayFailure, requestId: string) {
  const body = JSON.stringify({
    jsonrpc: '2.0',
    error: {
      code: jsonRpcCode(f),
      message: `${f.code} ${f.type}: ${f.message}`,
      data: {
        code: f.code,
        type: f.type,
        requestId,
        ...(f.retryAfterMs !== undefined && { retryAfterMs: f.retryAfterMs }),
      },
    },
    id: null,
  });
  const headers: Record<string, string> = {};
  if (f.retryAfterMs !== undefined) headers['retry-after'] = retryAfterSeconds(f.retryAfterMs);
  // RFC 6750: a resource that takes Bearer credentials says so on every 401.
  if (f.status === 401)
    headers['www-authenticate'] =
      f.code === 40100
        ? 'Bearer realm="decision-gateway"'
        : 'Bearer realm="decision-gateway", error="invalid_token"';
  return { body, headers };
}

/** JSON-RPC's range for a server's own errors starts here; the SDK's transport refuses with it too. */
const SERVER_ERROR = -32000;

function jsonRpcCode(f: GatewayFailure): number {
  if (f.code === 40000) return ErrorCode.ParseError;
  if (f.status === 400) return ErrorCode.InvalidRequest;
  return SERVER_ERROR;
}
