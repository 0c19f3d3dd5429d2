import autocannon from 'autocannon';
import type { Running } from './processes.ts';

/** An endpoint under load, and the process serving it (whose CPU time is counted). */
export interface Target {
  name: string;
  server: Running;
  url: string;
  headers: Record<string, string>;
  body: string;
}

export interface LoadResult {
  rps: number;
  p50: number;
  p99: number;
  /** CPU time the serving process spent per request (user + system), in microseconds. */
  cpuUsPerRequest: number;
  requests: number;
  errors: number;
}

/** autocannon against one target, for a duration or a number of requests. */
function fire(target: Target, connections: number, limit: { duration: number } | { amount: number }) {
  return autocannon({
    url: target.url,
    method: 'POST',
    headers: { 'content-type': 'application/json', ...target.headers },
    body: target.body,
    connections,
    ...limit,
  });
}

const failures = (result: autocannon.Result) => result.errors + result.timeouts + result.non2xx;

/** Load `target` for `seconds` at `connections`: throughput, latency and CPU per request. */
export async function measureLoad(target: Target, connections: number, seconds: number): Promise<LoadResult> {
  const cpuBefore = target.server.cpuSeconds();
  const result = await fire(target, connections, { duration: seconds });
  const cpuSeconds = target.server.cpuSeconds() - cpuBefore;
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    cpuUsPerRequest: (cpuSeconds * 1e6) / Math.max(1, result.requests.total),
    requests: result.requests.total,
    errors: failures(result),
  };
}

/** Send `amount` requests at `connections`; returns how many failed. */
export async function loadCount(target: Target, connections: number, amount: number): Promise<number> {
  return failures(await fire(target, connections, { amount }));
}
