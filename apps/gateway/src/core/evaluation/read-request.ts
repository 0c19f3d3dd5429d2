import {
  decodeJsonBody,
  type EvaluationRequest,
  failure,
  type GatewayFailure,
  LIMITS,
  type Parsed,
  parseEvaluationRequest,
  summarizeIssues,
} from '@decision-gateway/contract';
import type { ImageSource } from '../../images/decision-images.ts';
import type { ImageBudget } from '../../images/image-budget.ts';
import { isJsonMediaType } from '../media-type.ts';
import type { EvaluationContext } from './evaluation-context.ts';
import { assetSources, readImages } from './read-images.ts';
import type { EvaluationBody } from './types.ts';

/**
 * Stage 3: the media type (41500), the JSON (40000), then the request's shape (in the door's
 * dialect, if it has one): 40002 and 40003
 * end here; any other rule broken (40001) is kept in `ctx.invalid`, since an unknown route (40004)
 * is answered before it (docs/http-api.md#errors). Bytes are read at once; only a lazy body (a
 * tRPC operation) is awaited. A multipart body (REST) holds its JSON in its `request` part.
 */
export function readRequest(
  ctx: EvaluationContext,
  budget?: ImageBudget,
): GatewayFailure | undefined | Promise<GatewayFailure | undefined> {
  const { body } = ctx.call;
  if (body.kind === 'multipart') return readForm(ctx, body, budget);
  const refused = mediaTypeFailure(body.contentType);
  if (refused) return refused;
  if (body.kind === 'bytes') {
    ctx.bodyBytes = body.bytes?.length ?? 0;
    const decoded = decodeJsonBody(body.bytes);
    // A body that is no JSON holds no image data: over the door's JSON limit it is too large.
    if (!decoded.ok && body.textLimit !== undefined && ctx.bodyBytes > body.textLimit)
      return failure('payload_too_large', `the body is larger than ${body.textLimit} bytes`);
    return parsed(ctx, decoded, budget);
  }
  ctx.bodyBytes = body.bytes;
  return readLazy(ctx, body, budget);
}

async function readLazy(
  ctx: EvaluationContext,
  body: Extract<EvaluationBody, { kind: 'lazy' }>,
  budget: ImageBudget | undefined,
) {
  return parsed(ctx, await body.read(), budget);
}

/** A multipart body: unreadable (40000), its `request` part too long (41300) or missing (40001), else its JSON. */
function readForm(
  ctx: EvaluationContext,
  body: Extract<EvaluationBody, { kind: 'multipart' }>,
  budget: ImageBudget | undefined,
): GatewayFailure | undefined | Promise<GatewayFailure | undefined> {
  const { form } = body;
  if (form.malformed !== undefined)
    return failure('invalid_json', `the multipart body is malformed: ${form.malformed.slice(0, 200)}`);
  if (form.requestTooLarge)
    return failure('payload_too_large', `the request part is larger than ${LIMITS.maxBodyBytes} bytes`);
  if (form.request === undefined) {
    const issues = [
      { path: ['request'], message: 'a multipart request needs a part named request holding the JSON body' },
    ];
    ctx.invalid = failure('invalid_request', summarizeIssues(issues), { issues });
    return undefined;
  }
  ctx.bodyBytes = form.request.length;
  return parsed(ctx, decodeJsonBody(form.request), budget);
}

function parsed(
  ctx: EvaluationContext,
  decoded: Parsed<unknown>,
  budget: ImageBudget | undefined,
): GatewayFailure | undefined | Promise<GatewayFailure | undefined> {
  if (!decoded.ok) return decoded.error;
  const { dialect, body } = ctx.call;
  let request: Parsed<EvaluationRequest>;
  let dialectImages: ImageSource[] | undefined;
  if (dialect === undefined) request = parseEvaluationRequest(decoded.value);
  else {
    const spoken = dialect.parse(decoded.value);
    if (spoken.ok) {
      ctx.asWritten = spoken.value.asWritten;
      if (spoken.value.truthValues) ctx.truthValues = spoken.value.truthValues;
      dialectImages = spoken.value.images;
    }
    request = spoken.ok ? { ok: true, value: spoken.value.request } : spoken;
  }
  if (!request.ok) {
    if (request.error.code !== 40001) return request.error;
    ctx.invalid = request.error;
    return undefined;
  }
  ctx.request = request.value;
  const images = dialectImages
    ? { sources: dialectImages, issues: [] }
    : assetSources(request.value, body.kind === 'multipart' ? body.form : undefined);
  const types: NonNullable<EvaluationContext['log']['questionTypes']> = {};
  let questions = 0;
  for (const id in request.value.questions) {
    const type = (request.value.questions[id] as { type: keyof typeof types }).type;
    types[type] = (types[type] ?? 0) + 1;
    questions++;
  }
  ctx.questions = questions;
  ctx.log.questions = questions;
  ctx.log.questionTypes = types;
  // Synchronous unless the request carries images (their hashes are computed off this thread).
  return readImages(ctx as EvaluationContext & { request: EvaluationRequest }, images, budget);
}

/** Media type (41500) before JSON (40000), on every door. */
function mediaTypeFailure(contentType: string | undefined): GatewayFailure | undefined {
  if (isJsonMediaType(contentType)) return undefined;
  const sent = contentType === undefined ? 'no Content-Type' : `Content-Type "${contentType.slice(0, 100)}"`;
  return failure('unsupported_media_type', `send Content-Type: application/json (got ${sent})`);
}
