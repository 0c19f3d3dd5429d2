import OpenAI from 'openai';
import type { DecisionCreateParams } from 'openai/resources/decisions';
import { afterEach, describe, expect, it } from 'vitest';
import { bearer, configuredRoutes, post, startGateway, type TestGateway } from '../../../../test/harness.ts';
import { answerDecision, answerTo, openAiErrorBody } from '../../../../test/openai-decisions-stand-in.ts';
import { json, nativeAnswer, startStandIn } from '../../../../test/stand-in-upstream.ts';
import { createMemoryCache } from '../../../cache/memory-cache.ts';

const REQUEST = {
  model: 'vendor/model-1.13',
  state: { ticket: 'I was charged twice. Please refund me.', plan: 'pro' },
  questions: {
    refund: {
      type: 'noul',
      instructions: 'Is this a refund request?',
      criteria: { true: 'the customer wants money back', false: null },
    },
    team: { type: 'choice', criteria: { billing: 'payments', technical: null } },
    urgency: { type: 'score', instructions: { ask: 'how urgent' }, criteria: ['low', null, 'high'] },
  },
};

let open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const item of open.reverse()) await item.close();
  open = [];
});

async function gatewayOver(config: string, env: Record<string, string> = {}): Promise<TestGateway> {
  // As the composition root does when a route keeps decisions: an in-process cache.
  const gw = await startGateway({
    routes: configuredRoutes(config, env),
    cache: createMemoryCache({ maxBytes: 1 << 20 }),
  });
  open.push(gw);
  return gw;
}

describe('upstream kind openai-decisions (OpenAI’s Decisions API, as its SDK types it)', () => {
  it('sends the gateway’s request in OpenAI’s shape and reads its answers by name', async () => {
    const stand = await startStandIn((request, res) => answerDecision(request, res));
    open.push(stand);
    const gw = await gatewayOver(
      `upstreams:\n  luna: { kind: openai-decisions, baseUrl: "${stand.url}/v1", model: gpt-6-luna, apiKey: "\${OPENAI_KEY}" }\nroutes:\n  default: { upstreams: [luna] }`,
      { OPENAI_KEY: 'sk-test' },
    );
    const { key } = await gw.createKey();
    const sent = await post(gw.url, '/v1/systemone', REQUEST, bearer(key));
    expect(sent.status).toBe(200);
    const [seen] = stand.seen;
    expect(seen?.path).toBe('/v1/decisions');
    expect(seen?.headers.authorization).toBe('Bearer sk-test');
    expect(seen?.body).toEqual({
      model: 'gpt-6-luna',
      input: [{ role: 'user', content: [{ type: 'input_json', data: REQUEST.state }] }],
      questions: [
        {
          type: 'predicate',
          name: 'refund',
          instructions: 'Is this a refund request?\n\nTrue if: the customer wants money back',
        },
        {
          type: 'choice',
          name: 'team',
          instructions: 'Choose the option that fits best.',
          choices: [{ value: 'billing', description: 'payments' }, { value: 'technical' }],
        },
        {
          type: 'score',
          name: 'urgency',
          instructions: '{"ask":"how urgent"}',
          levels: [{ label: '0', description: 'low' }, { label: '1' }, { label: '2', description: 'high' }],
        },
      ],
    } satisfies DecisionCreateParams);
    const { answers, usage } = sent.body.data.result;
    expect(answers.refund).toEqual({ type: 'noul', noul: 0.7 });
    expect(answers.team).toMatchObject({
      type: 'choice',
      choice: 'billing',
      probabilities: { billing: 0.7, technical: 0.3 },
    });
    // Two decimals: 0.7 + 0.15 + 0.15 passes; the legend is the question's own levels.
    expect(answers.urgency).toMatchObject({
      type: 'score',
      legend: { '0': 'low', '1': null, '2': 'high' },
      probabilities: { '0': 0.7, '1': 0.15, '2': 0.15 },
    });
    expect(usage).toEqual({ input_tokens: 120, output_tokens: 3 });
    expect(sent.body.data.creditsUsed).toBe(0.12);
  });

  it('a string state goes as it is; an array of non-objects as its JSON text', async () => {
    const stand = await startStandIn((request, res) => answerDecision(request, res));
    open.push(stand);
    const gw = await gatewayOver(
      `upstreams:\n  luna: { kind: openai-decisions, baseUrl: "${stand.url}", model: m }\nroutes:\n  default: { upstreams: [luna] }`,
    );
    const { key } = await gw.createKey();
    const ask = { refund: { type: 'noul', instructions: 'Refund?' } };
    await post(gw.url, '/v1/systemone', { ...REQUEST, state: 'plain text', questions: ask }, bearer(key));
    await post(gw.url, '/v1/systemone', { ...REQUEST, state: [1, 'two'], questions: ask }, bearer(key));
    expect(stand.seen.map((s) => s.body.input)).toEqual(['plain text', '[1,"two"]']);
  });

  it.each<[string, (q: DecisionCreateParams['questions'][number], i: number) => unknown]>([
    ['an answer named for no question', (q) => ({ ...answerTo(q), name: 'other' })],
    ['a question answered twice', (q, i) => ({ ...answerTo(q), name: i === 1 ? 'refund' : q.name })],
    ['another type', (q) => ({ ...answerTo(q), type: q.type === 'predicate' ? 'score' : q.type })],
    [
      'a sum off by more than rounding',
      (q) =>
        q.type === 'choice'
          ? {
              ...answerTo(q),
              probabilities: [
                { value: 'billing', probability: 0.9 },
                { value: 'technical', probability: 0.3 },
              ],
            }
          : answerTo(q),
    ],
  ])('%s is an invalid answer: 502, uncharged', async (_what, answer) => {
    const stand = await startStandIn((request, res) => answerDecision(request, res, answer as never));
    open.push(stand);
    const gw = await gatewayOver(
      `upstreams:\n  luna: { kind: openai-decisions, baseUrl: "${stand.url}", model: m }\nroutes:\n  default: { upstreams: [luna] }`,
    );
    const created = await gw.createKey();
    const sent = await post(gw.url, '/v1/systemone', REQUEST, bearer(created.key));
    expect(sent.status).toBe(502);
    expect(sent.body.code).toBe(50200);
    expect((await gw.store.usage(created.id, 1)).recent[0]).toMatchObject({ status: 502, creditsMicro: 0 });
  });

  it.each<[number, number, string]>([
    [400, 40001, 'the upstream refused the request: too many tokens'],
    [422, 40001, 'the upstream refused the request: too many tokens'],
    [401, 50200, 'the upstream refused the gateway'],
    [404, 50200, 'the upstream failed (HTTP 404)'],
  ])('OpenAI’s %i becomes %i', async (status, code, message) => {
    const stand = await startStandIn((_request, res) =>
      json(res, status, openAiErrorBody('too many tokens', 'invalid_request_error')),
    );
    open.push(stand);
    const gw = await gatewayOver(
      `upstreams:\n  luna: { kind: openai-decisions, baseUrl: "${stand.url}", model: m, maxRetries: 0 }\nroutes:\n  default: { upstreams: [luna] }`,
    );
    const { key } = await gw.createKey();
    const sent = await post(gw.url, '/v1/systemone', REQUEST, bearer(key));
    expect(sent.body.code).toBe(code);
    expect(sent.body.message).toBe(message);
  });

  it('a caller of the OpenAI door is sent exactly as it wrote, and answered by position', async () => {
    const stand = await startStandIn((request, res) => answerDecision(request, res));
    open.push(stand);
    const gw = await gatewayOver(
      `upstreams:\n  luna: { kind: openai-decisions, baseUrl: "${stand.url}/v1", model: gpt-6-luna }\nroutes:\n  default: { upstreams: [luna] }`,
    );
    const { key } = await gw.createKey();
    const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/openai/v1`, maxRetries: 0 });
    const params: DecisionCreateParams = {
      model: 'vendor/model-1.13',
      input: [
        {
          role: 'system',
          content: [{ type: 'input_text', text: 'Be brief.', prompt_cache_breakpoint: { mode: 'explicit' } }],
        },
        { role: 'user', content: 'Refund my double charge.' },
      ],
      questions: [
        { type: 'predicate', instructions: [{ type: 'input_text', text: 'A refund?' }] },
        {
          type: 'choice',
          name: 'flag',
          instructions: 'Flag it?',
          choices: [{ value: true, description: 'yes' }, { value: 'later' }],
        },
        {
          type: 'score',
          instructions: 'Urgency',
          levels: [{ label: 'low' }, { label: 'high', description: 'now' }],
        },
      ],
      safety_identifier: 'user-42',
      prompt_cache_key: 'tickets',
      prompt_cache_options: { mode: 'explicit', ttl: '30m' },
    };
    const data = await client.decisions.create(params);
    expect(stand.seen[0]?.body).toEqual({ ...params, model: 'gpt-6-luna' });
    expect(data.answers).toEqual([
      { type: 'predicate', name: null, probability: 0.7 },
      expect.objectContaining({ type: 'choice', name: 'flag', choice: true }),
      expect.objectContaining({ type: 'score', name: null }),
    ]);
    // The upstream's usage details reach the OpenAI-door caller.
    expect(data.usage.input_tokens_details).toEqual({ cached_tokens: 20, cache_write_tokens: 0 });
  });
});

describe('refusals', () => {
  const refusing = (refuse: string[]) => (q: DecisionCreateParams['questions'][number]) =>
    refuse.includes(q.name ?? '') ? { type: 'refusal' as const, name: q.name ?? null } : answerTo(q);

  it('on REST a declined question is asked again of the next upstream, and both calls are billed', async () => {
    const luna = await startStandIn((request, res) => answerDecision(request, res, refusing(['team'])));
    const hosted = await startStandIn((request, res) =>
      json(res, 200, nativeAnswer(request, { input_tokens: 50, output_tokens: 0 })),
    );
    open.push(luna, hosted);
    const gw = await gatewayOver(
      `upstreams:\n  luna: { kind: openai-decisions, baseUrl: "${luna.url}", model: m }\n  hosted: { kind: systemone, baseUrl: "${hosted.url}" }\nroutes:\n  default: { upstreams: [luna, hosted] }`,
    );
    const { key } = await gw.createKey();
    const sent = await post(gw.url, '/v1/systemone', REQUEST, bearer(key));
    expect(sent.status).toBe(200);
    expect(sent.headers.get('x-dg-upstream')).toBe('luna+hosted');
    expect(Object.keys(hosted.seen[0]?.body.questions)).toEqual(['team']);
    expect(sent.body.data.result.answers.team.type).toBe('choice');
    expect(sent.body.data.result.usage).toEqual({ input_tokens: 170, output_tokens: 3 });
  });

  it('on REST a question no upstream answers fails 502, uncharged, naming it', async () => {
    const luna = await startStandIn((request, res) => answerDecision(request, res, refusing(['team'])));
    open.push(luna);
    const gw = await gatewayOver(
      `upstreams:\n  luna: { kind: openai-decisions, baseUrl: "${luna.url}", model: m }\nroutes:\n  default: { upstreams: [luna] }`,
    );
    const created = await gw.createKey();
    const sent = await post(gw.url, '/v1/systemone', REQUEST, bearer(created.key));
    expect(sent.status).toBe(502);
    expect(sent.body.message).toBe('every upstream declined the questions "team"');
    expect((await gw.store.usage(created.id, 1)).totals.creditsMicro).toBe(0);
  });

  it('on the OpenAI door a refusal reaches the caller after the escalation target had its try; never cached', async () => {
    const luna = await startStandIn((request, res) =>
      answerDecision(request, res, refusing(['team', 'urgency'])),
    );
    const strong = await startStandIn((request, res) => answerDecision(request, res, refusing(['urgency'])));
    open.push(luna, strong);
    const gw = await gatewayOver(
      `upstreams:\n  luna: { kind: openai-decisions, baseUrl: "${luna.url}", model: m }\n  strong: { kind: openai-decisions, baseUrl: "${strong.url}", model: big }\nroutes:\n  default: { upstreams: [luna], escalate: { to: strong, confidenceBelow: 0.1 }, cache: { ttlSeconds: 60 } }`,
    );
    const { key } = await gw.createKey();
    const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/openai/v1`, maxRetries: 0 });
    const ask = () =>
      client.decisions
        .create({
          model: 'vendor/model-1.13',
          input: 'Refund please',
          questions: [
            { type: 'predicate', name: 'refund', instructions: 'Refund?' },
            {
              type: 'choice',
              name: 'team',
              instructions: 'Team?',
              choices: [{ value: 'billing' }, { value: 'tech' }],
            },
            {
              type: 'score',
              name: 'urgency',
              instructions: 'Urgency?',
              levels: [{ label: 'low' }, { label: 'high' }],
            },
          ],
        })
        .withResponse();
    const { data, response } = await ask();
    expect(data.answers.map((a) => [a.name, a.type])).toEqual([
      ['refund', 'predicate'],
      ['team', 'choice'],
      ['urgency', 'refusal'],
    ]);
    expect(response.headers.get('x-dg-upstream')).toBe('luna+strong');
    expect(strong.seen[0]?.body.questions.map((q: { name: string }) => q.name)).toEqual(['team', 'urgency']);
    const again = await ask();
    expect(again.response.headers.get('x-dg-cache')).toBe('miss');
    expect(luna.seen).toHaveLength(2);
  });
});

describe('more questions than an upstream takes go out in groups', () => {
  it('20 questions to a System One service at 8 a call: 8, 8 and 4 at once, each with the whole state, usage summed', async () => {
    const hosted = await startStandIn((request, res) =>
      json(res, 200, nativeAnswer(request, { input_tokens: 100, output_tokens: 0 })),
    );
    open.push(hosted);
    const gw = await gatewayOver(
      `upstreams:\n  hosted: { kind: systemone, baseUrl: "${hosted.url}" }\nroutes:\n  default: { upstreams: [hosted] }`,
    );
    const { key } = await gw.createKey();
    const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/openai/v1`, maxRetries: 0 });
    const data = await client.decisions.create({
      model: 'vendor/model-1.13',
      input: 'the whole state',
      questions: Array.from({ length: 20 }, (_, i) => ({
        type: 'predicate' as const,
        name: `q${i}`,
        instructions: `Statement ${i}`,
      })),
    });
    expect(hosted.seen.map((s) => Object.keys(s.body.questions).length).sort()).toEqual([4, 8, 8]);
    expect(hosted.seen.every((s) => s.body.state === 'the whole state')).toBe(true);
    expect(data.answers.map((a) => a.name)).toEqual(Array.from({ length: 20 }, (_, i) => `q${i}`));
    expect(data.usage.input_tokens).toBe(300);
  });
});
