import { isOpenAiAsWritten } from '@decision-gateway/contract';
import type { ImageCapabilities, Upstream, UpstreamCall, UpstreamOutcome } from '@decision-gateway/questions';
import { invalidAnswer } from '../../invalid-answer.ts';
import { withImagesSpliced } from '../../json-body.ts';
import type { UpstreamHttp } from '../../upstream-http.ts';
import { byteBound } from '../systemone/systemone-upstream.ts';
import { decisionsBody, readDecision } from './wire.ts';

/** OpenAI rounds to two decimals: n values sum to 1 within max(0.02, n × 0.005). */
export const roundedTolerance = (n: number) => Math.max(0.02, n * 0.005);

/**
 * Any service speaking OpenAI's Decisions API (`POST {baseUrl}/decisions`): OpenAI's own, Fireworks.
 * It may decline a question (a refusal); its usage details reach OpenAI-door callers.
 */
export function createDecisionsUpstream(
  http: UpstreamHttp,
  options: { name: string; model: string; maxQuestions: number; capabilities: ImageCapabilities },
): Upstream {
  return {
    name: options.name,
    maxQuestions: options.maxQuestions,
    refuses: true,
    tolerance: roundedTolerance,
    capabilities: options.capabilities,
    usageBound: (request, bodyBytes, imageTokens) =>
      byteBound(request, bodyBytes, options.maxQuestions, imageTokens),
    async answer({
      request,
      requestId,
      deadlineAt,
      asWritten,
      trace,
      images,
    }: UpstreamCall): Promise<UpstreamOutcome> {
      // A request written in OpenAI's own dialect (its door) is sent as written, images and all.
      const original = isOpenAiAsWritten(asWritten) ? asWritten : undefined;
      const { body, ids } = decisionsBody(request, options.model, original, images);
      const questions = Object.keys(request.questions).length;
      // The caller's own images go in as bytes, not through JSON.stringify (json-body.ts).
      const payload = original ? withImagesSpliced(body, images) : body;
      const sent = await http.postJson('/decisions', payload, { requestId, deadlineAt, trace, questions });
      if (!sent.ok) return { ok: false, failure: sent.failure, detail: sent.detail, unwell: sent.unwell };
      // A caller's own questions may have no name: the API answers in question order.
      const read = readDecision(sent.body, ids, request, original !== undefined);
      if (!read.ok) return invalidAnswer(read.reason);
      return {
        ok: true,
        answers: read.answers,
        usage: read.usage,
        upstreamRequestId: sent.upstreamRequestId,
        ...(read.details && { usageDetails: read.details }),
      };
    },
    close: http.close,
  };
}
