import { failure, type GatewayFailure, summarizeIssues } from './errors.ts';
import { LIMITS, MODEL_ID } from './limits.ts';
import { isPlainObject } from './own-key-record.ts';
import { EvaluationRequest } from './request.ts';
import { parseWorded, toIssues } from './zod-issues.ts';

export type Parsed<T> = { ok: true; value: T } | { ok: false; error: GatewayFailure };

const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * Raw body bytes → its text, or 40000 (docs/http-api.md#errors): empty, a byte-order mark or invalid UTF-8.
 * TextDecoder rather than node:buffer, so the contract stays usable in browsers.
 */
export function decodeBodyText(body: Uint8Array | undefined): Parsed<string> {
  if (body === undefined || body.length === 0)
    return { ok: false, error: failure('invalid_json', 'the body is empty') };
  if (body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf) {
    return { ok: false, error: failure('invalid_json', 'the body starts with a byte-order mark') };
  }
  try {
    return { ok: true, value: STRICT_UTF8.decode(body) };
  } catch {
    return { ok: false, error: failure('invalid_json', 'the body is not valid UTF-8') };
  }
}

/** Text → JSON value, or 40000. JSON.parse keeps `__proto__` as an ordinary own property. */
export function parseJsonText(text: string): Parsed<unknown> {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (error) {
    return {
      ok: false,
      error: failure('invalid_json', `the body is not valid JSON: ${(error as Error).message}`),
    };
  }
}

/** Raw body bytes → JSON value, or 40000 (docs/http-api.md#errors): empty, a byte-order mark, invalid UTF-8 or JSON. */
export function decodeJsonBody(body: Uint8Array | undefined): Parsed<unknown> {
  const text = decodeBodyText(body);
  return text.ok ? parseJsonText(text.value) : text;
}

/**
 * How deeply `value` nests, counting `value` itself as level 1, or `limit + 1` as soon as it is
 * deeper than `limit`. Iterative with an explicit stack: caller data never drives recursion. The
 * stack is two arrays (nodes, their depths) and an object's members are read in place: this walks
 * every request, and an object or array made per node would be garbage per node.
 */
export function nestingDepth(value: unknown, limit: number): number {
  if (typeof value !== 'object' || value === null) return 0;
  const nodes: object[] = [value];
  const depths: number[] = [1];
  let deepest = 0;
  while (nodes.length > 0) {
    const node = nodes.pop() as Record<string, unknown>;
    const depth = depths.pop() as number;
    if (depth > deepest) {
      deepest = depth;
      if (deepest > limit) return limit + 1;
    }
    if (Array.isArray(node)) {
      for (const child of node)
        if (typeof child === 'object' && child !== null) {
          nodes.push(child);
          depths.push(depth + 1);
        }
      continue;
    }
    for (const key in node) {
      if (!Object.hasOwn(node, key)) continue;
      const child = node[key];
      if (typeof child === 'object' && child !== null) {
        nodes.push(child);
        depths.push(depth + 1);
      }
    }
  }
  return deepest;
}

/**
 * A parsed JSON body → the valid request, or the gateway error for the first broken rule in
 * the order of docs/http-api.md#errors: 40002 (question count) → 40003 (unknown model) → 40001 (everything else, with
 * every issue and its path). The request returned is the caller's own JSON, never rebuilt.
 */
export function parseEvaluationRequest(body: unknown): Parsed<EvaluationRequest> {
  if (!isPlainObject(body)) {
    return invalid([{ path: [], message: 'the body must be a JSON object' }]);
  }
  const { questions, model } = body;
  if (isPlainObject(questions)) {
    const count = Object.keys(questions).length;
    if (count < LIMITS.minQuestions || count > LIMITS.maxQuestions) {
      return {
        ok: false,
        error: failure(
          'invalid_question_count',
          `questions: ${count} questions sent; a request takes ${LIMITS.minQuestions} to ${LIMITS.maxQuestions}`,
          { issues: [{ path: ['questions'], message: `has ${count} entries; 1 to 8 are accepted` }] },
        ),
      };
    }
  }
  if (typeof model === 'string' && model !== MODEL_ID) {
    return {
      ok: false,
      error: failure(
        'unknown_model',
        `model: unknown model "${clip(model)}"; this gateway serves "${MODEL_ID}"`,
        {
          issues: [{ path: ['model'], message: `must be "${MODEL_ID}"` }],
        },
      ),
    };
  }
  if (nestingDepth(body, LIMITS.maxDepth) > LIMITS.maxDepth) {
    return invalid([{ path: [], message: `the body nests deeper than ${LIMITS.maxDepth} levels` }]);
  }
  const result = parseWorded(EvaluationRequest, body);
  if (!result.success) return invalid(toIssues(result.error.issues));
  return { ok: true, value: body as EvaluationRequest };
}

function invalid(issues: { path: (string | number)[]; message: string }[]): Parsed<never> {
  return { ok: false, error: failure('invalid_request', summarizeIssues(issues), { issues }) };
}

/** Echo at most 64 characters of a caller's string in a message. */
function clip(text: string): string {
  return text.length > 64 ? `${text.slice(0, 64)}…` : text;
}
