import autocannon from 'autocannon';
import type { Running } from './processes.ts';
import { BENCH_REQUEST } from './request.ts';

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

export interface LoadResult {
  rps: number;
  p50: number;
  p99: number;
  /** CPU time the serving process spent per request (user + system), in microseconds. */
  cpuUsPerRequest: number;
  requests: number;
  errors: number;
  /**
   * How far the serving processes' resident set rose above where it stood when the load began
   * (the highest of samples taken every 100 ms), in bytes: what the requests in flight cost, held
   * or awaiting collection.
   */
  rssRise: number;
}

/** autocannon against one target, for a duration or a number of requests. */
function fire(target: Target, connections: number, limit: { duration: number } | { amount: number }) {
  const { keys, eachBody } = target;
  let next = 0;
  return autocannon({
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
}

const failures = (result: autocannon.Result) => result.errors + result.timeouts + result.non2xx;

/**
 * Load `target` for `seconds` at `connections`: throughput, latency and CPU per request. With
 * replicas, the connections are split over the instances (fewer instances than connections at
 * c=1); throughput and CPU add up, and latency is the worst instance's.
 */
export async function measureLoad(target: Target, connections: number, seconds: number): Promise<LoadResult> {
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
  const results = await Promise.all(
    instances.map((instance, i) =>
      fire(
        { ...target, url: instance.url },
        Math.floor(connections / instances.length) + (i < connections % instances.length ? 1 : 0),
        { duration: seconds },
      ),
    ),
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
    errors: results.reduce((sum, r) => sum + failures(r), 0),
    rssRise: rssPeak.reduce((sum, peak, i) => sum + Math.max(0, peak - (rssBefore[i] as number)), 0),
  };
}

/** Send `amount` requests at `connections`; returns how many failed. */
export async function loadCount(target: Target, connections: number, amount: number): Promise<number> {
  return failures(await fire(target, connections, { amount }));
}
