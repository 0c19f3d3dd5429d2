import { parse } from 'content-type';

/**
 * Whether a `Content-Type` header says JSON (docs/http-api.md#errors): parsed by `content-type` (jshttp's, the
 * parser Express uses), so a media type that does not parse (`application/json;;;charset="`) is
 * refused as any other wrong type. Type and parameter names are case-insensitive.
 */
export function isJsonMediaType(header: string | undefined): boolean {
  if (header === undefined) return false;
  try {
    return parse(header).type === 'application/json';
  } catch {
    return false;
  }
}
