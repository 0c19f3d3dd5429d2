import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/environment.ts';
import { createUpstream } from '../src/upstreams/registry.ts';
import { listeningAddress, startGatewayProcess } from './gateway-process.ts';
import { bearer, post, sampleRequest, startGateway, type TestGateway } from './harness.ts';
import { json, nativeAnswer, startStandIn } from './stand-in-upstream.ts';

const REPO = resolve(import.meta.dirname, '../../..');
const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});
const workdir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'dg-edges-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
};

/** Whether something accepts connections at host:port now. */
function listening(port: number): Promise<boolean> {
  return new Promise((done) => {
    const socket = connect({ host: '127.0.0.1', port }, () => {
      socket.destroy();
      done(true);
    });
    socket.on('error', () => done(false));
  });
}

async function waitFor(condition: () => Promise<boolean>, what: string, timeoutMs = 30_000) {
  const end = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** One raw request on a fresh socket, answered in full (the server closes or sends a length). */
function raw(url: string, text: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((done, fail) => {
    const socket = connect({ host: hostname, port: Number(port) }, () => socket.write(text));
    let received = '';
    socket.on('data', (chunk) => {
      received += chunk;
      const [head, body = ''] = received.split('\r\n\r\n');
      const length = /content-length: (\d+)/i.exec(head ?? '')?.[1];
      if (length !== undefined && Buffer.byteLength(body) >= Number(length)) {
        socket.destroy();
        done(received);
      }
    });
    socket.on('end', () => done(received));
    socket.on('error', fail);
  });
}

describe('process and start', () => {
  it('stops with pnpm start when pnpm gets SIGTERM, freeing the port', async () => {
    const cwd = workdir();
    // Port 0: the gateway takes a free port as it listens and logs it. A port picked beforehand
    // could be taken by another process while `pnpm start` builds the console, and the gateway
    // would then exit while that process answered in its place.
    const pnpm = spawn('pnpm', ['start'], {
      cwd: REPO,
      env: {
        ...process.env,
        PORT: '0',
        DATABASE_URL: `file:${join(cwd, 'g.db')}`,
        LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    pnpm.stdout?.on('data', (chunk) => {
      out += chunk;
    });
    pnpm.stderr?.on('data', (chunk) => {
      err += chunk;
    });
    cleanups.push(() => pnpm.kill('SIGKILL'));
    const line = () => out.split('\n').find((l) => l.includes('"gateway listening"'));
    await waitFor(
      async () => line() !== undefined || pnpm.exitCode !== null,
      'the gateway to say it listens',
    );
    const listened = line();
    if (listened === undefined) throw new Error(`pnpm start exited (${pnpm.exitCode}):\n${out}\n${err}`);
    const { pid: gatewayPid, address } = JSON.parse(listened) as { pid: number; address: string };
    const port = Number(new URL(address).port);
    expect(await listening(port)).toBe(true);
    expect(gatewayPid).not.toBe(pnpm.pid);
    pnpm.kill('SIGTERM');
    await waitFor(async () => !(await listening(port)), 'the port to be freed');
    await waitFor(async () => {
      try {
        process.kill(gatewayPid, 0);
        return false;
      } catch {
        return true;
      }
    }, 'the gateway process to exit');
  }, 60_000);

  it('says in one line that the port is taken, and exits non-zero', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise((resolve) => taken.close(resolve)));
    const { port } = taken.address() as { port: number };
    const running = startGatewayProcess(workdir(), { PORT: String(port) });
    expect(await running.exited).toBe(1);
    expect(running.stderr()).toBe(`Cannot listen on 127.0.0.1:${port}: the address is already in use\n`);
  });

  it('reads a .env file in the working directory, the environment winning over it', async () => {
    const cwd = workdir();
    writeFileSync(join(cwd, '.env'), 'ADMIN_TOKEN=from-the-env-file-0123456789\nRATE_LIMIT_PER_MINUTE=7\n');
    const running = startGatewayProcess(cwd, { RATE_LIMIT_PER_MINUTE: '9' });
    cleanups.push(() => running.child.kill('SIGKILL'));
    const url = await listeningAddress(running);
    const admin = await fetch(`${url}/admin/keys`, { headers: bearer('from-the-env-file-0123456789') });
    expect(admin.status).toBe(200);
    running.child.kill('SIGTERM');
    await running.exited;
  });
});

describe('upstream answers', () => {
  it('reads at most UPSTREAM_MAX_BODY_BYTES of an answer: a larger one is a 502, uncharged', async () => {
    const huge = await startStandIn((req, res) => {
      const answer = nativeAnswer(req) as unknown as Record<string, unknown>;
      answer.padding = 'x'.repeat(3 * 1024 * 1024);
      json(res, 200, answer);
    });
    cleanups.push(huge.close);
    const loaded = loadConfig({
      UPSTREAM: 'systemone',
      UPSTREAM_BASE_URL: huge.url,
      UPSTREAM_MAX_BODY_BYTES: '1048576',
    });
    if (!loaded.ok) throw new Error(loaded.problems.join('\n'));
    const gw = await startGateway({
      upstream: (logger) =>
        createUpstream(loaded.config.upstream, logger, { maxBodyBytes: loaded.config.upstreamMaxBodyBytes }),
    });
    cleanups.push(() => gw.close());
    const { id, key } = await gw.createKey({ credits: 10 });
    const response = await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key));
    expect(response.body).toMatchObject({ code: 50200, error: { type: 'upstream_error' } });
    expect(response.body.message).toContain('larger than 1048576 bytes');
    expect(await gw.store.ledgerBalance(id)).toBe(10_000_000);
  });

  it('stops reading a chunked answer (no declared length) once it passes the limit', async () => {
    let written = 0;
    const endless = await startStandIn((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"answers": {}, "padding": "');
      const chunk = 'x'.repeat(64 * 1024);
      const more = () => {
        // 8 MiB at most: the gateway must have stopped long before.
        if (res.destroyed || written > 8 * 1024 * 1024) return res.end('"}');
        written += chunk.length;
        if (res.write(chunk)) setImmediate(more);
        else res.once('drain', more);
      };
      more();
    });
    cleanups.push(endless.close);
    const loaded = loadConfig({ UPSTREAM: 'systemone', UPSTREAM_BASE_URL: endless.url });
    if (!loaded.ok) throw new Error(loaded.problems.join('\n'));
    const gw = await startGateway({
      upstream: (logger) => createUpstream(loaded.config.upstream, logger, { maxBodyBytes: 256 * 1024 }),
    });
    cleanups.push(() => gw.close());
    const { key } = await gw.createKey({ credits: 10 });
    const response = await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key));
    expect(response.body).toMatchObject({ code: 50200 });
    expect(response.body.message).toContain('larger than 262144 bytes');
  });

  it('answers 504 when the body is still arriving at the deadline', async () => {
    const slow = await startStandIn((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"answers": {');
      // …and the rest never comes.
    });
    cleanups.push(slow.close);
    const loaded = loadConfig({
      UPSTREAM: 'systemone',
      UPSTREAM_BASE_URL: slow.url,
      UPSTREAM_TIMEOUT_MS: '300',
    });
    if (!loaded.ok) throw new Error(loaded.problems.join('\n'));
    const gw = await startGateway({
      upstream: (logger) => createUpstream(loaded.config.upstream, logger),
      upstreamTimeoutMs: 300,
    });
    cleanups.push(() => gw.close());
    const { key } = await gw.createKey();
    const response = await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key));
    expect(response.body).toMatchObject({ code: 50400, error: { type: 'upstream_timeout' } });
  });
});

describe('answers below the router are the envelope, with a request id', () => {
  let gw: TestGateway;
  afterAll(() => gw?.close());

  it('answers an HTTP/1.1 request without Host in the envelope', async () => {
    gw = await startGateway();
    const answer = await raw(gw.url, 'GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n');
    expect(answer).toMatch(/^HTTP\/1\.1 400/);
    expect(answer).toMatch(/x-request-id: req_/i);
    const body = JSON.parse(answer.split('\r\n\r\n')[1] as string);
    expect(body).toMatchObject({
      code: 40001,
      error: { type: 'invalid_request' },
      requestId: expect.stringMatching(/^req_/),
    });
  });

  it('ignores an Expect it does not know, answering the request as usual', async () => {
    gw ??= await startGateway();
    const answer = await raw(
      gw.url,
      `GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: bogus\r\nConnection: close\r\n\r\n`,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 200/);
    expect(JSON.parse(answer.split('\r\n\r\n')[1] as string)).toMatchObject({
      code: 0,
      data: { status: 'ok' },
    });
  });

  it('refuses a Content-Type that does not parse with 415, after authentication', async () => {
    gw ??= await startGateway();
    const { key } = await gw.createKey();
    for (const type of ['application/json;;;charset="', 'application/json; charset', 'application/json x']) {
      const response = await post(gw.url, '/v1/systemone', sampleRequest(), {
        ...bearer(key),
        'content-type': type,
      });
      expect([type, response.body.code]).toEqual([type, 41500]);
    }
    expect(
      (await post(gw.url, '/v1/systemone', sampleRequest(), { 'content-type': 'application/json;;;' })).body
        .code,
    ).toBe(40100);
    const fine = await post(gw.url, '/v1/systemone', sampleRequest(), {
      ...bearer(key),
      'content-type': 'Application/JSON; charset="utf-8"',
    });
    expect(fine.status).toBe(200);
  });
});

describe('metrics', () => {
  it('counts credits without float noise, labels a 405 by its path and tRPC calls by procedure', async () => {
    const gw = await startGateway();
    cleanups.push(() => gw.close());
    const { key } = await gw.createKey({ credits: 100 });
    let debited = 0;
    for (let i = 0; i < 7; i++)
      debited += (await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key))).body.data.creditsUsed;
    await fetch(`${gw.url}/v1/systemone`, { method: 'GET' });
    await fetch(`${gw.url}/trpc/models`, { headers: bearer(key) });
    // Every procedure of the router has its own label, outcomes.record included.
    await post(
      gw.url,
      '/trpc/outcomes.record',
      { requestId: 'req_unknown', outcomes: { a: true } },
      bearer(key),
    );
    const text = await (await fetch(`${gw.url}/metrics`)).text();
    const total = /^dg_credits_debited_total (\S+)$/m.exec(text)?.[1] as string;
    expect(total).toBe(String(Math.round(debited * 1e6) / 1e6));
    expect(text).toContain(
      'dg_http_requests_total{route="/v1/systemone",method="GET",status="405",code="40500"} 1',
    );
    expect(text).toContain(
      'dg_http_requests_total{route="/trpc/models",method="GET",status="200",code="0"} 1',
    );
    expect(text).toContain(
      'dg_http_requests_total{route="/trpc/outcomes.record",method="POST",status="404",code="40400"} 1',
    );
  });
});
