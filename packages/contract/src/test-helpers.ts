import { MODEL_ID } from './limits.ts';

/** A valid request to mutate in tests: one question of each type. */
export function validRequest(): Record<string, unknown> {
  return {
    model: MODEL_ID,
    state: { ticket: 'I was charged twice for my order and want a refund.' },
    questions: {
      triage: { type: 'choice', criteria: { billing: 'payments, refunds', technical: 'bugs, crashes' } },
      urgency: { type: 'score', instructions: 'How urgent is it?', criteria: ['not urgent', 'soon', 'now'] },
      refund: { type: 'noul', instructions: 'Is this a refund request?' },
    },
  };
}

/** `count` noul questions keyed q0, q1, …. */
export function nouls(count: number): Record<string, unknown> {
  return Object.fromEntries(
    Array.from({ length: count }, (_, i) => [`q${i}`, { type: 'noul', instructions: `statement ${i}` }]),
  );
}

/** A choice criteria object with `count` options. */
export function options(count: number): Record<string, string | null> {
  return Object.fromEntries(
    Array.from({ length: count }, (_, i) => [`option ${i}`, i % 2 ? null : `about ${i}`]),
  );
}
