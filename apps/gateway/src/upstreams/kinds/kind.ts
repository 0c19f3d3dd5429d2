import type { Upstream } from '@decision-gateway/questions';
import type { z } from 'zod';
import type { UpstreamHttp, UpstreamHttpOptions } from '../upstream-http.ts';

/** The `UPSTREAM_*` variables, read once: one upstream without a configuration file. */
export interface UpstreamEnv {
  baseUrl?: string | undefined;
  apiKey?: string | undefined;
  model?: string | undefined;
  timeoutMs: number;
  maxRetries: number;
  topLogprobs: number;
}

/** What a kind's client is given: the shared HTTP client (retries, deadline, size limit). */
export interface KindContext {
  http(
    options: Pick<
      UpstreamHttpOptions,
      | 'baseUrl'
      | 'apiKey'
      | 'headers'
      | 'maxRetries'
      | 'requestIdHeader'
      | 'model'
      | 'responseFacts'
      | 'envelope'
    >,
  ): UpstreamHttp;
}

/**
 * One kind of upstream (docs/upstreams.md): its configuration schema, how the `UPSTREAM_*`
 * variables fill it, and its client. Adding a kind is a folder holding one of these and one line
 * in `kinds/index.ts`; the configuration file, `UPSTREAM` and the admin API follow from that map.
 */
export interface UpstreamKind<Schema extends z.ZodObject = z.ZodObject> {
  /** `kind`, `timeoutMs` and the kind's own fields, closed, with their defaults. */
  readonly schema: Schema;
  /** The variables `UPSTREAM=<kind>` needs. */
  readonly requiredEnv: readonly ('UPSTREAM_BASE_URL' | 'UPSTREAM_MODEL')[];
  /** Its fields from the `UPSTREAM_*` variables (unset ones left out, for the schema's defaults). */
  fromEnv(env: UpstreamEnv): Record<string, unknown>;
  /** Calls over the network: then it sits behind a circuit breaker. */
  readonly remote: boolean;
  create(name: string, config: z.output<Schema>, context: KindContext): Upstream;
}

/** A kind, its types checked against its own schema. */
export const defineKind = <Schema extends z.ZodObject>(kind: UpstreamKind<Schema>) => kind;
