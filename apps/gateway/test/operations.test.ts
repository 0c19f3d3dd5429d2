import { OPERATION_IDS } from '@decision-gateway/contract';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/environment.ts';
import { createUpstream } from '../src/upstreams/registry.ts';
import {
  ADMIN_TOKEN,
  bearer,
  get,
  post,
  sampleRequest,
  scriptedUpstream,
  sleep,
  startGateway,
  type TestGateway,
} from './harness.ts';
import { json, nativeAnswer, startStandIn } from './stand-in-upstream.ts';

describe('GET /openapi.json', () => {
  let gw: TestGateway;
  let doc: any;
  let ajv: Ajv2020;

  beforeAll(async () => {
    gw = await startGateway({ adminToken: ADMIN_TOKEN });
    doc = (await get(gw.url, '/openapi.json')).body;
    ajv = new Ajv2020({ strict: false, allErrors: true });
    ajv.addSchema(doc, 'openapi.json');
  });
  afterAll(() => gw.close());

  const validatorFor = (component: string) => {
    const validate = ajv.getSchema(`openapi.json#/components/schemas/${component}`);
    if (!validate) throw new Error(`no component ${component}`);
    return validate;
  };

  it('documents every route the gateway serves, method by method', async () => {
    // Learned from Fastify's own route registrations, so a new route cannot be left out.
    const served = new Set<string>();
    const probe = await startGateway({ adminToken: ADMIN_TOKEN, corsOrigins: ['http://127.0.0.1:5173'] });
    try {
      // A tree: each level is indented by four more characters and is relative to its parent.
      const parents: string[] = [];
      for (const line of probe.gateway.app.printRoutes({ commonPrefix: false }).split('\n')) {
        const match = /^([\s│├└─]*)(\/\S*) \(([A-Z, ]+)\)$/.exec(line);
        if (!match) continue;
        const depth = (match[1] as string).length / 4 - 1;
        parents.length = depth;
        const path = `${parents.join('')}${match[2]}`;
        parents.push(match[2] as string);
        for (const method of (match[3] as string).split(', '))
          served.add(`${method} ${path.replace(/:(\w+)/g, '{$1}')}`);
      }
    } finally {
      await probe.close();
    }
    // Not API operations: the API reference's own page and files, Prometheus, CORS preflights and
    // the tRPC door (described by its router type, not by OpenAPI).
    // The console (a web page) is outside it too.
    const outside = /^(HEAD|OPTIONS) |\/docs|\/metrics$|^\w+ \/trpc\/|^\w+ \/console/;
    const missing = [...served]
      .filter((route) => !outside.test(route))
      .filter((route) => {
        const [method, path] = route.split(' ') as [string, string];
        return doc.paths[path]?.[method.toLowerCase()] === undefined && path !== '/openapi.json';
      });
    expect(served.size).toBeGreaterThan(15);
    expect(missing).toEqual([]);
    // And the other way: the document holds nothing the gateway does not serve, and every
    // operation of the reference is served (a door declares each route once, with its entry).
    const documented = Object.entries(
      doc.paths as Record<string, Record<string, { operationId: string }>>,
    ).flatMap(([path, methods]) => Object.keys(methods).map((method) => `${method.toUpperCase()} ${path}`));
    expect(documented.filter((route) => !served.has(route))).toEqual([]);
    const operations = Object.values(doc.paths as Record<string, Record<string, { operationId: string }>>)
      .flatMap((methods) => Object.values(methods).map((operation) => operation.operationId))
      .sort();
    expect(operations).toEqual([...OPERATION_IDS].sort());
  });

  it('is a valid OpenAPI 3.1 document', async () => {
    expect(doc.openapi).toBe('3.1.0');
    const result = await new Validator().validate(doc);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('describes /v1/systemone with bearer security, examples for each type and every error code', () => {
    const operation = doc.paths['/v1/systemone'].post;
    expect(operation.security).toEqual([{ apiKey: [] }]);
    expect(doc.components.securitySchemes.apiKey).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(operation.requestBody.content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/EvaluationRequest',
    });
    expect(Object.keys(operation.requestBody.content['application/json'].examples)).toEqual([
      'choice',
      'score',
      'noul',
      'box',
    ]);
    expect(operation.responses['200'].content['application/json'].schema.$ref).toBe(
      '#/components/schemas/EvaluationEnvelope',
    );
    const described = Object.entries<any>(operation.responses)
      .filter(([status]) => status !== '200')
      .map(([status, response]) => `${status}: ${response.description}`)
      .join('\n');
    for (const code of [
      40000, 40001, 40002, 40003, 40100, 40101, 40200, 41300, 41500, 42900, 50000, 50200, 50300, 50400,
    ]) {
      expect(described).toContain(String(code));
    }
    expect(operation.responses['400'].description).toContain('40001 `invalid_request`');
    expect(operation.responses['429'].headers['Retry-After']).toBeDefined();
    expect(operation.responses['503'].headers['Retry-After']).toBeDefined();
  });

  it('describes /v1/models and the admin API under its own security scheme', () => {
    expect(doc.paths['/v1/models'].get.security).toEqual([{ apiKey: [] }]);
    for (const path of [
      '/admin/keys',
      '/admin/keys/{id}',
      '/admin/keys/{id}/credits',
      '/admin/keys/{id}/revoke',
      '/admin/keys/{id}/usage',
    ]) {
      for (const operation of Object.values<any>(doc.paths[path]))
        expect(operation.security).toEqual([{ adminToken: [] }]);
    }
    expect(doc.paths['/admin/keys'].post.responses['201']).toBeDefined();
  });

  it('derives the request schema from the contract: limits and closed objects', () => {
    const request = doc.components.schemas.EvaluationRequest;
    expect(request.additionalProperties).toBe(false);
    expect(request.properties.questions).toMatchObject({ minProperties: 1, maxProperties: 8 });
    expect(request.properties.questions.propertyNames).toMatchObject({ minLength: 1, maxLength: 128 });
    const choice = doc.components.schemas.ChoiceQuestion;
    expect(choice.properties.criteria).toMatchObject({ minProperties: 2, maxProperties: 255 });
    expect(doc.components.schemas.ScoreQuestion.properties.criteria).toMatchObject({
      minItems: 2,
      maxItems: 10,
    });
  });

  it('matches what the gateway really accepts and answers', async () => {
    const { key } = await gw.createKey();
    const validRequest = validatorFor('EvaluationRequest');
    const validSuccess = validatorFor('EvaluationEnvelope');
    const validError = validatorFor('ErrorEnvelope');
    const examples = doc.paths['/v1/systemone'].post.requestBody.content['application/json'].examples;
    for (const example of [...Object.values<any>(examples).map((e) => e.value), sampleRequest()]) {
      expect(validRequest(example), JSON.stringify(validRequest.errors)).toBe(true);
      const response = await post(gw.url, '/v1/systemone', example, bearer(key));
      // This gateway's one upstream is the lexical baseline, which sees no images: the box
      // example is a valid request that its route refuses (docs/images.md#upstreams).
      if (example.assets !== undefined) {
        expect(response.body.message).toBe(
          'route default has no upstream that takes images and box questions',
        );
        expect(validError(response.body), JSON.stringify(validError.errors)).toBe(true);
        continue;
      }
      expect(response.status).toBe(200);
      expect(validSuccess(response.body), JSON.stringify(validSuccess.errors)).toBe(true);
    }
    const refused = await post(gw.url, '/v1/systemone', { ...sampleRequest(), state: null }, bearer(key));
    expect(validRequest({ ...sampleRequest(), state: null })).toBe(false);
    expect(validError(refused.body), JSON.stringify(validError.errors)).toBe(true);
    const created = await post(gw.url, '/admin/keys', { name: 'doc', credits: 1 }, bearer(ADMIN_TOKEN));
    expect(validatorFor('CreatedKeyEnvelope')(created.body)).toBe(true);
    const usage = await get(gw.url, `/admin/keys/${created.body.data.id}/usage`, bearer(ADMIN_TOKEN));
    expect(validatorFor('UsageReportEnvelope')(usage.body)).toBe(true);
  });

  it('documents the /native door, and its answers match the document', async () => {
    const operation = doc.paths['/native/v1/systemone'].post;
    expect(operation.tags).toEqual(['System One-compatible']);
    expect(operation.responses['200'].content['application/json'].schema.$ref).toBe(
      '#/components/schemas/NativeResult',
    );
    expect(operation.responses['200'].headers['x-credits-used']).toBeDefined();
    expect(operation.responses['429'].headers['retry-after-ms']).toBeDefined();
    expect(operation.responses['401'].content['application/json'].schema.$ref).toBe(
      '#/components/schemas/NativeError',
    );
    expect(doc.paths['/native/v1/models'].get.security).toEqual([{ apiKey: [] }]);

    const { key } = await gw.createKey();
    const answered = await post(gw.url, '/native/v1/systemone', sampleRequest(), bearer(key));
    expect(answered.status).toBe(200);
    expect(validatorFor('NativeResult')(answered.body), JSON.stringify(answered.body)).toBe(true);
    const refused = await post(
      gw.url,
      '/native/v1/systemone',
      { ...sampleRequest(), state: null },
      bearer(key),
    );
    expect(refused.status).toBe(400);
    expect(validatorFor('NativeError')(refused.body), JSON.stringify(refused.body)).toBe(true);
    const models = await get(gw.url, '/native/v1/models', bearer(key));
    expect(validatorFor('ModelList')(models.body)).toBe(true);
  });
});

describe('GET /docs', () => {
  it('renders the document with Swagger UI served from the npm package, no CDN', async () => {
    const gw = await startGateway();
    try {
      const page = await fetch(`${gw.url}/docs`);
      expect(page.headers.get('content-type')).toContain('text/html');
      const html = await page.text();
      expect(html).toContain('/docs/assets/swagger-ui-bundle.js');
      expect(html).not.toMatch(/(src|href)="https?:/);
      const init = await (await fetch(`${gw.url}/docs/assets/init.js`)).text();
      expect(init).toContain("url: '/openapi.json'");
      const bundle = await fetch(`${gw.url}/docs/assets/swagger-ui-bundle.js`);
      expect(bundle.status).toBe(200);
      expect(bundle.headers.get('content-type')).toContain('javascript');
      expect((await bundle.arrayBuffer()).byteLength).toBeGreaterThan(100_000);
      expect((await fetch(`${gw.url}/docs/assets/..%2Fpackage.json`)).status).toBe(404);
    } finally {
      await gw.close();
    }
  });
});

describe('GET /metrics', () => {
  it('counts requests by route/status/code, latency, questions by type, credits, in-flight and rate limits', async () => {
    const gw = await startGateway();
    try {
      const { key } = await gw.createKey({ rateLimitPerMinute: 3 });
      const sent = [];
      for (let i = 0; i < 2; i++)
        sent.push(await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key)));
      await post(gw.url, '/v1/systemone', { ...sampleRequest(), state: null }, bearer(key));
      await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key)); // the 4th: rate limited
      await get(gw.url, '/nowhere');
      const response = await fetch(`${gw.url}/metrics`);
      expect(response.headers.get('content-type')).toContain('text/plain');
      const text = await response.text();
      expect(text).toContain(
        'dg_http_requests_total{route="/v1/systemone",method="POST",status="200",code="0"} 2',
      );
      expect(text).toContain(
        'dg_http_requests_total{route="/v1/systemone",method="POST",status="400",code="40001"} 1',
      );
      expect(text).toContain(
        'dg_http_requests_total{route="/v1/systemone",method="POST",status="429",code="42900"} 1',
      );
      expect(text).toContain(
        'dg_http_requests_total{route="unmatched",method="GET",status="404",code="40400"} 1',
      );
      expect(text).toContain('dg_rate_limited_total 1');
      expect(text).toContain('dg_questions_total{type="choice"} 2');
      expect(text).toContain('dg_questions_total{type="noul"} 2');
      const credits = sent.reduce((sum, r) => sum + r.body.data.creditsUsed, 0);
      const debited = Number(/^dg_credits_debited_total (\S+)$/m.exec(text)?.[1]);
      expect(debited).toBeCloseTo(credits, 9);
      expect(text).toContain('dg_http_request_duration_seconds_count{route="/v1/systemone"} 4');
      expect(text).toContain('dg_upstream_duration_seconds_count{upstream="lexical",outcome="ok"} 2');
      expect(text).toContain('dg_http_requests_in_flight 1'); // the scrape itself
      expect(text).toContain('dg_process_resident_memory_bytes');
    } finally {
      await gw.close();
    }
  });

  it('reports upstream retries and the circuit state', async () => {
    const standIn = await startStandIn((_req, res) => json(res, 503, { detail: 'busy' }));
    const loaded = loadConfig({
      UPSTREAM: 'systemone',
      UPSTREAM_BASE_URL: standIn.url,
      UPSTREAM_MAX_RETRIES: '1',
    });
    if (!loaded.ok) throw new Error(loaded.problems.join());
    const gw = await startGateway({
      upstream: (logger, metrics) =>
        createUpstream(loaded.config.upstream, logger, {
          metrics,
          breakerThreshold: 1,
          backoff: { initialMs: 5, maxMs: 10 },
        }),
    });
    try {
      const { key } = await gw.createKey();
      expect((await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key))).body.code).toBe(50300);
      const text = await (await fetch(`${gw.url}/metrics`)).text();
      expect(text).toContain('dg_upstream_retries_total{upstream="systemone"} 1');
      expect(text).toContain('dg_upstream_circuit_state{upstream="systemone"} 2');
      expect(text).toContain('dg_upstream_duration_seconds_count{upstream="systemone",outcome="error"} 1');
      standIn.setHandler((req, res) => json(res, 200, nativeAnswer(req)));
    } finally {
      await gw.close();
      await standIn.close();
    }
  });
});

describe('x-gateway-overhead-ms and the request log', () => {
  it('reports the gateway time without the upstream call, and logs one line with every field', async () => {
    const upstream = scriptedUpstream(
      async ({ request }) => {
        await sleep(300);
        return {
          ok: true,
          answers: Object.fromEntries(
            Object.keys(request.questions).map((id) => [id, { type: 'noul', noul: 0.25 }]),
          ),
          usage: { input_tokens: 1500, output_tokens: 3 },
          upstreamRequestId: 'up_1',
        };
      },
      () => ({ input_tokens: 2000, output_tokens: 3 }),
    );
    const gw = await startGateway({ upstream });
    try {
      const { key } = await gw.createKey();
      const started = performance.now();
      const response = await post(
        gw.url,
        '/v1/systemone',
        { ...sampleRequest(), questions: { q: { type: 'noul', instructions: 'x' } } },
        bearer(key),
      );
      const total = performance.now() - started;
      const overhead = Number(response.headers.get('x-gateway-overhead-ms'));
      expect(total).toBeGreaterThanOrEqual(300);
      expect(overhead).toBeGreaterThanOrEqual(0);
      expect(overhead).toBeLessThan(total - 250);
      expect(response.headers.get('x-gateway-overhead-ms')).toMatch(/^\d+\.\d{3}$/);

      const line = JSON.parse(gw.logs.find((l) => l.includes(response.body.requestId)) as string);
      expect(line).toEqual({
        level: 30,
        time: expect.any(Number),
        requestId: response.body.requestId,
        method: 'POST',
        path: '/v1/systemone',
        status: 200,
        code: 0,
        keyPrefix: key.slice(0, 11),
        questions: 1,
        inputTokens: 1500,
        outputTokens: 3,
        creditsUsed: 1.5,
        upstream: 'scripted',
        upstreamMs: expect.any(Number),
        upstreamRequestId: 'up_1',
        elapsedMs: expect.any(Number),
        msg: 'request',
      });
      expect(line.upstreamMs).toBeGreaterThanOrEqual(290);
      expect(gw.logs.join('\n')).not.toContain(key);
      expect((await get(gw.url, '/healthz')).headers.get('x-gateway-overhead-ms')).not.toBeNull();
    } finally {
      await gw.close();
    }
  });
});
