import { randomUUID } from 'node:crypto';
import { decodeJsonBody, failure, LIMITS } from '@decision-gateway/contract';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Authenticate } from '../../auth/authenticate.ts';
import type { Evaluate } from '../../core/evaluation/index.ts';
import { isJsonMediaType } from '../../core/media-type.ts';
import { newRequestId } from '../../http/connections.ts';
import type { CallerActions } from '../caller-actions.ts';
import { originOf } from '../cors.ts';
import { type DoorOptions, door, sendFailure } from '../door.ts';
import type { EvaluationReport } from '../door-outcome.ts';
import { readRawBodies, sentContentType } from '../read-body.ts';
import { metaHeaders } from '../response-meta.ts';
import { serve } from '../serve.ts';
import {
  createSessionTable,
  type McpSession,
  SESSION_DEFAULTS,
  type SessionLimits,
  type SessionTable,
} from './sessions.ts';
import { createMcpServer, type McpHttpCall } from './tools.ts';

export interface McpDoorOptions extends DoorOptions {
  evaluate: Evaluate;
  callers: CallerActions;
  authenticate: Authenticate;
  /** MCP_MAX_SESSIONS and the idle bound (default: 1000 sessions, 10 minutes). */
  sessions?: Partial<SessionLimits>;
}

/** A JSON-RPC message wraps a decision: room for its envelope beside the decision's own limit. */
const MAX_BODY_BYTES = 2 * LIMITS.maxBodyBytes;

/** The request headers the SDK's transport reads; nothing else is handed to it. */
const TRANSPORT_HEADERS = ['accept', 'mcp-session-id', 'mcp-protocol-version', 'last-event-id'] as const;

/**
 * The MCP door, `/mcp` (docs/mcp.md): Streamable HTTP on the official SDK's server and transport,
 * with the gateway's key or token as the Bearer credential. Each session has its own SDK server;
 * each tool call runs what every door runs. It only translates: credentials, media type and JSON
 * are judged here in the gateway's order, the protocol by the SDK, the decision by the core.
 */
export async function mcpDoor(app: FastifyInstance, opts: McpDoorOptions) {
  door(app, 'mcp', { ...opts, ownsNotFound: true });
  readRawBodies(app, 'buffer', MAX_BODY_BYTES);
  const sessions = createSessionTable({ ...SESSION_DEFAULTS, ...opts.sessions });
  app.addHook('onClose', async () => sessions.closeAll());

  const handle = (request: FastifyRequest, reply: FastifyReply) => exchange(request, reply, opts, sessions);
  serve(app, undefined, { method: 'POST', path: '', operation: 'mcpMessage' }, handle);
  serve(app, undefined, { method: 'DELETE', path: '', operation: 'mcpEndSession' }, handle);
}

/** One HTTP exchange of the protocol: authenticate, read, find or open the session, let the SDK answer. */
async function exchange(
  request: FastifyRequest,
  reply: FastifyReply,
  opts: McpDoorOptions,
  sessions: SessionTable,
) {
  const sessionId = header(request, 'mcp-session-id');
  // Opening a session reads the key afresh; within one, a recent reading will do, since every tool
  // call confirms the key again as it reserves or records.
  const auth = await opts.authenticate({
    authorization: request.headers.authorization,
    origin: originOf(request),
    cached: sessionId !== undefined,
  });
  if (!auth.ok) return sendFailure(reply, auth.failure, 'mcp');
  const keyId = auth.principal.key.id;

  let parsedBody: unknown;
  if (request.method === 'POST') {
    if (!isJsonMediaType(sentContentType(request)))
      return sendFailure(
        reply,
        failure('unsupported_media_type', 'send Content-Type: application/json'),
        'mcp',
      );
    const decoded = decodeJsonBody(request.body as Buffer | undefined);
    if (!decoded.ok) return sendFailure(reply, decoded.error, 'mcp');
    parsedBody = decoded.value;
  }

  let session: McpSession | undefined;
  if (sessionId !== undefined) {
    session = sessions.find(sessionId, keyId);
    if (session === undefined)
      return sendFailure(
        reply,
        failure(
          'not_found',
          'no open MCP session has this Mcp-Session-Id (closed, idle too long, or another key’s): initialize a new one',
        ),
        'mcp',
      );
  } else if (isInitializeRequest(parsedBody)) {
    session = await openSession(keyId, opts, sessions);
  } else {
    return sendFailure(
      reply,
      failure('invalid_request', 'send the Mcp-Session-Id of your session, or initialize a new one'),
      'mcp',
    );
  }

  const reports: EvaluationReport[] = [];
  let code: number | undefined;
  let tool: string | undefined;
  let firstId = true;
  const call: McpHttpCall = {
    authorization: request.headers.authorization,
    origin: originOf(request),
    startedAt: request.startedAt,
    trace: request.traceParent,
    nextRequestId() {
      if (!firstId) return newRequestId();
      firstId = false;
      return request.id;
    },
    reported(name, toolCode, evaluation) {
      tool = name;
      code = toolCode;
      if (evaluation) reports.push(evaluation);
    },
  };
  // The SDK hands `authInfo` to the tool handlers: the exchange rides along in it. The credential
  // itself stays in `call` (its `token` field is left empty: the SDK keeps nothing it need not).
  const response = await session.transport.handleRequest(transportRequest(request), {
    parsedBody,
    authInfo: { token: '', clientId: keyId, scopes: [], extra: { call } },
  });

  // A tool call is labelled by its tool, for metrics; its decision's headers are the door's too.
  request.outcome = {
    ...(code !== undefined && { code }),
    evaluations: reports,
    ...(tool !== undefined && { route: `/mcp/${tool}` }),
  };
  const [only] = reports;
  if (reports.length === 1 && only) reply.headers(metaHeaders(only.meta));
  reply.code(response.status);
  response.headers.forEach((value, name) => {
    reply.header(name, value);
  });
  return reply.send(response.body === null ? undefined : await response.text());
}

/** A session for this key: its SDK server and transport, kept once the SDK has initialized it. */
async function openSession(keyId: string, opts: McpDoorOptions, sessions: SessionTable): Promise<McpSession> {
  const server = createMcpServer(opts);
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: randomUUID,
    // Answers as JSON rather than an event stream: every tool answers at once, nothing is pushed.
    enableJsonResponse: true,
    onsessioninitialized: (id) => sessions.add(id, session),
    onsessionclosed: (id) => sessions.remove(id),
  });
  const session: McpSession = { keyId, server, transport };
  await server.connect(transport);
  return session;
}

/** The request as the SDK's transport reads it: its method, the protocol's headers, JSON. */
function transportRequest(request: FastifyRequest): Request {
  const headers = new Headers({ 'content-type': 'application/json' });
  for (const name of TRANSPORT_HEADERS) {
    const value = header(request, name);
    if (value !== undefined) headers.set(name, value);
  }
  return new Request(`http://gateway${request.url}`, { method: request.method, headers });
}

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return typeof value === 'string' ? value : undefined;
}
