import { MODELS } from '@decision-gateway/contract';
import type { FastifyInstance } from 'fastify';
import { keyCheckFailure, verifyApiKey } from '../auth/api-keys.ts';
import type { Evaluate } from '../core/evaluate.ts';
import type { Store } from '../store/store.ts';
import { sendFailure, sendNativeSuccess } from './envelope.ts';
import { rawEvaluationCall, readRawBodies } from './read-body.ts';

/**
 * The System One-compatible door (SPEC §11), registered under `/native`: the same evaluation as
 * `POST /v1/systemone`, answered in the native wire format so the official SDKs work unchanged.
 * Failures take the native shape in `sendFailure`, which knows the door by its path.
 */
export async function nativeRoutes(app: FastifyInstance, opts: { evaluate: Evaluate; store: Store }) {
  readRawBodies(app, 'buffer', { mediaTypeAfterAuth: true });

  app.post('/v1/systemone', async (request, reply) => {
    const outcome = await opts.evaluate(rawEvaluationCall(request));
    request.evaluationLog = outcome.log;
    return outcome.ok ? sendNativeSuccess(reply, outcome.data) : sendFailure(reply, outcome.failure);
  });

  app.get('/v1/models', async (request, reply) => {
    const auth = await verifyApiKey(opts.store, request.headers.authorization, Date.now());
    if (!auth.ok) return sendFailure(reply, keyCheckFailure(auth));
    reply.request.gatewayCode = 0;
    return reply.type('application/json; charset=utf-8').send(JSON.stringify(MODELS));
  });
}
