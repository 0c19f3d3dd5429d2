import { randomBytes } from 'node:crypto';
import sharp from 'sharp';

/**
 * Real images for the tests, made by sharp (libvips) at the sizes a test chooses: a gateway that
 * reads formats and sizes from the bytes is tested against bytes an image library wrote.
 */
export type TestFormat = 'png' | 'jpeg' | 'webp' | 'gif';

export async function makeImage(
  format: TestFormat,
  width: number,
  height: number,
  options: { noise?: boolean } = {},
): Promise<Buffer> {
  const image = options.noise
    ? sharp(randomBytes(width * height * 3), { raw: { width, height, channels: 3 } })
    : sharp({ create: { width, height, channels: 3, background: { r: 180, g: 40, b: 40 } } });
  if (format === 'jpeg') return image.jpeg({ quality: 100 }).toBuffer();
  if (format === 'png') return image.png().toBuffer();
  if (format === 'webp') return image.webp().toBuffer();
  return image.gif().toBuffer();
}

/** An asset as a JSON body carries it (System One `jev-1.14.0`'s shape). */
export const inlineAsset = (format: 'png' | 'jpeg' | 'webp', bytes: Buffer) => ({
  type: 'image' as const,
  format,
  data_base64: bytes.toString('base64'),
});
