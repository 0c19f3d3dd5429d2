import OpenAI from 'openai';
import type { DecisionCreateParams } from 'openai/resources/decisions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, get, post, startGateway, type TestGateway } from './harness.ts';

// The official `openai` SDK, unchanged, pointed at the gateway's OpenAI door (docs/openai.md).

const QUESTIONS: DecisionCreateParams['questions'] = [
  { type: 'predicate', name: 'refund', instructions: 'The customer asks for a refund.' },
  {
    type: 'choice',
    name: 'team',
    instructions: 'Which team should handle it?',
    choices: [
      { value: 'billing', description: 'payments, refunds, double charges' },
      { value: 'technical', description: 'bugs and crashes' },
    ],
  },
  {
    type: 'choice',
    instructions: 'Is it urgent?',
    choices: [{ value: true }, { value: false }],
  },
  {
    type: 'score',
    name: 'urgency',
    instructions: 'How urgent is it?',
    levels: [{ label: 'low' }, { label: 'medium', description: 'within a day' }, { label: 'high' }],
  },
];
const INPUT = 'Hi, I was charged twice for my order last week. Please refund the double charge.';

describe('the OpenAI door, through the official openai SDK', () => {
  let gw: TestGateway;
  let key: { id: string; key: string };
  let client: OpenAI;

  beforeAll(async () => {
    gw = await startGateway();
    key = await gw.createKey({ credits: 100 });
    client = new OpenAI({ apiKey: key.key, baseURL: `${gw.url}/openai/v1`, maxRetries: 0 });
  });
  afterAll(async () => {
    await gw.close();
  });

  it('answers in question order, names and typed values kept, with OpenAI’s usage and the gateway’s headers', async () => {
    const { data, response } = await client.decisions
      .create({ model: 'vendor/model-1.13', input: INPUT, questions: QUESTIONS })
      .withResponse();
    expect(data.model).toBe('vendor/model-1.13');
    expect(data.answers.map((a) => [a.type, a.name])).toEqual([
      ['predicate', 'refund'],
      ['choice', 'team'],
      ['choice', null],
      ['score', 'urgency'],
    ]);
    const [refund, team, urgent, urgency] = data.answers;
    if (
      refund?.type !== 'predicate' ||
      team?.type !== 'choice' ||
      urgent?.type !== 'choice' ||
      urgency?.type !== 'score'
    )
      throw new Error('answer types');
    expect(refund.probability).toBeGreaterThanOrEqual(0);
    expect(refund.probability).toBeLessThanOrEqual(1);
    expect(team.choice).toBe('billing');
    expect(team.probabilities.map((p) => p.value)).toEqual(['billing', 'technical']);
    // Booleans stay booleans, in the order of the question's choices.
    expect(urgent.probabilities.map((p) => p.value)).toEqual([true, false]);
    expect(typeof urgent.choice).toBe('boolean');
    expect(urgency.probabilities.map((p) => [p.value, p.label])).toEqual([
      [0, 'low'],
      [1, 'medium'],
      [2, 'high'],
    ]);
    for (const answer of [team, urgent, urgency]) {
      const sum = answer.probabilities.reduce((s, p) => s + p.probability, 0);
      expect(sum).toBeCloseTo(1, 6);
    }
    expect(data.usage.input_tokens).toBeGreaterThan(0);
    expect(data.usage.input_tokens_details).toEqual({ cached_tokens: 0, cache_write_tokens: 0 });
    expect(data.usage.output_tokens_details).toEqual({ reasoning_tokens: 0 });
    expect(data.usage.total_tokens).toBe(data.usage.input_tokens + data.usage.output_tokens);
    expect(response.headers.get('x-request-id')).toMatch(/^req_/);
    expect(Number(response.headers.get('x-credits-used'))).toBe(data.usage.input_tokens / 1000);
    expect(response.headers.get('x-dg-route')).toBe('default');
    expect(response.headers.get('x-dg-upstream')).toBe('lexical');
    const usage = await gw.store.usage(key.id, 1);
    expect(usage.recent[0]).toMatchObject({
      requestId: response.headers.get('x-request-id'),
      status: 200,
      questions: 4,
      creditsMicro: data.usage.input_tokens * 1000,
    });
  });

  it('takes more than 8 questions, up to 400, and input as messages with text and JSON', async () => {
    const many = Array.from({ length: 40 }, (_, i) => ({
      type: 'predicate' as const,
      name: `q${i}`,
      instructions: `Statement ${i} is about a refund.`,
    }));
    const data = await client.decisions.create({
      model: 'vendor/model-1.13',
      input: [
        { role: 'developer', content: 'You triage support tickets.' },
        {
          role: 'user',
          content: [
            { type: 'input_text', text: INPUT },
            { type: 'input_json', data: { order: 42 } },
          ],
        },
      ],
      questions: many,
    });
    expect(data.answers).toHaveLength(40);
    expect(data.answers.map((a) => a.name)).toEqual(many.map((q) => q.name));
  });

  it('lists models in OpenAI’s shape', async () => {
    const page = await client.models.list();
    expect(page.data).toEqual([
      { id: 'vendor/model-1.13', object: 'model', created: expect.any(Number), owned_by: 'decision-gateway' },
    ]);
  });

  it('raises the SDK’s own error classes: 401, 400, 429, 402', async () => {
    const stranger = new OpenAI({ apiKey: 'dg_not_a_key', baseURL: `${gw.url}/openai/v1`, maxRetries: 0 });
    const unauthorized = await stranger.models.list().catch((error: unknown) => error);
    expect(unauthorized).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(unauthorized).toMatchObject({
      status: 401,
      code: 'invalid_api_key',
      type: 'authentication_error',
    });

    const bad = await client.decisions
      .create({ model: 'vendor/model-1.13', input: INPUT, questions: QUESTIONS, temperature: 0 } as never)
      .catch((error: unknown) => error);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    expect(bad).toMatchObject({ status: 400, code: 'invalid_request', type: 'invalid_request_error' });
    expect((bad as Error).message).toContain('temperature');

    const poor = await gw.createKey({ credits: 0.0001 });
    const broke = await new OpenAI({
      apiKey: poor.key,
      baseURL: `${gw.url}/openai/v1`,
      maxRetries: 0,
    }).decisions
      .create({ model: 'vendor/model-1.13', input: INPUT, questions: QUESTIONS })
      .catch((error: unknown) => error);
    expect(broke).toBeInstanceOf(OpenAI.APIError);
    expect(broke).toMatchObject({ status: 402, code: 'insufficient_credits', type: 'insufficient_quota' });

    const limited = await gw.createKey({ credits: 100, rateLimitPerMinute: 1 });
    const hurried = new OpenAI({ apiKey: limited.key, baseURL: `${gw.url}/openai/v1`, maxRetries: 0 });
    await hurried.decisions.create({ model: 'vendor/model-1.13', input: INPUT, questions: QUESTIONS });
    const tooMany = await hurried.decisions
      .create({ model: 'vendor/model-1.13', input: INPUT, questions: QUESTIONS })
      .catch((error: unknown) => error);
    expect(tooMany).toBeInstanceOf(OpenAI.RateLimitError);
    expect(tooMany).toMatchObject({ status: 429, code: 'rate_limited', type: 'rate_limit_error' });
    const headers = (tooMany as InstanceType<typeof OpenAI.RateLimitError>).headers;
    expect(Number(headers.get('retry-after'))).toBeGreaterThan(0);
    expect(Number(headers.get('retry-after-ms'))).toBeGreaterThan(0);
  });
});

describe('the OpenAI door refuses bad input clearly, at its path, uncharged, with one usage record', () => {
  let gw: TestGateway;
  let key: { id: string; key: string };
  beforeAll(async () => {
    gw = await startGateway();
    key = await gw.createKey({ credits: 100 });
  });
  afterAll(async () => {
    await gw.close();
  });

  const body = (overrides: Record<string, unknown>) => ({
    model: 'vendor/model-1.13',
    input: INPUT,
    questions: [{ type: 'predicate', instructions: 'A refund?' }],
    ...overrides,
  });
  const choice = (choices: unknown[]) => ({ type: 'choice', instructions: 'Which?', choices });

  it.each<[string, Record<string, unknown>, number, number, string | null, RegExp]>([
    ['an unknown field', { temperature: 0 }, 400, 40001, 'temperature', /temperature/],
    ['no question', { questions: [] }, 400, 40002, 'questions', /0 questions/],
    [
      '401 questions',
      { questions: Array.from({ length: 401 }, () => ({ type: 'predicate', instructions: 'x' })) },
      400,
      40002,
      'questions',
      /401 questions/,
    ],
    ['another model', { model: 'gpt-6-luna' }, 400, 40003, 'model', /unknown model/],
    [
      'a name twice',
      {
        questions: [
          { type: 'predicate', name: 'a', instructions: 'x' },
          { type: 'predicate', name: 'a', instructions: 'y' },
        ],
      },
      400,
      40001,
      'questions.1.name',
      /unique/,
    ],
    [
      'a name that is another question’s #index',
      {
        questions: [
          { type: 'predicate', instructions: 'x' },
          { type: 'predicate', name: '#0', instructions: 'y' },
        ],
      },
      400,
      40001,
      'questions.1.name',
      /#<index>/,
    ],
    [
      'true beside "true"',
      { questions: [choice([{ value: true }, { value: 'true' }])] },
      400,
      40001,
      'questions.0.choices.1.value',
      /one label/,
    ],
    [
      'an image by URL, on a route none of whose upstreams takes image URLs',
      {
        input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'https://example.com/a.png' }] }],
      },
      400,
      40001,
      null,
      /route default has no upstream that takes images and image URLs/,
    ],
    [
      'an image in a question whose data URL is of no image format taken',
      { questions: [{ type: 'predicate', instructions: [{ type: 'input_image', image_url: 'data:,' }] }] },
      400,
      40001,
      'questions.0.instructions.0.image_url',
      /data:image\/png, image\/jpeg or image\/webp/,
    ],
    [
      'a tool call',
      { input: [{ type: 'function_call', call_id: 'c1', name: 'lookup', arguments: '{}' }] },
      400,
      40001,
      'input.0',
      /text, JSON and images: tool calls are not accepted/,
    ],
    [
      'one choice',
      { questions: [choice([{ value: 'a' }])] },
      400,
      40001,
      'questions.0.choices',
      /at least 2/,
    ],
    ['an empty input', { input: '' }, 400, 40001, 'input', /empty/],
  ])('%s', async (_what, overrides, status, code, param, message) => {
    const before = (await gw.store.usage(key.id, 1000)).totals.requests;
    const sent = await post(gw.url, '/openai/v1/decisions', body(overrides), bearer(key.key));
    expect(sent.status).toBe(status);
    expect(sent.body.gateway_code).toBe(code);
    expect(sent.body.error.type).toBe('invalid_request_error');
    expect(sent.body.error.param).toBe(param);
    expect(sent.body.error.message).toMatch(message);
    const after = await gw.store.usage(key.id, 1000);
    expect(after.totals.requests).toBe(before + 1);
    expect(after.totals.creditsMicro).toBe(0);
  });

  it('takes a body up to 1 MiB besides image data and refuses a larger one (413)', async () => {
    const big = body({ input: 'Please refund the double charge on my order. '.repeat(20_000) });
    const rich = await gw.createKey({ credits: 10_000 });
    const fits = await post(gw.url, '/openai/v1/decisions', big, bearer(rich.key));
    expect(fits.status).toBe(200);
    // Whether a body holds image data is known once its JSON is read, after authentication.
    const tooBig = await post(
      gw.url,
      '/openai/v1/decisions',
      body({ input: 'x'.repeat(1_048_600) }),
      bearer(rich.key),
    );
    expect(tooBig.status).toBe(413);
    expect(tooBig.body).toMatchObject({
      gateway_code: 41300,
      error: { type: 'invalid_request_error', code: 'payload_too_large' },
    });
    // The seed door keeps its 32 KiB.
    const rest = await post(
      gw.url,
      '/v1/systemone',
      { model: 'vendor/model-1.13', state: 'x'.repeat(40_000), questions: {} },
      bearer(key.key),
    );
    expect(rest.status).toBe(413);
  });

  it('answers 404 and 405 in OpenAI’s shape', async () => {
    const missing = await get(gw.url, '/openai/v1/chat/completions', bearer(key.key));
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({
      gateway_code: 40400,
      error: { type: 'invalid_request_error', code: 'not_found' },
    });
    const wrong = await get(gw.url, '/openai/v1/decisions', bearer(key.key));
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('POST');
  });
});

describe('the OpenAI door from a browser: tokens and CORS', () => {
  const ORIGIN = 'http://127.0.0.1:5173';
  let gw: TestGateway;
  let key: { id: string; key: string };
  beforeAll(async () => {
    gw = await startGateway({ corsOrigins: [ORIGIN] });
    key = await gw.createKey({ credits: 100 });
  });
  afterAll(async () => {
    await gw.close();
  });

  it('answers the preflight for /openai/v1/*, allowing the SDK’s own headers', async () => {
    const preflight = await fetch(`${gw.url}/openai/v1/decisions`, {
      method: 'OPTIONS',
      headers: {
        origin: ORIGIN,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization, content-type, x-stainless-os',
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    expect(preflight.headers.get('access-control-allow-headers')).toContain('x-stainless-os');
  });

  it('a token works from its origin and is refused from another; an API key from a browser origin is refused', async () => {
    const minted = await post(
      gw.url,
      '/v1/tokens',
      { origins: [ORIGIN], subject: 'user-9' },
      bearer(key.key),
    );
    const token = minted.body.data.token as string;
    const request = {
      model: 'vendor/model-1.13',
      input: 'Refund please',
      questions: [{ type: 'predicate', name: 'refund', instructions: 'A refund?' }],
    };
    const fromPage = await post(gw.url, '/openai/v1/decisions', request, {
      ...bearer(token),
      origin: ORIGIN,
    });
    expect(fromPage.status).toBe(200);
    expect(fromPage.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    expect(fromPage.headers.get('access-control-expose-headers')).toContain('x-credits-used');
    const elsewhere = await post(gw.url, '/openai/v1/decisions', request, {
      ...bearer(token),
      origin: 'https://evil.example',
    });
    expect([elsewhere.status, elsewhere.body.gateway_code, elsewhere.body.error.type]).toEqual([
      403,
      40300,
      'permission_error',
    ]);
    const keyInPage = await post(gw.url, '/openai/v1/decisions', request, {
      ...bearer(key.key),
      origin: ORIGIN,
    });
    expect([keyInPage.status, keyInPage.body.gateway_code]).toEqual([403, 40300]);
    expect(keyInPage.headers.get('access-control-allow-origin')).toBeNull();
    // Refused at authentication, neither left a record: the last is the page's, with its user.
    expect((await gw.store.usage(key.id, 1)).recent[0]?.subject).toBe('user-9');
  });

  it('an unknown route is 40004 in OpenAI’s shape, naming the routes', async () => {
    const sent = await post(
      gw.url,
      '/openai/v1/decisions',
      { model: 'vendor/model-1.13', input: 'x', questions: [{ type: 'predicate', instructions: 'y' }] },
      { ...bearer(key.key), 'x-dg-route': 'nope' },
    );
    expect([sent.status, sent.body.gateway_code, sent.body.error.code]).toEqual([
      400,
      40004,
      'unknown_route',
    ]);
    expect(sent.body.error.message).toContain('the routes are: default');
  });
});
