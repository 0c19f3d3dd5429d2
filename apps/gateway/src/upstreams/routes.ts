import type { Upstream } from '@decision-gateway/questions';
import type { Logger } from 'pino';
import type { GatewaySetup } from '../gateway-config.ts';
import type { GatewayMetrics } from '../metrics.ts';
import { createRoute, type Route, type RouteEvents, type RouteMember } from './route.ts';

/** Route events as the metrics of SPEC §12: calls, fallbacks and escalations, labelled by name. */
export function routeEvents(metrics: GatewayMetrics | undefined): RouteEvents {
  if (metrics === undefined) return {};
  return {
    called(upstream, outcome, seconds) {
      metrics.upstreamCalls.inc({ upstream, outcome });
      metrics.upstreamDuration.observe({ upstream, outcome: outcome === 'ok' ? 'ok' : 'error' }, seconds);
    },
    fellBack: (route, upstream) => metrics.routeFallbacks.inc({ route, upstream }),
    escalated: (route, outcome) => metrics.routeEscalations.inc({ route, outcome }),
  };
}

/** Every route of the configuration over the registry's upstreams, by name. */
export function buildRoutes(
  setup: GatewaySetup,
  registry: ReadonlyMap<string, Upstream>,
  deps: { logger: Logger; metrics?: GatewayMetrics },
): Map<string, Route> {
  const member = (name: string): RouteMember => {
    const upstream = registry.get(name);
    const config = setup.upstreams[name];
    // The configuration was validated: every name a route uses is defined.
    if (upstream === undefined || config === undefined) throw new Error(`no upstream named ${name}`);
    return { upstream, timeoutMs: config.timeoutMs };
  };
  const events = routeEvents(deps.metrics);
  return new Map(
    Object.entries(setup.routes).map(([name, route]) => {
      const escalate = route.escalate && {
        to: member(route.escalate.to),
        ...(route.escalate.confidenceBelow !== undefined && {
          confidenceBelow: route.escalate.confidenceBelow,
        }),
        ...(route.escalate.noulWithin !== undefined && { noulWithin: route.escalate.noulWithin }),
      };
      const spec = {
        name,
        members: route.upstreams.map(member),
        ...(route.weights !== undefined && { weights: route.weights }),
        ...(escalate !== undefined && { escalate }),
        deadlineMs: route.deadlineMs,
        cacheTtlSeconds: route.cacheTtlSeconds,
      };
      return [name, createRoute(spec, { logger: deps.logger, events })];
    }),
  );
}
