import type { Readable } from 'node:stream';
import { type AsWritten, LIMITS } from '@decision-gateway/contract';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Dialect, EvaluationCall, MultipartForm } from '../core/evaluation/index.ts';
import { originOf } from './cors.ts';
import { readMultipart } from './multipart.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * The Content-Type the request sent, hidden from Fastify by doors that judge it after auth
     * (`readRawBodies`). Kept on the request, not in a WeakMap keyed by it, which every garbage
     * collection would have to walk.
     */
    sentContentType: string | undefined;
  }
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
  options: { multipartBytes?: number } = {},
) {
  const { multipartBytes } = options;
  app.decorateRequest('sentContentType', undefined);
  app.addHook('onRequest', (request, _reply, done) => {
    const sent = request.headers['content-type'];
    request.sentContentType = sent;
    // Assigned, not deleted: `delete` would turn the headers object into a slow dictionary. A
    // multipart body keeps a plain media type Fastify parses, so its own reader below is chosen.
    request.headers['content-type'] =
      multipartBytes !== undefined && sent !== undefined && MULTIPART.test(sent)
        ? 'multipart/form-data'
        : undefined;
    done();
  });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs, bodyLimit }, (_request, body, done) => done(null, body));
  if (multipartBytes !== undefined)
    app.addContentTypeParser('multipart/form-data', (request: FastifyRequest, payload: Readable) =>
      readMultipart(payload, request.sentContentType as string, multipartBytes),
    );
}

const MULTIPART = /^\s*multipart\/form-data\s*(;|$)/i;

/**
 * The evaluation call of a door that reads raw bodies (REST, `/native`, OpenAI's): bytes (or a
 * multipart form) and media type. `textLimit`: where the JSON may carry image data, the most it
 * may hold without it (docs/images.md#rules).
 */
export function rawEvaluationCall<W extends AsWritten = AsWritten>(
  request: FastifyRequest,
  textLimit?: number,
  /** A door's own dialect (docs/openai.md, docs/gemini.md); none for the gateway's own request. */
  dialect?: Dialect<W>,
): EvaluationCall<W> {
  const contentType = request.sentContentType;
  const body = request.body as Buffer | MultipartForm | undefined;
  // One literal with every field, the dialect included: a door that spread this call and added
  // its dialect after it gave every call a hidden class of its own on V8 11 (docs/performance.md).
  return {
    requestId: request.id,
    startedAt: request.startedAt,
    authorization: request.headers.authorization,
    route: routeHeader(request),
    cacheControl: cacheControlHeader(request),
    origin: originOf(request),
    body:
      body !== undefined && !Buffer.isBuffer(body)
        ? { kind: 'multipart', form: body, contentType }
        : textLimit === undefined
          ? { kind: 'bytes', bytes: body, contentType }
          : { kind: 'bytes', bytes: body, contentType, textLimit },
    trace: request.traceParent,
    dialect,
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
