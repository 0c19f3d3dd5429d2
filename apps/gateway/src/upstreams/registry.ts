import type { Upstream } from '@decision-gateway/questions';
import type { Logger } from 'pino';
import type { GatewayMetrics } from '../metrics.ts';
import type { CallPlace } from './call-thread.ts';
import { createCircuitBreaker, withCircuitBreaker } from './circuit-breaker.ts';
import { UPSTREAM_KINDS, type UpstreamConfig } from './kinds/index.ts';
import type { UpstreamKind } from './kinds/kind.ts';
import type { BackoffOptions } from './retry-policy.ts';
import { createUpstreamHttp } from './upstream-http.ts';

export interface NamedUpstreamConfig {
  name: string;
  config: UpstreamConfig;
}

export interface UpstreamTuning {
  /** Consecutive failed requests that open the circuit (default 5). */
  breakerThreshold?: number;
  /** How long an open circuit fails fast before one trial (default 10 s). */
  breakerCooldownMs?: number;
  backoff?: BackoffOptions;
  metrics?: GatewayMetrics;
  /** UPSTREAM_MAX_BODY_BYTES (default 1 MiB). */
  maxBodyBytes?: number;
  /** UPSTREAM_CALL_THREAD: where the HTTP calls are made (`call-thread.ts`; default while busy). */
  callThread?: CallPlace;
  /** The breaker's clock (tests move it on instead of waiting out a cool-down). */
  clock?: () => number;
}

/**
 * One configured upstream, by name (docs/upstreams.md): its kind's client from the map of kinds.
 * Remote ones share the HTTP client (retries, deadline, size limit) and sit behind a circuit
 * breaker that counts whole requests; metrics and the circuit gauge carry the upstream's name.
 */
export function createUpstream(
  { name, config }: NamedUpstreamConfig,
  logger: Logger,
  tuning: UpstreamTuning = {},
): Upstream {
  const kind = UPSTREAM_KINDS[config.kind] as UpstreamKind;
  const { metrics } = tuning;
  const created = kind.create(name, config, {
    http: (options) =>
      createUpstreamHttp({
        ...options,
        name,
        provider: config.kind,
        ...(tuning.maxBodyBytes !== undefined && { maxBodyBytes: tuning.maxBodyBytes }),
        ...(tuning.callThread !== undefined && { callThread: tuning.callThread }),
        logger,
        ...(tuning.backoff && { backoff: tuning.backoff }),
        ...(metrics && { onRetry: () => metrics.upstreamRetries.inc({ upstream: name }) }),
      }),
  });
  // Every kind takes maxQuestions; a kind that has a limit of its own sets it in its schema's default.
  const limit = (config as { maxQuestions?: number }).maxQuestions;
  const upstream = limit === undefined ? created : { ...created, maxQuestions: limit };
  if (!kind.remote) return { ...upstream, kind: config.kind };
  const breaker = createCircuitBreaker({
    threshold: tuning.breakerThreshold ?? 5,
    cooldownMs: tuning.breakerCooldownMs ?? 10_000,
  });
  metrics?.watchCircuit(name, () => breaker.state);
  return {
    ...withCircuitBreaker(upstream, breaker, tuning.clock),
    kind: config.kind,
    circuit: () => breaker.state,
  };
}

/** Every configured upstream, by name. */
export function createUpstreamRegistry(
  configs: Record<string, UpstreamConfig>,
  logger: Logger,
  tuning: UpstreamTuning = {},
): Map<string, Upstream> {
  return new Map(
    Object.entries(configs).map(([name, config]) => [name, createUpstream({ name, config }, logger, tuning)]),
  );
}
