import { type EvaluationRequest, MODEL_ID, parseEvaluationRequest } from '@decision-gateway/contract';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalDecision } from './decision-key.ts';

const own = (entries: [string, unknown][]) => Object.fromEntries(entries);
const text = fc.string({ minLength: 1, maxLength: 30 });
const ids = fc.uniqueArray(fc.oneof(fc.constantFrom('__proto__', 'constructor', 'toString'), text), {
  minLength: 1,
  maxLength: 8,
});
const labels = fc.uniqueArray(fc.oneof(fc.constantFrom('__proto__', 'valueOf'), text), {
  minLength: 2,
  maxLength: 6,
});
const question = fc.oneof(
  labels.map((ls) => ({ type: 'choice', criteria: own(ls.map((l) => [l, `about ${l}`])) })),
  fc.array(text, { minLength: 2, maxLength: 6 }).map((levels) => ({ type: 'score', criteria: levels })),
  text.map((instructions) => ({ type: 'noul', instructions })),
);
const decision = fc
  .tuple(ids, fc.oneof(text, fc.dictionary(text, fc.jsonValue({ maxDepth: 2 }))))
  .chain(([questionIds, state]) =>
    fc.tuple(
      fc.constant(questionIds),
      fc.constant(state),
      fc.array(question, { minLength: questionIds.length, maxLength: questionIds.length }),
    ),
  )
  .map(([questionIds, state, questions]) => ({
    model: MODEL_ID,
    state,
    questions: own(questionIds.map((id, i) => [id, questions[i]])),
  }));

/** What the gateway hashes: the body as a caller sends it, parsed as the gateway parses it. */
function key(body: unknown): string {
  const parsed = parseEvaluationRequest(JSON.parse(typeof body === 'string' ? body : JSON.stringify(body)));
  if (!parsed.ok) throw new Error(parsed.error.message);
  return canonicalDecision(parsed.value as EvaluationRequest);
}

const shuffle = <T>(items: T[], seed: number) =>
  [...items].sort((a, b) => ((items.indexOf(a) * 7 + seed) % 5) - ((items.indexOf(b) * 7 + seed) % 5));

describe('canonicalDecision', () => {
  it('is the same whatever the whitespace and the order of question IDs', () => {
    fc.assert(
      fc.property(decision, fc.nat(), (body, seed) => {
        const reordered = { ...body, questions: own(shuffle(Object.entries(body.questions), seed)) };
        expect(key(JSON.stringify(reordered, null, 2))).toBe(key(body));
      }),
    );
  });

  it('changes with the order of a choice’s options or a score’s levels', () => {
    fc.assert(
      fc.property(decision, (body) => {
        for (const [id, q] of Object.entries(body.questions) as [
          string,
          { type: string; criteria?: unknown },
        ][]) {
          if (q.type === 'choice') {
            const reversed = own(Object.entries(q.criteria as object).reverse());
            // Integer-like labels ("0") always come first in a JS object: then the order the
            // gateway sees (and answers by) did not change, and neither may the key.
            if (Object.keys(reversed).join('\u0000') === Object.keys(q.criteria as object).join('\u0000'))
              continue;
            expect(
              key({ ...body, questions: { ...body.questions, [id]: { ...q, criteria: reversed } } }),
            ).not.toBe(key(body));
          }
          if (q.type === 'score') {
            const levels = q.criteria as string[];
            if (new Set(levels).size < 2) continue; // reversing equal levels changes nothing
            const reversed = [...levels].reverse();
            if (reversed.every((l, i) => l === levels[i])) continue;
            expect(
              key({ ...body, questions: { ...body.questions, [id]: { ...q, criteria: reversed } } }),
            ).not.toBe(key(body));
          }
        }
      }),
    );
  });

  it('changes with the state, an instruction, an ID or a question’s type', () => {
    fc.assert(
      fc.property(decision, text, (body, extra) => {
        const base = key(body);
        expect(key({ ...body, state: [body.state, extra] })).not.toBe(base);
        const [id, q] = Object.entries(body.questions)[0] as [string, Record<string, unknown>];
        expect(
          key({ ...body, questions: { ...body.questions, [id]: { ...q, instructions: `${extra}!` } } }),
        ).not.toBe(base);
        const renamed = own(Object.entries(body.questions).map(([k, v]) => [k === id ? `${id}_` : k, v]));
        if (!(`${id}_` in body.questions)) expect(key({ ...body, questions: renamed })).not.toBe(base);
      }),
    );
  });

  it('keeps __proto__ as an ordinary question ID', () => {
    const body = {
      model: MODEL_ID,
      state: 's',
      questions: JSON.parse('{"__proto__": {"type": "noul", "instructions": "yes?"}}'),
    };
    expect(key(body)).toContain('"__proto__"');
  });
});
