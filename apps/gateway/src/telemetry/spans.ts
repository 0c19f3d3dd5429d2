import {
  type Attributes,
  type Context,
  type ContextManager,
  createContextKey,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import { ATTR, GEN_AI_OPERATION } from './attributes.ts';

/**
 * The spans the gateway writes (docs/tracing.md). Tracing is on in a process once
 * `startTracing` hands over its tracer; until then every helper here only calls through, so a
 * gateway without the OTEL_* variables pays one comparison per step.
 *
 * Each span's parent is passed along explicitly (a request's `TraceParent`), never looked up in
 * an ambient context: on Node 20 that would be AsyncLocalStorage, whose hook on every promise the
 * process makes cost more than the spans themselves (docs/performance.md).
 */
let tracer: Tracer | undefined;

/** Where a span's children attach: an OpenTelemetry context holding their parent span. */
export type TraceParent = Context;

/** Called once by `startTracing`, and with undefined when it shuts down. */
export function useTracer(next: Tracer | undefined): void {
  tracer = next;
}

export const tracingOn = (): boolean => tracer !== undefined;

/** The tracer, for the request spans (`request-spans.ts`); only called while tracing is on. */
export function activeTracer(): Tracer {
  if (tracer === undefined) throw new Error('tracing is off');
  return tracer;
}

/**
 * A context manager that keeps no ambient context: `with` only calls through. The SDK would
 * otherwise install AsyncLocalStorage (and its promise hook) for the whole process.
 */
export const EXPLICIT_CONTEXT: ContextManager = {
  active: () => ROOT_CONTEXT,
  with: (_context, fn, thisArg, ...args) => fn.call(thisArg, ...args),
  bind: (_context, target) => target,
  enable() {
    return this;
  },
  disable() {
    return this;
  },
};

/**
 * `run` inside an INTERNAL span named `name` under `parent`; `run` gets the span (to add what it
 * learns) and the context its own children attach to. The span ends when `run` settles; a throw
 * marks it an error. While tracing is off (or the request has no trace) `run` is only called.
 */
export function inSpan<T>(
  name: string,
  parent: TraceParent | undefined,
  attributes: Attributes | undefined,
  run: (span: Span | undefined, inside: TraceParent | undefined) => Promise<T>,
): Promise<T> {
  if (tracer === undefined || parent === undefined) return run(undefined, undefined);
  // A trace the sampler left out records nothing below its root: its children are not made, and
  // what is under them carries on the root's context (so upstream calls still say "not sampled").
  if (!recording(parent)) return run(undefined, parent);
  const span = tracer.startSpan(name, { kind: SpanKind.INTERNAL, ...(attributes && { attributes }) }, parent);
  return run(span, trace.setSpan(parent, span)).then(
    (value) => {
      span.end();
      return value;
    },
    (error: unknown) => {
      markFailed(span, errorTypeOf(error));
      span.end();
      throw error;
    },
  );
}

/**
 * Whether the trace `parent` belongs to is sampled: a left-out one makes no child spans. Its flag,
 * not `isRecording()`: a SERVER span ended early (its client went away) stops recording, yet the
 * work still under way beneath it (the upstream's answer, the settle) belongs in its trace.
 */
function recording(parent: TraceParent): boolean {
  const flags = trace.getSpanContext(parent)?.traceFlags ?? TraceFlags.NONE;
  return (flags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED;
}

/**
 * An upstream call of a trace the sampler left out: no span, but the W3C headers of the trace
 * (flags 00), so the upstream leaves it out too.
 */
function unrecordedCall(parent: TraceParent, headers: Record<string, string>): ClientSpan {
  const carrier = carrierOf(headers);
  propagation.inject(parent, carrier);
  const context = trace.getSpanContext(parent);
  const ids = { traceId: context?.traceId ?? '', spanId: context?.spanId ?? '' };
  return { headers: carrier, ids, answered() {}, read() {}, end() {} };
}

/**
 * A copy of the call's headers for the propagator to add `traceparent` to. Not `{ ...headers }`:
 * a key added to a spread copy gives every copy a hidden class of its own on V8 11, slow to make
 * and slow for undici to read (docs/performance.md, "Objects that share a shape").
 */
const carrierOf = (headers: Record<string, string>): Record<string, string> => Object.assign({}, headers);

/** The ids of the span `parent` holds, for a log line written under it; none while not tracing. */
export function traceIdsOf(parent: TraceParent | undefined): { traceId?: string; spanId?: string } {
  const span = parent === undefined ? undefined : trace.getSpan(parent);
  if (span === undefined) return {};
  const { traceId, spanId } = span.spanContext();
  return { traceId, spanId };
}

/** A span's status set to error, with `error.type`. */
export function markFailed(span: Span, errorType: string): void {
  span.setStatus({ code: SpanStatusCode.ERROR });
  span.setAttribute(ATTR.errorType, errorType);
}

const errorTypeOf = (error: unknown): string =>
  error instanceof Error ? error.constructor.name || 'Error' : typeof error;

/** Which try of the route an upstream call belongs to (`dg.attempt`), and whether it escalates. */
export interface UpstreamAttempt {
  /** 1 for the first upstream tried, 2 for the next, …; a retry keeps its attempt's number. */
  attempt: number;
  escalation: boolean;
}

const ATTEMPT = createContextKey('decision-gateway.upstream-attempt');

/** `parent` with `attempt` known to the spans of the upstream calls made under it. */
export function asAttempt(
  parent: TraceParent | undefined,
  attempt: UpstreamAttempt,
): TraceParent | undefined {
  return parent?.setValue(ATTEMPT, attempt);
}

/** What an upstream is, for the spans of its calls. */
export interface UpstreamIdentity {
  /** Its configured name (`dg.upstream`). */
  name: string;
  /** Its kind (`gen_ai.provider.name`). */
  provider: string;
  /** The model it is asked for, where its kind has one. */
  model: string | undefined;
  address: string;
  port: number;
}

/** What an upstream's answer says about itself, read by its kind (`gen_ai.response.*`, usage). */
export interface ResponseFacts {
  model?: string | undefined;
  inputTokens?: number | undefined;
  outputTokens?: number | undefined;
}

/** One upstream HTTP call's CLIENT span, and the `traceparent` the call carries. */
export interface ClientSpan {
  /** The request headers with this span's trace context added. */
  headers: Record<string, string>;
  /** For the call's log lines. */
  ids: { traceId: string; spanId: string };
  /** The answer's status and the upstream's request id. */
  answered(status: number, responseId: string | undefined): void;
  /** What a successful answer's body says. */
  read(facts: ResponseFacts): void;
  /** Ends the span; `errorType` marks it failed. */
  end(errorType?: string): void;
}

/**
 * The CLIENT span of one HTTP call to an upstream: every retry, fallback, group and escalation
 * is its own call and its own span (a backoff wait is in none). Undefined while tracing is off.
 */
export function clientSpan(
  upstream: UpstreamIdentity,
  parent: TraceParent | undefined,
  call: { retry: number; questions: number },
  headers: Record<string, string>,
): ClientSpan | undefined {
  if (tracer === undefined || parent === undefined) return undefined;
  if (!recording(parent)) return unrecordedCall(parent, headers);
  const attempt = parent.getValue(ATTEMPT) as UpstreamAttempt | undefined;
  const attributes: Attributes = {
    [ATTR.genAiOperation]: GEN_AI_OPERATION,
    [ATTR.genAiProvider]: upstream.provider,
    [ATTR.serverAddress]: upstream.address,
    [ATTR.serverPort]: upstream.port,
    [ATTR.upstream]: upstream.name,
    [ATTR.attempt]: attempt?.attempt ?? 1,
    [ATTR.retry]: call.retry,
    [ATTR.escalation]: attempt?.escalation ?? false,
    [ATTR.questions]: call.questions,
  };
  if (upstream.model !== undefined) attributes[ATTR.genAiRequestModel] = upstream.model;
  const name = upstream.model === undefined ? GEN_AI_OPERATION : `${GEN_AI_OPERATION} ${upstream.model}`;
  const span = tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes }, parent);
  const carrier = carrierOf(headers);
  propagation.inject(trace.setSpan(parent, span), carrier);
  const { traceId, spanId } = span.spanContext();
  return {
    headers: carrier,
    ids: { traceId, spanId },
    answered(status, responseId) {
      span.setAttribute(ATTR.httpStatus, status);
      if (responseId !== undefined) span.setAttribute(ATTR.genAiResponseId, responseId);
    },
    read(facts) {
      if (facts.model !== undefined) span.setAttribute(ATTR.genAiResponseModel, facts.model);
      if (facts.inputTokens !== undefined) span.setAttribute(ATTR.genAiInputTokens, facts.inputTokens);
      if (facts.outputTokens !== undefined) span.setAttribute(ATTR.genAiOutputTokens, facts.outputTokens);
    },
    end(errorType) {
      if (errorType !== undefined) markFailed(span, errorType);
      span.end();
    },
  };
}
