import { isPlainObject } from '@decision-gateway/contract';
import type { EnvelopeReading } from '../../upstream-http.ts';

/**
 * Cloudflare Workers AI's envelope around a System One body (Clef, docs/upstreams.md#cloudflares-clef):
 * `{"result": <native body>, "success": true|false, "errors": [{"code", "message"}], "messages": […]}`.
 * `success: false` is a failure even on a 2xx, read from its first error's code.
 */
export function openCloudflareEnvelope(status: number, body: unknown): EnvelopeReading | undefined {
  if (!isPlainObject(body) || typeof body.success !== 'boolean') return undefined;
  if (body.success && status >= 200 && status < 300) return { kind: 'answer', body: body.result };
  const first = Array.isArray(body.errors) && isPlainObject(body.errors[0]) ? body.errors[0] : {};
  const code = typeof first.code === 'number' ? first.code : undefined;
  const said = typeof first.message === 'string' ? first.message.slice(0, 500) : 'no message';
  const reason = `Cloudflare error ${code ?? 'without a code'}: ${said}`;
  switch (code) {
    case CLOUDFLARE_ERRORS.schema:
      // The caller's input broke the model's schema: the caller should know why (40001).
      return { kind: 'refused', status: 400, reason };
    case CLOUDFLARE_ERRORS.dailyAllocation:
      // The account's allocation for the day is spent: asking again will not help (502).
      return { kind: 'refused', status: 502, reason };
    case CLOUDFLARE_ERRORS.outOfCapacity:
      // Busy for now: retried, then 503 with Retry-After.
      return { kind: 'busy', status: 503, reason };
    default:
      return { kind: 'refused', status: 502, reason };
  }
}

/** The error codes of Workers AI that the gateway tells apart. */
export const CLOUDFLARE_ERRORS = { schema: 5006, dailyAllocation: 3036, outOfCapacity: 3040 } as const;
