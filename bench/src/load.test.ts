import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import autocannon from 'autocannon';
import { afterEach, describe, expect, it } from 'vitest';
import { failedAs, failuresOf } from './load.ts';

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0))
    await new Promise<void>((done) => {
      server.closeAllConnections();
      server.close(() => done());
    });
});

/** A loopback server answering each request as `answer` says, by its position. */
async function serving(answer: (n: number, respond: (status: number) => void) => void): Promise<string> {
  let n = 0;
  const server = createServer((_request, response) => {
    answer(n++, (status) => response.writeHead(status).end('{}'));
  });
  servers.push(server);
  await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('failures under load', () => {
  it('names each status other than 2xx with its count', async () => {
    const url = await serving((n, respond) => respond(n % 3 === 2 ? 503 : n % 5 === 4 ? 429 : 200));
    const result = await autocannon({ url, connections: 1, amount: 15 });
    // Of 0..14: 503 at 2, 5, 8, 11 and 14; 429 at 4 and 9.
    expect(failedAs([result])).toBe('429 ×2, 503 ×5');
  });

  it('counts a timeout once, apart from the statuses', async () => {
    const url = await serving((n, respond) => {
      if (n !== 1) respond(n === 2 ? 500 : 200);
    });
    const result = await autocannon({ url, connections: 1, amount: 4, timeout: 1 });
    expect(failedAs([result])).toBe('500 ×1, timeouts 1');
    expect(failuresOf(result)).toBe(2);
  });

  it('adds the results of several instances together, and says nothing when all went well', async () => {
    const url = await serving((n, respond) => respond(n < 2 ? 503 : 200));
    const first = await autocannon({ url, connections: 1, amount: 3 });
    const second = await autocannon({ url, connections: 1, amount: 3 });
    expect(failedAs([first, second])).toBe('503 ×2');
    expect(failedAs([second])).toBe('');
  });
});
