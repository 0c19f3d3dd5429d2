import type { Readable } from 'node:stream';
import { IMAGE_LIMITS, LIMITS } from '@decision-gateway/contract';
import { Busboy } from '@fastify/busboy';
import type { MultipartForm } from '../core/evaluation/index.ts';

/** The error Fastify's own body reader raises past a limit, so every door answers it as 41300. */
export function bodyTooLarge(limit: number): Error {
  return Object.assign(new Error(`the body is larger than ${limit} bytes`), {
    code: 'FST_ERR_CTP_BODY_TOO_LARGE',
    statusCode: 413,
    limit,
  });
}

/**
 * Reads a `multipart/form-data` body as it arrives with @fastify/busboy (the Fastify team's
 * maintained fork of busboy, the standard streaming parser), so no body is buffered before its
 * limit is known: past `maxBytes` the reading stops (41300). Nothing is judged here: the core does
 * that after authentication, in the order of docs/http-api.md#errors.
 */
export function readMultipart(
  payload: Readable,
  contentType: string,
  maxBytes: number,
): Promise<MultipartForm> {
  const form: MultipartForm = { kind: 'multipart', files: new Map(), stray: [], bytes: 0 };
  return new Promise((resolve, reject) => {
    let parser: ReturnType<typeof Busboy>;
    try {
      parser = Busboy({
        headers: { 'content-type': contentType },
        limits: {
          fieldSize: LIMITS.maxBodyBytes + 1,
          fileSize: IMAGE_LIMITS.maxImageBytes,
          files: IMAGE_LIMITS.maxAssets + 1,
          parts: IMAGE_LIMITS.maxAssets + 16,
        },
      });
    } catch (error) {
      // No boundary, or not multipart at all: read (and drop) the body, then say why.
      form.malformed = (error as Error).message;
      payload.resume();
      payload.on('end', () => resolve(form));
      payload.on('error', reject);
      return;
    }
    const name = (part: string) => {
      if (part === 'request' ? form.request !== undefined : form.files.has(part)) form.stray.push(part);
    };
    const takeRequest = (bytes: Buffer) => {
      if (bytes.length > LIMITS.maxBodyBytes) form.requestTooLarge = true;
      else form.request = bytes;
    };
    parser.on('field', (field, value, _nameTruncated, valueTruncated) => {
      name(field);
      if (field !== 'request') return;
      if (valueTruncated) form.requestTooLarge = true;
      else takeRequest(Buffer.from(value, 'utf8'));
    });
    parser.on('file', (field, stream) => {
      name(field);
      const chunks: Buffer[] = [];
      let size = 0;
      stream.on('data', (chunk: Buffer) => {
        size += chunk.length;
        // Past the request's own limit, a `request` part is only counted.
        if (field !== 'request' || size <= LIMITS.maxBodyBytes + 1) chunks.push(chunk);
      });
      stream.on('end', () => {
        if (field !== 'request')
          form.files.set(field, stream.truncated ? 'oversized' : Buffer.concat(chunks));
        else if (size > LIMITS.maxBodyBytes) form.requestTooLarge = true;
        else takeRequest(Buffer.concat(chunks));
      });
    });
    parser.on('filesLimit', () => form.stray.push(`more than ${IMAGE_LIMITS.maxAssets} files`));
    parser.on('partsLimit', () => form.stray.push('too many parts'));
    parser.on('error', (error: unknown) => {
      form.malformed ??= (error as Error).message;
      resolve(form);
    });
    parser.on('finish', () => resolve(form));

    // The whole body's limit, counted as it arrives: past it the reading stops (41300).
    payload.on('data', (chunk: Buffer) => {
      const before = form.bytes;
      form.bytes += chunk.length;
      if (form.bytes > maxBytes && before <= maxBytes) {
        payload.unpipe(parser);
        parser.destroy();
        // unpipe pauses the body: the rest must still be read (and dropped), or the server stops
        // reading the socket and the answer's lingering close (http/lingering-close.ts) meets a full window.
        payload.resume();
        reject(bodyTooLarge(maxBytes));
      }
    });
    payload.on('error', reject);
    payload.pipe(parser);
  });
}
