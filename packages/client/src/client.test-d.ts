import { describe, expectTypeOf, it } from 'vitest';
import {
  box,
  choice,
  createGatewayClient,
  type GatewayClient,
  type GatewayError,
  image,
  noul,
  score,
} from './index.ts';

declare const client: GatewayClient;

describe('answers are typed per question', () => {
  it('a box answers with its edges and a confidence, and its truth is a box', async () => {
    const { result } = await client.evaluate({
      state: 'photo',
      questions: { dent: box('Where is the dent in photo?') },
      assets: { photo: image(new Uint8Array()) },
    });
    expectTypeOf(result.answers.dent.type).toEqualTypeOf<'box'>();
    expectTypeOf(result.answers.dent.box).toEqualTypeOf<{
      top: number;
      bottom: number;
      left: number;
      right: number;
    }>();
    expectTypeOf(result.answers.dent.confidence).toEqualTypeOf<number>();
    // @ts-expect-error a box has no probabilities
    result.answers.dent.probabilities;
  });

  it('a choice answers with the union of its labels, probabilities keyed by them', async () => {
    const { result } = await client.evaluate({
      state: 'text',
      questions: { team: choice('Route it', { billing: 'payments', technical: null }) },
    });
    expectTypeOf(result.answers.team.type).toEqualTypeOf<'choice'>();
    expectTypeOf(result.answers.team.choice).toEqualTypeOf<'billing' | 'technical'>();
    expectTypeOf(result.answers.team.probabilities).toEqualTypeOf<{ billing: number; technical: number }>();
    expectTypeOf(result.answers.team.confidence).toEqualTypeOf<number>();
    // @ts-expect-error 'sales' is not a label of this question
    result.answers.team.probabilities.sales;
  });

  it('a score keys probabilities and legend by level index', async () => {
    const { result } = await client.evaluate({
      state: { id: 1 },
      questions: { urgency: score('How urgent?', ['low', 'mid', 'high']) },
    });
    expectTypeOf(result.answers.urgency.type).toEqualTypeOf<'score'>();
    expectTypeOf(result.answers.urgency.score).toEqualTypeOf<number>();
    expectTypeOf(result.answers.urgency.probabilities).toEqualTypeOf<{
      '0': number;
      '1': number;
      '2': number;
    }>();
    expectTypeOf(result.answers.urgency.legend['2']).toEqualTypeOf<'high'>();
    // @ts-expect-error there is no level 3
    result.answers.urgency.probabilities['3'];
  });

  it('a noul has noul and no confidence', async () => {
    const { result } = await client.evaluate({
      state: 's',
      questions: { refund: noul('Is this a refund?') },
    });
    expectTypeOf(result.answers.refund).toEqualTypeOf<{ type: 'noul'; noul: number }>();
    // @ts-expect-error a noul answer has no confidence
    result.answers.refund.confidence;
  });

  it('asking for an id that was not sent is a type error', async () => {
    const { result } = await client.evaluate({
      state: 's',
      questions: { a: noul('x'), b: choice(null, { yes: null, no: null }) },
    });
    expectTypeOf(result.answers).toHaveProperty('a');
    expectTypeOf(result.answers).toHaveProperty('b');
    // @ts-expect-error 'c' was not sent
    result.answers.c;
  });

  it('works with inline definitions as well as builders', async () => {
    const { result } = await client.evaluate({
      state: 's',
      questions: { pick: { type: 'choice', criteria: { left: null, right: 'the other way' } } },
    });
    expectTypeOf(result.answers.pick.choice).toEqualTypeOf<'left' | 'right'>();
  });

  it('keeps usage, elapsedMs and creditsUsed', async () => {
    const data = await client.evaluate({ state: 's', questions: { q: noul('x') } });
    expectTypeOf(data.result.usage).toEqualTypeOf<{ input_tokens: number; output_tokens: number }>();
    expectTypeOf(data.result.elapsedMs).toEqualTypeOf<number>();
    expectTypeOf(data.result.model).toEqualTypeOf<'vendor/model-1.13'>();
    expectTypeOf(data.creditsUsed).toEqualTypeOf<number>();
  });

  it('types the questions marked for review by the request’s own question IDs', async () => {
    const data = await client.evaluate({ state: 's', questions: { refund: noul('x'), team: noul('y') } });
    expectTypeOf(data.review).toEqualTypeOf<('refund' | 'team')[]>();
  });
});

describe('requests are checked', () => {
  it('refuses another model, wrong question shapes and bad state', () => {
    // @ts-expect-error only the gateway's model
    client.evaluate({ state: 's', model: 'other/model', questions: { q: noul('x') } });
    // @ts-expect-error a noul needs instructions
    client.evaluate({ state: 's', questions: { q: { type: 'noul' } } });
    // @ts-expect-error a choice's criteria is an object
    client.evaluate({ state: 's', questions: { q: { type: 'choice', criteria: ['a', 'b'] } } });
    // @ts-expect-error state is a string, object or array
    client.evaluate({ state: 42, questions: { q: noul('x') } });
    // @ts-expect-error noul criteria only have true/false
    noul('x', { maybe: 'y' });
  });

  it('exposes the error type and options', () => {
    expectTypeOf(createGatewayClient).parameter(0).toHaveProperty('dangerouslyAllowBrowser');
    expectTypeOf<GatewayError['code']>().toEqualTypeOf<number>();
    expectTypeOf<GatewayError['retryAfterMs']>().toEqualTypeOf<number | undefined>();
    expectTypeOf(client.listModels()).resolves.toHaveProperty('models');
  });
});

describe('outcomes are typed by the questions of their decision', () => {
  it('a choice takes one of its labels, a score a level index, a noul a boolean', async () => {
    const decision = await client.evaluate({
      state: 'text',
      questions: {
        team: choice('Route it', { billing: null, technical: null }),
        urgency: score('How urgent?', ['low', 'mid', 'high']),
        refund: noul('Is this a refund?'),
      },
    });
    const recorded = await client.recordOutcome(decision, { team: 'billing', urgency: 2, refund: false });
    expectTypeOf(recorded).toEqualTypeOf<{ recorded: number; replaced: number }>();
    // Some questions only: each is optional.
    await client.recordOutcome(decision, { refund: true });
    // @ts-expect-error 'sales' is not a label of team
    await client.recordOutcome(decision, { team: 'sales' });
    // @ts-expect-error there is no level 3
    await client.recordOutcome(decision, { urgency: 3 });
    // @ts-expect-error a noul's truth is a boolean
    await client.recordOutcome(decision, { refund: 1 });
    // @ts-expect-error no question "other"
    await client.recordOutcome(decision, { other: true });
  });

  it('by request id alone: typed when told the questions, loosely otherwise', async () => {
    const questions = { team: choice('Route it', { billing: null, technical: null }) };
    await client.recordOutcome<typeof questions>('req_1', { team: 'technical' });
    // @ts-expect-error 'sales' is not a label of team
    await client.recordOutcome<typeof questions>('req_1', { team: 'sales' });
    await client.recordOutcome('req_1', { anything: 'label', level: 1, yes: true });
  });
});
