import { failure, type GatewayFailure } from '@decision-gateway/contract';

/**
 * An upstream's answer the gateway cannot use (docs/upstreams.md): 502 for the caller, and the
 * reason for the logs. It proves the upstream is up, so it never counts against its circuit.
 */
export const invalidAnswer = (reason: string): { ok: false; failure: GatewayFailure; detail: string } => ({
  ok: false,
  failure: failure('upstream_error', `the upstream returned an invalid answer: ${reason}`),
  detail: reason,
});
