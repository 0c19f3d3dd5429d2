// pnpm bench:images — what 64 requests in flight, each carrying a 4 MB image, cost the gateway in
// memory (docs/images.md#memory): its resident set before, at its peak and after, and how many of
// them IMAGE_BYTES_IN_FLIGHT let in. The upstream holds every answer until none has come for 2 s,
// so those admitted are truly in flight together.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { createBenchKey } from './bench-support.ts';
import { startProcess } from './processes.ts';

const CONCURRENT = 64;
const mib = (bytes: number) => `${(bytes / 1_048_576).toFixed(0)} MiB`;

/** The peak resident set of a process so far (Linux VmHWM), in bytes. */
const peakRss = (pid: number) =>
  Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) * 1024;

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'dg-bench-images-'));
  // An upstream that answers only once every request has reached it (or after 20 s).
  const waiting: (() => void)[] = [];
  const upstream = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const answer = () =>
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            model: 'jev-1.14.0',
            answers: { damaged: { type: 'noul', noul: 0.9 } },
            usage: { input_tokens: 3000, output_tokens: 0 },
          }),
        );
      waiting.push(answer);
      // Every request the gateway let through waits here until none has come for 2 s.
      clearTimeout(quiet);
      quiet = setTimeout(() => {
        releases.push(waiting.length);
        for (const go of waiting.splice(0)) go();
      }, 2_000);
    });
  });
  let quiet: NodeJS.Timeout | undefined;
  /** How many answers each release let go: those in flight together. */
  const releases: number[] = [];
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const upstreamUrl = `http://127.0.0.1:${(upstream.address() as { port: number }).port}`;
  const config = join(dir, 'gateway.yaml');
  writeFileSync(
    config,
    `upstreams:\n  vision: { kind: systemone, baseUrl: "${upstreamUrl}", images: true, timeoutMs: 60000 }\nroutes:\n  default: { upstreams: [vision] }\n`,
  );
  const key = await createBenchKey(join(dir, 'gateway.db'));
  const gateway = await startProcess('gateway (images)', 'apps/gateway/src/main.ts', {
    DATABASE_URL: `file:${join(dir, 'gateway.db')}`,
    GATEWAY_CONFIG: config,
    RATE_LIMIT_PER_MINUTE: '0',
    LOG_LEVEL: 'info',
    PORT: '0',
    ...(process.env.IMAGE_BYTES_IN_FLIGHT && { IMAGE_BYTES_IN_FLIGHT: process.env.IMAGE_BYTES_IN_FLIGHT }),
  });
  try {
    const [width, height] = [2300, 1800];
    const photo = await sharp(randomBytes(width * height * 3), { raw: { width, height, channels: 3 } })
      .jpeg({ quality: 95 })
      .toBuffer();
    const send = () => {
      const form = new FormData();
      form.set(
        'request',
        JSON.stringify({
          model: 'vendor/model-1.13',
          state: { photo: 'parcel' },
          questions: { damaged: { type: 'noul', instructions: 'Is the parcel in photo damaged?' } },
          assets: { parcel: { type: 'image', part: 'photo' } },
        }),
      );
      form.set('photo', new Blob([photo]), 'parcel.jpg');
      return fetch(`${gateway.url}/v1/systemone`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}` },
        body: form,
      }).then(async (r) => ({ status: r.status, body: await r.text() }));
    };
    // One request first: the process warmed up, its resident set settled.
    await send();
    const pid = gateway.child.pid as number;
    const before = gateway.rss();
    const peakBefore = peakRss(pid);
    // As many as the budget admits (docs/images.md#memory: each image counts five times its size)
    // get to the upstream and wait there together; the rest are refused at once.
    const outcomes = await Promise.all(Array.from({ length: CONCURRENT }, send));
    const peak = peakRss(pid);
    const after = gateway.rss();
    const served = outcomes.filter((o) => o.status === 200).length;
    const refused = outcomes.filter((o) => o.status === 503).length;
    const report = {
      image: `${width}×${height} JPEG, ${(photo.length / 1_000_000).toFixed(2)} MB`,
      concurrent: CONCURRENT,
      inFlightTogether: releases.slice(1),
      served,
      refused503: refused,
      other: outcomes
        .filter((o) => o.status !== 200 && o.status !== 503)
        .map((o) => `${o.status} ${o.body.slice(0, 120)}`),
      rssBefore: mib(before),
      peakRssBefore: mib(peakBefore),
      peakRss: mib(peak),
      rssAfter: mib(after),
      peakGrowth: mib(peak - before),
    };
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } finally {
    await gateway.stop();
    upstream.closeAllConnections();
    upstream.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
