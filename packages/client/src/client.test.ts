import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { failure } from '@decision-gateway/contract';
import { createLexicalUpstream, type Upstream } from '@decision-gateway/questions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway } from '../test/real-gateway.ts';
import {
  box,
  choice,
  createGatewayClient,
  GatewayError,
  GatewayNetworkError,
  image,
  noul,
  score,
} from './index.ts';

describe('createGatewayClient against a real gateway', () => {
  let gw: Awaited<ReturnType<typeof startGateway>>;
  beforeAll(async () => {
    gw = await startGateway();
  });
  afterAll(() => gw.close());

  it('evaluates with builders, defaulting the model, and returns typed answers', async () => {
    const client = createGatewayClient({ url: gw.url, apiKey: gw.key });
    const { result, creditsUsed, review } = await client.evaluate({
      state: 'I was charged twice for my order. Please refund the double charge.',
      questions: {
        team: choice('Which team should handle this?', {
          billing: 'payments, refunds',
          technical: 'bugs, crashes',
        }),
        urgency: score('How urgent is it?', ['not urgent', 'soon', 'now']),
        refund: noul('Is this a refund request?'),
      },
    });
    expect(result.model).toBe('vendor/model-1.13');
    expect(result.answers.team.choice).toBe('billing');
    expect(result.answers.team.probabilities.billing).toBeGreaterThan(
      result.answers.team.probabilities.technical,
    );
    expect(Object.keys(result.answers.urgency.probabilities)).toEqual(['0', '1', '2']);
    expect(result.answers.urgency.legend['0']).toBe('not urgent');
    expect(result.answers.refund.noul).toBeGreaterThan(0.5);
    expect(result.usage.input_tokens).toBeGreaterThan(0);
    expect(creditsUsed).toBe(result.usage.input_tokens / 1000);
    // The default route reviews nothing.
    expect(review).toEqual([]);
  });

  it('sends route as x-dg-route and reads meta from the response headers', async () => {
    const client = createGatewayClient({ url: gw.url, apiKey: gw.key });
    const questions = { refund: noul('Is this a refund request?') };
    const { meta } = await client.evaluate({ state: 'Refund me, please.', questions });
    expect(meta).toEqual({
      requestId: expect.stringMatching(/^req_/),
      route: 'default',
      upstream: 'lexical',
      cache: null,
    });
    const refused = await client.evaluate({ state: 'x', questions, route: 'nope' }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(GatewayError);
    expect(refused).toMatchObject({ code: 40004, type: 'unknown_route', status: 400 });
  });

  it('records a decision’s outcomes, replaces them when sent again, and refuses a truth that does not fit', async () => {
    const client = createGatewayClient({ url: gw.url, apiKey: gw.key });
    const decision = await client.evaluate({
      state: 'I was charged twice. Please refund me.',
      questions: {
        team: choice('Which team?', { billing: null, technical: null }),
        urgency: score('How urgent?', ['low', 'mid', 'high']),
        refund: noul('Is this a refund request?'),
      },
    });
    expect(await client.recordOutcome(decision, { team: 'billing', urgency: 2, refund: true })).toEqual({
      recorded: 3,
      replaced: 0,
    });
    expect(await client.recordOutcome(decision.meta.requestId, { refund: false })).toEqual({
      recorded: 1,
      replaced: 1,
    });
    const wrong = await client
      .recordOutcome(decision.meta.requestId, { team: 'sales' })
      .catch((e: unknown) => e);
    expect(wrong).toBeInstanceOf(GatewayError);
    expect(wrong).toMatchObject({ code: 40001, issues: [{ path: ['outcomes', 'team'] }] });
    const unknown = await client.recordOutcome('req_unknown', { team: 'billing' }).catch((e: unknown) => e);
    expect(unknown).toMatchObject({ code: 40400, status: 404 });
  });

  it('lists models and exposes the raw tRPC proxy', async () => {
    const client = createGatewayClient({ url: `${gw.url}/`, apiKey: gw.key });
    expect((await client.listModels()).models[0]?.name).toBe('vendor/model-1.13');
    expect((await client.trpc.models.query()).models).toHaveLength(1);
  });

  it('rejects with GatewayError carrying code, type, status, issues and requestId', async () => {
    const client = createGatewayClient({ url: gw.url, apiKey: gw.key });
    const error = await client
      .evaluate({ state: 's', questions: { team: choice(null, { only: null }) } })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GatewayError);
    expect(error).not.toBeInstanceOf(GatewayNetworkError);
    expect(error).toMatchObject({
      code: 40001,
      type: 'invalid_request',
      status: 400,
      message: 'questions.team.criteria: a choice needs at least 2 options',
      issues: [{ path: ['questions', 'team', 'criteria'], message: 'a choice needs at least 2 options' }],
      requestId: expect.stringMatching(/^req_/),
    });

    const unauthenticated = createGatewayClient({ url: gw.url });
    await expect(unauthenticated.listModels()).rejects.toMatchObject({
      code: 40100,
      status: 401,
      type: 'missing_api_key',
    });
    const wrongKey = createGatewayClient({ url: gw.url, apiKey: 'dg_wrong' });
    await expect(wrongKey.evaluate({ state: 's', questions: { q: noul('x') } })).rejects.toMatchObject({
      code: 40101,
    });
  });

  it('uses the given fetch and headers', async () => {
    const seen: Headers[] = [];
    const client = createGatewayClient({
      url: gw.url,
      apiKey: gw.key,
      headers: { 'x-caller': 'tests' },
      fetch: (input, init) => {
        seen.push(new Headers(init?.headers));
        return fetch(input, init);
      },
    });
    await client.listModels();
    expect(seen).toHaveLength(1);
    expect(seen[0]?.get('x-caller')).toBe('tests');
    expect(seen[0]?.get('authorization')).toBe(`Bearer ${gw.key}`);
  });
});

describe('transport failures', () => {
  it('a closed port is a GatewayNetworkError', async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    await new Promise((resolve) => server.close(resolve));
    const client = createGatewayClient({ url: `http://127.0.0.1:${port}`, apiKey: 'dg_x' });
    const error = await client.listModels().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GatewayNetworkError);
    expect(error).toMatchObject({ code: 0, status: 0, type: 'network_error' });
  });

  it('a server that is not a gateway is a GatewayNetworkError naming its status', async () => {
    const server: Server = createServer((_req, res) => {
      res.writeHead(502, { 'content-type': 'text/html' }).end('<h1>Bad Gateway</h1>');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const client = createGatewayClient({ url: `http://127.0.0.1:${port}`, apiKey: 'dg_x' });
      const error = await client.listModels().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(GatewayNetworkError);
      expect(error).toMatchObject({ type: 'invalid_response', status: 502 });
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('retries for 429 and 503', () => {
  /** An upstream that is unavailable for its first `failures` calls, asking for a 50 ms wait. */
  function flakyUpstream(failures: number): Upstream & { calls: number } {
    const lexical = createLexicalUpstream();
    const upstream = {
      name: 'flaky',
      calls: 0,
      usageBound: lexical.usageBound,
      async answer(call: Parameters<Upstream['answer']>[0]) {
        upstream.calls++;
        if (upstream.calls <= failures) {
          return { ok: false as const, failure: failure('unavailable', 'busy', { retryAfterMs: 50 }) };
        }
        return lexical.answer(call);
      },
    };
    return upstream;
  }

  it('are off by default', async () => {
    const upstream = flakyUpstream(1);
    const gw = await startGateway(upstream);
    try {
      const client = createGatewayClient({ url: gw.url, apiKey: gw.key });
      await expect(client.evaluate({ state: 's', questions: { q: noul('x') } })).rejects.toMatchObject({
        code: 50300,
        retryAfterMs: 50,
      });
      expect(upstream.calls).toBe(1);
    } finally {
      await gw.close();
    }
  });

  it('retry up to maxRetries, waiting retryAfterMs, then succeed', async () => {
    const upstream = flakyUpstream(2);
    const gw = await startGateway(upstream);
    try {
      const client = createGatewayClient({ url: gw.url, apiKey: gw.key, retry: { maxRetries: 2 } });
      const started = performance.now();
      const { result } = await client.evaluate({ state: 's', questions: { q: noul('x') } });
      expect(result.answers.q.type).toBe('noul');
      expect(upstream.calls).toBe(3);
      expect(performance.now() - started).toBeGreaterThanOrEqual(100);
    } finally {
      await gw.close();
    }
  });

  it('give up after maxRetries with the last error, and never retry other errors', async () => {
    const upstream = flakyUpstream(10);
    const gw = await startGateway(upstream);
    try {
      const client = createGatewayClient({ url: gw.url, apiKey: gw.key, retry: { maxRetries: 1 } });
      await expect(client.evaluate({ state: 's', questions: { q: noul('x') } })).rejects.toMatchObject({
        code: 50300,
      });
      expect(upstream.calls).toBe(2);
      await expect(client.evaluate({ state: 's', questions: {} })).rejects.toMatchObject({ code: 40002 });
      expect(upstream.calls).toBe(2);
    } finally {
      await gw.close();
    }
  });
});

describe('a fetch that fails', () => {
  it('names CORS as the likely cause in a browser instead of claiming the gateway is down', async () => {
    const g = globalThis as { location?: unknown };
    g.location = { origin: 'https://app.example.com' };
    try {
      const client = createGatewayClient({
        url: 'http://127.0.0.1:9',
        token: 'dgt_t',
        // What a browser's fetch does when CORS withholds an answer.
        fetch: async () => {
          throw new TypeError('Failed to fetch');
        },
      });
      const error = await client
        .evaluate({ state: 's', questions: { q: noul('yes?') } })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(GatewayNetworkError);
      const message = (error as Error).message;
      expect(message).toContain('CORS');
      expect(message).toContain('https://app.example.com');
      expect(message).not.toContain('could not reach');
    } finally {
      delete g.location;
    }
  });
});

describe('browser guard', () => {
  it('refuses an API key in a browser-like environment unless dangerouslyAllowBrowser is set', () => {
    const g = globalThis as { window?: unknown };
    g.window = { document: {} };
    try {
      expect(() => createGatewayClient({ url: 'http://x', apiKey: 'dg_k' })).toThrow(/trusted server/);
      expect(() =>
        createGatewayClient({ url: 'http://x', apiKey: 'dg_k', dangerouslyAllowBrowser: true }),
      ).not.toThrow();
      expect(() => createGatewayClient({ url: 'http://x' })).not.toThrow();
      // Tokens are made for browsers: no guard.
      expect(() => createGatewayClient({ url: 'http://x', token: 'dgt_t' })).not.toThrow();
    } finally {
      delete g.window;
    }
    expect(() => createGatewayClient({ url: 'http://x', apiKey: 'dg_k' })).not.toThrow();
  });
});

describe('the README example', () => {
  it('is packages/client/examples/quickstart.ts as it stands', async () => {
    const { readFileSync } = await import('node:fs');
    const read = (path: string) => readFileSync(new URL(path, import.meta.url), 'utf8');
    const example = read('../examples/quickstart.ts').trimEnd();
    const blocks = [...read('../../../README.md').matchAll(/```ts\n([\s\S]*?)\n```/g)].map((m) => m[1]);
    expect(blocks).toContain(example);
  });

  it('runs against a real gateway and prints typed answers', async () => {
    const { execFile } = await import('node:child_process');
    const { promisify } = await import('node:util');
    const gw = await startGateway();
    try {
      const packageDir = new URL('..', import.meta.url).pathname;
      const { stdout } = await promisify(execFile)('pnpm', ['--silent', 'example'], {
        cwd: packageDir,
        env: { ...process.env, DG_URL: gw.url, DG_API_KEY: gw.key },
      });
      expect(stdout).toContain('team: billing');
      expect(stdout).toMatch(/refund request: \d+%/);
      expect(stdout).toMatch(/\d+ input tokens, [\d.]+ credits/);
    } finally {
      await gw.close();
    }
  });
});

describe('tokens', () => {
  it('mints a token with an API key, then evaluates with it, fetching it again once after it expired', async () => {
    let now = Date.now();
    const gw = await startGateway(createLexicalUpstream(), () => now);
    try {
      const server = createGatewayClient({ url: gw.url, apiKey: gw.key });
      let minted = 0;
      const browser = createGatewayClient({
        url: gw.url,
        token: async () => {
          minted++;
          return (await server.createToken({ ttlSeconds: 60, subject: 'visitor' })).token;
        },
      });
      const questions = { refund: noul('Is this a refund request?') };
      expect((await browser.evaluate({ state: 'Refund me', questions })).result.answers.refund.type).toBe(
        'noul',
      );
      await browser.evaluate({ state: 'Refund me again', questions });
      expect(minted).toBe(1);
      now += 61_000;
      const after = await browser.evaluate({ state: 'Refund me later', questions });
      expect(after.creditsUsed).toBeGreaterThan(0);
      expect(minted).toBe(2);
    } finally {
      await gw.close();
    }
  });

  it('reports a token that stays expired, and a token that may not mint', async () => {
    let now = Date.now();
    const gw = await startGateway(createLexicalUpstream(), () => now);
    try {
      const server = createGatewayClient({ url: gw.url, apiKey: gw.key });
      const { token } = await server.createToken({ ttlSeconds: 10 });
      now += 11_000;
      const browser = createGatewayClient({ url: gw.url, token });
      const error = await browser
        .evaluate({ state: 's', questions: { q: noul('yes?') } })
        .catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 40101, message: 'the token has expired' });
      const fresh = await server.createToken();
      const refused = await createGatewayClient({ url: gw.url, token: fresh.token })
        .createToken()
        .catch((e: unknown) => e);
      expect(refused).toMatchObject({ code: 40300, type: 'forbidden', status: 403 });
    } finally {
      await gw.close();
    }
  });
});

describe('images and the box question (docs/images.md)', () => {
  // A 4×4 PNG, as a browser's File would give it.
  const png = Uint8Array.from(
    atob(
      'iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAACXBIWXMAAAPoAAAD6AG1e1JrAAAAEElEQVR42mOoiLKBIwbiOAC6wxDhrfkH8gAAAABJRU5ErkJggg==',
    ),
    (c) => c.charCodeAt(0),
  );
  /** An upstream that sees images: it answers a box, and says what it was shown. */
  const seen: { refs: string[]; formats: string[] }[] = [];
  const vision: Upstream = {
    name: 'vision',
    capabilities: { images: true, imageUrls: false, box: true, maxImages: 32 },
    usageBound: () => ({ input_tokens: 2_000, output_tokens: 0 }),
    async answer({ request, images }) {
      seen.push({
        refs: (images ?? []).map((i) => i.ref),
        formats: (images ?? []).map((i) =>
          i.source === 'bytes' ? `${i.format} ${i.width}×${i.height}` : 'url',
        ),
      });
      const answers: Record<string, unknown> = {};
      for (const [id, q] of Object.entries(request.questions))
        answers[id] =
          q.type === 'box'
            ? { type: 'box', box: { top: 0.2, bottom: 0.4, left: 0.1, right: 0.3 }, confidence: 0.7 }
            : { type: 'noul', noul: 0.8 };
      return { ok: true, answers, usage: { input_tokens: 50, output_tokens: 0 } };
    },
  };

  it('image(bytes) reads the format from the bytes; box() asks where, and its answer comes back typed', async () => {
    const gw = await startGateway(vision);
    try {
      const client = createGatewayClient({ url: gw.url, apiKey: gw.key });
      const asset = image(png);
      expect(asset.format).toBe('png');
      const { result } = await client.evaluate({
        state: 'The parcel in photo-1.',
        questions: { dent: box('Where is the dent in photo-1?'), damaged: noul('Is photo-1 damaged?') },
        assets: { 'photo-1': asset },
      });
      expect(result.answers.dent.box).toEqual({ top: 0.2, bottom: 0.4, left: 0.1, right: 0.3 });
      expect(result.answers.dent.confidence).toBe(0.7);
      expect(seen.at(-1)).toEqual({ refs: ['photo-1'], formats: ['png 4×4'] });
    } finally {
      await gw.close();
    }
  });

  it('image() refuses bytes that are no PNG, JPEG or WebP, before anything is sent', () => {
    expect(() => image(new TextEncoder().encode('GIF89a, or so it says'))).toThrow(/image\(\): /);
  });

  it('a box question without an image is refused by the gateway, at its path', async () => {
    const gw = await startGateway(vision);
    try {
      const client = createGatewayClient({ url: gw.url, apiKey: gw.key });
      await expect(
        client.evaluate({ state: 'text', questions: { dent: box('Where?') } }),
      ).rejects.toMatchObject({
        code: 40001,
        issues: [{ path: ['questions', 'dent'], message: 'a box question needs an image in the request' }],
      });
    } finally {
      await gw.close();
    }
  });
});
