import { createLexicalUpstream } from '@decision-gateway/questions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryCache } from '../src/cache/memory-cache.ts';
import {
  ADMIN_TOKEN,
  bearer,
  get,
  post,
  sampleRequest,
  scriptedUpstream,
  send as sendTo,
  startGateway,
  type TestGateway,
} from './harness.ts';

// Budgets and projects over HTTP (docs/budgets.md): the admin API, its every refusal, and the
// 402 (40202) a request meets when a hard budget cannot take it.

const admin = bearer(ADMIN_TOKEN);

/** Every request costs exactly 0.1 credits (100 input tokens at 1 credit per 1000) and reserves as much. */
function tenthOfACredit() {
  const lexical = createLexicalUpstream();
  return scriptedUpstream(
    async (call) => {
      const answered = await lexical.answer(call);
      return answered.ok ? { ...answered, usage: { input_tokens: 100, output_tokens: 0 } } : answered;
    },
    () => ({ input_tokens: 100, output_tokens: 0 }),
  );
}

const send = (gw: TestGateway, method: string, path: string, body?: unknown) =>
  sendTo(gw.url, method, path, body, admin);

const ask = (gw: TestGateway, key: string, body = sampleRequest()) =>
  post(gw.url, '/v1/systemone', body, bearer(key));

describe('projects and budgets in the admin API', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startGateway({ adminToken: ADMIN_TOKEN, upstream: tenthOfACredit() });
  });
  afterAll(() => gw.close());

  it('creates, lists, reads, renames and deletes a project; a key joins and leaves it', async () => {
    const created = await send(gw, 'POST', '/admin/projects', {
      name: 'support',
      budgets: [{ window: 'month', limit: 1000 }],
    });
    expect(created.status).toBe(201);
    const project = created.body.data;
    expect(project).toMatchObject({ name: 'support', keyCount: 0 });
    expect(project.id).toMatch(/^prj_/);
    expect(project.budgets).toEqual([
      { window: 'month', limit: 1000, mode: 'hard', spent: 0, remaining: 1000, resetsAt: expect.any(String) },
    ]);
    const resets = new Date(project.budgets[0].resetsAt);
    expect(resets.getUTCDate()).toBe(1);
    expect(resets.getUTCHours()).toBe(0);

    const key = await post(gw.url, '/admin/keys', { name: 'svc', credits: 10, projectId: project.id }, admin);
    expect(key.status).toBe(201);
    expect(key.body.data).toMatchObject({ projectId: project.id, budgets: [] });
    expect((await get(gw.url, `/admin/projects/${project.id}`, admin)).body.data.keyCount).toBe(1);
    const listed = await get(gw.url, '/admin/projects', admin);
    expect(listed.body.data.projects.map((p: { id: string }) => p.id)).toContain(project.id);

    const renamed = await send(gw, 'PATCH', `/admin/projects/${project.id}`, { name: 'care', budgets: [] });
    expect(renamed.body.data).toMatchObject({ name: 'care', budgets: [] });

    // Only a project without keys may go.
    const refused = await send(gw, 'DELETE', `/admin/projects/${project.id}`);
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ code: 40001, message: expect.stringContaining('has 1 key') });
    const left = await send(gw, 'PATCH', `/admin/keys/${key.body.data.id}`, { projectId: null });
    expect(left.body.data.projectId).toBeNull();
    const deleted = await send(gw, 'DELETE', `/admin/projects/${project.id}`);
    expect(deleted.status).toBe(200);
    expect(deleted.body.data).toMatchObject({ id: project.id, name: 'care', keyCount: 0 });
    expect((await get(gw.url, `/admin/projects/${project.id}`, admin)).status).toBe(404);
  });

  it('answers 40400 for an unknown project on every path, and 40001 naming an unknown projectId', async () => {
    for (const [method, body] of [
      ['GET', undefined],
      ['PATCH', { name: 'x' }],
      ['DELETE', undefined],
    ] as const) {
      const sent = await send(gw, method, '/admin/projects/prj_nope', body);
      expect(sent.status).toBe(404);
      expect(sent.body).toMatchObject({ code: 40400, message: 'no project with id "prj_nope"' });
    }
    const created = await post(
      gw.url,
      '/admin/keys',
      { name: 'x', credits: 1, projectId: 'prj_nope' },
      admin,
    );
    expect(created.body).toMatchObject({
      code: 40001,
      message: 'projectId: no project with id "prj_nope"',
      error: { issues: [{ path: ['projectId'] }] },
    });
    const key = await post(gw.url, '/admin/keys', { name: 'y', credits: 1 }, admin);
    const patched = await send(gw, 'PATCH', `/admin/keys/${key.body.data.id}`, { projectId: 'prj_nope' });
    expect(patched.body).toMatchObject({ code: 40001, error: { issues: [{ path: ['projectId'] }] } });
    expect((await send(gw, 'PATCH', '/admin/keys/key_nope', { budgets: [] })).body.code).toBe(40400);
  });

  it.each([
    [{ window: 'fortnight', limit: 1 }, ['budgets', 0, 'window'], 'must be minute, hour, day, week or month'],
    [{ window: 'day', limit: 0 }, ['budgets', 0, 'limit'], 'must be more than 0'],
    [{ window: 'day', limit: -5 }, ['budgets', 0, 'limit'], 'must be more than 0'],
    [{ window: 'day', limit: 0.0000001 }, ['budgets', 0, 'limit'], 'must have at most 6 decimal places'],
    [{ window: 'day', limit: 1, mode: 'strict' }, ['budgets', 0, 'mode'], 'must be hard or soft'],
    [{ window: 'day', limit: 1, extra: true }, ['budgets', 0, 'extra'], ''],
  ])('refuses the budget %j (40001 at its path)', async (budget, path, message) => {
    const key = await post(gw.url, '/admin/keys', { name: 'b', credits: 1 }, admin);
    const sent = await send(gw, 'PATCH', `/admin/keys/${key.body.data.id}`, { budgets: [budget] });
    expect(sent.status).toBe(400);
    expect(sent.body.code).toBe(40001);
    expect(sent.body.error.issues[0].path).toEqual(path);
    expect(sent.body.message).toContain(message);
    const project = await send(gw, 'POST', '/admin/projects', { name: 'p', budgets: [budget] });
    expect(project.body.code).toBe(40001);
  });

  it('refuses two budgets on one window (40001 at the second)', async () => {
    const sent = await send(gw, 'POST', '/admin/projects', {
      name: 'twice',
      budgets: [
        { window: 'day', limit: 1 },
        { window: 'day', limit: 2, mode: 'soft' },
      ],
    });
    expect(sent.body).toMatchObject({
      code: 40001,
      message: 'budgets.1.window: a second budget on the day window: one per window',
    });
  });
});

describe('a hard budget refuses what it cannot take (402, 40202)', () => {
  let now = Date.parse('2026-11-26T10:15:30Z');
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startGateway({
      adminToken: ADMIN_TOKEN,
      upstream: tenthOfACredit(),
      clock: () => now,
      cache: createMemoryCache({ maxBytes: 1_000_000 }),
      cacheTtlSeconds: 3600,
    });
  });
  afterAll(() => gw.close());

  it('serves while the window has room, then refuses naming the key, the window and its reset; a new window serves again', async () => {
    const key = await post(
      gw.url,
      '/admin/keys',
      {
        name: 'metered',
        credits: 100,
        budgets: [
          { window: 'minute', limit: 0.3 },
          { window: 'day', limit: 50 },
        ],
      },
      admin,
    );
    const { id, key: secret } = key.body.data;
    for (let i = 0; i < 3; i++)
      expect((await ask(gw, secret, { ...sampleRequest(), state: `ticket ${i}` })).status).toBe(200);
    const refused = await ask(gw, secret, { ...sampleRequest(), state: 'one more' });
    expect(refused.status).toBe(402);
    expect(refused.body).toMatchObject({
      code: 40202,
      error: { type: 'budget_exceeded' },
      message: `this request would exceed the key ${id}'s minute budget (resets at 2026-11-26T10:16:00.000Z)`,
    });
    // 29.5 s to the next minute: Retry-After rounds up.
    expect(refused.headers.get('retry-after')).toBe('30');
    expect(refused.body.error.retryAfterMs).toBeGreaterThanOrEqual(29_500);
    expect(refused.body.error.retryAfterMs).toBeLessThanOrEqual(30_000);

    // Nothing charged for it, and its usage record says 402.
    const shown = await get(gw.url, `/admin/keys/${id}`, admin);
    expect(shown.body.data.credits).toBeCloseTo(99.7, 9);
    expect(shown.body.data.budgets).toEqual([
      {
        window: 'minute',
        limit: 0.3,
        mode: 'hard',
        spent: 0.3,
        remaining: 0,
        resetsAt: '2026-11-26T10:16:00.000Z',
      },
      {
        window: 'day',
        limit: 50,
        mode: 'hard',
        spent: 0.3,
        remaining: 49.7,
        resetsAt: '2026-11-27T00:00:00.000Z',
      },
    ]);
    const usage = await get(gw.url, `/admin/keys/${id}/usage`, admin);
    expect(usage.body.data.recent[0]).toMatchObject({ status: 402, creditsUsed: 0 });

    // A cached decision costs nothing and is never refused by a budget.
    const hit = await ask(gw, secret, { ...sampleRequest(), state: 'ticket 0' });
    expect(hit.status).toBe(200);
    expect(hit.headers.get('x-dg-cache')).toBe('hit');

    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    expect(metrics).toContain('dg_budget_refusals_total{holder="key",window="minute"} 1');

    // The next minute starts from 0, by arithmetic.
    now = Date.parse('2026-11-26T10:16:00Z');
    expect((await ask(gw, secret, { ...sampleRequest(), state: 'next minute' })).status).toBe(200);
    const after = await get(gw.url, `/admin/keys/${id}`, admin);
    expect(after.body.data.budgets[0]).toMatchObject({ spent: 0.1, resetsAt: '2026-11-26T10:17:00.000Z' });
  });

  it('a project’s budget is shared by its keys; its refusal names the project; byProject sums them', async () => {
    const project = (
      await send(gw, 'POST', '/admin/projects', { name: 'team', budgets: [{ window: 'hour', limit: 0.25 }] })
    ).body.data;
    const a = (await post(gw.url, '/admin/keys', { name: 'a', credits: 10, projectId: project.id }, admin))
      .body.data;
    const b = (await post(gw.url, '/admin/keys', { name: 'b', credits: 10, projectId: project.id }, admin))
      .body.data;
    expect((await ask(gw, a.key, { ...sampleRequest(), state: 'team 1' })).status).toBe(200);
    expect((await ask(gw, b.key, { ...sampleRequest(), state: 'team 2' })).status).toBe(200);
    const refused = await ask(gw, a.key, { ...sampleRequest(), state: 'team 3' });
    expect(refused.body).toMatchObject({
      code: 40202,
      message: `this request would exceed the project ${project.id}'s hour budget (resets at 2026-11-26T11:00:00.000Z)`,
    });
    const shown = (await get(gw.url, `/admin/projects/${project.id}`, admin)).body.data;
    expect(shown).toMatchObject({ keyCount: 2, budgets: [{ window: 'hour', spent: 0.2, remaining: 0.05 }] });

    const summary = await get(
      gw.url,
      '/admin/usage/summary?from=2026-11-26T00:00:00Z&to=2026-11-26T12:00:00Z',
      admin,
    );
    const row = summary.body.data.byProject.find((p: { projectId: string }) => p.projectId === project.id);
    expect(row).toMatchObject({ name: 'team', requests: 3, errors: 1, creditsUsed: 0.2 });
  });
});

describe('a soft budget never refuses', () => {
  it('serves past its limit, logs each crossing once and counts it', async () => {
    const gw = await startGateway({ adminToken: ADMIN_TOKEN, upstream: tenthOfACredit() });
    try {
      const key = (
        await post(
          gw.url,
          '/admin/keys',
          { name: 's', credits: 10, budgets: [{ window: 'day', limit: 0.25, mode: 'soft' }] },
          admin,
        )
      ).body.data;
      for (let i = 0; i < 4; i++)
        expect((await ask(gw, key.key, { ...sampleRequest(), state: `soft ${i}` })).status).toBe(200);
      const warnings = gw.logs.map((line) => JSON.parse(line)).filter((line) => line.threshold !== undefined);
      expect(warnings.map((w) => [w.level, w.holder, w.holderId, w.window, w.threshold])).toEqual([
        [40, 'key', key.id, 'day', 0.8],
        [40, 'key', key.id, 'day', 1],
      ]);
      const metrics = await (await fetch(`${gw.url}/metrics`)).text();
      expect(metrics).toContain('dg_budget_crossings_total{holder="key",window="day",threshold="0.8"} 1');
      expect(metrics).toContain('dg_budget_crossings_total{holder="key",window="day",threshold="1"} 1');
      const shown = (await get(gw.url, `/admin/keys/${key.id}`, admin)).body.data;
      expect(shown.budgets[0]).toMatchObject({ mode: 'soft', spent: 0.4, remaining: 0 });
    } finally {
      await gw.close();
    }
  });
});
