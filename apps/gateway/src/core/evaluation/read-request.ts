import {
  decodeJsonBody,
  type EvaluationRequest,
  failure,
  type GatewayFailure,
  type Parsed,
  parseEvaluationRequest,
} from '@decision-gateway/contract';
import { isJsonMediaType } from '../media-type.ts';
import type { EvaluationContext } from './evaluation-context.ts';
import type { EvaluationBody } from './types.ts';

/**
 * Stage 3: the media type (41500), the JSON (40000), then the request's shape (in the door's
 * dialect, if it has one): 40002 and 40003
 * end here; any other rule broken (40001) is kept in `ctx.invalid`, since an unknown route (40004)
 * is answered before it (docs/http-api.md#errors). Bytes are read at once; only a lazy body (a
 * tRPC operation) is awaited.
 */
export function readRequest(
  ctx: EvaluationContext,
): GatewayFailure | undefined | Promise<GatewayFailure | undefined> {
  const { body } = ctx.call;
  const refused = mediaTypeFailure(body.contentType);
  if (refused) return refused;
  if (body.kind === 'bytes') {
    ctx.bodyBytes = body.bytes?.length ?? 0;
    return parsed(ctx, decodeJsonBody(body.bytes));
  }
  ctx.bodyBytes = body.bytes;
  return readLazy(ctx, body);
}

async function readLazy(ctx: EvaluationContext, body: Extract<EvaluationBody, { kind: 'lazy' }>) {
  return parsed(ctx, await body.read());
}

function parsed(ctx: EvaluationContext, decoded: Parsed<unknown>): GatewayFailure | undefined {
  if (!decoded.ok) return decoded.error;
  const { dialect } = ctx.call;
  let request: Parsed<EvaluationRequest>;
  if (dialect === undefined) request = parseEvaluationRequest(decoded.value);
  else {
    const spoken = dialect.parse(decoded.value);
    if (spoken.ok) {
      ctx.asWritten = spoken.value.asWritten;
      if (spoken.value.truthValues) ctx.truthValues = spoken.value.truthValues;
    }
    request = spoken.ok ? { ok: true, value: spoken.value.request } : spoken;
  }
  if (!request.ok) {
    if (request.error.code !== 40001) return request.error;
    ctx.invalid = request.error;
    return undefined;
  }
  ctx.request = request.value;
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
  return undefined;
}

/** Media type (41500) before JSON (40000), on every door. */
function mediaTypeFailure(contentType: string | undefined): GatewayFailure | undefined {
  if (isJsonMediaType(contentType)) return undefined;
  const sent = contentType === undefined ? 'no Content-Type' : `Content-Type "${contentType.slice(0, 100)}"`;
  return failure('unsupported_media_type', `send Content-Type: application/json (got ${sent})`);
}
