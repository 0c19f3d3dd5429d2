import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadConfig } from './environment.ts';

describe('loadConfig', () => {
  it('has the documented defaults (docs/operating.md#configuration)', () => {
    const loaded = loadConfig({});
    if (!loaded.ok) throw new Error(loaded.problems.join('\n'));
    expect(loaded.config).toMatchObject({
      port: 8787,
      host: '127.0.0.1',
      embeddedDatabase: true,
      adminToken: undefined,
      rateLimitPerMinute: 600,
      upstream: { name: 'lexical', config: { kind: 'lexical', timeoutMs: 10_000 } },
      pricing: { creditsPer1kInput: 1, creditsPer1kOutput: 0 },
      logLevel: 'info',
      database: { kind: 'sqlite', path: './data/gateway.db' },
      redis: undefined,
      requestTimeoutMs: 30_000,
      shutdownTimeoutMs: 30_000,
      acceptsPerTurn: 16,
      listenBacklog: 4096,
      mcp: { maxSessions: 1000 },
      upstreamCallThread: 'when-busy',
    });
  });

  it('reads every variable and treats empty ones as unset', () => {
    const loaded = loadConfig({
      PORT: '9000',
      HOST: '0.0.0.0',
      DATABASE_URL: 'file:/tmp/x.db',
      ADMIN_TOKEN: 'a'.repeat(32),
      RATE_LIMIT_PER_MINUTE: '0',
      UPSTREAM_TIMEOUT_MS: '2500',
      CREDITS_PER_1K_INPUT_TOKENS: '0.5',
      CREDITS_PER_1K_OUTPUT_TOKENS: '2',
      LOG_LEVEL: '',
    });
    if (!loaded.ok) throw new Error(loaded.problems.join('\n'));
    expect(loaded.config).toMatchObject({
      port: 9000,
      host: '0.0.0.0',
      database: { kind: 'sqlite', path: '/tmp/x.db' },
      embeddedDatabase: false,
      rateLimitPerMinute: 0,
      upstream: { config: { timeoutMs: 2500 } },
      pricing: { creditsPer1kInput: 0.5, creditsPer1kOutput: 2 },
      logLevel: 'info',
    });
  });

  it('defaults systemone to the hosted API and its model', () => {
    const loaded = loadConfig({ UPSTREAM: 'systemone' });
    if (!loaded.ok) throw new Error(loaded.problems.join('\n'));
    expect(loaded.config.upstream.config).toMatchObject({
      kind: 'systemone',
      baseUrl: 'https://api.typesafe.ai',
      model: 'jev-1.13.0',
    });
  });

  it('needs a base URL and a model for openai', () => {
    const loaded = loadConfig({ UPSTREAM: 'openai' });
    expect(loaded.ok ? [] : loaded.problems).toEqual([
      'UPSTREAM_BASE_URL: is required when UPSTREAM=openai',
      'UPSTREAM_MODEL: is required when UPSTREAM=openai',
    ]);
    const ok = loadConfig({
      UPSTREAM: 'openai',
      UPSTREAM_BASE_URL: 'http://127.0.0.1:8000/v1',
      UPSTREAM_MODEL: 'qwen',
    });
    expect(ok.ok && ok.config.upstream).toMatchObject({
      name: 'openai',
      config: { kind: 'openai', topLogprobs: 20, model: 'qwen', maxRetries: 2, timeoutMs: 10_000 },
    });
  });

  it('reads PostgreSQL, its pool, Redis and the timeouts', () => {
    const loaded = loadConfig({
      DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/gateway',
      DATABASE_POOL_SIZE: '4',
      REDIS_URL: 'redis://127.0.0.1:6379',
      REDIS_KEY_PREFIX: 'gw1:',
      REQUEST_TIMEOUT_MS: '5000',
      SHUTDOWN_TIMEOUT_MS: '1000',
      STORE_TIMEOUT_MS: '750',
      ACCEPTS_PER_TURN: '1',
      LISTEN_BACKLOG: '511',
    });
    if (!loaded.ok) throw new Error(loaded.problems.join('\n'));
    expect(loaded.config).toMatchObject({
      database: {
        kind: 'postgres',
        url: 'postgres://postgres@127.0.0.1:5432/gateway',
        poolSize: 4,
        timeoutMs: 750,
      },
      embeddedDatabase: false,
      redis: { url: 'redis://127.0.0.1:6379', keyPrefix: 'gw1:' },
      requestTimeoutMs: 5000,
      shutdownTimeoutMs: 1000,
      acceptsPerTurn: 1,
      listenBacklog: 511,
    });
  });

  it.each([
    ['PORT', 'abc', 'PORT: must be a whole number'],
    ['PORT', '70000', 'PORT: must be at most 65535'],
    ['DATABASE_URL', 'mysql://x', 'DATABASE_URL: must be file:PATH'],
    ['DATABASE_POOL_SIZE', '0', 'DATABASE_POOL_SIZE: must be at least 1'],
    ['REDIS_URL', 'http://x', 'REDIS_URL: must be redis://… or rediss://…'],
    ['REQUEST_TIMEOUT_MS', 'soon', 'REQUEST_TIMEOUT_MS: must be a whole number'],
    ['STORE_TIMEOUT_MS', '0', 'STORE_TIMEOUT_MS: must be at least 1'],
    ['ACCEPTS_PER_TURN', '0', 'ACCEPTS_PER_TURN: must be at least 1'],
    ['ACCEPTS_PER_TURN', '257', 'ACCEPTS_PER_TURN: must be at most 256'],
    ['LISTEN_BACKLOG', '0', 'LISTEN_BACKLOG: must be at least 1'],
    ['ADMIN_TOKEN', 'short', 'ADMIN_TOKEN: must be at least 16 characters'],
    ['RATE_LIMIT_PER_MINUTE', '-1', 'RATE_LIMIT_PER_MINUTE: must be a whole number'],
    ['UPSTREAM', 'magic', 'UPSTREAM: must be one of lexical, systemone, openai'],
    ['UPSTREAM', 'openai', 'UPSTREAM_BASE_URL: is required when UPSTREAM=openai'],
    ['UPSTREAM_BASE_URL', 'ftp://x', 'UPSTREAM_BASE_URL: must be an http(s) URL'],
    ['UPSTREAM_TIMEOUT_MS', '0', 'UPSTREAM_TIMEOUT_MS: must be at least 1'],
    [
      'CREDITS_PER_1K_INPUT_TOKENS',
      '-1',
      'CREDITS_PER_1K_INPUT_TOKENS: must be a non-negative decimal number',
    ],
    ['MCP_MAX_SESSIONS', '0', 'MCP_MAX_SESSIONS: must be at least 1'],
    ['UPSTREAM_CALL_THREAD', 'sometimes', 'UPSTREAM_CALL_THREAD: must be when-busy or off'],
    ['LOG_LEVEL', 'loud', 'LOG_LEVEL: must be fatal, error, warn, info, debug, trace or silent'],
  ])('names %s=%s', (name, value, problem) => {
    const loaded = loadConfig({ [name]: value });
    expect(loaded.ok).toBe(false);
    if (!loaded.ok) expect(loaded.problems.join('\n')).toContain(problem);
  });

  it('keeps every upstream call on the serving thread with UPSTREAM_CALL_THREAD=off, beside a configuration file too', () => {
    const loaded = loadConfig({ UPSTREAM_CALL_THREAD: 'off' });
    if (!loaded.ok) throw new Error(loaded.problems.join('\n'));
    expect(loaded.config.upstreamCallThread).toBe('never');
    const withFile = loadConfig({
      GATEWAY_CONFIG: fileURLToPath(new URL('../../../../examples/gateway.yaml', import.meta.url)),
      UPSTREAM_CALL_THREAD: 'off',
      UPSTREAM_MAX_BODY_BYTES: '2048',
      TYPESAFE_API_KEY: 'ts-x',
    });
    if (!withFile.ok) throw new Error(withFile.problems.join('\n'));
    expect(withFile.config).toMatchObject({ upstreamCallThread: 'never', upstreamMaxBodyBytes: 2048 });
  });

  describe('tracing (docs/tracing.md)', () => {
    const tracing = (env: Record<string, string>) => {
      const loaded = loadConfig(env);
      if (!loaded.ok) throw new Error(loaded.problems.join('\n'));
      return loaded.config.tracing;
    };

    it('is off unless OpenTelemetry’s variables ask for an OTLP exporter', () => {
      expect(tracing({})).toBeUndefined();
      expect(tracing({ OTEL_SERVICE_NAME: 'x', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })).toBeUndefined();
      expect(tracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toEqual({
        serviceName: 'decision-gateway',
      });
      expect(tracing({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces' })).toBeDefined();
      expect(tracing({ OTEL_TRACES_EXPORTER: 'otlp' })).toBeDefined();
      expect(
        tracing({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }),
      ).toBeUndefined();
      expect(
        tracing({ OTEL_SDK_DISABLED: 'TRUE', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }),
      ).toBeUndefined();
      expect(tracing({ OTEL_SDK_DISABLED: 'false', OTEL_TRACES_EXPORTER: 'otlp' })).toBeDefined();
    });

    it('leaves the service name to OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES when they give one', () => {
      const on = { OTEL_TRACES_EXPORTER: 'otlp' };
      expect(tracing({ ...on, OTEL_SERVICE_NAME: 'triage' })).toEqual({ serviceName: undefined });
      expect(tracing({ ...on, OTEL_RESOURCE_ATTRIBUTES: 'team=a, service.name=triage' })).toEqual({
        serviceName: undefined,
      });
      expect(tracing({ ...on, OTEL_RESOURCE_ATTRIBUTES: 'service.namespace=ai' })).toEqual({
        serviceName: 'decision-gateway',
      });
    });

    it('stops the start on a value the SDK would silently replace', () => {
      const loaded = loadConfig({
        OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'json',
        OTEL_TRACES_EXPORTER: 'otlp,console',
        OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318',
        OTEL_TRACES_SAMPLER: 'sometimes',
        OTEL_TRACES_SAMPLER_ARG: '1.5',
      });
      expect(loaded.ok).toBe(false);
      if (loaded.ok) return;
      expect(loaded.problems).toEqual([
        'OTEL_TRACES_EXPORTER.1: must be otlp or none (the gateway exports OTLP)',
        'OTEL_EXPORTER_OTLP_ENDPOINT: must be an http(s) URL',
        'OTEL_EXPORTER_OTLP_PROTOCOL: must be http/protobuf or http/json',
        'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: must be http/protobuf or http/json',
        'OTEL_TRACES_SAMPLER: must be one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio',
        'OTEL_TRACES_SAMPLER_ARG: must be a ratio from 0 to 1',
      ]);
    });
  });
});
