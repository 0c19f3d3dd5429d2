import type { ResponseMeta } from '../core/evaluation/index.ts';

/**
 * The one place the evaluation's metadata becomes headers, for every door (docs/http-api.md#the-success-envelope-http-200, docs/http-api.md#the-other-doors, docs/routes.md):
 * `x-request-id` is written for every request on arrival; these follow what the core learnt.
 */
export function metaHeaders(meta: ResponseMeta): Record<string, string> {
  const headers: Record<string, string> = {};
  if (meta.creditsUsed !== undefined) headers['x-credits-used'] = String(meta.creditsUsed);
  if (meta.route !== undefined) headers['x-dg-route'] = meta.route;
  if (meta.upstream !== undefined) headers['x-dg-upstream'] = meta.upstream;
  if (meta.cache !== undefined) headers['x-dg-cache'] = meta.cache;
  if (meta.age !== undefined) headers.age = String(meta.age);
  if (meta.calibration !== undefined) headers['x-dg-calibration'] = meta.calibration.join(',');
  if (meta.review !== undefined) headers['x-dg-review'] = meta.review.join(',');
  return headers;
}
