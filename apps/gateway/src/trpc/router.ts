import {
  type EvaluationData,
  type EvaluationRequest,
  type GatewayFailure,
  MODELS,
  type ModelList,
} from '@decision-gateway/contract';
import { initTRPC } from '@trpc/server';
import type { EvaluationOutcome } from '../core/evaluate.ts';
import { failureOfTrpcError, type GatewayErrorData, gatewayErrorData, toTrpcError } from './errors.ts';

/** What each tRPC call knows about its HTTP request; the gateway's work is behind two functions. */
export interface TrpcContext {
  requestId: string;
  /** Runs the shared evaluation core on the parsed input. */
  evaluate(input: unknown): Promise<EvaluationOutcome>;
  /** Checks the API key the same way REST does: the failure, or undefined when the key is good. */
  authenticate(): Promise<GatewayFailure | undefined>;
}

const t = initTRPC.context<TrpcContext>().create({
  errorFormatter({ shape, error, ctx }) {
    const gatewayFailure = failureOfTrpcError(error);
    const data: GatewayErrorData = gatewayErrorData(gatewayFailure, ctx?.requestId, shape.data.path);
    return { message: gatewayFailure.message, code: shape.code, data };
  },
});

/**
 * The input is not validated here: the evaluation core validates it with the contract in SPEC §4's
 * precedence (40002 → 40003 → 40001), exactly as on REST. The function only declares its type.
 */
const evaluateInput = (input: unknown) => input as EvaluationRequest;

export const appRouter = t.router({
  // `POST /trpc/evaluate` is answered by the door's fast path (trpc-routes.ts) with the same core;
  // this procedure serves the resolver's other ways in and gives clients the type.
  evaluate: t.procedure.input(evaluateInput).mutation(async ({ ctx, input }): Promise<EvaluationData> => {
    const outcome = await ctx.evaluate(input);
    if (!outcome.ok) throw toTrpcError(outcome.failure);
    return outcome.data;
  }),
  models: t.procedure.query(async ({ ctx }): Promise<ModelList> => {
    const refused = await ctx.authenticate();
    if (refused) throw toTrpcError(refused);
    return MODELS;
  }),
});

/** Import with `import type` only: clients get the types, never the server code. */
export type AppRouter = typeof appRouter;
