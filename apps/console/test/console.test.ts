import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  composeGateway,
  createLogger,
  openSqliteStore,
  pricingFromCredits,
  type Store,
} from '@decision-gateway/gateway';
import { singleRoute } from '@decision-gateway/gateway/testing';
import { createLexicalUpstream, type Upstream } from '@decision-gateway/questions';
import { type Browser, chromium, type Page } from 'playwright-core';
import { build } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const HERE = join(import.meta.dirname, '..');
const SHOTS = join(HERE, 'test-results');
const ADMIN_TOKEN = 'console-test-admin-token-0123456789';
const REQUEST = {
  model: 'vendor/model-1.13',
  state: 'I was charged twice for my order. Please refund me.',
  questions: { refund: { type: 'noul', instructions: 'Is this a refund request?' } },
};

/** An upstream that sees images and answers every box question with the same box. */
const boxFinder: Upstream = {
  name: 'vision',
  capabilities: { images: true, imageUrls: false, box: true, maxImages: 32 },
  usageBound: () => ({ input_tokens: 4_000, output_tokens: 0 }),
  async answer({ request, images }) {
    const answers: Record<string, unknown> = {};
    for (const [id, question] of Object.entries(request.questions))
      answers[id] =
        question.type === 'box'
          ? { type: 'box', box: { top: 0.25, bottom: 0.75, left: 0.5, right: 0.9 }, confidence: 0.8 }
          : { type: 'noul', noul: images?.length ? 0.9 : 0.1 };
    return { ok: true, answers, usage: { input_tokens: 900, output_tokens: 0 } };
  },
};

describe('the console, in a real Chromium, by its accessible names', () => {
  /** A page's link in the navigation: a key named like a page ("quality") may be a link too. */
  const nav = (name: string) =>
    page.getByRole('navigation', { name: 'Pages' }).getByRole('link', { name, exact: true });
  let browser: Browser;
  let page: Page;
  let url: string;
  let store: Store;
  /** The page of the key the tests create. */
  let keyPage: string;
  const close: (() => Promise<unknown>)[] = [];

  beforeAll(async () => {
    // Its own build folder: `pnpm start` (another test) may be rebuilding apps/console/dist meanwhile.
    const dir = mkdtempSync(join(tmpdir(), 'dg-console-'));
    const dist = join(dir, 'dist');
    await build({ root: HERE, logLevel: 'warn', build: { outDir: dist, emptyOutDir: true } });
    store = openSqliteStore(join(dir, 'gateway.db'));
    const logger = createLogger('silent');
    const gateway = composeGateway({
      store,
      routes: new Map([
        // Text goes to the lexical baseline; a request with an image to the one upstream that sees it.
        ...singleRoute(createLexicalUpstream(), { logger, fallbacks: [boxFinder] }),
        // A route that escalates unsure nouls to a second upstream, for the Quality page's advice.
        ...singleRoute(createLexicalUpstream(), {
          logger,
          name: 'escalating',
          escalate: { to: { ...createLexicalUpstream(), name: 'strong' }, noulWithin: [0.2, 0.8] },
        }),
        // A route that marks nouls between 0.3 and 0.7 for a person, for the Review page.
        ...singleRoute(createLexicalUpstream(), {
          logger,
          name: 'reviewing',
          review: { noulWithin: [0.3, 0.7] },
        }),
      ]),
      logger,
      pricing: pricingFromCredits(1, 0),
      rateLimitPerMinute: 0,
      adminToken: ADMIN_TOKEN,
      consoleRoot: dist,
    });
    url = await gateway.app.listen({ port: 0, host: '127.0.0.1' });
    close.push(async () => {
      await gateway.app.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    });
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
    page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    mkdirSync(SHOTS, { recursive: true });
  });

  afterAll(async () => {
    await browser?.close();
    for (const done of close.reverse()) await done();
  });

  it('signs in by keyboard alone, keeping the token in sessionStorage only', async () => {
    await page.goto(`${url}/console`);
    // React renders after the load event: wait for the field, then use the keyboard alone.
    await page.getByRole('textbox', { name: 'Admin token' }).waitFor();
    await page.keyboard.press('Tab');
    await page.keyboard.type('not-the-token-0000000000');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('not valid');
    await page.getByLabel('Admin token').fill('');
    await page.getByLabel('Admin token').focus();
    await page.keyboard.type(ADMIN_TOKEN);
    await page.keyboard.press('Tab');
    await page.keyboard.press('Enter'); // the Sign in button
    // An operator lands on the Overview; keys, upstreams and the playground are a link away.
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    const pages = page.getByRole('navigation', { name: 'Pages' });
    for (const name of ['Overview', 'Keys', 'Upstreams', 'Playground'])
      await expect.poll(() => pages.getByRole('link', { name }).count()).toBe(1);
    const kept = await page.evaluate(() => ({
      session: sessionStorage.getItem('dg-admin-token'),
      cookie: document.cookie,
      local: localStorage.length,
      href: location.href,
    }));
    expect(kept).toEqual({ session: ADMIN_TOKEN, cookie: '', local: 0, href: `${url}/console` });
  });

  it('creates a key, shows its plain key once, and lists it', async () => {
    await nav('Keys').click();
    await page.getByRole('heading', { name: 'Keys' }).waitFor();
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.getByLabel('Name').fill('web-backend');
    await page.getByLabel('Credits').fill('50');
    await page.getByRole('button', { name: 'Create', exact: true }).click();
    const shown = await page.getByLabel('New key').textContent();
    expect(shown).toMatch(/^dg_[A-Za-z0-9_-]{43}$/);
    const table = page.getByRole('table').first();
    for (const header of ['Name', 'Prefix', 'Credits', 'Last used'])
      await expect.poll(() => table.getByRole('columnheader', { name: header }).count()).toBe(1);
    await page.getByRole('link', { name: 'web-backend' }).waitFor();
    // Real traffic for the charts: three answers and one refusal.
    for (let i = 0; i < 3; i++) {
      const ok = await fetch(`${url}/v1/systemone`, {
        method: 'POST',
        headers: { authorization: `Bearer ${shown}`, 'content-type': 'application/json' },
        body: JSON.stringify(REQUEST),
      });
      expect(ok.status).toBe(200);
    }
    await fetch(`${url}/v1/systemone`, {
      method: 'POST',
      headers: { authorization: `Bearer ${shown}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ...REQUEST, state: null }),
    });
  });

  it('shows all keys’ usage on the Overview: charts, by route, by upstream, top keys and the cache’s share', async () => {
    await nav('Overview').click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    for (const name of ['Requests over time', 'Credits over time', 'Latency over time'])
      await page.getByRole('img', { name }).waitFor();
    // Three answers and one refusal, all keys together.
    await expect.poll(() => page.getByText(/Requests over time: 4 requests \(1 failed\)/).count()).toBe(1);
    for (const title of ['By route', 'By upstream', 'Top keys']) {
      const table = page.getByRole('table', { name: title });
      for (const header of ['Requests', 'Errors', 'Credits', 'p95'])
        await expect.poll(() => table.getByRole('columnheader', { name: header }).count()).toBe(1);
    }
    const route = page.getByRole('table', { name: 'By route' }).getByRole('row', { name: /default/ });
    await expect.poll(() => route.textContent()).toMatch(/^default41/);
    await page
      .getByRole('table', { name: 'By upstream' })
      .getByRole('row', { name: /lexical/ })
      .waitFor();
    await page.getByRole('table', { name: 'Top keys' }).getByRole('link', { name: 'web-backend' }).waitFor();
    await expect.poll(() => page.getByText(/the cache gave 0% of answers \(0 of 3\)/).count()).toBe(1);
    for (const range of ['7 d', '30 d', '24 h']) {
      await page.getByRole('button', { name: range }).click();
      await expect
        .poll(() => page.getByRole('button', { name: range }).getAttribute('aria-pressed'))
        .toBe('true');
      await expect.poll(() => page.getByText(/Requests over time: 4 requests/).count()).toBe(1);
    }
    await page.screenshot({ path: join(SHOTS, 'console-overview.png'), fullPage: true });
  });

  it('shows the upstreams with their circuit state', async () => {
    await nav('Upstreams').click();
    await page.getByRole('heading', { name: 'Upstreams' }).waitFor();
    const row = page.getByRole('row', { name: /lexical/ }).first();
    await expect.poll(() => row.textContent()).toContain('closed');
  });

  it('asks a decision in the playground with a token it mints, and charts each answer', async () => {
    await nav('Playground').click();
    await page.getByRole('heading', { name: 'Playground' }).waitFor();
    await page.getByLabel('Key', { exact: true }).selectOption({ label: 'web-backend' });
    await page.getByRole('button', { name: 'Ask' }).click();
    const chart = page.getByRole('img', { name: 'Probabilities of team' });
    await chart.waitFor();
    await expect.poll(() => page.getByText(/x-dg-route default · x-dg-upstream lexical/).count()).toBe(1);
    await page.screenshot({ path: join(SHOTS, 'console-playground.png'), fullPage: true });
  });

  it('takes an image in the playground and draws the answered box over it', async () => {
    const photo = join(SHOTS, 'parcel.png');
    writeFileSync(photo, await parcelPicture());
    await page.getByLabel(/^Image/).setInputFiles(photo);
    await page.getByLabel('State', { exact: true }).fill('The parcel in photo arrived crushed.');
    await page.getByLabel('Type', { exact: true }).first().selectOption('box');
    await page.getByLabel('ID', { exact: true }).first().fill('dent');
    await page
      .getByLabel('Instructions', { exact: true })
      .first()
      .fill('Where on the parcel in photo is the dent?');
    await page.getByRole('button', { name: 'Ask' }).click();
    const drawn = page.getByRole('img', { name: 'Box of dent' });
    await drawn.waitFor();
    await expect.poll(() => page.getByText(/x-dg-upstream vision/).count()).toBe(1);
    await expect
      .poll(() =>
        page.getByText('dent: top 25.0%, bottom 75.0%, left 50.0%, right 90.0% (confidence 0.80)').count(),
      )
      .toBe(1);
    // The outline sits where the answer put it, over the picture as the browser drew it.
    const frame = await drawn.boundingBox();
    const outline = await drawn.locator('.box-outline').boundingBox();
    expect(frame && outline).toBeTruthy();
    if (frame && outline) {
      expect(Math.abs(outline.x - (frame.x + 0.5 * frame.width))).toBeLessThan(3);
      expect(Math.abs(outline.y - (frame.y + 0.25 * frame.height))).toBeLessThan(3);
      expect(Math.abs(outline.width - 0.4 * frame.width)).toBeLessThan(3);
    }
    await drawn.screenshot({ path: join(SHOTS, 'console-playground-box.png') });
  });

  it('charts a key’s usage, lists its recent requests, adds credits and revokes it after confirming', async () => {
    await nav('Keys').click();
    await page.getByRole('link', { name: 'web-backend' }).click();
    await page.getByRole('heading', { name: 'Usage' }).waitFor();
    for (const name of ['Requests over time', 'Credits over time'])
      await page.getByRole('img', { name }).waitFor();
    // Three answers, one refusal and the playground's two questions (text, then a photo), in the
    // summary screen readers get.
    await expect.poll(() => page.getByText(/Requests over time: 6 requests \(1 failed\)/).count()).toBe(1);
    await expect.poll(() => page.getByRole('row', { name: /console playground/ }).count()).toBe(2);
    await page.screenshot({ path: join(SHOTS, 'console-key.png'), fullPage: true });

    keyPage = page.url();
    const keyId = decodeURIComponent(page.url().split('#/keys/')[1] as string);
    const before = (await store.getKey(keyId))?.creditsMicro as number;
    await page.getByRole('button', { name: 'Add credits' }).click();
    await page.getByLabel('Amount').fill('25');
    await page.getByRole('button', { name: 'Add', exact: true }).click();
    await expect.poll(async () => (await store.getKey(keyId))?.creditsMicro).toBe(before + 25_000_000);

    await page.getByRole('button', { name: 'Revoke' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByRole('button', { name: 'Revoke' }).click();
    await expect.poll(async () => (await store.getKey(keyId))?.revokedAt).not.toBeNull();
    await expect.poll(() => page.getByText(/revoked \d{4}-/).count()).toBe(1);
  });

  it('shows an admin API error beside the control that caused it', async () => {
    await page.getByRole('button', { name: 'Add credits' }).click();
    await page.getByLabel('Amount').fill('-1000000');
    await page.getByRole('button', { name: 'Add', exact: true }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('amount');
  });

  it('shows each upstream’s calibration, a reliability diagram and the advice for a typed target', async () => {
    // Decisions on the escalating route and their outcomes, through the gateway's own doors.
    const created = await (
      await fetch(`${url}/admin/keys`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'quality', credits: null }),
      })
    ).json();
    const key = created.data.key as string;
    for (let i = 0; i < 24; i++) {
      const asked = await fetch(`${url}/v1/systemone`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': 'application/json',
          'x-dg-route': 'escalating',
        },
        body: JSON.stringify({ ...REQUEST, state: `${REQUEST.state} (${i})` }),
      });
      expect(asked.status).toBe(200);
      const recorded = await fetch(`${url}/v1/outcomes`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          requestId: asked.headers.get('x-request-id'),
          outcomes: { refund: i % 4 !== 0 },
        }),
      });
      expect(recorded.status).toBe(200);
    }
    await page.goto(`${url}/console#/`);
    await nav('Quality').click();
    await page.getByRole('heading', { name: 'Quality' }).waitFor();
    const table = page.getByRole('table', { name: 'Calibration' });
    for (const header of ['Upstream, type', 'Outcomes', 'Accuracy', 'Brier', 'ECE'])
      await expect.poll(() => table.getByRole('columnheader', { name: header }).count()).toBe(1);
    const row = table.getByRole('row', { name: /lexical/ });
    await expect.poll(() => row.textContent()).toMatch(/^lexical noul24/);
    // The first row is selected at first; another is selected by its button.
    await page.getByRole('img', { name: 'Reliability of lexical on noul, raw' }).waitFor();
    await page.getByLabel('Target accuracy').fill('0.7');
    const advice = page.getByRole('list', { name: 'Advice' });
    await expect
      .poll(() => advice.textContent())
      .toMatch(/Route escalating, lexical on noul \(24 outcomes\): noulWithin: \[/);
    await page.getByLabel('Target accuracy').fill('2');
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('Target accuracy');
    await page.getByLabel('Target accuracy').fill('0.9');
    await page.screenshot({ path: join(SHOTS, 'console-quality.png'), fullPage: true });
  });

  it('shows the active calibration maps with their held-out ECE before and after', async () => {
    await store.saveCalibrationMaps([
      {
        id: 'cal_console',
        upstream: 'lexical',
        type: 'noul',
        fittedAt: Date.now(),
        outcomes: 240,
        params: JSON.stringify({ a: 0.41, b: -0.29 }),
        heldOut: JSON.stringify({
          n: 48,
          before: { logLoss: 0.72, brier: 0.26, ece: 0.164 },
          after: { logLoss: 0.64, brier: 0.22, ece: 0.022 },
        }),
        active: true,
      },
    ]);
    await page.goto(`${url}/console#/`);
    await nav('Quality').click();
    const maps = page.getByRole('table', { name: 'Active maps' });
    const row = maps.getByRole('row', { name: /lexical noul/ });
    await expect.poll(() => row.textContent()).toContain('a = 0.410, b = -0.290');
    expect(await row.textContent()).toMatch(/2400\.1640\.022$/);
    // Both reliability diagrams of an upstream with an active map: the raw answers and the calibrated.
    await page.getByRole('img', { name: 'Reliability of lexical on noul, raw' }).waitFor();
    await page.getByRole('img', { name: 'Reliability of lexical on noul, calibrated' }).waitFor();
    await page.screenshot({ path: join(SHOTS, 'console-quality-maps.png'), fullPage: true });
  });

  it('reviews the oldest open item by keyboard alone: the truth by a radio, the reviewer, Submit', async () => {
    const created = await (
      await fetch(`${url}/admin/keys`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'review', credits: null }),
      })
    ).json();
    for (let i = 0; i < 2; i++) {
      const asked = await fetch(`${url}/v1/systemone`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${created.data.key}`,
          'content-type': 'application/json',
          'x-dg-route': 'reviewing',
        },
        body: JSON.stringify({ ...REQUEST, state: `${REQUEST.state} (review ${i})` }),
      });
      expect(asked.headers.get('x-dg-review')).toBe('refund');
    }
    await page.goto(`${url}/console#/review`);
    await page.getByRole('heading', { name: 'Review' }).waitFor();
    // The open count beside the page's link.
    await expect.poll(() => nav('Review (2)').count()).toBe(1);
    await expect.poll(() => page.locator('pre.state').textContent()).toContain('(review 0)');
    await expect.poll(() => page.getByText(/Answered \d+% yes/).count()).toBe(1);
    const truth = page.getByRole('radiogroup', { name: 'Truth of refund' });
    // Preset to what the upstream answered (p ≥ 0.5: yes); the reviewer says no, by keyboard.
    await truth.getByRole('radio', { name: 'yes' }).focus();
    await page.keyboard.press('ArrowDown');
    expect(await truth.getByRole('radio', { name: 'no' }).isChecked()).toBe(true);
    await page.keyboard.press('Tab');
    await page.keyboard.type('ana');
    expect(await page.getByLabel('Reviewer').inputValue()).toBe('ana');
    await page.keyboard.press('Tab');
    await page.screenshot({ path: join(SHOTS, 'console-review.png'), fullPage: true });
    await page.keyboard.press('Enter');
    // The next oldest item, and the count follows.
    await expect.poll(() => page.locator('pre.state').textContent()).toContain('(review 1)');
    await expect.poll(() => nav('Review (1)').count()).toBe(1);
    const items = await (
      await fetch(`${url}/admin/reviews?status=done`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    ).json();
    expect(items.data.reviews[0]).toMatchObject({
      reviewer: 'ana',
      outcomes: { refund: false },
      status: 'done',
    });
  });

  it('creates a project and sets its budget; shows budgets as bars on a key’s page, the Projects page and, past 80%, the Overview', async () => {
    await page.goto(`${url}/console#/`);
    await nav('Projects').click();
    await page.getByRole('heading', { name: 'Projects', exact: true }).waitFor();
    await page.getByLabel('Project name').fill('support team');
    await page.getByRole('button', { name: 'Create project' }).click();
    await page.getByRole('heading', { name: 'support team' }).waitFor();
    await page.getByLabel('Window').selectOption('hour');
    await page.getByLabel('Limit (credits)').fill('40');
    await page.getByRole('button', { name: 'Set budget' }).click();
    await page.getByRole('meter', { name: 'support team: hour budget' }).waitFor();
    const [project] = await store.listProjects();
    if (!project) throw new Error('the project was not created');
    expect(await store.budgets({ kind: 'project', id: project.id }, Date.now(), 0)).toEqual([
      { window: 'hour', limitMicro: 40_000_000, mode: 'hard', spentMicro: 0 },
    ]);

    // A key of the project with a soft day budget it spends past 80% of in one request.
    const created = await (
      await fetch(`${url}/admin/keys`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          name: 'budgeted',
          credits: 10,
          projectId: project.id,
          budgets: [{ window: 'day', limit: 0.01, mode: 'soft' }],
        }),
      })
    ).json();
    const asked = await fetch(`${url}/v1/systemone`, {
      method: 'POST',
      headers: { authorization: `Bearer ${created.data.key}`, 'content-type': 'application/json' },
      body: JSON.stringify(REQUEST),
    });
    expect(asked.status).toBe(200);

    await page.goto(`${url}/console#/`);
    await page.reload();
    await page.getByRole('heading', { name: 'Budgets past 80%' }).waitFor();
    const meter = page.getByRole('meter', { name: 'key budgeted: day budget' });
    await meter.waitFor();
    expect(Number(await meter.getAttribute('value'))).toBeCloseTo(0.01, 6);
    await page.getByRole('link', { name: 'key budgeted' }).click();
    await page.getByRole('heading', { name: 'Budgets' }).waitFor();
    await page.getByRole('meter', { name: 'budgeted: day budget' }).waitFor();
    await page.screenshot({ path: join(SHOTS, 'console-budgets.png'), fullPage: true });
  });

  it('does not scroll sideways at 375 px', async () => {
    await page.setViewportSize({ width: 375, height: 800 });
    for (const [target, heading, table] of [
      [`${url}/console#/`, 'Top keys', 'Top keys'],
      [`${url}/console#/playground`, 'Playground', undefined],
      [`${url}/console#/quality`, 'Quality', 'Calibration'],
      [keyPage, 'Usage', undefined],
    ] as const) {
      // A fresh load at this width, measured once its content is there (its widest table too).
      await page.goto(target);
      await page.reload();
      await page.getByRole('heading', { name: heading }).waitFor();
      if (table) await page.getByRole('table', { name: table }).waitFor();
      const width = await page.evaluate(() => document.documentElement.scrollWidth);
      expect(width, target).toBeLessThanOrEqual(375);
    }
    // The Quality page's table fits too: no column hidden behind a sideways scroll.
    await page.goto(`${url}/console#/quality`);
    const calibration = page.getByRole('table', { name: 'Calibration' });
    const [tableWidth, roomWidth] = await calibration.evaluate((table) => [
      table.scrollWidth,
      (table.parentElement as HTMLElement).clientWidth,
    ]);
    expect(tableWidth).toBeLessThanOrEqual(roomWidth);
    await page.screenshot({ path: join(SHOTS, 'console-quality-375.png'), fullPage: true });
    await page.screenshot({ path: join(SHOTS, 'console-375.png'), fullPage: true });
  });
});

/** A 320×200 PNG of a parcel-brown field with a darker patch (written by hand: PNG is simple). */
async function parcelPicture(): Promise<Buffer> {
  const { deflateSync } = await import('node:zlib');
  const width = 320;
  const height = 200;
  const rows = Buffer.alloc((width * 3 + 1) * height);
  for (let y = 0; y < height; y++) {
    const row = y * (width * 3 + 1);
    for (let x = 0; x < width; x++) {
      const dent = x > 170 && x < 280 && y > 60 && y < 140;
      rows.set(dent ? [110, 70, 30] : [200, 150, 90], row + 1 + x * 3);
    }
  }
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(body));
    return Buffer.concat([length, body, crc]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([8, 2, 0, 0, 0], 8);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(rows)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

function crc32(bytes: Buffer): number {
  let crc = 0xffffffff;
  for (const byte of bytes) {
    crc ^= byte;
    for (let k = 0; k < 8; k++) crc = crc & 1 ? (crc >>> 1) ^ 0xedb88320 : crc >>> 1;
  }
  return (crc ^ 0xffffffff) >>> 0;
}
