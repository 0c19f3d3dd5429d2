import type { Question, State } from '@decision-gateway/contract';
import { CHOICE_LABELS, type RenderedQuestion, renderState } from './prompt.ts';
import { behaviourOf } from './question-types/index.ts';

export {
  CHOICE_LABELS,
  NOUL_LABELS,
  type RenderedQuestion,
  renderContent,
  renderState,
  stableJson,
} from './prompt.ts';
export { DEFAULT_NOUL_CRITERIA } from './question-types/index.ts';

/** How many options a question offers: a choice's labels, a score's levels, a noul's yes and no. */
export function optionCount(question: Question): number {
  return behaviourOf(question).optionCount(question);
}

/**
 * Render a question for a language model. A choice or a score may be rendered over a subset of its
 * options (`subset`: option indices, in order; a choice takes at most 26, labelled A, B, … in the
 * order given). `labels[i]` is the token that answers with option `subset[i]`.
 */
export function renderQuestion(
  state: State,
  question: Question,
  subset?: readonly number[],
): RenderedQuestion {
  const stateText = `# State\n${renderState(state)}`;
  const offered = subset ?? Array.from({ length: optionCount(question) }, (_, i) => i);
  return behaviourOf(question).render(stateText, question, offered);
}

/**
 * Split `options` into ceil(n/size) groups of near-equal size, in order: how a choice with more
 * options than one prompt can label is shown.
 */
export function groupsOf<T>(options: readonly T[], size: number): T[][] {
  const count = Math.ceil(options.length / size);
  const groups: T[][] = [];
  for (let g = 0; g < count; g++) {
    groups.push(
      options.slice(Math.floor((g * options.length) / count), Math.floor(((g + 1) * options.length) / count)),
    );
  }
  return groups;
}

/**
 * Every option of a question shown once: one prompt, or, for more options than a prompt can label
 * (a choice of more than 26), one prompt per group.
 */
export function renderWhole(state: State, question: Question): RenderedQuestion[] {
  const all = Array.from({ length: optionCount(question) }, (_, i) => i);
  return groupsOf(all, CHOICE_LABELS.length).map((group) => renderQuestion(state, question, group));
}
