import { z } from 'zod';
import { type ImageFormat as Format, IMAGE_FORMATS, IMAGE_LIMITS, type ImageDetail } from './image-facts.ts';
import { ownKeyRecord } from './own-key-record.ts';

export * from './image-facts.ts';

/** The shapes images take in a request (docs/images.md); what bytes tell is in image-facts.ts. */

export const ImageFormat = z.enum(IMAGE_FORMATS, { error: 'must be png, jpeg or webp' });
export type ImageFormat = Format;

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
