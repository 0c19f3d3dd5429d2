import type { Content, State } from '@decision-gateway/contract';

/** The text a language model reads: content as text, and the pieces every question's prompt shares. */

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

/** Labels a language model answers with: each is a single token in common BPE vocabularies. */
export const CHOICE_LABELS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ'.split('');
export const NOUL_LABELS = ['Yes', 'No'] as const;

/** A question rendered for a language model; the answer is one of `labels`, in option order. */
export interface RenderedQuestion {
  system: string;
  user: string;
  labels: string[];
}

export const SYSTEM_PROMPT =
  'You are a careful decision assistant. Read the state and the question, then answer with exactly one of the allowed labels and nothing else.';

export function instructionsBlock(instructions: Content | null | undefined, fallback: string): string {
  const text = renderContent(instructions);
  return `# Question\n${text === '' ? fallback : text}`;
}
