export type { ApiContext, Operation, OperationResult } from './context.ts';
export {
  failureOfTrpcError,
  type GatewayErrorData,
  gatewayErrorData,
  MAX_BATCH_OPERATIONS,
  trpcErrorBody,
} from './errors.ts';
export { type AppRouter, appRouter } from './router.ts';
