import { isPlainObject } from '@decision-gateway/contract';
import { z } from 'zod';
import type { ResponseFacts } from '../../telemetry/spans.ts';
import type { Envelope, UpstreamHttp } from '../upstream-http.ts';
import type { KindContext } from './kind.ts';

/** The defaults every kind shares (docs/upstreams.md): the environment and the file both use these. */
export const UPSTREAM_DEFAULTS = { timeoutMs: 10_000, maxRetries: 2 } as const;

/** Fields several kinds take, written once. */
export const httpUrl = z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' });
export const timeoutMs = z.int().min(1).max(600_000).default(UPSTREAM_DEFAULTS.timeoutMs);
export const maxRetries = z.int().min(0).max(10).default(UPSTREAM_DEFAULTS.maxRetries);

/** The fields of a remote kind that the `UPSTREAM_*` variables give, unset ones left out. */
export function remoteFromEnv(env: {
  baseUrl?: string | undefined;
  apiKey?: string | undefined;
  model?: string | undefined;
  timeoutMs: number;
  maxRetries: number;
}): Record<string, unknown> {
  const fields = {
    baseUrl: env.baseUrl,
    apiKey: env.apiKey,
    model: env.model,
    timeoutMs: env.timeoutMs,
    maxRetries: env.maxRetries,
  };
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined));
}

/** Extra request headers sent with every call (values may use `${NAME}` in the file). */
export const headers = z.record(z.string().min(1), z.string()).optional();

/** The most questions one call may carry; more go out in groups (docs/upstreams.md#groups). */
export const maxQuestions = z.int().min(1).max(400);

/** A path on the upstream's base URL. */
export const urlPath = z.string().regex(/^\/[^?#\s]*$/, { error: 'must be a path starting with /' });

/** The fields every remote kind takes beside its `baseUrl` and `model`. */
export const remoteFields = { apiKey: z.string().optional(), headers, timeoutMs, maxRetries };

/** How a kind's answers speak of themselves. */
export interface AnswerLabels {
  /** The header its responses carry their own request id in. */
  requestIdHeader: string;
  /** What an answer's body says of its model and usage (for traces). */
  responseFacts(body: unknown): ResponseFacts;
  /** The service's own envelope around every answer, where it has one. */
  envelope?: Envelope | undefined;
}

/** A remote kind's HTTP client, from its configured fields. */
export function connect(
  config: {
    baseUrl: string;
    apiKey?: string | undefined;
    headers?: Readonly<Record<string, string>> | undefined;
    maxRetries: number;
    model: string;
  },
  context: KindContext,
  { requestIdHeader, responseFacts, envelope }: AnswerLabels,
): UpstreamHttp {
  const { baseUrl, apiKey, headers, maxRetries, model } = config;
  return context.http({
    baseUrl,
    apiKey,
    headers,
    maxRetries,
    requestIdHeader,
    model,
    responseFacts,
    envelope,
  });
}

/**
 * The facts of an answer that names its model as `model` and counts tokens in `usage`, under
 * `input` and `output`. Whatever is missing or not of its type is left out.
 */
export function usageFacts(answer: unknown, input: string, output: string): ResponseFacts {
  if (!isPlainObject(answer)) return {};
  const usage = isPlainObject(answer.usage) ? answer.usage : {};
  return {
    model: typeof answer.model === 'string' ? answer.model.slice(0, 256) : undefined,
    inputTokens: tokenCount(usage[input]),
    outputTokens: tokenCount(usage[output]),
  };
}

const tokenCount = (value: unknown): number | undefined =>
  Number.isSafeInteger(value) && (value as number) >= 0 ? (value as number) : undefined;
