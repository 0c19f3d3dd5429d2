export type {
  AnswerOf,
  AnswersOf,
  ChoiceAnswerOf,
  Evaluation,
  EvaluationMeta,
  LevelIndex,
  NoulAnswerOf,
  ScoreAnswerOf,
} from './answers.ts';
export {
  type ChoiceDefinition,
  choice,
  type NoulCriteria,
  type NoulDefinition,
  noul,
  type QuestionContent,
  type QuestionDefinition,
  type ScoreDefinition,
  score,
} from './builders.ts';
export {
  createGatewayClient,
  type EvaluateRequest,
  type GatewayClient,
  type GatewayClientOptions,
  type RetryOptions,
} from './client.ts';
export { GatewayError, GatewayNetworkError } from './errors.ts';
