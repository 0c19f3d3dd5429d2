import { ERROR_TABLE, ERROR_TYPES, failure } from '@decision-gateway/contract';
import { TRPCError } from '@trpc/server';
import { getHTTPStatusCodeFromError } from '@trpc/server/http';
import { describe, expect, it } from 'vitest';
import { failureOfTrpcError, MAX_BATCH_OPERATIONS, toTrpcError, trpcErrorBody } from './errors.ts';

describe('gateway failures through tRPC', () => {
  // 431 is answered below the router, before tRPC sees a request; tRPC has no code for it.
  const typed = ERROR_TYPES.filter((type) => type !== 'headers_too_large');

  it.each(typed)('%s keeps its HTTP status and comes back as itself', (type) => {
    const original = failure(type, `a ${type}`, { retryAfterMs: 1500 });
    const error = toTrpcError(original, 'req_1');
    expect(getHTTPStatusCodeFromError(error)).toBe(ERROR_TABLE[type].status);
    expect(failureOfTrpcError(error)).toEqual(original);
  });

  it("maps tRPC's own batch-size refusal to 40001 naming the limit", () => {
    const refused = new TRPCError({ code: 'BAD_REQUEST', message: 'Batch call exceeds maximum size' });
    expect(failureOfTrpcError(refused)).toMatchObject({
      code: 40001,
      message: `a batch holds at most ${MAX_BATCH_OPERATIONS} operations`,
    });
  });

  it('never shows the detail of an unexpected error', () => {
    const unexpected = new TRPCError({ code: 'INTERNAL_SERVER_ERROR', message: 'secret at /srv/db' });
    expect(failureOfTrpcError(unexpected)).toMatchObject({ code: 50000, message: 'internal error' });
  });

  it('writes the body a tRPC client reads, with the gateway code and request id in data', () => {
    const body = JSON.parse(
      trpcErrorBody(failure('rate_limited', 'slow down', { retryAfterMs: 900 }), 'req_9'),
    );
    expect(body).toEqual({
      error: {
        message: 'slow down',
        code: -32029,
        data: { code: 42900, type: 'rate_limited', httpStatus: 429, retryAfterMs: 900, requestId: 'req_9' },
      },
    });
  });
});
