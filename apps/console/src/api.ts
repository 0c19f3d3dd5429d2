import type {
  BudgetSpec,
  Calibration,
  CalibrationMapList,
  CreatedKey,
  CreatedToken,
  KeyList,
  KeyObject,
  ProjectList,
  ProjectObject,
  ReviewItem,
  ReviewList,
  Truth,
  UpstreamHealth,
  UsageReport,
  UsageSeries,
  UsageSummary,
} from '@decision-gateway/contract';

const TOKEN_KEY = 'dg-admin-token';

/** The admin token lives in this tab's sessionStorage only: never a URL, a cookie or a log. */
export const adminToken = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (token: string) => sessionStorage.setItem(TOKEN_KEY, token),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

/** An admin API failure: the envelope's code and message, shown beside the control that caused it. */
export class AdminError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

async function call<T>(method: string, path: string, body?: unknown, token = adminToken.get()): Promise<T> {
  const response = await fetch(path, {
    method,
    headers: {
      authorization: `Bearer ${token ?? ''}`,
      ...(body !== undefined && { 'content-type': 'application/json' }),
    },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  const envelope = (await response.json()) as { code: number; message: string; data: T };
  if (envelope.code !== 0) throw new AdminError(envelope.code, envelope.message);
  return envelope.data;
}

/** The admin API (the gateway's `/admin`), typed by the contract's schemas. */
export const admin = {
  check: (token: string) => call<KeyList>('GET', '/admin/keys?limit=1', undefined, token),
  listKeys: (cursor?: string) =>
    call<KeyList>('GET', `/admin/keys?limit=20${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`),
  getKey: (id: string) => call<KeyObject>('GET', `/admin/keys/${encodeURIComponent(id)}`),
  createKey: (name: string, credits: number | null) =>
    call<CreatedKey>('POST', '/admin/keys', { name, credits }),
  addCredits: (id: string, amount: number) =>
    call<KeyObject>('POST', `/admin/keys/${encodeURIComponent(id)}/credits`, { amount }),
  revoke: (id: string) => call<KeyObject>('POST', `/admin/keys/${encodeURIComponent(id)}/revoke`),
  usage: (id: string) => call<UsageReport>('GET', `/admin/keys/${encodeURIComponent(id)}/usage?limit=20`),
  series: (id: string, from: string, step: 'minute' | 'hour' | 'day') =>
    call<UsageSeries>('GET', `/admin/usage/series?keyId=${encodeURIComponent(id)}&from=${from}&step=${step}`),
  /** All keys together (the Overview). */
  allSeries: (from: string, step: 'minute' | 'hour' | 'day') =>
    call<UsageSeries>('GET', `/admin/usage/series?from=${from}&step=${step}`),
  summary: (from: string) => call<UsageSummary>('GET', `/admin/usage/summary?from=${from}`),
  calibration: (target: number, calibrated = false) =>
    call<Calibration>('GET', `/admin/calibration?target=${target}${calibrated ? '&calibrated=true' : ''}`),
  /** Calibration maps (docs/calibration-maps.md), newest first. */
  calibrationMaps: () => call<CalibrationMapList>('GET', '/admin/calibration/maps'),
  /** Review items (docs/review.md), oldest first. */
  reviews: (status: 'open' | 'done', limit = 100) =>
    call<ReviewList>('GET', `/admin/reviews?status=${status}&limit=${limit}`),
  submitReview: (id: string, outcomes: Record<string, Truth>, reviewer: string) =>
    call<ReviewItem>('POST', `/admin/reviews/${encodeURIComponent(id)}`, { outcomes, reviewer }),
  upstreams: () => call<UpstreamHealth>('GET', '/admin/upstreams'),
  /** Projects and budgets (docs/budgets.md). */
  listProjects: () => call<ProjectList>('GET', '/admin/projects'),
  createProject: (name: string) => call<ProjectObject>('POST', '/admin/projects', { name }),
  setProjectBudgets: (id: string, budgets: BudgetSpec[]) =>
    call<ProjectObject>('PATCH', `/admin/projects/${encodeURIComponent(id)}`, { budgets }),
  /** The keys the Overview looks through for budgets past 80% (the first 1000). */
  keysForBudgets: () => call<KeyList>('GET', '/admin/keys?limit=1000'),
  mintToken: (id: string, origin: string) =>
    call<CreatedToken>('POST', `/admin/keys/${encodeURIComponent(id)}/tokens`, {
      ttlSeconds: 600,
      origins: [origin],
      subject: 'console playground',
    }),
};
