import {
  type DecisionImage,
  type EvaluationRequest,
  isPlainObject,
  type Usage,
} from '@decision-gateway/contract';
import type { ImageCapabilities, Upstream, UpstreamCall, UpstreamOutcome } from '@decision-gateway/questions';
import type { ResponseFacts } from '../../../telemetry/spans.ts';
import { invalidAnswer } from '../../invalid-answer.ts';
import { Base64Text } from '../../json-body.ts';
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
 * `bodyBytes` leaves image data out: the images' own tokens count once per group (docs/images.md#billing).
 */
export function byteBound(
  request: Pick<EvaluationRequest, 'state' | 'questions'>,
  bodyBytes: number,
  maxQuestions = Number.POSITIVE_INFINITY,
  imageTokens = 0,
): Usage {
  const count = Object.keys(request.questions).length;
  const groups = Math.max(1, Math.ceil(count / maxQuestions));
  const output = 256 * count;
  const images = groups * imageTokens;
  if (groups === 1) return { input_tokens: bodyBytes + images + output, output_tokens: output };
  // Measured only when grouped.
  const perGroup = Buffer.byteLength(JSON.stringify(request.state)) + GROUP_ENVELOPE_BYTES;
  return { input_tokens: bodyBytes + (groups - 1) * perGroup + images + output, output_tokens: output };
}

/** System One's `jev-1.14.0` `assets`: every image as base64, by its ref. */
export function assetsOf(images: readonly DecisionImage[]): Record<string, unknown> {
  const assets: Record<string, unknown> = {};
  for (const image of images) {
    // Capabilities keep URL images from this kind (imageUrls is false unless configured).
    if (image.source !== 'bytes') continue;
    assets[image.ref] = { type: 'image', format: image.format, data_base64: new Base64Text(image.base64) };
  }
  return assets;
}

/** The header System One asks of a request that carries images. */
const IMAGES_HEADER = { 'typesafe-danger-zone-images': 'true' } as const;

/**
 * A service speaking the native System One protocol: the gateway's own request with the model
 * mapped to `UPSTREAM_MODEL`, sent to `{base}{path}` (`/v1/systemone` by default). Native answers and usage pass
 * through (the gateway checks them). The answer is read from the native body, or from this
 * gateway's own envelope so that one gateway can front another (docs/upstreams.md).
 */
export function createSystemOneUpstream(
  http: UpstreamHttp,
  options: {
    name: string;
    model: string;
    path: string;
    maxQuestions: number;
    capabilities: ImageCapabilities;
  },
): Upstream {
  return {
    name: options.name,
    maxQuestions: options.maxQuestions,
    capabilities: options.capabilities,
    usageBound: (request, bodyBytes, imageTokens) =>
      byteBound(request, bodyBytes, options.maxQuestions, imageTokens),
    async answer({ request, requestId, deadlineAt, trace, images }: UpstreamCall): Promise<UpstreamOutcome> {
      const body = { model: options.model, state: request.state, questions: request.questions };
      const questions = Object.keys(request.questions).length;
      const sent =
        images === undefined || images.length === 0
          ? await http.postJson(options.path, body, { requestId, deadlineAt, trace, questions })
          : await http.postJson(
              options.path,
              { ...body, assets: assetsOf(images) },
              { requestId, deadlineAt, trace, questions, headers: IMAGES_HEADER },
            );
      if (!sent.ok) return { ok: false, failure: sent.failure, detail: sent.detail, unwell: sent.unwell };
      const result = readResult(sent.body);
      if (!result) {
        const reason = 'the body has neither answers (native) nor data.result (gateway envelope)';
        return invalidAnswer(reason);
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
