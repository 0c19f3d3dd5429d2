import { type EvaluationData, MODELS, nativeResult } from '@decision-gateway/contract';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Authenticate } from '../auth/authenticate.ts';
import type { Evaluate, ResponseMeta } from '../core/evaluate.ts';
import { type DoorName, type DoorOptions, door, sendFailure } from './doors.ts';
import { successBody } from './envelope.ts';
import { rawEvaluationCall, readRawBodies } from './read-body.ts';
import { metaHeaders } from './response-meta.ts';

export interface EvaluationDoorOptions extends DoorOptions {
  evaluate: Evaluate;
  authenticate: Authenticate;
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
  evaluated(data: EvaluationData): unknown;
  body: SuccessBody;
  /** Headers every response of the door carries. */
  headers?(requestId: string): Record<string, string>;
}

function rawBodyDoor({ name, ownsNotFound, evaluated, body, headers }: RawBodyDoorShape) {
  return async (app: FastifyInstance, opts: EvaluationDoorOptions) => {
    door(app, name, { ...opts, ownsNotFound });
    readRawBodies(app, 'buffer');
    if (headers) {
      app.addHook('onRequest', (request, reply, done) => {
        reply.headers(headers(request.id));
        done();
      });
    }

    const succeed = (reply: FastifyReply, data: unknown, meta?: ResponseMeta) => {
      reply.request.outcome ??= { code: 0 };
      if (meta) reply.headers(metaHeaders(meta));
      return reply.type('application/json; charset=utf-8').send(body(data, reply.request.id));
    };

    app.post('/v1/systemone', async (request, reply) => {
      const outcome = await opts.evaluate(rawEvaluationCall(request));
      request.outcome = {
        code: outcome.ok ? 0 : outcome.failure.code,
        evaluations: [
          { requestId: request.id, code: outcome.ok ? 0 : outcome.failure.code, log: outcome.log },
        ],
      };
      if (!outcome.ok) return sendFailure(reply.headers(metaHeaders(outcome.meta)), outcome.failure, name);
      return succeed(reply, evaluated(outcome.data), outcome.meta);
    });

    app.get('/v1/models', async (request, reply) => {
      const auth = await opts.authenticate(request.headers.authorization);
      return auth.ok ? succeed(reply, MODELS) : sendFailure(reply, auth.failure, name);
    });
  };
}

/** REST door (SPEC §§1–4): answers in the envelope. */
export const restDoor = rawBodyDoor({
  name: 'rest',
  ownsNotFound: false,
  evaluated: (data) => data,
  body: successBody,
});

/**
 * The System One-compatible door (SPEC §11), registered under `/native`: the native wire format,
 * so the official SDKs and every community client work unchanged.
 */
export const nativeDoor = rawBodyDoor({
  name: 'native',
  ownsNotFound: true,
  evaluated: nativeResult,
  body: (data) => JSON.stringify(data),
  // The official SDKs read their request id from this header (SPEC §11).
  headers: (requestId) => ({ 'x-typesafe-request-id': requestId }),
});
