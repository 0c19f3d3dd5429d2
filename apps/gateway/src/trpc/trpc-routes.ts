import { resolveResponse } from '@trpc/server/http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { keyCheckFailure, verifyApiKey } from '../auth/api-keys.ts';
import type { Evaluate } from '../core/evaluate.ts';
import { retryAfterSeconds } from '../http/envelope.ts';
import { rawEvaluationCall, readRawBodies } from '../http/read-body.ts';
import type { Store } from '../store/store.ts';
import { failureOfTrpcError, trpcErrorBody } from './errors.ts';
import { appRouter, type TrpcContext } from './router.ts';

/**
 * tRPC door at `/trpc/<procedure>`, served by tRPC's fetch-style resolver on the body Fastify has
 * already read (as bytes, under the same 32 KiB limit), so errors keep tRPC's shape.
 */
export async function trpcRoutes(app: FastifyInstance, opts: { evaluate: Evaluate; store: Store }) {
  // The media type is judged by the evaluation core, after authentication (SPEC §4), as on REST.
  readRawBodies(app, 'buffer', { mediaTypeAfterAuth: true });

  app.route<{ Params: { path: string } }>({
    method: ['GET', 'POST'],
    url: '/trpc/:path',
    handler: async (request, reply) => {
      const bytes = Buffer.isBuffer(request.body) ? request.body : undefined;
      const body = bytes?.toString('utf8');
      const createContext = async (): Promise<TrpcContext> => ({
        requestId: request.id,
        evaluate: async (input) => {
          const outcome = await opts.evaluate({
            requestId: request.id,
            startedAt: request.startedAt,
            authorization: request.headers.authorization,
            body: { kind: 'json', value: input, bytes: body === undefined ? 0 : Buffer.byteLength(body) },
          });
          request.evaluationLog = outcome.log;
          request.gatewayCode = outcome.ok ? 0 : outcome.failure.code;
          return outcome;
        },
        authenticate: async () => {
          const check = await verifyApiKey(opts.store, request.headers.authorization, Date.now());
          return check.ok ? undefined : keyCheckFailure(check);
        },
      });

      if (
        request.method === 'POST' &&
        request.params.path === 'evaluate' &&
        !('batch' in (request.query as object))
      ) {
        return evaluateFast(request, reply, opts.evaluate);
      }

      const url = `http://${request.headers.host ?? 'localhost'}${request.url}`;
      const headers = new Headers();
      for (const [name, value] of Object.entries(request.headers)) {
        if (typeof value === 'string') headers.set(name, value);
      }
      if (request.sentContentType !== undefined) headers.set('content-type', request.sentContentType);
      const response = await resolveResponse({
        router: appRouter,
        createContext,
        req: new Request(url, {
          method: request.method,
          headers,
          body: request.method === 'GET' ? undefined : body,
        }),
        path: request.params.path,
        error: null,
        // One HTTP request is one evaluation: its request id names its reservation and usage record.
        allowBatching: false,
        responseMeta({ errors }) {
          // 429 and 503 carry Retry-After on this door too (SPEC §4).
          for (const error of errors) {
            const retryAfterMs = failureOfTrpcError(error).retryAfterMs;
            if (retryAfterMs !== undefined)
              return { headers: { 'retry-after': retryAfterSeconds(retryAfterMs) } };
          }
          return {};
        },
      });

      reply.code(response.status);
      response.headers.forEach((value, name) => {
        reply.header(name, value);
      });
      let text = await response.text();
      if (response.status >= 400) {
        text = withRequestId(text, request.id);
        request.gatewayCode ??= errorCodeOf(text);
      }
      return reply.send(text);
    },
  });
}

/**
 * `POST /trpc/evaluate`, the hot path, without tRPC's fetch-style resolver: the raw body goes to
 * the evaluation core exactly as on REST (so SPEC §4's order holds: authentication before media
 * type and JSON), and the outcome is written in tRPC's HTTP RPC format (`{result: {data}}` or
 * `{error: {message, code, data}}`, status from the error), which `httpLink` reads. Every other
 * call (GET, batches, unknown procedures) takes the full resolver.
 */
async function evaluateFast(request: FastifyRequest, reply: FastifyReply, evaluate: Evaluate) {
  reply.type('application/json');
  const outcome = await evaluate(rawEvaluationCall(request));
  request.evaluationLog = outcome.log;
  if (outcome.ok) {
    request.gatewayCode = 0;
    return reply.code(200).send(JSON.stringify({ result: { data: outcome.data } }));
  }
  const { failure: gatewayFailure } = outcome;
  if (gatewayFailure.retryAfterMs !== undefined)
    reply.header('retry-after', retryAfterSeconds(gatewayFailure.retryAfterMs));
  request.gatewayCode = gatewayFailure.code;
  return reply.code(gatewayFailure.status).send(trpcErrorBody(gatewayFailure, request.id, 'evaluate'));
}

/** tRPC has no context when it fails before creating one (bad JSON): add the request id then. */
function withRequestId(text: string, requestId: string): string {
  try {
    const body = JSON.parse(text) as { error?: { data?: { requestId?: string } } };
    if (body.error?.data && body.error.data.requestId === undefined) {
      body.error.data.requestId = requestId;
      return JSON.stringify(body);
    }
  } catch {
    // Not JSON: leave it as tRPC wrote it.
  }
  return text;
}

function errorCodeOf(text: string): number | undefined {
  try {
    return (JSON.parse(text) as { error?: { data?: { code?: number } } }).error?.data?.code;
  } catch {
    return undefined;
  }
}
