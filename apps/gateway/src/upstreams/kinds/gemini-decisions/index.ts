import { z } from 'zod';
import { capabilitiesOf, capabilityFields } from '../../../images/capabilities.ts';
import { headers, httpUrl, maxRetries, remoteFromEnv, timeoutMs, usageFacts } from '../fields.ts';
import { defineKind } from '../kind.ts';
import { createGeminiUpstream } from './gemini-upstream.ts';

export const GEMINI_DEFAULTS = {
  baseUrl: 'https://generativelanguage.googleapis.com',
  apiVersion: 'v1beta',
  /** Google's Decisions API takes up to 1000 questions a call. */
  maxQuestions: 1000,
} as const;

/** Google's Decisions API sees images, by bytes or URL, up to 128; it has no box question. */
export const GEMINI_CAPABILITIES = { images: true, imageUrls: true, box: false, maxImages: 128 } as const;

/**
 * Google's Gemini Decisions API (docs/upstreams.md#googles-gemini-decisions-api): its key goes in
 * `x-goog-api-key`, its model is named `models/<name>`.
 */
export const geminiDecisions = defineKind({
  schema: z.strictObject({
    kind: z.literal('gemini-decisions'),
    baseUrl: httpUrl.default(GEMINI_DEFAULTS.baseUrl),
    apiVersion: z
      .string()
      .regex(/^v[0-9a-z]+$/, { error: 'must be an API version such as v1beta or v1' })
      .default(GEMINI_DEFAULTS.apiVersion),
    apiKey: z.string().optional(),
    headers,
    timeoutMs,
    maxRetries,
    model: z.string().regex(/^models\/.+/, { error: 'must be models/<name>' }),
    maxQuestions: z.int().min(1).max(GEMINI_DEFAULTS.maxQuestions).default(GEMINI_DEFAULTS.maxQuestions),
    ...capabilityFields,
  }),
  requiredEnv: ['UPSTREAM_MODEL'],
  fromEnv: remoteFromEnv,
  remote: true,
  create: (name, config, context) =>
    createGeminiUpstream(
      context.http({
        baseUrl: config.baseUrl,
        // Google reads its key from x-goog-api-key, not a bearer token.
        apiKey: undefined,
        headers: {
          ...(config.apiKey !== undefined && { 'x-goog-api-key': config.apiKey }),
          ...config.headers,
        },
        maxRetries: config.maxRetries,
        requestIdHeader: 'x-request-id',
        model: config.model,
        responseFacts: (body) => usageFacts(body, 'total_input_tokens', 'total_output_tokens'),
      }),
      {
        name,
        model: config.model,
        apiVersion: config.apiVersion,
        maxQuestions: config.maxQuestions,
        capabilities: capabilitiesOf(config, GEMINI_CAPABILITIES),
      },
    ),
});
