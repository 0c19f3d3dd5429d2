import type { GatewayFailure } from '@decision-gateway/contract';
import { MAX_BATCH_SIZE } from '@modelcontextprotocol/sdk/server/requestBody.js';
import {
  ErrorCode,
  type JSONRPCMessage,
  JSONRPCMessageSchema,
  SUPPORTED_PROTOCOL_VERSIONS,
} from '@modelcontextprotocol/sdk/types.js';
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

/** A refusal of Streamable HTTP's own rules, worded as the SDK's transport words it. */
export interface ProtocolRefusal {
  status: number;
  body: string;
}

const REFUSALS = {
  not_acceptable: [
    406,
    SERVER_ERROR,
    'Not Acceptable: Client must accept both application/json and text/event-stream',
  ],
  not_json_rpc: [400, ErrorCode.ParseError, 'Parse error: Invalid JSON-RPC message'],
  batch_too_large: [
    400,
    ErrorCode.InvalidRequest,
    `Invalid Request: Batch must not exceed ${MAX_BATCH_SIZE} messages`,
  ],
  initialized: [400, ErrorCode.InvalidRequest, 'Invalid Request: Server already initialized'],
  id_in_use: [
    400,
    ErrorCode.InvalidRequest,
    'Invalid Request: a request with this id is still being answered in this session',
  ],
  unsupported_version: [400, SERVER_ERROR, 'Bad Request: Unsupported protocol version'],
} as const satisfies Record<string, readonly [number, number, string]>;

export function protocolRefusal(kind: keyof typeof REFUSALS, version?: string): ProtocolRefusal {
  const [status, code, message] = REFUSALS[kind];
  const said =
    version === undefined
      ? message
      : `${message}: ${version} (supported versions: ${SUPPORTED_PROTOCOL_VERSIONS.join(', ')})`;
  return { status, body: JSON.stringify({ jsonrpc: '2.0', error: { code, message: said }, id: null }) };
}

export type JsonRpcMessages = { ok: true; value: JSONRPCMessage[] } | { ok: false; refusal: ProtocolRefusal };

/** An exchange's body as JSON-RPC messages: one, or a batch of up to MAX_BATCH_SIZE. */
export function jsonRpcMessages(body: unknown): JsonRpcMessages {
  const batch = Array.isArray(body) ? body : [body];
  if (batch.length > MAX_BATCH_SIZE) return { ok: false, refusal: protocolRefusal('batch_too_large') };
  const value: JSONRPCMessage[] = [];
  for (const message of batch) {
    const parsed = JSONRPCMessageSchema.safeParse(message);
    if (!parsed.success) return { ok: false, refusal: protocolRefusal('not_json_rpc') };
    value.push(parsed.data);
  }
  return { ok: true, value };
}
