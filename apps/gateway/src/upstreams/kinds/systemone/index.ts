import { z } from 'zod';
import { connect, httpUrl, maxQuestions, remoteFields, remoteFromEnv, urlPath } from '../fields.ts';
import { defineKind } from '../kind.ts';
import { createSystemOneUpstream, systemOneFacts } from './systemone-upstream.ts';

export const SYSTEMONE_DEFAULTS = {
  baseUrl: 'https://api.typesafe.ai',
  model: 'jev-1.13.0',
  path: '/v1/systemone',
  /** The System One API takes at most 8 questions a call. */
  maxQuestions: 8,
} as const;

/**
 * Any service speaking the System One body (docs/upstreams.md): the hosted API, and on their own
 * paths and headers Fireworks, SGLang, OpenRouter, Portkey, or another gateway.
 */
export const systemone = defineKind({
  schema: z.strictObject({
    kind: z.literal('systemone'),
    baseUrl: httpUrl.default(SYSTEMONE_DEFAULTS.baseUrl),
    path: urlPath.default(SYSTEMONE_DEFAULTS.path),
    ...remoteFields,
    model: z.string().min(1).default(SYSTEMONE_DEFAULTS.model),
    maxQuestions: maxQuestions.max(SYSTEMONE_DEFAULTS.maxQuestions).default(SYSTEMONE_DEFAULTS.maxQuestions),
  }),
  requiredEnv: [],
  fromEnv: remoteFromEnv,
  remote: true,
  create: (name, config, context) =>
    createSystemOneUpstream(
      connect(config, context, { requestIdHeader: 'x-typesafe-request-id', responseFacts: systemOneFacts }),
      {
        name,
        model: config.model,
        path: config.path,
        maxQuestions: config.maxQuestions,
      },
    ),
});
