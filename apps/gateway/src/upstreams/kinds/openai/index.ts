import { z } from 'zod';
import { headers, httpUrl, maxQuestions, maxRetries, remoteFromEnv, timeoutMs } from '../fields.ts';
import { defineKind } from '../kind.ts';
import { createOpenAiUpstream } from './openai-upstream.ts';

/** How many alternatives to ask for by default; OpenAI allows up to 20, vLLM its max_logprobs. */
export const DEFAULT_TOP_LOGPROBS = 20;

/** Any OpenAI-compatible chat-completions server that returns logprobs (docs/upstreams.md). */
export const openai = defineKind({
  schema: z.strictObject({
    kind: z.literal('openai'),
    baseUrl: httpUrl,
    apiKey: z.string().optional(),
    headers,
    model: z.string().min(1),
    timeoutMs,
    maxRetries,
    topLogprobs: z.int().min(2).max(100).default(DEFAULT_TOP_LOGPROBS),
    maxQuestions: maxQuestions.optional(),
  }),
  requiredEnv: ['UPSTREAM_BASE_URL', 'UPSTREAM_MODEL'],
  fromEnv: (env) => ({ ...remoteFromEnv(env), topLogprobs: env.topLogprobs }),
  remote: true,
  create: (name, config, { http }) =>
    createOpenAiUpstream(
      http({
        baseUrl: config.baseUrl,
        apiKey: config.apiKey,
        headers: config.headers,
        maxRetries: config.maxRetries,
        requestIdHeader: 'x-request-id',
      }),
      { name, model: config.model, topLogprobs: config.topLogprobs },
    ),
});
