import { randomUUID } from 'node:crypto';

/** Stands for a `Base64Text` in the JSON text while `jsonBody` makes a body; no caller can guess it. */
const MARK = `dg-base64-${randomUUID()}`;
const QUOTED_MARK = `"${MARK}"`;

/** The texts met by the `jsonBody` call running now (JSON.stringify is synchronous). */
let met: Base64Text[] | undefined;

/**
 * Base64 in an upstream's request (an image's bytes, behind a data URL's prefix or not). It is
 * JSON as its whole text; inside `jsonBody` its bytes are copied in after the rest is written,
 * rather than scanned for escapes by JSON.stringify and copied again by the UTF-8 encoding of
 * the whole body: for a 1 MB image those two took ~2.5 ms of the serving thread, the copy ~0.2 ms
 * (docs/performance.md#images). Base64 needs no escaping, so the bytes are the same.
 */
export class Base64Text {
  constructor(
    readonly base64: string,
    /** ASCII written before it inside the same JSON string, such as `data:image/png;base64,`. */
    readonly prefix = '',
  ) {}

  toJSON(): string {
    if (met === undefined) return this.prefix + this.base64;
    met.push(this);
    return MARK;
  }
}

/** `payload` as the bytes of its JSON, each `Base64Text` in it spliced in as bytes. */
export function jsonBody(payload: unknown): Buffer {
  const texts: Base64Text[] = [];
  met = texts;
  let json: string;
  try {
    json = JSON.stringify(payload);
  } finally {
    met = undefined;
  }
  if (texts.length === 0) return Buffer.from(json);
  const between = json.split(QUOTED_MARK);
  // Only a text that held the mark itself could split it more often: then the plain way.
  if (between.length !== texts.length + 1) return Buffer.from(JSON.stringify(payload));
  let size = 0;
  for (const piece of between) size += Buffer.byteLength(piece);
  for (const text of texts) size += 2 + text.prefix.length + text.base64.length;
  const body = Buffer.allocUnsafe(size);
  let at = body.write(between[0] as string);
  texts.forEach((text, i) => {
    at += body.write(`"${text.prefix}`, at, 'latin1');
    at += body.write(text.base64, at, 'latin1');
    at += body.write('"', at, 'latin1');
    at += body.write(between[i + 1] as string, at);
  });
  return body;
}
