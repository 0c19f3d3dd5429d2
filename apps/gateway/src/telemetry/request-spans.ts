import { errorTypeOfCode } from '@decision-gateway/contract';
import { type Attributes, propagation, ROOT_CONTEXT, type Span, SpanKind, trace } from '@opentelemetry/api';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { EvaluationReport } from '../doors/door-outcome.ts';
import { ATTR } from './attributes.ts';
import { activeTracer, markFailed, type TraceParent, tracingOn } from './spans.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The request's SERVER span, while tracing is on. */
    span: Span | undefined;
    /** Where the spans of the request's work attach: its SERVER span. */
    traceParent: TraceParent | undefined;
  }
}

/**
 * A SERVER span for every request (docs/tracing.md): started as it arrives, continuing the
 * caller's W3C `traceparent` (an unsampled caller's choice is kept by the parent-based sampler);
 * the parent its door hands to the evaluation (`request.traceParent`); ended with what the
 * request came to. Registered only while tracing is on.
 */
export function traceRequests(app: FastifyInstance, doorOf: (request: FastifyRequest) => string): void {
  const tracer = activeTracer();
  app.decorateRequest('span', undefined);
  app.decorateRequest('traceParent', undefined);

  app.addHook('onRequest', (request, _reply, done) => {
    const route = request.routeOptions.url;
    const attributes: Attributes = {
      [ATTR.httpMethod]: request.method,
      [ATTR.urlPath]: request.url.split('?', 1)[0],
      [ATTR.door]: doorOf(request),
      [ATTR.requestId]: request.id,
    };
    if (route !== undefined) attributes[ATTR.httpRoute] = route;
    const parent = propagation.extract(ROOT_CONTEXT, request.headers);
    const name = route === undefined ? request.method : `${request.method} ${route}`;
    request.span = tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, parent);
    request.traceParent = trace.setSpan(parent, request.span);
    done();
  });

  // A span ends once: a request whose client went away may still be answered afterwards. Its
  // `span` is then cleared, which a WeakSet of ended requests did at a cost to every collection.
  app.addHook('onResponse', (request, reply, done) => {
    const { span } = request;
    if (span !== undefined) {
      request.span = undefined;
      endRequestSpan(span, request, reply.statusCode);
    }
    done();
  });
}

/** A request whose client went away before its answer (server.ts): its SERVER span ends, as aborted. */
export function endAbandonedSpan(request: FastifyRequest): void {
  const { span } = request;
  if (span === undefined) return;
  request.span = undefined;
  markFailed(span, 'aborted');
  span.end();
}

function endRequestSpan(span: Span, request: FastifyRequest, status: number): void {
  // Left out by the sampler: nothing to say about it.
  if (!span.isRecording()) {
    span.end();
    return;
  }
  const outcome = request.outcome;
  span.setAttribute(ATTR.httpStatus, status);
  // As the log line: one evaluation's fields on the request; a batch's on each operation's span.
  const evaluations = outcome?.evaluations ?? [];
  if (evaluations.length === 1) span.setAttributes(evaluationAttributes(evaluations[0] as EvaluationReport));
  endWithCode(span, outcome?.code ?? (status < 400 ? 0 : undefined), status);
}

/** `dg.code`, and for a failure the span's error status and `error.type` (docs/http-api.md#errors). */
function endWithCode(span: Span, code: number | undefined, status?: number): void {
  if (code !== undefined) span.setAttribute(ATTR.code, code);
  if (code !== undefined && code !== 0) markFailed(span, errorTypeOfCode(code) ?? String(code));
  else if (code === undefined && status !== undefined && status >= 400) markFailed(span, String(status));
  span.end();
}

/** What an evaluation learnt about itself, as attributes: never the state, a question or a key. */
export function evaluationAttributes({ log, meta }: EvaluationReport): Attributes {
  const attributes: Attributes = {};
  if (log.keyPrefix !== undefined) attributes[ATTR.keyPrefix] = log.keyPrefix;
  if (meta.route !== undefined) attributes[ATTR.route] = meta.route;
  if (meta.cache !== undefined) attributes[ATTR.cache] = meta.cache;
  if (meta.creditsUsed !== undefined) attributes[ATTR.creditsUsed] = meta.creditsUsed;
  if (log.questions !== undefined) attributes[ATTR.questions] = log.questions;
  if (log.images !== undefined) {
    attributes[ATTR.images] = log.images;
    attributes[ATTR.imageBytes] = log.imageBytes ?? 0;
  }
  return attributes;
}

const INTERNAL_ERROR = 50000;

/** How one operation of a tRPC batch ended: its code, and its evaluation's report if it ran one. */
export interface OperationEnd {
  code: number;
  report?: EvaluationReport | undefined;
}

/**
 * One operation of a tRPC batch: an INTERNAL span (`trpc <procedure>`) under the request's, with
 * the operation's own request id, code and evaluation; `run` gets the parent of the operation's
 * own spans. Only calls through while tracing is off.
 */
export function traceOperation<T>(
  parent: TraceParent | undefined,
  procedure: string,
  requestId: string,
  run: (inside: TraceParent | undefined) => Promise<T>,
  ended: (result: T) => OperationEnd,
): Promise<T> {
  if (!tracingOn() || parent === undefined) return run(undefined);
  const attributes = { [ATTR.requestId]: requestId };
  const span = activeTracer().startSpan(`trpc ${procedure}`, { kind: SpanKind.INTERNAL, attributes }, parent);
  return run(trace.setSpan(parent, span)).then(
    (result) => {
      const { code, report } = ended(result);
      if (report) span.setAttributes(evaluationAttributes(report));
      endWithCode(span, code);
      return result;
    },
    (error: unknown) => {
      endWithCode(span, INTERNAL_ERROR);
      throw error;
    },
  );
}
