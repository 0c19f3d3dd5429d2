import { LIMITS } from '@decision-gateway/contract';
import { resolveResponse } from '@trpc/server/http';
import type { FastifyInstance } from 'fastify';
import { keyCheckFailure, verifyApiKey } from '../auth/api-keys.ts';
import type { Evaluator } from '../core/evaluate.ts';
import { retryAfterSeconds } from '../http/envelope.ts';
import type { Store } from '../store/store.ts';
import { failureOfTrpcError } from './errors.ts';
import { appRouter, type TrpcContext } from './router.ts';

/**
 * tRPC door at `/trpc/<procedure>`, served by tRPC's fetch-style resolver on the body Fastify has
 * already read (as text, under the same 32 KiB limit), so errors keep tRPC's shape.
 */
export async function trpcRoutes(app: FastifyInstance, opts: { evaluate: Evaluator; store: Store }) {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    '*',
    { parseAs: 'string', bodyLimit: LIMITS.maxBodyBytes },
    (_request, body, done) => done(null, body),
  );

  app.route<{ Params: { path: string } }>({
    method: ['GET', 'POST'],
    url: '/trpc/:path',
    handler: async (request, reply) => {
      const body = typeof request.body === 'string' ? request.body : undefined;
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

      const url = `http://${request.headers.host ?? 'localhost'}${request.url}`;
      const headers = new Headers();
      for (const [name, value] of Object.entries(request.headers)) {
        if (typeof value === 'string') headers.set(name, value);
      }
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
