/** The gateway's tRPC router type, for frontends that use tRPC's own links (types only). */
export type { AppRouter } from '@decision-gateway/api';
export type {
  AnswerOf,
  AnswersOf,
  BoxAnswerOf,
  BoxEdges,
  ChoiceAnswerOf,
  Evaluation,
  EvaluationMeta,
  LevelIndex,
  LevelNumber,
  NoulAnswerOf,
  OutcomesOf,
  ScoreAnswerOf,
  TruthOf,
} from './answers.ts';
export {
  type BoxDefinition,
  box,
  type ChoiceDefinition,
  choice,
  type ImageAssetDefinition,
  image,
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
