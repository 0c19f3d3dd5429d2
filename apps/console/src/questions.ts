import { unreachable } from '@decision-gateway/contract/limits';

/** The playground's question editor, as data: what the form holds, and the request it makes. */
export type EditorQuestion =
  | { id: string; type: 'choice'; instructions: string; options: string }
  | { id: string; type: 'score'; instructions: string; levels: string }
  | { id: string; type: 'noul'; instructions: string }
  | { id: string; type: 'box'; instructions: string };

/** The question the playground opens with, so Ask works at once (docs/console.md). */
export const EXAMPLE_QUESTION: EditorQuestion = {
  id: 'team',
  type: 'choice',
  instructions: 'Which team should handle this ticket?',
  options: 'billing: payments, refunds\ntechnical: bugs, crashes\nsales: pricing, plans',
};

export const EXAMPLE_STATE = 'I was charged twice for my order last week. Please refund the double charge.';

/** A fresh question of a type, keeping its ID and instructions. */
export function retype(question: EditorQuestion, type: EditorQuestion['type']): EditorQuestion {
  const { id, instructions } = question;
  switch (type) {
    case 'choice':
      return { id, type, instructions, options: 'yes: it does\nno: it does not' };
    case 'score':
      return { id, type, instructions, levels: 'low\nmedium\nhigh' };
    case 'noul':
    case 'box':
      return { id, type, instructions };
    default:
      return unreachable(type);
  }
}

type Built = { ok: true; questions: Record<string, unknown> } | { ok: false; problem: string };

/**
 * The editor's questions as a request's `questions`: choice options one per line as
 * `label: description`, score levels one per line, lowest first. The gateway still validates;
 * this only catches what the form can say plainly.
 */
export function buildQuestions(editor: readonly EditorQuestion[]): Built {
  const questions: Record<string, unknown> = {};
  for (const question of editor) {
    const id = question.id.trim();
    if (id === '') return { ok: false, problem: 'every question needs an ID' };
    if (Object.hasOwn(questions, id)) return { ok: false, problem: `the ID "${id}" is used twice` };
    const built = buildQuestion(id, question);
    if (!built.ok) return built;
    questions[id] = built.question;
  }
  if (editor.length === 0) return { ok: false, problem: 'ask at least one question' };
  return { ok: true, questions };
}

/** One editor question as the gateway's, or what the form got wrong. */
function buildQuestion(
  id: string,
  question: EditorQuestion,
): { ok: true; question: unknown } | { ok: false; problem: string } {
  const instructions = question.instructions.trim();
  switch (question.type) {
    case 'choice': {
      const criteria: Record<string, string | null> = {};
      for (const line of question.options
        .split('\n')
        .map((l) => l.trim())
        .filter(Boolean)) {
        const colon = line.indexOf(':');
        const label = (colon === -1 ? line : line.slice(0, colon)).trim();
        criteria[label] = colon === -1 ? null : line.slice(colon + 1).trim() || null;
      }
      if (Object.keys(criteria).length < 2)
        return { ok: false, problem: `${id}: a choice needs at least 2 options` };
      return { ok: true, question: { type: 'choice', ...(instructions && { instructions }), criteria } };
    }
    case 'score': {
      const levels = question.levels
        .split('\n')
        .map((l) => l.trim())
        .filter(Boolean);
      if (levels.length < 2) return { ok: false, problem: `${id}: a score needs at least 2 levels` };
      return {
        ok: true,
        question: { type: 'score', ...(instructions && { instructions }), criteria: levels },
      };
    }
    case 'noul':
      if (instructions === '') return { ok: false, problem: `${id}: a noul needs its statement` };
      return { ok: true, question: { type: 'noul', instructions } };
    case 'box':
      if (instructions === '') return { ok: false, problem: `${id}: a box needs to say what to find` };
      return { ok: true, question: { type: 'box', instructions } };
    default:
      return unreachable(question);
  }
}

/** The ref the playground gives the image it sends: the state or instructions mention it. */
export const IMAGE_REF = 'photo';
