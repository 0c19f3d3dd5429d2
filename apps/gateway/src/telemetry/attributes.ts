/**
 * Every span attribute the gateway writes (docs/tracing.md), by name: OpenTelemetry's HTTP,
 * server and error conventions, its GenAI conventions (on upstream calls only), and the gateway's
 * own `dg.*`. Nothing here ever holds a key, a token, the state or a question's text.
 */
export const ATTR = {
  httpMethod: 'http.request.method',
  httpRoute: 'http.route',
  httpStatus: 'http.response.status_code',
  urlPath: 'url.path',
  serverAddress: 'server.address',
  serverPort: 'server.port',
  errorType: 'error.type',

  genAiOperation: 'gen_ai.operation.name',
  genAiProvider: 'gen_ai.provider.name',
  genAiRequestModel: 'gen_ai.request.model',
  genAiResponseModel: 'gen_ai.response.model',
  genAiResponseId: 'gen_ai.response.id',
  genAiInputTokens: 'gen_ai.usage.input_tokens',
  genAiOutputTokens: 'gen_ai.usage.output_tokens',

  door: 'dg.door',
  requestId: 'dg.request_id',
  code: 'dg.code',
  keyPrefix: 'dg.key_prefix',
  route: 'dg.route',
  cache: 'dg.cache',
  creditsUsed: 'dg.credits_used',
  questions: 'dg.questions',
  /** How many images an evaluation carried, and their decoded bytes: never an image or its URL. */
  images: 'dg.images',
  imageBytes: 'dg.image_bytes',
  upstream: 'dg.upstream',
  attempt: 'dg.attempt',
  retry: 'dg.retry',
  escalation: 'dg.escalation',
} as const;

/** The operation every upstream call performs, in `gen_ai.operation.name` and the span's name. */
export const GEN_AI_OPERATION = 'decide';
