import { createServer, type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { httpCall } from './http-call.ts';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** A real server on loopback and a pool to it. */
async function serve(listener: RequestListener): Promise<Pool> {
  const server = createServer(listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const pool = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  closers.push(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  closers.push(() => pool.destroy());
  return pool;
}

const POST = { path: '/v1/x', method: 'POST', body: Buffer.from('{"q":1}') } as const;
const soon = () => Date.now() + 10_000;

describe('httpCall', () => {
  it('collects an answer sent in several chunks, with its status and headers, and sends the body', async () => {
    const pool = await serve((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        res.writeHead(201, { 'x-request-id': 'up_1' });
        res.write('{"got":');
        setTimeout(() => res.end(`${Buffer.concat(chunks).toString()}, "é": true}`), 20);
      });
    });
    const result = await httpCall(pool, POST, 1024, soon());
    expect(result).toMatchObject({ kind: 'response', status: 201, text: '{"got":{"q":1}, "é": true}' });
    expect(result.kind === 'response' && result.headers['x-request-id']).toBe('up_1');
  });

  it('refuses an answer whose declared length passes the limit without reading it', async () => {
    const pool = await serve((_req, res) =>
      res.writeHead(200, { 'content-length': '2048' }).end('x'.repeat(2048)),
    );
    expect(await httpCall(pool, POST, 1024, soon())).toEqual({ kind: 'too_large', status: 200 });
  });

  it('stops reading an endless chunked answer once it passes the limit', async () => {
    const pool = await serve((_req, res) => {
      res.writeHead(502);
      const timer = setInterval(() => res.write('y'.repeat(512)), 5);
      res.on('close', () => clearInterval(timer));
    });
    expect(await httpCall(pool, POST, 4096, soon())).toEqual({ kind: 'too_large', status: 502 });
  });

  it('ends at the deadline while the upstream thinks, and while its body is still coming', async () => {
    const silent = await serve(() => {});
    const started = Date.now();
    expect(await httpCall(silent, POST, 1024, Date.now() + 150)).toEqual({ kind: 'deadline' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
    const halfway = await serve((_req, res) => res.writeHead(200).write('{"half":'));
    expect(await httpCall(halfway, POST, 1024, Date.now() + 150)).toEqual({ kind: 'deadline' });
  });

  it('reports a connection that fails, with its code', async () => {
    const pool = await serve((req) => req.socket.destroy());
    const result = await httpCall(pool, POST, 1024, soon());
    expect(result).toMatchObject({ kind: 'connection', code: 'UND_ERR_SOCKET' });
    const refused = new Pool('http://127.0.0.1:1');
    closers.push(() => refused.destroy());
    expect(await httpCall(refused, POST, 1024, soon())).toMatchObject({
      kind: 'connection',
      code: 'ECONNREFUSED',
    });
  });

  it('reports a call after the pool is destroyed (the gateway has drained) as a failed connection, not a throw', async () => {
    const pool = await serve((_req, res) => res.end('{}'));
    await pool.destroy();
    expect(await httpCall(pool, POST, 1024, soon())).toMatchObject({
      kind: 'connection',
      code: 'UND_ERR_DESTROYED',
    });
  });
});
