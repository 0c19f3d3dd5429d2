import { isGeminiAsWritten } from '@decision-gateway/contract';
import type { ImageCapabilities, Upstream, UpstreamCall, UpstreamOutcome } from '@decision-gateway/questions';
import { invalidAnswer } from '../../invalid-answer.ts';
import { withImagesSpliced } from '../../json-body.ts';
import type { UpstreamHttp } from '../../upstream-http.ts';
import { byteBound } from '../systemone/systemone-upstream.ts';
import { decisionBody, readDecision } from './wire.ts';

/**
 * Google's Gemini Decisions API (`POST {baseUrl}/{apiVersion}/decisions`): the questions as a map
 * keyed by the gateway's IDs, images after the state. A blocked input declines every question.
 */
export function createGeminiUpstream(
  http: UpstreamHttp,
  options: {
    name: string;
    model: string;
    apiVersion: string;
    maxQuestions: number;
    capabilities: ImageCapabilities;
  },
): Upstream {
  const path = `/${options.apiVersion}/decisions`;
  return {
    name: options.name,
    maxQuestions: options.maxQuestions,
    capabilities: options.capabilities,
    refuses: true,
    usageBound: (request, bodyBytes, imageTokens) =>
      byteBound(request, bodyBytes, options.maxQuestions, imageTokens),
    async answer({
      request,
      requestId,
      deadlineAt,
      trace,
      images,
      asWritten,
    }: UpstreamCall): Promise<UpstreamOutcome> {
      const questions = Object.keys(request.questions).length;
      // A request written in Google's own dialect (its door) is sent as written, images and all.
      const original = isGeminiAsWritten(asWritten) ? asWritten : undefined;
      const body = decisionBody(request, options.model, original, images);
      // The caller's own images go in as bytes, not through JSON.stringify (json-body.ts).
      const sent = await http.postJson(path, original ? withImagesSpliced(body, images) : body, {
        requestId,
        deadlineAt,
        trace,
        questions,
      });
      if (!sent.ok) return { ok: false, failure: sent.failure, detail: sent.detail, unwell: sent.unwell };
      const read = readDecision(sent.body, request);
      if (!read.ok) return invalidAnswer(read.reason);
      return {
        ok: true,
        answers: read.answers,
        usage: read.usage,
        upstreamRequestId: sent.upstreamRequestId,
        ...(read.blocked && { blocked: read.blocked }),
      };
    },
    close: http.close,
  };
}
