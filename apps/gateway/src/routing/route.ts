import {
  type Answer,
  type EvaluationRequest,
  failure,
  type GatewayFailure,
  setOwn,
  type Usage,
  type UsageDetails,
} from '@decision-gateway/contract';
import {
  type CheckOptions,
  checkDecision,
  checkUsage,
  isUnsure,
  MAX_TOKEN_COUNT,
  type UnsureRule,
  type Upstream,
  type UpstreamCall,
} from '@decision-gateway/questions';
import type { Logger } from 'pino';
import { calibrated, type MapLookup, mapsApplied } from '../calibration-maps/calibrate.ts';
import { asksNothing, type ImageNeeds, needsOf, noCapableUpstream, takes } from '../images/capabilities.ts';
import { ATTR } from '../telemetry/attributes.ts';
import { asAttempt, inSpan, markFailed, type TraceParent } from '../telemetry/spans.ts';
import { askInGroups } from '../upstreams/groups.ts';
import { invalidAnswer } from '../upstreams/invalid-answer.ts';

/** One upstream of a route, with the deadline of each call to it. */
export interface RouteMember {
  upstream: Upstream;
  timeoutMs: number;
}

export interface Escalation {
  to: RouteMember;
  /** A choice or score whose confidence is below this is unsure. */
  confidenceBelow?: number;
  /** A noul within these bounds (inclusive) is unsure. */
  noulWithin?: readonly [number, number];
}

export interface RouteSpec {
  name: string;
  /** The fallback chain, in its configured order (1–8). */
  members: RouteMember[];
  /** Weights of the first upstream tried; the rest follow in order. */
  weights?: Readonly<Record<string, number>>;
  escalate?: Escalation;
  /** The whole request, fallbacks and escalation included, ends by then. */
  deadlineMs: number;
  /** How long a decision on this route is kept (docs/routes.md#decision-cache); 0 = no cache. */
  cacheTtlSeconds: number;
  /** Each answer through the active calibration map of its upstream and type (docs/calibration-maps.md). */
  calibrate?: boolean;
  /** Which final answers are marked for review by a person (docs/review.md). */
  review?: UnsureRule;
}

/** What a route tells the core and metrics about each upstream it called. */
export interface RouteEvents {
  called?(upstream: string, outcome: 'ok' | 'error' | 'invalid', seconds: number): void;
  fellBack?(route: string, from: string): void;
  escalated?(route: string, outcome: 'ok' | 'error'): void;
}

/** What a route answers: its checked decision, or the failure that ended it. */
export type RouteOutcome = RouteAnswer | { ok: false; failure: GatewayFailure; detail?: string };

/** A route's checked decision: the answers, what they cost in tokens, and who gave them. */
export type RouteAnswer = UpstreamAnswers & {
  ok: true;
  /** The upstreams that answered, in the order asked, joined by `+` (docs/routes.md). */
  upstream: string;
  /**
   * Where more than one upstream answered: who gave each final answer, and for a question
   * answered again (escalated, or declined first) the first upstream's answer, which the
   * final one replaced (docs/outcomes.md). Absent: `upstream` answered all.
   */
  attribution?: Attribution;
  /** On a route that calibrates: the maps applied to the final answers (`x-dg-calibration`). */
  calibration?: string[];
  /** On a route that reviews: the questions whose final answers are unsure (`x-dg-review`). */
  review?: string[];
};

/** What the route is asked: the upstreams' call, and what the caller's door can show. */
export interface RouteCall extends UpstreamCall {
  /**
   * The door has a shape for a refusal (the OpenAI door): a question still declined after the
   * escalation target had its try reaches the caller. Otherwise the route's next upstreams are
   * asked, and a question none answers fails the request (docs/routes.md#refused-questions).
   */
  showsRefusals?: boolean;
  /**
   * The door has a shape for an input an upstream blocked (the Gemini door's `prompt_feedback`):
   * questions still declined after the route's other upstreams were asked are answered with the
   * block rather than failing the request.
   */
  showsBlocks?: boolean;
  /** The active calibration maps, for a route that calibrates (docs/calibration-maps.md). */
  calibration?: MapLookup;
}

export interface Route {
  readonly spec: RouteSpec;
  /**
   * The reservation: the largest bound of the upstreams that can answer, plus the escalation
   * target's (docs/routes.md); `imageTokens` are the images' (docs/images.md#billing).
   */
  usageBound(request: EvaluationRequest, bodyBytes: number, needs?: ImageNeeds, imageTokens?: number): Usage;
  /** Why none of its upstreams can answer a request with these needs (docs/images.md#upstreams), if none can. */
  refuses(needs: ImageNeeds): string | undefined;
  answer(call: RouteCall): Promise<RouteOutcome>;
}

export interface RouteDeps {
  logger: Logger;
  events?: RouteEvents;
  clock?: () => number;
  /** A number in [0, 1), for the weighted draw. */
  random?: () => number;
}

/**
 * Whether an upstream can answer a request with these needs. Not a closure made per request: run
 * through tsx, each closure made also names itself (esbuild's keepNames), and redefining a
 * function's `name` turns it into a dictionary object, ~0.5 µs each (docs/performance.md).
 */
const able = (upstream: Upstream, needs: ImageNeeds | undefined): boolean =>
  needs === undefined || asksNothing(needs) || takes(upstream, needs);

/** Failures after which the next upstream is tried; anything else (a 40001) ends the request. */
const FALLS_BACK = new Set([50200, 50300, 50400]);

const maxUsage = (a: Usage, b: Usage): Usage => ({
  input_tokens: Math.max(a.input_tokens, b.input_tokens),
  output_tokens: Math.max(a.output_tokens, b.output_tokens),
});
/** Two checked reports summed; a sum past what one report may hold stays at it (the charge is capped anyway). */
const addUsage = (a: Usage, b: Usage): Usage => ({
  input_tokens: Math.min(MAX_TOKEN_COUNT, a.input_tokens + b.input_tokens),
  output_tokens: Math.min(MAX_TOKEN_COUNT, a.output_tokens + b.output_tokens),
});

/** Checked answers (docs/upstreams.md), from one upstream or several together. */
type UpstreamAnswers = {
  /** Keyed by the question IDs answered. */
  answers: Record<string, Answer>;
  /** Questions every upstream asked declined (only where the caller's door can show a refusal). */
  refused: string[];
  usage: Usage;
  upstreamRequestId?: string;
  labelMass?: number;
  usageDetails?: UsageDetails;
  /** An upstream blocked the input (docs/routes.md#refused-questions): its own account of why. */
  blocked?: Record<string, unknown>;
};

/** Who answered each question, where more than one upstream did. */
export interface Attribution {
  answeredBy: Record<string, string>;
  replaced: Record<string, { upstream: string; answer: Answer }>;
}

/** What the upstreams asked so far answered together, and who answered. */
type Combined = UpstreamAnswers & { answeredBy: string[]; attribution: Attribution };

/** A later answer takes the place of the first for the questions it answered; every answer is billed. */
function merge(result: Combined, later: UpstreamAnswers, name: string): void {
  const { answeredBy, replaced } = result.attribution;
  for (const id of Object.keys(later.answers)) {
    const before = result.answers[id];
    if (before !== undefined && !Object.hasOwn(replaced, id))
      setOwn(replaced, id, { upstream: answeredBy[id] as string, answer: before });
    setOwn(answeredBy, id, name);
  }
  result.answers = { ...result.answers, ...later.answers };
  // Still declined: what was declined and the later upstream did not answer.
  result.refused = result.refused.filter((id) => !Object.hasOwn(later.answers, id));
  result.usage = addUsage(result.usage, later.usage);
  if (later.usageDetails) {
    const before = result.usageDetails;
    result.usageDetails = {
      cached_tokens: (before?.cached_tokens ?? 0) + later.usageDetails.cached_tokens,
      cache_write_tokens: (before?.cache_write_tokens ?? 0) + later.usageDetails.cache_write_tokens,
      reasoning_tokens: (before?.reasoning_tokens ?? 0) + later.usageDetails.reasoning_tokens,
    };
  }
  result.answeredBy.push(name);
  result.blocked ??= later.blocked;
}

/**
 * A route (docs/routes.md): its upstreams tried one after another until one gives an answer that passes
 * the checks of docs/upstreams.md, then the unsure questions asked again of the escalation target. Each upstream
 * keeps its own retries inside its own timeout; the route's deadline bounds everything, so retries
 * never multiply across a fallback chain.
 */
export function createRoute(spec: RouteSpec, deps: RouteDeps): Route {
  const clock = deps.clock ?? Date.now;
  const random = deps.random ?? Math.random;
  const spanName = `dg.route ${spec.name}`;
  /** How each upstream's answers are checked (may it refuse, how it rounds): made once per upstream. */
  const checks = new Map<Upstream, CheckOptions>();
  const checksFor = (upstream: Upstream): CheckOptions => {
    let options = checks.get(upstream);
    if (options === undefined) {
      options = {
        ...(upstream.refuses && { refusals: true }),
        ...(upstream.tolerance && { tolerance: upstream.tolerance }),
      };
      checks.set(upstream, options);
    }
    return options;
  };

  /**
   * One attempt on one upstream, bounded by its timeout and the route's deadline, then checked.
   * `tries` counts this request's attempts (`dg.attempt` on the spans of its upstream calls).
   */
  async function attempt(
    member: RouteMember,
    call: RouteCall,
    request: EvaluationRequest,
    tries: { count: number },
    escalation = false,
  ) {
    const name = member.upstream.name;
    const deadlineAt = Math.min(call.deadlineAt, clock() + member.timeoutMs);
    const started = performance.now();
    tries.count++;
    const asked: UpstreamCall = { ...call, request, deadlineAt };
    if (call.trace !== undefined)
      asked.trace = asAttempt(call.trace as TraceParent, { attempt: tries.count, escalation });
    const outcome = await askInGroups(member.upstream, asked);
    const seconds = (performance.now() - started) / 1000;
    if (!outcome.ok) {
      deps.events?.called?.(name, 'error', seconds);
      return outcome;
    }
    const answers = checkDecision(request.questions, outcome.answers, checksFor(member.upstream));
    const usage = checkUsage(outcome.usage);
    if (!answers.ok || !usage.ok) {
      deps.events?.called?.(name, 'invalid', seconds);
      const reason = answers.ok ? (usage as { reason: string }).reason : answers.reason;
      return invalidAnswer(reason);
    }
    deps.events?.called?.(name, 'ok', seconds);
    // Calibrated before anything reads them: escalation and review see the corrected answers.
    const checked =
      spec.calibrate && call.calibration
        ? calibrated(request.questions, answers.value.answers, name, call.calibration)
        : answers.value.answers;
    // `refused` first: a key the spread object lacks, added after it, gives every answer a hidden
    // class of its own on V8 11 (docs/performance.md, "Objects that share a shape"). Written first,
    // it is kept only because an upstream's outcome has no `refused` of its own (UpstreamOutcome).
    return { refused: answers.value.refused, ...outcome, answers: checked, usage: usage.value };
  }

  /** The order of this request's tries: the first drawn by weight, the rest as configured. */
  function order(): RouteMember[] {
    if (spec.weights === undefined) return spec.members;
    const weights = spec.members.map((m) => spec.weights?.[m.upstream.name] ?? 0);
    const total = weights.reduce((sum, w) => sum + w, 0);
    let point = random() * total;
    let first = 0;
    for (; first < weights.length - 1; first++) {
      point -= weights[first] as number;
      if (point < 0) break;
    }
    return [spec.members[first] as RouteMember, ...spec.members.filter((_, i) => i !== first)];
  }

  /** The questions whose answers are unsure by the route's escalation rule. */
  function unsure(answers: Record<string, Answer>, rule: Escalation): string[] {
    return Object.entries(answers)
      .filter(([, answer]) => isUnsure(answer, rule))
      .map(([id]) => id);
  }

  /** The same request with only the questions `ids`. */
  const subset = (request: EvaluationRequest, ids: readonly string[]): EvaluationRequest => ({
    ...request,
    questions: Object.fromEntries(
      ids.map((id) => [id, request.questions[id]]),
    ) as EvaluationRequest['questions'],
  });

  async function answer(call: RouteCall): Promise<RouteOutcome> {
    const tried: string[] = [];
    const tries = { count: 0 };
    // A request with images (or a box) is asked only of the upstreams that take them, in order.
    const needs = call.images === undefined ? undefined : needsOf(call.request, call.images);
    const members = needs === undefined ? order() : order().filter((m) => takes(m.upstream, needs));
    let last: { failure: GatewayFailure; detail?: string } | undefined;
    let first: UpstreamAnswers | undefined;
    let firstIndex = -1;
    for (let index = 0; index < members.length; index++) {
      const member = members[index] as RouteMember;
      // No upstream is started once the deadline has passed.
      if (tried.length > 0 && clock() >= call.deadlineAt) break;
      const name = member.upstream.name;
      const outcome = await attempt(member, call, call.request, tries);
      if (outcome.ok) {
        first = outcome;
        firstIndex = index;
        break;
      }
      tried.push(`${name}: ${outcome.failure.message} (${outcome.failure.code})`);
      last = { failure: outcome.failure, ...(outcome.detail !== undefined && { detail: outcome.detail }) };
      // The caller's input was refused: the next upstream would refuse it too.
      if (!FALLS_BACK.has(outcome.failure.code)) return { ok: false, ...last };
      deps.events?.fellBack?.(spec.name, name);
    }
    if (first === undefined) {
      const lastFailure = last?.failure ?? failure('upstream_timeout', 'the route deadline passed');
      // One upstream: its own message. Several: each named with its failure, in order.
      const message = tried.length > 1 ? `every upstream failed: ${tried.join('; ')}` : lastFailure.message;
      return { ok: false, failure: { ...lastFailure, message }, detail: last?.detail ?? message };
    }

    const firstName = (members[firstIndex] as RouteMember).upstream.name;
    const rule =
      spec.escalate && (needs === undefined || takes(spec.escalate.to.upstream, needs))
        ? spec.escalate
        : undefined;
    // The common case: one upstream answered everything, and nothing goes on to another.
    if (first.refused.length === 0 && (rule === undefined || rule.to.upstream.name === firstName))
      return finished({ ok: true, ...first, upstream: firstName });
    const result: Combined = {
      answers: first.answers,
      refused: first.refused,
      usage: first.usage,
      answeredBy: [firstName],
      attribution: {
        answeredBy: Object.fromEntries(Object.keys(first.answers).map((id) => [id, firstName])),
        replaced: {},
      },
      ...(first.upstreamRequestId !== undefined && { upstreamRequestId: first.upstreamRequestId }),
      ...(first.labelMass !== undefined && { labelMass: first.labelMass }),
      ...(first.usageDetails !== undefined && { usageDetails: first.usageDetails }),
      ...(first.blocked !== undefined && { blocked: first.blocked }),
    };
    if (rule !== undefined && rule.to.upstream.name !== firstName) await escalate(call, rule, result, tries);
    // Declined questions the door cannot show: the route's next upstreams, in order, until one answers.
    if (result.refused.length > 0 && !call.showsRefusals) {
      const escalatedTo = rule?.to.upstream.name;
      for (const member of members.slice(firstIndex + 1)) {
        if (result.refused.length === 0 || clock() >= call.deadlineAt) break;
        if (member.upstream.name === escalatedTo && result.answeredBy.includes(escalatedTo)) continue;
        const again = await attempt(member, call, subset(call.request, result.refused), tries);
        if (again.ok) merge(result, again, member.upstream.name);
      }
      // A blocked input, on a door that shows it: the block, and no answers (docs/gemini.md#blocked-input).
      if (result.refused.length > 0 && call.showsBlocks && result.blocked !== undefined)
        return {
          ok: true,
          answers: {},
          refused: Object.keys(call.request.questions),
          usage: result.usage,
          blocked: result.blocked,
          upstream: result.answeredBy.join('+'),
        };
      if (result.refused.length > 0) {
        const reason = `every upstream declined the questions ${result.refused.map((id) => JSON.stringify(id)).join(', ')}`;
        return { ok: false, failure: failure('upstream_error', reason), detail: reason };
      }
    }
    // A block another upstream answered past is no longer the caller's concern.
    const { answeredBy, attribution, blocked: _answered, ...rest } = result;
    return finished({
      ok: true,
      ...rest,
      upstream: answeredBy.join('+'),
      ...(answeredBy.length > 1 && { attribution }),
    });
  }

  /** The final answers' calibration maps and the questions marked for review, where the route asks for them. */
  function finished(answer: RouteAnswer): RouteAnswer {
    if (spec.calibrate) {
      const maps = mapsApplied(answer.answers);
      if (maps.length > 0) answer.calibration = maps;
    }
    if (spec.review) {
      const rule = spec.review;
      const marked = Object.keys(answer.answers).filter(
        (id) => !answer.refused.includes(id) && isUnsure(answer.answers[id] as Answer, rule),
      );
      if (marked.length > 0) answer.review = marked;
    }
    return answer;
  }

  /**
   * Exactly the unsure questions, and the declined ones, asked again of the escalation target in
   * one call with the same state. If it fails, the first answers stand.
   */
  async function escalate(
    call: RouteCall,
    rule: Escalation,
    result: Combined,
    tries: { count: number },
  ): Promise<void> {
    const ids = [...unsure(result.answers, rule), ...result.refused];
    if (ids.length === 0) return;
    if (clock() >= call.deadlineAt) {
      deps.events?.escalated?.(spec.name, 'error');
      deps.logger.warn(
        { requestId: call.requestId, route: spec.name },
        'escalation skipped: the route deadline passed',
      );
      return;
    }
    const second = await attempt(rule.to, call, subset(call.request, ids), tries, true);
    if (!second.ok) {
      deps.events?.escalated?.(spec.name, 'error');
      deps.logger.warn(
        {
          requestId: call.requestId,
          route: spec.name,
          upstream: rule.to.upstream.name,
          code: second.failure.code,
          reason: second.detail,
        },
        'escalation failed: the first answers stand',
      );
      return;
    }
    deps.events?.escalated?.(spec.name, 'ok');
    merge(result, second, rule.to.upstream.name);
  }

  return {
    spec,
    usageBound(request, bodyBytes, needs, imageTokens = 0) {
      let bound: Usage = { input_tokens: 0, output_tokens: 0 };
      for (const member of spec.members)
        if (able(member.upstream, needs))
          bound = maxUsage(bound, member.upstream.usageBound(request, bodyBytes, imageTokens));
      return spec.escalate === undefined || !able(spec.escalate.to.upstream, needs)
        ? bound
        : addUsage(bound, spec.escalate.to.upstream.usageBound(request, bodyBytes, imageTokens));
    },
    refuses: (needs) =>
      noCapableUpstream(
        spec.name,
        spec.members.map((member) => member.upstream),
        needs,
      ),
    answer: (call) => (call.trace === undefined ? answer(call) : tracedAnswer(call)),
  };

  /** The route's work as one span, `dg.route <name>`, over the spans of its upstream calls. */
  function tracedAnswer(call: RouteCall): Promise<RouteOutcome> {
    const parent = call.trace as TraceParent;
    return inSpan(spanName, parent, { [ATTR.route]: spec.name }, async (span, inside) => {
      const outcome = await answer({ ...call, trace: inside });
      if (span === undefined) return outcome;
      if (outcome.ok) span.setAttribute(ATTR.upstream, outcome.upstream);
      else markFailed(span, outcome.failure.type);
      return outcome;
    });
  }
}
