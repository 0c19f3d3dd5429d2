import { type EvaluationData, MODELS } from '@decision-gateway/contract';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { keyCheckFailure, verifyApiKey } from '../auth/api-keys.ts';
import type { Evaluate } from '../core/evaluate.ts';
import type { Store } from '../store/store.ts';
import { sendFailure, sendNativeSuccess, sendSuccess } from './envelope.ts';
import { rawEvaluationCall, readRawBodies } from './read-body.ts';

/** How a door writes its successes; failures take the door's shape in `sendFailure`. */
interface DoorShape {
  evaluated(reply: FastifyReply, data: EvaluationData): FastifyReply;
  models(reply: FastifyReply): FastifyReply;
}

/**
 * A door that reads raw bodies: `POST /v1/systemone` and `GET /v1/models` over the one evaluation
 * core. The REST door and the System One-compatible door (`/native`) differ only in their shape.
 */
function rawBodyDoor(shape: DoorShape) {
  return async (app: FastifyInstance, opts: { evaluate: Evaluate; store: Store }) => {
    readRawBodies(app, 'buffer', { mediaTypeAfterAuth: true });

    app.post('/v1/systemone', async (request, reply) => {
      const outcome = await opts.evaluate(rawEvaluationCall(request));
      request.evaluationLog = outcome.log;
      return outcome.ok ? shape.evaluated(reply, outcome.data) : sendFailure(reply, outcome.failure);
    });

    app.get('/v1/models', async (request, reply) => {
      const auth = await verifyApiKey(opts.store, request.headers.authorization, Date.now());
      return auth.ok ? shape.models(reply) : sendFailure(reply, keyCheckFailure(auth));
    });
  };
}

/** REST door (SPEC §§1–4): answers in the envelope. */
export const evaluationRoutes = rawBodyDoor({
  evaluated: sendSuccess,
  models: (reply) => sendSuccess(reply, MODELS),
});

/**
 * The System One-compatible door (SPEC §11), registered under `/native`: the native wire format,
 * so the official SDKs and every community client work unchanged.
 */
export const nativeRoutes = rawBodyDoor({
  evaluated: sendNativeSuccess,
  models: (reply) => {
    reply.request.gatewayCode = 0;
    return reply.type('application/json; charset=utf-8').send(JSON.stringify(MODELS));
  },
});
