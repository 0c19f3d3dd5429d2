// pnpm --filter @decision-gateway/gateway trace-picture: one real request's trace, drawn.
//
// Starts the gateway as `pnpm start` does, with OpenTelemetry's variables pointing at a real
// OTLP/HTTP receiver on loopback, and System One stand-ins behind a route with a fallback and an
// escalation. Sends one request, waits for its spans, and draws them as a trace viewer does
// (docs/trace.png, in Chromium), printing the same tree as text. docs/tracing.md shows both.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium } from 'playwright-core';
import { listeningAddress, startGatewayProcess } from '../test/gateway-process.ts';
import { bearer, post, sampleRequest } from '../test/harness.ts';
import { type ReceivedSpan, type SpanTree, startOtlpReceiver, treeOf } from '../test/otlp-receiver.ts';
import { json, nativeAnswer, startStandIn } from '../test/stand-in-upstream.ts';

const output = resolve(import.meta.dirname, '../../../docs/trace.png');

const receiver = await startOtlpReceiver();
// The local model is overloaded (503), the small one answers unsure, the hosted one is asked again.
const busy = await startStandIn((_request, res) => json(res, 503, { detail: 'overloaded' }));
const small = await startStandIn((request, res) =>
  json(res, 200, nativeAnswer(request, { input_tokens: 610, output_tokens: 3 }), {
    'x-typesafe-request-id': 'req_small_7f3a',
  }),
);
const hosted = await startStandIn((request, res) =>
  json(res, 200, nativeAnswer(request, { input_tokens: 420, output_tokens: 2 }), {
    'x-typesafe-request-id': 'req_hosted_91c2',
  }),
);
const dir = mkdtempSync(join(tmpdir(), 'dg-trace-picture-'));
const config = join(dir, 'gateway.json');
writeFileSync(
  config,
  JSON.stringify({
    upstreams: {
      local: { kind: 'systemone', baseUrl: busy.url, model: 'local-8b', maxRetries: 1 },
      small: { kind: 'systemone', baseUrl: small.url, model: 'small-3b' },
      hosted: { kind: 'systemone', baseUrl: hosted.url, model: 'jev-1.13.0' },
    },
    routes: {
      default: { upstreams: ['local', 'small'], escalate: { to: 'hosted', confidenceBelow: 0.6 } },
    },
  }),
);
const gateway = startGatewayProcess(dir, {
  GATEWAY_CONFIG: config,
  OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
  OTEL_BSP_SCHEDULE_DELAY: '100',
});
try {
  const url = await listeningAddress(gateway);
  const key = gateway.stdout().match(/dg_[A-Za-z0-9_-]{43}/)?.[0] as string;
  const response = await post(url, '/v1/systemone', sampleRequest(), bearer(key));
  const requestId = response.headers.get('x-request-id');
  const spans = await receiver.waitFor((all) => all.length >= 8);
  const root = spans.find((s) => s.kind === 'SERVER' && s.attributes['dg.request_id'] === requestId);
  if (root === undefined) throw new Error('no SERVER span for the request');
  const tree = treeOf(spans, root);
  process.stdout.write(`${textOf(tree, root.start).join('\n')}\n`);
  await draw(tree, root);
  process.stdout.write(`wrote ${output}\n`);
} finally {
  gateway.child.kill('SIGTERM');
  await gateway.exited;
  await receiver.close();
  for (const standIn of [busy, small, hosted]) await standIn.close();
  rmSync(dir, { recursive: true, force: true });
}

function ms(from: bigint, to: bigint): number {
  return Number(to - from) / 1e6;
}

/** What a row says beside its name: the attributes an operator reads first. */
function detail(span: ReceivedSpan): string {
  const a = span.attributes;
  if (span.kind === 'CLIENT')
    return [
      `dg.upstream=${a['dg.upstream']}`,
      `dg.attempt=${a['dg.attempt']}`,
      `dg.retry=${a['dg.retry']}`,
      a['dg.escalation'] === true ? 'dg.escalation=true' : '',
      `status=${a['http.response.status_code'] ?? '-'}`,
      a['gen_ai.usage.input_tokens'] !== undefined ? `tokens=${a['gen_ai.usage.input_tokens']}` : '',
      a['error.type'] !== undefined ? `error.type=${a['error.type']}` : '',
    ]
      .filter(Boolean)
      .join(' ');
  if (span.kind === 'SERVER')
    return `dg.route=${a['dg.route']} dg.credits_used=${a['dg.credits_used']} status=${a['http.response.status_code']}`;
  if (span.name.startsWith('dg.route')) return `dg.upstream=${a['dg.upstream']}`;
  return '';
}

function rows(tree: SpanTree, depth = 0): { span: ReceivedSpan; depth: number }[] {
  return [{ span: tree.span, depth }, ...tree.children.flatMap((child) => rows(child, depth + 1))];
}

function textOf(tree: SpanTree, origin: bigint): string[] {
  return rows(tree).map(({ span, depth }) => {
    const start = ms(origin, span.start).toFixed(1).padStart(6);
    const took = ms(span.start, span.end).toFixed(1).padStart(6);
    const name = `${'  '.repeat(depth)}${span.kind} ${span.name}`.padEnd(40);
    return `${start} ms ${took} ms  ${name} ${detail(span)}`;
  });
}

async function draw(tree: SpanTree, root: ReceivedSpan) {
  const total = ms(root.start, root.end);
  const escaped = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;');
  const body = rows(tree)
    .map(({ span, depth }) => {
      const left = (ms(root.start, span.start) / total) * 100;
      const width = Math.max(0.4, (ms(span.start, span.end) / total) * 100);
      const colour =
        span.statusCode === 2
          ? '#d9534f'
          : span.kind === 'CLIENT'
            ? '#7b61ff'
            : span.kind === 'SERVER'
              ? '#2f6fde'
              : '#3aa17e';
      return `<div class="row"><div class="name" style="padding-left:${depth * 18}px"><b>${span.kind}</b> ${escaped(span.name)}<div class="detail">${escaped(detail(span))}</div></div>
        <div class="lane"><div class="bar" style="left:${left}%;width:${width}%;background:${colour}"></div><span class="took" style="left:calc(${left + width}% + 6px)">${ms(span.start, span.end).toFixed(1)} ms</span></div></div>`;
    })
    .join('');
  const html = `<!doctype html><meta charset="utf-8"><style>
    body{font:13px system-ui,sans-serif;margin:16px;color:#1d2330;background:#fff;width:1100px}
    h1{font-size:15px;margin:0 0 10px} .row{display:flex;border-top:1px solid #e6e8ee;min-height:38px;align-items:center}
    .name{width:430px;flex:none} .detail{color:#5b6275;font-size:11px;font-family:ui-monospace,monospace}
    .lane{position:relative;flex:1;height:38px;margin-right:72px} .bar{position:absolute;top:12px;height:14px;border-radius:3px}
    .took{position:absolute;top:11px;font-size:11px;color:#5b6275;white-space:nowrap}
  </style><h1>decision-gateway · trace ${root.traceId} · ${total.toFixed(1)} ms · fallback and escalation</h1>${body}`;
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--no-first-run',
    ],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1132, height: 200 }, deviceScaleFactor: 1 });
    await page.setContent(html);
    await page.screenshot({ path: output, fullPage: true });
  } finally {
    await browser.close();
  }
}
