import { MODEL_ID } from '@decision-gateway/contract';
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
import { jev114Answer, json, type StandIn, startStandIn } from './stand-in-upstream.ts';
import { inlineAsset, makeImage } from './support/images.ts';

// docs/images.md#the-box-question: where in an image something is. Answers are checked, an unsure
// box is escalated, and outcomes judge a box by its overlap with the truth.

describe('the box question over System One upstreams (jev-1.14)', () => {
  let gw: TestGateway;
  let cheap: StandIn;
  let strong: StandIn;
  let png: Buffer;
  /** What the cheap upstream answers next: its box and confidence. */
  let next = { box: { top: 0.1, bottom: 0.5, left: 0.2, right: 0.6 }, confidence: 0.9 };

  beforeAll(async () => {
    png = await makeImage('png', 200, 100);
    cheap = await startStandIn((request, res) =>
      json(res, 200, jev114Answer(request, next.box, next.confidence)),
    );
    strong = await startStandIn((request, res) =>
      json(res, 200, jev114Answer(request, { top: 0.2, bottom: 0.6, left: 0.2, right: 0.6 }, 0.95)),
    );
    gw = await startGateway({
      adminToken: ADMIN_TOKEN,
      routes: configuredRoutes(
        [
          'upstreams:',
          `  cheap: { kind: systemone, baseUrl: "${cheap.url}", images: true }`,
          `  strong: { kind: systemone, baseUrl: "${strong.url}", images: true }`,
          '  blind: { kind: lexical }',
          'routes:',
          '  default: { upstreams: [cheap], escalate: { to: strong, confidenceBelow: 0.5 } }',
          '  nobox:',
          '    upstreams: [blind]',
        ].join('\n'),
      ),
    });
  });
  afterAll(async () => {
    await gw.close();
    await cheap.close();
    await strong.close();
  });

  const ask = (key: string, route?: string) =>
    post(
      gw.url,
      '/v1/systemone',
      {
        model: MODEL_ID,
        state: { photo: 'parcel' },
        questions: { dent: { type: 'box', instructions: 'Where on the parcel in photo is the dent?' } },
        assets: { parcel: inlineAsset('png', png) },
      },
      { ...bearer(key), ...(route && { 'x-dg-route': route }) },
    );

  it('answers a box as the upstream placed it, with its confidence', async () => {
    const key = await gw.createKey();
    next = { box: { top: 0.1, bottom: 0.5, left: 0.2, right: 0.6 }, confidence: 0.9 };
    const res = await ask(key.key);
    expect(res.status).toBe(200);
    expect(res.body.data.result.answers.dent).toEqual({ type: 'box', ...next });
    expect(res.headers.get('x-dg-upstream')).toBe('cheap');
  });

  it('escalates a box whose confidence is below confidenceBelow', async () => {
    const key = await gw.createKey();
    next = { box: { top: 0.1, bottom: 0.5, left: 0.2, right: 0.6 }, confidence: 0.3 };
    const res = await ask(key.key);
    expect(res.status).toBe(200);
    expect(res.headers.get('x-dg-upstream')).toBe('cheap+strong');
    expect(res.body.data.result.answers.dent).toEqual({
      type: 'box',
      box: { top: 0.2, bottom: 0.6, left: 0.2, right: 0.6 },
      confidence: 0.95,
    });
  });

  it.each([
    ['an edge outside [0, 1]', { top: -0.1, bottom: 0.5, left: 0.2, right: 0.6 }, 0.9, /\.box\.top/],
    [
      'top below bottom',
      { top: 0.7, bottom: 0.5, left: 0.2, right: 0.6 },
      0.9,
      /top must not be below bottom/,
    ],
    [
      'left right of right',
      { top: 0.1, bottom: 0.5, left: 0.8, right: 0.6 },
      0.9,
      /left must not be right of right/,
    ],
    ['a confidence above 1', { top: 0.1, bottom: 0.5, left: 0.2, right: 0.6 }, 1.5, /\.confidence/],
  ])('an answer with %s is invalid (502)', async (_what, box, confidence, reason) => {
    const key = await gw.createKey({ credits: 10 });
    next = { box, confidence };
    const res = await ask(key.key);
    expect(res.status).toBe(502);
    expect(res.body.code).toBe(50200);
    expect(res.body.message).toMatch(reason);
    const after = await gw.keys.get(key.id);
    expect(after.ok && after.value.credits).toBe(10);
  });

  it('a route whose upstreams take no box questions refuses one, naming what is missing', async () => {
    const key = await gw.createKey();
    const res = await ask(key.key, 'nobox');
    expect(res.status).toBe(400);
    expect(res.body.message).toBe('route nobox has no upstream that takes images and box questions');
  });

  it('outcomes judge a box by IoU: accuracy at IoU ≥ 0.5, meanIoU, bins over confidence, no Brier or log loss', async () => {
    const key = await gw.createKey({ credits: 1_000 });
    // Twenty answers of the cheap upstream, each 0.9 sure, at the same box; ten truths at IoU 1,
    // five at IoU 1/3 and five apart (IoU 0).
    next = { box: { top: 0.1, bottom: 0.5, left: 0.2, right: 0.6 }, confidence: 0.9 };
    const same = { top: 0.1, bottom: 0.5, left: 0.2, right: 0.6 };
    const shifted = { top: 0.1, bottom: 0.5, left: 0.4, right: 0.8 }; // intersection 0.08, union 0.24
    const apart = { top: 0.6, bottom: 0.9, left: 0.7, right: 0.9 };
    const truths = [...Array(10).fill(same), ...Array(5).fill(shifted), ...Array(5).fill(apart)];
    for (const truth of truths) {
      const res = await ask(key.key);
      expect(res.status).toBe(200);
      const recorded = await post(
        gw.url,
        '/v1/outcomes',
        { requestId: res.body.requestId, outcomes: { dent: truth } },
        bearer(key.key),
      );
      expect(recorded.body.data).toEqual({ recorded: 1, replaced: 0 });
    }
    const wrong = await post(
      gw.url,
      '/v1/outcomes',
      {
        requestId: (await ask(key.key)).body.requestId,
        outcomes: { dent: { top: 0.6, bottom: 0.2, left: 0, right: 1 } },
      },
      bearer(key.key),
    );
    expect(wrong.status).toBe(400);
    expect(wrong.body.message).toContain('outcomes.dent.top: top must not be below bottom');

    const report = await get(gw.url, `/admin/calibration?type=box&keyId=${key.id}`, bearer(ADMIN_TOKEN));
    expect(report.status, report.text).toBe(200);
    const group = report.body.data.groups.find((g: { upstream: string }) => g.upstream === 'cheap');
    expect(group).toMatchObject({
      type: 'box',
      outcomes: 20,
      accuracy: 0.5,
      meanIoU: 0.583333,
      brier: null,
      logLoss: null,
      mae: null,
      ece: 0.4,
    });
    expect(group.bins[9]).toEqual({ from: 0.9, to: 1, count: 20, meanPredicted: 0.9, observed: 0.5 });
    // No confidence keeps 90% of these boxes right: the advice says so.
    const advice = report.body.data.advice.find((a: { upstream: string }) => a.upstream === 'cheap');
    expect(advice).toEqual({
      route: 'default',
      upstream: 'cheap',
      type: 'box',
      outcomes: 20,
      confidenceBelow: null,
      keptAccuracy: null,
      escalatedShare: null,
    });
  });
});
