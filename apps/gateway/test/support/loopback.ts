import { createServer, type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A real HTTP server on loopback serving `listener`, for a test: its origin, and its close (every
 * connection ended, then the server) added to `closers`.
 */
export async function loopbackServer(
  listener: RequestListener,
  closers: (() => Promise<void>)[],
): Promise<string> {
  const server = createServer(listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}
