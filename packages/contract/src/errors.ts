/**
 * The error table of docs/http-api.md#errors: one row per error type, with its numeric code and HTTP status.
 * Everything else (envelopes, OpenAPI, the client's GatewayError) derives from this table.
 */
export const ERROR_TABLE = {
  invalid_json: { code: 40000, status: 400 },
  invalid_request: { code: 40001, status: 400 },
  invalid_question_count: { code: 40002, status: 400 },
  unknown_model: { code: 40003, status: 400 },
  unknown_route: { code: 40004, status: 400 },
  missing_api_key: { code: 40100, status: 401 },
  invalid_api_key: { code: 40101, status: 401 },
  insufficient_credits: { code: 40200, status: 402 },
  budget_exceeded: { code: 40202, status: 402 },
  forbidden: { code: 40300, status: 403 },
  not_found: { code: 40400, status: 404 },
  method_not_allowed: { code: 40500, status: 405 },
  request_timeout: { code: 40800, status: 408 },
  payload_too_large: { code: 41300, status: 413 },
  unsupported_media_type: { code: 41500, status: 415 },
  headers_too_large: { code: 43100, status: 431 },
  rate_limited: { code: 42900, status: 429 },
  internal_error: { code: 50000, status: 500 },
  upstream_error: { code: 50200, status: 502 },
  unavailable: { code: 50300, status: 503 },
  upstream_timeout: { code: 50400, status: 504 },
} as const satisfies Record<string, { code: number; status: number }>;

export type ErrorType = keyof typeof ERROR_TABLE;
export type ErrorCode = (typeof ERROR_TABLE)[ErrorType]['code'];
export const ERROR_TYPES = Object.keys(ERROR_TABLE) as [ErrorType, ...ErrorType[]];

/** One broken rule: where in the body (path of keys and indices) and what is wrong, for people. */
export interface Issue {
  path: (string | number)[];
  message: string;
}

/** A gateway failure as data: the table row plus what this occurrence says. */
export interface GatewayFailure {
  type: ErrorType;
  code: ErrorCode;
  status: number;
  message: string;
  issues?: Issue[];
  /** For 429 and 503: how long the caller should wait (docs/http-api.md#errors). */
  retryAfterMs?: number;
}

export function failure(
  type: ErrorType,
  message: string,
  extra: { issues?: Issue[]; retryAfterMs?: number } = {},
): GatewayFailure {
  const row = ERROR_TABLE[type];
  return { type, code: row.code, status: row.status, message, ...extra };
}

const TYPE_BY_CODE = new Map<number, ErrorType>(
  ERROR_TYPES.map((type) => [ERROR_TABLE[type].code, type] as const),
);

/** The error type for a numeric code, or undefined for a code not in the table. */
export function errorTypeOfCode(code: number): ErrorType | undefined {
  return TYPE_BY_CODE.get(code);
}

/** `questions.triage.criteria: a choice needs…`: the path as people read it, then the message. */
export function formatIssue(issue: Issue): string {
  return issue.path.length === 0 ? issue.message : `${issue.path.join('.')}: ${issue.message}`;
}

/** The envelope message for a list of issues: the first one, and how many more there are. */
export function summarizeIssues(issues: Issue[]): string {
  const [first] = issues;
  if (!first) return 'the request is invalid';
  const more = issues.length - 1;
  return more === 0 ? formatIssue(first) : `${formatIssue(first)} (and ${more} more)`;
}
