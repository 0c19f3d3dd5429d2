import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, startGateway, type TestGateway } from './harness.ts';

const dist = mkdtempSync(join(tmpdir(), 'dg-console-dist-'));
writeFileSync(
  join(dist, 'index.html'),
  '<!doctype html><title>console</title><script type="module" src="/console/app.js"></script>',
);
writeFileSync(join(dist, 'app.js'), 'export {};');
const gateways: TestGateway[] = [];
afterAll(async () => {
  await Promise.all(gateways.map((gw) => gw.close()));
  rmSync(dist, { recursive: true, force: true });
});

describe('GET /console', () => {
  it('serves the built page and its files with a strict Content-Security-Policy', async () => {
    const gw = await startGateway({ adminToken: ADMIN_TOKEN, consoleRoot: dist });
    gateways.push(gw);
    for (const path of ['/console', '/console/', '/console/app.js']) {
      const response = await fetch(`${gw.url}${path}`);
      expect([path, response.status]).toEqual([path, 200]);
      const csp = response.headers.get('content-security-policy') ?? '';
      expect(csp).toContain("script-src 'self'");
      expect(csp).toContain("connect-src 'self'");
      expect(csp).not.toContain('unsafe-inline');
    }
    expect(await (await fetch(`${gw.url}/console`)).text()).toContain('<title>console</title>');
    const missing = await fetch(`${gw.url}/console/nope.js`);
    expect([missing.status, ((await missing.json()) as { code: number }).code]).toEqual([404, 40400]);
  });

  it('is a 404 when ADMIN_TOKEN is unset', async () => {
    const gw = await startGateway({ consoleRoot: dist });
    gateways.push(gw);
    const response = await fetch(`${gw.url}/console`);
    expect([response.status, ((await response.json()) as { code: number }).code]).toEqual([404, 40400]);
  });

  it('says how to build it when it is not built', async () => {
    const gw = await startGateway({ adminToken: ADMIN_TOKEN, consoleRoot: join(dist, 'nowhere') });
    gateways.push(gw);
    const response = await fetch(`${gw.url}/console/`);
    const body = (await response.json()) as { code: number; message: string };
    expect([response.status, body.code]).toEqual([503, 50300]);
    expect(body.message).toContain('pnpm start');
  });
});
