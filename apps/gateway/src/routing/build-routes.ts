import type { UpstreamHealth } from '@decision-gateway/contract';
import type { Upstream } from '@decision-gateway/questions';
import type { Logger } from 'pino';
import type { GatewaySetup } from '../config/routes-file.ts';
import type { GatewayMetrics } from '../metrics.ts';
import { createRoute, type Route, type RouteEvents, type RouteMember } from './route.ts';

/** Calls and failures per upstream since the instance started (`GET /admin/upstreams`). */
export type UpstreamStats = Map<string, { calls: number; failures: number }>;

/** Route events as the metrics of docs/routes.md (calls, fallbacks and escalations, by name) and stats. */
export function routeEvents(metrics: GatewayMetrics | undefined, stats?: UpstreamStats): RouteEvents {
  return {
    called(upstream, outcome, seconds) {
      if (stats) {
        const counts = stats.get(upstream) ?? { calls: 0, failures: 0 };
        counts.calls++;
        if (outcome !== 'ok') counts.failures++;
        stats.set(upstream, counts);
      }
      if (metrics === undefined) return;
      metrics.upstreamCalls.inc({ upstream, outcome });
      metrics.upstreamDuration.observe({ upstream, outcome: outcome === 'ok' ? 'ok' : 'error' }, seconds);
    },
    fellBack: (route, upstream) => metrics?.routeFallbacks.inc({ route, upstream }),
    escalated: (route, outcome) => metrics?.routeEscalations.inc({ route, outcome }),
  };
}

/** Every route of the configuration over the registry's upstreams, by name. */
export function buildRoutes(
  setup: GatewaySetup,
  registry: ReadonlyMap<string, Upstream>,
  deps: { logger: Logger; metrics?: GatewayMetrics; stats?: UpstreamStats },
): Map<string, Route> {
  const member = (name: string): RouteMember => {
    const upstream = registry.get(name);
    const config = setup.upstreams[name];
    // The configuration was validated: every name a route uses is defined.
    if (upstream === undefined || config === undefined) throw new Error(`no upstream named ${name}`);
    return { upstream, timeoutMs: config.timeoutMs };
  };
  const events = routeEvents(deps.metrics, deps.stats);
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
        ...(route.calibrate && { calibrate: true }),
        ...(route.review !== undefined && { review: route.review }),
      };
      return [name, createRoute(spec, { logger: deps.logger, events })];
    }),
  );
}

/** What `GET /admin/upstreams` shows: each upstream of the routes with its circuit and counts, and the routes. */
export function upstreamHealth(routes: ReadonlyMap<string, Route>, stats: UpstreamStats): UpstreamHealth {
  const upstreams = new Map<string, Upstream>();
  for (const route of routes.values()) {
    for (const member of route.spec.members) upstreams.set(member.upstream.name, member.upstream);
    const target = route.spec.escalate?.to.upstream;
    if (target) upstreams.set(target.name, target);
  }
  return {
    upstreams: [...upstreams.values()].map((upstream) => ({
      name: upstream.name,
      kind: upstream.kind ?? null,
      circuit: upstream.circuit?.() ?? 'closed',
      calls: stats.get(upstream.name)?.calls ?? 0,
      failures: stats.get(upstream.name)?.failures ?? 0,
    })),
    routes: [...routes.values()].map(({ spec }) => ({
      name: spec.name,
      upstreams: spec.members.map((member) => member.upstream.name),
      weights: spec.weights ? { ...spec.weights } : null,
      escalateTo: spec.escalate?.to.upstream.name ?? null,
      cacheTtlSeconds: spec.cacheTtlSeconds,
    })),
  };
}
