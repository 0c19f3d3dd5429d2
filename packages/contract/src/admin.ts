import { z } from 'zod';
import { BudgetList, BudgetState } from './budgets.ts';
import { credits } from './credits.ts';
import { failure, summarizeIssues } from './errors.ts';
import type { Parsed } from './parse-request.ts';
import { parseWorded, toIssues } from './zod-issues.ts';

export const CreateKeyBody = z
  .strictObject({
    name: z
      .string()
      .min(1, { error: 'must not be empty' })
      .max(100, { error: 'must be at most 100 characters' }),
    credits: credits
      .refine((n) => n >= 0, { error: 'must be at least 0' })
      .nullable()
      .meta({ description: 'Initial credits; null for unlimited.' }),
    expiresAt: z.iso.datetime({ offset: true }).optional(),
    rateLimitPerMinute: z.number().int().min(1).nullable().optional(),
    route: z
      .string()
      .min(1)
      .nullable()
      .optional()
      .meta({ description: 'The route its requests take without an x-dg-route header; null = default.' }),
    projectId: z.string().min(1).nullable().optional().meta({ description: 'The project it belongs to.' }),
    budgets: BudgetList.optional(),
  })
  .meta({ id: 'CreateKeyBody' });
export type CreateKeyBody = z.infer<typeof CreateKeyBody>;

export const AdjustCreditsBody = z
  .strictObject({ amount: credits.meta({ description: 'Credits to add; negative removes.' }) })
  .meta({ id: 'AdjustCreditsBody' });
export type AdjustCreditsBody = z.infer<typeof AdjustCreditsBody>;

export const KeyObject = z
  .strictObject({
    id: z.string(),
    name: z.string(),
    prefix: z.string(),
    credits: z.number().nullable().meta({ description: 'Current balance; null = unlimited.' }),
    rateLimitPerMinute: z.number().int().nullable(),
    route: z.string().nullable().meta({ description: 'null = the default route.' }),
    createdAt: z.string(),
    expiresAt: z.string().nullable(),
    revokedAt: z.string().nullable(),
    lastUsedAt: z.string().nullable(),
    projectId: z.string().nullable().meta({ description: 'The project it belongs to; null = none.' }),
    budgets: z.array(BudgetState),
  })
  .meta({ id: 'KeyObject' });
export type KeyObject = z.infer<typeof KeyObject>;

export const CreatedKey = KeyObject.extend({
  key: z.string().meta({ description: 'The plain key, shown once.' }),
}).meta({ id: 'CreatedKey' });
export type CreatedKey = z.infer<typeof CreatedKey>;

export const UsageRecord = z.strictObject({
  requestId: z.string(),
  creditsUsed: z.number(),
  input_tokens: z.number().int(),
  output_tokens: z.number().int(),
  questions: z.number().int(),
  status: z.number().int(),
  elapsedMs: z.number().int(),
  at: z.string(),
  route: z
    .string()
    .nullable()
    .meta({ description: 'The route taken; null when refused before one was chosen.' }),
  upstream: z.string().nullable().meta({
    description: 'The upstream that answered, `first+escalated` after an escalation; null when none did.',
  }),
  cached: z.boolean().meta({ description: 'Answered from the decision cache.' }),
  subject: z
    .string()
    .nullable()
    .meta({ description: 'The end user of the browser token it came with, if any.' }),
});
export type UsageRecord = z.infer<typeof UsageRecord>;

export const UsageReport = z
  .strictObject({
    totals: z.strictObject({
      requests: z.number().int(),
      creditsUsed: z.number(),
      input_tokens: z.number().int(),
      output_tokens: z.number().int(),
    }),
    recent: z.array(UsageRecord),
  })
  .meta({ id: 'UsageReport' });
export type UsageReport = z.infer<typeof UsageReport>;

export const KeyListQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(1000).default(100),
  cursor: z.string().min(1).max(500).optional().meta({ description: 'The nextCursor of the previous page.' }),
});

export const KeyList = z
  .strictObject({
    keys: z.array(KeyObject).meta({ description: 'Newest first.' }),
    nextCursor: z
      .string()
      .nullable()
      .meta({ description: 'Pass as cursor for the next page; null on the last.' }),
  })
  .meta({ id: 'KeyList' });
export type KeyList = z.infer<typeof KeyList>;

export const UsageQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(1000).default(20),
});

/** Validate an admin body (or query) against its schema: the value, or 40001 with every issue. */
export function parseAdminInput<Schema extends z.ZodType>(
  schema: Schema,
  input: unknown,
): Parsed<z.output<Schema>> {
  const result = parseWorded(schema, input);
  if (result.success) return { ok: true, value: result.data };
  const issues = toIssues(result.error.issues);
  return { ok: false, error: failure('invalid_request', summarizeIssues(issues), { issues }) };
}

/** `DELETE /admin/cache?keyId=K` (docs/operating.md#admin-api, docs/routes.md#decision-cache): all cached decisions, or one key's. */
export const CachePurgeQuery = z.strictObject({
  keyId: z.string().min(1).optional().meta({ description: 'Only the decisions this key stored.' }),
});
export type CachePurgeQuery = z.infer<typeof CachePurgeQuery>;

export const CachePurged = z
  .strictObject({ purged: z.number().int().meta({ description: 'How many cached decisions were dropped.' }) })
  .meta({ id: 'CachePurged' });
export type CachePurged = z.infer<typeof CachePurged>;

/** An exact browser origin: `scheme://host[:port]`, no path (what a browser sends as `Origin`). */
export const Origin = z.string().refine(
  (value) => {
    try {
      const url = new URL(value);
      return (url.protocol === 'http:' || url.protocol === 'https:') && url.origin === value;
    } catch {
      return false;
    }
  },
  { error: 'must be an exact origin: scheme://host[:port], no path' },
);

/** `POST /v1/tokens` (docs/browsers.md): every field optional, the body closed. */
export const CreateTokenBody = z
  .strictObject({
    ttlSeconds: z
      .number()
      .int({ error: 'must be a whole number of seconds' })
      .min(10, { error: 'must be at least 10' })
      .max(3600, { error: 'must be at most 3600' })
      .optional()
      .meta({ description: 'How long the token lives (default 600).' }),
    maxCredits: credits
      .refine((n) => n > 0, { error: 'must be above 0' })
      .optional()
      .meta({ description: 'The most the token may ever spend (default: the key’s balance is the limit).' }),
    origins: z
      .array(Origin)
      .min(1, { error: 'give 1 to 16 origins' })
      .max(16, { error: 'give 1 to 16 origins' })
      .optional()
      .meta({ description: 'Exact origins it may be used from (default: any origin in CORS_ORIGINS).' }),
    subject: z
      .string()
      .min(1, { error: 'must not be empty' })
      .max(128, { error: 'must be at most 128 characters' })
      .optional()
      .meta({ description: 'The end user, recorded on every usage record.' }),
    rateLimitPerMinute: z
      .number()
      .int()
      .min(1)
      .optional()
      .meta({ description: 'The token’s own bucket, on top of the key’s.' }),
    route: z
      .string()
      .min(1)
      .optional()
      .meta({ description: 'A route the token always uses (x-dg-route is then ignored).' }),
  })
  .meta({ id: 'CreateTokenBody' });
export type CreateTokenBody = z.infer<typeof CreateTokenBody>;

export const CreatedToken = z
  .strictObject({
    token: z.string().meta({ description: 'The token (`dgt_…`), shown once.' }),
    expiresAt: z.string(),
    maxCredits: z.number().nullable(),
    origins: z.array(z.string()).nullable(),
    subject: z.string().nullable(),
    route: z.string().nullable(),
  })
  .meta({ id: 'CreatedToken' });
export type CreatedToken = z.infer<typeof CreatedToken>;

/** The steps a usage series can be summed by (docs/operating.md#admin-api). */
export const SERIES_STEPS = { minute: 60_000, hour: 3_600_000, day: 86_400_000 } as const;
export type SeriesStep = keyof typeof SERIES_STEPS;

/** `GET /admin/usage/series` (docs/operating.md#admin-api): for the console's charts. */
export const UsageSeriesQuery = z
  .strictObject({
    keyId: z.string().min(1).optional().meta({ description: 'One key; all keys when absent.' }),
    from: z.iso.datetime({ offset: true }).meta({ description: 'Start, inclusive.' }),
    to: z.iso.datetime({ offset: true }).optional().meta({ description: 'End, exclusive (default: now).' }),
    step: z.enum(['minute', 'hour', 'day'], { error: 'must be minute, hour or day' }),
  })
  .refine((q) => q.to === undefined || Date.parse(q.to) > Date.parse(q.from), {
    error: 'to must come after from',
    path: ['to'],
  });
export type UsageSeriesQuery = z.infer<typeof UsageSeriesQuery>;

/** What usage sums to over a step or a range (docs/usage.md), latencies over every record. */
const usageFigures = {
  requests: z.number().int(),
  errors: z.number().int().meta({ description: 'Records with a status other than 200.' }),
  creditsUsed: z.number(),
  input_tokens: z.number().int(),
  output_tokens: z.number().int(),
  cacheHits: z.number().int(),
  p50ElapsedMs: z
    .number()
    .nullable()
    .meta({ description: 'From the latency buckets, as histogram_quantile.' }),
  p95ElapsedMs: z.number().nullable(),
};

export const UsagePoint = z.strictObject({
  at: z.string().meta({ description: 'The start of the step (UTC).' }),
  ...usageFigures,
});
export type UsagePoint = z.infer<typeof UsagePoint>;

export const UsageFigures = z.strictObject(usageFigures).meta({ id: 'UsageFigures' });
export type UsageFigures = z.infer<typeof UsageFigures>;

/** `GET /admin/usage/summary` (docs/usage.md): the console's Overview. */
export const UsageSummaryQuery = z
  .strictObject({
    keyId: z.string().min(1).optional().meta({ description: 'One key; all keys when absent.' }),
    from: z.iso.datetime({ offset: true }).meta({ description: 'Start, inclusive.' }),
    to: z.iso.datetime({ offset: true }).optional().meta({ description: 'End, exclusive (default: now).' }),
  })
  .refine((q) => q.to === undefined || Date.parse(q.to) > Date.parse(q.from), {
    error: 'to must come after from',
    path: ['to'],
  });
export type UsageSummaryQuery = z.infer<typeof UsageSummaryQuery>;

export const UsageSummary = z
  .strictObject({
    from: z
      .string()
      .meta({ description: 'The start summed: `from` rounded down to the finest resolution still kept.' }),
    to: z.string().meta({ description: 'The end summed (exclusive), rounded up likewise.' }),
    totals: UsageFigures,
    byRoute: z.array(z.strictObject({ route: z.string().nullable(), ...usageFigures })),
    byUpstream: z.array(z.strictObject({ upstream: z.string().nullable(), ...usageFigures })),
    byKey: z
      .array(z.strictObject({ keyId: z.string(), name: z.string(), prefix: z.string(), ...usageFigures }))
      .meta({ description: 'The 20 keys that spent most credits, most first.' }),
    byProject: z.array(z.strictObject({ projectId: z.string(), name: z.string(), ...usageFigures })).meta({
      description: 'Each project’s keys summed, most spent first (keys without a project left out).',
    }),
  })
  .meta({ id: 'UsageSummary' });
export type UsageSummary = z.infer<typeof UsageSummary>;

export const UsageSeries = z
  .strictObject({ step: z.enum(['minute', 'hour', 'day']), series: z.array(UsagePoint) })
  .meta({ id: 'UsageSeries' });
export type UsageSeries = z.infer<typeof UsageSeries>;

export const UpstreamHealth = z
  .strictObject({
    upstreams: z.array(
      z.strictObject({
        name: z.string(),
        kind: z.string().nullable(),
        circuit: z.enum(['closed', 'open', 'half-open']),
        calls: z.number().int(),
        failures: z.number().int(),
      }),
    ),
    routes: z.array(
      z.strictObject({
        name: z.string(),
        upstreams: z.array(z.string()),
        weights: z.record(z.string(), z.number()).nullable(),
        escalateTo: z.string().nullable(),
        cacheTtlSeconds: z.number().int(),
      }),
    ),
  })
  .meta({ id: 'UpstreamHealth' });
export type UpstreamHealth = z.infer<typeof UpstreamHealth>;
