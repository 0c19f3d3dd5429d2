import type {
  CreatedToken,
  CreateTokenBody,
  EvaluationData,
  EvaluationRequest,
  ModelList,
  RecordedOutcomes,
  RecordOutcomesBody,
} from '@decision-gateway/contract';
import { initTRPC } from '@trpc/server';
import type { ApiContext, Operation, OperationResult } from './context.ts';
import {
  failureOfTrpcError,
  type GatewayErrorData,
  gatewayErrorData,
  requestIdOfTrpcError,
  toTrpcError,
} from './errors.ts';

const t = initTRPC.context<ApiContext>().create({
  errorFormatter({ shape, error, ctx }) {
    const gatewayFailure = failureOfTrpcError(error);
    const requestId = requestIdOfTrpcError(error) ?? ctx?.requestId;
    const data: GatewayErrorData = gatewayErrorData(gatewayFailure, requestId, shape.data.path);
    return { message: gatewayFailure.message, code: shape.code, data };
  },
});

/** The operation's data, or its gateway failure as a TRPCError carrying the operation's request id. */
function unwrap<T>(result: OperationResult<T>): T {
  if (!result.ok) throw toTrpcError(result.failure, result.requestId);
  return result.data;
}

/**
 * Runs a whole operation in the server's core before tRPC reads the input, so authentication and
 * the rate limit come before the body's media type and JSON (docs/http-api.md#errors), as on REST. The core
 * validates the input with the contract; `.input()` below only declares its type to clients.
 */
const operation = <T>(run: (ctx: ApiContext, op: Operation) => Promise<OperationResult<T>>) =>
  t.procedure.use(async ({ ctx, getRawInput, batchIndex, next }) => {
    const data = unwrap(await run(ctx, { batchIndex, readInput: getRawInput }));
    return next({ ctx: { data } });
  });

/** The core already validated the input: this only gives it its type. */
const evaluateInput = (input: unknown) => input as EvaluationRequest;

export const appRouter = t.router({
  evaluate: operation((ctx, op) => ctx.evaluate(op))
    .input(evaluateInput)
    .mutation(({ ctx }): EvaluationData => ctx.data),
  models: operation((ctx, op) => ctx.listModels(op)).query(({ ctx }): ModelList => ctx.data),
  outcomes: t.router({
    record: operation((ctx, op) => ctx.recordOutcomes(op))
      .input((input: unknown) => input as RecordOutcomesBody)
      .mutation(({ ctx }): RecordedOutcomes => ctx.data),
  }),
  tokens: t.router({
    create: operation((ctx, op) => ctx.createToken(op))
      .input((input: unknown) => input as CreateTokenBody | undefined)
      .mutation(({ ctx }): CreatedToken => ctx.data),
  }),
});

/** Import with `import type` only: clients get the types, never the server code. */
export type AppRouter = typeof appRouter;
