import type { ResponseMeta } from '../core/evaluation/index.ts';

/**
 * The one place the evaluation's metadata becomes headers, for every door (SPEC §§3, 11, 12):
 * `x-request-id` is written for every request on arrival; these follow what the core learnt.
 */
export function metaHeaders(meta: ResponseMeta): Record<string, string> {
  const headers: Record<string, string> = {};
  if (meta.creditsUsed !== undefined) headers['x-credits-used'] = String(meta.creditsUsed);
  if (meta.route !== undefined) headers['x-dg-route'] = meta.route;
  if (meta.upstream !== undefined) headers['x-dg-upstream'] = meta.upstream;
  if (meta.cache !== undefined) headers['x-dg-cache'] = meta.cache;
  if (meta.age !== undefined) headers.age = String(meta.age);
  return headers;
}
