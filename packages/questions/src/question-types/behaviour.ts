import type { AnswerOf, Box, QuestionOf, QuestionType, Truth } from '@decision-gateway/contract';
import type { Checked } from '../distribution-checks.ts';
import type { RenderedQuestion } from '../prompt.ts';

/**
 * What the gateway does with one type of question, wherever it must treat types differently:
 * render it for a chat upstream, check an upstream's answer, answer it lexically, tell whether an
 * answer is unsure, keep it in a decision record and judge a truth against it. One module per type
 * implements this (choice.ts, score.ts, noul.ts, box.ts); `index.ts` maps each type to its module.
 */
export interface QuestionBehaviour<T extends QuestionType> {
  /** How many options it offers a language model: a choice's labels, a score's levels, a noul's yes and no. */
  optionCount(question: QuestionOf<T>): number;
  /** Its prompt over the option indices `offered` (every option unless the upstream splits them). */
  render(stateText: string, question: QuestionOf<T>, offered: readonly number[]): RenderedQuestion;
  /** The answer from one weight per option (in option order); the weights are renormalised. */
  fromWeights(question: QuestionOf<T>, weights: readonly number[]): AnswerOf<T>;
  /** An upstream's answer (an object whose `type` matches), checked; else why it is unusable. */
  check(
    question: QuestionOf<T>,
    raw: Record<string, unknown>,
    tolerance: (n: number) => number,
  ): Checked<AnswerOf<T>>;
  /** The lexical baseline's BM25 score per option against the state's terms, before its softmax. */
  lexicalScores(query: readonly string[], question: QuestionOf<T>): number[];
  /**
   * Which threshold says its answers are unsure (docs/routes.md#escalation): `confidence` is
   * `confidenceBelow`, `band` is `noulWithin`. Calibration's advice searches the same one.
   */
  unsureBy: 'confidence' | 'band';
  /** One line of prose for an answer, for a reader that is not a program (the MCP door's text). */
  summarize(answer: AnswerOf<T>): string;
  /** Whether an answer is unsure by a route's rule (escalation, review). */
  unsure(answer: AnswerOf<T>, rule: UnsureRule): boolean;
  /** What a decision record keeps of the question itself, beside its answers (a choice: its labels). */
  keepQuestion(question: QuestionOf<T>): Pick<KeptQuestion, 'labels'>;
  /** What a decision record keeps of its answer (docs/outcomes.md): the distribution, in option order. */
  keep(question: QuestionOf<T>, answer: AnswerOf<T>): KeptDistribution;
  /** A truth reported for a kept question of this type: what it means, or why it does not fit. */
  judge(kept: KeptQuestion, truth: Truth): { ok: true; judged: Judged } | { ok: false; reason: string };
  /** How a kept answer fares against its truth, for calibration (docs/outcomes.md#calibration). */
  score(kept: KeptDistribution, truth: Judged): ScoredAnswer;
}

/** An unsure answer by a route's rule: confidence below a bound, or a noul within a band. */
export interface UnsureRule {
  confidenceBelow?: number;
  noulWithin?: readonly [number, number];
}

/** An answer's distribution as a decision record keeps it (stored JSON: fields only ever added). */
export interface KeptDistribution {
  /** choice and score: the probabilities in label or level order; noul: the probability of yes; box: its confidence. */
  p: number[] | number;
  /** box: where the upstream placed it. */
  box?: Box;
  confidence?: number;
  /** score: the expected level, Σ i·pᵢ. */
  score?: number;
}

/** One answer kept: its distribution and the upstream that gave it, by configured name. */
export interface KeptAnswer extends KeptDistribution {
  upstream: string;
  /** On a route that calibrates: the answer as the map (its id) made it; the raw one stays above. */
  calibrated?: KeptDistribution & { map: string };
}

export interface KeptQuestion extends KeptAnswer {
  type: QuestionType;
  /** choice: its labels, in the order of the question. */
  labels?: string[];
  /** choice through the OpenAI door: each label's value as the caller typed it (a string or a boolean). */
  values?: (string | boolean)[];
  /** The first upstream's answer, where a later one replaced it. */
  first?: KeptAnswer;
}

/** A truth as judged: the index of the true label or level, or the noul's boolean. */
export type Judged =
  | { type: 'choice' | 'score'; index: number }
  | { type: 'noul'; value: boolean }
  | { type: 'box'; box: Box };

/** One judged answer, as calibration counts it. */
export interface ScoredAnswer {
  /** The probability its reliability bin is chosen by. */
  binned: number;
  /** Whether the answer was right (its most likely option, or p ≥ 0.5 for a noul). */
  correct: boolean;
  /** What the bin observes: right, or for a noul, true. */
  observed: boolean;
  /** null for a box, whose answer is no distribution. */
  brier: number | null;
  logLoss: number | null;
  /** box: its intersection over union with the truth. */
  iou?: number;
  /** score: |expected level − truth|; other types have no mean absolute error. */
  absError?: number;
}
