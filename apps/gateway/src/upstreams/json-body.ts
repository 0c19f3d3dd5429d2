import { randomUUID } from 'node:crypto';
import { type DecisionImage, setOwn } from '@decision-gateway/contract';

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

/**
 * A caller's own body, passed through to an upstream of its shape, with the base64 of each of
 * its images given as bytes as a `Base64Text`: a string that is an image's checked base64, or a
 * data URL whose part after the comma is. Only those strings are taken, so nothing that needs
 * escaping is spliced; the rest is the caller's body as it was (the same value when it has none).
 */
export function withImagesSpliced(body: unknown, images: readonly DecisionImage[] | undefined): unknown {
  const base64s = new Set<string>();
  for (const image of images ?? []) if (image.source === 'bytes') base64s.add(image.base64);
  return base64s.size === 0 ? body : spliced(body, base64s);
}

/** A data URL's prefix that JSON writes as it is: printable ASCII, no quote, no backslash. */
const PLAIN_PREFIX = /^data:[!#-[\]-~]*$/;

function spliced(value: unknown, base64s: ReadonlySet<string>): unknown {
  if (typeof value === 'string') {
    if (base64s.has(value)) return new Base64Text(value);
    const comma = value.startsWith('data:') ? value.indexOf(',') : -1;
    const prefix = value.slice(0, comma + 1);
    if (comma >= 0 && PLAIN_PREFIX.test(prefix) && base64s.has(value.slice(comma + 1)))
      return new Base64Text(value.slice(comma + 1), prefix);
    return value;
  }
  if (Array.isArray(value)) return value.map((item) => spliced(item, base64s));
  if (typeof value !== 'object' || value === null) return value;
  const copy: Record<string, unknown> = {};
  // setOwn: a caller's "__proto__" stays a member, as JSON.parse made it.
  for (const [key, member] of Object.entries(value)) setOwn(copy, key, spliced(member, base64s));
  return copy;
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
