import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { buildOpenApiDocument, type DocumentedRoute, failure } from '@decision-gateway/contract';
import type { FastifyInstance } from 'fastify';
import type { GatewayMetrics } from '../metrics.ts';
import { sendSuccess } from './answer.ts';
import { type DoorOptions, door, sendFailure } from './door.ts';

/** Swagger UI's static files, served from the npm package (no CDN: gateways often run offline). */
const SWAGGER_DIR = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'application/javascript; charset=utf-8',
  'swagger-ui-standalone-preset.js': 'application/javascript; charset=utf-8',
};

const DOCS_PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Decision Gateway API</title>
  <link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
  <div id="api-reference"></div>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script src="/docs/assets/swagger-ui-standalone-preset.js"></script>
  <script src="/docs/assets/init.js"></script>
</body>
</html>
`;

// Kept out of the page itself so a strict Content-Security-Policy (no inline script) can apply.
const DOCS_INIT = `window.ui = SwaggerUIBundle({
  url: '/openapi.json',
  dom_id: '#api-reference',
  deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
  layout: 'StandaloneLayout',
});
`;

export interface OperationsDoorOptions extends DoorOptions {
  metrics: GatewayMetrics;
  /** Why the gateway cannot serve now, or undefined when it can. */
  readiness(): Promise<string | undefined>;
  /** The routes registered with a reference entry (doors/serve.ts): /openapi.json documents exactly these. */
  documentedRoutes(): readonly DocumentedRoute[];
}

/**
 * The operators' door: health and readiness, /openapi.json, /docs (a readable reference
 * rendering it) and /metrics (Prometheus).
 */
export async function operationsDoor(app: FastifyInstance, opts: OperationsDoorOptions) {
  door(app, 'operations', { ...opts, ownsNotFound: false });

  app.get(
    '/healthz',
    { config: { servedWhileDraining: true, operation: 'health' } },
    async (_request, reply) => sendSuccess(reply, { status: 'ok' }),
  );
  // Readiness: the store can be written (and, on SQLite, is still the file it opened), and a shared
  // rate limiter's Redis answers. A change of state is logged once, not on every probe.
  let notReady: string | undefined;
  app.get('/readyz', { config: { operation: 'ready' } }, async (request, reply) => {
    // While draining, the onRequest hook answers 503 before this route runs.
    const problem = await opts.readiness();
    if (problem === undefined) {
      if (notReady !== undefined) request.log.info({ was: notReady }, 'ready again');
      notReady = undefined;
      return sendSuccess(reply, { status: 'ready' });
    }
    if (notReady !== problem) request.log.error({ problem }, 'not ready');
    notReady = problem;
    const unready = failure('unavailable', `not ready: ${problem}`, { retryAfterMs: 1000 });
    return sendFailure(reply, unready, 'operations');
  });

  let document: string | undefined;
  app.get('/openapi.json', async (_request, reply) => {
    document ??= JSON.stringify(buildOpenApiDocument({ routes: opts.documentedRoutes() }));
    return reply.type('application/json; charset=utf-8').send(document);
  });

  app.get('/docs', async (_request, reply) => reply.type('text/html; charset=utf-8').send(DOCS_PAGE));

  const assets = new Map<string, Buffer>();
  app.get<{ Params: { file: string } }>('/docs/assets/:file', async (request, reply) => {
    const { file } = request.params;
    if (file === 'init.js') return reply.type('application/javascript; charset=utf-8').send(DOCS_INIT);
    const type = ASSETS[file];
    if (type === undefined) return sendFailure(reply, failure('not_found', `no asset ${file}`), 'operations');
    let body = assets.get(file);
    if (body === undefined) {
      body = readFileSync(join(SWAGGER_DIR, file));
      assets.set(file, body);
    }
    return reply.type(type).header('cache-control', 'public, max-age=86400').send(body);
  });

  app.get('/metrics', async (_request, reply) =>
    reply.type(opts.metrics.registry.contentType).send(await opts.metrics.registry.metrics()),
  );
}
