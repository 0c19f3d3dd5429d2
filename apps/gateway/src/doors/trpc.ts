import {
  type ApiContext,
  appRouter,
  failureOfTrpcError,
  MAX_BATCH_OPERATIONS,
  type Operation,
  type OperationResult,
  trpcErrorBody,
} from '@decision-gateway/api';
import {
  decodeBodyText,
  type EvaluationData,
  failure,
  type GatewayFailure,
  IMAGE_LIMITS,
  LIMITS,
  type Parsed,
} from '@decision-gateway/contract';
import { fastifyRequestHandler } from '@trpc/server/adapters/fastify';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Evaluate } from '../core/evaluation/index.ts';
import { storeTroubleFailure } from '../core/store-trouble.ts';
import { traceOperation } from '../telemetry/request-spans.ts';
import type { TraceParent } from '../telemetry/spans.ts';
import { answerEvaluation } from './answer.ts';
import type { CallerActions, Result } from './caller-actions.ts';
import { cors, originOf } from './cors.ts';
import { type DoorOptions, door } from './door.ts';
import { type EvaluationReport, outcomeOf, recordCode, reportOf } from './door-outcome.ts';
import { retryAfterSeconds } from './envelope.ts';
import { cacheControlHeader, rawEvaluationCall, readRawBodies, routeHeader } from './read-body.ts';
import { metaHeaders } from './response-meta.ts';

export interface TrpcDoorOptions extends DoorOptions {
  evaluate: Evaluate;
  callers: CallerActions;
  corsOrigins: readonly string[];
}

/**
 * The tRPC door at `/trpc` (docs/http-api.md#the-other-doors), served by tRPC's own Fastify adapter with batching on, so
 * `httpLink`, `httpBatchLink` and `httpBatchStreamLink` all work. The router (packages/api) only
 * translates; this door implements its context over the evaluation core. In a batch every
 * operation is its own evaluation: its own request id, reservation, rate-limit token and usage.
 */
export async function trpcDoor(app: FastifyInstance, opts: TrpcDoorOptions) {
  door(app, 'trpc', { ...opts, ownsNotFound: true });
  // Bytes up to 32 MiB with images, 32 KiB of each operation's JSON without them (docs/images.md#rules);
  // the media type is judged by the core after authentication.
  readRawBodies(app, 'buffer', IMAGE_LIMITS.maxBodyBytes);
  const browsers = cors(app, opts.corsOrigins);
  // One `POST /trpc/evaluate` with no query, answered as REST is (isPlainEvaluate says why).
  const evaluateFast = answerEvaluation(opts.evaluate, {
    door: 'trpc',
    call: (request) => rawEvaluationCall(request, LIMITS.maxBodyBytes),
    success: ({ data }) => JSON.stringify({ result: { data } }),
    exact: {
      mediaType: 'application/json',
      headers: { vary: 'trpc-accept, accept' },
      failure: (f, requestId) => trpcErrorBody(f, requestId, 'evaluate'),
      label: '/trpc/evaluate',
    },
  });

  app.all<{ Params: { path: string } }>('/:path', async (request, reply) => {
    if (browsers && request.method === 'OPTIONS') return browsers.preflight(request, reply);
    const bytes = Buffer.isBuffer(request.body) ? request.body : undefined;
    if (isPlainEvaluate(request)) return evaluateFast(request, reply);
    // tRPC reads a string body; an empty body, a byte-order mark or invalid UTF-8 is 40000
    // (docs/http-api.md#errors), told to each operation when it reads its input.
    const text: Parsed<string> | undefined = request.method === 'POST' ? decodeBodyText(bytes) : undefined;
    request.body = text?.ok ? text.value : undefined;
    // tRPC's JSON handling reads the (lazily parsed) body; the core has the real media type.
    request.headers['content-type'] = 'application/json';
    const batch = (request.query as { batch?: string }).batch === '1';
    const reports: EvaluationReport[] = [];
    request.outcome = outcomeOf(reports, undefined, procedureLabel(request.params.path, batch));

    const readInput = async (op: Operation): Promise<Parsed<unknown>> => {
      if (text && !text.ok) return text;
      try {
        return { ok: true, value: await op.readInput() };
      } catch (error) {
        return { ok: false, error: inputFailure(error) };
      }
    };

    const credentials = { authorization: request.headers.authorization, origin: originOf(request) };
    /** An operation that reads the store: storage trouble is its 503, not a 500 (docs/operating.md). */
    const storeGuarded = async <T>(
      requestId: string,
      run: () => Promise<OperationResult<T>>,
    ): Promise<OperationResult<T>> => {
      try {
        return await run();
      } catch (error) {
        const unavailable = storeTroubleFailure(error);
        if (!unavailable) throw error;
        request.log.warn({ err: error, requestId }, 'the store is unavailable');
        return { ok: false, failure: unavailable, requestId };
      }
    };
    /**
     * One operation: its request id (`<id>_<index>` in a batch), and in a batch its own span, the
     * parent of its evaluation's spans (else the request's).
     */
    const operation = <T>(
      procedure: string,
      op: { batchIndex: number },
      run: (requestId: string, trace: TraceParent | undefined) => Promise<OperationResult<T>>,
    ): Promise<OperationResult<T>> => {
      if (!batch) return run(request.id, request.traceParent);
      const requestId = `${request.id}_${op.batchIndex}`;
      return traceOperation(
        request.traceParent,
        procedure,
        requestId,
        (inside) => run(requestId, inside),
        (result) => ({
          code: result.ok ? 0 : result.failure.code,
          report: reports.find((report) => report.requestId === requestId),
        }),
      );
    };
    /** A caller action (models, tokens, outcomes) as one operation: storage trouble is its 503. */
    const action = <T>(procedure: string, op: { batchIndex: number }, act: () => Promise<Result<T>>) =>
      operation(procedure, op, (requestId) =>
        storeGuarded(requestId, async (): Promise<OperationResult<T>> => {
          const result = await act();
          return result.ok
            ? { ok: true, data: result.value }
            : { ok: false, failure: result.error, requestId };
        }),
      );
    const createContext = async (): Promise<ApiContext> => ({
      requestId: request.id,
      evaluate: (op) =>
        operation('evaluate', op, async (requestId, trace): Promise<OperationResult<EvaluationData>> => {
          const outcome = await opts.evaluate({
            requestId,
            trace,
            startedAt: request.startedAt,
            authorization: request.headers.authorization,
            route: routeHeader(request),
            cacheControl: cacheControlHeader(request),
            origin: originOf(request),
            body: {
              kind: 'lazy',
              contentType: request.sentContentType,
              bytes: bytes?.length ?? 0,
              textLimit: LIMITS.maxBodyBytes,
              read: () => readInput(op),
            },
          });
          reports.push(reportOf(requestId, outcome));
          return outcome.ok
            ? { ok: true, data: outcome.data }
            : { ok: false, failure: outcome.failure, requestId };
        }),
      listModels: (op) => action('models', op, () => opts.callers.listModels(credentials)),
      createToken: (op) =>
        action('tokens.create', op, () => opts.callers.mintToken(credentials, () => readInput(op))),
      recordOutcomes: (op) =>
        action('outcomes.record', op, () => opts.callers.recordOutcomes(credentials, () => readInput(op))),
    });

    await fastifyRequestHandler({
      req: request,
      res: reply,
      path: request.params.path,
      router: appRouter,
      createContext,
      allowBatching: true,
      maxBatchSize: MAX_BATCH_OPERATIONS,
      responseMeta({ errors }) {
        const headers: Record<string, string> = {};
        // 429 and 503 carry Retry-After on this door too (docs/http-api.md#errors).
        for (const error of errors) {
          const retryAfterMs = failureOfTrpcError(error).retryAfterMs;
          if (retryAfterMs !== undefined) headers['retry-after'] = retryAfterSeconds(retryAfterMs);
        }
        // One evaluation's metadata as headers; a batch's operations each have their own.
        const single = reports.length === 1 ? reports[0] : undefined;
        if (!batch && single) Object.assign(headers, metaHeaders(single.meta));
        // The code of a single call, for its log line (the response is written right after this).
        if (!batch) {
          const first = errors[0];
          recordCode(request, reports[0]?.code ?? (first ? failureOfTrpcError(first).code : 0));
        }
        return { headers };
      },
      onError({ error }) {
        const gatewayFailure = failureOfTrpcError(error);
        if (reports.length === 0) recordCode(request, gatewayFailure.code);
        if (gatewayFailure.type === 'internal_error') request.log.error({ err: error }, 'unhandled error');
      },
    });

    return reply;
  });
}

/** Why an operation's input could not be read: not JSON (40000), or not a batch's shape (40001). */
function inputFailure(error: unknown): GatewayFailure {
  // tRPC reports JSON.parse's SyntaxError as it is, or as a PARSE_ERROR caused by it.
  const cause = error instanceof Error && error.cause instanceof SyntaxError ? error.cause : error;
  if (cause instanceof SyntaxError)
    return failure('invalid_json', `the body is not valid JSON: ${cause.message}`);
  return failure('invalid_request', (error as Error).message || 'the input cannot be read');
}

/**
 * One `POST /trpc/evaluate` with no query (what httpLink sends): answered without tRPC's
 * fetch-style resolver, which costs more than half the throughput at c=64 (see docs/performance.md's
 * bench). The raw body goes to the core as on REST; the answer is written in tRPC's format, byte
 * for byte what the adapter writes (trpc-fast-path.test.ts compares the two for a success and
 * every error code). Batches, streams, queries and everything else take the adapter.
 */
function isPlainEvaluate(request: FastifyRequest<{ Params: { path: string } }>): boolean {
  if (request.method !== 'POST' || request.params.path !== 'evaluate') return false;
  if (request.url.indexOf('?') !== -1) return false;
  const accept = request.headers['trpc-accept'] ?? request.headers.accept;
  return typeof accept !== 'string' || !accept.includes('application/jsonl');
}

/** The router's own procedure paths (`outcomes.record`, `tokens.create`, …): a new one is labelled by itself. */
const PROCEDURES = new Set(Object.keys(appRouter._def.procedures));

/** One metrics label per procedure; a batch is one label, an unknown path another. */
function procedureLabel(path: string, batch: boolean): string {
  if (batch) return '/trpc/(batch)';
  return PROCEDURES.has(path) ? `/trpc/${path}` : '/trpc/:path';
}
