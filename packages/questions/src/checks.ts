import {
  type Answer,
  isPlainObject,
  type Question,
  type Questions,
  type Usage,
} from '@decision-gateway/contract';
import { type Checked, fail, SUM_TOLERANCE } from './distribution-checks.ts';
import { behaviourOf } from './question-types/index.ts';

export { type Checked, SUM_TOLERANCE } from './distribution-checks.ts';

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
  return behaviourOf(question).check(question, raw, tolerance);
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
