import { trace } from '@opentelemetry/api';
import { setGlobalErrorHandler } from '@opentelemetry/core';
import { NodeSDK } from '@opentelemetry/sdk-node';
import type { Logger } from 'pino';
import { warnAtMostEvery } from '../logger.ts';
import { EXPLICIT_CONTEXT, useTracer } from './spans.ts';

/** What the configuration decided about tracing (docs/tracing.md); the SDK reads the rest of OTEL_*. */
export interface TracingSettings {
  /** `decision-gateway` unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES names the service. */
  serviceName: string | undefined;
}

/** How long a shutdown waits for the last spans to reach the collector. */
const FLUSH_TIMEOUT_MS = 5_000;

/**
 * Starts OpenTelemetry's Node SDK for traces only: it reads the OTEL_* variables as it always
 * does (endpoint, protocol, headers, sampler, resource) and exports in batches off the request
 * path. Metrics stay with Prometheus (`/metrics`) and logs with standard output, so the SDK's
 * own metric and log exporters are not started, nor any auto-instrumentation: the gateway writes
 * its own spans, each given its parent (`spans.ts`). A collector that cannot be reached is logged
 * at most once a minute.
 */
export function startTracing(settings: TracingSettings, logger: Logger): { shutdown(): Promise<void> } {
  const warn = warnAtMostEvery(logger, 60_000);
  setGlobalErrorHandler((error) =>
    warn(error, 'traces could not be exported (requests are not affected; the spans are dropped)'),
  );
  const sdk = new NodeSDK({
    ...(settings.serviceName !== undefined && { serviceName: settings.serviceName }),
    instrumentations: [],
    contextManager: EXPLICIT_CONTEXT,
    metricReaders: [],
    logRecordProcessors: [],
  });
  sdk.start();
  useTracer(trace.getTracer('decision-gateway'));
  return {
    async shutdown() {
      useTracer(undefined);
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, FLUSH_TIMEOUT_MS);
      });
      await Promise.race([
        sdk.shutdown().catch((error: unknown) => warn(error, 'traces could not be flushed')),
        timeout,
      ]);
      clearTimeout(timer);
    },
  };
}
