import { type EvaluationRequest, failure, isPlainObject, type Usage } from '@decision-gateway/contract';
import type { Upstream, UpstreamCall, UpstreamOutcome } from '@decision-gateway/questions';
import type { ResponseFacts } from '../../../telemetry/spans.ts';
import type { UpstreamHttp } from '../../upstream-http.ts';
import { usageFacts } from '../fields.ts';

/** What each group carries beside its state and questions: `{"model": …, "state": …, "questions": …}`. */
const GROUP_ENVELOPE_BYTES = 64;

/**
 * Reservation bound for upstreams that count their own tokens (docs/http-api.md#credits): the
 * body's bytes plus 256 tokens per question; output 256 per question, so the bound holds if output
 * is priced. Asked in groups (more questions than the upstream takes at once), each further group
 * carries the state again but only its own questions: the body counts once and the state once more
 * per further group, never the whole body once per group (which grew with the square of the
 * question count: 400 short questions reserved thousands of credits for a call costing a few). The
 * state is measured as sent, so a body in another dialect (the OpenAI door's) counts alike.
 */
export function byteBound(
  request: Pick<EvaluationRequest, 'state' | 'questions'>,
  bodyBytes: number,
  maxQuestions = Number.POSITIVE_INFINITY,
): Usage {
  const count = Object.keys(request.questions).length;
  const groups = Math.max(1, Math.ceil(count / maxQuestions));
  const output = 256 * count;
  if (groups === 1) return { input_tokens: bodyBytes + output, output_tokens: output };
  // Measured only when grouped.
  const perGroup = Buffer.byteLength(JSON.stringify(request.state)) + GROUP_ENVELOPE_BYTES;
  return { input_tokens: bodyBytes + (groups - 1) * perGroup + output, output_tokens: output };
}

/**
 * A service speaking the native System One protocol: the gateway's own request with the model
 * mapped to `UPSTREAM_MODEL`, sent to `{base}{path}` (`/v1/systemone` by default). Native answers and usage pass
 * through (the gateway checks them). The answer is read from the native body, or from this
 * gateway's own envelope so that one gateway can front another (docs/upstreams.md).
 */
export function createSystemOneUpstream(
  http: UpstreamHttp,
  options: { name: string; model: string; path: string; maxQuestions: number },
): Upstream {
  return {
    name: options.name,
    maxQuestions: options.maxQuestions,
    usageBound: (request, bodyBytes) => byteBound(request, bodyBytes, options.maxQuestions),
    async answer({ request, requestId, deadlineAt, trace }: UpstreamCall): Promise<UpstreamOutcome> {
      const sent = await http.postJson(
        options.path,
        { model: options.model, state: request.state, questions: request.questions },
        { requestId, deadlineAt, trace, questions: Object.keys(request.questions).length },
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

/** A native answer's model and usage, or those of this gateway's envelope (traces). */
export function systemOneFacts(body: unknown): ResponseFacts {
  const native = isPlainObject(body) && isPlainObject(body.answers);
  const envelope = isPlainObject(body) && isPlainObject(body.data) ? body.data.result : undefined;
  return usageFacts(native ? body : envelope, 'input_tokens', 'output_tokens');
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
