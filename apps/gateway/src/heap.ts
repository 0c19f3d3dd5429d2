import { setFlagsFromString } from 'node:v8';

/**
 * How far V8 may let the old space grow past what its last full collection kept, in per cent,
 * before it collects again. Left to itself V8 grows it up to fourfold when collecting is cheap
 * next to allocating, as it is under load. With a slow upstream every request in flight lives
 * through a scavenge or two, so what it held while waiting is promoted, and with the fourfold
 * limit that garbage lifted the resident set by ~370 KB for each request in flight. Twofold keeps
 * it to ~70–90 KB in the median of trials (at most ~190 KB, wherever a run catches the cycle) for a
 * few per cent of throughput on that path, and nothing measurable on a fast one
 * (docs/performance.md, "The heap's growing factor").
 */
export const HEAP_GROWING_PERCENT = 100;

/** The V8 flag the gateway sets at start: none when its command line already chose one. */
export function heapGrowingFlag(execArgv: readonly string[]): string | undefined {
  const chosen = execArgv.some((arg) => /^--heap[-_]growing[-_]percent(=|$)/.test(arg));
  return chosen ? undefined : `--heap-growing-percent=${HEAP_GROWING_PERCENT}`;
}

/**
 * Sets the growing factor in this process. V8 reads it at each full collection, so setting it
 * once V8 runs takes effect from the next one (Node leaves V8's flags writable for this).
 */
export function limitHeapGrowth(execArgv: readonly string[] = process.execArgv): void {
  const flag = heapGrowingFlag(execArgv);
  if (flag !== undefined) setFlagsFromString(flag);
}
