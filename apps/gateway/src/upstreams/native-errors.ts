/**
 * The reason in a native error body `{"detail": …}` (docs/upstreams.md): a string, `{error_type, message}`,
 * `{error_type}` alone (e.g. `max_tokens_exceeded`), or a list of validation errors. Other shapes
 * (`{error: {message}}`, `{message}`) are read too; undefined when nothing readable is there.
 */
export function nativeErrorReason(body: unknown): string | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const record = body as Record<string, unknown>;
  const fromDetail = describeDetail(record.detail);
  if (fromDetail) return fromDetail;
  if (typeof record.error === 'object' && record.error !== null) {
    const message = (record.error as Record<string, unknown>).message;
    if (typeof message === 'string' && message) return message;
  }
  if (typeof record.error === 'string' && record.error) return record.error;
  if (typeof record.message === 'string' && record.message) return record.message;
  return undefined;
}

function describeDetail(detail: unknown): string | undefined {
  if (typeof detail === 'string') return detail || undefined;
  if (Array.isArray(detail)) {
    const parts = detail.map(describeListItem).filter((part): part is string => part !== undefined);
    return parts.length > 0 ? parts.join('; ') : undefined;
  }
  if (typeof detail === 'object' && detail !== null) {
    const { error_type, message } = detail as Record<string, unknown>;
    if (typeof message === 'string' && message) {
      return typeof error_type === 'string' ? `${error_type}: ${message}` : message;
    }
    if (typeof error_type === 'string') return error_type;
  }
  return undefined;
}

/** One validation error of a list: `{loc: [...], msg}` (FastAPI/pydantic style) or a string. */
function describeListItem(item: unknown): string | undefined {
  if (typeof item === 'string') return item;
  if (typeof item !== 'object' || item === null) return undefined;
  const { loc, msg, message } = item as Record<string, unknown>;
  const text = typeof msg === 'string' ? msg : typeof message === 'string' ? message : undefined;
  if (text === undefined) return undefined;
  return Array.isArray(loc) && loc.length > 0 ? `${loc.join('.')}: ${text}` : text;
}
