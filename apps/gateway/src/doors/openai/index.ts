import { IMAGE_LIMITS, MODELS, OPENAI_LIMITS, type OpenAiAsWritten } from '@decision-gateway/contract';
import type { FastifyInstance } from 'fastify';
import type { Dialect, Evaluate } from '../../core/evaluation/index.ts';
import { answerEvaluation, sendJson } from '../answer.ts';
import type { CallerActions } from '../caller-actions.ts';
import { cors, originOf } from '../cors.ts';
import { type DoorOptions, door, sendFailure } from '../door.ts';
import { rawEvaluationCall, readRawBodies } from '../read-body.ts';
import { serve } from '../serve.ts';
import { openAiAnswers, openAiUsage, parseOpenAiDecisionRequest } from './translate.ts';

export interface OpenAiDoorOptions extends DoorOptions {
  evaluate: Evaluate;
  callers: CallerActions;
  corsOrigins: readonly string[];
}

/** OpenAI's Decisions shape: its own questions, up to 400, and refusals a caller can read. */
const OPENAI_DIALECT: Dialect<OpenAiAsWritten> = {
  parse: parseOpenAiDecisionRequest,
  showsRefusals: true,
};

/** `GET /openai/v1/models` in OpenAI's list shape, written once. */
const OPENAI_MODELS_BODY = JSON.stringify({
  object: 'list',
  data: MODELS.models.map((model) => ({
    id: model.name,
    object: 'model',
    created: Math.floor(Date.parse(model.release_date) / 1000),
    owned_by: 'decision-gateway',
  })),
});

/**
 * The OpenAI door, registered under `/openai/v1` (docs/openai.md): every client of OpenAI's
 * Decisions API (the official `openai` SDKs, LangChain, promptfoo) uses the gateway by changing
 * its base URL. It only translates: the evaluation is the one every door runs.
 */
export async function openAiDoor(app: FastifyInstance, opts: OpenAiDoorOptions) {
  door(app, 'openai', { ...opts, ownsNotFound: true });
  // 1 MiB of JSON besides the data of its images, 32 MiB in all (docs/images.md#rules).
  readRawBodies(app, 'buffer', IMAGE_LIMITS.maxBodyBytes);
  const browsers = cors(app, opts.corsOrigins);

  serve(
    app,
    browsers,
    { method: 'POST', path: '/decisions', operation: 'createDecision', browsers: true },
    answerEvaluation(opts.evaluate, {
      door: 'openai',
      call: (request) => rawEvaluationCall(request, OPENAI_LIMITS.maxBodyBytes, OPENAI_DIALECT),
      success: ({ data: { result }, asWritten, refused, usageDetails }) => {
        if (asWritten === undefined) throw new Error('an OpenAI-door decision without its request');
        return JSON.stringify({
          model: result.model,
          answers: openAiAnswers(asWritten, result.answers, refused),
          usage: openAiUsage(result.usage, usageDetails),
        });
      },
    }),
  );

  const models = { method: 'GET', path: '/models', operation: 'listModelsOpenAi', browsers: true } as const;
  serve(app, browsers, models, async (request, reply) => {
    const models = await opts.callers.listModels({
      authorization: request.headers.authorization,
      origin: originOf(request),
    });
    return models.ok ? sendJson(reply, OPENAI_MODELS_BODY) : sendFailure(reply, models.error, 'openai');
  });
}
