import type { ChoiceResponse, NoulResponse, Usage } from '@typesafe-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_TOKEN,
  bearer,
  configuredRoutes,
  get,
  post,
  type Sent,
  startGateway,
  type TestGateway,
} from './harness.ts';
import { json, type SeenRequest, type StandIn, startStandIn } from './stand-in-upstream.ts';
import { seeded } from './support/seeded.ts';

// docs/calibration-maps.md, end to end: a System One stand-in whose probabilities are wrong in a
// known way. Its nouls say p where the truth is drawn with q = σ(0.4·logit(p) − 0.3); its choices
// report the true distribution sharpened by temperature 0.4 (p ∝ q^2.5). Every expected number
// here is computed in this file from those two rules.

const logistic = (z: number) => 1 / (1 + Math.exp(-z));
const logOdds = (p: number) => Math.log(p / (1 - p));
const LABELS = ['a', 'b', 'c', 'd'];

/**
 * The stand-in answers what each question's instructions say: `p=<number>` for a noul, `q=<JSON
 * array>` for a choice (answered sharpened, p ∝ q^2.5, as a miscalibrated model would).
 */
function standInAnswer(request: SeenRequest): {
  model: string;
  answers: Record<string, NoulResponse | ChoiceResponse>;
  usage: Usage;
} {
  // Typed by the official System One SDK's response types: the peer's format, not this gateway's.
  const answers: Record<string, NoulResponse | ChoiceResponse> = {};
  for (const [id, question] of Object.entries<{ type: string; instructions: string }>(
    request.body.questions,
  )) {
    const [kind, value] = question.instructions.split('=') as [string, string];
    if (kind === 'p') answers[id] = { type: 'noul', noul: Number(value) };
    else {
      const q = JSON.parse(value) as number[];
      const powered = q.map((x) => x ** 2.5);
      const sum = powered.reduce((s, x) => s + x, 0);
      const p = powered.map((x) => x / sum);
      const top = p.indexOf(Math.max(...p));
      answers[id] = {
        type: 'choice',
        choice: LABELS[top] as string,
        confidence: Math.min(1, Math.max(0, (Math.max(...p) - 1 / 4) / (1 - 1 / 4))),
        probabilities: Object.fromEntries(LABELS.map((label, i) => [label, p[i] as number])),
      };
    }
  }
  return { model: 'jev-1.13.0', answers, usage: { input_tokens: 40, output_tokens: 0 } };
}

const choiceQuestion = (q: number[]) => ({
  type: 'choice',
  instructions: `q=${JSON.stringify(q)}`,
  criteria: Object.fromEntries(LABELS.map((label) => [label, null])),
});

describe('calibration maps, fitted from outcomes and applied on a route that calibrates', () => {
  let gw: TestGateway;
  let standIn: StandIn;
  let key: string;
  const random = seeded(42);

  /** One decision of 4 nouls and 4 choices drawn afresh, and the truths drawn from the true rules. */
  async function decide(route: string): Promise<{ sent: Sent; truths: Record<string, unknown> }> {
    const questions: Record<string, unknown> = {};
    const truths: Record<string, unknown> = {};
    for (let i = 0; i < 4; i++) {
      // Confident answers, where this miscalibration shows most: p in [0.03, 0.15] or [0.85, 0.97].
      const side = random() < 0.5;
      const p = side ? 0.03 + 0.12 * random() : 0.85 + 0.12 * random();
      questions[`n${i}`] = { type: 'noul', instructions: `p=${p}` };
      truths[`n${i}`] = random() < logistic(0.4 * logOdds(p) - 0.3);
      const raw = LABELS.map(() => random() + 0.05);
      const total = raw.reduce((s, x) => s + x, 0);
      const q = raw.map((x) => x / total);
      questions[`c${i}`] = choiceQuestion(q);
      let u = random();
      let truth = 0;
      while (truth < 3 && u >= (q[truth] as number)) u -= q[truth++] as number;
      truths[`c${i}`] = LABELS[truth];
    }
    const sent = await post(
      gw.url,
      '/v1/systemone',
      { model: 'vendor/model-1.13', state: 'a ticket', questions },
      { ...bearer(key), 'x-dg-route': route },
    );
    expect(sent.status).toBe(200);
    return { sent, truths };
  }

  async function recordTruths(sent: Sent, truths: Record<string, unknown>) {
    const recorded = await post(
      gw.url,
      '/v1/outcomes',
      { requestId: sent.body.requestId, outcomes: truths },
      bearer(key),
    );
    expect(recorded.status).toBe(200);
  }

  beforeAll(async () => {
    standIn = await startStandIn((req, res) => json(res, 200, standInAnswer(req)));
    gw = await startGateway({
      adminToken: ADMIN_TOKEN,
      routes: configuredRoutes(
        `upstreams:\n  miscal: { kind: systemone, baseUrl: "${standIn.url}", maxRetries: 0 }\n` +
          `  honest: { kind: systemone, baseUrl: "${standIn.url}", maxRetries: 0 }\n` +
          'routes:\n  default: { upstreams: [miscal], calibrate: true }\n  plain: { upstreams: [honest] }\n',
      ),
      calibration: { minOutcomes: 200 },
    });
    key = (await gw.createKey({ credits: 100_000 })).key;
  });
  afterAll(async () => {
    await gw.close();
    await standIn.close();
  });

  it('fits the miscalibration from outcomes, checks it on held-out ones and makes it active', async () => {
    // No map yet: the route that calibrates answers as the upstream did. 8 callers at a time.
    for (let round = 0; round < 60; round++)
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          const { sent, truths } = await decide('default');
          expect(sent.headers.get('x-dg-calibration')).toBeNull();
          await recordTruths(sent, truths);
        }),
      );
    const refit = await post(gw.url, '/admin/calibration/refit', undefined, bearer(ADMIN_TOKEN));
    expect(refit.status).toBe(200);
    const maps = refit.body.data.maps as {
      id: string;
      upstream: string;
      type: string;
      outcomes: number;
      params: Record<string, number>;
      heldOut: { n: number; before: Record<string, number>; after: Record<string, number> };
      active: boolean;
    }[];
    const noul = maps.find((m) => m.type === 'noul');
    const choice = maps.find((m) => m.type === 'choice');
    expect(noul).toMatchObject({ upstream: 'miscal', outcomes: 1920, active: true, heldOut: { n: 384 } });
    expect(choice).toMatchObject({ upstream: 'miscal', outcomes: 1920, active: true, heldOut: { n: 384 } });
    // Near the rules the truths were drawn by: a = 0.4, b = −0.3; T = 1/0.4 = 2.5.
    expect(noul?.params.a).toBeGreaterThan(0.25);
    expect(noul?.params.a).toBeLessThan(0.55);
    expect(noul?.params.b).toBeGreaterThan(-0.55);
    expect(noul?.params.b).toBeLessThan(-0.05);
    expect(choice?.params.temperature).toBeGreaterThan(2);
    expect(choice?.params.temperature).toBeLessThan(3);
    for (const map of [noul, choice]) {
      expect(map?.heldOut.after.logLoss).toBeLessThan(map?.heldOut.before.logLoss as number);
      expect(map?.heldOut.after.ece).toBeLessThan((map?.heldOut.before.ece as number) / 3);
    }
    const listed = await get(gw.url, '/admin/calibration/maps', bearer(ADMIN_TOKEN));
    expect(listed.body.data.maps.map((m: { id: string }) => m.id).sort()).toEqual(
      maps.map((m) => m.id).sort(),
    );
    console.log(
      `fitted a = ${noul?.params.a}, b = ${noul?.params.b}, T = ${choice?.params.temperature}; held-out ECE: noul ${noul?.heldOut.before.ece} → ${noul?.heldOut.after.ece}; choice ${choice?.heldOut.before.ece} → ${choice?.heldOut.after.ece}`,
    );
  });

  it('answers fresh decisions through the maps, better calibrated than the upstream, and keeps both', async () => {
    await new Promise((resolve) => setTimeout(resolve, 5));
    const fresh = new Date().toISOString();
    for (let i = 0; i < 100; i++) {
      const { sent, truths } = await decide('default');
      const applied = sent.headers.get('x-dg-calibration')?.split(',') ?? [];
      expect(applied).toHaveLength(2);
      for (const id of applied) expect(id).toMatch(/^cal_/);
      // Recomputed from the mapped distribution: the choice is its most likely label.
      const answer = sent.body.data.result.answers.c0;
      const best = Object.entries<number>(answer.probabilities).sort((x, y) => y[1] - x[1])[0]?.[0];
      expect(answer.choice).toBe(best);
      await recordTruths(sent, truths);
    }
    const query = `/admin/calibration?from=${encodeURIComponent(fresh)}&route=default`;
    const raw = await get(gw.url, query, bearer(ADMIN_TOKEN));
    const calibrated = await get(gw.url, `${query}&calibrated=true`, bearer(ADMIN_TOKEN));
    for (const type of ['noul', 'choice']) {
      const before = raw.body.data.groups.find((g: { type: string }) => g.type === type);
      const after = calibrated.body.data.groups.find((g: { type: string }) => g.type === type);
      expect(before.outcomes).toBe(400);
      expect(after.logLoss).toBeLessThan(before.logLoss);
      expect(after.ece).toBeLessThan(before.ece);
      console.log(
        `fresh ${type}: log loss ${before.logLoss} → ${after.logLoss}, ECE ${before.ece} → ${after.ece}`,
      );
    }
  });

  it('stores the fit of a well-calibrated upstream without making it active', async () => {
    // Truths in exactly the share each answer states: 1, 2, 3 or 4 of every 5 true.
    for (let i = 0; i < 50; i++) {
      const p = [0.2, 0.4, 0.6, 0.8][i % 4] as number;
      const questions = Object.fromEntries(
        Array.from({ length: 5 }, (_, k) => [`h${k}`, { type: 'noul', instructions: `p=${p}` }]),
      );
      const sent = await post(
        gw.url,
        '/v1/systemone',
        { model: 'vendor/model-1.13', state: 'a ticket', questions },
        { ...bearer(key), 'x-dg-route': 'plain' },
      );
      expect(sent.headers.get('x-dg-calibration')).toBeNull();
      const truths = Object.fromEntries(Array.from({ length: 5 }, (_, k) => [`h${k}`, k < p * 5]));
      await recordTruths(sent, truths);
    }
    const refit = await post(gw.url, '/admin/calibration/refit', undefined, bearer(ADMIN_TOKEN));
    const honest = refit.body.data.maps.find((m: { upstream: string }) => m.upstream === 'honest');
    expect(honest).toMatchObject({ type: 'noul', outcomes: 250, active: false });
    expect(honest.heldOut.after.logLoss).toBe(honest.heldOut.before.logLoss);
    // The miscalibrated upstream's maps were fitted again; one active map each, still applied.
    const all = (await get(gw.url, '/admin/calibration/maps', bearer(ADMIN_TOKEN))).body.data.maps;
    expect(
      all.filter((m: { active: boolean; upstream: string }) => m.active && m.upstream === 'miscal'),
    ).toHaveLength(2);
    expect(all.some((m: { active: boolean; upstream: string }) => m.active && m.upstream === 'honest')).toBe(
      false,
    );
  });

  it('the maps answer only the admin token, and a refit asked twice at once is done once', async () => {
    const refused = await post(gw.url, '/admin/calibration/refit', undefined, bearer(key));
    expect([refused.status, refused.body.code]).toEqual([401, 40101]);
    const [one, two] = await Promise.all([
      post(gw.url, '/admin/calibration/refit', undefined, bearer(ADMIN_TOKEN)),
      post(gw.url, '/admin/calibration/refit', undefined, bearer(ADMIN_TOKEN)),
    ]);
    expect(one.body.data.maps.map((m: { id: string }) => m.id)).toEqual(
      two.body.data.maps.map((m: { id: string }) => m.id),
    );
  });
});

describe('the active maps, shared by every instance', () => {
  it('a map made active through one instance is applied by another within its reload period', async () => {
    const standIn = await startStandIn((req, res) => json(res, 200, standInAnswer(req)));
    const routes = configuredRoutes(
      `upstreams:\n  miscal: { kind: systemone, baseUrl: "${standIn.url}", maxRetries: 0 }\n` +
        'routes:\n  default: { upstreams: [miscal], calibrate: true }\n',
    );
    const one = await startGateway({ adminToken: ADMIN_TOKEN, routes });
    const other = await startGateway({ routes, dbPath: one.dbPath, calibration: { reloadMs: 100 } });
    try {
      const key = (await one.createKey({ credits: 100 })).key;
      const ask = () =>
        post(
          other.url,
          '/v1/systemone',
          {
            model: 'vendor/model-1.13',
            state: 'x',
            questions: { n: { type: 'noul', instructions: 'p=0.9' } },
          },
          bearer(key),
        );
      expect((await ask()).headers.get('x-dg-calibration')).toBeNull();
      await one.store.saveCalibrationMaps([
        {
          id: 'cal_shared',
          upstream: 'miscal',
          type: 'noul',
          fittedAt: Date.now(),
          outcomes: 300,
          params: JSON.stringify({ a: 0.4, b: -0.3 }),
          heldOut: JSON.stringify({ n: 60, before: {}, after: {} }),
          active: true,
        },
      ]);
      let sent = await ask();
      for (let i = 0; i < 100 && sent.headers.get('x-dg-calibration') === null; i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        sent = await ask();
      }
      expect(sent.headers.get('x-dg-calibration')).toBe('cal_shared');
      // σ(0.4 · logit(0.9) − 0.3), computed here.
      const expected = 1 / (1 + Math.exp(-(0.4 * Math.log(0.9 / 0.1) - 0.3)));
      expect(sent.body.data.result.answers.n.noul).toBeCloseTo(expected, 9);
    } finally {
      await other.close();
      await one.close();
      await standIn.close();
    }
  });
});
