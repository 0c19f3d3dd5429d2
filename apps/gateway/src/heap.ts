import { setFlagsFromString } from 'node:v8';

/**
 * How far V8 may let the old space grow past what its last full collection kept, in per cent,
 * before it collects again. Left to itself V8 grows it up to fourfold when collecting is cheap
 * next to allocating, as it is under load. With a slow upstream every request in flight lives
 * through a scavenge or two, so what it held while waiting is promoted, and with the fourfold
 * limit that garbage lifted the resident set by ~370 KB for each request in flight. 1.75-fold
 * bounds it by what a full collection keeps (~48 MB under load) times 0.75: under ~140 KB a
 * request at 256 in flight wherever a run catches the cycle (twofold allowed ~190), for a few per
 * cent more CPU on that path and no throughput the trials can tell from their spread
 * (docs/performance.md, "The heap's growing factor").
 */
export const HEAP_GROWING_PERCENT = 75;

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
