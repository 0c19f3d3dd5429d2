import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLexicalUpstream } from '@decision-gateway/questions';
import { Pool } from 'undici';
import { describe, expect, it } from 'vitest';
import { listeningAddress, startGatewayProcess } from './gateway-process.ts';
import { bearer, post, sampleRequest, scriptedUpstream, startGateway } from './harness.ts';

const startProcess = startGatewayProcess;

describe('process lifecycle (pnpm start)', () => {
  it('creates and prints the bootstrap key once, serves it, and exits cleanly on SIGTERM', async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'dg-start-'));
    try {
      const first = startProcess(cwd, {});
      const url = await listeningAddress(first);
      const keys = first.stdout().match(/dg_[A-Za-z0-9_-]{43}/g) ?? [];
      expect(new Set(keys).size).toBe(1);
      const key = keys[0] as string;
      // The key appears in the bootstrap message only, never in a log line.
      expect(
        first
          .stdout()
          .split('\n')
          .filter((l) => l.startsWith('{') && l.includes(key)),
      ).toEqual([]);
      const response = await post(url, '/v1/systemone', sampleRequest(), bearer(key));
      expect(response.status).toBe(200);
      expect(response.body.data.creditsUsed).toBeGreaterThan(0);

      // Sixteen new connections a turn by default, through copies of its listening socket, and a
      // queue of 4096 (as far as the kernel allows): a listening socket's Send-Q in `ss`.
      expect(first.stdout()).toContain('"acceptsPerTurn":16');
      const somaxconn = Number(readFileSync('/proc/sys/net/core/somaxconn', 'utf8'));
      const listed = execFileSync('ss', ['-Hltn', `sport = :${new URL(url).port}`]).toString();
      expect(listed.trim().split(/\s+/)[2]).toBe(String(Math.min(4096, somaxconn)));

      first.child.kill('SIGTERM');
      expect(await first.exited).toBe(0);
      expect(first.stdout()).toContain('"stopped"');
      // No copy of the listening socket outlives the gateway (the child that made them included).
      expect(await connectionRefused(url)).toBe(true);

      const second = startProcess(cwd, {});
      const url2 = await listeningAddress(second);
      expect(second.stdout()).not.toContain('bootstrap API key');
      const again = await post(url2, '/v1/systemone', sampleRequest(), bearer(key));
      expect(again.status).toBe(200);
      second.child.kill('SIGTERM');
      expect(await second.exited).toBe(0);
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  });

  it('stops at start with a message naming a bad variable', async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'dg-bad-'));
    try {
      const running = startProcess(cwd, { PORT: 'eighty', UPSTREAM: 'magic' });
      expect(await running.exited).toBe(1);
      expect(running.stderr()).toContain('PORT: must be a whole number');
      expect(running.stderr()).toContain('UPSTREAM: must be one of lexical, systemone, openai');
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  });
});

describe('graceful drain', () => {
  it('stops listening on every copy of the listening socket', async () => {
    const gw = await startGateway({ upstream: createLexicalUpstream() });
    try {
      await gw.gateway.acceptPerTurn(4, 511);
      const { key } = await gw.createKey({ credits: 10 });
      // Twelve at once, each on a new connection: whichever copy accepts one, it is the gateway's own.
      const answers = await Promise.all(
        Array.from({ length: 12 }, () => post(gw.url, '/v1/systemone', sampleRequest(), bearer(key))),
      );
      expect(answers.map((answer) => answer.status)).toEqual(Array(12).fill(200));
      await gw.gateway.drain();
      expect(await connectionRefused(gw.url)).toBe(true);
    } finally {
      await gw.close();
    }
  });

  it('finishes and settles in-flight requests, refuses new ones, and answers /readyz 503 while draining', async () => {
    const lexical = createLexicalUpstream();
    // The upstream holds the request until the test has seen the drain's answers: no timing.
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const upstream = scriptedUpstream(
      async (call) => {
        await held;
        return lexical.answer(call);
      },
      (request, bytes) => lexical.usageBound(request, bytes),
    );
    const gw = await startGateway({ upstream });
    // Keep-alive connections opened before the drain, one per request sent during it: each answer
    // in a drain closes its connection (docs/operating.md), so no request may need a new one.
    const forReady = new Pool(gw.url, { connections: 1 });
    const forLate = new Pool(gw.url, { connections: 1 });
    try {
      const { id, key } = await gw.createKey({ credits: 10 });
      for (const pool of [forReady, forLate])
        expect((await pool.request({ path: '/healthz', method: 'GET' })).statusCode).toBe(200);
      const inFlight = post(gw.url, '/v1/systemone', sampleRequest(), bearer(key));
      await until(() => upstream.calls === 1);
      const draining = gw.gateway.drain();

      const [ready, late] = await Promise.all([
        forReady.request({ path: '/readyz', method: 'GET' }),
        forLate.request({
          path: '/v1/systemone',
          method: 'POST',
          headers: { 'content-type': 'application/json', ...bearer(key) },
          body: JSON.stringify(sampleRequest()),
        }),
      ]);
      expect(ready.statusCode).toBe(503);
      expect(await ready.body.json()).toMatchObject({ code: 50300, error: { type: 'unavailable' } });
      expect(late.statusCode).toBe(503);
      expect(late.headers.connection).toBe('close');
      expect(await late.body.json()).toMatchObject({ code: 50300, error: { type: 'unavailable' } });

      release();
      const response = await inFlight;
      expect(response.status).toBe(200);
      await draining;
      const after = await gw.keys.get(id);
      expect(after.ok && after.value.credits).toBeCloseTo(10 - response.body.data.creditsUsed, 9);
    } finally {
      release();
      await forReady.destroy();
      await forLate.destroy();
      await gw.close();
    }
  });
});

/** Whether a new TCP connection to `url` is refused (nothing listens there any more). */
function connectionRefused(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code === 'ECONNREFUSED'));
  });
}

/** Waits for a condition the test can observe, with a generous deadline (never for machine work). */
async function until(condition: () => boolean, timeoutMs = 15_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > end) throw new Error('the condition never held');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
