import { z } from 'zod';
import { capabilitiesOf, capabilityFields } from '../../../images/capabilities.ts';
import { connect, httpUrl, maxQuestions, remoteFields, remoteFromEnv, urlPath } from '../fields.ts';
import { defineKind } from '../kind.ts';
import { openCloudflareEnvelope } from './cloudflare-envelope.ts';
import { createSystemOneUpstream, systemOneFacts } from './systemone-upstream.ts';

/** The most questions a call may carry: the System One API's 8, Clef's 64. */
const limitOf = (config: { envelope?: 'cloudflare' | undefined }) =>
  config.envelope === 'cloudflare'
    ? SYSTEMONE_DEFAULTS.cloudflareMaxQuestions
    : SYSTEMONE_DEFAULTS.maxQuestions;

export const SYSTEMONE_DEFAULTS = {
  baseUrl: 'https://api.typesafe.ai',
  model: 'jev-1.13.0',
  path: '/v1/systemone',
  /** The System One API takes at most 8 questions a call. */
  maxQuestions: 8,
  /** Cloudflare's Clef takes at most 64. */
  cloudflareMaxQuestions: 64,
  /** Images only where configured (`jev-1.14.0` or later); a box wherever images are taken. */
  maxImages: 32,
  cloudflareMaxImages: 4,
} as const;

/**
 * Any service speaking the System One body (docs/upstreams.md): the hosted API, and on their own
 * paths and headers Fireworks, SGLang, OpenRouter, Portkey, or another gateway.
 */
export const systemone = defineKind({
  schema: z
    .strictObject({
      kind: z.literal('systemone'),
      baseUrl: httpUrl.default(SYSTEMONE_DEFAULTS.baseUrl),
      path: urlPath.default(SYSTEMONE_DEFAULTS.path),
      ...remoteFields,
      model: z.string().min(1).default(SYSTEMONE_DEFAULTS.model),
      maxQuestions: maxQuestions.optional(),
      /** `cloudflare`: every answer comes wrapped in Workers AI's envelope (Clef). */
      envelope: z.enum(['cloudflare'], { error: 'must be cloudflare' }).optional(),
      ...capabilityFields,
    })
    .superRefine((config, ctx) => {
      const most = limitOf(config);
      if (config.maxQuestions !== undefined && config.maxQuestions > most)
        ctx.addIssue({ code: 'custom', path: ['maxQuestions'], message: `must be at most ${most}` });
    }),
  requiredEnv: [],
  fromEnv: remoteFromEnv,
  remote: true,
  create: (name, config, context) =>
    createSystemOneUpstream(
      connect(config, context, {
        requestIdHeader: config.envelope === 'cloudflare' ? 'cf-ray' : 'x-typesafe-request-id',
        responseFacts: systemOneFacts,
        envelope: config.envelope === 'cloudflare' ? openCloudflareEnvelope : undefined,
      }),
      {
        name,
        model: config.model,
        path: config.path,
        maxQuestions: config.maxQuestions ?? limitOf(config),
        capabilities: capabilitiesOf(config, {
          images: false,
          imageUrls: false,
          box: config.images ?? false,
          maxImages:
            config.envelope === 'cloudflare'
              ? SYSTEMONE_DEFAULTS.cloudflareMaxImages
              : SYSTEMONE_DEFAULTS.maxImages,
        }),
      },
    ),
});
