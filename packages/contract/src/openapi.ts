import { z } from 'zod';
import {
  AdjustCreditsBody,
  CachePurged,
  CreatedKey,
  CreatedToken,
  CreateKeyBody,
  CreateTokenBody,
  KeyList,
  KeyObject,
  UpstreamHealth,
  UsageReport,
  UsageSeries,
  UsageSummary,
} from './admin.ts';
import { EvaluationData } from './answer.ts';
import { CreateProjectBody, PatchKeyBody, PatchProjectBody, ProjectList, ProjectObject } from './budgets.ts';
import {
  GEMINI_API_VERSIONS,
  GeminiDecisionRequest,
  GeminiDecisionResponse,
  GeminiErrorBody,
  GeminiModelList,
} from './dialects/gemini-decisions.ts';
import {
  OpenAiDecisionRequest,
  OpenAiDecisionResponse,
  OpenAiErrorBody,
  OpenAiModelList,
} from './dialects/openai-decisions.ts';
import { ErrorEnvelope, successEnvelope } from './envelope.ts';
import { ERROR_TABLE, ERROR_TYPES } from './errors.ts';
import { LIMITS, MODEL_ID } from './limits.ts';
import { McpExchangeError, McpMessage } from './mcp.ts';
import { ModelList } from './models.ts';
import { NativeError, NativeResult } from './native.ts';
import { Calibration, CalibrationMapList, RecordedOutcomes, RecordOutcomesBody } from './outcomes.ts';
import { recordShapeOf } from './own-key-record.ts';
import { QUESTION_EXAMPLES } from './question-types/index.ts';
import { EvaluationRequest } from './request.ts';
import { ReviewItem, ReviewList, SubmitReviewBody } from './reviews.ts';

/**
 * The OpenAPI 3.1 document of the REST API, generated from the contract's Zod schemas (Zod 4's
 * JSON Schema output, draft 2020-12, which OpenAPI 3.1 uses as is). Nothing here restates a field.
 */

const COMPONENT = '#/components/schemas/';

// Envelopes named for the document: the success envelope around each kind of data. Like every
// shared schema of the contract, they carry an id in Zod's global registry, which becomes
// their name under components.schemas.
const envelopes = {
  EvaluationEnvelope: successEnvelope(EvaluationData),
  ModelListEnvelope: successEnvelope(ModelList),
  KeyEnvelope: successEnvelope(KeyObject),
  CreatedKeyEnvelope: successEnvelope(CreatedKey),
  ProjectEnvelope: successEnvelope(ProjectObject),
  ProjectListEnvelope: successEnvelope(ProjectList),
  KeyListEnvelope: successEnvelope(KeyList),
  UsageReportEnvelope: successEnvelope(UsageReport),
  CachePurgedEnvelope: successEnvelope(CachePurged),
  CreateTokenBody,
  CreatedTokenEnvelope: successEnvelope(CreatedToken),
  UsageSeriesEnvelope: successEnvelope(UsageSeries),
  UsageSummaryEnvelope: successEnvelope(UsageSummary),
  UpstreamHealthEnvelope: successEnvelope(UpstreamHealth),
  RecordedOutcomesEnvelope: successEnvelope(RecordedOutcomes),
  CalibrationEnvelope: successEnvelope(Calibration),
  CalibrationMapListEnvelope: successEnvelope(CalibrationMapList),
  ReviewListEnvelope: successEnvelope(ReviewList),
  ReviewItemEnvelope: successEnvelope(ReviewItem),
  HealthEnvelope: successEnvelope(z.strictObject({ status: z.string() })),
};
for (const [id, schema] of Object.entries(envelopes)) z.globalRegistry.add(schema, { id });
// Referenced by id below; importing them keeps them registered.
void [
  EvaluationRequest,
  RecordOutcomesBody,
  ErrorEnvelope,
  CreateKeyBody,
  AdjustCreditsBody,
  NativeResult,
  NativeError,
  OpenAiDecisionRequest,
  OpenAiDecisionResponse,
  OpenAiErrorBody,
  OpenAiModelList,
  GeminiDecisionRequest,
  GeminiDecisionResponse,
  GeminiErrorBody,
  GeminiModelList,
  McpMessage,
  McpExchangeError,
  PatchKeyBody,
  CreateProjectBody,
  PatchProjectBody,
  SubmitReviewBody,
];

/** Own-key records are custom schemas for validation; document them as the records they are. */
function override(ctx: { zodSchema: unknown; jsonSchema: Record<string, unknown> }) {
  const shape = recordShapeOf(ctx.zodSchema);
  if (!shape) return;
  const nested = z.toJSONSchema(shape, { unrepresentable: 'any', override }) as Record<string, unknown>;
  delete nested.$schema;
  delete nested.$defs; // every schema with an id is a component already
  Object.assign(ctx.jsonSchema, pointRefsAtComponents(nested));
}

/**
 * One schema as a JSON Schema of its own (draft 2020-12), every named schema it reaches under its
 * root's `$defs`: what a standalone reader needs (the MCP door's tool list). Zod puts an own-key
 * record's named schemas under the record; they are hoisted to the root, where `#/$defs/…` points.
 */
export function standaloneJsonSchema(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const hoisted: Record<string, unknown> = {};
  const hoist = (ctx: { zodSchema: unknown; jsonSchema: Record<string, unknown> }) => {
    const shape = recordShapeOf(ctx.zodSchema);
    if (!shape) return;
    const nested = z.toJSONSchema(shape, { io, unrepresentable: 'any', override: hoist });
    const { $schema: _s, $defs, ...rest } = nested as Record<string, unknown>;
    Object.assign(hoisted, $defs);
    Object.assign(ctx.jsonSchema, rest);
  };
  const own = z.toJSONSchema(schema, { io, unrepresentable: 'any', override: hoist });
  const { $defs, ...named } = own as Record<string, unknown>;
  const defs: Record<string, unknown> = { ...hoisted, ...($defs as Record<string, unknown> | undefined) };
  // A schema with an id of its own comes back as a reference to itself: it is the root instead.
  const self = typeof named.$ref === 'string' ? named.$ref.replace('#/$defs/', '') : undefined;
  const root = self === undefined ? named : (defs[self] as Record<string, unknown>);
  if (self !== undefined) delete defs[self];
  return Object.keys(defs).length === 0 ? root : { ...root, $defs: defs };
}

function pointRefsAtComponents(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(pointRefsAtComponents);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [
      k,
      k === '$ref' && typeof v === 'string' ? v.replace('#/$defs/', COMPONENT) : pointRefsAtComponents(v),
    ]),
  );
}

function componentSchemas(): Record<string, unknown> {
  const { schemas } = z.toJSONSchema(z.globalRegistry, {
    uri: (id) => `${COMPONENT}${id}`,
    unrepresentable: 'any',
    override,
  });
  return Object.fromEntries(
    Object.entries(schemas).map(([id, schema]) => {
      const { $schema: _s, $id: _i, ...rest } = schema as Record<string, unknown>;
      return [id, pointRefsAtComponents(rest)];
    }),
  );
}

const ref = (id: string) => ({ $ref: `${COMPONENT}${id}` });
const json = (id: string, extra: Record<string, unknown> = {}) => ({
  'application/json': { schema: ref(id), ...extra },
});
const requestIdHeader = {
  'x-request-id': {
    description: 'The request id, also in the body and the log line.',
    schema: { type: 'string' },
  },
};
const retryAfterHeader = {
  'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer' } },
};
const nativeHeaders = {
  ...requestIdHeader,
  'x-typesafe-request-id': {
    description: 'The same request id, where the System One SDKs read it.',
    schema: { type: 'string' },
  },
};
const nativeRetryHeaders = {
  ...retryAfterHeader,
  'retry-after-ms': { description: 'Milliseconds to wait before retrying.', schema: { type: 'integer' } },
};

/** One response per HTTP status among `types`, describing each gateway code it can carry. */
function errorResponses(
  types: readonly (keyof typeof ERROR_TABLE)[],
  door: 'envelope' | 'native' | 'openai' | 'gemini' | 'mcp' = 'envelope',
) {
  const native = door === 'native' || door === 'openai';
  const byStatus = new Map<number, string[]>();
  for (const type of types) {
    const { code, status } = ERROR_TABLE[type];
    byStatus.set(status, [...(byStatus.get(status) ?? []), `${code} \`${type}\``]);
  }
  return Object.fromEntries(
    [...byStatus].map(([status, codes]) => [
      String(status),
      {
        description: codes.join(', '),
        headers: {
          ...(native ? nativeHeaders : requestIdHeader),
          ...(status === 429 || status === 503 ? (native ? nativeRetryHeaders : retryAfterHeader) : {}),
        },
        content: json(
          {
            native: 'NativeError',
            openai: 'OpenAiError',
            gemini: 'GeminiError',
            mcp: 'McpExchangeError',
            envelope: 'ErrorEnvelope',
          }[door],
        ),
      },
    ]),
  );
}

/** What an evaluation's response says of its route and cache (all three doors). */
const evaluationHeaders = {
  'x-dg-route': { description: 'The route taken (once known, errors included).', schema: { type: 'string' } },
  'x-dg-upstream': {
    description: 'The upstream that answered; `first+escalated` when some answers came from the escalation.',
    schema: { type: 'string' },
  },
  'x-dg-cache': {
    description: 'On a route with a decision cache: hit, miss or bypass.',
    schema: { type: 'string', enum: ['hit', 'miss', 'bypass'] },
  },
  age: {
    description: 'A cache hit: whole seconds since the decision was stored.',
    schema: { type: 'integer' },
  },
  'x-credits-used': { description: 'Credits debited, in decimal.', schema: { type: 'string' } },
};
/** What a caller may send beside the body to steer routing and the cache. */
const evaluationParameters = [
  {
    name: 'x-dg-route',
    in: 'header',
    required: false,
    description: "A route of the configuration (default: the key's route, else `default`); unknown → 40004.",
    schema: { type: 'string' },
  },
  {
    name: 'Cache-Control',
    in: 'header',
    required: false,
    description: '`no-cache`: skip the cache lookup but store the answer; `no-store`: neither.',
    schema: { type: 'string', enum: ['no-cache', 'no-store'] },
  },
];
/** The Gemini door's version segment, as Google's SDK composes its paths. */
const apiVersionParameter = {
  name: 'apiVersion',
  in: 'path',
  required: true,
  description: 'The API version the SDK was built for; either answers the same.',
  schema: { type: 'string', enum: [...GEMINI_API_VERSIONS] },
};

const ok = (id: string, description = 'Success') => ({
  description,
  headers: requestIdHeader,
  content: json(id),
});

/** One example request per question type, from each type's module. */
const EXAMPLES = Object.fromEntries(
  Object.entries(QUESTION_EXAMPLES).map(([type, example]) => [
    type,
    { summary: type, value: { model: MODEL_ID, ...example } },
  ]),
);

const EVALUATE_ERRORS = ERROR_TYPES.filter((type) => type !== 'not_found' && type !== 'method_not_allowed');
const AUTH_ERRORS = ['missing_api_key', 'invalid_api_key', 'internal_error', 'unavailable'] as const;
const ADMIN_ERRORS = [
  ...AUTH_ERRORS,
  'invalid_json',
  'invalid_request',
  'unsupported_media_type',
  'payload_too_large',
] as const;

const idParam = { name: 'id', in: 'path', required: true, schema: { type: 'string' } };
const admin = [{ adminToken: [] }];

/**
 * Every operation of the API reference, by operationId. Which path and method serve each is the
 * doors' own declaration (apps/gateway/src/doors/serve.ts): the document is built from the routes
 * the gateway really registered, so a route and its reference cannot drift apart.
 */
const OPERATIONS = {
  evaluate: {
    operationId: 'evaluate',
    tags: ['Decisions'],
    summary: 'Evaluate questions over a shared state',
    security: [{ apiKey: [] }],
    parameters: evaluationParameters,
    requestBody: { required: true, content: json('EvaluationRequest', { examples: EXAMPLES }) },
    responses: {
      '200': {
        ...ok('EvaluationEnvelope', 'One answer per question ID'),
        headers: { ...requestIdHeader, ...evaluationHeaders },
      },
      ...errorResponses(EVALUATE_ERRORS),
    },
  },
  createToken: {
    operationId: 'createToken',
    tags: ['Decisions'],
    summary: 'Mint a short-lived token for a browser (API key only)',
    description:
      'The token (`dgt_…`) evaluates and lists models like the key, until `expiresAt`, only from its origins, ' +
      'within `maxCredits`. A token cannot mint tokens (40300). Every field is optional.',
    security: [{ apiKey: [] }],
    requestBody: { required: false, content: json('CreateTokenBody') },
    responses: {
      '201': ok('CreatedTokenEnvelope', 'Created: the token is shown this once'),
      ...errorResponses([
        ...AUTH_ERRORS,
        'forbidden',
        'unsupported_media_type',
        'invalid_json',
        'invalid_request',
        'payload_too_large',
      ]),
    },
  },
  recordOutcomes: {
    operationId: 'recordOutcomes',
    tags: ['Decisions'],
    summary: 'Report what turned out true for a decision of this key',
    description:
      'A choice takes one of its labels (through the OpenAI door: its value, with its type), a score a level ' +
      'index, a noul a boolean. Recording again replaces. No credits, no usage record; a rate-limit token. ' +
      'An unknown request id, another key’s and one past DECISION_RETENTION_DAYS are the same 404.',
    security: [{ apiKey: [] }],
    requestBody: { required: true, content: json('RecordOutcomesBody') },
    responses: {
      '200': ok('RecordedOutcomesEnvelope'),
      ...errorResponses([
        ...AUTH_ERRORS,
        'rate_limited',
        'unsupported_media_type',
        'invalid_json',
        'invalid_request',
        'not_found',
      ]),
    },
  },
  listModels: {
    operationId: 'listModels',
    tags: ['Decisions'],
    summary: 'The models this gateway serves',
    security: [{ apiKey: [] }],
    responses: { '200': ok('ModelListEnvelope'), ...errorResponses(AUTH_ERRORS) },
  },
  evaluateNative: {
    operationId: 'evaluateNative',
    tags: ['System One-compatible'],
    summary: 'Evaluate questions, answered in the System One wire format',
    security: [{ apiKey: [] }],
    parameters: evaluationParameters,
    requestBody: { required: true, content: json('EvaluationRequest', { examples: EXAMPLES }) },
    responses: {
      '200': {
        description: 'One answer per question ID; the credits debited are in x-credits-used',
        headers: {
          ...nativeHeaders,
          ...evaluationHeaders,
          'x-credits-used': { description: 'Credits debited, in decimal.', schema: { type: 'string' } },
        },
        content: json('NativeResult'),
      },
      ...errorResponses(EVALUATE_ERRORS, 'native'),
    },
  },
  listModelsNative: {
    operationId: 'listModelsNative',
    tags: ['System One-compatible'],
    summary: 'The models this gateway serves, in the System One wire format',
    security: [{ apiKey: [] }],
    responses: {
      '200': { description: 'Success', headers: nativeHeaders, content: json('ModelList') },
      ...errorResponses(AUTH_ERRORS, 'native'),
    },
  },
  createDecision: {
    operationId: 'createDecision',
    tags: ['OpenAI-compatible'],
    summary: "Evaluate questions in OpenAI's Decisions shape (1–400 questions, bodies up to 1 MiB)",
    description:
      "For the official `openai` SDKs: point them at {gateway}/openai/v1. Errors carry OpenAI's body with the gateway's code beside it.",
    security: [{ apiKey: [] }],
    parameters: evaluationParameters,
    requestBody: { required: true, content: json('OpenAiDecisionRequest') },
    responses: {
      '200': {
        description: "Answers in the questions' order; the credits debited are in x-credits-used",
        headers: {
          ...requestIdHeader,
          ...evaluationHeaders,
          'x-credits-used': { description: 'Credits debited, in decimal.', schema: { type: 'string' } },
        },
        content: json('OpenAiDecision'),
      },
      ...errorResponses(EVALUATE_ERRORS, 'openai'),
    },
  },
  listModelsOpenAi: {
    operationId: 'listModelsOpenAi',
    tags: ['OpenAI-compatible'],
    summary: "The models this gateway serves, in OpenAI's list shape",
    security: [{ apiKey: [] }],
    responses: {
      '200': { description: 'Success', headers: requestIdHeader, content: json('OpenAiModelList') },
      ...errorResponses(AUTH_ERRORS, 'openai'),
    },
  },
  createDecisionGemini: {
    operationId: 'createDecisionGemini',
    tags: ['Google-compatible'],
    summary: "Evaluate questions in Google's Gemini Decisions shape (1–1000 questions, bodies up to 1 MiB)",
    description:
      "For the official `@google/genai` SDK: point it at {gateway}/gemini and pass a gateway key as its apiKey (sent as x-goog-api-key). Errors carry Google's body with the gateway's code beside it.",
    security: [{ apiKey: [] }, { googApiKey: [] }],
    parameters: [apiVersionParameter, ...evaluationParameters],
    requestBody: { required: true, content: json('GeminiDecisionRequest') },
    responses: {
      '200': {
        description:
          "Answers by question ID, or a blocked input's prompt_feedback; the credits debited are in x-credits-used",
        headers: { ...requestIdHeader, ...evaluationHeaders },
        content: json('GeminiDecision'),
      },
      ...errorResponses(EVALUATE_ERRORS, 'gemini'),
    },
  },
  listModelsGemini: {
    operationId: 'listModelsGemini',
    tags: ['Google-compatible'],
    summary: "The models this gateway serves, in Google's list shape",
    security: [{ apiKey: [] }, { googApiKey: [] }],
    parameters: [apiVersionParameter],
    responses: {
      '200': { description: 'Success', headers: requestIdHeader, content: json('GeminiModelList') },
      ...errorResponses(AUTH_ERRORS, 'gemini'),
    },
  },
  mcpMessage: {
    operationId: 'mcpMessage',
    tags: ['MCP'],
    summary: 'The MCP door: Streamable HTTP, the tools `decide` and `record_outcome`',
    description:
      'JSON-RPC messages of the Model Context Protocol, as its SDKs send them: `initialize` opens a session ' +
      '(its id comes back in `Mcp-Session-Id`, which every later message sends). Tool failures are tool ' +
      'results with `isError: true`; only the exchange itself is refused here.',
    security: [{ apiKey: [] }],
    requestBody: { required: true, content: json('McpMessage') },
    responses: {
      '200': { description: 'A JSON-RPC response', headers: requestIdHeader, content: json('McpMessage') },
      '202': { description: 'A notification or response accepted', headers: requestIdHeader },
      ...errorResponses(
        [
          ...AUTH_ERRORS,
          'unsupported_media_type',
          'invalid_json',
          'invalid_request',
          'not_found',
          'payload_too_large',
        ],
        'mcp',
      ),
    },
  },
  mcpEndSession: {
    operationId: 'mcpEndSession',
    tags: ['MCP'],
    summary: 'Close an MCP session (the one named by `Mcp-Session-Id`)',
    security: [{ apiKey: [] }],
    responses: {
      '200': { description: 'Closed', headers: requestIdHeader },
      ...errorResponses([...AUTH_ERRORS, 'not_found'], 'mcp'),
    },
  },
  createKey: {
    operationId: 'createKey',
    tags: ['Admin'],
    summary: 'Create an API key (the plain key is returned this once)',
    security: admin,
    requestBody: { required: true, content: json('CreateKeyBody') },
    responses: { '201': ok('CreatedKeyEnvelope', 'Created'), ...errorResponses(ADMIN_ERRORS) },
  },
  listKeys: {
    operationId: 'listKeys',
    tags: ['Admin'],
    summary: 'List API keys, newest first, a page at a time (follow nextCursor until null)',
    security: admin,
    parameters: [
      {
        name: 'limit',
        in: 'query',
        required: false,
        schema: { type: 'integer', minimum: 1, maximum: 1000, default: 100 },
      },
      { name: 'cursor', in: 'query', required: false, schema: { type: 'string' } },
    ],
    responses: {
      '200': ok('KeyListEnvelope'),
      ...errorResponses([...AUTH_ERRORS, 'invalid_request']),
    },
  },
  getKey: {
    operationId: 'getKey',
    tags: ['Admin'],
    summary: 'One API key',
    security: admin,
    parameters: [idParam],
    responses: { '200': ok('KeyEnvelope'), ...errorResponses([...AUTH_ERRORS, 'not_found']) },
  },
  patchKey: {
    operationId: 'patchKey',
    tags: ['Admin'],
    summary: "Set a key's project (null: none) and its budgets (the whole list)",
    security: admin,
    parameters: [idParam],
    requestBody: { required: true, content: json('PatchKeyBody') },
    responses: { '200': ok('KeyEnvelope'), ...errorResponses([...ADMIN_ERRORS, 'not_found']) },
  },
  createProject: {
    operationId: 'createProject',
    tags: ['Admin'],
    summary: 'Create a project: keys that share budgets',
    security: admin,
    requestBody: { required: true, content: json('CreateProjectBody') },
    responses: { '201': ok('ProjectEnvelope', 'Created'), ...errorResponses(ADMIN_ERRORS) },
  },
  listProjects: {
    operationId: 'listProjects',
    tags: ['Admin'],
    summary: 'Every project, newest first, with its budgets',
    security: admin,
    responses: { '200': ok('ProjectListEnvelope'), ...errorResponses(AUTH_ERRORS) },
  },
  getProject: {
    operationId: 'getProject',
    tags: ['Admin'],
    summary: 'One project, with its budgets',
    security: admin,
    parameters: [idParam],
    responses: { '200': ok('ProjectEnvelope'), ...errorResponses([...AUTH_ERRORS, 'not_found']) },
  },
  patchProject: {
    operationId: 'patchProject',
    tags: ['Admin'],
    summary: 'Rename a project or replace its budgets (the whole list)',
    security: admin,
    parameters: [idParam],
    requestBody: { required: true, content: json('PatchProjectBody') },
    responses: { '200': ok('ProjectEnvelope'), ...errorResponses([...ADMIN_ERRORS, 'not_found']) },
  },
  deleteProject: {
    operationId: 'deleteProject',
    tags: ['Admin'],
    summary: 'Delete a project that has no keys (else 40001)',
    security: admin,
    parameters: [idParam],
    responses: { '200': ok('ProjectEnvelope'), ...errorResponses([...ADMIN_ERRORS, 'not_found']) },
  },
  adjustCredits: {
    operationId: 'adjustCredits',
    tags: ['Admin'],
    summary: 'Add or (negative) remove credits',
    security: admin,
    parameters: [idParam],
    requestBody: { required: true, content: json('AdjustCreditsBody') },
    responses: { '200': ok('KeyEnvelope'), ...errorResponses([...ADMIN_ERRORS, 'not_found']) },
  },
  mintTokenForKey: {
    operationId: 'mintTokenForKey',
    tags: ['Admin'],
    summary: 'Mint a short-lived browser token for a key (the body of POST /v1/tokens)',
    security: admin,
    parameters: [idParam],
    requestBody: { required: false, content: json('CreateTokenBody') },
    responses: {
      '201': ok('CreatedTokenEnvelope', 'Created: the token is shown this once'),
      ...errorResponses([...ADMIN_ERRORS, 'not_found']),
    },
  },
  revokeKey: {
    operationId: 'revokeKey',
    tags: ['Admin'],
    summary: 'Revoke a key (refused on its next request)',
    security: admin,
    parameters: [idParam],
    responses: { '200': ok('KeyEnvelope'), ...errorResponses([...AUTH_ERRORS, 'not_found']) },
  },
  keyUsage: {
    operationId: 'keyUsage',
    tags: ['Admin'],
    summary: 'Usage totals and recent records of a key',
    security: admin,
    parameters: [
      idParam,
      {
        name: 'limit',
        in: 'query',
        required: false,
        schema: { type: 'integer', minimum: 1, maximum: 1000, default: 20 },
      },
    ],
    responses: {
      '200': ok('UsageReportEnvelope'),
      ...errorResponses([...AUTH_ERRORS, 'invalid_request', 'not_found']),
    },
  },
  usageSeries: {
    operationId: 'usageSeries',
    tags: ['Admin'],
    summary: 'Usage summed per minute, hour or day (the console’s charts); every step present, oldest first',
    security: admin,
    parameters: [
      { name: 'keyId', in: 'query', required: false, schema: { type: 'string' } },
      { name: 'from', in: 'query', required: true, schema: { type: 'string', format: 'date-time' } },
      { name: 'to', in: 'query', required: false, schema: { type: 'string', format: 'date-time' } },
      {
        name: 'step',
        in: 'query',
        required: true,
        schema: { type: 'string', enum: ['minute', 'hour', 'day'] },
      },
    ],
    responses: {
      '200': ok('UsageSeriesEnvelope'),
      ...errorResponses([...AUTH_ERRORS, 'invalid_request', 'not_found']),
    },
  },
  usageSummary: {
    operationId: 'usageSummary',
    tags: ['Admin'],
    summary: 'Usage over a range: totals, by route, by upstream and the 20 keys that spent most',
    security: admin,
    parameters: [
      { name: 'keyId', in: 'query', required: false, schema: { type: 'string' } },
      { name: 'from', in: 'query', required: true, schema: { type: 'string', format: 'date-time' } },
      { name: 'to', in: 'query', required: false, schema: { type: 'string', format: 'date-time' } },
    ],
    responses: {
      '200': ok('UsageSummaryEnvelope'),
      ...errorResponses([...AUTH_ERRORS, 'invalid_request', 'not_found']),
    },
  },
  calibration: {
    operationId: 'calibration',
    tags: ['Admin'],
    summary:
      'How well each upstream’s probabilities matched the outcomes callers reported, and escalation advice',
    security: admin,
    parameters: [
      { name: 'from', in: 'query', required: false, schema: { type: 'string', format: 'date-time' } },
      { name: 'to', in: 'query', required: false, schema: { type: 'string', format: 'date-time' } },
      { name: 'route', in: 'query', required: false, schema: { type: 'string' } },
      { name: 'upstream', in: 'query', required: false, schema: { type: 'string' } },
      {
        name: 'type',
        in: 'query',
        required: false,
        schema: { type: 'string', enum: ['choice', 'score', 'noul'] },
      },
      { name: 'keyId', in: 'query', required: false, schema: { type: 'string' } },
      {
        name: 'target',
        in: 'query',
        required: false,
        schema: { type: 'number', exclusiveMinimum: 0, maximum: 1, default: 0.9 },
      },
      {
        name: 'calibrated',
        in: 'query',
        required: false,
        description: 'true: the answers as routes that calibrate gave them; default the raw ones.',
        schema: { type: 'string', enum: ['true', 'false'] },
      },
    ],
    responses: {
      '200': ok('CalibrationEnvelope'),
      ...errorResponses([...AUTH_ERRORS, 'invalid_request', 'not_found']),
    },
  },
  listReviews: {
    operationId: 'listReviews',
    tags: ['Admin'],
    summary: 'Review items routes marked, oldest first, a page at a time',
    security: admin,
    parameters: [
      { name: 'status', in: 'query', required: false, schema: { type: 'string', enum: ['open', 'done'] } },
      { name: 'route', in: 'query', required: false, schema: { type: 'string' } },
      {
        name: 'limit',
        in: 'query',
        required: false,
        schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
      },
      { name: 'cursor', in: 'query', required: false, schema: { type: 'string' } },
    ],
    responses: { '200': ok('ReviewListEnvelope'), ...errorResponses([...ADMIN_ERRORS]) },
  },
  getReview: {
    operationId: 'getReview',
    tags: ['Admin'],
    summary: 'One review item: the state, its images, the questions and the answers',
    security: admin,
    parameters: [idParam],
    responses: { '200': ok('ReviewItemEnvelope'), ...errorResponses([...AUTH_ERRORS, 'not_found']) },
  },
  submitReview: {
    operationId: 'submitReview',
    tags: ['Admin'],
    summary: "Give the truths of a review item's questions: recorded as outcomes, and the item done",
    security: admin,
    parameters: [idParam],
    requestBody: { required: true, content: json('SubmitReviewBody') },
    responses: { '200': ok('ReviewItemEnvelope'), ...errorResponses([...ADMIN_ERRORS, 'not_found']) },
  },
  calibrationMaps: {
    operationId: 'calibrationMaps',
    tags: ['Admin'],
    summary: 'Every calibration map fitted, newest first, with its held-out scores before and after',
    security: admin,
    responses: { '200': ok('CalibrationMapListEnvelope'), ...errorResponses(AUTH_ERRORS) },
  },
  refitCalibration: {
    operationId: 'refitCalibration',
    tags: ['Admin'],
    summary: 'Fit the calibration maps now; answers the fits it made once they are made',
    security: admin,
    responses: {
      '200': ok('CalibrationMapListEnvelope'),
      ...errorResponses([...AUTH_ERRORS, 'unavailable']),
    },
  },
  upstreamHealth: {
    operationId: 'upstreamHealth',
    tags: ['Admin'],
    summary: "Each upstream's circuit state, calls and failures since start, and the routes",
    security: admin,
    responses: { '200': ok('UpstreamHealthEnvelope'), ...errorResponses(AUTH_ERRORS) },
  },
  purgeCache: {
    operationId: 'purgeCache',
    tags: ['Admin'],
    summary: 'Drop cached decisions: all, or the ones one key stored',
    security: admin,
    parameters: [{ name: 'keyId', in: 'query', required: false, schema: { type: 'string', minLength: 1 } }],
    responses: {
      '200': ok('CachePurgedEnvelope'),
      ...errorResponses([...AUTH_ERRORS, 'invalid_request']),
    },
  },
  health: {
    operationId: 'health',
    tags: ['Operations'],
    summary: 'Liveness',
    responses: { '200': ok('HealthEnvelope') },
  },
  ready: {
    operationId: 'ready',
    tags: ['Operations'],
    summary: 'Readiness: the store is reachable and the gateway is not draining',
    responses: { '200': ok('HealthEnvelope'), ...errorResponses(['unavailable']) },
  },
} satisfies Record<string, { operationId: string } & Record<string, unknown>>;

export type OperationId = keyof typeof OPERATIONS;
export const OPERATION_IDS = Object.keys(OPERATIONS) as OperationId[];

/** A documented route as the gateway registered it: Fastify's path (`/admin/keys/:id`), its method, its operation. */
export interface DocumentedRoute {
  method: string;
  path: string;
  operation: OperationId;
}

/** The OpenAPI paths of the routes served: Fastify's `:id` is OpenAPI's `{id}`. */
function pathsOf(routes: readonly DocumentedRoute[]): Record<string, Record<string, unknown>> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const { method, path, operation } of routes) {
    const openApiPath = path.replace(/:(\w+)/g, '{$1}');
    paths[openApiPath] = { ...paths[openApiPath], [method.toLowerCase()]: OPERATIONS[operation] };
  }
  return paths;
}

/** The API reference of the routes the gateway serves (docs/http-api.md), from the same Zod schemas. */
export function buildOpenApiDocument(options: { routes: readonly DocumentedRoute[]; serverUrl?: string }) {
  const { routes } = options;
  return {
    openapi: '3.1.0',
    info: {
      title: 'Decision Gateway',
      version: '1.0.0',
      description:
        'Typed AI decisions: a shared state plus 1–8 questions (choice, score, noul) answered by an upstream. ' +
        `Bodies are at most ${LIMITS.maxBodyBytes} bytes and ${LIMITS.maxDepth} levels deep. ` +
        'The same API is served over tRPC at /trpc (see @decision-gateway/client).',
    },
    ...(options.serverUrl && { servers: [{ url: options.serverUrl }] }),
    tags: [
      { name: 'Decisions', description: 'Evaluate typed questions (API key).' },
      {
        name: 'System One-compatible',
        description:
          'The same evaluation in the native System One wire format, for the official SDKs: point them at {gateway}/native.',
      },
      {
        name: 'OpenAI-compatible',
        description:
          "OpenAI's Decisions API, for the official openai SDKs: point them at {gateway}/openai/v1.",
      },
      {
        name: 'Google-compatible',
        description:
          "Google's Gemini Decisions API, for the official @google/genai SDK: point it at {gateway}/gemini.",
      },
      { name: 'Admin', description: 'Keys and credits; only when ADMIN_TOKEN is set.' },
      { name: 'Operations', description: 'Health and readiness. Also served: /metrics (Prometheus).' },
    ],
    components: {
      schemas: componentSchemas(),
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'An API key: `Authorization: Bearer dg_…`' },
        adminToken: { type: 'http', scheme: 'bearer', description: 'The ADMIN_TOKEN (admin API only).' },
        googApiKey: {
          type: 'apiKey',
          in: 'header',
          name: 'x-goog-api-key',
          description: "A gateway API key or token, as Google's SDK sends its key (Gemini door only).",
        },
      },
    },
    paths: pathsOf(routes),
  };
}
