import { failure, isPlainObject, type Usage } from '@decision-gateway/contract';
import type { Upstream, UpstreamCall, UpstreamOutcome } from '@decision-gateway/questions';
import type { UpstreamHttp } from '../../upstream-http.ts';

/** Reservation bound for upstreams that count their own tokens (docs/http-api.md#credits). */
export function byteBound(questions: number, bodyBytes: number): Usage {
  // Input: the body's bytes plus 256 tokens per question (docs/http-api.md#credits); output: 256 per question, so
  // the bound still holds if output tokens are priced.
  return { input_tokens: bodyBytes + 256 * questions, output_tokens: 256 * questions };
}

/**
 * A service speaking the native System One protocol: the gateway's own request with the model
 * mapped to `UPSTREAM_MODEL`, sent to `{base}/v1/systemone`. Native answers and usage pass
 * through (the gateway checks them). The answer is read from the native body, or from this
 * gateway's own envelope so that one gateway can front another (docs/upstreams.md).
 */
export function createSystemOneUpstream(http: UpstreamHttp, name: string, upstreamModel: string): Upstream {
  return {
    name,
    usageBound: (request, bodyBytes) => byteBound(Object.keys(request.questions).length, bodyBytes),
    async answer({ request, requestId, deadlineAt }: UpstreamCall): Promise<UpstreamOutcome> {
      const sent = await http.postJson(
        '/v1/systemone',
        { model: upstreamModel, state: request.state, questions: request.questions },
        { requestId, deadlineAt },
      );
      if (!sent.ok) return { ok: false, failure: sent.failure, detail: sent.detail, unwell: sent.unwell };
      const result = readResult(sent.body);
      if (!result) {
        const reason = 'the body has neither answers (native) nor data.result (gateway envelope)';
        return {
          ok: false,
          failure: failure('upstream_error', `the upstream returned an invalid answer: ${reason}`),
          detail: reason,
        };
      }
      return {
        ok: true,
        answers: result.answers,
        usage: result.usage,
        upstreamRequestId: sent.upstreamRequestId,
      };
    },
    close: http.close,
  };
}

/**
 * The answers and usage of a success body: native `{model, answers, usage}` at the top level, or
 * this gateway's envelope `{code: 0, data: {result: {answers, usage}}}`.
 */
function readResult(body: unknown): { answers: unknown; usage: unknown } | undefined {
  if (!isPlainObject(body)) return undefined;
  if (isPlainObject(body.answers)) return { answers: body.answers, usage: body.usage };
  if (isPlainObject(body.data) && isPlainObject(body.data.result)) {
    return { answers: body.data.result.answers, usage: body.data.result.usage };
  }
  return undefined;
}
