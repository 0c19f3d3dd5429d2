import { createLexicalUpstream, type Upstream } from '@decision-gateway/questions';
import type { Logger } from 'pino';
import type { GatewayMetrics } from '../metrics.ts';
import { createCircuitBreaker, withCircuitBreaker } from './circuit-breaker.ts';
import { createOpenAiUpstream } from './openai-upstream.ts';
import type { BackoffOptions } from './retry-policy.ts';
import { createSystemOneUpstream } from './systemone-upstream.ts';
import type { UpstreamConfig } from './upstream-config.ts';
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
  /** The breaker's clock (tests move it on instead of waiting out a cool-down). */
  clock?: () => number;
}

/**
 * One configured upstream, by name (SPEC §§8, 12). Remote ones sit behind a circuit breaker that
 * counts whole requests; metrics and the circuit gauge carry the upstream's name.
 */
export function createUpstream(
  { name, config }: NamedUpstreamConfig,
  logger: Logger,
  tuning: UpstreamTuning = {},
): Upstream {
  if (config.kind === 'lexical') return { ...createLexicalUpstream(), name, kind: 'lexical' };
  const { metrics } = tuning;
  const http = createUpstreamHttp({
    name,
    baseUrl: config.baseUrl,
    apiKey: config.apiKey,
    maxRetries: config.maxRetries,
    ...(tuning.maxBodyBytes !== undefined && { maxBodyBytes: tuning.maxBodyBytes }),
    logger,
    requestIdHeader: config.kind === 'systemone' ? 'x-typesafe-request-id' : 'x-request-id',
    ...(tuning.backoff && { backoff: tuning.backoff }),
    ...(metrics && { onRetry: () => metrics.upstreamRetries.inc({ upstream: name }) }),
  });
  const upstream =
    config.kind === 'systemone'
      ? createSystemOneUpstream(http, name, config.model)
      : createOpenAiUpstream(http, { name, model: config.model, topLogprobs: config.topLogprobs });
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
