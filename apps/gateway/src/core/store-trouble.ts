import { failure, type GatewayFailure } from '@decision-gateway/contract';
import { StoreUnavailableError } from '../store/store.ts';

/**
 * Storage trouble as the caller sees it (docs/operating.md): 503 / 50300 with Retry-After, on every door,
 * never a 500. Undefined for any other error.
 */
export function storeTroubleFailure(error: unknown): GatewayFailure | undefined {
  if (!(error instanceof StoreUnavailableError)) return undefined;
  return failure('unavailable', 'the gateway cannot reach its database now; try again shortly', {
    retryAfterMs: error.retryAfterMs,
  });
}
