import { createHash, webcrypto } from 'node:crypto';
import {
  type DecisionImage,
  type EvaluationRequest,
  IMAGE_LIMITS,
  type ImageDetail,
  type ImageFormat,
  inspectImage,
  type KeptImage,
} from '@decision-gateway/contract';
import { decodeStandardBase64 } from './base64.ts';

/** Where a rule broken is reported: the image's path in the request as its caller wrote it. */
type IssuePath = (string | number)[];

/**
 * An image as a door received it, before any check: base64 text (with the format its caller
 * declared, if any), a multipart file part's bytes, or a URL.
 */
export type ImageSource = { ref: string; path: IssuePath; detail?: ImageDetail | undefined } & (
  | { base64: string; declared?: ImageFormat | undefined }
  | { bytes: Uint8Array }
  | { url: string }
);

export interface ImageIssue {
  path: IssuePath;
  message: string;
}

/**
 * Each image checked from its bytes (docs/images.md#rules): base64, format by magic bytes (and as
 * declared), sides from the header, size. A URL is only checked as text: the gateway never
 * requests it. Every issue is found, each at its path. The SHA-256 of up to 16 MiB is WebCrypto's,
 * computed on libuv's thread pool rather than on the thread that serves requests.
 */
export async function checkImages(
  sources: readonly ImageSource[],
): Promise<{ ok: true; images: DecisionImage[] } | { ok: false; issues: ImageIssue[] }> {
  const checked: { image: DecisionImage; bytes?: Uint8Array }[] = [];
  const issues: ImageIssue[] = [];
  for (const source of sources) {
    const one = checkImage(source);
    if (typeof one === 'string') issues.push({ path: source.path, message: one });
    else checked.push(one);
  }
  if (issues.length > 0) return { ok: false, issues };
  const images = await Promise.all(
    checked.map(async ({ image, bytes }) =>
      image.source === 'bytes' && bytes ? { ...image, sha256: await digestHex(bytes) } : image,
    ),
  );
  return { ok: true, images };
}

const digestHex = async (bytes: Uint8Array) =>
  Buffer.from(await webcrypto.subtle.digest('SHA-256', bytes)).toString('hex');

/** One image checked; its SHA-256 is left for `checkImages` to fill in. */
function checkImage(source: ImageSource): { image: DecisionImage; bytes?: Uint8Array } | string {
  const detail = source.detail === undefined ? {} : { detail: source.detail };
  if ('url' in source) {
    if (source.url.length > IMAGE_LIMITS.maxUrlLength)
      return `an image URL takes at most ${IMAGE_LIMITS.maxUrlLength} characters`;
    if (!isHttpsUrl(source.url)) return 'an image URL must be an https:// URL';
    return { image: { ref: source.ref, source: 'url', url: source.url, ...detail } };
  }
  let bytes: Uint8Array;
  let base64: string;
  if ('bytes' in source) {
    bytes = source.bytes;
    base64 = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
  } else {
    // The decoded size is known from the text: refuse a huge one before decoding it.
    if (source.base64.length === 0) return 'the image is empty';
    if ((source.base64.length / 4) * 3 > IMAGE_LIMITS.maxImageBytes + 2)
      return `the image is larger than ${IMAGE_LIMITS.maxImageBytes} bytes`;
    const decoded = decodeStandardBase64(source.base64);
    if (decoded === undefined) return 'is not valid standard base64 (A–Z, a–z, 0–9, +, /, padded with =)';
    base64 = source.base64;
    bytes = decoded;
  }
  const facts = inspectImage(bytes);
  if (!facts.ok) return facts.reason;
  const declared = 'declared' in source ? source.declared : undefined;
  if (declared !== undefined && declared !== facts.value.format)
    return `is declared ${declared} but its bytes are ${facts.value.format}`;
  const image: DecisionImage = {
    ref: source.ref,
    source: 'bytes',
    ...facts.value,
    sha256: '',
    byteLength: bytes.byteLength,
    base64,
    ...detail,
  };
  return { image, bytes };
}

function isHttpsUrl(text: string): boolean {
  try {
    return new URL(text).protocol === 'https:';
  } catch {
    return false;
  }
}

const sha256Hex = (data: Uint8Array | string) => createHash('sha256').update(data).digest('hex');

/** The refs of `assets` that the state, instructions and criteria never mention (docs/images.md). */
export function unmentionedRefs(request: EvaluationRequest, refs: readonly string[]): string[] {
  const texts = [JSON.stringify(request.state)];
  for (const id in request.questions) {
    const question = request.questions[id] as { instructions?: unknown; criteria?: unknown };
    texts.push(JSON.stringify(question.instructions ?? null), JSON.stringify(question.criteria ?? null));
  }
  const text = texts.join('\n');
  return refs.filter((ref) => !text.includes(ref));
}

/** The images' decoded bytes, in all. */
export const imageBytesOf = (images: readonly DecisionImage[]) =>
  images.reduce((sum, image) => sum + (image.source === 'bytes' ? image.byteLength : 0), 0);

/** What a decision record keeps of each image: never its bytes or its URL. */
export function keptImages(images: readonly DecisionImage[]): KeptImage[] {
  return images.map((image) =>
    image.source === 'bytes'
      ? {
          ref: image.ref,
          format: image.format,
          width: image.width,
          height: image.height,
          sha256: image.sha256,
        }
      : { ref: image.ref, format: null, width: null, height: null, sha256: sha256Hex(image.url) },
  );
}

/** How the decision cache tells images apart: each one's SHA-256, a URL by its text (docs/routes.md#decision-cache). */
export const imageIdentity = (images: readonly DecisionImage[]): string[] =>
  images.map((image) => `${image.ref}=${image.source === 'bytes' ? image.sha256 : `url:${image.url}`}`);
