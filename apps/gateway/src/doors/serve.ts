import type { OperationId } from '@decision-gateway/contract';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Cors } from './cors.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route's entry in the API reference: /openapi.json lists exactly the routes that have one. */
    operation?: OperationId;
  }
}

/** A route as a door declares it, once: its method and path, its reference entry, whether browsers call it. */
export interface RouteDeclaration {
  method: 'GET' | 'POST' | 'DELETE';
  path: string;
  operation: OperationId;
  /** Browsers call it with tokens: with CORS_ORIGINS set, a preflight answers for it (docs/browsers.md). */
  browsers?: boolean;
}

type Handler = (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;

/**
 * Registers a declared route: its handler, its reference entry (read back by /openapi.json from
 * what was registered) and, for a route browsers call, its CORS preflight. The 405 answers come
 * from the same registrations (http/path-table.ts).
 */
export function serve(
  app: FastifyInstance,
  cors: Cors | undefined,
  route: RouteDeclaration,
  handler: Handler,
) {
  app.route({ method: route.method, url: route.path, config: { operation: route.operation }, handler });
  if (route.browsers && cors)
    app.options(route.path, async (request, reply) => cors.preflight(request, reply));
}
