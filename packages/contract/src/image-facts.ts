import { imageSize } from 'image-size';

/**
 * What the bytes of an image tell (docs/images.md), and the limits every door holds images to. A
 * format is never taken on trust: it is read from the bytes, and the size from the image's header.
 * No Zod here: the typed client imports this alone (`@decision-gateway/contract/image-facts`).
 */
export const IMAGE_LIMITS = {
  /** Assets of one request (`assets`, jev-1.14's shape). */
  maxAssets: 32,
  /** Images of one request on the OpenAI and Gemini doors. */
  maxDialectImages: 128,
  /** Each side, in pixels. */
  maxSide: 8192,
  /** One image, decoded. */
  maxImageBytes: 16 * 1024 * 1024,
  /** A body that carries images, on every door that takes them. */
  maxBodyBytes: 32 * 1024 * 1024,
  /** An image given by URL. */
  maxUrlLength: 2048,
  /** The reservation's tokens for an image whose size the gateway does not know (a URL). */
  urlImageTokens: 16_384,
} as const;

export const IMAGE_FORMATS = ['png', 'jpeg', 'webp'] as const;
export type ImageFormat = (typeof IMAGE_FORMATS)[number];

/** What the gateway learns of an image from its bytes. */
export interface ImageFacts {
  format: ImageFormat;
  width: number;
  height: number;
}

/** The image-size library's names for the formats taken. */
const FORMAT_OF: Readonly<Record<string, ImageFormat>> = { png: 'png', jpg: 'jpeg', webp: 'webp' };

/**
 * An image's format (by its magic bytes) and size (from its header), or why it is not an image
 * this gateway takes. Never decodes the pixels. Usable in browsers: the typed client reads a
 * format from the bytes with it.
 */
export function inspectImage(
  bytes: Uint8Array,
): { ok: true; value: ImageFacts } | { ok: false; reason: string } {
  if (bytes.length === 0) return { ok: false, reason: 'the image is empty' };
  if (bytes.length > IMAGE_LIMITS.maxImageBytes)
    return { ok: false, reason: `the image is larger than ${IMAGE_LIMITS.maxImageBytes} bytes` };
  let found: { type?: string | undefined; width?: number | undefined; height?: number | undefined };
  try {
    found = imageSize(bytes);
  } catch {
    return { ok: false, reason: 'the bytes are not a PNG, JPEG or WebP image' };
  }
  const format = found.type === undefined ? undefined : FORMAT_OF[found.type];
  if (format === undefined)
    return { ok: false, reason: `the bytes are a ${found.type ?? 'unknown'} image; send PNG, JPEG or WebP` };
  const { width, height } = found;
  if (!validSide(width) || !validSide(height))
    return {
      ok: false,
      reason: `the image is ${width ?? '?'}×${height ?? '?'} px; each side must be 1–${IMAGE_LIMITS.maxSide} px`,
    };
  return { ok: true, value: { format, width, height } };
}

const validSide = (side: number | undefined): side is number =>
  Number.isInteger(side) && (side as number) >= 1 && (side as number) <= IMAGE_LIMITS.maxSide;

/** The reservation's input tokens for one image of this size (docs/http-api.md#credits). */
export function imageTokens(width: number, height: number): number {
  return 2 * Math.ceil(width / 28) * Math.ceil(height / 28) + 1024;
}

/** The MIME type of a format (data URLs, Gemini's `mime_type`). */
export const mimeTypeOf = (format: ImageFormat): string => `image/${format}`;

export const IMAGE_DETAILS = ['low', 'high', 'auto', 'original'] as const;
/** OpenAI's image detail level, kept and handed on to upstreams that take it. */
export type ImageDetail = (typeof IMAGE_DETAILS)[number];
