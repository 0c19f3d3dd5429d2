import { MODEL_ID } from '@decision-gateway/contract';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/environment.ts';
import { createUpstream } from '../src/upstreams/registry.ts';
import { bearer, post, startGateway, type TestGateway } from './harness.ts';
import { createSimulatedModel, startSimulatedServer } from './simulated-model.ts';
import { json, nativeAnswer, startStandIn } from './stand-in-upstream.ts';

// docs/http-api.md#evaluate-post-v1systemone, docs/upstreams.md: every valid request answers on every upstream, whatever the size of its questions.
// Properties over real HTTP: a choice of 2–255 options and a score of 2–10 levels, together.

const sizedRequest = fc
  .record({
    // The count first: fast-check's default array sizes stay small, and large choices are the point.
    options: fc
      .integer({ min: 2, max: 255 })
      .chain((n) =>
        fc.uniqueArray(fc.string({ minLength: 1, maxLength: 24 }), { minLength: n, maxLength: n }),
      ),
    described: fc.boolean(),
    levels: fc.integer({ min: 2, max: 10 }),
    state: fc.oneof(fc.string({ minLength: 1, maxLength: 200 }), fc.constant('refund my double charge')),
  })
  .map(({ options, described, levels, state }) => ({
    model: MODEL_ID,
    state,
    questions: {
      pick: {
        type: 'choice',
        criteria: Object.fromEntries(options.map((o, i) => [o, described ? `option number ${i}` : null])),
      },
      rate: { type: 'score', criteria: Array.from({ length: levels }, (_, i) => `level ${i}`) },
      check: { type: 'noul', instructions: 'The customer wants a refund.' },
    },
  }));

type Sized = ReturnType<(typeof sizedRequest)['generate']>['value'];

async function answersEverySize(gw: TestGateway) {
  const { key } = await gw.createKey({ credits: null });
  await fc.assert(
    fc.asyncProperty(sizedRequest, async (request: Sized) => {
      const response = await post(gw.url, '/v1/systemone', request, bearer(key));
      expect(response.status, response.text).toBe(200);
      const { pick, rate } = response.body.data.result.answers;
      expect(Object.keys(pick.probabilities)).toEqual(Object.keys(request.questions.pick.criteria));
      expect(Object.keys(rate.probabilities)).toHaveLength(request.questions.rate.criteria.length);
    }),
    { numRuns: 25 },
  );
}

/** A gateway whose upstream is a peer on loopback (or the built-in lexical one when there is none). */
function onUpstream(
  name: string,
  peer?: () => Promise<{ url: string; close(): Promise<void> }>,
  env: (url: string) => Record<string, string> = () => ({}),
) {
  describe(`on the ${name} upstream`, () => {
    let gw: TestGateway;
    let server: { url: string; close(): Promise<void> } | undefined;
    beforeAll(async () => {
      server = await peer?.();
      if (server === undefined) {
        gw = await startGateway();
        return;
      }
      const loaded = loadConfig(env(server.url));
      if (!loaded.ok) throw new Error(loaded.problems.join('\n'));
      const upstream = loaded.config.upstream;
      gw = await startGateway({ upstream: (logger) => createUpstream(upstream, logger) });
    });
    afterAll(async () => {
      await gw.close();
      await server?.close();
    });
    it('answers them all', () => answersEverySize(gw));
  });
}

describe('every choice size and score size answers 200', () => {
  onUpstream('lexical');
  onUpstream(
    'systemone',
    () => startStandIn((req, res) => json(res, 200, nativeAnswer(req))),
    (url) => ({ UPSTREAM: 'systemone', UPSTREAM_BASE_URL: url }),
  );
  onUpstream(
    'openai (a simulated model server)',
    () => startSimulatedServer(createSimulatedModel({ seed: 5 })),
    (url) => ({ UPSTREAM: 'openai', UPSTREAM_BASE_URL: url, UPSTREAM_MODEL: 'sim' }),
  );
});
