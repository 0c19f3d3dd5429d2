import {
  type EvaluationRequest,
  failure,
  type GatewayFailure,
  IMAGE_LIMITS,
  type Issue,
  imageTokens,
  summarizeIssues,
} from '@decision-gateway/contract';
import {
  checkImages,
  type ImageSource,
  imageBytesOf,
  unmentionedRefs,
} from '../../images/decision-images.ts';
import type { ImageBudget } from '../../images/image-budget.ts';
import type { EvaluationContext } from './evaluation-context.ts';
import type { MultipartForm } from './types.ts';

/**
 * Part of stage 3, once the request's shape holds: its images (docs/images.md). Where each comes
 * from (an asset, a file part, a door's own parts), the body's size without image data (41300),
 * the rules a request with images keeps, then the instance's budget of image bytes in flight
 * (503, nothing charged), and last each image's own bytes. A rule broken is a 40001, kept in
 * `ctx.invalid` like the request's others; the images checked are `ctx.images`.
 */
export function readImages(
  ctx: EvaluationContext & { request: EvaluationRequest },
  { sources, issues: found }: { sources: readonly ImageSource[]; issues: readonly Issue[] },
  budget: ImageBudget | undefined,
): GatewayFailure | undefined | Promise<GatewayFailure | undefined> {
  const { textLimit } = ctx.call.body;
  // The body's own limit leaves image data out, and comes first as 41300 does; the reservation
  // counts the rest.
  ctx.bodyBytes = Math.max(0, ctx.bodyBytes - dataChars(sources));
  if (textLimit !== undefined && ctx.bodyBytes > textLimit)
    return failure('payload_too_large', `the body is larger than ${textLimit} bytes without its image data`);
  const issues = [...found, ...placed(ctx, sources)];
  if (issues.length > 0) {
    ctx.invalid = invalid(issues);
    return undefined;
  }
  if (sources.length === 0) return undefined;
  const held = sources.reduce((sum, source) => sum + heldBytes(source), 0);
  if (budget !== undefined) {
    if (!budget.take(held))
      return {
        ...failure('unavailable', 'the gateway holds as many image bytes as it may; try again shortly'),
        retryAfterMs: 1_000,
      };
    ctx.imageHold = held;
  }
  return checked(ctx, sources);
}

/** Each image's own bytes checked (and hashed off the serving thread): `ctx.images`, or a 40001. */
async function checked(
  ctx: EvaluationContext & { request: EvaluationRequest },
  sources: readonly ImageSource[],
): Promise<undefined> {
  const checked = await checkImages(sources);
  if (!checked.ok) {
    ctx.invalid = invalid(checked.issues);
    return undefined;
  }
  ctx.images = checked.images;
  ctx.imageTokens = checked.images.reduce(
    (sum, image) =>
      sum + (image.source === 'bytes' ? imageTokens(image.width, image.height) : IMAGE_LIMITS.urlImageTokens),
    0,
  );
  ctx.log.images = checked.images.length;
  ctx.log.imageBytes = imageBytesOf(checked.images);
  return undefined;
}

/** The rules of where images come from and what a request with them may ask, each at its path. */
function placed(
  ctx: EvaluationContext & { request: EvaluationRequest },
  sources: readonly ImageSource[],
): Issue[] {
  const { request } = ctx;
  const issues: Issue[] = [];
  const { body } = ctx.call;
  if (body.kind === 'multipart') {
    for (const part of body.form.stray)
      issues.push({ path: [part], message: 'is a part this request has no place for' });
    const parts = new Set(
      Object.values(request.assets ?? {}).flatMap((asset) => ('part' in asset ? [asset.part] : [])),
    );
    for (const part of body.form.files.keys())
      if (!parts.has(part)) issues.push({ path: [part], message: 'is a file part no asset names' });
  }
  // Measured only with assets: a text-only request pays nothing here.
  const refs = request.assets === undefined ? [] : Object.keys(request.assets);
  if (refs.length > 0)
    for (const ref of unmentionedRefs(request, refs))
      issues.push({
        path: ['assets', ref],
        message: 'is mentioned nowhere in the state, instructions or criteria',
      });
  if (sources.length === 0)
    for (const id in request.questions)
      if ((request.questions[id] as { type: string }).type === 'box')
        issues.push({ path: ['questions', id], message: 'a box question needs an image in the request' });
  return issues;
}

/** The request's `assets` as image sources: inline base64, or a multipart file part by name. */
export function assetSources(
  request: EvaluationRequest,
  form: MultipartForm | undefined,
): { sources: ImageSource[]; issues: Issue[] } {
  const sources: ImageSource[] = [];
  const issues: Issue[] = [];
  for (const [ref, asset] of Object.entries(request.assets ?? {})) {
    if ('data_base64' in asset) {
      sources.push({
        ref,
        path: ['assets', ref, 'data_base64'],
        base64: asset.data_base64,
        declared: asset.format,
      });
      continue;
    }
    const path = ['assets', ref, 'part'];
    if (form === undefined) {
      issues.push({ path, message: 'names a file part: send the request as multipart/form-data' });
      continue;
    }
    const file = form.files.get(asset.part);
    if (file === undefined)
      issues.push({ path, message: `names the part "${asset.part}", which the request does not have` });
    else if (file === 'oversized')
      issues.push({ path, message: `the image is larger than ${IMAGE_LIMITS.maxImageBytes} bytes` });
    else sources.push({ ref, path, bytes: file });
  }
  return { sources, issues };
}

/** The characters of image data in the body as received (base64 text); a file part was never in the JSON. */
const dataChars = (sources: readonly ImageSource[]) =>
  sources.reduce((sum, source) => sum + ('base64' in source ? source.base64.length : 0), 0);

/**
 * What an image costs in memory on its way through, known before decoding it: its decoded size
 * times five. An image is held as received, as base64, and inside the upstream's request as text
 * and as bytes (measured by `pnpm bench:images`, docs/performance.md#images).
 */
export const IMAGE_MEMORY_FACTOR = 5;

const heldBytes = (source: ImageSource) =>
  IMAGE_MEMORY_FACTOR *
  ('bytes' in source
    ? source.bytes.byteLength
    : 'base64' in source
      ? Math.ceil((source.base64.length * 3) / 4)
      : 0);

const invalid = (issues: Issue[]) => failure('invalid_request', summarizeIssues(issues), { issues });
