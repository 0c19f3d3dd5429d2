import { propagation, ROOT_CONTEXT, TraceFlags, trace } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { tracing } from '@opentelemetry/sdk-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sameHiddenClass } from '../../test/support/hidden-class.ts';
import { clientSpan, useTracer } from './spans.ts';

const UPSTREAM = { name: 'a', provider: 'systemone', model: undefined, address: '127.0.0.1', port: 1 };

/** A parent as a request's SERVER span leaves it: sampled or left out by the sampler. */
const parentOf = (traceFlags: TraceFlags) =>
  trace.setSpanContext(ROOT_CONTEXT, {
    traceId: '0af7651916cd43dd8448eb211c80319c',
    spanId: 'b7ad6b7169203331',
    traceFlags,
  });

describe('an upstream call while tracing', () => {
  beforeAll(() => {
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    useTracer(new tracing.BasicTracerProvider().getTracer('test'));
  });
  afterAll(() => {
    useTracer(undefined);
    propagation.disable();
  });

  it.each([
    ['sampled', TraceFlags.SAMPLED, '01'],
    ['left out by the sampler', TraceFlags.NONE, '00'],
  ])('of a trace %s carries its traceparent, in headers of one hidden class', (_, flags, sampled) => {
    const headers = { 'content-type': 'application/json', 'x-request-id': 'req_1' };
    // Many, as V8 warms up: its first few copies of a spread share a class even when later ones do not.
    const sent = Array.from({ length: 60 }, () => {
      const span = clientSpan(UPSTREAM, parentOf(flags), { retry: 0, questions: 1 }, headers);
      span?.end();
      return span?.headers ?? {};
    });
    const first = sent[0] as Record<string, string>;
    expect(first.traceparent).toMatch(
      new RegExp(`^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-${sampled}$`),
    );
    expect(first['x-request-id']).toBe('req_1');
    expect(headers).not.toHaveProperty('traceparent');
    expect(sent.filter((carrier) => !sameHiddenClass(carrier, first))).toHaveLength(0);
  });
});
