import { createGatewayClient } from '@decision-gateway/client';
import autocannon from 'autocannon';
import type { Running } from './processes.ts';
import { BENCH_GEMINI_REQUEST, BENCH_OPENAI_REQUEST, BENCH_REQUEST, benchPhoto } from './request.ts';

/** An endpoint under load, and the process serving it (whose CPU time is counted). */
export interface Target {
  name: string;
  server: Running;
  url: string;
  headers: Record<string, string>;
  /** Bytes for a multipart body (an image), else JSON text. */
  body: string | Buffer;
  /** More instances serving the same gateway: the load is split evenly over all of them. */
  replicas?: { server: Running; url: string }[];
  /** The load spread over these API keys, one after another (in place of one key in `headers`). */
  keys?: string[];
  /** A body made anew for each request, where each must differ (an MCP tool call's JSON-RPC id). */
  eachBody?: () => string;
}

/** `POST /v1/systemone` of a gateway (or relay) with the bench's request, as `apiKey`'s caller if given. */
export function restTarget(name: string, server: Running, apiKey?: string): Target {
  return {
    name,
    server,
    url: `${server.url}/v1/systemone`,
    headers: apiKey === undefined ? {} : { authorization: `Bearer ${apiKey}` },
    body: JSON.stringify(BENCH_REQUEST),
  };
}

/** `POST /openai/v1/decisions` of a gateway with the bench's three questions in OpenAI's shape. */
export function openAiTarget(name: string, server: Running, apiKey: string): Target {
  return {
    name,
    server,
    url: `${server.url}/openai/v1/decisions`,
    headers: { authorization: `Bearer ${apiKey}` },
    body: JSON.stringify(BENCH_OPENAI_REQUEST),
  };
}

/** `POST /native/v1/systemone` (the System One SDKs' door) of a gateway with the bench's request. */
export function nativeTarget(name: string, server: Running, apiKey: string): Target {
  return { ...restTarget(name, server, apiKey), url: `${server.url}/native/v1/systemone` };
}

/**
 * `POST /gemini/v1/decisions` of a gateway with the bench's three questions in Google's shape, the
 * key in `x-goog-api-key` as Google's SDK sends it. Checked to answer before it is handed out.
 */
export async function geminiTarget(name: string, server: Running, apiKey: string): Promise<Target> {
  return answering({
    name,
    server,
    url: `${server.url}/gemini/v1/decisions`,
    headers: { 'x-goog-api-key': apiKey, 'content-type': 'application/json' },
    body: JSON.stringify(BENCH_GEMINI_REQUEST),
  });
}

/** tRPC's `evaluate` with the bench's request, replaying exactly what the client package sends. */
export async function trpcTarget(name: string, server: Running, apiKey: string): Promise<Target> {
  let sent: { url: string; body: string } | undefined;
  const client = createGatewayClient({
    url: server.url,
    apiKey,
    fetch: (input, init) => {
      sent = { url: String(input), body: String(init?.body) };
      return fetch(input, init);
    },
  });
  const check = await client.evaluate({ state: BENCH_REQUEST.state, questions: BENCH_REQUEST.questions });
  if (sent === undefined || Object.keys(check.result.answers).length !== 3)
    throw new Error('the tRPC check call failed');
  return {
    name,
    server,
    url: sent.url,
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: sent.body,
  };
}

/** The target, once one request of it has answered 200: a body the door refuses would bench its errors. */
async function answering(target: Target): Promise<Target> {
  const response = await fetch(target.url, { method: 'POST', headers: target.headers, body: target.body });
  const text = await response.text();
  if (!response.ok) throw new Error(`${target.name}: ${response.status} ${text.slice(0, 300)}`);
  return target;
}

/** The bench's photo request, made once: every gateway measured is sent the same bytes. */
let photo: ReturnType<typeof benchPhoto> | undefined;

/**
 * `POST /v1/systemone` of a gateway whose upstream takes images (`imagesGatewayConfig`), with the
 * bench's 1 MB JPEG as a multipart request.
 */
export async function photoTarget(name: string, server: Running, apiKey: string): Promise<Target> {
  photo ??= benchPhoto();
  const { body, contentType } = await photo;
  return {
    name,
    server,
    url: `${server.url}/v1/systemone`,
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': contentType },
    body,
  };
}

/** `POST /native/v1/systemone` of a gateway whose upstream takes images, the same photo as base64 in JSON. */
export async function photoJsonTarget(name: string, server: Running, apiKey: string): Promise<Target> {
  photo ??= benchPhoto();
  const { json } = await photo;
  return {
    name,
    server,
    url: `${server.url}/native/v1/systemone`,
    headers: { authorization: `Bearer ${apiKey}` },
    body: json,
  };
}

/** The configuration of a gateway whose one upstream, a System One service, takes images. */
export const imagesGatewayConfig = (upstreamUrl: string) =>
  `upstreams:\n  vision: { kind: systemone, baseUrl: "${upstreamUrl}", images: true }\nroutes:\n  default: { upstreams: [vision] }\n`;

/**
 * A `decide` tool call of the bench's request in one MCP session of a gateway, opened as an MCP
 * client opens it (initialize, then initialized), each call its own JSON-RPC id. A tool call that
 * fails is still HTTP 200, so one is checked to answer before the target is handed out.
 */
export async function mcpDecideTarget(name: string, server: Running, apiKey: string): Promise<Target> {
  const base = {
    authorization: `Bearer ${apiKey}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': '2025-06-18',
  };
  const url = `${server.url}/mcp`;
  const initialize = {
    jsonrpc: '2.0',
    id: 0,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bench', version: '1' } },
  };
  const opened = await fetch(url, { method: 'POST', headers: base, body: JSON.stringify(initialize) });
  const sessionId = opened.headers.get('mcp-session-id');
  await opened.text();
  if (!opened.ok || sessionId === null) throw new Error(`the MCP session did not open: ${opened.status}`);
  const headers = { ...base, 'mcp-session-id': sessionId };
  const initialized = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' });
  await (await fetch(url, { method: 'POST', headers, body: initialized })).text();

  let id = 0;
  const call = () =>
    JSON.stringify({
      jsonrpc: '2.0',
      id: ++id,
      method: 'tools/call',
      params: {
        name: 'decide',
        arguments: { state: BENCH_REQUEST.state, questions: BENCH_REQUEST.questions },
      },
    });
  const checked = await fetch(url, { method: 'POST', headers, body: call() });
  const reply = (await checked.json()) as {
    result?: { isError?: boolean; structuredContent?: { answers: object } };
  };
  if (reply.result?.isError || Object.keys(reply.result?.structuredContent?.answers ?? {}).length !== 3)
    throw new Error(`the MCP check call failed: ${JSON.stringify(reply).slice(0, 300)}`);
  return { name, server, url, headers, body: call(), eachBody: call };
}

/**
 * The doors the bench's three questions can be sent through, for a tool measured on REST that can
 * be pointed at another door (BENCH_PROFILE_DOOR, BENCH_ALLOC_DOOR) to see what the door adds.
 */
export const QUESTION_DOORS = {
  rest: { label: 'REST', target: restTarget },
  native: { label: 'the System One door (/native)', target: nativeTarget },
  trpc: { label: 'tRPC (the client package)', target: trpcTarget },
  openai: { label: 'the OpenAI door', target: openAiTarget },
  gemini: { label: 'the Gemini door', target: geminiTarget },
  mcp: { label: 'the MCP door (decide)', target: mcpDecideTarget },
} satisfies Record<
  string,
  { label: string; target: (name: string, server: Running, apiKey: string) => Target | Promise<Target> }
>;
export type QuestionDoor = keyof typeof QUESTION_DOORS;

/** The door an environment variable names (REST when it is unset), or a throw naming the choices. */
export function questionDoorFrom(variable: string): QuestionDoor {
  const name = process.env[variable] ?? 'rest';
  if (!Object.hasOwn(QUESTION_DOORS, name))
    throw new Error(`${variable}: one of ${Object.keys(QUESTION_DOORS).join(', ')}, not ${name}`);
  return name as QuestionDoor;
}

export interface LoadResult {
  rps: number;
  p50: number;
  p99: number;
  /** CPU time the serving process spent per request (user + system), in microseconds. */
  cpuUsPerRequest: number;
  requests: number;
  errors: number;
  /** What the errors were, when there were any: "503 ×3", "timeouts 2", "socket errors 1". */
  failedAs?: string;
  /**
   * How far the serving processes' resident set rose above where it stood when the load began
   * (the highest of samples taken every 100 ms), in bytes: what the requests in flight cost, held
   * or awaiting collection.
   */
  rssRise: number;
  /**
   * With `slowResponses`: the responses that took over a second, and how many of those were the
   * first on their connection (one a saturated event loop took long to accept, docs/performance.md).
   */
  overOneSecond?: { responses: number; firstOnConnection: number };
}

/** Responses slower than this are counted, and whether each was its connection's first. */
const SLOW_RESPONSE_MS = 1_000;

/** Counts the slow responses of autocannon instances, and those that were a connection's first. */
function slowResponseCounter() {
  const answered = new WeakSet<autocannon.Client>();
  const counted = { responses: 0, firstOnConnection: 0 };
  return {
    counted,
    watch<T extends autocannon.Instance>(instance: T): T {
      instance.on('response', (client, _status, _bytes, responseTime) => {
        const first = !answered.has(client);
        if (first) answered.add(client);
        if (responseTime <= SLOW_RESPONSE_MS) return;
        counted.responses++;
        if (first) counted.firstOnConnection++;
      });
      return instance;
    },
  };
}

/**
 * autocannon against one target, for a duration or a number of requests. Without a callback it
 * returns its instance made thenable (autocannon's lib/init.js), though its types say a Promise.
 */
function fire(
  target: Target,
  connections: number,
  limit: { duration: number } | { amount: number },
): autocannon.Instance & PromiseLike<autocannon.Result> {
  const { keys, eachBody } = target;
  let next = 0;
  const running = autocannon({
    url: target.url,
    method: 'POST',
    headers: { 'content-type': 'application/json', ...target.headers },
    body: target.body,
    connections,
    ...((keys || eachBody) && {
      requests: [
        {
          setupRequest: (request: autocannon.Request) => ({
            ...request,
            ...(keys && {
              headers: { ...request.headers, authorization: `Bearer ${keys[next++ % keys.length]}` },
            }),
            ...(eachBody && { body: eachBody() }),
          }),
        },
      ],
    }),
    ...limit,
  });
  return running as unknown as autocannon.Instance & PromiseLike<autocannon.Result>;
}

/** autocannon counts a timeout among its errors as well as in `timeouts` (lib/run.js), so once here. */
export const failuresOf = (result: autocannon.Result) => result.errors + result.non2xx;

/** The failures of some results by kind: each status other than 2xx, timeouts, socket errors. */
export function failedAs(results: autocannon.Result[]): string {
  const kinds = new Map<string, number>();
  const add = (kind: string, count: number) => {
    if (count > 0) kinds.set(kind, (kinds.get(kind) ?? 0) + count);
  };
  for (const result of results) {
    for (const [status, { count }] of Object.entries(result.statusCodeStats ?? {}))
      if (!status.startsWith('2')) add(`${status} ×`, count ?? 0);
    add('timeouts ', result.timeouts);
    add('socket errors ', result.errors - result.timeouts);
  }
  return [...kinds].map(([kind, count]) => `${kind}${count}`).join(', ');
}

/**
 * Load `target` for `seconds` at `connections`: throughput, latency and CPU per request. With
 * replicas, the connections are split over the instances (fewer instances than connections at
 * c=1); throughput and CPU add up, and latency is the worst instance's.
 */
export async function measureLoad(
  target: Target,
  connections: number,
  seconds: number,
  options: { slowResponses?: boolean } = {},
): Promise<LoadResult> {
  const instances = [{ server: target.server, url: target.url }, ...(target.replicas ?? [])].slice(
    0,
    Math.max(1, connections),
  );
  const cpuBefore = instances.map((instance) => instance.server.cpuSeconds());
  const rssBefore = instances.map((instance) => instance.server.rss());
  const rssPeak = [...rssBefore];
  const sampler = setInterval(() => {
    for (const [i, instance] of instances.entries())
      rssPeak[i] = Math.max(rssPeak[i] as number, instance.server.rss());
  }, 100);
  const slow = options.slowResponses ? slowResponseCounter() : undefined;
  const results = await Promise.all(
    instances.map((instance, i) => {
      const fired = fire(
        { ...target, url: instance.url },
        Math.floor(connections / instances.length) + (i < connections % instances.length ? 1 : 0),
        { duration: seconds },
      );
      return slow ? slow.watch(fired) : fired;
    }),
  ).finally(() => clearInterval(sampler));
  const cpuSeconds = instances.reduce(
    (sum, instance, i) => sum + instance.server.cpuSeconds() - (cpuBefore[i] as number),
    0,
  );
  const requests = results.reduce((sum, r) => sum + r.requests.total, 0);
  return {
    rps: results.reduce((sum, r) => sum + r.requests.average, 0),
    p50: Math.max(...results.map((r) => r.latency.p50)),
    p99: Math.max(...results.map((r) => r.latency.p99)),
    cpuUsPerRequest: (cpuSeconds * 1e6) / Math.max(1, requests),
    requests,
    errors: results.reduce((sum, r) => sum + failuresOf(r), 0),
    ...(results.some((r) => failuresOf(r) > 0) && { failedAs: failedAs(results) }),
    rssRise: rssPeak.reduce((sum, peak, i) => sum + Math.max(0, peak - (rssBefore[i] as number)), 0),
    ...(slow && { overOneSecond: slow.counted }),
  };
}

/** Send `amount` requests at `connections`; returns how many failed. */
export async function loadCount(target: Target, connections: number, amount: number): Promise<number> {
  return failuresOf(await fire(target, connections, { amount }));
}
