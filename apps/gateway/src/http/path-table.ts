import type { DocumentedRoute } from '@decision-gateway/contract';
import type { FastifyInstance } from 'fastify';

/**
 * What the registered routes say, learned from Fastify's own registrations: which methods each path
 * accepts, so a known path with the wrong method gets 405 with an `Allow` header
 * (docs/http-api.md#errors), and which routes the API reference documents.
 */
export function createPathTable(app: FastifyInstance) {
  const paths: { pattern: RegExp; url: string; methods: Set<string> }[] = [];
  const documented: DocumentedRoute[] = [];
  app.addHook('onRoute', (route) => {
    const operation = route.config?.operation;
    // Fastify's own HEAD twin of a GET route carries its config: the reference lists the GET.
    if (operation !== undefined)
      for (const method of Array.isArray(route.method) ? route.method : [route.method])
        if (method !== 'HEAD') documented.push({ method, path: route.url, operation });
    const source = `^${route.url
      .split('/')
      .map((segment) => (segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
      .join('/')}$`;
    let entry = paths.find((r) => r.pattern.source === source);
    if (!entry) {
      entry = { pattern: new RegExp(source), url: route.url, methods: new Set() };
      paths.push(entry);
    }
    for (const method of Array.isArray(route.method) ? route.method : [route.method])
      entry.methods.add(method);
  });
  return {
    /** The routes registered with a reference entry, for /openapi.json (doors/serve.ts). */
    documented: (): readonly DocumentedRoute[] => documented,
    /** The registered path a URL matches (for metrics), if any. */
    patternFor(url: string): string | undefined {
      const path = url.split('?', 1)[0] as string;
      return paths.find((known) => known.pattern.test(path))?.url;
    },
    methodsFor(url: string): string[] {
      const path = url.split('?', 1)[0] as string;
      const methods = new Set<string>();
      for (const known of paths) {
        if (known.pattern.test(path)) for (const method of known.methods) methods.add(method);
      }
      return [...methods].sort();
    },
  };
}
