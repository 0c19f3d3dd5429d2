import type {
  CreatedToken,
  EvaluationData,
  GatewayFailure,
  ModelList,
  RecordedOutcomes,
} from '@decision-gateway/contract';

/** One tRPC operation: its place in the batch and its input, read only when the core asks. */
export interface Operation {
  batchIndex: number;
  /**
   * The operation's input as the client sent it. Read lazily, after authentication and the rate
   * limit, so the order of docs/http-api.md#errors holds; rejects when the body is not JSON.
   */
  readInput(): Promise<unknown>;
}

/** What an operation came to: its data, or a gateway failure with the request id it was given. */
export type OperationResult<T> =
  | { ok: true; data: T }
  | { ok: false; failure: GatewayFailure; requestId: string };

/**
 * What the router needs of the server for one HTTP request. The gateway implements it; the router
 * only translates between tRPC and these calls. In a batch every operation is its own evaluation.
 */
export interface ApiContext {
  /** The HTTP request's id: errors raised before any operation starts carry it. */
  requestId: string;
  evaluate(operation: Operation): Promise<OperationResult<EvaluationData>>;
  listModels(operation: Operation): Promise<OperationResult<ModelList>>;
  /** Mints a short-lived browser token for the calling API key (docs/browsers.md). */
  createToken(operation: Operation): Promise<OperationResult<CreatedToken>>;
  /** Records what turned out true for a decision of the calling key (docs/outcomes.md). */
  recordOutcomes(operation: Operation): Promise<OperationResult<RecordedOutcomes>>;
}
