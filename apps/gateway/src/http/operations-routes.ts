import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { buildOpenApiDocument, failure } from '@decision-gateway/contract';
import type { FastifyInstance } from 'fastify';
import type { GatewayMetrics } from '../metrics.ts';
import { sendFailure } from './envelope.ts';

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

/** GET /openapi.json, /docs (a readable reference rendering it) and /metrics (Prometheus). */
export async function operationsRoutes(app: FastifyInstance, opts: { metrics: GatewayMetrics }) {
  let document: string | undefined;
  app.get('/openapi.json', async (_request, reply) => {
    document ??= JSON.stringify(buildOpenApiDocument());
    return reply.type('application/json; charset=utf-8').send(document);
  });

  app.get('/docs', async (_request, reply) => reply.type('text/html; charset=utf-8').send(DOCS_PAGE));

  const assets = new Map<string, Buffer>();
  app.get<{ Params: { file: string } }>('/docs/assets/:file', async (request, reply) => {
    const { file } = request.params;
    if (file === 'init.js') return reply.type('application/javascript; charset=utf-8').send(DOCS_INIT);
    const type = ASSETS[file];
    if (type === undefined) return sendFailure(reply, failure('not_found', `no asset ${file}`));
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
