import type { FastifyInstance } from 'fastify';

/**
 * Which methods each registered path accepts, learned from Fastify's own route registrations, so a
 * known path with the wrong method gets 405 with an `Allow` header (docs/http-api.md#errors) and nothing is listed twice.
 */
export function createPathTable(app: FastifyInstance) {
  const paths: { pattern: RegExp; url: string; methods: Set<string> }[] = [];
  app.addHook('onRoute', (route) => {
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
