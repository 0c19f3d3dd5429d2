// Targets measured in turn, round by round: what `pnpm bench`'s "× REST" bars, `bench:doors` and
// `bench:compare` share. Rounds a few seconds apart meet the same machine; cells a minute apart on a
// shared 2-core machine do not, so a share is taken within each round, then its median over rounds.
import { measureLoad, type Target } from './load.ts';

/** One target's figures in one round: req/s, CPU µs a request, KB of RSS rise a connection. */
export interface Reading {
  rps: number;
  cpu: number;
  rssKb: number;
}

/** A target's rounds as one figure: medians, and its req/s and CPU over a reference's round by round. */
export interface Shares {
  rps: number;
  cpu: number;
  rpsShare: number;
  /** The lowest and highest of the rounds' req/s shares. */
  rpsShareRange: [number, number];
  cpuShare: number;
}

export const median = (values: number[]) => {
  if (values.length === 0) throw new Error('the median of no values');
  return [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;
};

/**
 * "0.87–0.97": the lowest and highest of some ratios, as the tables print them; with as many
 * decimals as the median printed beside them, or "1.012× (0.96–1.01)" reads as a median outside its range.
 */
export const range = (values: number[], digits = 2) =>
  `${Math.min(...values).toFixed(digits)}–${Math.max(...values).toFixed(digits)}`;

/**
 * A ratio held to at least `least`, as the tables print it: two decimals, or as many more as it takes
 * not to round a miss up onto its bar (0.897 misses 0.9, and "0.90" beside "no" would read as a mistake).
 */
export const ratioAgainst = (value: number, least: number) => {
  let digits = 2;
  while (digits < 6 && value < least && Number(value.toFixed(digits)) >= least) digits++;
  return value.toFixed(digits);
};

/** `items` starting from its `by`-th: each round starts with the next target, so none always follows the same one. */
export const rotated = <T>(items: T[], by: number): T[] => [
  ...items.slice(by % items.length),
  ...items.slice(0, by % items.length),
];

/** A target's rounds against a reference's rounds of the same run (the i-th of each taken together). */
export function sharesOf(rounds: Reading[], reference: Reading[]): Shares {
  if (rounds.length !== reference.length || rounds.length === 0)
    throw new Error(
      `shares need as many rounds as the reference's (${rounds.length} against ${reference.length})`,
    );
  const rpsShares = rounds.map((r, i) => r.rps / (reference[i] as Reading).rps);
  return {
    rps: median(rounds.map((r) => r.rps)),
    cpu: median(rounds.map((r) => r.cpu)),
    rpsShare: median(rpsShares),
    rpsShareRange: [Math.min(...rpsShares), Math.max(...rpsShares)],
    cpuShare: median(rounds.map((r, i) => r.cpu / (reference[i] as Reading).cpu)),
  };
}

export interface InTurnOptions {
  rounds: number;
  seconds: number;
  connections: number;
  /**
   * Each round starts with the next target, counting rounds from this one (default 0): a run of
   * several trials starts each with the next target too.
   */
  firstRound?: number;
  /** Run before each round, e.g. a VACUUM of a database its targets share. */
  beforeRound?: () => Promise<void>;
}

/**
 * Each target's readings, round by round (keyed by name). A round with a failed request throws:
 * a share of errors is no measurement.
 */
export async function measureInTurn(
  targets: Target[],
  options: InTurnOptions,
): Promise<Map<string, Reading[]>> {
  const readings = new Map<string, Reading[]>(targets.map((target) => [target.name, []]));
  for (let round = 0; round < options.rounds; round++) {
    await options.beforeRound?.();
    for (const target of rotated(targets, round + (options.firstRound ?? 0))) {
      const m = await measureLoad(target, options.connections, options.seconds);
      if (m.errors > 0)
        throw new Error(`${m.errors} requests to ${target.name} failed in a round (${m.failedAs})`);
      readings.get(target.name)?.push({
        rps: m.rps,
        cpu: m.cpuUsPerRequest,
        rssKb: m.rssRise / 1024 / options.connections,
      });
    }
  }
  return readings;
}
