import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { failure } from '@decision-gateway/contract';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance } from 'fastify';
import { type DoorOptions, door, sendFailure } from './door.ts';

/** Where `pnpm start` (through Turborepo) builds the console: apps/console/dist. */
export const CONSOLE_DIST = resolve(import.meta.dirname, '../../../console/dist');

/**
 * What the console's page may do: its own scripts and styles only (no inline script), and talk to
 * this gateway only. React sets styles through the DOM, which style-src does not govern.
 */
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  // blob: for the playground's own image, shown from the file the operator picked.
  "img-src 'self' data: blob:",
  "font-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * The operators' console at /console (docs/console.md): built static files, served only when the admin
 * API is on (the page is its client). The admin token never travels in a URL or a cookie: the page
 * keeps it in sessionStorage and sends it as a header.
 */
export async function consoleDoor(app: FastifyInstance, opts: DoorOptions & { root?: string }) {
  door(app, 'console', { ...opts, ownsNotFound: true });
  const root = opts.root ?? CONSOLE_DIST;
  app.addHook('onSend', (_request, reply, payload, done) => {
    reply.headers({
      'content-security-policy': CONTENT_SECURITY_POLICY,
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
    });
    done(null, payload);
  });
  if (!existsSync(resolve(root, 'index.html'))) {
    const unbuilt = failure(
      'unavailable',
      'the console is not built: run pnpm start (which builds it), or pnpm --filter @decision-gateway/console build',
      { retryAfterMs: 5000 },
    );
    app.get('/*', async (_request, reply) => sendFailure(reply, unbuilt, 'console'));
    app.get('/', async (_request, reply) => sendFailure(reply, unbuilt, 'console'));
    return;
  }
  await app.register(fastifyStatic, { root, prefix: '/', index: ['index.html'], wildcard: true });
  // /console without its slash is the page too (its assets are addressed absolutely).
  app.get('', async (_request, reply) => reply.sendFile('index.html'));
}
