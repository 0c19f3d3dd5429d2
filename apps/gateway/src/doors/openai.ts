import {
  MODELS,
  OPENAI_LIMITS,
  openAiAnswers,
  openAiUsage,
  parseOpenAiDecisionRequest,
} from '@decision-gateway/contract';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Dialect, Evaluate, ResponseMeta } from '../core/evaluation/index.ts';
import type { CallerActions } from './caller-actions.ts';
import { cors, originOf } from './cors.ts';
import { type DoorOptions, door, sendFailure } from './door.ts';
import { reportOf } from './door-outcome.ts';
import { rawEvaluationCall, readRawBodies } from './read-body.ts';
import { metaHeaders } from './response-meta.ts';

export interface OpenAiDoorOptions extends DoorOptions {
  evaluate: Evaluate;
  callers: CallerActions;
  corsOrigins: readonly string[];
}

/** OpenAI's Decisions shape: its own questions, up to 400, and refusals a caller can read. */
const OPENAI_DIALECT: Dialect = {
  parse: parseOpenAiDecisionRequest,
  showsRefusals: true,
};

/** `GET /openai/v1/models` in OpenAI's list shape. */
const OPENAI_MODELS = {
  object: 'list',
  data: MODELS.models.map((model) => ({
    id: model.name,
    object: 'model',
    created: Math.floor(Date.parse(model.release_date) / 1000),
    owned_by: 'decision-gateway',
  })),
};

/**
 * The OpenAI door, registered under `/openai/v1` (docs/openai.md): every client of OpenAI's
 * Decisions API (the official `openai` SDKs, LangChain, promptfoo) uses the gateway by changing
 * its base URL. It only translates: the evaluation is the one every door runs.
 */
export async function openAiDoor(app: FastifyInstance, opts: OpenAiDoorOptions) {
  door(app, 'openai', { ...opts, ownsNotFound: true });
  readRawBodies(app, 'buffer', OPENAI_LIMITS.maxBodyBytes);
  const browsers = cors(app, opts.corsOrigins);
  if (browsers) {
    for (const path of ['/decisions', '/models'])
      app.options(path, async (request, reply) => browsers.preflight(request, reply));
  }

  const succeed = (reply: FastifyReply, body: unknown, meta?: ResponseMeta) => {
    reply.request.outcome ??= { code: 0 };
    if (meta) reply.headers(metaHeaders(meta));
    return reply.type('application/json; charset=utf-8').send(JSON.stringify(body));
  };

  app.post('/decisions', async (request, reply) => {
    const outcome = await opts.evaluate({ ...rawEvaluationCall(request), dialect: OPENAI_DIALECT });
    const report = reportOf(request.id, outcome);
    request.outcome = { code: report.code, evaluations: [report] };
    if (!outcome.ok) return sendFailure(reply.headers(metaHeaders(outcome.meta)), outcome.failure, 'openai');
    const { result } = outcome.data;
    const original = outcome.original;
    if (original === undefined) throw new Error('an OpenAI-door decision without its request');
    return succeed(
      reply,
      {
        model: result.model,
        answers: openAiAnswers(original, result.answers, outcome.refused),
        usage: openAiUsage(result.usage, outcome.usageDetails),
      },
      outcome.meta,
    );
  });

  app.get('/models', async (request: FastifyRequest, reply) => {
    const models = await opts.callers.listModels({
      authorization: request.headers.authorization,
      origin: originOf(request),
    });
    return models.ok ? succeed(reply, OPENAI_MODELS) : sendFailure(reply, models.error, 'openai');
  });
}
