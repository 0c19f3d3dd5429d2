import { failure, type GatewayFailure } from '@decision-gateway/contract';
import { cacheDirective, decisionKey } from '../../cache/decision-cache.ts';
import { needsOf } from '../../images/capabilities.ts';
import type { Route } from '../../routing/route.ts';
import type { StageDeps } from './deps.ts';
import type { Authenticated, Routed, Stage } from './evaluation-context.ts';

/**
 * Stage 4: the route (40004 if it is not one), then the rule broken that reading the request kept
 * (40001), then the route's decision cache, if it keeps decisions. A token's route always wins;
 * else the `x-dg-route` header, the key's route, `default` (docs/routes.md).
 */
export function resolveRoute(
  ctx: Authenticated,
  deps: Pick<StageDeps, 'routes' | 'cache' | 'cacheScope'>,
): Stage<Routed> {
  const { payer } = ctx;
  const name = payer.token?.route ?? ctx.call.route ?? payer.route ?? 'default';
  const route = deps.routes.get(name);
  if (route === undefined) return unknownRoute(name, deps.routes);
  ctx.route = route;
  ctx.log.route = name;
  ctx.meta.route = name;
  const ttlSeconds = route.spec.cacheTtlSeconds;
  const store = ttlSeconds > 0 ? deps.cache : undefined;
  const directive = store ? cacheDirective(ctx.call.cacheControl) : undefined;
  if (store) {
    const outcome = directive === undefined ? 'miss' : 'bypass';
    ctx.log.cache = outcome;
    ctx.meta.cache = outcome;
  }
  if (ctx.invalid) return ctx.invalid;
  // Reading the request kept either a failure or the request: with no failure, it is here.
  const routed = ctx as Routed;
  // A request only upstreams that see images can answer, on a route without one (docs/images.md#upstreams).
  if (routed.images !== undefined) {
    const lacking = route.refuses(needsOf(routed.request, routed.images));
    if (lacking !== undefined) return failure('invalid_request', lacking);
  }
  if (store) {
    const key = decisionKey(deps.cacheScope ?? 'key', payer.id, name, routed.request, routed.images);
    routed.cache = { store, key, directive, ttlSeconds };
  }
  return routed;
}

/** 40004: the route asked for (by header or by the key) is not in the configuration. */
function unknownRoute(name: string, routes: ReadonlyMap<string, Route>): GatewayFailure {
  const defined = [...routes.keys()].sort().join(', ');
  return failure('unknown_route', `no route named "${name.slice(0, 64)}"; the routes are: ${defined}`);
}
