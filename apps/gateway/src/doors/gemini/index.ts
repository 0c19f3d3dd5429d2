import {
  failure,
  GEMINI_API_VERSIONS,
  GEMINI_LIMITS,
  type GeminiAsWritten,
  IMAGE_LIMITS,
  MODELS,
} from '@decision-gateway/contract';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Dialect, Evaluate } from '../../core/evaluation/index.ts';
import { answerEvaluation, sendJson } from '../answer.ts';
import type { CallerActions } from '../caller-actions.ts';
import { cors, originOf } from '../cors.ts';
import { type DoorOptions, door, sendFailure } from '../door.ts';
import { rawEvaluationCall, readRawBodies } from '../read-body.ts';
import { serve } from '../serve.ts';
import { geminiAnswers, geminiUsage, parseGeminiDecisionRequest } from './translate.ts';

export interface GeminiDoorOptions extends DoorOptions {
  evaluate: Evaluate;
  callers: CallerActions;
  corsOrigins: readonly string[];
}

/**
 * Google's Decisions shape: questions keyed by ID, up to 1000. A declined question fails the
 * request as on REST; an input an upstream blocked is answered with Google's `prompt_feedback`.
 */
const GEMINI_DIALECT: Dialect<GeminiAsWritten> = {
  parse: parseGeminiDecisionRequest,
  showsRefusals: false,
  showsBlocks: true,
};

/** `GET /gemini/{v1beta,v1}/models` in Google's list shape, written once. */
const GEMINI_MODELS_BODY = JSON.stringify({
  models: MODELS.models.map((model) => ({
    name: `models/${model.name}`,
    baseModelId: model.name,
    version: model.release_date,
    displayName: model.name,
    description: model.description,
    supportedGenerationMethods: ['createDecision'],
  })),
});

const isApiVersion = (version: string) => (GEMINI_API_VERSIONS as readonly string[]).includes(version);

/** An unknown version under `/gemini` is an unknown path, in Google's body. */
function unknownVersion(request: FastifyRequest, reply: FastifyReply): FastifyReply | undefined {
  const { apiVersion } = request.params as { apiVersion: string };
  if (isApiVersion(apiVersion)) return undefined;
  return sendFailure(
    reply,
    failure('not_found', `no such path: ${request.url.split('?', 1)[0]}; the API versions are v1beta and v1`),
    'gemini',
  );
}

/**
 * The Gemini door, registered under `/gemini` (docs/gemini.md): every client of Google's Decisions
 * API (the official `@google/genai` SDK) uses the gateway by changing its base URL and key. It only
 * translates: the evaluation is the one every door runs.
 */
export async function geminiDoor(app: FastifyInstance, opts: GeminiDoorOptions) {
  door(app, 'gemini', { ...opts, ownsNotFound: true });
  // Google's SDK sends its key in x-goog-api-key: from here on it is the caller's credential.
  app.addHook('onRequest', async (request) => {
    const key = request.headers['x-goog-api-key'];
    if (typeof key === 'string' && key !== '') request.headers.authorization = `Bearer ${key}`;
  });
  // 1 MiB of JSON besides the data of its images, 32 MiB in all (docs/images.md#rules).
  readRawBodies(app, 'buffer', IMAGE_LIMITS.maxBodyBytes);
  const browsers = cors(app, opts.corsOrigins);

  const evaluation = answerEvaluation(opts.evaluate, {
    door: 'gemini',
    call: (request) => rawEvaluationCall(request, GEMINI_LIMITS.maxBodyBytes, GEMINI_DIALECT),
    success: ({ data: { result }, asWritten, blocked, usageDetails }) => {
      if (asWritten === undefined) throw new Error('a Gemini-door decision without its request');
      const usage = geminiUsage(result.usage, usageDetails);
      return JSON.stringify(
        blocked === undefined
          ? { answers: geminiAnswers(asWritten, result.answers), usage }
          : { prompt_feedback: blocked, usage },
      );
    },
  });
  serve(
    app,
    browsers,
    { method: 'POST', path: '/:apiVersion/decisions', operation: 'createDecisionGemini', browsers: true },
    async (request, reply) => unknownVersion(request, reply) ?? evaluation(request, reply),
  );

  const models = {
    method: 'GET',
    path: '/:apiVersion/models',
    operation: 'listModelsGemini',
    browsers: true,
  } as const;
  serve(app, browsers, models, async (request, reply) => {
    const unknown = unknownVersion(request, reply);
    if (unknown) return unknown;
    const listed = await opts.callers.listModels({
      authorization: request.headers.authorization,
      origin: originOf(request),
    });
    return listed.ok ? sendJson(reply, GEMINI_MODELS_BODY) : sendFailure(reply, listed.error, 'gemini');
  });
}
