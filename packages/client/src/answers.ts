import type { EvaluationResult, Usage } from '@decision-gateway/contract';
import type { ChoiceDefinition, QuestionDefinition, ScoreDefinition } from './builders.ts';

/** "0" | "1" | … for a tuple of levels; any index string for an array of unknown length. */
export type LevelIndex<Levels extends readonly unknown[]> = number extends Levels['length']
  ? `${number}`
  : Exclude<keyof Levels, keyof unknown[]> & string;

export interface ChoiceAnswerOf<Label extends string> {
  type: 'choice';
  choice: Label;
  confidence: number;
  probabilities: { [L in Label]: number };
}

export interface ScoreAnswerOf<Levels extends readonly unknown[]> {
  type: 'score';
  score: number;
  confidence: number;
  legend: { [I in LevelIndex<Levels>]: I extends keyof Levels ? Levels[I] : Levels[number] };
  probabilities: { [I in LevelIndex<Levels>]: number };
}

export interface NoulAnswerOf {
  type: 'noul';
  noul: number;
}

/** Fractions of the image from its top-left corner: `top ≤ bottom`, `left ≤ right`. */
export interface BoxEdges {
  top: number;
  bottom: number;
  left: number;
  right: number;
}

export interface BoxAnswerOf {
  type: 'box';
  box: BoxEdges;
  confidence: number;
}

/** The answer a question definition gets back, typed from the definition itself. */
export type AnswerOf<Q> =
  Q extends ChoiceDefinition<infer Criteria>
    ? ChoiceAnswerOf<keyof Criteria & string>
    : Q extends ScoreDefinition<infer Levels>
      ? ScoreAnswerOf<Levels>
      : Q extends { type: 'noul' }
        ? NoulAnswerOf
        : Q extends { type: 'box' }
          ? BoxAnswerOf
          : never;

/** One typed answer per question ID sent, and no others. */
export type AnswersOf<Questions extends Record<string, QuestionDefinition>> = {
  [Id in keyof Questions]: AnswerOf<Questions[Id]>;
};

/** What the gateway said about a call in its response headers. */
export interface EvaluationMeta {
  /** `x-request-id`: name it when you report a problem. */
  requestId: string;
  /** `x-dg-route`: the route the request took. */
  route: string | null;
  /** `x-dg-upstream`: the upstream that answered, `first+escalated` after an escalation. */
  upstream: string | null;
  /** `x-dg-cache`: on a route with a decision cache. */
  cache: 'hit' | 'miss' | 'bypass' | null;
}

/** What `client.evaluate` resolves to: the success `data` with answers typed per question. */
export interface Evaluation<Questions extends Record<string, QuestionDefinition>> {
  result: Omit<EvaluationResult, 'answers' | 'usage'> & { answers: AnswersOf<Questions>; usage: Usage };
  /** Credits debited from the key: the client always sends one, so the gateway always reports it. */
  creditsUsed: number;
  /** On a route that reviews (docs/review.md): the questions whose answers were marked for a person. */
  review: (keyof Questions & string)[];
  meta: EvaluationMeta;
}

/** A level index as a number: 0 | 1 | 2 for a tuple of three levels; any number for an array of unknown length. */
export type LevelNumber<Levels extends readonly unknown[]> =
  LevelIndex<Levels> extends `${infer N extends number}` ? N : never;

/**
 * What turned out true for a question (docs/outcomes.md): a choice one of its
 * labels, a score a level index, a noul a boolean, a box where the thing really was.
 */
export type TruthOf<Q> =
  Q extends ChoiceDefinition<infer Criteria>
    ? keyof Criteria & string
    : Q extends ScoreDefinition<infer Levels>
      ? LevelNumber<Levels>
      : Q extends { type: 'noul' }
        ? boolean
        : Q extends { type: 'box' }
          ? BoxEdges
          : never;

/** Outcomes for some of a decision's questions, each typed by its question. */
export type OutcomesOf<Questions extends Record<string, QuestionDefinition>> = {
  [Id in keyof Questions]?: TruthOf<Questions[Id]>;
};
