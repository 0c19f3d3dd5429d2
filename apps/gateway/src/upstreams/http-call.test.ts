import type { RequestListener } from 'node:http';
import { Pool } from 'undici';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { loopbackServer } from '../../test/support/loopback.ts';
import { CallThread } from './call-thread.ts';
import { type CallResult, httpCall } from './http-call.mjs';

/**
 * One contract for an upstream HTTP call, wherever it is made: on the serving thread through its
 * pool, or handed to the call thread (call-thread.ts), which the gateway does while it is busy.
 */

const closers: (() => Promise<void>)[] = [];
const serve = (listener: RequestListener) => loopbackServer(listener, closers);
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

const thread = new CallThread();
afterAll(() => thread.stop());

/** Calls to one upstream, and the end of its pool (what a drained gateway does). */
interface Upstream {
  call(request: typeof POST, limit: number, deadlineAt: number): Promise<CallResult>;
  close(): Promise<void>;
}

const PLACES: Record<string, (origin: string) => Upstream> = {
  'on the serving thread': (origin) => {
    const pool = new Pool(origin);
    closers.push(() => pool.destroy());
    return {
      call: (request, limit, deadlineAt) => httpCall(pool, request, limit, deadlineAt),
      close: () => pool.destroy(),
    };
  },
  'on the call thread': (origin) => {
    const pool = thread.newPool();
    closers.push(async () => thread.close(pool));
    return {
      call: (request, limit, deadlineAt) =>
        thread.call(pool, origin, { ...request, headers: {} }, limit, deadlineAt),
      close: async () => thread.close(pool),
    };
  },
};

const POST = { path: '/v1/x', method: 'POST', body: Buffer.from('{"q":1}') } as const;
const soon = () => Date.now() + 10_000;

describe.each(Object.entries(PLACES))('an upstream call %s', (_place, upstreamAt) => {
  const upstream = async (listener: RequestListener) => upstreamAt(await serve(listener));

  it('collects an answer sent in several chunks, with its status and headers, and sends the body', async () => {
    const to = await upstream((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        res.writeHead(201, { 'x-request-id': 'up_1' });
        res.write('{"got":');
        setTimeout(() => res.end(`${Buffer.concat(chunks).toString()}, "é": true}`), 20);
      });
    });
    const result = await to.call(POST, 1024, soon());
    expect(result).toMatchObject({ kind: 'response', status: 201, text: '{"got":{"q":1}, "é": true}' });
    expect(result.kind === 'response' && result.headers['x-request-id']).toBe('up_1');
  });

  it('answers many calls at once, each with its own answer', async () => {
    const to = await upstream((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => {
        body += c;
      });
      req.on('end', () => setTimeout(() => res.end(body), Math.random() * 20));
    });
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        to.call({ ...POST, body: Buffer.from(`{"i":${i}}`) }, 1024, soon()),
      ),
    );
    expect(results.map((result) => result.kind === 'response' && JSON.parse(result.text).i)).toEqual(
      Array.from({ length: 40 }, (_, i) => i),
    );
  });

  it('refuses an answer whose declared length passes the limit without reading it', async () => {
    const to = await upstream((_req, res) =>
      res.writeHead(200, { 'content-length': '2048' }).end('x'.repeat(2048)),
    );
    expect(await to.call(POST, 1024, soon())).toEqual({ kind: 'too_large', status: 200 });
  });

  it('stops reading an endless chunked answer once it passes the limit', async () => {
    const to = await upstream((_req, res) => {
      res.writeHead(502);
      const timer = setInterval(() => res.write('y'.repeat(512)), 5);
      res.on('close', () => clearInterval(timer));
    });
    expect(await to.call(POST, 4096, soon())).toEqual({ kind: 'too_large', status: 502 });
  });

  it('ends at the deadline while the upstream thinks, and while its body is still coming', async () => {
    const silent = await upstream(() => {});
    const started = Date.now();
    expect(await silent.call(POST, 1024, Date.now() + 150)).toEqual({ kind: 'deadline' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
    const halfway = await upstream((_req, res) => res.writeHead(200).write('{"half":'));
    expect(await halfway.call(POST, 1024, Date.now() + 150)).toEqual({ kind: 'deadline' });
  });

  it('reports a connection that fails, with its code', async () => {
    const to = await upstream((req) => req.socket.destroy());
    expect(await to.call(POST, 1024, soon())).toMatchObject({ kind: 'connection', code: 'UND_ERR_SOCKET' });
    const refused = upstreamAt('http://127.0.0.1:1');
    expect(await refused.call(POST, 1024, soon())).toMatchObject({
      kind: 'connection',
      code: 'ECONNREFUSED',
    });
  });

  it('reports a call after the pool is closed (the gateway has drained) as a failed connection, not a throw', async () => {
    const to = await upstream((_req, res) => res.end('{}'));
    expect(await to.call(POST, 1024, soon())).toMatchObject({ kind: 'response', text: '{}' });
    await to.close();
    expect(await to.call(POST, 1024, soon())).toMatchObject({
      kind: 'connection',
      code: 'UND_ERR_DESTROYED',
    });
  });
});
