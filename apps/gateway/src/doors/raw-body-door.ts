import {
  decodeJsonBody,
  type EvaluationData,
  failure,
  IMAGE_LIMITS,
  LIMITS,
  nativeResult,
  type OperationId,
  type Parsed,
} from '@decision-gateway/contract';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Evaluate } from '../core/evaluation/index.ts';
import { isJsonMediaType } from '../core/media-type.ts';
import { answerEvaluation, sendJson } from './answer.ts';
import type { CallerActions } from './caller-actions.ts';
import { cors, originOf } from './cors.ts';
import { type DoorName, type DoorOptions, door, sendFailure } from './door.ts';
import { successBody } from './envelope.ts';
import { rawEvaluationCall, readRawBodies } from './read-body.ts';
import { serve } from './serve.ts';

export interface EvaluationDoorOptions extends DoorOptions {
  evaluate: Evaluate;
  /** Listing models and minting tokens, as every door does them. */
  callers: CallerActions;
  /** CORS_ORIGINS (docs/browsers.md). */
  corsOrigins: readonly string[];
}

/** How a door writes its successes' bodies; failures take its shape from the table of doors. */
type SuccessBody = (data: unknown, requestId: string) => string;

/**
 * A door that reads raw bodies: `POST /v1/systemone` and `GET /v1/models` over the one evaluation
 * core. The REST door and the System One-compatible door (`/native`) differ only in their shape.
 */
interface RawBodyDoorShape {
  name: DoorName;
  /** A door under its own path prefix answers its own 404s. */
  ownsNotFound: boolean;
  /** Its routes' entries in the API reference. */
  operations: { evaluate: OperationId; models: OperationId };
  evaluated(data: EvaluationData): unknown;
  body: SuccessBody;
  /** Headers every response of the door carries. */
  headers?(requestId: string): Record<string, string>;
  /**
   * How images come (docs/images.md): REST's JSON keeps 32 KiB and larger images come as
   * `multipart/form-data`; `/native` takes them in its JSON, up to 32 MiB with them.
   */
  images: 'multipart' | 'json';
  /**
   * Serves `POST /v1/tokens` (docs/browsers.md) and `POST /v1/outcomes`
   * (docs/outcomes.md): the REST door does.
   */
  callerActions?: boolean;
}

function rawBodyDoor({
  name,
  ownsNotFound,
  operations,
  evaluated,
  body,
  headers,
  callerActions,
  images,
}: RawBodyDoorShape) {
  return async (app: FastifyInstance, opts: EvaluationDoorOptions) => {
    door(app, name, { ...opts, ownsNotFound });
    if (images === 'multipart')
      readRawBodies(app, 'buffer', LIMITS.maxBodyBytes, { multipartBytes: IMAGE_LIMITS.maxBodyBytes });
    else readRawBodies(app, 'buffer', IMAGE_LIMITS.maxBodyBytes);
    const browsers = cors(app, opts.corsOrigins);
    if (headers) {
      app.addHook('onRequest', (request, reply, done) => {
        reply.headers(headers(request.id));
        done();
      });
    }

    const succeed = (reply: FastifyReply, data: unknown) => sendJson(reply, body(data, reply.request.id));

    serve(
      app,
      browsers,
      { method: 'POST', path: '/v1/systemone', operation: operations.evaluate, browsers: true },
      answerEvaluation(opts.evaluate, {
        door: name,
        call:
          images === 'json'
            ? (request) => rawEvaluationCall(request, LIMITS.maxBodyBytes)
            : rawEvaluationCall,
        success: (outcome, requestId) => body(evaluated(outcome.data), requestId),
      }),
    );

    const credentialsOf = (request: FastifyRequest) => ({
      authorization: request.headers.authorization,
      origin: originOf(request),
    });

    const models = {
      method: 'GET',
      path: '/v1/models',
      operation: operations.models,
      browsers: true,
    } as const;
    serve(app, browsers, models, async (request, reply) => {
      const listed = await opts.callers.listModels(credentialsOf(request));
      return listed.ok ? succeed(reply, listed.value) : sendFailure(reply, listed.error, name);
    });

    if (callerActions) {
      const tokens = {
        method: 'POST',
        path: '/v1/tokens',
        operation: 'createToken',
        browsers: true,
      } as const;
      serve(app, browsers, tokens, async (request, reply) => {
        const minted = await opts.callers.mintToken(credentialsOf(request), () => callerBody(request));
        return minted.ok ? succeed(reply.code(201), minted.value) : sendFailure(reply, minted.error, name);
      });
      const outcomes = {
        method: 'POST',
        path: '/v1/outcomes',
        operation: 'recordOutcomes',
        browsers: true,
      } as const;
      serve(app, browsers, outcomes, async (request, reply) => {
        const recorded = await opts.callers.recordOutcomes(credentialsOf(request), () => callerBody(request));
        return recorded.ok ? succeed(reply, recorded.value) : sendFailure(reply, recorded.error, name);
      });
    }
  };
}

/** REST door (docs/http-api.md): answers in the envelope. */
export const restDoor = rawBodyDoor({
  name: 'rest',
  ownsNotFound: false,
  operations: { evaluate: 'evaluate', models: 'listModels' },
  callerActions: true,
  images: 'multipart',
  evaluated: (data) => data,
  body: successBody,
});

/**
 * The System One-compatible door (docs/http-api.md#the-other-doors), registered under `/native`: the native wire format,
 * so the official SDKs and every community client work unchanged.
 */
export const nativeDoor = rawBodyDoor({
  name: 'native',
  ownsNotFound: true,
  operations: { evaluate: 'evaluateNative', models: 'listModelsNative' },
  images: 'json',
  evaluated: nativeResult,
  body: (data) => JSON.stringify(data),
  // The official SDKs read their request id from this header (docs/http-api.md#the-other-doors).
  headers: (requestId) => ({ 'x-typesafe-request-id': requestId }),
});

/**
 * A caller action's body (a mint, outcomes), read after authentication in the order of
 * docs/http-api.md#errors: media type (41500), JSON (40000); the caller actions judge its fields
 * (40001). No body at all is `{}`.
 */
function callerBody(request: FastifyRequest): Parsed<unknown> {
  const bytes = request.body as Buffer | undefined;
  if (bytes === undefined || bytes.length === 0) return { ok: true, value: {} };
  if (!isJsonMediaType(request.sentContentType))
    return { ok: false, error: failure('unsupported_media_type', 'send Content-Type: application/json') };
  return decodeJsonBody(bytes);
}
