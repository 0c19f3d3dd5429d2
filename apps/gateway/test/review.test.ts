import type { ChoiceResponse, NoulResponse, Usage } from '@typesafe-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_TOKEN,
  bearer,
  configuredRoutes,
  get,
  post,
  startGateway,
  type TestGateway,
} from './harness.ts';
import { json, type SeenRequest, type StandIn, startStandIn } from './stand-in-upstream.ts';
import { inlineAsset, makeImage } from './support/images.ts';

// docs/review.md: a route marks its unsure answers; an operator gives the truth; the truth becomes an outcome.

describe('review by a person', () => {
  let gw: TestGateway;
  let standIn: StandIn;
  let key: { id: string; key: string };
  const admin = bearer(ADMIN_TOKEN);

  /** A System One stand-in that sees images: a noul at the p its instructions name, a choice 0.55/0.45. */
  function answer(request: SeenRequest): {
    model: string;
    answers: Record<string, NoulResponse | ChoiceResponse>;
    usage: Usage;
  } {
    // Typed by the official System One SDK's response types: the peer's format, not this gateway's.
    const answers: Record<string, NoulResponse | ChoiceResponse> = {};
    for (const [id, q] of Object.entries<{ type: string; instructions: string }>(request.body.questions))
      answers[id] =
        q.type === 'noul'
          ? { type: 'noul', noul: Number.parseFloat(q.instructions.split('=')[1] as string) }
          : { type: 'choice', choice: 'a', confidence: 0.1, probabilities: { a: 0.55, b: 0.45 } };
    return { model: 'jev-1.14.0', answers, usage: { input_tokens: 30, output_tokens: 0 } };
  }

  beforeAll(async () => {
    standIn = await startStandIn((req, res) => json(res, 200, answer(req)));
    gw = await startGateway({
      adminToken: ADMIN_TOKEN,
      routes: configuredRoutes(
        `upstreams:\n  eyes: { kind: systemone, baseUrl: "${standIn.url}", images: true, maxRetries: 0 }\n` +
          '  cheap: { kind: lexical }\n' +
          'routes:\n  default: { upstreams: [eyes], review: { confidenceBelow: 0.5, noulWithin: [0.3, 0.7] } }\n' +
          '  offline: { upstreams: [cheap], review: { noulWithin: [0.3, 0.7] } }\n  plain: { upstreams: [eyes] }\n',
      ),
    });
    key = await gw.createKey({ credits: 1000 });
  });
  afterAll(async () => {
    await gw.close();
    await standIn.close();
  });

  const ask = (questions: Record<string, unknown>, route = 'default', extra: Record<string, unknown> = {}) =>
    post(
      gw.url,
      '/v1/systemone',
      {
        model: 'vendor/model-1.13',
        state: { note: 'parcel arrived', photo: 'box-photo' },
        questions,
        ...extra,
      },
      { ...bearer(key.key), 'x-dg-route': route },
    );

  it('marks the unsure answers, answers every question, and keeps the item with its state and image', async () => {
    const png = await makeImage('png', 8, 6);
    const sent = await ask(
      {
        sure: { type: 'noul', instructions: 'p=0.95 for box-photo' },
        unsure: { type: 'noul', instructions: 'p=0.5 for box-photo' },
        team: { type: 'choice', instructions: 'Which?', criteria: { a: null, b: null } },
      },
      'default',
      { assets: { 'box-photo': inlineAsset('png', png) } },
    );
    expect(sent.status).toBe(200);
    expect(sent.headers.get('x-dg-review')).toBe('unsure,team');
    expect(sent.body.data.review).toEqual(['unsure', 'team']);
    expect(Object.keys(sent.body.data.result.answers)).toEqual(['sure', 'unsure', 'team']);

    const listed = await get(gw.url, '/admin/reviews?status=open', admin);
    expect(listed.status).toBe(200);
    const [item] = listed.body.data.reviews;
    expect(item).toMatchObject({
      requestId: sent.body.requestId,
      keyId: key.id,
      route: 'default',
      status: 'open',
      state: { note: 'parcel arrived', photo: 'box-photo' },
      assets: { 'box-photo': { type: 'image', format: 'png', data_base64: png.toString('base64') } },
      review: ['unsure', 'team'],
      outcomes: null,
      reviewer: null,
    });
    expect(item.answers.team).toEqual(sent.body.data.result.answers.team);
    expect((await get(gw.url, `/admin/reviews/${item.id}`, admin)).body.data).toEqual(item);
    // Never in a log line: not the state, not the image.
    const logs = gw.logs.join('\n');
    expect(logs).not.toContain('parcel arrived');
    expect(logs).not.toContain(png.toString('base64').slice(0, 40));
    // A route without review marks nothing.
    const plain = await ask({ unsure: { type: 'noul', instructions: 'p=0.5' } }, 'plain');
    expect(plain.headers.get('x-dg-review')).toBeNull();
    expect(plain.body.data.review).toBeUndefined();
  });

  it('records a reviewer’s truths as outcomes, counted as reviewed and overridden in calibration and metrics', async () => {
    const sent = await ask({
      unsure: { type: 'noul', instructions: 'p=0.6' },
      team: { type: 'choice', instructions: 'Which?', criteria: { a: null, b: null } },
    });
    const items = (await get(gw.url, '/admin/reviews?status=open&limit=100', admin)).body.data.reviews;
    const item = items.find((i: { requestId: string }) => i.requestId === sent.body.requestId);
    const bad = await post(
      gw.url,
      `/admin/reviews/${item.id}`,
      { outcomes: { team: 'c' }, reviewer: 'ana' },
      admin,
    );
    expect([bad.status, bad.body.code, bad.body.error.issues[0].path]).toEqual([
      400,
      40001,
      ['outcomes', 'team'],
    ]);
    const noReviewer = await post(gw.url, `/admin/reviews/${item.id}`, { outcomes: { team: 'b' } }, admin);
    expect([noReviewer.status, noReviewer.body.code]).toEqual([400, 40001]);

    // The noul agreed with (p 0.6, true), the choice overridden (a answered, b true).
    const done = await post(
      gw.url,
      `/admin/reviews/${item.id}`,
      { outcomes: { unsure: true, team: 'b' }, reviewer: 'ana' },
      admin,
    );
    expect(done.status).toBe(200);
    expect(done.body.data).toMatchObject({
      status: 'done',
      reviewer: 'ana',
      outcomes: { unsure: true, team: 'b' },
    });
    expect(Date.parse(done.body.data.reviewedAt)).toBeGreaterThan(0);
    const again = await post(
      gw.url,
      `/admin/reviews/${item.id}`,
      { outcomes: { team: 'a' }, reviewer: 'bo' },
      admin,
    );
    expect([again.status, again.body.code]).toEqual([400, 40001]);
    expect((await get(gw.url, '/admin/reviews/rev_nope', admin)).status).toBe(404);
    expect(
      (await post(gw.url, '/admin/reviews/rev_nope', { outcomes: { a: true }, reviewer: 'x' }, admin)).status,
    ).toBe(404);

    const calibration = (await get(gw.url, '/admin/calibration?route=default', admin)).body.data.groups;
    expect(calibration.find((g: { type: string }) => g.type === 'noul')).toMatchObject({
      reviewed: 1,
      overridden: 0,
    });
    expect(calibration.find((g: { type: string }) => g.type === 'choice')).toMatchObject({
      reviewed: 1,
      overridden: 1,
    });
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    expect(metrics).toContain('dg_reviews_total{outcome="agreed"} 1');
    expect(metrics).toContain('dg_reviews_total{outcome="overridden"} 1');
    expect(metrics).toMatch(/dg_reviews_open \d+/);

    // The caller's own outcome later takes the reviewer's place.
    await post(
      gw.url,
      '/v1/outcomes',
      { requestId: sent.body.requestId, outcomes: { team: 'a' } },
      bearer(key.key),
    );
    const after = (await get(gw.url, '/admin/calibration?route=default&type=choice', admin)).body.data
      .groups[0];
    expect(after).toMatchObject({ reviewed: 0, overridden: null });
  });

  it('pages the queue oldest first, by status and route, and refuses what is not a cursor', async () => {
    for (let i = 0; i < 3; i++) await ask({ unsure: { type: 'noul', instructions: 'p=0.4' } });
    const first = await get(gw.url, '/admin/reviews?status=open&limit=2', admin);
    expect(first.body.data.reviews).toHaveLength(2);
    const next = await get(
      gw.url,
      `/admin/reviews?status=open&limit=2&cursor=${first.body.data.nextCursor}`,
      admin,
    );
    const ats = [...first.body.data.reviews, ...next.body.data.reviews].map((r: { at: string }) =>
      Date.parse(r.at),
    );
    expect(ats).toEqual([...ats].sort((x, y) => x - y));
    expect(
      new Set([...first.body.data.reviews, ...next.body.data.reviews].map((r: { id: string }) => r.id)).size,
    ).toBe(first.body.data.reviews.length + next.body.data.reviews.length);
    const done = await get(gw.url, '/admin/reviews?status=done', admin);
    expect(done.body.data.reviews.every((r: { status: string }) => r.status === 'done')).toBe(true);
    expect((await get(gw.url, '/admin/reviews?route=offline', admin)).body.data.reviews).toEqual([]);
    const bad = await get(gw.url, '/admin/reviews?cursor=nope', admin);
    expect([bad.status, bad.body.code]).toEqual([400, 40001]);
    expect((await get(gw.url, '/admin/reviews?limit=500', admin)).status).toBe(400);
    expect((await get(gw.url, '/admin/reviews', bearer(key.key))).status).toBe(401);
  });

  it('the review round of docs/review.md, on the lexical baseline: 0.62 is marked, and agreed with', async () => {
    const sent = await post(
      gw.url,
      '/v1/systemone',
      {
        model: 'vendor/model-1.13',
        state: 'I was charged twice, please refund me.',
        questions: { refund: { type: 'noul', instructions: 'Is this a refund request?' } },
      },
      { ...bearer(key.key), 'x-dg-route': 'offline' },
    );
    expect(sent.body.data.result.answers.refund.noul).toBeCloseTo(0.62, 2);
    expect(sent.headers.get('x-dg-review')).toBe('refund');
    const [item] = (await get(gw.url, '/admin/reviews?status=open&route=offline', admin)).body.data.reviews;
    await post(gw.url, `/admin/reviews/${item.id}`, { outcomes: { refund: true }, reviewer: 'ana' }, admin);
    const [group] = (await get(gw.url, '/admin/calibration?route=offline', admin)).body.data.groups;
    expect(group).toMatchObject({ type: 'noul', reviewed: 1, overridden: 0 });
  });
});
