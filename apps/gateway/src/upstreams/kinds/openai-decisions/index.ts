import { z } from 'zod';
import { headers, httpUrl, maxQuestions, maxRetries, remoteFromEnv, timeoutMs } from '../fields.ts';
import { defineKind } from '../kind.ts';
import { createDecisionsUpstream } from './decisions-upstream.ts';

/** OpenAI's Decisions API takes up to 400 questions a call. */
export const DECISIONS_MAX_QUESTIONS = 400;

/**
 * Any service speaking OpenAI's Decisions API (docs/openai.md): `https://api.openai.com/v1` with
 * `gpt-6-luna`, Fireworks at `https://api.fireworks.ai/inference/v1`.
 */
export const openaiDecisions = defineKind({
  schema: z.strictObject({
    kind: z.literal('openai-decisions'),
    baseUrl: httpUrl,
    apiKey: z.string().optional(),
    headers,
    model: z.string().min(1),
    timeoutMs,
    maxRetries,
    maxQuestions: maxQuestions.default(DECISIONS_MAX_QUESTIONS),
  }),
  requiredEnv: ['UPSTREAM_BASE_URL', 'UPSTREAM_MODEL'],
  fromEnv: remoteFromEnv,
  remote: true,
  create: (name, config, { http }) =>
    createDecisionsUpstream(
      http({
        baseUrl: config.baseUrl,
        apiKey: config.apiKey,
        headers: config.headers,
        maxRetries: config.maxRetries,
        requestIdHeader: 'x-request-id',
      }),
      { name, model: config.model, maxQuestions: config.maxQuestions },
    ),
});
