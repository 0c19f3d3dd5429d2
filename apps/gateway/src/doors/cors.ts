import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { bearerToken } from '../auth/api-keys.ts';
import { TOKEN_PREFIX } from '../auth/tokens.ts';

/**
 * CORS for the evaluation doors (docs/browsers.md), for the origins of CORS_ORIGINS only: a preflight on
 * the door's paths, and on responses to token requests from such an origin (errors included) the
 * headers a browser needs to read them. Responses to API-key requests never carry CORS headers,
 * even from a listed origin: that is the rule @fastify/cors cannot express (it decides by origin,
 * not by credential), so these few lines live here.
 */
export interface Cors {
  /** Answers an OPTIONS preflight: 204, with CORS headers for a listed origin only. */
  preflight(request: FastifyRequest, reply: FastifyReply): FastifyReply;
}

// tRPC's own request headers, those the official OpenAI SDK sends (x-stainless-*, openai-*) and Google's (x-goog-*).
const ALLOW_HEADERS = [
  'authorization, content-type, cache-control, x-dg-route, trpc-accept, x-trpc-source',
  'x-stainless-arch, x-stainless-lang, x-stainless-os, x-stainless-package-version',
  'x-stainless-retry-count, x-stainless-runtime, x-stainless-runtime-version, x-stainless-timeout',
  'openai-organization, openai-project',
  'x-goog-api-key, x-goog-api-client',
].join(', ');
const EXPOSE_HEADERS =
  'x-request-id, x-credits-used, x-dg-route, x-dg-upstream, x-dg-cache, x-dg-calibration, x-dg-review, retry-after';

export function originOf(request: FastifyRequest): string | undefined {
  const origin = request.headers.origin;
  return typeof origin === 'string' ? origin : undefined;
}

/** Adds CORS to a door's scope; `undefined` when CORS_ORIGINS is unset (no CORS at all). */
export function cors(app: FastifyInstance, origins: readonly string[]): Cors | undefined {
  if (origins.length === 0) return undefined;
  const listed = (request: FastifyRequest) => {
    const origin = originOf(request);
    return origin !== undefined && origins.includes(origin) ? origin : undefined;
  };

  app.addHook('onSend', (request, reply, payload, done) => {
    const origin = listed(request);
    if (
      origin !== undefined &&
      request.method !== 'OPTIONS' &&
      bearerToken(request.headers.authorization)?.startsWith(TOKEN_PREFIX)
    ) {
      reply.headers({
        'access-control-allow-origin': origin,
        'access-control-expose-headers': EXPOSE_HEADERS,
      });
    }
    if (origin !== undefined) reply.header('vary', 'Origin');
    done(null, payload);
  });

  return {
    preflight(request, reply) {
      const origin = listed(request);
      request.outcome = { code: 0 };
      reply.header('vary', 'Origin');
      if (origin !== undefined) {
        reply.headers({
          'access-control-allow-origin': origin,
          'access-control-allow-methods': 'GET, POST',
          'access-control-allow-headers': ALLOW_HEADERS,
          'access-control-max-age': '600',
        });
      }
      return reply.code(204).send();
    },
  };
}
