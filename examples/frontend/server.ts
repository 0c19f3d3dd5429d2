// The page's own server: it serves the built page and, with its API key, mints one short-lived token
// per browser session, valid only from this page's origin. The API key never leaves this process.
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, join } from 'node:path';
import { createGatewayClient } from '@decision-gateway/client';

const TYPES: Record<string, string> = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css' };

export async function startExampleServer(options: {
  port: number;
  gatewayUrl: string;
  apiKey: string;
  /** The built page (default: dist/ beside this file). */
  dist?: string;
}): Promise<{
  url: string;
  server: Server;
}> {
  const gateway = createGatewayClient({ url: options.gatewayUrl, apiKey: options.apiKey });
  const dist = options.dist ?? join(import.meta.dirname, 'dist');
  let origin = '';
  const server = createServer(async (req, res) => {
    if (req.method === 'POST' && req.url === '/session-token') {
      // Your own session handling goes here; the subject names the end user on every usage record.
      const { token } = await gateway.createToken({
        ttlSeconds: 600,
        origins: [origin],
        subject: `session-${randomUUID()}`,
      });
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ token }));
      return;
    }
    if (req.url === '/config') {
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ gatewayUrl: options.gatewayUrl }));
      return;
    }
    const path = req.url === '/' || !req.url ? '/index.html' : req.url.split('?')[0];
    try {
      const body = await readFile(join(dist, (path as string).replace(/\.\.+/g, '')));
      res
        .writeHead(200, { 'content-type': TYPES[extname(path as string)] ?? 'application/octet-stream' })
        .end(body);
    } catch {
      res.writeHead(404).end('not found');
    }
  });
  await new Promise<void>((resolve) => server.listen(options.port, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url: origin, server };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { DG_URL = 'http://127.0.0.1:8787', DG_API_KEY, PORT = '5173' } = process.env;
  if (!DG_API_KEY) throw new Error('set DG_API_KEY (a gateway API key) to mint tokens');
  const { url } = await startExampleServer({ port: Number(PORT), gatewayUrl: DG_URL, apiKey: DG_API_KEY });
  console.log(`Open ${url} (the gateway needs CORS_ORIGINS=${url})`);
}
