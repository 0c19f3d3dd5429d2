import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import {
  composeGateway,
  createKeyService,
  createLogger,
  openSqliteStore,
  pricingFromCredits,
} from '@decision-gateway/gateway';
import { singleRoute } from '@decision-gateway/gateway/testing';
import { createLexicalUpstream } from '@decision-gateway/questions';
import { type Browser, chromium, type Page } from 'playwright-core';
import { build } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startExampleServer } from '../server.ts';

const HERE = join(import.meta.dirname, '..');
const SHOTS = join(HERE, 'test-results');

/** A port nobody holds now: the page's origin must be known before the gateway starts. */
async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

describe('a React page on another origin, in a real Chromium', () => {
  let browser: Browser;
  let page: Page;
  let gatewayUrl: string;
  let apiKey: string;
  const logs: string[] = [];
  const close: (() => Promise<unknown>)[] = [];

  beforeAll(async () => {
    // Its own build folder, so two runs at once never rebuild the page under each other.
    const dist = mkdtempSync(join(tmpdir(), 'dg-frontend-dist-'));
    close.push(async () => rmSync(dist, { recursive: true, force: true }));
    await build({ root: HERE, logLevel: 'warn', build: { outDir: dist, emptyOutDir: true } });
    const pagePort = await freePort();
    const pageOrigin = `http://127.0.0.1:${pagePort}`;

    const dir = mkdtempSync(join(tmpdir(), 'dg-frontend-'));
    const store = openSqliteStore(join(dir, 'gateway.db'));
    const sink = new Writable({
      write(chunk, _encoding, done) {
        logs.push(String(chunk));
        done();
      },
    });
    const logger = createLogger('info', sink);
    const gateway = composeGateway({
      store,
      routes: singleRoute(createLexicalUpstream(), { logger }),
      logger,
      pricing: pricingFromCredits(1, 0),
      rateLimitPerMinute: 0,
      corsOrigins: [pageOrigin],
    });
    gatewayUrl = await gateway.app.listen({ port: 0, host: '127.0.0.1' });
    const created = await createKeyService(store).create({ name: 'frontend', credits: 100 });
    if (!created.ok) throw new Error(created.error.message);
    apiKey = created.value.key;
    close.push(async () => {
      await gateway.app.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    });

    const site = await startExampleServer({ port: pagePort, gatewayUrl, apiKey, dist });
    close.push(() => new Promise((resolve) => site.server.close(resolve)));

    const executablePath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
    if (!existsSync(executablePath))
      throw new Error(`no Chromium at ${executablePath}: apt-get install -y chromium (or set CHROMIUM_PATH)`);
    browser = await chromium.launch({
      executablePath,
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--no-first-run',
      ],
    });
    page = await browser.newPage();
    await page.goto(site.url);
    mkdirSync(SHOTS, { recursive: true });
  });

  afterAll(async () => {
    await browser?.close();
    for (const done of close.reverse()) await done();
  });

  it('asks a decision with a token its server minted, and shows the answer', async () => {
    await page.getByRole('button', { name: 'Ask' }).click();
    const answer = page.getByLabel('Answer');
    await answer.waitFor();
    expect(await answer.textContent()).toMatch(
      /^Team: billing \(billing \d+%, technical \d+%, sales \d+%\)\. Refund: \d+% likely\./,
    );
    await page.screenshot({ path: join(SHOTS, 'frontend-answer.png') });
    // The token was used from the page's origin and named its session on the usage record.
    expect(logs.join('')).toMatch(/"path":"\/trpc\/evaluate","status":200/);
  });

  it('cannot use the API key from the page: the gateway refuses it (40300) and the browser sees no answer', async () => {
    const outcome = await page.evaluate(
      async ({ url, key }) => {
        try {
          const response = await fetch(`${url}/v1/systemone`, {
            method: 'POST',
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
            body: JSON.stringify({
              model: 'vendor/model-1.13',
              state: 's',
              questions: { q: { type: 'noul', instructions: 'ok?' } },
            }),
          });
          return `status ${response.status}`;
        } catch (error) {
          return `blocked: ${(error as Error).name}`;
        }
      },
      { url: gatewayUrl, key: apiKey },
    );
    // No CORS header on an API-key answer: the browser withholds it from the page.
    expect(outcome).toBe('blocked: TypeError');
    expect(logs.join('')).toMatch(/"path":"\/v1\/systemone","status":403,"code":40300/);
  });

  it('refuses a token used from an origin it does not allow, and the page can read why', async () => {
    const minted = await fetch(`${gatewayUrl}/v1/tokens`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ origins: ['https://elsewhere.example.com'] }),
    });
    const { token } = ((await minted.json()) as { data: { token: string } }).data;
    const outcome = await page.evaluate(
      async ({ url, token }) => {
        const response = await fetch(`${url}/v1/systemone`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({
            model: 'vendor/model-1.13',
            state: 's',
            questions: { q: { type: 'noul', instructions: 'ok?' } },
          }),
        });
        return { status: response.status, body: (await response.json()) as { code: number } };
      },
      { url: gatewayUrl, token },
    );
    expect(outcome.status).toBe(403);
    expect(outcome.body.code).toBe(40300);
  });
});
