import { z } from 'zod';
import { EvaluationResult, Usage } from './answer.ts';
import { RecordedOutcomes, RecordOutcomesBody } from './outcomes.ts';
import { EvaluationRequest } from './request.ts';

/**
 * The MCP door's tools (docs/mcp.md): what an agent sends and gets back, made from the request's
 * and the answer's own schemas. The model is the gateway's, so `decide` takes everything of a
 * request but `model`, and may name a route as the `x-dg-route` header would.
 */

export const McpDecideInput = EvaluationRequest.omit({ model: true }).extend({
  route: z
    .string({ error: 'must be the name of a route' })
    .min(1, { error: 'must be the name of a route' })
    .optional()
    .meta({
      description: "A route of the gateway's configuration (default: the key's own, else `default`).",
    }),
});
export type McpDecideInput = z.infer<typeof McpDecideInput>;

export const McpDecideOutput = z.strictObject({
  answers: EvaluationResult.shape.answers,
  usage: Usage,
  elapsedMs: EvaluationResult.shape.elapsedMs,
  creditsUsed: z.number().min(0).meta({ description: 'Credits debited for this decision.' }),
  requestId: z.string().meta({ description: 'The decision’s id: give it to `record_outcome`.' }),
});
export type McpDecideOutput = z.infer<typeof McpDecideOutput>;

export const McpRecordOutcomeInput = RecordOutcomesBody;
export const McpRecordOutcomeOutput = RecordedOutcomes;

/** Each tool: its name, what an agent reads about it, and its shapes. */
export const MCP_TOOLS = {
  decide: {
    description:
      'Ask typed questions about a shared state and get calibrated probabilities back. Question types: ' +
      'choice (pick one label of `criteria`), score (a level of the `criteria` list), noul (is a statement true).',
    input: McpDecideInput,
    output: McpDecideOutput,
  },
  record_outcome: {
    description:
      'Report what turned out true for the questions of an earlier decision (its `requestId`), so the ' +
      'gateway can measure how right it was: a choice label, a score level index, or a boolean.',
    input: McpRecordOutcomeInput,
    output: McpRecordOutcomeOutput,
  },
} as const;
export type McpToolName = keyof typeof MCP_TOOLS;

/** A JSON-RPC message of the protocol, as `/mcp` takes it (the SDK judges the rest). */
export const McpMessage = z
  .looseObject({
    jsonrpc: z.literal('2.0'),
    id: z.union([z.string(), z.number()]).optional(),
    method: z.string().optional(),
    params: z.record(z.string(), z.unknown()).optional(),
  })
  .meta({ id: 'McpMessage', description: 'A JSON-RPC 2.0 message of the Model Context Protocol.' });

/** How `/mcp` refuses an exchange (credentials, session, JSON): a JSON-RPC error with the gateway's code. */
export const McpExchangeError = z
  .strictObject({
    jsonrpc: z.literal('2.0'),
    error: z.strictObject({
      code: z
        .number()
        .int()
        .meta({ description: 'JSON-RPC: -32700 not JSON, -32600 a bad request, else -32000.' }),
      message: z.string().meta({ description: '`<gateway code> <type>: <message>`' }),
      data: z.strictObject({
        code: z.number().int(),
        type: z.string(),
        requestId: z.string(),
        retryAfterMs: z.number().int().optional(),
      }),
    }),
    id: z.null(),
  })
  .meta({ id: 'McpExchangeError' });
