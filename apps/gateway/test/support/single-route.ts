import type { Upstream } from '@decision-gateway/questions';
import type { Logger } from 'pino';
import type { GatewayMetrics } from '../../src/metrics.ts';
import { routeEvents, type UpstreamStats } from '../../src/routing/build-routes.ts';
import { createRoute, type Route } from '../../src/routing/route.ts';

export interface SingleRouteOptions {
  logger: Logger;
  /** The route's name (default `default`). */
  name?: string;
  /** The deadline of each call to the upstream (default 10 s); the route's is twice that. */
  timeoutMs?: number;
  /** How long the route keeps a decision (default 0: no cache). */
  cacheTtlSeconds?: number;
  metrics?: GatewayMetrics;
  stats?: UpstreamStats;
  /** Upstreams after the first, in the route's order (its fallbacks). */
  fallbacks?: Upstream[];
  /** Unsure answers asked again of this upstream (docs/routes.md). */
  escalate?: { to: Upstream; confidenceBelow?: number; noulWithin?: readonly [number, number] };
  /** Which final answers are marked for a person (docs/review.md). */
  review?: { confidenceBelow?: number; noulWithin?: readonly [number, number] };
}

/**
 * A route (`default` unless named) over one upstream object, as a configuration of one upstream makes it: for
 * tests whose upstream is written in the test rather than configured.
 */
export function singleRoute(upstream: Upstream, options: SingleRouteOptions): ReadonlyMap<string, Route> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const name = options.name ?? 'default';
  const spec = {
    name,
    members: [upstream, ...(options.fallbacks ?? [])].map((member) => ({ upstream: member, timeoutMs })),
    deadlineMs: 2 * timeoutMs,
    cacheTtlSeconds: options.cacheTtlSeconds ?? 0,
    ...(options.escalate && {
      escalate: { ...options.escalate, to: { upstream: options.escalate.to, timeoutMs } },
    }),
    ...(options.review && { review: options.review }),
  };
  const events = routeEvents(options.metrics, options.stats);
  return new Map([[name, createRoute(spec, { logger: options.logger, events })]]);
}
