import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLexicalUpstream } from '@decision-gateway/questions';
import { describe, expect, it } from 'vitest';
import { listeningAddress, startGatewayProcess } from './gateway-process.ts';
import { bearer, get, post, sampleRequest, scriptedUpstream, sleep, startGateway } from './harness.ts';

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

      first.child.kill('SIGTERM');
      expect(await first.exited).toBe(0);
      expect(first.stdout()).toContain('"stopped"');

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
      expect(running.stderr()).toContain('UPSTREAM: must be lexical, systemone or openai');
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  });
});

describe('graceful drain', () => {
  it('finishes and settles in-flight requests, refuses new ones, and answers /readyz 503 while draining', async () => {
    const lexical = createLexicalUpstream();
    const upstream = scriptedUpstream(
      async (call) => {
        await sleep(400);
        return lexical.answer(call);
      },
      (request, bytes) => lexical.usageBound(request, bytes),
    );
    const gw = await startGateway({ upstream });
    const { id, key } = await gw.createKey({ credits: 10 });
    const inFlight = post(gw.url, '/v1/systemone', sampleRequest(), bearer(key));
    await sleep(100);
    const draining = gw.gateway.drain();
    await sleep(20);
    const ready = await get(gw.url, '/readyz').catch(() => undefined);
    if (ready) expect(ready.status).toBe(503);
    const late = await post(gw.url, '/v1/systemone', sampleRequest(), bearer(key)).catch(() => undefined);
    if (late) expect(late.body).toMatchObject({ code: 50300, error: { type: 'unavailable' } });

    const response = await inFlight;
    expect(response.status).toBe(200);
    await draining;
    const after = await gw.keys.get(id);
    expect(after.ok && after.value.credits).toBeCloseTo(10 - response.body.data.creditsUsed, 9);
    await gw.close();
  });
});
