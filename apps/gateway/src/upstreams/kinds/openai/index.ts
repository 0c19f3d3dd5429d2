import { z } from 'zod';
import { capabilitiesOf, capabilityFields } from '../../../images/capabilities.ts';
import { connect, httpUrl, maxQuestions, remoteFields, remoteFromEnv, usageFacts } from '../fields.ts';
import { defineKind } from '../kind.ts';
import { createOpenAiUpstream } from './openai-upstream.ts';

/** How many alternatives to ask for by default; OpenAI allows up to 20, vLLM its max_logprobs. */
export const DEFAULT_TOP_LOGPROBS = 20;

/** Any OpenAI-compatible chat-completions server that returns logprobs (docs/upstreams.md). */
export const openai = defineKind({
  schema: z.strictObject({
    kind: z.literal('openai'),
    baseUrl: httpUrl,
    ...remoteFields,
    model: z.string().min(1),
    topLogprobs: z.int().min(2).max(100).default(DEFAULT_TOP_LOGPROBS),
    maxQuestions: maxQuestions.optional(),
    ...capabilityFields,
  }),
  requiredEnv: ['UPSTREAM_BASE_URL', 'UPSTREAM_MODEL'],
  fromEnv: (env) => ({ ...remoteFromEnv(env), topLogprobs: env.topLogprobs }),
  remote: true,
  create: (name, config, context) =>
    createOpenAiUpstream(
      connect(config, context, {
        requestIdHeader: 'x-request-id',
        responseFacts: (body) => usageFacts(body, 'prompt_tokens', 'completion_tokens'),
      }),
      {
        name,
        model: config.model,
        topLogprobs: config.topLogprobs,
        // A vision chat model takes images when configured so (`images: true`), never a box.
        capabilities: capabilitiesOf(config, { images: false, imageUrls: false, box: false, maxImages: 16 }),
      },
    ),
});
