import { z } from 'zod';
import { capabilitiesOf, capabilityFields } from '../../../images/capabilities.ts';
import { connect, httpUrl, maxQuestions, remoteFields, remoteFromEnv, usageFacts } from '../fields.ts';
import { defineKind } from '../kind.ts';
import { createDecisionsUpstream } from './decisions-upstream.ts';

/** OpenAI's Decisions API takes up to 400 questions a call. */
export const DECISIONS_MAX_QUESTIONS = 400;

/** OpenAI's Decisions API sees images, by bytes or URL, up to 128; it has no box question. */
export const DECISIONS_CAPABILITIES = { images: true, imageUrls: true, box: false, maxImages: 128 } as const;

/**
 * Any service speaking OpenAI's Decisions API (docs/openai.md): `https://api.openai.com/v1` with
 * `gpt-6-luna`, Fireworks at `https://api.fireworks.ai/inference/v1`.
 */
export const openaiDecisions = defineKind({
  schema: z.strictObject({
    kind: z.literal('openai-decisions'),
    baseUrl: httpUrl,
    ...remoteFields,
    model: z.string().min(1),
    maxQuestions: maxQuestions.default(DECISIONS_MAX_QUESTIONS),
    ...capabilityFields,
  }),
  requiredEnv: ['UPSTREAM_BASE_URL', 'UPSTREAM_MODEL'],
  fromEnv: remoteFromEnv,
  remote: true,
  create: (name, config, context) =>
    createDecisionsUpstream(
      connect(config, context, {
        requestIdHeader: 'x-request-id',
        responseFacts: (body) => usageFacts(body, 'input_tokens', 'output_tokens'),
      }),
      {
        name,
        model: config.model,
        maxQuestions: config.maxQuestions,
        capabilities: capabilitiesOf(config, DECISIONS_CAPABILITIES),
      },
    ),
});
