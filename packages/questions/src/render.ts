import type {
  ChoiceQuestion,
  Content,
  NoulQuestion,
  Question,
  ScoreQuestion,
  State,
} from '@decision-gateway/contract';
import { choiceLabels } from './answers.ts';

/**
 * Pretty JSON with object keys sorted, so the same content always renders the same text.
 * The replacer rebuilds objects with fromEntries (own properties: "__proto__" stays a key);
 * callers pass validated content, which nests at most 64 levels.
 */
export function stableJson(value: unknown): string {
  return JSON.stringify(
    value,
    (_key, v: unknown) =>
      v !== null && typeof v === 'object' && !Array.isArray(v)
        ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
        : v,
    2,
  );
}

/** Content as text: strings as they are, objects and arrays as stable pretty JSON. */
export function renderContent(content: Content | null | undefined): string {
  if (content === null || content === undefined) return '';
  return typeof content === 'string' ? content : stableJson(content);
}

export function renderState(state: State): string {
  return renderContent(state);
}

/** The criteria a noul question reads when the caller gives none (or leaves one side out). */
export const DEFAULT_NOUL_CRITERIA = {
  true: 'The statement is true given the state.',
  false: 'The statement is false given the state.',
} as const;

/** Labels a language model answers with: each is a single token in common BPE vocabularies. */
export const CHOICE_LABELS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ'.split('');
export const NOUL_LABELS = ['Yes', 'No'] as const;

/** A question rendered for a language model; the answer is one of `labels`, in option order. */
export interface RenderedQuestion {
  system: string;
  user: string;
  labels: string[];
}

const SYSTEM =
  'You are a careful decision assistant. Read the state and the question, then answer with exactly one of the allowed labels and nothing else.';

/** How many options a question offers: a choice's labels, a score's levels, a noul's yes and no. */
export function optionCount(question: Question): number {
  switch (question.type) {
    case 'choice':
      return choiceLabels(question).length;
    case 'score':
      return question.criteria.length;
    case 'noul':
      return NOUL_LABELS.length;
  }
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
  switch (question.type) {
    case 'choice':
      return renderChoice(stateText, question, offered);
    case 'score':
      return renderScore(stateText, question, offered);
    case 'noul':
      return renderNoul(stateText, question);
  }
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

/** Every option of a question shown once: one prompt, or a choice of more than 26 options in groups. */
export function renderWhole(state: State, question: Question): RenderedQuestion[] {
  const all = Array.from({ length: optionCount(question) }, (_, i) => i);
  if (question.type !== 'choice') return [renderQuestion(state, question)];
  return groupsOf(all, CHOICE_LABELS.length).map((group) => renderQuestion(state, question, group));
}

function instructionsBlock(instructions: Content | null | undefined, fallback: string): string {
  const text = renderContent(instructions);
  return `# Question\n${text === '' ? fallback : text}`;
}

function renderChoice(
  stateText: string,
  question: ChoiceQuestion,
  offered: readonly number[],
): RenderedQuestion {
  if (offered.length > CHOICE_LABELS.length) {
    throw new RangeError(`a rendered choice takes at most ${CHOICE_LABELS.length} options`);
  }
  const names = choiceLabels(question);
  const labels = CHOICE_LABELS.slice(0, offered.length);
  const lines = offered.map((index, i) => {
    const option = names[index] as string;
    const description = renderContent(question.criteria[option]);
    return description === '' ? `${labels[i]}. ${option}` : `${labels[i]}. ${option}: ${description}`;
  });
  const user = [
    stateText,
    instructionsBlock(question.instructions, 'Which option fits the state best?'),
    `# Options\n${lines.join('\n')}`,
    `Answer with the letter of the best option (${labels[0]}–${labels[labels.length - 1]}) only.`,
  ].join('\n\n');
  return { system: SYSTEM, user, labels };
}

function renderScore(
  stateText: string,
  question: ScoreQuestion,
  offered: readonly number[],
): RenderedQuestion {
  const labels = offered.map(String);
  const lines = offered.map((level) => {
    const text = renderContent(question.criteria[level]);
    return text === '' ? `${level}.` : `${level}. ${text}`;
  });
  const whole = offered.length === question.criteria.length;
  const user = [
    stateText,
    instructionsBlock(question.instructions, 'Which level fits the state best?'),
    `# Levels (lowest first)\n${lines.join('\n')}`,
    whole
      ? `Answer with the level number (0–${question.criteria.length - 1}) only.`
      : `Answer with one of the level numbers ${labels.join(', ')} only.`,
  ].join('\n\n');
  return { system: SYSTEM, user, labels };
}

function renderNoul(stateText: string, question: NoulQuestion): RenderedQuestion {
  const criteria = question.criteria ?? {};
  const yes = renderContent(criteria.true) || DEFAULT_NOUL_CRITERIA.true;
  const no = renderContent(criteria.false) || DEFAULT_NOUL_CRITERIA.false;
  const user = [
    stateText,
    `# Statement\n${renderContent(question.instructions)}`,
    `# Criteria\nYes: ${yes}\nNo: ${no}`,
    'Is the statement true? Answer Yes or No only.',
  ].join('\n\n');
  return { system: SYSTEM, user, labels: [...NOUL_LABELS] };
}
