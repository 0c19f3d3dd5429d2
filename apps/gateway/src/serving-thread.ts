import { performance } from 'node:perf_hooks';

/**
 * How loaded the thread that serves requests is, for the choices that trade its time for latency
 * (the call thread, the SQLite group commit's early commits): the share of each 100 ms window its
 * event loop was busy. Read lazily, once a window, by whoever asks first.
 */
const WINDOW_MS = 100;
/**
 * Each window's weight in the average: about the last half-second. Under a slow upstream, requests
 * come in waves, and one window can be idle between two busy ones.
 */
const WEIGHT = 0.25;

let sample = performance.eventLoopUtilization();
let sampledAt = performance.now();
let last = 0;
let average = 0;

function read(): void {
  const now = performance.now();
  const elapsed = now - sampledAt;
  if (elapsed < WINDOW_MS) return;
  const next = performance.eventLoopUtilization();
  last = performance.eventLoopUtilization(next, sample).utilization;
  // Read lazily, a window may span several: it weighs as many as it spans.
  average += (1 - (1 - WEIGHT) ** (elapsed / WINDOW_MS)) * (last - average);
  sample = next;
  sampledAt = now;
}

/** The share (0 to 1) of its last window (100 ms, longer after a quiet spell) the serving thread's event loop was busy. */
export function servingThreadLoad(): number {
  read();
  return last;
}

/**
 * The higher of the last window's share and its average over about the last half-second: a thread
 * that has just become busy reads busy at once, and one window's lull between two waves of requests
 * does not read idle.
 */
export function servingThreadSteadyLoad(): number {
  read();
  return Math.max(last, average);
}
