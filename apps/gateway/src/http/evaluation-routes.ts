import { MODELS } from '@decision-gateway/contract';
import type { FastifyInstance } from 'fastify';
import { keyCheckFailure, verifyApiKey } from '../auth/api-keys.ts';
import type { Evaluate } from '../core/evaluate.ts';
import type { Store } from '../store/store.ts';
import { sendFailure, sendSuccess } from './envelope.ts';
import { rawEvaluationCall, readRawBodies } from './read-body.ts';

/** REST door: `POST /v1/systemone` and `GET /v1/models`. */
export async function evaluationRoutes(app: FastifyInstance, opts: { evaluate: Evaluate; store: Store }) {
  readRawBodies(app, 'buffer', { mediaTypeAfterAuth: true });

  app.post('/v1/systemone', async (request, reply) => {
    const outcome = await opts.evaluate(rawEvaluationCall(request));
    request.evaluationLog = outcome.log;
    return outcome.ok ? sendSuccess(reply, outcome.data) : sendFailure(reply, outcome.failure);
  });

  app.get('/v1/models', async (request, reply) => {
    const auth = await verifyApiKey(opts.store, request.headers.authorization, Date.now());
    return auth.ok ? sendSuccess(reply, MODELS) : sendFailure(reply, keyCheckFailure(auth));
  });
}
