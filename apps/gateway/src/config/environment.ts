import { existsSync } from 'node:fs';
import { Origin } from '@decision-gateway/contract';
import { z } from 'zod';
import type { TracingSettings } from '../telemetry/start-tracing.ts';
import {
  UPSTREAM_DEFAULTS,
  UPSTREAM_KIND_NAMES,
  UPSTREAM_KINDS,
  UpstreamConfig,
  type UpstreamEnv,
  type UpstreamKindName,
} from '../upstreams/kinds/index.ts';
import { DEFAULT_TOP_LOGPROBS } from '../upstreams/kinds/openai/index.ts';
import { type GatewaySetup, loadGatewayFile, singleUpstreamSetup } from './routes-file.ts';

const integer = (fallback: number, min: number, max = Number.MAX_SAFE_INTEGER) =>
  z
    .string()
    .trim()
    .regex(/^\d+$/, { error: 'must be a whole number' })
    .transform(Number)
    .pipe(
      z
        .number()
        .int()
        .min(min, { error: `must be at least ${min}` })
        .max(max, { error: `must be at most ${max}` }),
    )
    .optional()
    .transform((value) => value ?? fallback);

/** Credits per 1K tokens: non-negative, at most 6 decimals per token (micro-credit exactness). */
const rate = (fallback: number) =>
  z
    .string()
    .trim()
    .regex(/^\d+(\.\d{1,9})?$/, { error: 'must be a non-negative decimal number' })
    .transform(Number)
    .pipe(z.number().max(1000, { error: 'must be at most 1000' }))
    .optional()
    .transform((value) => value ?? fallback);

const emptyAsUndefined = (value: unknown) => (value === '' ? undefined : value);

const httpUrl = z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' });

/** OTLP over HTTP, in protobuf (the default) or JSON. */
const otlpProtocol = z.enum(['http/protobuf', 'http/json'], { error: 'must be http/protobuf or http/json' });

/** The samplers of OpenTelemetry's OTEL_TRACES_SAMPLER (default parentbased_always_on). */
const SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;

/** The connection timeouts (docs/operating.md#configuration): the environment's defaults and the server's are these. */
export const TIMEOUT_DEFAULTS = { requestMs: 30_000, shutdownMs: 30_000 } as const;

/**
 * The gateway's configuration (docs/operating.md), read from the environment and validated at start.
 * An empty variable counts as unset.
 */
export const ConfigSchema = z
  .object({
    PORT: integer(8787, 0, 65_535),
    HOST: z.string().min(1).default('127.0.0.1'),
    DATABASE_URL: z
      .string()
      .refine((url) => url.startsWith('file:') || /^postgres(ql)?:\/\//.test(url), {
        error: 'must be file:PATH (SQLite) or postgres://… (PostgreSQL)',
      })
      .optional(),
    /** PostgreSQL: connections in each instance's pool. */
    DATABASE_POOL_SIZE: integer(10, 1, 1000),
    /** The deadline of every store call (docs/operating.md); past it the request gets 503. */
    STORE_TIMEOUT_MS: integer(2_000, 1, 600_000),
    REDIS_URL: z
      .string()
      .regex(/^rediss?:\/\//, { error: 'must be redis://… or rediss://…' })
      .optional(),
    /** Prefix of every Redis key the gateway writes, so several gateways can share one Redis. */
    REDIS_KEY_PREFIX: z.string().default('dg:'),
    REQUEST_TIMEOUT_MS: integer(TIMEOUT_DEFAULTS.requestMs, 1, 3_600_000),
    SHUTDOWN_TIMEOUT_MS: integer(TIMEOUT_DEFAULTS.shutdownMs, 0, 3_600_000),
    /** New connections taken in each turn of the event loop at most (docs/operating.md). */
    ACCEPTS_PER_TURN: integer(16, 1, 256),
    /** Connections the kernel queues for the gateway to accept (docs/operating.md); it caps this at net.core.somaxconn. */
    LISTEN_BACKLOG: integer(4096, 1, 65_535),
    ADMIN_TOKEN: z.string().min(16, { error: 'must be at least 16 characters' }).optional(),
    RATE_LIMIT_PER_MINUTE: integer(600, 0),
    UPSTREAM: z
      .enum(UPSTREAM_KIND_NAMES, { error: `must be one of ${UPSTREAM_KIND_NAMES.join(', ')}` })
      .default('lexical'),
    UPSTREAM_BASE_URL: httpUrl.optional(),
    UPSTREAM_API_KEY: z.string().optional(),
    UPSTREAM_MODEL: z.string().min(1).optional(),
    UPSTREAM_TIMEOUT_MS: integer(UPSTREAM_DEFAULTS.timeoutMs, 1, 600_000),
    UPSTREAM_MAX_RETRIES: integer(UPSTREAM_DEFAULTS.maxRetries, 0, 10),
    /** The largest upstream answer read; over it → 502 (docs/operating.md). Applies to every upstream. */
    UPSTREAM_MAX_BODY_BYTES: integer(1_048_576, 1024, 1_073_741_824),
    /** Whether upstream calls may go to a thread of their own while the serving thread is busy (docs/operating.md). */
    UPSTREAM_CALL_THREAD: z
      .enum(['when-busy', 'off'], { error: 'must be when-busy or off' })
      .default('when-busy'),
    /** openai: how many alternatives to ask for; OpenAI allows up to 20, vLLM its max_logprobs. */
    UPSTREAM_TOP_LOGPROBS: integer(DEFAULT_TOP_LOGPROBS, 2, 100),
    CREDITS_PER_1K_INPUT_TOKENS: rate(1),
    CREDITS_PER_1K_OUTPUT_TOKENS: rate(0),
    /** A YAML or JSON file of upstreams and routes (docs/routes.md), read after the variables. */
    GATEWAY_CONFIG: z.string().optional(),
    /** Without GATEWAY_CONFIG: how long the route `default` keeps a decision; 0 = no cache. */
    CACHE_TTL_SECONDS: integer(0, 0, 31_536_000),
    /** Browser origins that may call with tokens (docs/browsers.md), comma-separated, exact. */
    CORS_ORIGINS: z
      .string()
      .transform((text) =>
        text
          .split(',')
          .map((origin) => origin.trim())
          .filter(Boolean),
      )
      .pipe(z.array(Origin))
      .optional()
      .transform((origins) => origins ?? []),
    CACHE_SCOPE: z.enum(['key', 'global'], { error: 'must be key or global' }).default('key'),
    /** The in-process cache's bound (without REDIS_URL). */
    CACHE_MAX_BYTES: integer(64 * 1024 * 1024, 1024),
    /** Raw usage records older than this many days are deleted in the background; the rollups keep their sums. */
    USAGE_RETENTION_DAYS: integer(90, 1, 100_000),
    /** How long each answered decision is kept for its outcomes; 0 keeps none (outcomes refused). */
    DECISION_RETENTION_DAYS: integer(30, 0, 100_000),
    /** Calibration maps (docs/calibration-maps.md): how often they are fitted (0: only on demand). */
    CALIBRATION_REFIT_MINUTES: integer(60, 0, 525_600),
    /** The outcomes of decisions made this many days back are fitted. */
    CALIBRATION_WINDOW_DAYS: integer(30, 1, 100_000),
    /** An upstream and question type is fitted from this many outcomes on. */
    CALIBRATION_MIN_OUTCOMES: integer(200, 10, 100_000_000),
    /** Review items (docs/review.md) are kept this long, or until a day after their review. */
    REVIEW_RETENTION_DAYS: integer(14, 1, 100_000),
    /** The MCP door's open sessions at most (docs/mcp.md); past it, the least recently used closes. */
    MCP_MAX_SESSIONS: integer(1000, 1, 1_000_000),
    /** Image bytes that requests in flight may hold together (docs/images.md#memory); past it, 503. */
    IMAGE_BYTES_IN_FLIGHT: integer(268_435_456, 1_048_576, 68_719_476_736),
    LOG_LEVEL: z
      .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], {
        error: 'must be fatal, error, warn, info, debug, trace or silent',
      })
      .default('info'),
    // OpenTelemetry's own variables (docs/tracing.md): judged here so that a mistyped value stops
    // the start with a message instead of the SDK's silent fallback; the SDK then reads them itself.
    OTEL_SDK_DISABLED: z.string().optional(),
    OTEL_TRACES_EXPORTER: z
      .string()
      .transform((text) => text.split(',').map((name) => name.trim()))
      .pipe(z.array(z.enum(['otlp', 'none'], { error: 'must be otlp or none (the gateway exports OTLP)' })))
      .optional(),
    OTEL_EXPORTER_OTLP_ENDPOINT: httpUrl.optional(),
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: httpUrl.optional(),
    OTEL_EXPORTER_OTLP_PROTOCOL: otlpProtocol.optional(),
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: otlpProtocol.optional(),
    OTEL_TRACES_SAMPLER: z.enum(SAMPLERS, { error: `must be one of ${SAMPLERS.join(', ')}` }).optional(),
    OTEL_TRACES_SAMPLER_ARG: z
      .string()
      .trim()
      .regex(/^(0(\.\d+)?|1(\.0+)?)$/, { error: 'must be a ratio from 0 to 1' })
      .optional(),
    OTEL_SERVICE_NAME: z.string().optional(),
    OTEL_RESOURCE_ATTRIBUTES: z.string().optional(),
  })
  .superRefine((env, ctx) => {
    let missing = false;
    for (const name of UPSTREAM_KINDS[env.UPSTREAM].requiredEnv) {
      if (env[name] === undefined) {
        missing = true;
        ctx.addIssue({ code: 'custom', path: [name], message: `is required when UPSTREAM=${env.UPSTREAM}` });
      }
    }
    if (missing) return;
    // What the kind's own schema says of the variables (gemini-decisions: a model named models/…).
    const checked = UpstreamConfig.safeParse(upstreamFields(env));
    if (!checked.success)
      for (const issue of checked.error.issues)
        ctx.addIssue({ code: 'custom', path: [variableOf(issue.path[0])], message: issue.message });
  })
  .transform((env) => ({
    port: env.PORT,
    host: env.HOST,
    database: databaseOf(env.DATABASE_URL, env.DATABASE_POOL_SIZE, env.STORE_TIMEOUT_MS),
    /** The embedded default (no DATABASE_URL): where the bootstrap key is made on first start. */
    embeddedDatabase: env.DATABASE_URL === undefined,
    redis: env.REDIS_URL === undefined ? undefined : { url: env.REDIS_URL, keyPrefix: env.REDIS_KEY_PREFIX },
    requestTimeoutMs: env.REQUEST_TIMEOUT_MS,
    shutdownTimeoutMs: env.SHUTDOWN_TIMEOUT_MS,
    acceptsPerTurn: env.ACCEPTS_PER_TURN,
    listenBacklog: env.LISTEN_BACKLOG,
    adminToken: env.ADMIN_TOKEN,
    rateLimitPerMinute: env.RATE_LIMIT_PER_MINUTE,
    upstream: upstreamFromEnv(env),
    pricing: {
      creditsPer1kInput: env.CREDITS_PER_1K_INPUT_TOKENS,
      creditsPer1kOutput: env.CREDITS_PER_1K_OUTPUT_TOKENS,
    },
    logLevel: env.LOG_LEVEL,
    cache: { scope: env.CACHE_SCOPE, maxBytes: env.CACHE_MAX_BYTES },
    corsOrigins: env.CORS_ORIGINS,
    upstreamMaxBodyBytes: env.UPSTREAM_MAX_BODY_BYTES,
    upstreamCallThread: env.UPSTREAM_CALL_THREAD === 'off' ? ('never' as const) : ('when-busy' as const),
    retention: {
      usageDays: env.USAGE_RETENTION_DAYS,
      decisionDays: env.DECISION_RETENTION_DAYS,
      reviewDays: env.REVIEW_RETENTION_DAYS,
    },
    calibration: {
      refitMinutes: env.CALIBRATION_REFIT_MINUTES,
      windowDays: env.CALIBRATION_WINDOW_DAYS,
      minOutcomes: env.CALIBRATION_MIN_OUTCOMES,
    },
    tracing: tracingOf(env),
    mcp: { maxSessions: env.MCP_MAX_SESSIONS },
    imageBytesInFlight: env.IMAGE_BYTES_IN_FLIGHT,
  }));

/**
 * Tracing is on when OpenTelemetry's variables ask for an OTLP exporter: an endpoint, or
 * OTEL_TRACES_EXPORTER=otlp; OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none keep it off.
 */
function tracingOf(env: {
  OTEL_SDK_DISABLED?: string | undefined;
  OTEL_TRACES_EXPORTER?: string[] | undefined;
  OTEL_EXPORTER_OTLP_ENDPOINT?: string | undefined;
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?: string | undefined;
  OTEL_SERVICE_NAME?: string | undefined;
  OTEL_RESOURCE_ATTRIBUTES?: string | undefined;
}): TracingSettings | undefined {
  // As the SDK reads a boolean: "true", whatever its case.
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined;
  const exporters = env.OTEL_TRACES_EXPORTER;
  if (exporters?.includes('none')) return undefined;
  const endpoint = env.OTEL_EXPORTER_OTLP_ENDPOINT ?? env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  if (endpoint === undefined && !exporters?.includes('otlp')) return undefined;
  const named =
    env.OTEL_SERVICE_NAME !== undefined ||
    /(^|,)\s*service\.name\s*=/.test(env.OTEL_RESOURCE_ATTRIBUTES ?? '');
  return { serviceName: named ? undefined : 'decision-gateway' };
}

export type Config = z.output<typeof ConfigSchema> & {
  /** Upstreams and routes: from GATEWAY_CONFIG's file, or the UPSTREAM* variables. */
  gateway: GatewaySetup;
};

/** `UPSTREAM` and its `UPSTREAM_*` variables: one upstream, named after its kind (docs/routes.md). */
function upstreamFromEnv(env: {
  UPSTREAM: UpstreamKindName;
  UPSTREAM_BASE_URL?: string | undefined;
  UPSTREAM_API_KEY?: string | undefined;
  UPSTREAM_MODEL?: string | undefined;
  UPSTREAM_TIMEOUT_MS: number;
  UPSTREAM_MAX_RETRIES: number;
  UPSTREAM_TOP_LOGPROBS: number;
}) {
  // Already checked by the schema's refinement above; the kind's schema adds its defaults.
  return { name: env.UPSTREAM as string, config: UpstreamConfig.parse(upstreamFields(env)) };
}

/** The `UPSTREAM_*` variables as the kind's fields. */
function upstreamFields(env: Parameters<typeof upstreamFromEnv>[0]) {
  const variables: UpstreamEnv = {
    baseUrl: env.UPSTREAM_BASE_URL,
    apiKey: env.UPSTREAM_API_KEY,
    model: env.UPSTREAM_MODEL,
    timeoutMs: env.UPSTREAM_TIMEOUT_MS,
    maxRetries: env.UPSTREAM_MAX_RETRIES,
    topLogprobs: env.UPSTREAM_TOP_LOGPROBS,
  };
  return { kind: env.UPSTREAM, ...UPSTREAM_KINDS[env.UPSTREAM].fromEnv(variables) };
}

/** The variable that gave a kind's field. */
const variableOf = (field: PropertyKey | undefined): string =>
  ({ baseUrl: 'UPSTREAM_BASE_URL', apiKey: 'UPSTREAM_API_KEY', model: 'UPSTREAM_MODEL' })[
    String(field) as 'model'
  ] ?? 'UPSTREAM';

/** Where keys, credits and usage live: a SQLite file (relative to the working directory) or PostgreSQL. */
function databaseOf(url: string | undefined, poolSize: number, timeoutMs: number) {
  if (url === undefined) return { kind: 'sqlite', path: './data/gateway.db', timeoutMs } as const;
  if (url.startsWith('file:')) return { kind: 'sqlite', path: url.slice('file:'.length), timeoutMs } as const;
  return { kind: 'postgres', url, poolSize, timeoutMs } as const;
}

export type ConfigResult = { ok: true; config: Config } | { ok: false; problems: string[] };

/** The UPSTREAM_* variables that apply to every upstream, so to those of GATEWAY_CONFIG too. */
const FOR_EVERY_UPSTREAM = new Set(['UPSTREAM_MAX_BODY_BYTES', 'UPSTREAM_CALL_THREAD']);

/** Environment (and the GATEWAY_CONFIG file) → configuration, or one line per problem naming it. */
export function loadConfig(env: NodeJS.ProcessEnv): ConfigResult {
  const known = Object.fromEntries(
    Object.keys(ConfigSchema.in.shape).map((name) => [name, emptyAsUndefined(env[name])]),
  );
  const result = ConfigSchema.safeParse(known);
  if (!result.success) {
    return {
      ok: false,
      problems: result.error.issues.map(
        (issue) => `${issue.path.join('.') || 'environment'}: ${issue.message}`,
      ),
    };
  }
  const file = emptyAsUndefined(env.GATEWAY_CONFIG) as string | undefined;
  if (file === undefined) {
    const { name, config: upstream } = result.data.upstream;
    const ttl = Number(known.CACHE_TTL_SECONDS ?? 0);
    return { ok: true, config: { ...result.data, gateway: singleUpstreamSetup(name, upstream, ttl) } };
  }
  // The file defines the upstreams: the variables that would define one are a contradiction.
  const clashing = Object.keys(known).filter(
    (name) =>
      ((name.startsWith('UPSTREAM') && !FOR_EVERY_UPSTREAM.has(name)) || name === 'CACHE_TTL_SECONDS') &&
      known[name] !== undefined,
  );
  if (clashing.length > 0) {
    return {
      ok: false,
      problems: [
        `GATEWAY_CONFIG: not allowed together with ${clashing.join(', ')}; define upstreams (and each route's cache) in the file`,
      ],
    };
  }
  const loaded = loadGatewayFile(file, env);
  return loaded.ok ? { ok: true, config: { ...result.data, gateway: loaded.setup } } : loaded;
}

/** A database URL fit for a log line: the password masked. */
export function withoutPassword(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return 'postgres://…';
  }
}

/**
 * A `.env` file in the working directory, read with Node's own loader when it exists. Variables
 * already set in the environment win over the file.
 */
export function loadDotEnv(path = '.env'): boolean {
  if (!existsSync(path)) return false;
  process.loadEnvFile(path);
  return true;
}
