import {
  type Answer,
  type ChoiceQuestion,
  isPlainObject,
  type Question,
  type Questions,
  type ScoreQuestion,
  type Usage,
} from '@decision-gateway/contract';
import { choiceLabels, scoreLegend } from './answers.ts';
import { choiceConfidence, scoreConfidence } from './distribution.ts';

/** How far an upstream's probabilities may sum from 1 (docs/upstreams.md). */
export const SUM_TOLERANCE = 0.02;

export type Checked<T> = { ok: true; value: T } | { ok: false; reason: string };

const isProbability = (x: unknown): x is number => typeof x === 'number' && x >= 0 && x <= 1;
const fail = (reason: string): Checked<never> => ({ ok: false, reason });

const defaultTolerance = () => SUM_TOLERANCE;
const NO_OPTIONS: CheckOptions = {};

export interface CheckOptions {
  /**
   * The upstream may decline a question (`{"type": "refusal"}`): its ID is returned in `refused`
   * rather than failing the answers (docs/routes.md#refused-questions).
   */
  refusals?: boolean;
  /** How far a distribution of `n` values may sum from 1 (default SUM_TOLERANCE). */
  tolerance?: (n: number) => number;
}

/** Checked answers: one per question answered, and the IDs of the questions the upstream declined. */
export interface CheckedDecision {
  answers: Record<string, Answer>;
  refused: string[];
}

/**
 * The checks every answer passes before it reaches a caller (docs/upstreams.md), whichever
 * upstream made it: every question answered (or, where `refusals` allows, declined), answers for
 * IDs not asked dropped, a missing confidence computed as docs/http-api.md#answers says; else the
 * first precise reason the answers are unusable.
 */
export function checkDecision(
  questions: Questions,
  raw: unknown,
  options: CheckOptions = NO_OPTIONS,
): Checked<CheckedDecision> {
  if (!isPlainObject(raw)) return fail('answers: not an object');
  const tolerance = options.tolerance ?? defaultTolerance;
  const checked: [string, Answer][] = [];
  const refused: string[] = [];
  for (const id of Object.keys(questions)) {
    const question = questions[id] as Question;
    if (!Object.hasOwn(raw, id)) return fail(`answers.${id}: missing`);
    const given = raw[id];
    if (options.refusals && isPlainObject(given) && given.type === 'refusal') {
      refused.push(id);
      continue;
    }
    const answer = checkAnswer(question, given, tolerance);
    if (!answer.ok) return fail(`answers.${id}${answer.reason}`);
    checked.push([id, answer.value]);
  }
  // fromEntries keeps IDs such as "__proto__" as ordinary own keys.
  return { ok: true, value: { answers: Object.fromEntries(checked), refused } };
}

/** `checkDecision` for an upstream that never declines: the answers alone. */
export function checkAnswers(questions: Questions, raw: unknown): Checked<Record<string, Answer>> {
  const checked = checkDecision(questions, raw);
  return checked.ok ? { ok: true, value: checked.value.answers } : checked;
}

function checkAnswer(question: Question, raw: unknown, tolerance: (n: number) => number): Checked<Answer> {
  if (!isPlainObject(raw)) return fail(': not an object');
  if (raw.type !== question.type) {
    return fail(`.type: ${JSON.stringify(raw.type)} answers a ${question.type} question`);
  }
  switch (question.type) {
    case 'choice':
      return checkChoice(question, raw, tolerance);
    case 'score':
      return checkScore(question, raw, tolerance);
    case 'noul':
      return isProbability(raw.noul)
        ? { ok: true, value: { type: 'noul', noul: raw.noul } }
        : fail(`.noul: ${JSON.stringify(raw.noul)} is not a probability in [0, 1]`);
  }
}

/** Every key present, each a probability, nothing else, summing to 1 within the tolerance. */
function checkDistribution(
  raw: unknown,
  keys: readonly string[],
  what: string,
  tolerance: (n: number) => number,
): Checked<number[]> {
  if (!isPlainObject(raw)) return fail('.probabilities: not an object');
  const expected = new Set(keys);
  for (const key of Object.keys(raw)) {
    if (!expected.has(key))
      return fail(`.probabilities: ${JSON.stringify(key)} is not a ${what} of the question`);
  }
  const values: number[] = [];
  for (const key of keys) {
    if (!Object.hasOwn(raw, key)) return fail(`.probabilities: ${what} ${JSON.stringify(key)} is missing`);
    const p = raw[key];
    if (!isProbability(p))
      return fail(`.probabilities.${key}: ${JSON.stringify(p)} is not a probability in [0, 1]`);
    values.push(p);
  }
  const sum = values.reduce((a, b) => a + b, 0);
  if (Math.abs(sum - 1) > tolerance(keys.length)) return fail(`.probabilities: sum to ${sum}, not 1`);
  return { ok: true, value: values };
}

function checkConfidence(raw: unknown, computed: () => number): Checked<number> {
  if (raw === undefined) return { ok: true, value: computed() };
  return isProbability(raw)
    ? { ok: true, value: raw }
    : fail(`.confidence: ${JSON.stringify(raw)} is not in [0, 1]`);
}

function checkChoice(
  question: ChoiceQuestion,
  raw: Record<string, unknown>,
  tolerance: (n: number) => number,
): Checked<Answer> {
  const labels = choiceLabels(question);
  const p = checkDistribution(raw.probabilities, labels, 'label', tolerance);
  if (!p.ok) return p;
  if (typeof raw.choice !== 'string' || !Object.hasOwn(question.criteria, raw.choice)) {
    return fail(`.choice: ${JSON.stringify(raw.choice)} is not a label of the question`);
  }
  const confidence = checkConfidence(raw.confidence, () => choiceConfidence(p.value));
  if (!confidence.ok) return confidence;
  return {
    ok: true,
    value: {
      type: 'choice',
      choice: raw.choice,
      confidence: confidence.value,
      probabilities: Object.fromEntries(labels.map((label, i) => [label, p.value[i] as number])),
    },
  };
}

function checkScore(
  question: ScoreQuestion,
  raw: Record<string, unknown>,
  tolerance: (n: number) => number,
): Checked<Answer> {
  const n = question.criteria.length;
  const levels = Array.from({ length: n }, (_, i) => String(i));
  const p = checkDistribution(raw.probabilities, levels, 'level', tolerance);
  if (!p.ok) return p;
  if (typeof raw.score !== 'number' || !(raw.score >= 0 && raw.score <= n - 1)) {
    return fail(`.score: ${JSON.stringify(raw.score)} is not in [0, ${n - 1}]`);
  }
  const confidence = checkConfidence(raw.confidence, () => scoreConfidence(p.value));
  if (!confidence.ok) return confidence;
  return {
    ok: true,
    value: {
      type: 'score',
      score: raw.score,
      confidence: confidence.value,
      legend: scoreLegend(question),
      probabilities: Object.fromEntries(levels.map((level, i) => [level, p.value[i] as number])),
    },
  };
}

/** The largest token count an upstream may report (docs/http-api.md#credits): a 32-bit signed integer. */
export const MAX_TOKEN_COUNT = 2 ** 31 - 1;

/** Usage an upstream reports: both counts present, integers from 0 to 2³¹−1 (else it can't be billed). */
export function checkUsage(raw: unknown): Checked<Usage> {
  if (!isPlainObject(raw)) return fail('usage: missing or not an object');
  const { input_tokens, output_tokens } = raw;
  for (const [name, value] of [
    ['input_tokens', input_tokens],
    ['output_tokens', output_tokens],
  ] as const) {
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > MAX_TOKEN_COUNT) {
      return fail(`usage.${name}: ${JSON.stringify(value)} is not an integer from 0 to ${MAX_TOKEN_COUNT}`);
    }
  }
  return {
    ok: true,
    value: { input_tokens: input_tokens as number, output_tokens: output_tokens as number },
  };
}
