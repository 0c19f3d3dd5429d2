import type { AppRouter } from '@decision-gateway/api';
import { createTRPCClient, httpBatchLink, type TRPCClientError } from '@trpc/client';
import type {
  ChoiceResponse,
  NoulResponse,
  Question,
  Questions,
  ScoreResponse,
  SystemOneResult,
} from '@typesafe-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryCache } from '../src/cache/memory-cache.ts';
import {
  ADMIN_TOKEN,
  bearer,
  configuredRoutes,
  get,
  post,
  startGateway,
  type TestGateway,
} from './harness.ts';
import { json, type SeenRequest, startStandIn } from './stand-in-upstream.ts';

/**
 * Outcomes and calibration end to end (docs/outcomes.md): two System One
 * stand-ins answer with distributions scripted by the case number in the state; decisions go
 * through REST and tRPC, their truths come back through REST and tRPC, and the calibration the
 * gateway reports is compared with one computed here from the same numbers.
 */

const CASES = 120;
const LABELS = ['billing', 'technical'] as const;

/** What `cheap` answers for case i: some sure, some not (confidence below 0.6, a noul within [0.4, 0.6]). */
function cheapOf(i: number) {
  const billing = [0.9, 0.55, 0.3, 0.75, 0.52][i % 5] as number;
  const urgency = [
    [0.7, 0.2, 0.1],
    [0.1, 0.8, 0.1],
    [0.2, 0.3, 0.5],
  ][i % 3] as number[];
  const refund = [0.8, 0.5, 0.2, 0.95][i % 4] as number;
  return { billing, urgency, refund };
}
/** What `strong` answers: always sure. */
const STRONG = { billing: 0.95, urgency: [0.05, 0.15, 0.8], refund: 0.9 };
/** The truths reported for case i. */
const truthOf = (i: number) => ({
  team: (i % 3 === 0 ? 'technical' : 'billing') as (typeof LABELS)[number],
  urgency: i % 3,
  refund: i % 2 === 0,
});

/**
 * A native System One answer from scripted distributions, typed by the official SDK's own
 * `SystemOneResult`: the peer's published format, not this gateway's schemas.
 */
function answerWith(
  request: SeenRequest,
  d: { billing: number; urgency: number[]; refund: number },
): SystemOneResult<Questions> {
  const answers: Record<string, ChoiceResponse | ScoreResponse | NoulResponse> = {};
  for (const [id, q] of Object.entries<Question>(request.body.questions)) {
    if (q.type === 'noul') answers[id] = { type: 'noul', noul: d.refund };
    if (q.type === 'choice') {
      // The first label (billing) gets d.billing, the second the rest.
      const [first, second] = Object.keys(q.criteria) as [string, string];
      answers[id] = {
        type: 'choice',
        choice: d.billing >= 0.5 ? first : second,
        confidence: Math.max(d.billing, 1 - d.billing),
        probabilities: { [first]: d.billing, [second]: 1 - d.billing },
      };
    }
    if (q.type === 'score')
      answers[id] = {
        type: 'score',
        score: d.urgency.reduce((s, p, k) => s + k * p, 0),
        confidence: Math.max(...d.urgency),
        legend: { '0': 'low', '1': 'mid', '2': 'high' },
        probabilities: Object.fromEntries(d.urgency.map((p, k) => [String(k), p])),
      };
  }
  return {
    model: request.body.model,
    answers,
    usage: { input_tokens: 100, output_tokens: 0 },
  } as SystemOneResult<Questions>;
}

const question = {
  team: { type: 'choice', criteria: { billing: null, technical: null } },
  urgency: { type: 'score', criteria: ['low', 'mid', 'high'] },
  refund: { type: 'noul', instructions: 'Is a refund asked for?' },
};
const requestFor = (i: number) => ({ model: 'vendor/model-1.13', state: `case ${i}`, questions: question });
const caseOf = (request: SeenRequest) => Number(/case (\d+)/.exec(String(request.body.state))?.[1]);

/** Independently of the gateway: accuracy and Brier score of answers judged by truths. */
function expected(answers: { p: number[] | number; truth: number | boolean }[]) {
  let right = 0;
  let brier = 0;
  for (const { p, truth } of answers) {
    if (typeof p === 'number') {
      right += p >= 0.5 === truth ? 1 : 0;
      brier += (p - (truth ? 1 : 0)) ** 2;
    } else {
      const top = p.indexOf(Math.max(...p));
      right += top === truth ? 1 : 0;
      brier += p.reduce((s, pk, k) => s + (pk - (k === truth ? 1 : 0)) ** 2, 0);
    }
  }
  const round6 = (n: number) => Math.round(n * 1e6) / 1e6;
  return {
    outcomes: answers.length,
    accuracy: round6(right / answers.length),
    brier: round6(brier / answers.length),
  };
}

describe('outcomes and calibration over scripted upstreams (REST, tRPC)', () => {
  let gw: TestGateway;
  let key: string;
  let keyId: string;
  let closeStandIns: () => Promise<void>;
  const requestIds: string[] = [];
  const admin = bearer(ADMIN_TOKEN);

  beforeAll(async () => {
    const cheap = await startStandIn((req, res) => json(res, 200, answerWith(req, cheapOf(caseOf(req)))));
    const strong = await startStandIn((req, res) => json(res, 200, answerWith(req, STRONG)));
    closeStandIns = async () => {
      await Promise.all([cheap.close(), strong.close()]);
    };
    gw = await startGateway({
      adminToken: ADMIN_TOKEN,
      cache: createMemoryCache({ maxBytes: 1_000_000 }),
      routes: configuredRoutes(
        `
upstreams:
  cheap: { kind: systemone, baseUrl: "${cheap.url}", maxRetries: 0 }
  strong: { kind: systemone, baseUrl: "${strong.url}", maxRetries: 0 }
routes:
  default:
    upstreams: [cheap]
    escalate: { to: strong, confidenceBelow: 0.6, noulWithin: [0.4, 0.6] }
  cached:
    upstreams: [strong]
    cache: { ttlSeconds: 600 }
`,
      ),
    });
    ({ key, id: keyId } = await gw.createKey({ credits: 1000 }));
    // Half the decisions through REST, half through tRPC.
    for (let i = 0; i < CASES; i++) {
      if (i % 2 === 0) {
        const sent = await post(gw.url, '/v1/systemone', requestFor(i), bearer(key));
        expect(sent.status).toBe(200);
        requestIds.push(sent.headers.get('x-request-id') as string);
      } else {
        let requestId = '';
        const client = createTRPCClient<AppRouter>({
          links: [
            httpBatchLink({
              url: `${gw.url}/trpc`,
              headers: async () => bearer(key),
              fetch: async (url, init) => {
                const response = await fetch(url, init as RequestInit);
                // A batch's operation has the response's id followed by its index (docs/http-api.md).
                requestId = `${response.headers.get('x-request-id')}_0`;
                return response;
              },
            }),
          ],
        });
        await client.evaluate.mutate(requestFor(i) as never);
        requestIds.push(requestId);
      }
    }
  }, 120_000);
  afterAll(async () => {
    await gw.close();
    await closeStandIns();
  });

  it('records every truth, through REST and the tRPC mutation, without credits or usage records', async () => {
    const before = await gw.keys.usage(keyId, 1000);
    const balance = (await gw.store.getKey(keyId))?.creditsMicro;
    const trpc = createTRPCClient<AppRouter>({
      links: [httpBatchLink({ url: `${gw.url}/trpc`, headers: async () => bearer(key) })],
    });
    for (let i = 0; i < CASES; i++) {
      const body = { requestId: requestIds[i] as string, outcomes: truthOf(i) };
      if (i % 2 === 0) {
        const sent = await post(gw.url, '/v1/outcomes', body, bearer(key));
        expect(sent.status).toBe(200);
        expect(sent.body.data).toEqual({ recorded: 3, replaced: 0 });
      } else {
        expect(await trpc.outcomes.record.mutate(body)).toEqual({ recorded: 3, replaced: 0 });
      }
    }
    const after = await gw.keys.usage(keyId, 1000);
    expect(after.ok && after.value.totals.requests).toBe(before.ok && before.value.totals.requests);
    expect((await gw.store.getKey(keyId))?.creditsMicro).toBe(balance);
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    expect(metrics).toContain(`dg_outcomes_total{upstream="cheap",type="choice"} ${CASES}`);
  });

  it('reports each upstream’s calibration as computed here, escalated questions counted for both upstreams', async () => {
    const report = await get(gw.url, '/admin/calibration', admin);
    expect(report.status).toBe(200);
    const groups = report.body.data.groups as {
      upstream: string;
      type: string;
      outcomes: number;
      accuracy: number;
      brier: number;
    }[];
    // Here: every answer cheap gave (escalated or not), and strong's for the questions escalated to it.
    const answers = new Map<string, { p: number[] | number; truth: number | boolean }[]>();
    const add = (upstream: string, type: string, answer: { p: number[] | number; truth: number | boolean }) =>
      answers.set(`${upstream} ${type}`, [...(answers.get(`${upstream} ${type}`) ?? []), answer]);
    for (let i = 0; i < CASES; i++) {
      const c = cheapOf(i);
      const t = truthOf(i);
      const team = LABELS.indexOf(t.team);
      add('cheap', 'choice', { p: [c.billing, 1 - c.billing], truth: team });
      if (Math.max(c.billing, 1 - c.billing) < 0.6)
        add('strong', 'choice', { p: [STRONG.billing, 1 - STRONG.billing], truth: team });
      add('cheap', 'score', { p: c.urgency, truth: t.urgency });
      if (Math.max(...c.urgency) < 0.6) add('strong', 'score', { p: STRONG.urgency, truth: t.urgency });
      add('cheap', 'noul', { p: c.refund, truth: t.refund });
      if (c.refund >= 0.4 && c.refund <= 0.6) add('strong', 'noul', { p: STRONG.refund, truth: t.refund });
    }
    for (const upstream of ['cheap', 'strong'])
      for (const type of ['choice', 'score', 'noul']) {
        const group = groups.find((g) => g.upstream === upstream && g.type === type);
        expect(group, `${upstream} ${type}`).toMatchObject(
          expected(answers.get(`${upstream} ${type}`) ?? []),
        );
      }
    expect(groups.find((g) => g.upstream === 'strong' && g.type === 'choice')?.outcomes).toBe(48);

    // Advice for the escalating route's first upstream, per type with at least 20 outcomes.
    const advice = report.body.data.advice as {
      route: string;
      upstream: string;
      type: string;
      outcomes: number;
    }[];
    expect(advice.map((a) => [a.route, a.upstream, a.type, a.outcomes])).toEqual([
      ['default', 'cheap', 'choice', CASES],
      ['default', 'cheap', 'score', CASES],
      ['default', 'cheap', 'noul', CASES],
    ]);

    // Filters narrow groups and advice alike.
    const strongOnly = await get(gw.url, '/admin/calibration?upstream=strong&type=noul', admin);
    expect(
      strongOnly.body.data.groups.map((g: { upstream: string; type: string }) => [g.upstream, g.type]),
    ).toEqual([['strong', 'noul']]);
    expect(strongOnly.body.data.advice).toEqual([]);
    const otherKey = await gw.createKey();
    expect((await get(gw.url, `/admin/calibration?keyId=${otherKey.id}`, admin)).body.data).toEqual({
      groups: [],
      advice: [],
    });
    const future = await get(
      gw.url,
      '/admin/calibration?from=2099-01-01T00:00:00Z&to=2099-02-01T00:00:00Z',
      admin,
    );
    expect(future.body.data.groups).toEqual([]);
    // No threshold keeps only right answers: the advice says so with nulls.
    const unreachable = await get(gw.url, '/admin/calibration?target=1', admin);
    expect(unreachable.body.data.advice.find((a: { type: string }) => a.type === 'choice')).toMatchObject({
      confidenceBelow: null,
      keptAccuracy: null,
      escalatedShare: null,
    });
    for (const bad of [
      'target=0',
      'target=1.5',
      'target=x',
      'type=word',
      'from=yesterday',
      'keyId=key_none',
    ]) {
      const refused = await get(gw.url, `/admin/calibration?${bad}`, admin);
      expect(refused.body.code, bad).toBe(bad.startsWith('keyId') ? 40400 : 40001);
    }
  });

  it('replaces a truth recorded again, and says how many it replaced', async () => {
    const sent = await post(
      gw.url,
      '/v1/outcomes',
      { requestId: requestIds[0], outcomes: { team: 'billing', refund: true } },
      bearer(key),
    );
    expect(sent.body.data).toEqual({ recorded: 2, replaced: 2 });
  });

  it('answers 404 alike for an unknown id and another key’s, and 40001 naming the path of a wrong truth', async () => {
    const unknown = await post(
      gw.url,
      '/v1/outcomes',
      { requestId: 'req_nope', outcomes: { team: 'billing' } },
      bearer(key),
    );
    const other = await gw.createKey();
    const someoneElses = await post(
      gw.url,
      '/v1/outcomes',
      { requestId: requestIds[0], outcomes: { team: 'billing' } },
      bearer(other.key),
    );
    expect(unknown.status).toBe(404);
    expect(someoneElses.status).toBe(404);
    expect(unknown.body.code).toBe(40400);
    expect(someoneElses.body.message.replace(requestIds[0] as string, 'X')).toBe(
      unknown.body.message.replace('req_nope', 'X'),
    );

    const cases: [unknown, (string | number)[]][] = [
      [{ sales: 'billing' }, ['outcomes', 'sales']],
      [{ team: 'sales' }, ['outcomes', 'team']],
      [{ team: 0 }, ['outcomes', 'team']],
      [{ urgency: 3 }, ['outcomes', 'urgency']],
      [{ urgency: 1.5 }, ['outcomes', 'urgency']],
      [{ refund: 'yes' }, ['outcomes', 'refund']],
    ];
    for (const [outcomes, path] of cases) {
      const sent = await post(gw.url, '/v1/outcomes', { requestId: requestIds[0], outcomes }, bearer(key));
      expect(sent.body, JSON.stringify(outcomes)).toMatchObject({
        code: 40001,
        error: { issues: [{ path }] },
      });
    }
    for (const body of [
      {},
      { requestId: requestIds[0], outcomes: {} },
      { requestId: requestIds[0], outcomes: { team: 'billing' }, more: 1 },
    ]) {
      const sent = await post(gw.url, '/v1/outcomes', body, bearer(key));
      expect(sent.body.code, JSON.stringify(body)).toBe(40001);
    }
    expect(
      (await post(gw.url, '/v1/outcomes', { requestId: 'x', outcomes: { a: true } }, {})).body.code,
    ).toBe(40100);
    expect((await post(gw.url, '/v1/outcomes', '{', bearer(key))).body.code).toBe(40000);
    const notJsonType = await post(gw.url, '/v1/outcomes', 'requestId=x', {
      ...bearer(key),
      'content-type': 'text/plain',
    });
    expect(notJsonType.body.code).toBe(41500);
    expect(
      (await post(gw.url, '/v1/outcomes', { requestId: 'x', outcomes: { a: true } }, bearer('dg_wrong'))).body
        .code,
    ).toBe(40101);
    const tRpcError = await createTRPCClient<AppRouter>({
      links: [httpBatchLink({ url: `${gw.url}/trpc`, headers: async () => bearer(key) })],
    })
      .outcomes.record.mutate({ requestId: 'req_nope', outcomes: { team: 'billing' } })
      .catch((error: TRPCClientError<AppRouter>) => error);
    expect((tRpcError as TRPCClientError<AppRouter>).data?.code).toBe(40400);
  });

  it('records a cache hit’s outcome against the decision it reused, whose upstream answered it', async () => {
    const request = { ...requestFor(1000), questions: { refund: question.refund } };
    const first = await post(gw.url, '/v1/systemone', request, { ...bearer(key), 'x-dg-route': 'cached' });
    const hit = await post(gw.url, '/v1/systemone', request, { ...bearer(key), 'x-dg-route': 'cached' });
    expect(hit.headers.get('x-dg-cache')).toBe('hit');
    const hitId = hit.headers.get('x-request-id') as string;
    const decision = await gw.store.findDecision(hitId);
    expect(decision?.reused).toBe(first.headers.get('x-request-id'));
    const sent = await post(
      gw.url,
      '/v1/outcomes',
      { requestId: hitId, outcomes: { refund: true } },
      bearer(key),
    );
    expect(sent.body.data).toEqual({ recorded: 1, replaced: 0 });
    const report = await get(gw.url, '/admin/calibration?route=cached', admin);
    expect(report.body.data.groups).toEqual([
      expect.objectContaining({ upstream: 'strong', type: 'noul', outcomes: 1, accuracy: 1 }),
    ]);
  });

  it('takes an OpenAI-door decision’s truths by name or #i, choice values with their type', async () => {
    // Asked with the official OpenAI SDK, as its callers do; the request id is in its headers.
    const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/openai/v1`, maxRetries: 0 });
    const { response } = await client.decisions
      .create({
        model: 'vendor/model-1.13',
        input: 'case 0: I was charged twice.',
        questions: [
          {
            type: 'choice',
            instructions: 'Is it a duplicate?',
            choices: [{ value: true }, { value: false }],
          },
          { type: 'predicate', name: 'refund', instructions: 'Is a refund asked for?' },
        ],
      })
      .withResponse();
    expect(response.status).toBe(200);
    const requestId = response.headers.get('x-request-id') as string;
    const typed = await post(
      gw.url,
      '/v1/outcomes',
      { requestId, outcomes: { '#0': true, refund: false } },
      bearer(key),
    );
    expect(typed.body.data).toEqual({ recorded: 2, replaced: 0 });
    // "true" is not the value true.
    const untyped = await post(
      gw.url,
      '/v1/outcomes',
      { requestId, outcomes: { '#0': 'true' } },
      bearer(key),
    );
    expect(untyped.body).toMatchObject({ code: 40001, error: { issues: [{ path: ['outcomes', '#0'] }] } });
    expect(untyped.body.message).toContain('true, false');
  });

  it('takes a rate-limit token per call', async () => {
    const limited = await gw.createKey({ rateLimitPerMinute: 2 });
    const body = { requestId: 'req_unknown', outcomes: { a: true } };
    expect((await post(gw.url, '/v1/outcomes', body, bearer(limited.key))).status).toBe(404);
    expect((await post(gw.url, '/v1/outcomes', body, bearer(limited.key))).status).toBe(404);
    const third = await post(gw.url, '/v1/outcomes', body, bearer(limited.key));
    expect(third.body.code).toBe(42900);
    expect(third.headers.get('retry-after')).not.toBeNull();
  });
});

describe('DECISION_RETENTION_DAYS=0', () => {
  it('keeps no decision, and refuses every outcome with the same 404', async () => {
    const gw = await startGateway({ adminToken: ADMIN_TOKEN, decisionRetentionDays: 0 });
    try {
      const { key } = await gw.createKey();
      const sent = await post(gw.url, '/v1/systemone', requestFor(1), bearer(key));
      expect(sent.status).toBe(200);
      const requestId = sent.headers.get('x-request-id') as string;
      expect(await gw.store.findDecision(requestId)).toBeUndefined();
      const outcome = await post(
        gw.url,
        '/v1/outcomes',
        { requestId, outcomes: { refund: true } },
        bearer(key),
      );
      expect(outcome.body.code).toBe(40400);
    } finally {
      await gw.close();
    }
  });
});

describe('question IDs such as __proto__, from the decision to its outcomes', () => {
  it('keeps a __proto__ question in the decision and takes its outcome, which calibration counts', async () => {
    const gw = await startGateway({ adminToken: ADMIN_TOKEN });
    try {
      const { key } = await gw.createKey();
      const decision = `{"model":"vendor/model-1.13","state":"Please refund the double charge.","questions":{
        "__proto__":{"type":"noul","instructions":"Is this a refund request?"},
        "constructor":{"type":"choice","criteria":{"billing":null,"technical":null}}}}`;
      const sent = await post(gw.url, '/v1/systemone', decision, bearer(key));
      expect(sent.status).toBe(200);
      const requestId = sent.headers.get('x-request-id') as string;
      const kept = await gw.store.findDecision(requestId);
      expect(Object.keys(JSON.parse(kept?.questions as string))).toEqual(['__proto__', 'constructor']);

      const alone = await post(
        gw.url,
        '/v1/outcomes',
        `{"requestId":"${requestId}","outcomes":{"__proto__":true}}`,
        bearer(key),
      );
      expect(alone.body.data).toEqual({ recorded: 1, replaced: 0 });
      const both = await post(
        gw.url,
        '/v1/outcomes',
        `{"requestId":"${requestId}","outcomes":{"__proto__":false,"constructor":"billing"}}`,
        bearer(key),
      );
      expect(both.body.data).toEqual({ recorded: 2, replaced: 1 });

      const calibration = await get(gw.url, '/admin/calibration', bearer(ADMIN_TOKEN));
      const counted = (calibration.body.data.groups as { type: string; outcomes: number }[]).map(
        ({ type, outcomes }) => [type, outcomes],
      );
      expect(counted.sort()).toEqual([
        ['choice', 1],
        ['noul', 1],
      ]);
    } finally {
      await gw.close();
    }
  });
});
