import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Decisions, GoogleGenAI } from '@google/genai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { blockedInput, googleAnswers } from './gemini-decisions-stand-in.ts';
import { bearer, configuredRoutes, get, post, startGateway, type TestGateway } from './harness.ts';
import { decision } from './openai-decisions-stand-in.ts';
import { json, nativeAnswer, type SeenRequest, type StandIn, startStandIn } from './stand-in-upstream.ts';
import { makeImage } from './support/images.ts';

// The official `@google/genai` SDK, unchanged, pointed at the gateway's Gemini door (docs/gemini.md).

const QUESTIONS: Decisions.CreateDecisionRequest['questions'] = {
  refund: {
    type: 'noul',
    instructions: 'The customer asks for a refund.',
    criteria: { true_description: 'asks for money back' },
  },
  team: {
    type: 'choice',
    instructions: [{ type: 'text', text: 'Which team should handle it?' }],
    criteria: { billing: 'payments, refunds, double charges', technical: 'bugs and crashes' },
  },
  urgency: {
    type: 'score',
    instructions: 'How urgent is it?',
    criteria: ['low', 'medium: within a day', 'high'],
  },
};
const INPUT = 'Hi, I was charged twice for my order last week. Please refund the double charge.';
/** The SDK's own retries are off where a test provokes an error: one request, one answer. */
const NO_RETRIES = { retries: { strategy: 'none' } } as const;

const clientFor = (url: string, apiKey: string) =>
  new GoogleGenAI({ apiKey, httpOptions: { baseUrl: `${url}/gemini` } });

/**
 * The response's headers: the SDK keeps them as `sdkHttpResponse.headers` beside the body, a field
 * its 3.3.0 types do not declare on `CreateDecisionResponse`.
 */
const headersOf = (data: object): Record<string, string> =>
  (data as { sdkHttpResponse?: { headers?: Record<string, string> } }).sdkHttpResponse?.headers ?? {};

/** What the SDK raised: its status and Google's body as the gateway wrote it. */
async function raised(promise: Promise<unknown>): Promise<{ status: number; body: any; name: string }> {
  const error = (await promise.then(
    () => {
      throw new Error('expected the SDK to raise');
    },
    (e: unknown) => e,
  )) as { status: number; body: string; name: string; constructor: { name: string } };
  return { status: error.status, body: JSON.parse(error.body), name: error.constructor.name };
}

describe('the Gemini door, through the official @google/genai SDK', () => {
  let gw: TestGateway;
  let key: { id: string; key: string };
  let ai: GoogleGenAI;

  beforeAll(async () => {
    gw = await startGateway();
    key = await gw.createKey({ credits: 100 });
    ai = clientFor(gw.url, key.key);
  });
  afterAll(async () => {
    await gw.close();
  });

  it('answers by question ID with Google’s confidences, legend and usage, and the gateway’s headers', async () => {
    const before = (await gw.store.usage(key.id, 1000)).totals.requests;
    const data = await ai.decisions.create({
      model: 'vendor/model-1.13',
      input: INPUT,
      questions: QUESTIONS,
    });
    const answers = data.answers as Record<string, Decisions.Answer>;
    expect(Object.keys(answers)).toEqual(['refund', 'team', 'urgency']);
    const { refund, team, urgency } = answers;
    if (refund?.type !== 'noul' || team?.type !== 'choice' || urgency?.type !== 'score')
      throw new Error('answer types');
    expect(refund.confidence).toBeCloseTo(Math.max(refund.noul, 1 - refund.noul), 12);
    expect(Object.keys(team.probabilities)).toEqual(['billing', 'technical']);
    expect(team.confidence).toBe(Math.max(...Object.values(team.probabilities)));
    expect(team.probabilities[team.choice]).toBe(team.confidence);
    expect(urgency.legend).toEqual({ 0: 'low', 1: 'medium: within a day', 2: 'high' });
    expect(Object.keys(urgency.probabilities)).toEqual(['0', '1', '2']);
    expect(urgency.confidence).toBe(Math.max(...Object.values(urgency.probabilities)));
    const expected = Object.entries(urgency.probabilities).reduce((s, [i, p]) => s + Number(i) * p, 0);
    expect(urgency.score).toBeCloseTo(expected, 9);
    const usage = data.usage as NonNullable<Decisions.CreateDecisionResponse['usage']>;
    expect(usage.total_input_tokens).toBeGreaterThan(0);
    expect(usage.total_tokens).toBe((usage.total_input_tokens ?? 0) + (usage.total_output_tokens ?? 0));
    const headers = headersOf(data);
    expect(Number(headers['x-credits-used'])).toBeGreaterThan(0);
    expect(headers['x-request-id']).toMatch(/.+/);
    expect(headers['x-dg-route']).toBe('default');
    const after = await gw.store.usage(key.id, 1000);
    expect(after.totals.requests).toBe(before + 1);
    // The gateway's own request, as the log line tells it: the door and the questions.
    const line = gw.logs.map((l) => JSON.parse(l)).find((l) => l.requestId === headers['x-request-id']);
    expect(line).toMatchObject({ path: '/gemini/v1/decisions', status: 200, questions: 3 });
  });

  it('answers under both API versions, and takes the model by either name', async () => {
    const asked = { input: INPUT, questions: { refund: QUESTIONS.refund as Decisions.Question } };
    const beta = await ai.decisions.create({
      ...asked,
      model: 'models/vendor/model-1.13',
      api_version: 'v1beta',
    });
    expect(beta.answers?.refund?.type).toBe('noul');
    const v1 = await ai.decisions.create({ ...asked, model: 'vendor/model-1.13', api_version: 'v1' });
    expect(v1.answers?.refund?.type).toBe('noul');
  });

  it('answers question IDs such as __proto__ and constructor as any other', async () => {
    const raw = `{"model":"vendor/model-1.13","input":${JSON.stringify(INPUT)},"questions":{
      "__proto__":{"type":"noul","instructions":"The customer asks for a refund."},
      "constructor":{"type":"choice","instructions":"Which team?","criteria":{"billing":"payments","technical":"bugs"}}}}`;
    const sent = await post(gw.url, '/gemini/v1beta/decisions', raw, { 'x-goog-api-key': key.key });
    expect(sent.status).toBe(200);
    expect(Object.keys(sent.body.answers)).toEqual(['__proto__', 'constructor']);
    expect(Object.getOwnPropertyDescriptor(sent.body.answers, '__proto__')?.value).toMatchObject({
      type: 'noul',
    });
    expect(sent.body.answers.constructor).toMatchObject({ type: 'choice' });
  });

  it('takes 1000 questions and input as contents; refuses none and 1001 (40002)', async () => {
    const many = (n: number) =>
      Object.fromEntries(
        Array.from({ length: n }, (_, i) => [
          `q${i}`,
          { type: 'noul' as const, instructions: `Statement ${i} is about a refund.` },
        ]),
      );
    const rich = await gw.createKey({ credits: 100_000 });
    const client = clientFor(gw.url, rich.key);
    const data = await client.decisions.create({
      model: 'vendor/model-1.13',
      input: [
        { type: 'text', text: INPUT },
        { type: 'text', text: '{"order": 42}' },
      ],
      questions: many(1000),
    });
    expect(Object.keys(data.answers ?? {})).toHaveLength(1000);
    for (const n of [0, 1001]) {
      const error = await raised(
        client.decisions.create({ model: 'vendor/model-1.13', input: INPUT, questions: many(n) }, NO_RETRIES),
      );
      expect([error.status, error.body.gateway_code, error.body.error.status]).toEqual([
        400,
        40002,
        'INVALID_ARGUMENT',
      ]);
      expect(error.body.error.message).toContain(`${n} questions sent; a request takes 1 to 1000`);
    }
  });

  it('lists the gateway’s model in Google’s shape', async () => {
    const names: string[] = [];
    for await (const model of await ai.models.list()) names.push(model.name as string);
    expect(names).toEqual(['models/vendor/model-1.13']);
    const raw = await get(gw.url, '/gemini/v1beta/models', { 'x-goog-api-key': key.key });
    expect(raw.body.models[0]).toMatchObject({
      name: 'models/vendor/model-1.13',
      displayName: 'vendor/model-1.13',
    });
  });

  it('raises the SDK’s errors with Google’s status and the gateway’s code: 401, 400, 402, 429', async () => {
    const stranger = clientFor(gw.url, 'dg_not_a_key');
    const unauthorized = await raised(
      stranger.decisions.create(
        { model: 'vendor/model-1.13', input: INPUT, questions: QUESTIONS },
        NO_RETRIES,
      ),
    );
    expect(unauthorized).toMatchObject({
      status: 401,
      name: 'AuthenticationError',
      body: { error: { code: 401, status: 'UNAUTHENTICATED' }, gateway_code: 40101 },
    });
    const missing = await post(gw.url, '/gemini/v1beta/decisions', { model: 'vendor/model-1.13' });
    expect([missing.status, missing.body.gateway_code, missing.body.error.status]).toEqual([
      401,
      40100,
      'UNAUTHENTICATED',
    ]);

    const wrongModel = await raised(
      ai.decisions.create({ model: 'gemini-3-flash', input: INPUT, questions: QUESTIONS }, NO_RETRIES),
    );
    expect(wrongModel).toMatchObject({
      status: 400,
      name: 'BadRequestError',
      body: { error: { code: 400, status: 'INVALID_ARGUMENT' }, gateway_code: 40003 },
    });
    expect(wrongModel.body.error.message).toContain('this gateway serves "vendor/model-1.13"');

    const poor = await gw.createKey({ credits: 0.000001 });
    const noCredits = await raised(
      clientFor(gw.url, poor.key).decisions.create(
        { model: 'vendor/model-1.13', input: INPUT, questions: QUESTIONS },
        NO_RETRIES,
      ),
    );
    expect(noCredits).toMatchObject({
      status: 402,
      body: { error: { code: 402, status: 'FAILED_PRECONDITION' }, gateway_code: 40200 },
    });

    const limited = await gw.createKey({ credits: 100, rateLimitPerMinute: 1 });
    const once = clientFor(gw.url, limited.key);
    const asked = {
      model: 'vendor/model-1.13',
      input: INPUT,
      questions: { r: QUESTIONS.refund as Decisions.Question },
    };
    await once.decisions.create(asked, NO_RETRIES);
    const tooMany = await raised(once.decisions.create(asked, NO_RETRIES));
    expect(tooMany).toMatchObject({
      status: 429,
      name: 'RateLimitError',
      body: { error: { code: 429, status: 'RESOURCE_EXHAUSTED' }, gateway_code: 42900 },
    });
    const raw = await post(gw.url, '/gemini/v1beta/decisions', asked, { 'x-goog-api-key': limited.key });
    expect(Number(raw.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  it('refuses audio, video and documents, a score of more than 10 levels, and Google’s other rules (40001)', async () => {
    const cases: [Decisions.CreateDecisionRequest, string][] = [
      [
        {
          model: 'vendor/model-1.13',
          input: [
            { type: 'text', text: INPUT },
            { type: 'audio', data: 'AAAA', mime_type: 'audio/wav' },
          ],
          questions: QUESTIONS,
        },
        'input.1: this gateway takes text, JSON and images: audio, video and documents are not accepted',
      ],
      [
        {
          model: 'vendor/model-1.13',
          input: INPUT,
          questions: {
            stars: {
              type: 'score',
              instructions: 'Stars?',
              criteria: Array.from({ length: 11 }, (_, i) => `${i}`),
            },
          },
        },
        "questions.stars.criteria: has 11 levels: this gateway's scores have at most 10 levels",
      ],
      [
        {
          model: 'vendor/model-1.13',
          input: INPUT,
          questions: {
            team: { type: 'choice', instructions: 'Team?', criteria: { ' billing': 'x', tech: 'y' } },
          },
        },
        'an option must not begin or end with white space',
      ],
      [{ model: 'vendor/model-1.13', input: '', questions: QUESTIONS }, 'input: must not be empty'],
    ];
    for (const [body, message] of cases) {
      const error = await raised(ai.decisions.create(body, NO_RETRIES));
      expect([error.status, error.body.gateway_code, error.body.error.status]).toEqual([
        400,
        40001,
        'INVALID_ARGUMENT',
      ]);
      expect(error.body.error.message).toContain(message);
    }
    const unknownField = await post(
      gw.url,
      '/gemini/v1beta/decisions',
      { model: 'vendor/model-1.13', input: INPUT, questions: QUESTIONS, generation_config: {} },
      { 'x-goog-api-key': key.key },
    );
    expect([unknownField.status, unknownField.body.gateway_code]).toEqual([400, 40001]);
    expect(unknownField.body.error.message).toContain('generation_config');
  });

  it('takes a body up to 1 MiB besides image data and refuses a larger one (413); JSON only (415, 400)', async () => {
    const rich = await gw.createKey({ credits: 10_000 });
    const asked = (input: string) => ({
      model: 'vendor/model-1.13',
      input,
      questions: { r: { type: 'noul', instructions: 'A refund?' } },
    });
    const headers = { 'x-goog-api-key': rich.key };
    const fits = await post(
      gw.url,
      '/gemini/v1/decisions',
      asked('Please refund me. '.repeat(50_000)),
      headers,
    );
    expect(fits.status).toBe(200);
    const tooBig = await post(gw.url, '/gemini/v1/decisions', asked('x'.repeat(1_048_600)), headers);
    expect([tooBig.status, tooBig.body.gateway_code, tooBig.body.error.status]).toEqual([
      413,
      41300,
      'INVALID_ARGUMENT',
    ]);
    const text = await post(gw.url, '/gemini/v1/decisions', 'hello', {
      ...headers,
      'content-type': 'text/plain',
    });
    expect([text.status, text.body.gateway_code, text.body.error.status]).toEqual([
      415,
      41500,
      'INVALID_ARGUMENT',
    ]);
    const broken = await post(gw.url, '/gemini/v1/decisions', '{"model":', headers);
    expect([broken.status, broken.body.gateway_code]).toEqual([400, 40000]);
  });

  it('answers 404 (another path or version) and 405 in Google’s shape', async () => {
    const asked = { model: 'vendor/model-1.13', input: INPUT, questions: { r: QUESTIONS.refund } };
    for (const [method, path] of [
      ['GET', '/gemini/v1beta/generateContent'],
      ['POST', '/gemini/v2/decisions'],
      ['GET', '/gemini/v2/models'],
    ] as const) {
      const missing =
        method === 'GET'
          ? await get(gw.url, path, { 'x-goog-api-key': key.key })
          : await post(gw.url, path, asked, { 'x-goog-api-key': key.key });
      expect([missing.status, missing.body.gateway_code, missing.body.error]).toEqual([
        404,
        40400,
        { code: 404, status: 'NOT_FOUND', message: expect.any(String) },
      ]);
    }
    const wrong = await get(gw.url, '/gemini/v1beta/decisions', { 'x-goog-api-key': key.key });
    expect([wrong.status, wrong.body.gateway_code, wrong.body.error.status]).toEqual([
      405,
      40500,
      'INVALID_ARGUMENT',
    ]);
    expect(wrong.headers.get('allow')).toBe('POST');
  });

  it('takes the key as Authorization: Bearer too; an unknown route is 40004 naming the routes', async () => {
    const asked = { model: 'vendor/model-1.13', input: INPUT, questions: { r: QUESTIONS.refund } };
    const viaBearer = await post(gw.url, '/gemini/v1beta/decisions', asked, bearer(key.key));
    expect(viaBearer.status).toBe(200);
    expect(viaBearer.body.answers.r.type).toBe('noul');
    const unknown = await post(gw.url, '/gemini/v1beta/decisions', asked, {
      'x-goog-api-key': key.key,
      'x-dg-route': 'nope',
    });
    expect([unknown.status, unknown.body.gateway_code]).toEqual([400, 40004]);
    expect(unknown.body.error.message).toContain('the routes are: default');
  });

  it('the README’s snippet runs as written but for the address and key', async () => {
    const readme = readFileSync(join(import.meta.dirname, '../../../README.md'), 'utf8');
    const block = [...readme.matchAll(/```ts\n([\s\S]*?)\n```/g)]
      .map((m) => m[1] as string)
      .find((code) => code.includes("from '@google/genai'"));
    if (block === undefined) throw new Error('no @google/genai snippet in the README');
    // The snippet is an ES module with one import: given that import, it runs as its body.
    const body = block.replace(/^import .*$/m, '').replaceAll('http://127.0.0.1:8787', gw.url);
    const printed: unknown[][] = [];
    const AsyncFunction = (async () => {}).constructor as new (
      ...args: string[]
    ) => (...a: unknown[]) => Promise<void>;
    await new AsyncFunction('GoogleGenAI', 'process', 'console', body)(
      GoogleGenAI,
      { env: { DG_API_KEY: key.key } },
      { log: (...args: unknown[]) => printed.push(args) },
    );
    const [refund, inputTokens] = printed[0] ?? [];
    expect(refund).toMatchObject({ type: 'noul', noul: expect.any(Number), confidence: expect.any(Number) });
    expect(inputTokens).toBeGreaterThan(0);
  });

  it('records outcomes by the caller’s question IDs', async () => {
    const data = await ai.decisions.create({
      model: 'vendor/model-1.13',
      input: INPUT,
      questions: QUESTIONS,
    });
    const requestId = headersOf(data)['x-request-id'] as string;
    const recorded = await post(
      gw.url,
      '/v1/outcomes',
      { requestId, outcomes: { refund: true, team: 'billing', urgency: 1 } },
      bearer(key.key),
    );
    expect(recorded.status).toBe(200);
    expect(recorded.body.data).toMatchObject({ recorded: 3 });
    const unknown = await post(
      gw.url,
      '/v1/outcomes',
      { requestId, outcomes: { nope: true } },
      bearer(key.key),
    );
    expect(unknown.body).toMatchObject({ code: 40001, error: { issues: [{ path: ['outcomes', 'nope'] }] } });
  });
});

describe('the Gemini door from a browser: tokens and CORS', () => {
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

  it('answers the preflight for /gemini/*, allowing x-goog-api-key and x-goog-api-client', async () => {
    for (const path of ['/gemini/v1beta/decisions', '/gemini/v1/models']) {
      const preflight = await fetch(`${gw.url}${path}`, {
        method: 'OPTIONS',
        headers: {
          origin: ORIGIN,
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'content-type, x-goog-api-key, x-goog-api-client',
        },
      });
      expect(preflight.status).toBe(204);
      expect(preflight.headers.get('access-control-allow-origin')).toBe(ORIGIN);
      expect(preflight.headers.get('access-control-allow-headers')).toContain('x-goog-api-key');
      expect(preflight.headers.get('access-control-allow-headers')).toContain('x-goog-api-client');
    }
  });

  it('a token in x-goog-api-key works from its origin; an API key from a browser origin is refused', async () => {
    const minted = await post(
      gw.url,
      '/v1/tokens',
      { origins: [ORIGIN], subject: 'user-7' },
      bearer(key.key),
    );
    const token = minted.body.data.token as string;
    const asked = {
      model: 'vendor/model-1.13',
      input: 'Refund please',
      questions: { refund: { type: 'noul', instructions: 'A refund?' } },
    };
    const fromPage = await post(gw.url, '/gemini/v1beta/decisions', asked, {
      'x-goog-api-key': token,
      origin: ORIGIN,
    });
    expect(fromPage.status).toBe(200);
    expect(fromPage.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    expect(fromPage.headers.get('access-control-expose-headers')).toContain('x-credits-used');
    const keyInPage = await post(gw.url, '/gemini/v1beta/decisions', asked, {
      'x-goog-api-key': key.key,
      origin: ORIGIN,
    });
    expect([keyInPage.status, keyInPage.body.gateway_code, keyInPage.body.error.status]).toEqual([
      403,
      40300,
      'PERMISSION_DENIED',
    ]);
    expect((await gw.store.usage(key.id, 1)).recent[0]?.subject).toBe('user-7');
  });
});

describe('the Gemini door over other kinds of upstream', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    while (cleanups.length) await cleanups.pop()?.();
  });

  /** A gateway whose default route is `upstreams` of the given configuration text. */
  async function gatewayOver(config: string, options: { imageBytesInFlight?: number } = {}) {
    const gw = await startGateway({ routes: configuredRoutes(config), ...options });
    cleanups.push(gw.close);
    const key = await gw.createKey({ credits: 100 });
    return { gw, key, ai: clientFor(gw.url, key.key) };
  }
  async function standIn(handler: Parameters<typeof startStandIn>[0]): Promise<StandIn> {
    const started = await startStandIn(handler);
    cleanups.push(started.close);
    return started;
  }
  const geminiUpstream = (url: string, name = 'gemini') =>
    `  ${name}: { kind: gemini-decisions, baseUrl: "${url}", model: models/gemini-3-flash, apiKey: g-key, maxRetries: 0 }\n`;

  it('sends a Gemini upstream the request exactly as written, images and all, only the model its own', async () => {
    const google = await standIn((req, res) => json(res, 200, googleAnswers(req)));
    const { ai } = await gatewayOver(
      `upstreams:\n${geminiUpstream(google.url)}routes:\n  default: { upstreams: [gemini] }\n`,
    );
    const png = (await makeImage('png', 40, 30)).toString('base64');
    const input: Decisions.CreateDecisionRequest['input'] = [
      { type: 'text', text: INPUT },
      { type: 'image', mime_type: 'image/png', data: png },
      { type: 'image', uri: 'https://example.com/receipt.jpg' },
    ];
    const data = await ai.decisions.create({ model: 'vendor/model-1.13', input, questions: QUESTIONS });
    const seen = google.seen[0] as SeenRequest;
    expect(seen.path).toBe('/v1beta/decisions');
    expect(seen.headers['x-goog-api-key']).toBe('g-key');
    expect(seen.body).toEqual({ model: 'models/gemini-3-flash', input, questions: QUESTIONS });
    // Google's answers back in Google's shape, confidences computed again.
    expect(data.answers?.team).toEqual({
      type: 'choice',
      choice: 'billing',
      probabilities: { billing: 0.7, technical: 0.3 },
      confidence: 0.7,
    });
    expect(data.answers?.urgency).toMatchObject({ score: 2, confidence: 1, legend: { 2: 'high' } });
    expect(data.usage).toMatchObject({ total_input_tokens: 321, total_output_tokens: 4, total_tokens: 325 });
  });

  it('translates for a System One upstream: texts joined, images as assets named image-<i>, 40 questions in groups of 8', async () => {
    const systemOne = await standIn((req, res) => json(res, 200, nativeAnswer(req)));
    const seenBodies = systemOne.seen;
    const { ai } = await gatewayOver(
      `upstreams:\n  s1: { kind: systemone, baseUrl: "${systemOne.url}", images: true, maxRetries: 0 }\nroutes:\n  default: { upstreams: [s1] }\n`,
    );
    const png = await makeImage('png', 40, 30);
    const many = Object.fromEntries(
      Array.from({ length: 40 }, (_, i) => [
        `q${i}`,
        { type: 'noul' as const, instructions: `Statement ${i}.` },
      ]),
    );
    const data = await ai.decisions.create({
      model: 'vendor/model-1.13',
      input: [
        { type: 'text', text: 'The parcel arrived.' },
        { type: 'image', mime_type: 'image/png', data: png.toString('base64') },
        { type: 'text', text: 'Is it damaged?' },
      ],
      questions: {
        ...many,
        damaged: {
          type: 'noul',
          instructions: [
            { type: 'text', text: 'Is the parcel damaged?' },
            { type: 'text', text: 'Look at the box.' },
          ],
          criteria: { true_description: 'dented or torn', false_description: 'intact' },
        },
        team: QUESTIONS.team as Decisions.Question,
      },
    });
    expect(Object.keys(data.answers ?? {})).toHaveLength(42);
    expect(seenBodies).toHaveLength(6);
    const first = seenBodies[0]?.body;
    expect(first.state).toBe('The parcel arrived.\n\n[image-0]\n\nIs it damaged?');
    expect(first.assets).toEqual({
      'image-0': { type: 'image', format: 'png', data_base64: png.toString('base64') },
    });
    const damaged = seenBodies.map((s) => s.body.questions.damaged).find(Boolean);
    expect(damaged).toEqual({
      type: 'noul',
      instructions: 'Is the parcel damaged?\n\nLook at the box.',
      criteria: { true: 'dented or torn', false: 'intact' },
    });
    const team = seenBodies.map((s) => s.body.questions.team).find(Boolean);
    expect(team).toEqual({
      type: 'choice',
      instructions: 'Which team should handle it?',
      criteria: { billing: 'payments, refunds, double charges', technical: 'bugs and crashes' },
    });
  });

  it('refuses an image its route cannot take, and one whose bytes are not what its mime_type says (40001)', async () => {
    const systemOne = await standIn((req, res) => json(res, 200, nativeAnswer(req)));
    const { ai } = await gatewayOver(
      `upstreams:\n  s1: { kind: systemone, baseUrl: "${systemOne.url}", images: true, maxRetries: 0 }\nroutes:\n  default: { upstreams: [s1] }\n`,
    );
    const jpeg = (await makeImage('jpeg', 20, 20)).toString('base64');
    const cases: [Decisions.CreateDecisionRequest['input'], string][] = [
      [
        [{ type: 'image', uri: 'https://example.com/a.png' }],
        'route default has no upstream that takes image URLs',
      ],
      [[{ type: 'image', mime_type: 'image/png', data: jpeg }], 'input.0.data'],
      [
        [{ type: 'image', mime_type: 'image/gif', data: jpeg }],
        'input.0.mime_type: must be image/png, image/jpeg or image/webp',
      ],
      [[{ type: 'image', mime_type: 'image/jpeg' }], 'an image content needs either data (base64) or a uri'],
    ];
    for (const [input, message] of cases) {
      const error = await raised(
        ai.decisions.create(
          { model: 'vendor/model-1.13', input, questions: { r: QUESTIONS.refund as Decisions.Question } },
          NO_RETRIES,
        ),
      );
      expect([error.status, error.body.gateway_code]).toEqual([400, 40001]);
      expect(error.body.error.message).toContain(message);
    }
    expect(systemOne.seen).toHaveLength(0);
  });

  it('an input a Gemini upstream blocked: 200 with its prompt_feedback and no answers, charged its usage', async () => {
    const google = await standIn((_req, res) => json(res, 200, blockedInput()));
    const { gw, key, ai } = await gatewayOver(
      `upstreams:\n${geminiUpstream(google.url)}routes:\n  default: { upstreams: [gemini] }\n`,
    );
    const data = await ai.decisions.create({
      model: 'vendor/model-1.13',
      input: INPUT,
      questions: QUESTIONS,
    });
    expect(data.answers).toBeUndefined();
    expect(data.prompt_feedback).toEqual({ block_reason: 'safety', block_reason_message: 'unsafe input' });
    expect(data.usage).toMatchObject({ total_input_tokens: 57, total_output_tokens: 0 });
    const usage = await gw.store.usage(key.id, 1);
    expect(usage.recent[0]).toMatchObject({ status: 200, inputTokens: 57 });
    expect(usage.totals.creditsMicro).toBeGreaterThan(0);
    // The REST door has no shape for a blocked input: every question declined is a 502 there.
    const rest = await post(
      gw.url,
      '/v1/systemone',
      {
        model: 'vendor/model-1.13',
        state: INPUT,
        questions: { r: { type: 'noul', instructions: 'Refund?' } },
      },
      bearer(key.key),
    );
    expect([rest.status, rest.body.code]).toEqual([502, 50200]);
    expect(rest.body.message).toContain('every upstream declined');
  });

  it('a blocked input is asked of the route’s next upstream first, which answers it', async () => {
    const google = await standIn((_req, res) => json(res, 200, blockedInput()));
    const backup = await standIn((req, res) => json(res, 200, googleAnswers(req)));
    const { ai } = await gatewayOver(
      `upstreams:\n${geminiUpstream(google.url)}${geminiUpstream(backup.url, 'backup')}routes:\n  default: { upstreams: [gemini, backup] }\n`,
    );
    const data = await ai.decisions.create({
      model: 'vendor/model-1.13',
      input: INPUT,
      questions: QUESTIONS,
    });
    expect(data.prompt_feedback).toBeUndefined();
    expect(Object.keys(data.answers ?? {})).toEqual(['refund', 'team', 'urgency']);
    expect(headersOf(data)['x-dg-upstream']).toBe('gemini+backup');
    expect(google.seen).toHaveLength(1);
    expect(backup.seen).toHaveLength(1);
  });

  it('a question an upstream declined makes the request 502, as on REST', async () => {
    const openAi = await standIn((req, res) =>
      json(
        res,
        200,
        decision(req.body, (question) => ({ type: 'refusal', name: question.name ?? null })),
      ),
    );
    const { ai } = await gatewayOver(
      `upstreams:\n  oa: { kind: openai-decisions, baseUrl: "${openAi.url}", model: gpt-5-mini, maxRetries: 0 }\nroutes:\n  default: { upstreams: [oa] }\n`,
    );
    const error = await raised(
      ai.decisions.create(
        {
          model: 'vendor/model-1.13',
          input: INPUT,
          questions: { r: QUESTIONS.refund as Decisions.Question },
        },
        NO_RETRIES,
      ),
    );
    expect([error.status, error.body.gateway_code, error.body.error.status]).toEqual([
      502,
      50200,
      'INTERNAL',
    ]);
    expect(error.body.error.message).toContain('every upstream declined the questions "r"');
  });

  it('images past IMAGE_BYTES_IN_FLIGHT: 503 UNAVAILABLE with retry-after, in Google’s shape', async () => {
    const google = await standIn((req, res) => json(res, 200, googleAnswers(req)));
    const { gw, key } = await gatewayOver(
      `upstreams:\n${geminiUpstream(google.url)}routes:\n  default: { upstreams: [gemini] }\n`,
      { imageBytesInFlight: 1000 },
    );
    const png = (await makeImage('png', 64, 64, { noise: true })).toString('base64');
    const sent = await post(
      gw.url,
      '/gemini/v1beta/decisions',
      {
        model: 'vendor/model-1.13',
        input: [{ type: 'image', mime_type: 'image/png', data: png }],
        questions: { r: QUESTIONS.refund },
      },
      { 'x-goog-api-key': key.key },
    );
    expect([sent.status, sent.body.gateway_code, sent.body.error]).toEqual([
      503,
      50300,
      { code: 503, status: 'UNAVAILABLE', message: expect.any(String) },
    ]);
    expect(sent.headers.get('retry-after')).toBe('1');
    expect(google.seen).toHaveLength(0);
  });
});
