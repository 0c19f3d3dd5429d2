import { createLexicalUpstream, type Upstream } from '@decision-gateway/questions';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { GatewayMetrics } from '../metrics.ts';
import { createCircuitBreaker } from './circuit-breaker.ts';
import { createOpenAiUpstream } from './openai-upstream.ts';
import type { BackoffOptions } from './retry-policy.ts';
import { createSystemOneUpstream } from './systemone-upstream.ts';
import { createUpstreamHttp } from './upstream-http.ts';

export interface UpstreamTuning {
  /** Consecutive failed requests that open the circuit (default 5). */
  breakerThreshold?: number;
  /** How long an open circuit fails fast before one trial (default 10 s). */
  breakerCooldownMs?: number;
  backoff?: BackoffOptions;
  metrics?: GatewayMetrics;
}

/** The upstream `UPSTREAM` names (SPEC §8). Configuration is already validated. */
export function createUpstream(
  config: Config['upstream'],
  logger: Logger,
  tuning: UpstreamTuning = {},
): Upstream {
  if (config.kind === 'lexical') return createLexicalUpstream();
  const breaker = createCircuitBreaker({
    threshold: tuning.breakerThreshold ?? 5,
    cooldownMs: tuning.breakerCooldownMs ?? 10_000,
  });
  const { metrics } = tuning;
  metrics?.watchCircuit(config.kind, () => breaker.state);
  const http = createUpstreamHttp({
    name: config.kind,
    baseUrl: config.baseUrl as string,
    apiKey: config.apiKey,
    maxRetries: config.maxRetries,
    logger,
    breaker,
    requestIdHeader: config.kind === 'systemone' ? 'x-typesafe-request-id' : 'x-request-id',
    ...(tuning.backoff && { backoff: tuning.backoff }),
    ...(metrics && { onRetry: () => metrics.upstreamRetries.inc({ upstream: config.kind }) }),
  });
  return config.kind === 'systemone'
    ? createSystemOneUpstream(http, config.model as string)
    : createOpenAiUpstream(http, { model: config.model as string, topLogprobs: config.topLogprobs });
}
