import { groupsOf } from '@decision-gateway/questions';

/**
 * A question's label distribution from a model server's next-token `top_logprobs` (docs/upstreams.md), when
 * the list is short (OpenAI and vLLM cap it at 20), spends slots on spelling variants (" A", "A",
 * "a") and on tokens that are no label at all, and puts well under half its mass on labels.
 *
 * The method, in three rules:
 * 1. Few options per completion. A call offers at most `groupSize` options, so every variant of
 *    every offered label has room in the list. Its reading is, per offered label, the summed mass
 *    of the variants listed; a label with none listed is unseen, known only to weigh less than the
 *    smallest listed probability (the `floor`).
 * 2. Ratios, never products of normalised probabilities. Under the choice axiom P(a)/P(b) is the
 *    same in every prompt offering both, so readings of different calls are chained through an
 *    option they share: groups are tied through their leaders (their most likely option), asked
 *    together in a further call, recursively. (A knock-out tournament's product of group and
 *    final probabilities is biased even when the axiom holds.)
 * 3. Unseen labels are asked again, not guessed. They go to a further call together with a bridge,
 *    the least likely seen option of the call that missed them, where they are no longer dwarfed by
 *    the leader. Only what stays unseen (or what the extra-call budget cannot reach) is estimated,
 *    at half the floor: never more than the smallest listed probability.
 */

/** One entry of an OpenAI-compatible `top_logprobs` list. */
export interface TopLogprob {
  token: string;
  logprob: number;
}

/** What one completion says about the labels it offered. */
export interface Reading {
  /** Per offered label (in order): the summed probability of its listed variants, or undefined. */
  masses: (number | undefined)[];
  /** The smallest probability in the list: an unseen label weighs less than this. */
  floor: number;
  /** The share of the next-token mass that fell on the offered labels (a fit signal). */
  labelMass: number;
}

/**
 * Reads `labels` off a generated token's alternatives. Variants of a label's token (leading space,
 * case, and `aliases` such as "true" for "Yes") are summed; other tokens count only towards the
 * floor. A label whose rarer spellings fell off the list is completed with the spelling shares of
 * the most likely label (whose spellings are all there), but never past what the missing spellings
 * can hold: less than the floor each.
 */
export function readLabels(
  top: readonly TopLogprob[],
  labels: readonly string[],
  aliases: Readonly<Record<string, readonly string[]>> = {},
): Reading {
  // Each token that answers with a label: the label's own word, or its k-th alias ("true" for Yes).
  const index = new Map<string, { label: number; word: string; alias: number }>();
  labels.forEach((label, i) => {
    index.set(label.toLowerCase(), { label: i, word: label, alias: -1 });
    (aliases[label] ?? []).forEach((alias, k) => {
      index.set(alias.toLowerCase(), { label: i, word: alias, alias: k });
    });
  });
  const spellings: Map<string, number>[] = labels.map(() => new Map());
  let floor = Number.POSITIVE_INFINITY;
  let labelMass = 0;
  for (const { token, logprob } of top) {
    const p = Math.exp(logprob);
    if (!Number.isFinite(p)) continue;
    floor = Math.min(floor, p);
    const core = token.trim();
    const match = index.get(core.toLowerCase());
    if (match === undefined) continue;
    const form = `${match.alias < 0 ? '' : `alias${match.alias}`}${spellingOf(token, core, match.word)}`;
    const forms = spellings[match.label] as Map<string, number>;
    forms.set(form, (forms.get(form) ?? 0) + p);
    labelMass += p;
  }
  floor = Number.isFinite(floor) ? floor : 0;
  const listed = spellings.map((forms) => (forms.size === 0 ? undefined : sum(forms.values())));
  // The reference split: the most likely label's spellings.
  let reference = -1;
  listed.forEach((mass, i) => {
    if (mass !== undefined && (reference < 0 || mass > (listed[reference] as number))) reference = i;
  });
  const masses = listed.map((mass, i) => {
    if (mass === undefined || reference < 0) return mass;
    const referenceForms = spellings[reference] as Map<string, number>;
    const referenceMass = listed[reference] as number;
    const forms = spellings[i] as Map<string, number>;
    let share = 0;
    for (const form of forms.keys()) {
      const p = referenceForms.get(form);
      if (p === undefined) return mass; // a spelling the reference lacks: no basis to complete
      share += p / referenceMass;
    }
    const missing = referenceForms.size - forms.size;
    return missing === 0 || share <= 0 ? mass : Math.min(mass / share, mass + missing * floor);
  });
  return { masses, floor, labelMass };
}

/** A spelling's shape, the same for every label: " A" and " B" are both " X", "a" is "x". */
function spellingOf(token: string, core: string, label: string): string {
  const space = token.startsWith(' ') || token.startsWith('\u2581') ? ' ' : '';
  if (core === label) return `${space}X`;
  if (core === label.toLowerCase()) return `${space}x`;
  if (core === label.toUpperCase()) return `${space}XX`;
  return `${space}~`;
}

const sum = (values: Iterable<number>) => {
  let total = 0;
  for (const v of values) total += v;
  return total;
};

/** Asks the model about a subset of a question's options (indices into its option list). */
export type Ask = (options: readonly number[]) => Promise<Reading>;

export interface EstimateOptions {
  /** The most options one completion offers. */
  groupSize: number;
  /** Completions allowed beyond the base plan, for unseen labels (shared by the whole question). */
  extraCalls: number;
}

/** Relative weights of options (one scale per estimate); an `unseen` weight is an estimate. */
interface Scale {
  weight: Map<number, number>;
}

/** An unseen label's share of the floor: the middle of what it can be, [0, floor). */
const UNSEEN_SHARE = 0.5;

/**
 * Weights proportional to the model's probabilities of `count` options (in option order), asked
 * through `ask`. The caller normalises them.
 */
export async function estimateWeights(count: number, ask: Ask, options: EstimateOptions): Promise<number[]> {
  const budget = { extra: options.extraCalls };
  const size = Math.max(2, options.groupSize);
  const all = Array.from({ length: count }, (_, i) => i);
  const scale = await estimate(all, ask, size, budget);
  return all.map((i) => scale.weight.get(i) ?? 0);
}

/** The base plan's number of completions for `count` options: groups, then leaders, recursively. */
export function plannedCalls(count: number, groupSize: number): number {
  const size = Math.max(2, groupSize);
  if (count <= size) return 1;
  const groups = Math.ceil(count / size);
  return groups + plannedCalls(groups, size);
}

async function estimate(
  options: readonly number[],
  ask: Ask,
  size: number,
  budget: { extra: number },
): Promise<Scale> {
  if (options.length <= size) return askDirectly(options, ask, size, budget);
  const groups = groupsOf(options, size);
  const scales = await Promise.all(groups.map((group) => estimate(group, ask, size, budget)));
  const leaders = groups.map((group, g) => leaderOf(group, scales[g] as Scale));
  const top = await estimate(leaders, ask, size, budget);
  // Chain the ratios: option/leader within its group × leader/top-scale among the leaders.
  const weight = new Map<number, number>();
  groups.forEach((group, g) => {
    const scale = scales[g] as Scale;
    const leader = leaders[g] as number;
    const factor = (top.weight.get(leader) as number) / (scale.weight.get(leader) as number);
    for (const option of group) weight.set(option, (scale.weight.get(option) as number) * factor);
  });
  return { weight };
}

/**
 * One completion over `options`. Options it did not see are asked again beside a bridge (the least
 * likely option it saw) while the budget lasts and each round sees more of them; what stays unseen
 * keeps the bound of the last reading that missed it.
 */
async function askDirectly(
  options: readonly number[],
  ask: Ask,
  size: number,
  budget: { extra: number },
  unseenBefore = Number.POSITIVE_INFINITY,
): Promise<Scale> {
  const reading = await ask(options);
  const weight = new Map<number, number>();
  const unseen: number[] = [];
  let bridge: number | undefined;
  options.forEach((option, i) => {
    const mass = reading.masses[i];
    weight.set(option, mass ?? reading.floor * UNSEEN_SHARE);
    if (mass === undefined) unseen.push(option);
    else if (bridge === undefined || mass < (weight.get(bridge) as number)) bridge = option;
  });
  const progress = unseen.length < unseenBefore;
  if (unseen.length === 0 || bridge === undefined || !progress || budget.extra <= 0) return { weight };

  budget.extra--;
  const again = await askDirectly([bridge, ...unseen].slice(0, size), ask, size, budget, unseen.length);
  const bridged = again.weight.get(bridge) as number;
  if (!(bridged > 0)) return { weight };
  const factor = (weight.get(bridge) as number) / bridged;
  for (const option of unseen) {
    const rescued = again.weight.get(option);
    if (rescued !== undefined) weight.set(option, rescued * factor);
  }
  return { weight };
}

function leaderOf(group: readonly number[], scale: Scale): number {
  return group.reduce((a, b) => ((scale.weight.get(b) as number) > (scale.weight.get(a) as number) ? b : a));
}
