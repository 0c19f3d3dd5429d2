import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AppRouter } from '@decision-gateway/api';
import { MODEL_ID } from '@decision-gateway/contract';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createTRPCClient, httpBatchLink } from '@trpc/client';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type GatewayProcess, killHard, listeningAddress, startGatewayProcess } from './gateway-process.ts';
import { ADMIN_TOKEN, bearer, get, post, sampleRequest, sleep } from './harness.ts';
import { type OtlpReceiver, type ReceivedSpan, shapeOf, startOtlpReceiver, treeOf } from './otlp-receiver.ts';
import { json, nativeAnswer, type StandIn, startStandIn } from './stand-in-upstream.ts';
import { inlineAsset, makeImage } from './support/images.ts';

// docs/tracing.md: a real gateway process started with OpenTelemetry's standard variables,
// exporting to a real OTLP/HTTP receiver on loopback; upstreams are System One stand-ins.

const UPSTREAM_KEY = 'sk-upstream-secret-0123456789abcdef';
const BROWSER = 'http://127.0.0.1:5173';

/** A System One stand-in answering every question (choice confidence 0.55, score 0: unsure). */
const answering = () =>
  startStandIn((request, res) =>
    json(res, 200, nativeAnswer(request, { input_tokens: 300, output_tokens: 2 }), {
      'x-typesafe-request-id': `up-${Math.random().toString(16).slice(2, 10)}`,
    }),
  );

/** The gateway's configuration file: one route per behaviour a trace must show. */
function configFile(dir: string, up: Record<string, StandIn>): string {
  const path = join(dir, 'gateway.json');
  const systemone = (name: string, extra: Record<string, unknown> = {}) => ({
    kind: 'systemone',
    baseUrl: up[name]?.url,
    apiKey: UPSTREAM_KEY,
    model: `${name}-model`,
    ...extra,
  });
  writeFileSync(
    path,
    JSON.stringify({
      upstreams: {
        steady: systemone('steady'),
        // Nothing listens there: a connection refused, at once.
        down: { ...systemone('steady'), baseUrl: 'http://127.0.0.1:9', maxRetries: 0, model: 'down-model' },
        flaky: systemone('flaky', { maxRetries: 2 }),
        strong: systemone('strong'),
        small: systemone('steady', { maxQuestions: 2, model: 'small-model' }),
        seeing: systemone('steady', { images: true, model: 'seeing-model' }),
        // Answers only when its suite says so (the steady stand-in where a suite has none).
        held: systemone(up.held ? 'held' : 'steady', { model: 'held-model' }),
      },
      routes: {
        default: { upstreams: ['steady'], cache: { ttlSeconds: 3600 } },
        fallback: { upstreams: ['down', 'steady'] },
        retry: { upstreams: ['flaky'] },
        escalate: { upstreams: ['steady'], escalate: { to: 'strong', confidenceBelow: 0.6 } },
        groups: { upstreams: ['small'] },
        vision: { upstreams: ['seeing'] },
        held: { upstreams: ['held'] },
      },
    }),
  );
  return path;
}

interface Running {
  gateway: GatewayProcess;
  url: string;
  key: string;
  dir: string;
}

async function startTraced(
  receiver: { url: string },
  up: Record<string, StandIn>,
  env: Record<string, string> = {},
) {
  const dir = mkdtempSync(join(tmpdir(), 'dg-tracing-'));
  const gateway = startGatewayProcess(dir, {
    GATEWAY_CONFIG: configFile(dir, up),
    ADMIN_TOKEN,
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    // Exported every 100 ms rather than 5 s: the SDK's own variable.
    OTEL_BSP_SCHEDULE_DELAY: '100',
    ...env,
  });
  const url = await listeningAddress(gateway);
  const key = gateway.stdout().match(/dg_[A-Za-z0-9_-]{43}/)?.[0];
  if (key === undefined) throw new Error('no bootstrap key');
  return { gateway, url, key, dir } satisfies Running;
}

async function stop(running: Running | undefined) {
  if (running === undefined) return;
  running.gateway.child.kill('SIGTERM');
  await running.gateway.exited;
  rmSync(running.dir, { recursive: true, force: true });
}

/** A suite's world: an OTLP receiver, the stand-ins, a gateway traced to the receiver; and its end. */
async function startSuite(standIns: () => Promise<Record<string, StandIn>>, env: Record<string, string>) {
  const receiver = await startOtlpReceiver();
  const up = await standIns();
  const running = await startTraced(receiver, up, env);
  return {
    receiver,
    up,
    running,
    async close() {
      await stop(running);
      await receiver.close();
      for (const standIn of Object.values(up)) await standIn.close();
    },
  };
}

/** The SERVER span of the request with this id, once received with all its descendants' spans. */
async function traceOf(receiver: OtlpReceiver, requestId: string, spansExpected: number) {
  let root: ReceivedSpan | undefined;
  await receiver.waitFor((spans) => {
    root = spans.find((s) => s.kind === 'SERVER' && s.attributes['dg.request_id'] === requestId);
    return root !== undefined && spans.filter((s) => s.traceId === root?.traceId).length >= spansExpected;
  });
  const server = root as ReceivedSpan;
  return {
    server,
    tree: treeOf(receiver.spans, server),
    all: receiver.spans.filter((s) => s.traceId === server.traceId),
  };
}

const routed = (route: string, key: string, extra: Record<string, string> = {}) => ({
  ...bearer(key),
  'x-dg-route': route,
  ...extra,
});

const clientSpans = (spans: ReceivedSpan[]) => spans.filter((s) => s.kind === 'CLIENT');

/** A request over the `fallback` route: its first upstream refuses, the next answers. */
const FALLBACK_TREE = [
  'SERVER POST /v1/systemone',
  '  INTERNAL dg.store.reserve',
  '  INTERNAL dg.route fallback',
  '    CLIENT decide down-model',
  '    CLIENT decide steady-model',
  '  INTERNAL dg.store.settle',
];

describe('tracing over OTLP/JSON (OTEL_EXPORTER_OTLP_PROTOCOL=http/json)', () => {
  let suite: Awaited<ReturnType<typeof startSuite>> | undefined;
  let receiver: OtlpReceiver;
  let up: Record<string, StandIn>;
  let running: Running | undefined;
  let flakyCalls = 0;
  /** The held stand-in's calls, each answered when its suite releases it. */
  const heldCalls: (() => void)[] = [];

  beforeAll(async () => {
    const standIns = async () => ({
      steady: await answering(),
      strong: await answering(),
      held: await startStandIn(async (request, res) => {
        await new Promise<void>((release) => heldCalls.push(release));
        json(res, 200, nativeAnswer(request, { input_tokens: 50, output_tokens: 1 }));
      }),
      // 503 on every odd call, an answer on every even one: each request is retried once.
      flaky: await startStandIn((request, res) => {
        flakyCalls++;
        // It asks for a 200 ms wait before the retry: a wait no span may hold.
        if (flakyCalls % 2 === 1) return json(res, 503, { detail: 'busy' }, { 'retry-after-ms': '200' });
        return json(res, 200, nativeAnswer(request, { input_tokens: 120, output_tokens: 1 }));
      }),
    });
    suite = await startSuite(standIns, { OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', CORS_ORIGINS: BROWSER });
    ({ receiver, up, running } = suite);
  });
  afterAll(() => suite?.close());

  it('a success: SERVER → store steps and the route → one CLIENT call with the GenAI attributes', async () => {
    const { url, key } = running as Running;
    const response = await post(
      url,
      '/v1/systemone',
      { ...sampleRequest(), state: 'first of its kind' },
      bearer(key),
    );
    expect(response.status).toBe(200);
    const requestId = response.headers.get('x-request-id') as string;
    const { server, tree } = await traceOf(receiver, requestId, 5);
    expect(shapeOf(tree)).toEqual([
      'SERVER POST /v1/systemone',
      '  INTERNAL dg.store.reserve',
      '  INTERNAL dg.route default',
      '    CLIENT decide steady-model',
      '  INTERNAL dg.store.settle',
    ]);
    expect(server.parentSpanId).toBe('');
    expect(server.statusCode).toBe(0);
    expect(server.attributes).toMatchObject({
      'http.request.method': 'POST',
      'url.path': '/v1/systemone',
      'http.route': '/v1/systemone',
      'http.response.status_code': 200,
      'dg.door': 'rest',
      'dg.request_id': requestId,
      'dg.code': 0,
      'dg.key_prefix': (await get(url, '/admin/keys', bearer(ADMIN_TOKEN))).body.data.keys[0].prefix,
      'dg.route': 'default',
      'dg.cache': 'miss',
      'dg.credits_used': response.body.data.creditsUsed,
      'dg.questions': 3,
    });
    const client = tree.children[1]?.children[0]?.span as ReceivedSpan;
    const answeredBy = up.steady?.seen.at(-1);
    expect(client.attributes).toEqual({
      'gen_ai.operation.name': 'decide',
      'gen_ai.provider.name': 'systemone',
      'gen_ai.request.model': 'steady-model',
      'gen_ai.response.model': 'jev-1.13.0',
      'gen_ai.response.id': expect.stringMatching(/^up-[0-9a-f]+$/),
      'gen_ai.usage.input_tokens': 300,
      'gen_ai.usage.output_tokens': 2,
      'server.address': '127.0.0.1',
      'server.port': Number(new URL(up.steady?.url as string).port),
      'http.response.status_code': 200,
      'dg.upstream': 'steady',
      'dg.attempt': 1,
      'dg.retry': 0,
      'dg.escalation': false,
      'dg.questions': 3,
    });
    // The upstream was called with the CLIENT span's own context.
    expect(answeredBy?.headers.traceparent).toBe(`00-${client.traceId}-${client.spanId}-01`);
    // GenAI attributes on upstream calls only.
    const others = receiver.spans.filter((s) => s.kind !== 'CLIENT');
    expect(others.flatMap((s) => Object.keys(s.attributes)).filter((k) => k.startsWith('gen_ai.'))).toEqual(
      [],
    );
  });

  it('an image: dg.images and dg.image_bytes on the SERVER span, and no byte of the image in any span', async () => {
    const { url, key } = running as Running;
    const photo = await makeImage('png', 48, 32, { noise: true });
    const response = await post(
      url,
      '/v1/systemone',
      {
        model: 'vendor/model-1.13',
        state: 'The parcel in p1.',
        questions: { damaged: { type: 'noul', instructions: 'Is p1 damaged?' } },
        assets: { p1: inlineAsset('png', photo) },
      },
      routed('vision', key),
    );
    expect(response.status).toBe(200);
    const { server, all } = await traceOf(receiver, response.headers.get('x-request-id') as string, 5);
    expect(server.attributes).toMatchObject({ 'dg.images': 1, 'dg.image_bytes': photo.length });
    const base64 = photo.toString('base64');
    const exported = JSON.stringify(all, (_key, value) =>
      typeof value === 'bigint' ? String(value) : value,
    );
    expect(exported).toContain('dg.image_bytes');
    expect(exported).not.toContain(base64.slice(100, 140));
  });

  it('a fallback: the refused connection and the next upstream are two CLIENT spans, attempts 1 and 2', async () => {
    const { url, key } = running as Running;
    const response = await post(url, '/v1/systemone', sampleRequest(), routed('fallback', key));
    expect(response.status).toBe(200);
    const { tree } = await traceOf(receiver, response.headers.get('x-request-id') as string, 6);
    expect(shapeOf(tree)).toEqual(FALLBACK_TREE);
    const [down, steady] = (tree.children[1]?.children ?? []).map((c) => c.span);
    expect(down?.statusCode).toBe(2);
    expect(down?.attributes).toMatchObject({
      'error.type': 'ECONNREFUSED',
      'dg.attempt': 1,
      'dg.upstream': 'down',
    });
    expect(down?.attributes['http.response.status_code']).toBeUndefined();
    expect(steady?.attributes).toMatchObject({ 'dg.attempt': 2, 'dg.retry': 0, 'dg.upstream': 'steady' });
    expect(tree.children[1]?.span.attributes).toMatchObject({
      'dg.route': 'fallback',
      'dg.upstream': 'steady',
    });
  });

  it('a retry: each HTTP call its own span, the attempt kept, the retry counted, the backoff in neither', async () => {
    const { url, key } = running as Running;
    const response = await post(url, '/v1/systemone', sampleRequest(), routed('retry', key));
    expect(response.status).toBe(200);
    const { tree } = await traceOf(receiver, response.headers.get('x-request-id') as string, 6);
    const calls = (tree.children[1]?.children ?? []).map((c) => c.span);
    expect(
      calls.map((c) => [
        c.attributes['dg.attempt'],
        c.attributes['dg.retry'],
        c.attributes['http.response.status_code'],
      ]),
    ).toEqual([
      [1, 0, 503],
      [1, 1, 200],
    ]);
    expect(calls[0]?.statusCode).toBe(2);
    expect(calls[0]?.attributes['error.type']).toBe('503');
    expect(calls[1]?.statusCode).toBe(0);
    // The 200 ms wait the upstream asked for lies between the two spans, in neither (the SDK takes
    // a start from Date.now(), whole milliseconds: a margin of a few).
    const gapMs = Number((calls[1] as ReceivedSpan).start - (calls[0] as ReceivedSpan).end) / 1e6;
    expect(gapMs).toBeGreaterThan(190);
  });

  it('an escalation: the unsure questions go to the target in a CLIENT span of their own', async () => {
    const { url, key } = running as Running;
    const response = await post(
      url,
      '/v1/systemone',
      { ...sampleRequest(), state: 'escalate me' },
      routed('escalate', key),
    );
    expect(response.status).toBe(200);
    expect(response.headers.get('x-dg-upstream')).toBe('steady+strong');
    const { tree } = await traceOf(receiver, response.headers.get('x-request-id') as string, 6);
    const calls = (tree.children[1]?.children ?? []).map((c) => c.span);
    expect(
      calls.map((c) => [
        c.name,
        c.attributes['dg.attempt'],
        c.attributes['dg.escalation'],
        c.attributes['dg.questions'],
      ]),
    ).toEqual([
      ['decide steady-model', 1, false, 3],
      // The choice (0.55) and the score (0) were unsure; the noul (0.97) was not.
      ['decide strong-model', 2, true, 2],
    ]);
  });

  it('a group split: one CLIENT span per group, all of the same attempt', async () => {
    const { url, key } = running as Running;
    const request = sampleRequest();
    const response = await post(url, '/v1/systemone', request, routed('groups', key));
    expect(response.status).toBe(200);
    const { tree } = await traceOf(receiver, response.headers.get('x-request-id') as string, 6);
    const calls = (tree.children[1]?.children ?? []).map((c) => c.span);
    expect(calls.map((c) => c.attributes['dg.questions']).sort()).toEqual([1, 2]);
    expect(calls.every((c) => c.attributes['dg.attempt'] === 1 && c.name === 'decide small-model')).toBe(
      true,
    );
  });

  it('a cache hit: no route and no upstream call, its record written, dg.cache hit and 0 credits', async () => {
    const { url, key } = running as Running;
    const request = { ...sampleRequest(), state: 'asked twice' };
    expect((await post(url, '/v1/systemone', request, bearer(key))).headers.get('x-dg-cache')).toBe('miss');
    const hit = await post(url, '/v1/systemone', request, bearer(key));
    expect(hit.headers.get('x-dg-cache')).toBe('hit');
    const { server, tree } = await traceOf(receiver, hit.headers.get('x-request-id') as string, 2);
    expect(shapeOf(tree)).toEqual(['SERVER POST /v1/systemone', '  INTERNAL dg.store.record']);
    expect(server.attributes).toMatchObject({ 'dg.cache': 'hit', 'dg.credits_used': 0, 'dg.code': 0 });
  });

  it('a 401 and a 400: the SERVER span in error with the error table’s type', async () => {
    const { url, key } = running as Running;
    const anonymous = await post(url, '/v1/systemone', sampleRequest());
    expect(anonymous.status).toBe(401);
    const unauthorized = await traceOf(receiver, anonymous.headers.get('x-request-id') as string, 1);
    expect(shapeOf(unauthorized.tree)).toEqual(['SERVER POST /v1/systemone']);
    expect(unauthorized.server.statusCode).toBe(2);
    expect(unauthorized.server.attributes).toMatchObject({
      'http.response.status_code': 401,
      'dg.code': 40100,
      'error.type': 'missing_api_key',
    });
    const broken = await post(url, '/v1/systemone', '{"state": ', bearer(key));
    expect(broken.status).toBe(400);
    const invalid = await traceOf(receiver, broken.headers.get('x-request-id') as string, 2);
    // A failed request is recorded (0 credits): its store step is in the trace.
    expect(shapeOf(invalid.tree)).toEqual(['SERVER POST /v1/systemone', '  INTERNAL dg.store.release']);
    expect(invalid.server.attributes).toMatchObject({ 'dg.code': 40000, 'error.type': 'invalid_json' });
    expect(invalid.server.attributes['dg.credits_used']).toBeUndefined();
  });

  it('a tRPC batch: one SERVER span, an INTERNAL span per operation with its own request id', async () => {
    const { url, key } = running as Running;
    let requestId = '';
    const client = createTRPCClient<AppRouter>({
      links: [
        httpBatchLink({
          url: `${url}/trpc`,
          headers: () => bearer(key),
          fetch: async (input, init) => {
            const response = await fetch(input, init);
            requestId = response.headers.get('x-request-id') ?? '';
            return response;
          },
        }),
      ],
    });
    const request = sampleRequest() as Parameters<typeof client.evaluate.mutate>[0];
    await Promise.all([
      client.evaluate.mutate({ ...request, state: 'batch one' }),
      client.evaluate.mutate({ ...request, state: 'batch two' }),
    ]);
    const { server, tree } = await traceOf(receiver, requestId, 11);
    expect(server.name).toBe('POST /trpc/:path');
    expect(server.attributes['dg.door']).toBe('trpc');
    const operations = tree.children.map((c) => c.span);
    expect(operations.map((s) => [s.kind, s.name, s.attributes['dg.request_id']]).sort()).toEqual([
      ['INTERNAL', 'trpc evaluate', `${requestId}_0`],
      ['INTERNAL', 'trpc evaluate', `${requestId}_1`],
    ]);
    for (const operation of tree.children) {
      expect(operation.span.attributes).toMatchObject({
        'dg.code': 0,
        'dg.route': 'default',
        'dg.questions': 3,
      });
      expect(shapeOf(operation).slice(1)).toEqual([
        '  INTERNAL dg.store.reserve',
        '  INTERNAL dg.route default',
        '    CLIENT decide steady-model',
        '  INTERNAL dg.store.settle',
      ]);
    }
  });

  it('every door has its SERVER span, named by its route pattern', async () => {
    const { url, key } = running as Running;
    const native = await post(url, '/native/v1/systemone', sampleRequest(), bearer(key));
    const openai = await new OpenAI({ apiKey: key, baseURL: `${url}/openai/v1`, maxRetries: 0 }).decisions
      .create({
        model: MODEL_ID,
        input: 'A ticket.',
        questions: [{ type: 'predicate', name: 'refund', instructions: 'Asks for a refund.' }],
      })
      .withResponse();
    const admin = await get(url, '/admin/keys', bearer(ADMIN_TOKEN));
    const health = await get(url, '/healthz');
    // The console's page is HTML (or a 503 where it was never built): only its headers are read.
    const page = await fetch(`${url}/console/`);
    await page.arrayBuffer();
    const missing = await get(url, '/nowhere');
    const expected: [string | null, string, string, number][] = [
      [native.headers.get('x-request-id'), 'POST /native/v1/systemone', 'native', 200],
      [openai.response.headers.get('x-request-id'), 'POST /openai/v1/decisions', 'openai', 200],
      [admin.headers.get('x-request-id'), 'GET /admin/keys', 'admin', 200],
      [health.headers.get('x-request-id'), 'GET /healthz', 'operations', 200],
      [missing.headers.get('x-request-id'), 'GET', 'rest', 404],
    ];
    for (const [id, name, door, status] of expected) {
      const { server } = await traceOf(receiver, id as string, 1);
      expect([
        server.name,
        server.attributes['dg.door'],
        server.attributes['http.response.status_code'],
      ]).toEqual([name, door, status]);
    }
    // The console's pattern is its static files' (`/console/*`) once it is built, `/console` before.
    const consolePage = await traceOf(receiver, page.headers.get('x-request-id') as string, 1);
    expect(consolePage.server.attributes['dg.door']).toBe('console');
    expect(consolePage.server.attributes['http.route']).toMatch(/^\/console/);
    expect(consolePage.server.name).toBe(`GET ${consolePage.server.attributes['http.route']}`);
    const notFound = await traceOf(receiver, missing.headers.get('x-request-id') as string, 1);
    expect(notFound.server.attributes).toMatchObject({ 'error.type': 'not_found', 'url.path': '/nowhere' });
    expect(notFound.server.attributes['http.route']).toBeUndefined();
  });

  it('an MCP `decide`: its exchange’s SERVER span, door mcp, with the decision’s spans below it', async () => {
    const { url, key } = running as Running;
    const client = new Client({ name: 'traced-agent', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: bearer(key) } }),
    );
    const decided = await client.callTool({
      name: 'decide',
      arguments: {
        state: 'an agent’s ticket',
        questions: { refund: { type: 'noul', instructions: 'A refund?' } },
      },
    });
    await client.close();
    const { requestId } = decided.structuredContent as { requestId: string };
    const { server, tree } = await traceOf(receiver, requestId, 5);
    expect(shapeOf(tree)).toEqual([
      'SERVER POST /mcp',
      '  INTERNAL dg.store.reserve',
      '  INTERNAL dg.route default',
      '    CLIENT decide steady-model',
      '  INTERNAL dg.store.settle',
    ]);
    expect(server.attributes).toMatchObject({ 'dg.door': 'mcp', 'http.route': '/mcp', 'dg.code': 0 });
  });

  it('a caller that goes away while the upstream thinks: its SERVER span ends then, as aborted, and once', async () => {
    const { url, key, gateway } = running as Running;
    const traceId = '5a1c0e8e5b0d4c3fa2b9e7d6c5b4a392';
    const caller = request(`${url}/v1/systemone`, {
      method: 'POST',
      headers: {
        ...routed('held', key),
        'content-type': 'application/json',
        traceparent: `00-${traceId}-7d4f1c2b3a596870-01`,
      },
    });
    caller.on('error', () => {}); // the socket it destroys below
    caller.end(JSON.stringify(sampleRequest()));
    // Its whole body sent, the request waits on the held upstream; then the caller leaves.
    const deadline = Date.now() + 15_000;
    while (heldCalls.length === 0 && Date.now() < deadline) await sleep(20);
    expect(heldCalls).toHaveLength(1);
    caller.destroy();
    const ofTrace = (spans: ReceivedSpan[]) => spans.filter((s) => s.traceId === traceId);
    await receiver.waitFor((spans) => ofTrace(spans).some((s) => s.kind === 'SERVER'), 15_000);
    // The upstream answers after all: the gateway finishes the request, settling it.
    heldCalls.shift()?.();
    await receiver.waitFor((spans) => ofTrace(spans).some((s) => s.name === 'dg.store.settle'));
    const servers = ofTrace(receiver.spans).filter((s) => s.kind === 'SERVER');
    expect(servers).toHaveLength(1);
    expect(servers[0]?.statusCode).toBe(2);
    expect(servers[0]?.attributes).toMatchObject({ 'error.type': 'aborted', 'dg.door': 'rest' });
    // Logged once, under its trace, and no longer counted in flight (but the scrape itself).
    const lines = gateway
      .stdout()
      .split('\n')
      .filter((line) => line.includes(traceId));
    expect(lines.filter((line) => line.includes('request aborted by the client'))).toHaveLength(1);
    const metrics = await fetch(`${url}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(/dg_http_requests_in_flight 1\b/);
  });

  it('continues a caller’s trace, carries it to the upstream, and respects an unsampled caller', async () => {
    const { url, key } = running as Running;
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const parent = '00f067aa0ba902b7';
    const response = await post(
      url,
      '/v1/systemone',
      { ...sampleRequest(), state: 'a traced caller' },
      {
        ...bearer(key),
        traceparent: `00-${traceId}-${parent}-01`,
        tracestate: 'vendor=opaque',
      },
    );
    const { server, all } = await traceOf(receiver, response.headers.get('x-request-id') as string, 5);
    expect(server.traceId).toBe(traceId);
    expect(server.parentSpanId).toBe(parent);
    expect(server.traceState).toBe('vendor=opaque');
    const client = clientSpans(all)[0] as ReceivedSpan;
    const seen = up.steady?.seen.find((r) => r.body.state === 'a traced caller');
    expect(seen?.headers.traceparent).toBe(`00-${traceId}-${client.spanId}-01`);
    expect(seen?.headers.tracestate).toBe('vendor=opaque');

    // Unsampled: nothing is exported, and the upstream is told so too.
    const quiet = '0af7651916cd43dd8448eb211c80319c';
    const unsampled = await post(
      url,
      '/v1/systemone',
      { ...sampleRequest(), state: 'an unsampled caller' },
      {
        ...bearer(key),
        traceparent: `00-${quiet}-b7ad6b7169203331-00`,
      },
    );
    expect(unsampled.status).toBe(200);
    const upstreamSaw = up.steady?.seen.find((r) => r.body.state === 'an unsampled caller');
    expect(upstreamSaw?.headers.traceparent).toMatch(new RegExp(`^00-${quiet}-[0-9a-f]{16}-00$`));
    // A later sampled request's spans arrive; none of the unsampled trace ever does.
    const later = await post(
      url,
      '/v1/systemone',
      { ...sampleRequest(), state: 'after the quiet one' },
      bearer(key),
    );
    await traceOf(receiver, later.headers.get('x-request-id') as string, 5);
    expect(receiver.spans.filter((s) => s.traceId === quiet)).toEqual([]);
    // Its log line still names the trace it belongs to.
    const line = running?.gateway
      .logs()
      .find((l) => l.msg === 'request' && l.requestId === unsampled.headers.get('x-request-id'));
    expect(line?.traceId).toBe(quiet);
  });

  it('puts the SERVER span’s traceId and spanId on the request log line, a call’s on its warnings', async () => {
    const { url, key } = running as Running;
    const response = await post(url, '/v1/systemone', { ...sampleRequest(), state: 'logged' }, bearer(key));
    const requestId = response.headers.get('x-request-id') as string;
    const { server } = await traceOf(receiver, requestId, 5);
    const line = running?.gateway.logs().find((l) => l.msg === 'request' && l.requestId === requestId);
    expect(line).toMatchObject({ traceId: server.traceId, spanId: server.spanId });
    // A failed upstream attempt's warning names the span of that very call.
    const retried = await post(
      url,
      '/v1/systemone',
      { ...sampleRequest(), state: 'warned' },
      routed('retry', key),
    );
    const retriedId = retried.headers.get('x-request-id') as string;
    const { all } = await traceOf(receiver, retriedId, 6);
    const warning = running?.gateway
      .logs()
      .find((l) => l.msg === 'upstream attempt failed' && l.requestId === retriedId);
    const failedCall = all.find(
      (s) => s.kind === 'CLIENT' && s.attributes['http.response.status_code'] === 503,
    );
    expect(failedCall).toBeDefined();
    expect(warning).toMatchObject({ traceId: failedCall?.traceId, spanId: failedCall?.spanId });
  });

  it('never exports a key, a token, the admin token, an upstream key, the state or a question', async () => {
    const { url, key } = running as Running;
    const minted = await post(url, '/v1/tokens', { ttlSeconds: 60 }, bearer(key));
    const token = minted.body.data.token as string;
    expect(token).toMatch(/^dg/);
    const secret = {
      model: MODEL_ID,
      state: 'SECRET-STATE the customer wrote',
      questions: {
        team: { type: 'choice', criteria: { billing: 'SECRET-OPTION payments', technical: 'bugs' } },
        urgency: {
          type: 'score',
          instructions: 'SECRET-QUESTION how urgent?',
          criteria: ['SECRET-LEVEL low', 'high'],
        },
      },
    };
    await post(url, '/v1/systemone', secret, bearer(key));
    const fromBrowser = await post(url, '/v1/systemone', secret, { ...bearer(token), origin: BROWSER });
    expect(fromBrowser.status).toBe(200);
    await post(
      url,
      '/v1/systemone',
      sampleRequest(),
      bearer('dg_a-wrong-key-that-looks-real-0123456789abcdefg'),
    );
    const last = await post(url, '/v1/systemone', { ...sampleRequest(), state: 'the last' }, bearer(key));
    await traceOf(receiver, last.headers.get('x-request-id') as string, 5);
    const everything =
      JSON.stringify(receiver.spans, (_, v) => (typeof v === 'bigint' ? String(v) : v)) +
      receiver.raw.join('');
    for (const forbidden of [
      key,
      key.slice(13),
      ADMIN_TOKEN,
      UPSTREAM_KEY,
      'SECRET-',
      'charged twice',
      'How urgent',
      'payments, refunds',
      'dg_a-wrong-key',
    ])
      expect(everything).not.toContain(forbidden);
    expect(everything).not.toContain(token);
  });
});

describe('tracing over OTLP/protobuf (the default protocol)', () => {
  let suite: Awaited<ReturnType<typeof startSuite>> | undefined;
  let receiver: OtlpReceiver;
  let running: Running | undefined;

  beforeAll(async () => {
    const standIns = async () => ({
      steady: await answering(),
      strong: await answering(),
      flaky: await answering(),
    });
    suite = await startSuite(standIns, {
      OTEL_EXPORTER_OTLP_HEADERS: 'x-collector-auth=let-me-in',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=test',
    });
    ({ receiver, running } = suite);
  });
  afterAll(() => suite?.close());

  it('exports protobuf with the collector’s headers, service.name decision-gateway, the same tree', async () => {
    const { url, key } = running as Running;
    const response = await post(url, '/v1/systemone', sampleRequest(), routed('fallback', key));
    const { server, tree } = await traceOf(receiver, response.headers.get('x-request-id') as string, 6);
    expect(server.contentType).toBe('application/x-protobuf');
    expect(receiver.exports[0]?.['x-collector-auth']).toBe('let-me-in');
    expect(server.resource).toMatchObject({
      'service.name': 'decision-gateway',
      'deployment.environment.name': 'test',
    });
    expect(shapeOf(tree)).toEqual(FALLBACK_TREE);
    expect(tree.children[1]?.children[1]?.span.attributes).toMatchObject({
      'gen_ai.usage.input_tokens': 300,
      'dg.attempt': 2,
    });
  });
});

describe('a collector that is down, refuses or never answers', () => {
  it('never fails or holds a request, and is logged at most once a minute', async () => {
    // Refuses every export (400), counting them: the gateway must try several and say so once.
    let refused = 0;
    const refusing: Server = createServer((req: IncomingMessage, res) => {
      req.resume();
      req.on('end', () => {
        refused++;
        res.writeHead(400, { 'content-type': 'application/json' }).end('{}');
      });
    });
    // Accepts every export and never answers.
    const held: IncomingMessage[] = [];
    const silent: Server = createServer((req) => {
      held.push(req);
    });
    for (const server of [refusing, silent])
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = (server: Server) => `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const up = { steady: await answering(), strong: await answering(), flaky: await answering() };
    const gateways: Running[] = [];
    try {
      for (const endpoint of [address(refusing), address(silent), 'http://127.0.0.1:9']) {
        const running = await startTraced({ url: endpoint }, up, {
          OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
          // The exporter's own retries end within this (the SDK's variable): a failure is told sooner.
          OTEL_EXPORTER_OTLP_TIMEOUT: '1000',
        });
        gateways.push(running);
      }
      const [toRefusing, toSilent, toNothing] = gateways as [Running, Running, Running];
      // Requests go on across many export rounds (one every 100 ms).
      const until = async (done: () => boolean, running: Running) => {
        const started = Date.now();
        while (!done()) {
          if (Date.now() - started > 60_000) throw new Error('gave up waiting');
          const response = await post(running.url, '/v1/systemone', sampleRequest(), bearer(running.key));
          expect(response.status).toBe(200);
          await sleep(20);
        }
      };
      await until(() => refused >= 4, toRefusing);
      await until(() => held.length >= 1, toSilent);
      await until(() => warnings(toNothing).length >= 1, toNothing);
      // Every export the silent collector holds is still open, and the gateway answers all the same.
      for (let i = 0; i < 10; i++)
        expect(
          (await post(toSilent.url, '/v1/systemone', sampleRequest(), bearer(toSilent.key))).status,
        ).toBe(200);
      expect(warnings(toRefusing)).toHaveLength(1);
      expect(warnings(toNothing)).toHaveLength(1);
      expect(String(warnings(toRefusing)[0]?.msg)).toContain('traces could not be exported');
    } finally {
      for (const running of gateways) await killHard(running.gateway);
      for (const running of gateways) rmSync(running.dir, { recursive: true, force: true });
      for (const request of held) request.socket.destroy();
      for (const server of [refusing, silent]) {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      }
      for (const standIn of Object.values(up)) await standIn.close();
    }
    // Three gateway processes and many export rounds: on a busy 2-core machine this takes far
    // longer than the suite's 20 s default, and its own waits give up after 60 s each.
  }, 180_000);
});

const warnings = (running: Running) =>
  running.gateway.logs().filter((l) => String(l.msg).startsWith('traces could not be exported'));
