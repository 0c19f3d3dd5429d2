import { describe, expect, it } from 'vitest';
import { loadConfig } from './config.ts';

describe('loadConfig', () => {
  it('has the documented defaults (README, Configuration)', () => {
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
    ['LOG_LEVEL', 'loud', 'LOG_LEVEL: must be fatal, error, warn, info, debug, trace or silent'],
  ])('names %s=%s', (name, value, problem) => {
    const loaded = loadConfig({ [name]: value });
    expect(loaded.ok).toBe(false);
    if (!loaded.ok) expect(loaded.problems.join('\n')).toContain(problem);
  });
});
