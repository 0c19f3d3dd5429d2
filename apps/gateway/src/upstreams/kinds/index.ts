import { z } from 'zod';
import { geminiDecisions } from './gemini-decisions/index.ts';
import { lexical } from './lexical/index.ts';
import { openai } from './openai/index.ts';
import { openaiDecisions } from './openai-decisions/index.ts';
import { systemone } from './systemone/index.ts';

/**
 * Every kind of upstream, by the name the configuration gives it (`kind:` in the file, `UPSTREAM`
 * in the environment). This map is the one list: the configuration schema, `UPSTREAM`'s values and
 * what `GET /admin/upstreams` reports all come from it. A new kind is a folder beside these and a
 * line here.
 */
export const UPSTREAM_KINDS = {
  lexical,
  systemone,
  openai,
  'openai-decisions': openaiDecisions,
  'gemini-decisions': geminiDecisions,
} as const;

export type UpstreamKindName = keyof typeof UPSTREAM_KINDS;
export const UPSTREAM_KIND_NAMES = Object.keys(UPSTREAM_KINDS) as [UpstreamKindName, ...UpstreamKindName[]];

/** One upstream as configured: its kind and that kind's fields, defaults filled in. */
export type UpstreamConfig = {
  [K in UpstreamKindName]: z.output<(typeof UPSTREAM_KINDS)[K]['schema']>;
}[UpstreamKindName];

const names = UPSTREAM_KIND_NAMES.join(', ');
const schemas = Object.values(UPSTREAM_KINDS).map((kind) => kind.schema) as unknown as [
  z.ZodObject,
  ...z.ZodObject[],
];

/** The schema of one configured upstream, from every kind's own. */
export const UpstreamConfig = z.discriminatedUnion('kind', schemas, {
  error: `kind must be one of ${names}`,
}) as unknown as z.ZodType<UpstreamConfig>;

/** An upstream's (or a route's) name: `[a-z0-9_-]{1,32}` (docs/routes.md). */
export const UpstreamName = z
  .string()
  .regex(/^[a-z0-9_-]{1,32}$/, { error: 'must be 1–32 characters of a-z, 0-9, _ and -' });

export { UPSTREAM_DEFAULTS } from './fields.ts';
export type { UpstreamEnv } from './kind.ts';
