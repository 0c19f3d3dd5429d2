import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

/** Circuit states as numbers, for a gauge: 0 closed, 1 half-open, 2 open. */
const CIRCUIT_VALUE = { closed: 0, 'half-open': 1, open: 2 } as const;

/**
 * The gateway's Prometheus metrics (prom-client), on a registry of its own so several gateways
 * in one process (tests) never share counters. Served at GET /metrics.
 */
export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'dg_' });
  const circuits = new Map<string, () => keyof typeof CIRCUIT_VALUE>();
  let openReviews: (() => Promise<number>) | undefined;
  let cacheBytes: (() => number) | undefined;
  let debitedMicro = 0;
  new Counter({
    name: 'dg_credits_debited_total',
    help: 'Credits debited from keys',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(debitedMicro / 1_000_000);
    },
  });

  const metrics = {
    registry,
    requests: new Counter({
      name: 'dg_http_requests_total',
      help: 'HTTP requests by route, method, status and gateway code',
      labelNames: ['route', 'method', 'status', 'code'] as const,
      registers: [registry],
    }),
    requestDuration: new Histogram({
      name: 'dg_http_request_duration_seconds',
      help: 'Whole-request latency, from arrival to response',
      labelNames: ['route'] as const,
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    labelMass: new Histogram({
      name: 'dg_upstream_label_mass',
      help: 'Logprob upstreams: per request, the lowest share of next-token mass on the offered labels (low = the model did not take the question as asked)',
      labelNames: ['upstream'] as const,
      buckets: [0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9],
      registers: [registry],
    }),
    upstreamDuration: new Histogram({
      name: 'dg_upstream_duration_seconds',
      help: 'Upstream call latency (all attempts), by upstream and outcome',
      labelNames: ['upstream', 'outcome'] as const,
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    }),
    reviews: new Counter({
      name: 'dg_reviews_total',
      help: "Reviewed answers (docs/review.md): agreed when the reviewer's truth matches the answer, else overridden",
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    outcomes: new Counter({
      name: 'dg_outcomes_total',
      help: 'Truths recorded for decisions, once for each upstream whose answer a truth judges, by question type',
      labelNames: ['upstream', 'type'] as const,
      registers: [registry],
    }),
    questions: new Counter({
      name: 'dg_questions_total',
      help: 'Questions evaluated, by type',
      labelNames: ['type'] as const,
      registers: [registry],
    }),
    images: new Counter({
      name: 'dg_images_total',
      help: 'Images in evaluations, after their checks',
      registers: [registry],
    }),
    imageBytes: new Counter({
      name: 'dg_image_bytes_total',
      help: 'Decoded bytes of the images in evaluations (an image by URL counts none)',
      registers: [registry],
    }),
    /** Credits debited, added up in integer micro-credits so the total shows no float noise. */
    creditsDebited: {
      add(credits: number) {
        debitedMicro += Math.round(credits * 1_000_000);
      },
    },
    inFlight: new Gauge({
      name: 'dg_http_requests_in_flight',
      help: 'Requests being handled now',
      registers: [registry],
    }),
    upstreamRetries: new Counter({
      name: 'dg_upstream_retries_total',
      help: 'Upstream attempts retried',
      labelNames: ['upstream'] as const,
      registers: [registry],
    }),
    upstreamCalls: new Counter({
      name: 'dg_upstream_calls_total',
      help: 'Calls to each upstream by outcome: ok, error (failed after its retries) or invalid (failed the checks)',
      labelNames: ['upstream', 'outcome'] as const,
      registers: [registry],
    }),
    routeFallbacks: new Counter({
      name: 'dg_route_fallbacks_total',
      help: 'Requests that moved on to the next upstream of their route, by route and the upstream that failed',
      labelNames: ['route', 'upstream'] as const,
      registers: [registry],
    }),
    routeEscalations: new Counter({
      name: 'dg_route_escalations_total',
      help: 'Unsure answers asked again of the escalation target, by route and outcome',
      labelNames: ['route', 'outcome'] as const,
      registers: [registry],
    }),
    cacheOutcomes: new Counter({
      name: 'dg_cache_requests_total',
      help: 'Evaluations on routes with a decision cache, by route and outcome: hit, coalesced (waited for an identical request), miss, bypass (Cache-Control)',
      labelNames: ['route', 'outcome'] as const,
      registers: [registry],
    }),
    cacheUnavailable: new Counter({
      name: 'dg_cache_unavailable_total',
      help: "Cache lookups and stores that failed because the cache's Redis could not be asked (each a miss)",
      registers: [registry],
    }),
    rateLimited: new Counter({
      name: 'dg_rate_limited_total',
      help: 'Requests refused by the per-key rate limit',
      registers: [registry],
    }),
    // docs/budgets.md
    budgetRefusals: new Counter({
      name: 'dg_budget_refusals_total',
      help: 'Requests refused by a hard budget, one per budget exceeded, by holder (key or project) and window',
      labelNames: ['holder', 'window'] as const,
      registers: [registry],
    }),
    budgetCrossings: new Counter({
      name: 'dg_budget_crossings_total',
      help: 'Soft budgets whose spend crossed 0.8 or 1 of their limit, by holder (key or project), window and threshold',
      labelNames: ['holder', 'window', 'threshold'] as const,
      registers: [registry],
    }),
    budgetCapped: new Counter({
      name: 'dg_budget_capped_total',
      help: 'Settles whose debit a hard budget cut to what it could still take (the excess is not charged)',
      labelNames: ['holder', 'window'] as const,
      registers: [registry],
    }),
    debitCapped: new Counter({
      name: 'dg_debit_capped_total',
      help: 'Requests whose upstream reported more usage than was reserved: charged the reservation (docs/http-api.md#credits)',
      labelNames: ['route'] as const,
      registers: [registry],
    }),
    debitCappedMicroCredits: new Counter({
      name: 'dg_debit_capped_micro_credits_total',
      help: 'Micro-credits of reported usage beyond the reservation, not charged',
      labelNames: ['route'] as const,
      registers: [registry],
    }),
    rateLimitUnavailable: new Counter({
      name: 'dg_rate_limit_unavailable_total',
      help: "Requests let through unlimited because the rate limiter's Redis could not be asked (fail open)",
      registers: [registry],
    }),
    /** Report the in-process decision cache's size on every scrape. */
    watchCacheBytes(bytes: () => number) {
      cacheBytes = bytes;
    },
    /** Report the open review items on every scrape (read from the store, shared by every instance). */
    watchOpenReviews(count: () => Promise<number>) {
      openReviews = count;
    },
    /** Report an upstream's circuit state on every scrape. */
    watchCircuit(upstream: string, state: () => keyof typeof CIRCUIT_VALUE) {
      circuits.set(upstream, state);
    },
  };

  new Gauge({
    name: 'dg_reviews_open',
    help: 'Review items not yet reviewed (docs/review.md)',
    registers: [registry],
    async collect() {
      if (openReviews) this.set(await openReviews().catch(() => Number.NaN));
    },
  });

  new Gauge({
    name: 'dg_cache_bytes',
    help: 'Bytes held by the in-process decision cache (bounded by CACHE_MAX_BYTES)',
    registers: [registry],
    collect() {
      if (cacheBytes) this.set(cacheBytes());
    },
  });

  new Gauge({
    name: 'dg_upstream_circuit_state',
    help: 'Upstream circuit breaker: 0 closed, 1 half-open, 2 open',
    labelNames: ['upstream'] as const,
    registers: [registry],
    collect() {
      for (const [upstream, state] of circuits) this.set({ upstream }, CIRCUIT_VALUE[state()]);
    },
  });

  return metrics;
}

export type GatewayMetrics = ReturnType<typeof createMetrics>;
