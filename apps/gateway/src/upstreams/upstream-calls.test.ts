import { createServer, type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { CallRequest } from './http-call.js';
import {
  openUpstreamCalls,
  startUpstreamThread,
  stopUpstreamThread,
  THREAD_MAX_BODY_BYTES,
  THREAD_STOPPED,
  type UpstreamCalls,
} from './upstream-calls.ts';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  await stopUpstreamThread();
});

/** A real server on loopback, and its origin. */
async function serve(listener: RequestListener): Promise<string> {
  const server = createServer(listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function open(origin: string, threadFrom: number): UpstreamCalls {
  const calls = openUpstreamCalls(origin, { threadFrom });
  closers.push(() => calls.close());
  return calls;
}

const POST: CallRequest = {
  path: '/v1/x',
  method: 'POST',
  headers: {
    'content-type': 'application/json',
    traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
  },
  body: Buffer.from('{"q":1}'),
};
const soon = () => Date.now() + 10_000;

/** The same server, read back by the same call on the serving thread and on the upstream thread. */
const echo: RequestListener = (req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    res.writeHead(201, { 'x-request-id': 'up_1', 'x-trace': req.headers.traceparent ?? '' });
    res.write('{"got":');
    setTimeout(() => res.end(`${Buffer.concat(chunks).toString()}, "é": true}`), 20);
  });
};

describe('upstream calls on two threads', () => {
  it('answers a call on the upstream thread as on the serving thread: status, headers, body sent and read', async () => {
    const origin = await serve(echo);
    const here = await open(origin, Number.MAX_SAFE_INTEGER).call(POST, 1024, soon());
    await startUpstreamThread();
    const there = await open(origin, 1).call(POST, 1024, soon());
    expect(there).toMatchObject({ kind: 'response', status: 201, text: '{"got":{"q":1}, "é": true}' });
    const headersOf = (result: typeof here) =>
      result.kind === 'response' && [result.headers['x-request-id'], result.headers['x-trace']];
    expect(headersOf(there)).toEqual(['up_1', POST.headers?.traceparent]);
    expect({ ...there, headers: undefined }).toEqual({ ...here, headers: undefined });
  });

  it('keeps the limit, the deadline and the failures of a call on the upstream thread', async () => {
    await startUpstreamThread();
    const large = await serve((_req, res) =>
      res.writeHead(200, { 'content-length': '2048' }).end('x'.repeat(2048)),
    );
    expect(await open(large, 1).call(POST, 1024, soon())).toEqual({ kind: 'too_large', status: 200 });
    const silent = await serve(() => {});
    const started = Date.now();
    expect(await open(silent, 1).call(POST, 1024, Date.now() + 150)).toEqual({ kind: 'deadline' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
    expect(await open('http://127.0.0.1:1', 1).call(POST, 1024, soon())).toMatchObject({
      kind: 'connection',
      code: 'ECONNREFUSED',
    });
  });

  it('hands over only the calls of a busy turn; those the thread held when it stopped fail as connections', async () => {
    await startUpstreamThread();
    const silent = open(await serve(() => {}), 2);
    const alone = silent.call(POST, 1024, Date.now() + 1_000); // alone in its turn: the serving thread's
    await new Promise((resolve) => setImmediate(resolve));
    const together = [
      silent.call(POST, 1024, Date.now() + 1_000),
      silent.call(POST, 1024, Date.now() + 1_000),
    ];
    await new Promise((resolve) => setTimeout(resolve, 100));
    await stopUpstreamThread();
    const stopped = { kind: 'connection', reason: 'the upstream thread stopped', code: THREAD_STOPPED };
    expect(await Promise.all(together)).toEqual([stopped, stopped]);
    expect(await alone).toEqual({ kind: 'deadline' });
  });

  it('keeps a large body on the serving thread, however busy the turn', async () => {
    await startUpstreamThread();
    const silent = open(await serve(() => {}), 1);
    const large = { ...POST, body: Buffer.alloc(THREAD_MAX_BODY_BYTES + 1, 0x20) };
    const [small, image] = [
      silent.call(POST, 1024, Date.now() + 1_000),
      silent.call(large, 1024, Date.now() + 1_000),
    ];
    await new Promise((resolve) => setTimeout(resolve, 100));
    await stopUpstreamThread();
    expect(await small).toMatchObject({ code: THREAD_STOPPED });
    expect(await image).toEqual({ kind: 'deadline' });
  });

  it('fails calls after close as connections, on either thread; a new upstream starts the thread again', async () => {
    await startUpstreamThread();
    const origin = await serve((_req, res) => res.end('{}'));
    const calls = openUpstreamCalls(origin, { threadFrom: 1 });
    expect(await calls.call(POST, 1024, soon())).toMatchObject({ kind: 'response', status: 200 });
    await calls.close();
    expect(await calls.call(POST, 1024, soon())).toMatchObject({
      kind: 'connection',
      code: 'UND_ERR_DESTROYED',
    });
    // The thread ended with the last upstream: a call beyond the threshold starts another, and goes
    // on the serving thread until it has.
    const next = open(origin, 1);
    expect(await next.call(POST, 1024, soon())).toMatchObject({ kind: 'response', status: 200 });
    await startUpstreamThread();
    expect(await next.call(POST, 1024, soon())).toMatchObject({ kind: 'response', status: 200 });
  });
});
