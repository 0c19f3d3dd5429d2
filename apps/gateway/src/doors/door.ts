import type { Socket } from 'node:net';
import { trpcErrorBody } from '@decision-gateway/api';
import { failure, type GatewayFailure, LIMITS, nativeError } from '@decision-gateway/contract';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { storeTroubleFailure } from '../core/store-trouble.ts';
import { closeLingering } from '../http/lingering-close.ts';
import { StoreUnavailableError } from '../store/store.ts';
import { type DoorOutcome, recordCode } from './door-outcome.ts';
import { errorBody, retryAfterSeconds } from './envelope.ts';
import { geminiError } from './gemini/translate.ts';
import { jsonRpcFailure } from './mcp/json-rpc.ts';
import { openAiError } from './openai/translate.ts';

/** The doors (docs/http-api.md#the-other-doors): each a plugin that owns its wire format. */
export type DoorName =
  | 'rest'
  | 'native'
  | 'trpc'
  | 'openai'
  | 'gemini'
  | 'mcp'
  | 'admin'
  | 'operations'
  | 'console';

/** How a door writes a failure: its body and the headers that belong to its format. */
export interface DoorShape {
  failure(f: GatewayFailure, requestId: string): { body: string; headers: Record<string, string> };
}

const retryAfter = (f: GatewayFailure): Record<string, string> =>
  f.retryAfterMs === undefined ? {} : { 'retry-after': retryAfterSeconds(f.retryAfterMs) };

const envelope: DoorShape = {
  failure: (f, requestId) => ({ body: errorBody(f, requestId), headers: retryAfter(f) }),
};

/**
 * The table of doors. A request's door is stamped on its route (`config.door`); an answer given
 * below a door's own handlers (a 408 on the socket, the drain's 503) reads it from there.
 */
export const DOORS: Record<DoorName, DoorShape> = {
  rest: envelope,
  admin: envelope,
  operations: envelope,
  console: envelope,
  // docs/http-api.md#the-other-doors: `{"detail": …}`, `retry-after-ms` beside `retry-after`, the SDKs' request id header.
  native: {
    failure: (f, requestId) => ({
      body: JSON.stringify(nativeError(f)),
      headers: {
        ...retryAfter(f),
        ...(f.retryAfterMs !== undefined && { 'retry-after-ms': String(f.retryAfterMs) }),
        'x-typesafe-request-id': requestId,
      },
    }),
  },
  trpc: {
    failure: (f, requestId) => ({ body: trpcErrorBody(f, requestId), headers: retryAfter(f) }),
  },
  // OpenAI's `{"error": {…}}` with the gateway's code beside it, so the SDKs raise their own classes.
  openai: {
    failure: (f) => ({
      body: JSON.stringify(openAiError(f)),
      headers: {
        ...retryAfter(f),
        ...(f.retryAfterMs !== undefined && { 'retry-after-ms': String(f.retryAfterMs) }),
      },
    }),
  },
  // Google's `{"error": {code, message, status}}` with the gateway's code beside it: the SDK raises its own errors.
  gemini: { failure: (f) => ({ body: JSON.stringify(geminiError(f)), headers: retryAfter(f) }) },
  // The exchange itself refused (credentials, session, JSON): a JSON-RPC error, `WWW-Authenticate` on a 401.
  mcp: { failure: jsonRpcFailure },
};

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Which door a route belongs to (set by `door()`, read by `doorOf`). */
    door?: DoorName;
    /** Liveness stays 200 while the gateway drains; every other route answers 503. */
    servedWhileDraining?: boolean;
  }
}

/** The door of a routed request; the REST envelope for a request that matched no route. */
export function doorOf(request: FastifyRequest): DoorName {
  return request.routeOptions.config?.door ?? 'rest';
}

/** Writes a failure in a door's format and records the outcome for the request's log line. */
export function sendFailure(reply: FastifyReply, f: GatewayFailure, door: DoorName): FastifyReply {
  const { body, headers } = DOORS[door].failure(f, reply.request.id);
  recordCode(reply.request, f.code);
  return reply.code(f.status).headers(headers).type('application/json; charset=utf-8').send(body);
}

export interface DoorOptions {
  /** Which methods a path accepts, for 405 and its `Allow` header (docs/http-api.md#errors). */
  methodsFor(url: string): string[];
}

/** Fastify's own errors (body limits, JSON of admin bodies) as gateway failures. */
function failureOfFastifyError(error: FastifyError, request: FastifyRequest): GatewayFailure | undefined {
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return failure(
        'payload_too_large',
        `the body is larger than ${(error as { limit?: number }).limit ?? request.routeOptions.bodyLimit ?? LIMITS.maxBodyBytes} bytes`,
      );
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return failure('unsupported_media_type', 'send Content-Type: application/json');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return failure('invalid_json', 'the body does not match its Content-Length');
    case 'GATEWAY_INVALID_JSON':
      return failure('invalid_json', error.message);
    default:
      return undefined;
  }
}

/**
 * Makes a plugin scope a door: its routes are stamped with its name, and its error handler (and,
 * for a door with its own path prefix, its not-found handler) answer in its format.
 */
export function door(app: FastifyInstance, name: DoorName, options: DoorOptions & { ownsNotFound: boolean }) {
  app.addHook('onRoute', (route) => {
    route.config = { ...route.config, door: name };
  });

  app.setErrorHandler(async (error: FastifyError, request, reply) => {
    const known = failureOfFastifyError(error, request) ?? storeTroubleFailure(error);
    // A body cut short because the client left (or a timeout answered it) is not the gateway's fault.
    const gone = request.outcome?.belowRouter === true || error.code === 'ECONNRESET';
    if (error instanceof StoreUnavailableError) request.log.warn({ err: error }, 'the store is unavailable');
    else if (!known && !gone) request.log.error({ err: error }, 'unhandled error');
    // Answered before the body was all read (a body past its limit): the client may still be sending.
    if (!request.raw.complete && !gone) closeLingering(request.raw.socket as Socket);
    return sendFailure(reply, known ?? failure('internal_error', 'internal error'), name);
  });

  if (options.ownsNotFound) {
    app.setNotFoundHandler(async (request, reply) =>
      sendFailure(reply, notFound(request, reply, options), name),
    );
  }
}

/** 404 for an unknown path, 405 with `Allow` for a known path and a wrong method (docs/http-api.md#errors). */
export function notFound(request: FastifyRequest, reply: FastifyReply, options: DoorOptions): GatewayFailure {
  const allowed = options.methodsFor(request.url);
  const path = request.url.split('?', 1)[0];
  if (allowed.length === 0) return failure('not_found', `no route for ${request.method} ${path}`);
  reply.header('allow', allowed.join(', '));
  return failure('method_not_allowed', `${request.method} is not allowed here; use ${allowed.join(', ')}`);
}

export type { DoorOutcome };
