import { failure, type GatewayFailure } from '@decision-gateway/contract';

/**
 * A route a key or a token names must be one of the configuration's (docs/operating.md#admin-api, docs/browsers.md): 40001 on the
 * `route` field, naming the defined routes, or undefined when it is one.
 */
export function unknownRouteField(
  route: string | null,
  routeNames: readonly string[],
): GatewayFailure | undefined {
  if (route === null || routeNames.includes(route)) return undefined;
  const message = `no route named "${route.slice(0, 64)}"; the routes are: ${[...routeNames].sort().join(', ')}`;
  return failure('invalid_request', `route: ${message}`, { issues: [{ path: ['route'], message }] });
}
