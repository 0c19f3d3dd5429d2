import { createHash } from 'node:crypto';
import { connect } from 'node:net';
import { MODEL_ID } from '@decision-gateway/contract';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { bearer, configuredRoutes, post, startGateway, type TestGateway } from './harness.ts';
import { jev114Answer, json, type StandIn, startStandIn } from './stand-in-upstream.ts';
import { inlineAsset, makeImage } from './support/images.ts';

// docs/images.md: images on every door that takes them, checked from their bytes, asked only of
// the upstreams that can see them, billed per image, and never written anywhere but upstream.

const parcelRequest = (assets: Record<string, unknown>, questions?: Record<string, unknown>) => ({
  model: MODEL_ID,
  state: { note: 'Customer says the parcel arrived crushed.', photo: 'photo-7f3a' },
  questions: questions ?? {
    damaged: { type: 'noul', instructions: 'Is the parcel in `photo` damaged?' },
  },
  assets,
});

describe('images through the REST door (JSON and multipart), to a System One upstream that sees them', () => {
  let gw: TestGateway;
  let seer: StandIn;
  let png: Buffer;
  let jpeg: Buffer;
  let webp: Buffer;

  beforeAll(async () => {
    [png, jpeg, webp] = await Promise.all([
      makeImage('png', 640, 480),
      makeImage('jpeg', 300, 200),
      makeImage('webp', 90, 30),
    ]);
    seer = await startStandIn((request, res) => json(res, 200, jev114Answer(request)));
    gw = await startGateway({
      routes: configuredRoutes(
        [
          'upstreams:',
          `  seer: { kind: systemone, baseUrl: "${seer.url}", model: jev-1.14.0, images: true }`,
          '  blind: { kind: lexical }',
          'routes:',
          '  default: { upstreams: [blind, seer] }',
          '  textonly: { upstreams: [blind] }',
        ].join('\n'),
      ),
    });
  });
  afterAll(async () => {
    await gw.close();
    await seer.close();
  });

  it('a JSON body with an asset is asked only of the upstream that sees images, which gets it as sent and the images header', async () => {
    const key = await gw.createKey();
    const res = await post(
      gw.url,
      '/v1/systemone',
      parcelRequest({ 'photo-7f3a': inlineAsset('png', png) }),
      bearer(key.key),
    );
    expect(res.status).toBe(200);
    expect(res.headers.get('x-dg-upstream')).toBe('seer');
    const sent = seer.seen.at(-1);
    expect(sent?.headers['typesafe-danger-zone-images']).toBe('true');
    expect(sent?.body.assets).toEqual({
      'photo-7f3a': { type: 'image', format: 'png', data_base64: png.toString('base64') },
    });
    expect(sent?.body.state).toEqual({
      note: 'Customer says the parcel arrived crushed.',
      photo: 'photo-7f3a',
    });
  });

  it('a text-only request still goes to the first upstream and carries no images header', async () => {
    const key = await gw.createKey();
    const before = seer.seen.length;
    const res = await post(
      gw.url,
      '/v1/systemone',
      { model: MODEL_ID, state: 'a parcel', questions: { q: { type: 'noul', instructions: 'parcel?' } } },
      bearer(key.key),
    );
    expect(res.status).toBe(200);
    expect(res.headers.get('x-dg-upstream')).toBe('blind');
    expect(seer.seen.length).toBe(before);
  });

  it('multipart/form-data: a request part and a file part, as curl -F sends them', async () => {
    const key = await gw.createKey();
    const form = new FormData();
    form.set('request', JSON.stringify(parcelRequest({ 'photo-7f3a': { type: 'image', part: 'photo' } })));
    form.set('photo', new Blob([jpeg], { type: 'image/png' }), 'photo.jpg');
    const response = await fetch(`${gw.url}/v1/systemone`, {
      method: 'POST',
      headers: bearer(key.key),
      body: form,
    });
    const body: any = await response.json();
    expect(response.status).toBe(200);
    expect(body.code).toBe(0);
    // The format is read from the bytes, whatever the part's own Content-Type claimed.
    expect(seer.seen.at(-1)?.body.assets['photo-7f3a']).toEqual({
      type: 'image',
      format: 'jpeg',
      data_base64: jpeg.toString('base64'),
    });
  });

  it('curl -F request=@decision.json -F photo=@photo.webp works as the docs say', async () => {
    const { execFile } = await import('node:child_process');
    const { promisify } = await import('node:util');
    const { mkdtempSync, rmSync, writeFileSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const dir = mkdtempSync(join(tmpdir(), 'dg-curl-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(
      join(dir, 'decision.json'),
      JSON.stringify(parcelRequest({ 'photo-7f3a': { type: 'image', part: 'photo' } })),
    );
    writeFileSync(join(dir, 'photo.webp'), webp);
    const key = await gw.createKey();
    // Asynchronously: the gateway answering curl runs in this very process.
    const { stdout: out } = await promisify(execFile)(
      'curl',
      [
        '-s',
        '-H',
        `Authorization: Bearer ${key.key}`,
        '-F',
        'request=@decision.json',
        '-F',
        'photo=@photo.webp',
        `${gw.url}/v1/systemone`,
      ],
      { cwd: dir, encoding: 'utf8' },
    );
    const body = JSON.parse(out);
    expect(body.code).toBe(0);
    expect(body.data.result.answers.damaged.type).toBe('noul');
    expect(seer.seen.at(-1)?.body.assets['photo-7f3a'].format).toBe('webp');
  });

  it("the README's photo example runs as written: its decision.json, then curl -F", async () => {
    const { execFile } = await import('node:child_process');
    const { promisify } = await import('node:util');
    const { mkdtempSync, readFileSync, rmSync, writeFileSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const readme = readFileSync(join(import.meta.dirname, '../../../README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('### A photo'));
    const block = /```sh\n([\s\S]*?)\n```/.exec(section)?.[1];
    expect(block).toContain('-F request=@decision.json -F photo=@parcel.jpg');
    const dir = mkdtempSync(join(tmpdir(), 'dg-readme-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, 'parcel.jpg'), jpeg);
    const key = await gw.createKey();
    const { stdout } = await promisify(execFile)(
      'bash',
      ['-c', (block as string).replace('localhost:8787', new URL(gw.url).host)],
      {
        cwd: dir,
        env: { ...process.env, DG_API_KEY: key.key },
      },
    );
    const body = JSON.parse(stdout);
    expect(body.code).toBe(0);
    expect(body.data.result.answers.damaged.type).toBe('noul');
    expect(body.data.result.answers.dent).toMatchObject({ type: 'box', box: { top: 0.1, bottom: 0.5 } });
  });

  it('a route none of whose upstreams sees images is refused before anything is charged, naming the route', async () => {
    const key = await gw.createKey({ credits: 5 });
    const res = await post(
      gw.url,
      '/v1/systemone',
      parcelRequest({ 'photo-7f3a': inlineAsset('png', png) }),
      {
        ...bearer(key.key),
        'x-dg-route': 'textonly',
      },
    );
    expect(res.status).toBe(400);
    expect(res.body.code).toBe(40001);
    expect(res.body.message).toContain('route textonly has no upstream that takes images');
    const after = await gw.keys.get(key.id);
    expect(after.ok && after.value.credits).toBe(5);
  });

  it('reserves, per image, 2 × ⌈w/28⌉ × ⌈h/28⌉ + 1024 tokens beside the body without its image data', async () => {
    // 640×480: 2 × 23 × 18 + 1024 = 1852 tokens. The body without the base64 counts as bytes, and
    // the question 256: at 1 credit per 1000 input tokens the bound is a little over 2.1 credits.
    const body = parcelRequest({ 'photo-7f3a': inlineAsset('png', png) });
    const text = JSON.stringify(body);
    const withoutData = Buffer.byteLength(text) - png.toString('base64').length;
    const bound = (withoutData + 1852 + 256) / 1000;
    const poor = await gw.createKey({ credits: Math.floor(bound * 1000) / 1000 - 0.001 });
    const refused = await post(gw.url, '/v1/systemone', text, bearer(poor.key));
    expect(refused.status).toBe(402);
    expect(refused.body.message).toContain(`may cost up to ${bound}`);
    const enough = await gw.createKey({ credits: Math.ceil(bound * 1000) / 1000 });
    const served = await post(gw.url, '/v1/systemone', text, bearer(enough.key));
    expect(served.status).toBe(200);
    // The debit is what the upstream reported: 412 input tokens.
    expect(served.headers.get('x-credits-used')).toBe('0.412');
  });

  it('keeps only {ref, format, width, height, sha256} of each image in the decision record', async () => {
    const key = await gw.createKey();
    const res = await post(
      gw.url,
      '/v1/systemone',
      parcelRequest({ 'photo-7f3a': inlineAsset('webp', webp) }),
      bearer(key.key),
    );
    expect(res.status).toBe(200);
    const record = await gw.store.findDecision(res.body.requestId);
    expect(record).toBeDefined();
    const [, images] = JSON.parse(record?.questions as string);
    expect(images).toEqual([
      {
        ref: 'photo-7f3a',
        format: 'webp',
        width: 90,
        height: 30,
        sha256: createHash('sha256').update(webp).digest('hex'),
      },
    ]);
  });

  it('counts images and their bytes in /metrics', async () => {
    const text = await (await fetch(`${gw.url}/metrics`)).text();
    expect(text).toMatch(/^dg_images_total [1-9]\d*$/m);
    expect(text).toMatch(/^dg_image_bytes_total [1-9]\d*$/m);
  });
});

describe('the rules every image is held to, each at its path', () => {
  let gw: TestGateway;
  let seer: StandIn;
  let key: string;
  const images: Record<string, Buffer> = {};

  beforeAll(async () => {
    const [png, jpeg, gif, wide] = await Promise.all([
      makeImage('png', 64, 64),
      makeImage('jpeg', 64, 64),
      makeImage('gif', 64, 64),
      makeImage('png', 9000, 4),
    ]);
    Object.assign(images, { png, jpeg, gif, wide });
    seer = await startStandIn((request, res) => json(res, 200, jev114Answer(request)));
    gw = await startGateway({
      routes: configuredRoutes(
        `upstreams:\n  seer: { kind: systemone, baseUrl: "${seer.url}", images: true }\nroutes:\n  default: { upstreams: [seer] }\n`,
      ),
    });
    key = (await gw.createKey()).key;
  });
  afterAll(async () => {
    await gw.close();
    await seer.close();
  });

  const refused = async (
    assets: Record<string, unknown>,
    path: (string | number)[],
    message: string | RegExp,
  ) => {
    const res = await post(gw.url, '/v1/systemone', parcelRequest(assets), bearer(key));
    expect(res.status).toBe(400);
    expect(res.body.code).toBe(40001);
    expect(res.body.error.issues).toContainEqual({ path, message: expect.stringMatching(message) });
  };

  it('a PNG header on JPEG bytes', async () => {
    const forged = Buffer.concat([
      (images.png as Buffer).subarray(0, 16),
      (images.jpeg as Buffer).subarray(2),
    ]);
    await refused(
      { 'photo-7f3a': inlineAsset('png', forged) },
      ['assets', 'photo-7f3a', 'data_base64'],
      /not a PNG, JPEG or WebP|px/,
    );
  });

  it('a format declared that the bytes contradict', async () => {
    await refused(
      { 'photo-7f3a': inlineAsset('png', images.jpeg as Buffer) },
      ['assets', 'photo-7f3a', 'data_base64'],
      'is declared png but its bytes are jpeg',
    );
  });

  it('truncated base64', async () => {
    const text = (images.png as Buffer).toString('base64');
    await refused(
      { 'photo-7f3a': { type: 'image', format: 'png', data_base64: text.slice(0, text.length - 3) } },
      ['assets', 'photo-7f3a', 'data_base64'],
      'is not valid standard base64',
    );
  });

  it('a side of 9000 px', async () => {
    await refused(
      { 'photo-7f3a': inlineAsset('png', images.wide as Buffer) },
      ['assets', 'photo-7f3a', 'data_base64'],
      '9000×4 px; each side must be 1–8192 px',
    );
  });

  it('a GIF', async () => {
    await refused(
      {
        'photo-7f3a': {
          type: 'image',
          format: 'png',
          data_base64: (images.gif as Buffer).toString('base64'),
        },
      },
      ['assets', 'photo-7f3a', 'data_base64'],
      'the bytes are a gif image; send PNG, JPEG or WebP',
    );
  });

  it('an asset the state, instructions and criteria never mention', async () => {
    await refused(
      {
        'photo-7f3a': inlineAsset('png', images.png as Buffer),
        'receipt-1': inlineAsset('png', images.png as Buffer),
      },
      ['assets', 'receipt-1'],
      'is mentioned nowhere in the state, instructions or criteria',
    );
  });

  it('a ref of characters outside [A-Za-z0-9_.-], and 33 assets', async () => {
    await refused(
      { 'photo 7f3a': inlineAsset('png', images.png as Buffer) },
      ['assets', 'photo 7f3a'],
      'an asset ref must be 1–64 characters',
    );
    const many = Object.fromEntries(
      Array.from({ length: 33 }, (_, i) => [`photo-7f3a${i}`, inlineAsset('png', images.png as Buffer)]),
    );
    await refused(many, ['assets'], 'takes at most 32 assets');
  });

  it('a part named in a JSON body, which has no parts', async () => {
    await refused(
      { 'photo-7f3a': { type: 'image', part: 'photo' } },
      ['assets', 'photo-7f3a', 'part'],
      'send the request as multipart/form-data',
    );
  });

  it('a box question in a request without an image', async () => {
    const res = await post(
      gw.url,
      '/v1/systemone',
      {
        model: MODEL_ID,
        state: 'text only',
        questions: { where: { type: 'box', instructions: 'Where is the dent?' } },
      },
      bearer(key),
    );
    expect(res.status).toBe(400);
    expect(res.body.error.issues).toContainEqual({
      path: ['questions', 'where'],
      message: 'a box question needs an image in the request',
    });
  });

  it('multipart: a file part no asset names, an asset naming a missing part, no request part', async () => {
    const form = new FormData();
    form.set('request', JSON.stringify(parcelRequest({ 'photo-7f3a': { type: 'image', part: 'photo' } })));
    form.set('extra', new Blob([images.png as Buffer]), 'extra.png');
    const res = await fetch(`${gw.url}/v1/systemone`, { method: 'POST', headers: bearer(key), body: form });
    const body: any = await res.json();
    expect(res.status).toBe(400);
    expect(body.error.issues).toContainEqual({ path: ['extra'], message: 'is a file part no asset names' });
    expect(body.error.issues).toContainEqual({
      path: ['assets', 'photo-7f3a', 'part'],
      message: 'names the part "photo", which the request does not have',
    });
    const empty = new FormData();
    empty.set('photo', new Blob([images.png as Buffer]), 'photo.png');
    const none = await fetch(`${gw.url}/v1/systemone`, { method: 'POST', headers: bearer(key), body: empty });
    expect(none.status).toBe(400);
    expect(((await none.json()) as any).error.issues).toContainEqual({
      path: ['request'],
      message: 'a multipart request needs a part named request holding the JSON body',
    });
  });

  it('an image over 16 MiB, as a multipart file part', async () => {
    const form = new FormData();
    form.set('request', JSON.stringify(parcelRequest({ 'photo-7f3a': { type: 'image', part: 'photo' } })));
    form.set('photo', new Blob([Buffer.alloc(17 * 1024 * 1024, 1)]), 'photo.png');
    const res = await fetch(`${gw.url}/v1/systemone`, { method: 'POST', headers: bearer(key), body: form });
    const body: any = await res.json();
    expect(res.status).toBe(400);
    expect(body.error.issues).toContainEqual({
      path: ['assets', 'photo-7f3a', 'part'],
      message: 'the image is larger than 16777216 bytes',
    });
  });

  it('multipart: a request part over 32768 bytes is 41300; a body that is not multipart at all is 40000', async () => {
    const form = new FormData();
    form.set('request', JSON.stringify({ ...parcelRequest({}), state: 'x'.repeat(40_000) }));
    const res = await fetch(`${gw.url}/v1/systemone`, { method: 'POST', headers: bearer(key), body: form });
    expect(res.status).toBe(413);
    expect(((await res.json()) as any).code).toBe(41300);
    const broken = await post(gw.url, '/v1/systemone', 'no parts here', {
      ...bearer(key),
      'content-type': 'multipart/form-data; boundary=xyz',
    });
    expect(broken.status).toBe(400);
    expect(broken.body.code).toBe(40000);
    expect(broken.body.message).toContain('the multipart body is malformed');
  });

  it('a JSON body over 32 KiB on the REST door stays 41300: larger images come as multipart', async () => {
    const big = await makeImage('png', 200, 200, { noise: true });
    const res = await post(
      gw.url,
      '/v1/systemone',
      parcelRequest({ 'photo-7f3a': inlineAsset('png', big) }),
      bearer(key),
    );
    expect(res.status).toBe(413);
    expect(res.body.code).toBe(41300);
  });

  it('a 40 MiB upload is cut at 32 MiB while it is read: the 413 arrives before the client has sent it all', async () => {
    const boundary = 'dgboundary';
    const head = Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="request"\r\n\r\n${JSON.stringify(parcelRequest({ 'photo-7f3a': { type: 'image', part: 'photo' } }))}\r\n--${boundary}\r\nContent-Disposition: form-data; name="photo"; filename="p.jpg"\r\nContent-Type: image/jpeg\r\n\r\n`,
    );
    const total = 40 * 1024 * 1024;
    const url = new URL(`${gw.url}/v1/systemone`);
    // A raw socket: what the gateway answers is read whatever happens to the rest of the upload.
    const outcome = await new Promise<{ status: number; body: string; sentWhenAnswered: number }>(
      (resolve) => {
        let sent = 0;
        let answer = '';
        let sentWhenAnswered = -1;
        const socket = connect(Number(url.port), url.hostname, () => {
          socket.write(
            `POST ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${key}\r\n` +
              `Content-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${total}\r\n\r\n`,
          );
          pump();
        });
        const chunk = Buffer.alloc(256 * 1024, 0x41);
        const pump = () => {
          while (sent < total && sentWhenAnswered < 0 && !socket.destroyed) {
            const next = sent === 0 ? head : chunk.subarray(0, Math.min(chunk.length, total - sent));
            sent += next.length;
            if (!socket.write(next)) return void socket.once('drain', pump);
          }
        };
        socket.on('data', (data) => {
          if (sentWhenAnswered < 0) sentWhenAnswered = sent;
          answer += data.toString('latin1');
        });
        socket.on('error', () => {});
        socket.on('close', () => {
          const [headers = '', body = ''] = answer.split('\r\n\r\n');
          const status = Number(headers.split(' ')[1]);
          resolve({ status, body, sentWhenAnswered });
        });
      },
    );
    // The gateway answers and closes while bytes are still coming: the body (which a reset may
    // cut from the client's view) is read only when it arrived whole.
    expect(outcome.status).toBe(413);
    expect(JSON.parse(outcome.body).code).toBe(41300);
    expect(outcome.sentWhenAnswered).toBeLessThan(total);
  });

  it('a client that reads only after it has sent 4 MiB past the cut still reads the whole 413: the gateway closes its side and lets the rest arrive', async () => {
    const total = 40 * 1024 * 1024;
    const url = new URL(`${gw.url}/v1/systemone`);
    const answer = await new Promise<string>((resolve) => {
      let received = '';
      const socket = connect(Number(url.port), url.hostname, () => {
        // Not reading yet: a server that closed at once would reset this connection, and a reset
        // drops what the client's side had received but not read.
        socket.pause();
        socket.write(
          `POST ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${key}\r\n` +
            `Content-Type: multipart/form-data; boundary=dgboundary\r\nContent-Length: ${total}\r\n\r\n`,
        );
        let sent = 0;
        const chunk = Buffer.alloc(256 * 1024, 0x41);
        const pump = () => {
          while (sent < 36 * 1024 * 1024 && !socket.destroyed) {
            sent += chunk.length;
            if (!socket.write(chunk)) return void socket.once('drain', pump);
          }
          socket.resume();
        };
        pump();
      });
      socket.on('data', (data) => {
        received += data.toString('latin1');
      });
      socket.on('error', () => {});
      socket.on('close', () => resolve(received));
    });
    const [headers = '', body = ''] = answer.split('\r\n\r\n');
    expect(headers.split(' ')[1]).toBe('413');
    expect(headers.toLowerCase()).toContain('connection: close');
    expect(JSON.parse(body).code).toBe(41300);
  });
});
