import type { NoulAnswer } from '@decision-gateway/contract';
import { normalize, probability } from '../distribution.ts';
import { fail, isProbability } from '../distribution-checks.ts';
import { bm25Scores } from '../lexical/bm25.ts';
import { terms } from '../lexical/terms.ts';
import { NOUL_LABELS, renderContent, SYSTEM_PROMPT } from '../prompt.ts';
import type { QuestionBehaviour } from './behaviour.ts';

/** The criteria a noul question reads when the caller gives none (or leaves one side out). */
export const DEFAULT_NOUL_CRITERIA = {
  true: 'The statement is true given the state.',
  false: 'The statement is false given the state.',
} as const;

/**
 * A statement needs evidence: with no overlap at all the lexical baseline leans a noul to "false"
 * (≈ 0.38), and one distinctive term shared with the state tips it above 0.5.
 */
export const NOUL_EVIDENCE_BIAS = 0.25;

const EPSILON = 1e-15;

/** A noul answer from the weights of "true" and "false". */
export function noulFromWeights(trueWeight: number, falseWeight: number): NoulAnswer {
  const [pTrue] = normalize([trueWeight, falseWeight]);
  return { type: 'noul', noul: pTrue as number };
}

export const noul: QuestionBehaviour<'noul'> = {
  optionCount: () => NOUL_LABELS.length,

  render(stateText, question) {
    const criteria = question.criteria ?? {};
    const yes = renderContent(criteria.true) || DEFAULT_NOUL_CRITERIA.true;
    const no = renderContent(criteria.false) || DEFAULT_NOUL_CRITERIA.false;
    const user = [
      stateText,
      `# Statement\n${renderContent(question.instructions)}`,
      `# Criteria\nYes: ${yes}\nNo: ${no}`,
      'Is the statement true? Answer Yes or No only.',
    ].join('\n\n');
    return { system: SYSTEM_PROMPT, user, labels: [...NOUL_LABELS] };
  },

  fromWeights: (_question, weights) => noulFromWeights(weights[0] ?? 0, weights[1] ?? 0),

  summarize: (answer) => `${answer.noul >= 0.5} (p(true)=${probability(answer.noul)})`,

  check: (_question, raw) =>
    isProbability(raw.noul)
      ? { ok: true, value: { type: 'noul', noul: raw.noul } }
      : fail(`.noul: ${JSON.stringify(raw.noul)} is not a probability in [0, 1]`),

  lexicalScores(query, question) {
    // The statement itself describes "true"; the state is what it is tested against.
    const criteria = question.criteria ?? {};
    const trueSide = terms(`${renderContent(question.instructions)}\n${renderContent(criteria.true)}`);
    const falseSide = terms(renderContent(criteria.false));
    const [forTrue = 0, forFalse = 0] = bm25Scores(query, [trueSide, falseSide]);
    return [forTrue - NOUL_EVIDENCE_BIAS, forFalse];
  },

  unsureBy: 'band',
  unsure: (answer, { noulWithin }) =>
    noulWithin !== undefined && answer.noul >= noulWithin[0] && answer.noul <= noulWithin[1],

  keepQuestion: () => ({}),

  keep: (_question, answer) => ({ p: answer.noul }),

  judge: (_kept, truth) =>
    typeof truth === 'boolean'
      ? { ok: true, judged: { type: 'noul', value: truth } }
      : { ok: false, reason: 'the truth of a noul is true or false' },

  score(kept, truth) {
    const p = kept.p as number;
    const value = truth.type === 'noul' && truth.value;
    const y = value ? 1 : 0;
    const clamped = Math.min(1 - EPSILON, Math.max(EPSILON, p));
    return {
      binned: p,
      correct: p >= 0.5 === value,
      observed: value,
      brier: (p - y) ** 2,
      logLoss: -(y * Math.log(clamped) + (1 - y) * Math.log(1 - clamped)),
    };
  },
};
