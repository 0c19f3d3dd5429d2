import { createServer, type Server } from 'node:net';
import { MODEL_ID } from '@decision-gateway/contract';
import OpenAI from 'openai';
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
import { answerDecision } from './openai-decisions-stand-in.ts';
import { jev114Answer, json, type StandIn, startStandIn } from './stand-in-upstream.ts';
import { inlineAsset, makeImage } from './support/images.ts';

// docs/images.md: the other doors (OpenAI's, /native, tRPC), what an image costs in memory, what
// the gateway writes about one (never the image), the decision cache, and the box question.

describe('images through the OpenAI door (the official openai SDK), /native and tRPC', () => {
  let gw: TestGateway;
  let seer: StandIn;
  let openai: StandIn;
  let jpeg: Buffer;
  /** Something listening where an image URL points: the gateway must never connect to it. */
  let lure: Server;
  let lureConnections = 0;
  let lurePort: number;

  beforeAll(async () => {
    jpeg = await makeImage('jpeg', 120, 90);
    seer = await startStandIn((request, res) => json(res, 200, jev114Answer(request)));
    openai = await startStandIn((request, res) => answerDecision(request, res));
    lure = createServer((socket) => {
      lureConnections++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => lure.listen(0, '127.0.0.1', resolve));
    lurePort = (lure.address() as { port: number }).port;
    gw = await startGateway({
      routes: configuredRoutes(
        [
          'upstreams:',
          `  seer: { kind: systemone, baseUrl: "${seer.url}", images: true }`,
          `  luna: { kind: openai-decisions, baseUrl: "${openai.url}/v1", model: gpt-6-luna }`,
          'routes:',
          '  default: { upstreams: [seer] }',
          '  openai: { upstreams: [luna] }',
        ].join('\n'),
      ),
    });
  });
  afterAll(async () => {
    await gw.close();
    await seer.close();
    await openai.close();
    await new Promise((resolve) => lure.close(resolve));
  });

  const client = (key: string) => new OpenAI({ apiKey: key, baseURL: `${gw.url}/openai/v1`, maxRetries: 0 });

  it('an input_image data URL reaches a System One upstream as the asset image-0, its place in the state as [image-0]', async () => {
    const key = await gw.createKey();
    const decision = await client(key.key).decisions.create({
      model: MODEL_ID,
      input: [
        {
          role: 'user',
          content: [
            { type: 'input_text', text: 'The parcel as delivered:' },
            {
              type: 'input_image',
              image_url: `data:image/jpeg;base64,${jpeg.toString('base64')}`,
              detail: 'high',
            },
          ],
        },
      ],
      questions: [{ type: 'predicate', name: 'damaged', instructions: 'Is the parcel damaged?' }],
    });
    expect(decision.answers[0]).toMatchObject({ type: 'predicate', name: 'damaged' });
    const sent = seer.seen.at(-1);
    expect(sent?.headers['typesafe-danger-zone-images']).toBe('true');
    expect(sent?.body.assets).toEqual({
      'image-0': { type: 'image', format: 'jpeg', data_base64: jpeg.toString('base64') },
    });
    expect(JSON.stringify(sent?.body.state)).toContain('[image-0]');
  });

  it('an openai-decisions upstream is sent the caller’s request as written, image parts and all', async () => {
    const key = await gw.createKey();
    const part = {
      type: 'input_image' as const,
      image_url: `data:image/jpeg;base64,${jpeg.toString('base64')}`,
    };
    await client(key.key).decisions.create(
      {
        model: MODEL_ID,
        input: [{ role: 'user', content: [{ type: 'input_text', text: 'Parcel:' }, part] }],
        questions: [
          {
            type: 'predicate',
            name: 'damaged',
            instructions: [{ type: 'input_text', text: 'Damaged?' }, part],
          },
        ],
      },
      { headers: { 'x-dg-route': 'openai' } },
    );
    const sent = openai.seen.at(-1)?.body;
    expect(sent.input[0].content[1]).toEqual(part);
    expect(sent.questions[0].instructions[1]).toEqual(part);
  });

  it('a REST request with an asset reaches openai-decisions as input_image parts, each after "Image <ref>:"', async () => {
    const key = await gw.createKey();
    const res = await post(
      gw.url,
      '/v1/systemone',
      {
        model: MODEL_ID,
        state: 'See photo-1.',
        questions: { damaged: { type: 'noul', instructions: 'Is the parcel in photo-1 damaged?' } },
        assets: { 'photo-1': inlineAsset('jpeg', jpeg) },
      },
      { ...bearer(key.key), 'x-dg-route': 'openai' },
    );
    expect(res.status).toBe(200);
    expect(openai.seen.at(-1)?.body.input).toEqual([
      {
        role: 'user',
        content: [
          { type: 'input_text', text: 'See photo-1.' },
          { type: 'input_text', text: 'Image photo-1:' },
          { type: 'input_image', image_url: `data:image/jpeg;base64,${jpeg.toString('base64')}` },
        ],
      },
    ]);
  });

  it('an https image URL goes only to an upstream that fetches it, and the gateway never connects to its host', async () => {
    const key = await gw.createKey();
    const url = `https://127.0.0.1:${lurePort}/parcel.jpg`;
    const message = { role: 'user' as const, content: [{ type: 'input_image' as const, image_url: url }] };
    const questions = [{ type: 'predicate' as const, name: 'damaged', instructions: 'Is it damaged?' }];
    const refused = await client(key.key)
      .decisions.create({ model: MODEL_ID, input: [message], questions })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect((refused as InstanceType<typeof OpenAI.BadRequestError>).message).toContain(
      'route default has no upstream that takes image URLs',
    );
    await client(key.key).decisions.create(
      { model: MODEL_ID, input: [message], questions },
      { headers: { 'x-dg-route': 'openai' } },
    );
    expect(openai.seen.at(-1)?.body.input[0].content[0].image_url).toBe(url);
    expect(lureConnections).toBe(0);
    // Nor is the URL written anywhere: logs, usage.
    expect(gw.logs.join('\n')).not.toContain(`${lurePort}/parcel.jpg`);
    expect(JSON.stringify(await gw.store.usage(key.id, 10))).not.toContain('parcel.jpg');
  });

  it('an http (not https) URL, and a 129th image, are refused at their paths', async () => {
    const key = await gw.createKey();
    const plain = await post(
      gw.url,
      '/openai/v1/decisions',
      {
        model: MODEL_ID,
        input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'http://example.com/a.png' }] }],
        questions: [{ type: 'predicate', instructions: 'x' }],
      },
      { ...bearer(key.key), 'x-dg-route': 'openai' },
    );
    expect(plain.status).toBe(400);
    expect(plain.body.error.param).toBe('input.0.content.0.image_url');
    expect(plain.body.error.message).toContain('must be an https:// URL');
    const tiny = `data:image/jpeg;base64,${jpeg.toString('base64')}`;
    const many = await post(
      gw.url,
      '/openai/v1/decisions',
      {
        model: MODEL_ID,
        input: [
          {
            role: 'user',
            content: Array.from({ length: 129 }, () => ({ type: 'input_image', image_url: tiny })),
          },
        ],
        questions: [{ type: 'predicate', instructions: 'x' }],
      },
      { ...bearer(key.key), 'x-dg-route': 'openai' },
    );
    expect(many.status).toBe(400);
    expect(many.body.error.param).toBe('input.0.content.128');
    expect(many.body.error.message).toContain('at most 128 images');
  });

  it('/native takes assets in its JSON beyond 32 KiB, keeping 32 KiB for the rest', async () => {
    const key = await gw.createKey();
    const big = await makeImage('png', 300, 300, { noise: true });
    const request = {
      model: MODEL_ID,
      state: { photo: 'p1' },
      questions: { damaged: { type: 'noul', instructions: 'Is the parcel in photo damaged?' } },
      assets: { p1: inlineAsset('png', big) },
    };
    expect(JSON.stringify(request).length).toBeGreaterThan(100_000);
    const served = await post(gw.url, '/native/v1/systemone', request, bearer(key.key));
    expect(served.status).toBe(200);
    expect(served.body.answers.damaged.type).toBe('noul');
    const wordy = await post(
      gw.url,
      '/native/v1/systemone',
      { ...request, state: 'x'.repeat(40_000) },
      bearer(key.key),
    );
    expect(wordy.status).toBe(413);
    expect(wordy.body.detail.code).toBe(41300);
    expect(wordy.body.detail.message).toContain('without its image data');
  });
});

describe('memory, privacy and the cache', () => {
  let gw: TestGateway;
  let seer: StandIn;
  /** Answers wait for the test's word, holding their requests in flight. */
  let release: () => void = () => {};
  let held = false;

  beforeAll(async () => {
    seer = await startStandIn(async (request, res) => {
      if (held) await new Promise<void>((resolve) => (release = resolve));
      json(res, 200, jev114Answer(request));
    });
    gw = await startGateway({
      // Each image counts five times its size (docs/images.md#memory): one ~530 KB image fits, a second does not.
      imageBytesInFlight: 4_194_304,
      cache: (await import('../src/cache/memory-cache.ts')).createMemoryCache({ maxBytes: 1_000_000 }),
      routes: configuredRoutes(
        `upstreams:\n  seer: { kind: systemone, baseUrl: "${seer.url}", images: true }\nroutes:\n  default: { upstreams: [seer], cache: { ttlSeconds: 60 } }\n`,
      ),
    });
  });
  afterAll(async () => {
    await gw.close();
    await seer.close();
  });

  const request = () => ({
    model: MODEL_ID,
    state: { photo: 'p1' },
    questions: { damaged: { type: 'noul', instructions: 'Is the parcel in photo damaged?' } },
    assets: { p1: { type: 'image', part: 'photo' } },
  });
  const multipart = (bytes: Buffer, key: string, extra: Record<string, string> = {}) => {
    const form = new FormData();
    form.set('request', JSON.stringify(request()));
    form.set('photo', new Blob([bytes]), 'photo.png');
    return fetch(`${gw.url}/v1/systemone`, {
      method: 'POST',
      headers: { ...bearer(key), ...extra },
      body: form,
    });
  };

  it('past IMAGE_BYTES_IN_FLIGHT: 503 with Retry-After 1, nothing charged, one usage record; then room again', async () => {
    const big = await makeImage('png', 420, 420, { noise: true });
    expect(big.length).toBeGreaterThan(524_288);
    const key = await gw.createKey({ credits: 10 });
    held = true;
    const first = multipart(big, key.key, { 'cache-control': 'no-store' });
    await expect.poll(() => seer.seen.length, { timeout: 20_000 }).toBe(1);
    const second = await multipart(big, key.key, { 'cache-control': 'no-store' });
    expect(second.status).toBe(503);
    expect(second.headers.get('retry-after')).toBe('1');
    expect(((await second.json()) as { code: number }).code).toBe(50300);
    held = false;
    release();
    expect((await first).status).toBe(200);
    const usage = await gw.store.usage(key.id, 10);
    expect(usage.totals.requests).toBe(2);
    const after = await gw.keys.get(key.id);
    expect(after.ok && after.value.credits).toBeCloseTo(10 - 0.412, 9);
    // The first request's bytes were given back: the same image fits again.
    expect((await multipart(big, key.key, { 'cache-control': 'no-store' })).status).toBe(200);
  });

  it('an image is part of the cached decision: the same image hits, another one misses', async () => {
    const key = await gw.createKey();
    const [one, other] = await Promise.all([makeImage('png', 40, 40), makeImage('png', 41, 40)]);
    expect((await multipart(one, key.key)).headers.get('x-dg-cache')).toBe('miss');
    expect((await multipart(one, key.key)).headers.get('x-dg-cache')).toBe('hit');
    expect((await multipart(other, key.key)).headers.get('x-dg-cache')).toBe('miss');
  });

  it('writes no image bytes and no image URL anywhere: logs, usage, decision records, metrics', async () => {
    const key = await gw.createKey();
    const photo = await makeImage('jpeg', 64, 64, { noise: true });
    const res = await multipart(photo, key.key, { 'cache-control': 'no-store' });
    const body = (await res.json()) as { requestId: string };
    const base64 = photo.toString('base64');
    // Any 40 characters from the middle of the image's base64 would betray it.
    const probe = base64.slice(base64.length / 2, base64.length / 2 + 40);
    const written = [
      gw.logs.join('\n'),
      JSON.stringify(await gw.store.usage(key.id, 100)),
      JSON.stringify(await gw.store.findDecision(body.requestId)),
      await (await fetch(`${gw.url}/metrics`)).text(),
      (await get(gw.url, `/admin/keys/${key.id}/usage`, bearer(ADMIN_TOKEN))).text,
    ].join('\n');
    expect(written).toContain(body.requestId);
    expect(written).not.toContain(probe);
    expect(written).not.toContain(photo.toString('hex').slice(200, 240));
  });
});
