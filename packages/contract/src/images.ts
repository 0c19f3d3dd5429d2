import { imageSize } from 'image-size';
import { z } from 'zod';
import { ownKeyRecord } from './own-key-record.ts';

/**
 * Images in a decision (docs/images.md): how a caller attaches one, the rules every door holds
 * them to, and what the gateway learns of one from its bytes. A format is never taken on trust:
 * it is read from the bytes, and the size from the image's header.
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
export const ImageFormat = z.enum(IMAGE_FORMATS, { error: 'must be png, jpeg or webp' });
export type ImageFormat = z.infer<typeof ImageFormat>;

/** A ref: how the state, instructions or criteria mention an image, as plain text. */
export const AssetRef = z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, {
  error: 'an asset ref must be 1–64 characters of A-Z, a-z, 0-9, _, . and -',
});

/** An image in the JSON body, base64 without a `data:` prefix (System One's `jev-1.14.0` shape). */
export const InlineImageAsset = z
  .strictObject({
    type: z.literal('image'),
    format: ImageFormat,
    data_base64: z.string({ error: 'is required: the image as standard base64' }),
  })
  .meta({ id: 'InlineImageAsset' });

/** An image sent as a file part of a `multipart/form-data` request, named by its part. */
export const PartImageAsset = z
  .strictObject({
    type: z.literal('image'),
    part: z.string().min(1).max(128),
  })
  .meta({ id: 'PartImageAsset' });

export const ImageAsset = z.union([InlineImageAsset, PartImageAsset], {
  error:
    'must be {"type": "image", "format", "data_base64"} or, in a multipart request, {"type": "image", "part"}',
});
export type ImageAsset = z.infer<typeof ImageAsset>;

export const Assets = ownKeyRecord(
  AssetRef,
  ImageAsset,
  {
    min: 1,
    max: IMAGE_LIMITS.maxAssets,
    tooFew: 'needs at least 1 asset when present',
    tooMany: `takes at most ${IMAGE_LIMITS.maxAssets} assets`,
  },
  'Key: the ref the state, instructions or criteria mention. Value: the image.',
);
export type Assets = z.infer<typeof Assets>;

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

/**
 * An image of a decision once the gateway has checked it: its bytes (as standard base64, the form
 * every upstream's wire takes) with what they showed, or a URL the gateway never requests.
 */
export type DecisionImage =
  | {
      ref: string;
      source: 'bytes';
      format: ImageFormat;
      width: number;
      height: number;
      /** Hex SHA-256 of the decoded bytes: the decision cache's key and the records use it. */
      sha256: string;
      /** Decoded size. */
      byteLength: number;
      base64: string;
      detail?: ImageDetail | undefined;
    }
  | { ref: string; source: 'url'; url: string; detail?: ImageDetail | undefined };

/** What a decision record keeps of an image: never its bytes or URL. */
export interface KeptImage {
  ref: string;
  format: ImageFormat | null;
  width: number | null;
  height: number | null;
  sha256: string;
}
