import { z } from 'zod';

/** Every upstream default of SPEC §8, in one place: the environment and the file both use these. */
export const UPSTREAM_DEFAULTS = {
  timeoutMs: 10_000,
  maxRetries: 2,
  topLogprobs: 20,
  systemone: { baseUrl: 'https://api.typesafe.ai', model: 'jev-1.13.0' },
} as const;

/** An upstream's name: `[a-z0-9_-]{1,32}` (SPEC §12). */
export const UpstreamName = z
  .string()
  .regex(/^[a-z0-9_-]{1,32}$/, { error: 'must be 1–32 characters of a-z, 0-9, _ and -' });

const httpUrl = z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' });
const timeoutMs = z.int().min(1).max(600_000).default(UPSTREAM_DEFAULTS.timeoutMs);
const maxRetries = z.int().min(0).max(10).default(UPSTREAM_DEFAULTS.maxRetries);

/** One upstream as configured (SPEC §§8, 12): its kind and that kind's fields. */
export const UpstreamConfig = z.discriminatedUnion(
  'kind',
  [
    z.strictObject({ kind: z.literal('lexical'), timeoutMs }),
    z.strictObject({
      kind: z.literal('systemone'),
      baseUrl: httpUrl.default(UPSTREAM_DEFAULTS.systemone.baseUrl),
      apiKey: z.string().optional(),
      model: z.string().min(1).default(UPSTREAM_DEFAULTS.systemone.model),
      timeoutMs,
      maxRetries,
    }),
    z.strictObject({
      kind: z.literal('openai'),
      baseUrl: httpUrl,
      apiKey: z.string().optional(),
      model: z.string().min(1),
      timeoutMs,
      maxRetries,
      /** How many alternatives to ask for; OpenAI allows up to 20, vLLM its max_logprobs. */
      topLogprobs: z.int().min(2).max(100).default(UPSTREAM_DEFAULTS.topLogprobs),
    }),
  ],
  { error: 'kind must be lexical, systemone or openai' },
);
export type UpstreamConfig = z.output<typeof UpstreamConfig>;

/** How long one call to this upstream may take. */
export function timeoutOf(config: UpstreamConfig): number {
  return config.timeoutMs;
}
