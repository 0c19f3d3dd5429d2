import { randomUUID } from 'node:crypto';
import { decodeJsonBody, failure, LIMITS } from '@decision-gateway/contract';
import {
  isInitializeRequest,
  type JSONRPCMessage,
  SUPPORTED_PROTOCOL_VERSIONS,
} from '@modelcontextprotocol/sdk/types.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Authenticate } from '../../auth/authenticate.ts';
import type { Evaluate } from '../../core/evaluation/index.ts';
import { isJsonMediaType } from '../../core/media-type.ts';
import { newRequestId } from '../../http/connections.ts';
import type { CallerActions } from '../caller-actions.ts';
import { originOf } from '../cors.ts';
import { type DoorOptions, door, sendFailure } from '../door.ts';
import { type EvaluationReport, outcomeOf } from '../door-outcome.ts';
import { readRawBodies } from '../read-body.ts';
import { metaHeaders } from '../response-meta.ts';
import { serve } from '../serve.ts';
import { type JsonRpcMessages, jsonRpcMessages, type ProtocolRefusal, protocolRefusal } from './json-rpc.ts';
import {
  createSessionTable,
  type McpSession,
  SESSION_DEFAULTS,
  type SessionLimits,
  type SessionTable,
} from './sessions.ts';
import { answerToolCall, createMcpServer, type McpHttpCall } from './tools.ts';
import { ExchangeTransport } from './transport.ts';

export interface McpDoorOptions extends DoorOptions {
  evaluate: Evaluate;
  callers: CallerActions;
  authenticate: Authenticate;
  /** MCP_MAX_SESSIONS and the idle bound (default: 1000 sessions, 10 minutes). */
  sessions?: Partial<SessionLimits>;
}

/** A JSON-RPC message wraps a decision: room for its envelope beside the decision's own limit. */
const MAX_BODY_BYTES = 2 * LIMITS.maxBodyBytes;

/**
 * The MCP door, `/mcp` (docs/mcp.md): Streamable HTTP in its JSON-response mode, with the gateway's
 * key or token as the Bearer credential. Each session has its own server from the official SDK, on
 * a transport that hands it each exchange's messages (transport.ts); each tool call runs what every
 * door runs. It only translates: credentials, media type, JSON and Streamable HTTP's rules are
 * judged here, the messages by the SDK's schemas and server (a tool call checked by the schema and
 * answered without the server's dispatch, tools.ts), the decision by the core.
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

/** One HTTP exchange of the protocol: authenticate, read, find or open the session, let it answer. */
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
  let bodyBytes: number | undefined;
  if (request.method === 'POST') {
    if (!isJsonMediaType(request.sentContentType))
      return sendFailure(
        reply,
        failure('unsupported_media_type', 'send Content-Type: application/json'),
        'mcp',
      );
    const decoded = decodeJsonBody(request.body as Buffer | undefined);
    if (!decoded.ok) return sendFailure(reply, decoded.error, 'mcp');
    parsedBody = decoded.value;
    const { length } = request.body as Buffer;
    if (!Array.isArray(parsedBody) && length <= LIMITS.maxBodyBytes) bodyBytes = length;
  }

  // A session's id names an open session of this key; without one, only `initialize` may come.
  const open = sessionId === undefined ? undefined : sessions.find(sessionId, keyId);
  if (sessionId !== undefined && open === undefined) return sendFailure(reply, sessionNotOpen(), 'mcp');
  if (open === undefined && !isInitializeRequest(parsedBody))
    return sendFailure(
      reply,
      failure('invalid_request', 'send the Mcp-Session-Id of your session, or initialize a new one'),
      'mcp',
    );
  if (open !== undefined && request.method === 'DELETE') return endSession(request, reply, open, sessions);

  const messages = admitMessages(request, parsedBody, open !== undefined);
  if (!messages.ok) return refuse(reply, messages.refusal);
  // A session opens only once its `initialize` has passed every rule.
  const session = open ?? (await openSession(keyId, opts, sessions));

  const reports: EvaluationReport[] = [];
  let code: number | undefined;
  let tool: string | undefined;
  let firstId = true;
  const call: McpHttpCall = {
    authorization: request.headers.authorization,
    origin: originOf(request),
    startedAt: request.startedAt,
    trace: request.traceParent,
    bodyBytes,
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
  const answered = await session.transport.exchange(messages.value, {
    authInfo: { token: '', clientId: keyId, scopes: [], extra: { call } },
  });
  if (!answered.ok)
    return answered.reason === 'closed'
      ? sendFailure(reply, sessionNotOpen(), 'mcp')
      : refuse(reply, protocolRefusal('id_in_use'));

  // A tool call is labelled by its tool, for metrics; its decision's headers are the door's too.
  request.outcome = outcomeOf(reports, code, tool === undefined ? undefined : `/mcp/${tool}`);
  const [only] = reports;
  if (reports.length === 1 && only) reply.headers(metaHeaders(only.meta));
  const { answers } = answered;
  // Notifications and responses only: accepted, nothing to answer.
  if (answers.length === 0) return reply.code(202).send();
  reply.header('content-type', 'application/json');
  if (session.transport.sessionId !== undefined) reply.header('mcp-session-id', session.transport.sessionId);
  return reply.send(JSON.stringify(Array.isArray(parsedBody) ? answers : answers[0]));
}

/** Streamable HTTP's own rules for a POST's messages, worded as the SDK's transport words them (docs/mcp.md#errors). */
function admitMessages(request: FastifyRequest, body: unknown, inSession: boolean): JsonRpcMessages {
  const accept = header(request, 'accept') ?? '';
  if (!accept.includes('application/json') || !accept.includes('text/event-stream'))
    return { ok: false, refusal: protocolRefusal('not_acceptable') };
  const messages = jsonRpcMessages(body);
  if (!messages.ok || !inSession) return messages;
  if (messages.value.some(isInitialize)) return { ok: false, refusal: protocolRefusal('initialized') };
  const version = unsupportedVersion(request);
  return version ? { ok: false, refusal: version } : messages;
}

/** DELETE: the client ends its session. */
function endSession(
  request: FastifyRequest,
  reply: FastifyReply,
  session: McpSession,
  sessions: SessionTable,
) {
  const version = unsupportedVersion(request);
  if (version) return refuse(reply, version);
  const { sessionId } = session.transport;
  if (sessionId !== undefined) sessions.remove(sessionId);
  return reply.code(200).send();
}

/** The SDK's guard, asked only of a message that names the method (a failing guard costs ~2 µs). */
function isInitialize(message: JSONRPCMessage): boolean {
  return 'method' in message && message.method === 'initialize' && isInitializeRequest(message);
}

function sessionNotOpen() {
  return failure(
    'not_found',
    'no open MCP session has this Mcp-Session-Id (closed, idle too long, or another key’s): initialize a new one',
  );
}

/** A session's messages must name a protocol version the SDK speaks, if they name one. */
function unsupportedVersion(request: FastifyRequest) {
  const version = header(request, 'mcp-protocol-version');
  return version === undefined || SUPPORTED_PROTOCOL_VERSIONS.includes(version)
    ? undefined
    : protocolRefusal('unsupported_version', version);
}

function refuse(reply: FastifyReply, refusal: ProtocolRefusal) {
  return reply.code(refusal.status).header('content-type', 'application/json').send(refusal.body);
}

/** A session for this key: its SDK server, connected to a transport that answers each exchange. */
async function openSession(keyId: string, opts: McpDoorOptions, sessions: SessionTable): Promise<McpSession> {
  const server = createMcpServer(opts);
  const transport = new ExchangeTransport(answerToolCall(opts));
  transport.sessionId = randomUUID();
  const session: McpSession = { keyId, server, transport };
  await server.connect(transport);
  sessions.add(transport.sessionId, session);
  return session;
}

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return typeof value === 'string' ? value : undefined;
}
