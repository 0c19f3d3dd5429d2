import {
  failure,
  formatIssue,
  type GatewayFailure,
  LIMITS,
  MCP_TOOLS,
  type McpDecideOutput,
  type McpToolName,
  MODEL_ID,
  standaloneJsonSchema,
} from '@decision-gateway/contract';
import { summarizeAnswer } from '@decision-gateway/questions';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  type CallToolRequest,
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  type JSONRPCErrorResponse,
  ListToolsRequestSchema,
  McpError,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import type { Evaluate } from '../../core/evaluation/index.ts';
import type { TraceParent } from '../../telemetry/spans.ts';
import type { CallerActions } from '../caller-actions.ts';
import { type EvaluationReport, reportOf } from '../door-outcome.ts';
import type { DirectAnswer } from './transport.ts';

/**
 * The MCP door's tools (docs/mcp.md#tools): `decide` runs the one evaluation every door runs;
 * `record_outcome` records outcomes as `POST /v1/outcomes` does. A gateway failure is a tool
 * result with `isError: true` that names its code, so an agent can read it and correct itself.
 */

/** The HTTP request a tool call arrived in: its credentials, clock, trace, and where it reports. */
export interface McpHttpCall {
  authorization: string | undefined;
  origin: string | undefined;
  /** performance.now() when the HTTP request arrived: a decision's elapsedMs counts from here. */
  startedAt: number;
  trace: TraceParent | undefined;
  /**
   * The body's length in bytes when it is one message no larger than a decision may be: that
   * length bounds the call's decision, as REST's body length bounds its own. Otherwise undefined,
   * and the decision is written out as JSON to be measured.
   */
  bodyBytes: number | undefined;
  /** The first tool call of a request takes the request's own id; any further one a new id. */
  nextRequestId(): string;
  /** Each tool call's outcome, for the request's log line, metrics and trace. */
  reported(tool: McpToolName, code: number, evaluation?: EvaluationReport): void;
}

/** The tool list, derived once from the contract's schemas. */
const TOOL_LIST: Tool[] = Object.entries(MCP_TOOLS).map(([name, tool]) => ({
  name,
  description: tool.description,
  inputSchema: standaloneJsonSchema(tool.input, 'input') as Tool['inputSchema'],
  outputSchema: standaloneJsonSchema(tool.output, 'output') as NonNullable<Tool['outputSchema']>,
}));

const SERVER_INFO = { name: 'decision-gateway', version: '1.0.0' } as const;
const INSTRUCTIONS =
  'Typed decisions with probabilities: call `decide` with a shared `state` and up to 8 questions; ' +
  'later, `record_outcome` with its `requestId` says what turned out true.';

export interface ToolDeps {
  evaluate: Evaluate;
  callers: CallerActions;
}

/**
 * A new MCP server (one per session), answering the tool list. Tool calls are answered by
 * `answerToolCall` before they reach it; its handler for them stays so that the server still
 * refuses a malformed call, or one asking for a task, in its own words.
 */
export function createMcpServer(deps: ToolDeps): Server {
  const server = new Server(SERVER_INFO, { capabilities: { tools: {} }, instructions: INSTRUCTIONS });
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: TOOL_LIST }));
  server.setRequestHandler(CallToolRequestSchema, (request, extra) =>
    callTool(deps, request.params, extra.authInfo),
  );
  return server;
}

/**
 * A session's tool calls, answered without the SDK server's dispatch: checked against the SDK's
 * schema for a call, run, and answered as the server answers (errors by the same rule). The
 * dispatch (an AbortController, a context of closures, the call parsed twice and its result once)
 * cost ~28 µs of CPU a call (docs/performance.md#the-mcp-door). A call the schema refuses, or one
 * asking for a task, goes on to the server, which words its refusal.
 */
export function answerToolCall(deps: ToolDeps): DirectAnswer {
  return (request, extra) => {
    if (request.method !== 'tools/call') return undefined;
    const parsed = CallToolRequestSchema.safeParse(request);
    if (!parsed.success || parsed.data.params.task !== undefined) return undefined;
    const { id } = request;
    // The caller's own arguments: the schema's copy leaves out an own `__proto__` key, which the
    // decision must see (and refuse as an unknown field, as REST does).
    const params = {
      ...parsed.data.params,
      arguments: request.params?.arguments as CallToolRequest['params']['arguments'],
    };
    return callTool(deps, params, extra.authInfo).then(
      (result) => ({ jsonrpc: '2.0', id, result }),
      (error: unknown) => ({ jsonrpc: '2.0', id, error: jsonRpcError(error) }),
    );
  };
}

async function callTool(
  deps: ToolDeps,
  params: CallToolRequest['params'],
  authInfo: AuthInfo | undefined,
): Promise<CallToolResult> {
  const http = authInfo?.extra?.call as McpHttpCall | undefined;
  if (http === undefined) throw new Error('an MCP tool call outside an HTTP request');
  const { name, arguments: args } = params;
  if (name === 'decide') return decide(deps.evaluate, args, http);
  if (name === 'record_outcome') return recordOutcome(deps.callers, args, http);
  throw new McpError(
    ErrorCode.InvalidParams,
    `no tool named ${JSON.stringify(name)}: use decide or record_outcome`,
  );
}

/** A thrown error as the SDK's server answers it: its own code if it has one, else an internal error. */
function jsonRpcError(error: unknown): JSONRPCErrorResponse['error'] {
  const { code, message, data } = (error ?? {}) as { code?: unknown; message?: unknown; data?: unknown };
  return {
    code: Number.isSafeInteger(code) ? (code as number) : ErrorCode.InternalError,
    message: typeof message === 'string' ? message : 'Internal error',
    ...(data !== undefined && { data }),
  };
}

async function decide(evaluate: Evaluate, args: unknown, http: McpHttpCall): Promise<CallToolResult> {
  const requestId = http.nextRequestId();
  const { route, ...rest } = (args ?? {}) as Record<string, unknown>;
  if (route !== undefined && (typeof route !== 'string' || route.length === 0))
    return refused(
      http,
      failure('invalid_request', 'route: must be the name of a route', {
        issues: [{ path: ['route'], message: 'must be the name of a route' }],
      }),
      requestId,
    );
  // The request every door evaluates; the model is the gateway's (a wrong one is still named).
  const body = { model: MODEL_ID, ...rest };
  const bytes = http.bodyBytes ?? Buffer.byteLength(JSON.stringify(body));
  if (bytes > LIMITS.maxBodyBytes)
    return refused(
      http,
      failure('payload_too_large', `the decision is larger than ${LIMITS.maxBodyBytes} bytes`),
      requestId,
    );
  const outcome = await evaluate({
    requestId,
    startedAt: http.startedAt,
    authorization: http.authorization,
    route,
    origin: http.origin,
    body: {
      kind: 'lazy',
      contentType: 'application/json',
      bytes,
      // A method, not an arrow: run through tsx, an arrow made per call also names itself (docs/performance.md).
      async read() {
        return { ok: true, value: body };
      },
    },
    trace: http.trace,
  });
  const report = reportOf(requestId, outcome);
  http.reported('decide', report.code, report);
  if (!outcome.ok) return toolError(outcome.failure, requestId);
  const { result, creditsUsed } = outcome.data;
  const decided: McpDecideOutput = {
    answers: result.answers,
    usage: result.usage,
    elapsedMs: result.elapsedMs,
    creditsUsed: creditsUsed ?? 0,
    requestId,
  };
  return { content: [{ type: 'text', text: decisionText(decided) }], structuredContent: decided };
}

/** A decision refused before it was evaluated: reported, and told as a tool error. */
function refused(http: McpHttpCall, f: GatewayFailure, requestId: string): CallToolResult {
  http.reported('decide', f.code);
  return toolError(f, requestId);
}

async function recordOutcome(
  callers: CallerActions,
  args: unknown,
  http: McpHttpCall,
): Promise<CallToolResult> {
  const recorded = await callers.recordOutcomes(
    { authorization: http.authorization, origin: http.origin },
    () => ({ ok: true, value: args ?? {} }),
  );
  http.reported('record_outcome', recorded.ok ? 0 : recorded.error.code);
  if (!recorded.ok) return toolError(recorded.error, http.nextRequestId());
  const { recorded: count, replaced } = recorded.value;
  return {
    content: [
      { type: 'text', text: `recorded ${count} outcome${count === 1 ? '' : 's'} (${replaced} replaced)` },
    ],
    structuredContent: recorded.value,
  };
}

/** One line per question (its ID, answer and probability), then what it cost. */
function decisionText(decided: McpDecideOutput): string {
  const lines = Object.entries(decided.answers).map(([id, answer]) => `${id}: ${summarizeAnswer(answer)}`);
  const { input_tokens, output_tokens } = decided.usage;
  lines.push(
    `(${input_tokens + output_tokens} tokens, ${decided.creditsUsed} credits, ${decided.elapsedMs} ms; requestId ${decided.requestId})`,
  );
  return lines.join('\n');
}

/** A gateway failure as an agent reads it: its code, type and message, and each issue's path. */
function toolError(f: GatewayFailure, requestId: string): CallToolResult {
  const lines = [`${f.code} ${f.type}: ${f.message}`];
  // Every issue, not only the first the message names, so one retry can fix them all.
  if (f.issues !== undefined && f.issues.length > 1)
    for (const issue of f.issues) lines.push(`- ${formatIssue(issue)}`);
  if (f.retryAfterMs !== undefined) lines.push(`retry after ${Math.ceil(f.retryAfterMs / 1000)} s`);
  lines.push(`requestId ${requestId}`);
  return { content: [{ type: 'text', text: lines.join('\n') }], isError: true };
}
