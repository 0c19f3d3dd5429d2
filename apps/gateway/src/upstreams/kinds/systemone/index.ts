import { z } from 'zod';
import { httpUrl, maxRetries, remoteFromEnv, timeoutMs } from '../fields.ts';
import { defineKind } from '../kind.ts';
import { createSystemOneUpstream } from './systemone-upstream.ts';

export const SYSTEMONE_DEFAULTS = { baseUrl: 'https://api.typesafe.ai', model: 'jev-1.13.0' } as const;

/** Any service speaking the native System One protocol (docs/upstreams.md). */
export const systemone = defineKind({
  schema: z.strictObject({
    kind: z.literal('systemone'),
    baseUrl: httpUrl.default(SYSTEMONE_DEFAULTS.baseUrl),
    apiKey: z.string().optional(),
    model: z.string().min(1).default(SYSTEMONE_DEFAULTS.model),
    timeoutMs,
    maxRetries,
  }),
  requiredEnv: [],
  fromEnv: remoteFromEnv,
  remote: true,
  create: (name, config, { http }) =>
    createSystemOneUpstream(
      http({
        baseUrl: config.baseUrl,
        apiKey: config.apiKey,
        maxRetries: config.maxRetries,
        requestIdHeader: 'x-typesafe-request-id',
      }),
      name,
      config.model,
    ),
});
