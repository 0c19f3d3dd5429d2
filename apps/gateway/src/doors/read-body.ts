import { LIMITS } from '@decision-gateway/contract';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { EvaluationCall } from '../core/evaluation/index.ts';
import { originOf } from './cors.ts';

/** The Content-Type each request sent, hidden from Fastify by doors that judge it after auth. */
const sentContentTypes = new WeakMap<FastifyRequest, string | undefined>();

export function sentContentType(request: FastifyRequest): string | undefined {
  return sentContentTypes.get(request);
}

/**
 * In this plugin scope, every body (whatever its media type, or none) reaches the handler unparsed,
 * as bytes or text, read only up to the door's limit (32768 bytes by default; 413 past it, also
 * when chunked). The
 * evaluation core then checks the media type and the JSON in the order of docs/http-api.md#errors, after auth: Fastify
 * would refuse a Content-Type that does not parse (415) before any route runs, so the door keeps
 * the header for the core and hides it from Fastify.
 */
export function readRawBodies(
  app: FastifyInstance,
  parseAs: 'buffer' | 'string',
  bodyLimit: number = LIMITS.maxBodyBytes,
) {
  app.addHook('onRequest', (request, _reply, done) => {
    sentContentTypes.set(request, request.headers['content-type']);
    // Assigned, not deleted: `delete` would turn the headers object into a slow dictionary.
    request.headers['content-type'] = undefined;
    done();
  });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs, bodyLimit }, (_request, body, done) => done(null, body));
}

/** The evaluation call of a door that reads raw bodies (REST and `/native`): bytes and media type. */
export function rawEvaluationCall(request: FastifyRequest): EvaluationCall {
  return {
    requestId: request.id,
    startedAt: request.startedAt,
    authorization: request.headers.authorization,
    route: routeHeader(request),
    cacheControl: cacheControlHeader(request),
    origin: originOf(request),
    body: { kind: 'bytes', bytes: request.body as Buffer | undefined, contentType: sentContentType(request) },
    trace: request.traceParent,
  };
}

/** The `x-dg-route` header (docs/routes.md), when sent once. */
export function routeHeader(request: FastifyRequest): string | undefined {
  const value = request.headers['x-dg-route'];
  return typeof value === 'string' ? value : undefined;
}

/** The `Cache-Control` header (docs/routes.md#decision-cache), when sent. */
export function cacheControlHeader(request: FastifyRequest): string | undefined {
  const value = request.headers['cache-control'];
  return typeof value === 'string' ? value : undefined;
}
