import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { sleep } from './harness.ts';

/**
 * An OTLP/HTTP trace receiver on 127.0.0.1, as a collector's port 4318 is: `POST /v1/traces` in
 * OTLP/JSON (`application/json`) or protobuf (`application/x-protobuf`), decoded by the message
 * classes generated from opentelemetry-proto (the OpenTelemetry JS project's own build of them),
 * never by the gateway's code. Every span it receives is kept, flattened, for the tests to read.
 */

/** A received span: ids in hex, attributes as plain values. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** Empty for a root span. */
  parentSpanId: string;
  name: string;
  kind: SpanKindName;
  attributes: Record<string, string | number | boolean>;
  /** 0 unset, 1 ok, 2 error (OTLP's StatusCode). */
  statusCode: number;
  /** The trace flags and trace state it was received with. */
  traceState: string;
  /** Nanoseconds since the epoch, as decimal strings. */
  start: bigint;
  end: bigint;
  resource: Record<string, string | number | boolean>;
  /** The export request's media type. */
  contentType: string;
}

export type SpanKindName = 'UNSET' | 'INTERNAL' | 'SERVER' | 'CLIENT' | 'PRODUCER' | 'CONSUMER';
const KINDS: SpanKindName[] = ['UNSET', 'INTERNAL', 'SERVER', 'CLIENT', 'PRODUCER', 'CONSUMER'];

const generated = createRequire(import.meta.url)('otlp-protos/build/src/generated/root.js');
const ExportTraceServiceRequest = generated.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;

/** OTLP's AnyValue as one plain value (arrays and maps as JSON, which the gateway never sends). */
function plain(value: Record<string, unknown> | undefined): string | number | boolean {
  if (value === undefined) return '';
  if ('stringValue' in value) return String(value.stringValue);
  if ('boolValue' in value) return Boolean(value.boolValue);
  if ('intValue' in value) return Number(value.intValue);
  if ('doubleValue' in value) return Number(value.doubleValue);
  return JSON.stringify(value);
}

type KeyValue = { key: string; value?: Record<string, unknown> };
const attributesOf = (list: KeyValue[] | undefined) =>
  Object.fromEntries((list ?? []).map(({ key, value }) => [key, plain(value)]));

/** Ids are hex in OTLP/JSON and bytes in protobuf. */
const hex = (id: unknown): string =>
  id === undefined || id === null
    ? ''
    : typeof id === 'string'
      ? id
      : Buffer.from(id as Uint8Array).toString('hex');

/** ExportTraceServiceRequest (either encoding, as a plain object) → flat spans. */
function flatten(request: { resourceSpans?: unknown[] }, contentType: string): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const resourceSpans of (request.resourceSpans ?? []) as {
    resource?: { attributes?: KeyValue[] };
    scopeSpans?: { spans?: Record<string, any>[] }[];
  }[]) {
    const resource = attributesOf(resourceSpans.resource?.attributes);
    for (const scope of resourceSpans.scopeSpans ?? [])
      for (const span of scope.spans ?? [])
        spans.push({
          traceId: hex(span.traceId),
          spanId: hex(span.spanId),
          parentSpanId: hex(span.parentSpanId),
          name: span.name,
          kind: KINDS[Number(span.kind ?? 0)] ?? 'UNSET',
          attributes: attributesOf(span.attributes),
          statusCode: Number(span.status?.code ?? 0),
          traceState: span.traceState ?? '',
          start: BigInt(String(span.startTimeUnixNano)),
          end: BigInt(String(span.endTimeUnixNano)),
          resource,
          contentType,
        });
  }
  return spans;
}

export interface OtlpReceiver {
  /** The base URL, as OTEL_EXPORTER_OTLP_ENDPOINT takes it. */
  url: string;
  spans: ReceivedSpan[];
  /** The bodies of the OTLP/JSON exports, as sent. */
  raw: string[];
  /** The headers of every export request. */
  exports: IncomingHttpHeaders[];
  /** Waits until `predicate` holds of the spans received (generous deadline: exports are batched). */
  waitFor(predicate: (spans: ReceivedSpan[]) => boolean, timeoutMs?: number): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const raw: string[] = [];
  const exports: IncomingHttpHeaders[] = [];
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const contentType = String(req.headers['content-type'] ?? '');
    if (req.method !== 'POST' || req.url !== '/v1/traces') {
      res.writeHead(404).end();
      return;
    }
    exports.push(req.headers);
    if (contentType.startsWith('application/json')) {
      raw.push(body.toString('utf8'));
      spans.push(...flatten(JSON.parse(body.toString('utf8')), contentType));
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    } else if (contentType.startsWith('application/x-protobuf')) {
      const message = ExportTraceServiceRequest.decode(body);
      spans.push(...flatten(ExportTraceServiceRequest.toObject(message, { longs: String }), contentType));
      // An empty ExportTraceServiceResponse.
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end(Buffer.alloc(0));
    } else {
      res.writeHead(415).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    raw,
    exports,
    async waitFor(predicate, timeoutMs = 30_000) {
      const started = Date.now();
      while (!predicate(spans)) {
        if (Date.now() - started > timeoutMs)
          throw new Error(`spans not received in time; have: ${spans.map((s) => s.name).join(', ')}`);
        await sleep(50);
      }
      return spans;
    },
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** The spans of one trace, each with its children, from its root. */
export interface SpanTree {
  span: ReceivedSpan;
  children: SpanTree[];
}

export function treeOf(spans: ReceivedSpan[], root: ReceivedSpan): SpanTree {
  const children = spans
    .filter((span) => span.parentSpanId === root.spanId && span.traceId === root.traceId)
    .sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  return { span: root, children: children.map((child) => treeOf(spans, child)) };
}

/** A tree as indented `KIND name` lines: what a test compares a trace's shape with. */
export function shapeOf(tree: SpanTree, depth = 0): string[] {
  const line = `${'  '.repeat(depth)}${tree.span.kind} ${tree.span.name}`;
  return [line, ...tree.children.flatMap((child) => shapeOf(child, depth + 1))];
}
