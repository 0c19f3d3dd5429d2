import { join } from 'node:path';
import type { AppRouter } from '@decision-gateway/api';
import { MODEL_ID } from '@decision-gateway/contract';
import { createTRPCClient, httpLink, TRPCClientError } from '@trpc/client';
import { TypeSafeClient } from '@typesafe-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/environment.ts';
import { buildRoutes } from '../src/routing/build-routes.ts';
import { createUpstreamRegistry } from '../src/upstreams/registry.ts';
import { bearer, post, sampleRequest, startGateway, type TestGateway } from './harness.ts';
import { json, nativeAnswer, startStandIn } from './stand-in-upstream.ts';
import { loadConfigText } from './support/config-text.ts';

const EXAMPLE = join(import.meta.dirname, '../../../examples/gateway.yaml');

describe('GATEWAY_CONFIG', () => {
  it('loads the shipped example, reading TYPESAFE_API_KEY from the environment', () => {
    const loaded = loadConfig({ GATEWAY_CONFIG: EXAMPLE, TYPESAFE_API_KEY: 'ts_secret' });
    if (!loaded.ok) throw new Error(loaded.problems.join('\n'));
    const { upstreams, routes } = loaded.config.gateway;
    expect(Object.keys(upstreams)).toEqual(['local', 'hosted', 'baseline']);
    expect(upstreams.hosted).toMatchObject({
      kind: 'systemone',
      apiKey: 'ts_secret',
      baseUrl: 'https://api.typesafe.ai',
    });
    expect(routes.default).toMatchObject({ upstreams: ['local', 'hosted'], deadlineMs: 20_000 });
    expect(routes.default?.escalate).toEqual({
      to: 'hosted',
      confidenceBelow: 0.6,
      noulWithin: [0.25, 0.75],
    });
    // Twice the largest timeoutMs of its upstreams: hosted's 10000.
    expect(routes.split).toMatchObject({ weights: { local: 90, hosted: 10 }, deadlineMs: 20_000 });
    expect(routes.cheap?.upstreams).toEqual(['baseline']);
  });

  it.each<[string, { path: string } | { text: string }, Record<string, string>, string[]]>([
    [
      'an unset environment variable',
      { path: EXAMPLE },
      {},
      ['upstreams.hosted.apiKey: the environment variable TYPESAFE_API_KEY is not set'],
    ],
    [
      'an undefined upstream',
      {
        text: 'upstreams: { local: { kind: lexical } }\nroutes: { default: { upstreams: [local, hosted] } }',
      },
      {},
      ['routes.default.upstreams[1]: no upstream named "hosted"'],
    ],
    [
      'a bad weight',
      {
        text: 'upstreams: { a: { kind: lexical }, b: { kind: lexical } }\nroutes: { default: { upstreams: [a, b], weights: { a: -1, c: 2 } } }',
      },
      {},
      [
        'routes.default.weights.a: a weight is a number ≥ 0',
        'routes.default.weights.c: "c" is not one of this route\'s upstreams',
      ],
    ],
    [
      'a weight for an upstream not in the route',
      {
        text: 'upstreams: { a: { kind: lexical }, b: { kind: lexical } }\nroutes: { default: { upstreams: [a], weights: { b: 2 } } }',
      },
      {},
      ['routes.default.weights.b: "b" is not one of this route\'s upstreams'],
    ],
    [
      'a deadlineMs below 1',
      { text: 'upstreams: { a: { kind: lexical } }\nroutes: { default: { upstreams: [a], deadlineMs: 0 } }' },
      {},
      ['routes.default.deadlineMs: must be at least 1'],
    ],
    [
      'no default route',
      { text: '{"upstreams": {"a": {"kind": "lexical"}}, "routes": {"main": {"upstreams": ["a"]}}}' },
      {},
      ['routes: one route must be named "default"'],
    ],
    [
      'together with UPSTREAM',
      { path: EXAMPLE },
      { UPSTREAM: 'lexical', CACHE_TTL_SECONDS: '60' },
      [
        "GATEWAY_CONFIG: not allowed together with UPSTREAM, CACHE_TTL_SECONDS; define upstreams (and each route's cache) in the file",
      ],
    ],
    [
      'a missing file',
      { path: '/nowhere/gateway.yaml' },
      {},
      ['GATEWAY_CONFIG: cannot read /nowhere/gateway.yaml (ENOENT)'],
    ],
  ])('stops the start for %s, one line per problem with its path', (_, source, env, problems) => {
    const loaded =
      'text' in source
        ? loadConfigText(source.text, env)
        : loadConfig({ GATEWAY_CONFIG: source.path, ...env });
    expect(loaded).toEqual({ ok: false, problems });
  });
});

describe('routes end to end', () => {
  let gw: TestGateway;
  let closeStandIns: () => Promise<void>;

  beforeAll(async () => {
    // local: unsure choices and scores (confidence 0.55 and 0), usage 412; hosted: sure, usage 100.
    const local = await startStandIn((req, res) => json(res, 200, nativeAnswer(req)));
    const down = await startStandIn((_req, res) => json(res, 500, { detail: 'overloaded' }));
    const hosted = await startStandIn((req, res) => {
      const answer = nativeAnswer(req, { input_tokens: 100, output_tokens: 0 });
      for (const a of Object.values(answer.answers)) if (a.type !== 'noul') a.confidence = 0.9;
      json(res, 200, answer);
    });
    closeStandIns = async () => {
      await Promise.all([local.close(), down.close(), hosted.close()]);
    };
    const loaded = loadConfigText(
      `
upstreams:
  local: { kind: systemone, baseUrl: "\${LOCAL_URL}", maxRetries: 0 }
  down: { kind: systemone, baseUrl: "\${DOWN_URL}", maxRetries: 0 }
  hosted: { kind: systemone, baseUrl: "\${HOSTED_URL}" }
  baseline: { kind: lexical }
routes:
  default:
    upstreams: [local]
    escalate: { to: hosted, confidenceBelow: 0.6 }
  fallback: { upstreams: [down, hosted] }
  plain: { upstreams: [local] }
  cheap: { upstreams: [baseline] }
`,
      { LOCAL_URL: local.url, DOWN_URL: down.url, HOSTED_URL: hosted.url },
    );
    if (!loaded.ok) throw new Error(loaded.problems.join('\n'));
    gw = await startGateway({
      routes: (logger, metrics) =>
        buildRoutes(
          loaded.config.gateway,
          createUpstreamRegistry(loaded.config.gateway.upstreams, logger, { metrics }),
          {
            logger,
            metrics,
          },
        ),
    });
  });
  afterAll(async () => {
    await gw.close();
    await closeStandIns();
  });

  it('escalates the unsure questions, sums usage, charges both calls and names both upstreams', async () => {
    const { id, key } = await gw.createKey({ credits: 10 });
    const response = await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key));
    expect(response.status).toBe(200);
    expect(response.headers.get('x-dg-route')).toBe('default');
    expect(response.headers.get('x-dg-upstream')).toBe('local+hosted');
    const { result, creditsUsed } = response.body.data;
    expect(result.usage).toEqual({ input_tokens: 512, output_tokens: 0 });
    expect(creditsUsed).toBe(0.512);
    expect(result.answers.team.confidence).toBe(0.9); // from hosted
    expect(result.answers.refund).toEqual({ type: 'noul', noul: 0.97 }); // sure: kept from local
    const key_ = await gw.keys.get(id);
    expect(key_.ok && key_.value.credits).toBe(10 - 0.512);
    expect(await gw.store.ledgerBalance(id)).toBe((10 - 0.512) * 1e6);
    const usage = await gw.keys.usage(id, 1);
    expect(usage.ok && usage.value.recent[0]).toMatchObject({
      route: 'default',
      upstream: 'local+hosted',
      creditsUsed: 0.512,
    });
  });

  it('falls back past a failing upstream, charging only the answer', async () => {
    const { key } = await gw.createKey({ credits: 10 });
    const response = await post(gw.url, '/v1/systemone', sampleRequest(), {
      ...bearer(key),
      'x-dg-route': 'fallback',
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('x-dg-upstream')).toBe('hosted');
    expect(response.body.data.creditsUsed).toBe(0.1);
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    expect(metrics).toContain('dg_route_fallbacks_total{route="fallback",upstream="down"} 1');
    expect(metrics).toContain('dg_upstream_calls_total{upstream="down",outcome="error"} 1');
    expect(metrics).toMatch(/dg_route_escalations_total\{route="default",outcome="ok"\} [1-9]/);
  });

  it('reserves for the escalation too: a key between one bound and two gets 402 on the escalating route only', async () => {
    const bytes = Buffer.byteLength(JSON.stringify(sampleRequest()));
    const oneBound = (bytes + 3 * 256) / 1000; // systemone's bound: body bytes + 256 per question
    const { key } = await gw.createKey({ credits: Math.round(oneBound * 1.5 * 1000) / 1000 });
    const escalating = await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key));
    expect(escalating.body.code).toBe(40200);
    const plain = await post(gw.url, '/v1/systemone', sampleRequest(), {
      ...bearer(key),
      'x-dg-route': 'plain',
    });
    expect(plain.status).toBe(200);
  });

  it('keeps the ledger exact under 50 concurrent requests that fall back and escalate', async () => {
    const { id, key } = await gw.createKey({ credits: 1000 });
    const responses = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        post(gw.url, '/v1/systemone', sampleRequest(), {
          ...bearer(key),
          'x-dg-route': i % 2 ? 'fallback' : 'default',
        }),
      ),
    );
    expect(responses.every((r) => r.status === 200)).toBe(true);
    const upstreams = new Set(responses.map((r) => r.headers.get('x-dg-upstream')));
    expect(upstreams).toEqual(new Set(['local+hosted', 'hosted']));
    const charged = responses.reduce((sum, r) => sum + Math.round(r.body.data.creditsUsed * 1e6), 0);
    // 25 escalated at 0.512 and 25 fallbacks at 0.1: only answers are billed.
    expect(charged).toBe(25 * 512_000 + 25 * 100_000);
    expect(await gw.store.ledgerBalance(id)).toBe(1000 * 1e6 - charged);
    const balance = await gw.keys.get(id);
    expect(balance.ok && Math.round((balance.value.credits as number) * 1e6)).toBe(1000 * 1e6 - charged);
    const usage = await gw.keys.usage(id, 100);
    expect(usage.ok && usage.value.totals.requests).toBe(50);
  });

  it('takes the key’s route unless the header names another', async () => {
    const created = await gw.keys.create({ name: 'cheap', credits: 10, route: 'cheap' });
    if (!created.ok) throw new Error(created.error.message);
    const key = created.value.key;
    const own = await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key));
    expect([own.headers.get('x-dg-route'), own.headers.get('x-dg-upstream')]).toEqual(['cheap', 'baseline']);
    const overridden = await post(gw.url, '/v1/systemone', sampleRequest(), {
      ...bearer(key),
      'x-dg-route': 'plain',
    });
    expect([overridden.headers.get('x-dg-route'), overridden.headers.get('x-dg-upstream')]).toEqual([
      'plain',
      'local',
    ]);
    const refused = await gw.keys.create({ name: 'bad', credits: 1, route: 'nope' });
    expect(refused).toMatchObject({
      ok: false,
      error: {
        code: 40001,
        message: 'route: no route named "nope"; the routes are: cheap, default, fallback, plain',
      },
    });
  });

  it('answers 40004 for an unknown route on all three doors, after authentication', async () => {
    const { key } = await gw.createKey({ credits: 10 });
    const headers = { ...bearer(key), 'x-dg-route': 'nope' };
    const rest = await post(gw.url, '/v1/systemone', sampleRequest(), headers);
    expect(rest.status).toBe(400);
    expect(rest.body).toMatchObject({ code: 40004, error: { type: 'unknown_route' } });
    expect(rest.body.message).toBe('no route named "nope"; the routes are: cheap, default, fallback, plain');

    const trpc = createTRPCClient<AppRouter>({ links: [httpLink({ url: `${gw.url}/trpc`, headers })] });
    const error = await trpc.evaluate.mutate(sampleRequest() as never).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TRPCClientError);
    expect((error as TRPCClientError<AppRouter>).data).toMatchObject({ code: 40004, httpStatus: 400 });

    const sdk = new TypeSafeClient({
      apiKey: key,
      baseURL: `${gw.url}/native`,
      defaultHeaders: { 'x-dg-route': 'nope' },
      logLevel: 'off',
      retry: { maxRetries: 0 },
    });
    const native = await sdk
      .systemOne({ model: MODEL_ID, state: 's', questions: { q: { type: 'noul', instructions: 'yes?' } } })
      .catch((e: unknown) => e);
    expect(native).toMatchObject({ status: 400 });

    // Authentication first; then 40002 and 40003 come before 40004, and 40004 before 40001.
    expect((await post(gw.url, '/v1/systemone', sampleRequest(), { 'x-dg-route': 'nope' })).body.code).toBe(
      40100,
    );
    expect(
      (await post(gw.url, '/v1/systemone', { ...sampleRequest(), model: 'x/y' }, headers)).body.code,
    ).toBe(40003);
    expect(
      (await post(gw.url, '/v1/systemone', { ...sampleRequest(), questions: {} }, headers)).body.code,
    ).toBe(40002);
    expect(
      (await post(gw.url, '/v1/systemone', { ...sampleRequest(), state: null }, headers)).body.code,
    ).toBe(40004);
    const afterRoute = await post(gw.url, '/v1/systemone', { ...sampleRequest(), state: null }, bearer(key));
    expect([afterRoute.body.code, afterRoute.headers.get('x-dg-route')]).toEqual([40001, 'default']);
  });
});
