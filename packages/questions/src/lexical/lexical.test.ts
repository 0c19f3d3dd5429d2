import type {
  ChoiceQuestion,
  EvaluationRequest,
  NoulQuestion,
  ScoreQuestion,
} from '@decision-gateway/contract';
import { describe, expect, it } from 'vitest';
import { checkAnswers } from '../checks.ts';
import { bm25Scores } from './bm25.ts';
import { answerLexically, createLexicalUpstream, lexicalUsage } from './lexical-upstream.ts';
import { terms } from './terms.ts';

const refundText = 'Hi, I was charged twice for my order last week. Please refund the double charge.';
const crashText = 'The app crashes every time I open the settings page. Looks like a bug.';

describe('terms', () => {
  it('lower-cases, drops stop words and stems', () => {
    expect(terms('The Refunds were REFUNDED, and I am charged!')).toEqual(['refund', 'refund', 'charg']);
  });

  it('handles Unicode words', () => {
    expect(terms('Café crème 2024')).toEqual(['café', 'crème', '2024']);
  });
});

describe('bm25Scores', () => {
  it('weights a term one document has above a term every document shares', () => {
    const [a = 0, b = 0] = bm25Scores(['refund', 'order'], [['refund', 'order'], ['order']]);
    expect(a).toBeGreaterThan(b);
    expect(b).toBeGreaterThan(0);
  });

  it('scores 0 when nothing matches', () => {
    expect(bm25Scores(['x'], [['a'], ['b']])).toEqual([0, 0]);
  });
});

describe('the lexical baseline ranks clear cases right', () => {
  const triage: ChoiceQuestion = {
    type: 'choice',
    instructions: 'Which team should handle this ticket?',
    criteria: { billing: 'payments, refunds', technical: 'bugs, crashes' },
  };

  it('a double charge and a refund → "payments, refunds" above "bugs, crashes"', () => {
    const answer = answerLexically(refundText, triage);
    expect(answer.type === 'choice' && answer.choice).toBe('billing');
    if (answer.type !== 'choice') return;
    expect(answer.probabilities.billing).toBeGreaterThan(answer.probabilities.technical as number);
    expect(answer.confidence).toBeGreaterThan(0);
  });

  it('a crash report → "bugs, crashes"', () => {
    const answer = answerLexically(crashText, triage);
    expect(answer.type === 'choice' && answer.choice).toBe('technical');
  });

  it('a noul "is this a refund request?" scores higher on a refund text than on a crash report', () => {
    const question: NoulQuestion = { type: 'noul', instructions: 'Is this a refund request?' };
    const onRefund = answerLexically(refundText, question);
    const onCrash = answerLexically(crashText, question);
    if (onRefund.type !== 'noul' || onCrash.type !== 'noul') throw new Error('wrong type');
    expect(onRefund.noul).toBeGreaterThan(0.5);
    expect(onCrash.noul).toBeLessThan(0.5);
  });

  it('score levels get a distribution the same way', () => {
    const question: ScoreQuestion = {
      type: 'score',
      instructions: 'How angry is the customer?',
      criteria: ['calm and polite', 'annoyed', 'furious, shouting, threatening to leave'],
    };
    const furious = answerLexically('I am furious! I am shouting now and threatening to leave.', question);
    const calm = answerLexically('A calm and polite note: thanks for your help.', question);
    if (furious.type !== 'score' || calm.type !== 'score') throw new Error('wrong type');
    expect(furious.score).toBeGreaterThan(1.5);
    expect(calm.score).toBeLessThan(0.5);
    expect(furious.legend).toEqual({
      '0': 'calm and polite',
      '1': 'annoyed',
      '2': 'furious, shouting, threatening to leave',
    });
  });

  it('takes evidence from the state, not from words the instructions share with an option', () => {
    const question: ScoreQuestion = {
      type: 'score',
      instructions: 'How urgent is it?',
      criteria: ['not urgent', 'soon', 'now'],
    };
    const answer = answerLexically('Please update the billing address on my account.', question);
    if (answer.type !== 'score') throw new Error('wrong type');
    expect(answer.score).toBeCloseTo(1, 10);
    expect(answer.confidence).toBeCloseTo(0, 10);
  });

  it('uses the state when it is an object or array', () => {
    const answer = answerLexically({ ticket: { body: refundText } }, triage);
    expect(answer.type === 'choice' && answer.choice).toBe('billing');
  });

  it('is deterministic', () => {
    expect(answerLexically(refundText, triage)).toEqual(answerLexically(refundText, triage));
  });
});

describe('createLexicalUpstream', () => {
  const request: EvaluationRequest = {
    model: 'vendor/model-1.13',
    state: refundText,
    questions: JSON.parse(
      '{"__proto__":{"type":"noul","instructions":"Is this a refund request?"},"team":{"type":"choice","criteria":{"billing":"refunds","technical":"crashes"}}}',
    ),
  };

  it('answers every question with answers that pass the checks, and counts input tokens', async () => {
    const upstream = createLexicalUpstream();
    const outcome = await upstream.answer({
      request,
      bodyBytes: 0,
      requestId: 'r',
      deadlineAt: Date.now() + 1000,
    });
    if (!outcome.ok) throw new Error('lexical failed');
    const checked = checkAnswers(request.questions, outcome.answers);
    if (!checked.ok) throw new Error(checked.reason);
    expect(Object.keys(checked.value)).toEqual(['__proto__', 'team']);
    expect(outcome.usage).toEqual(lexicalUsage(request));
    expect(lexicalUsage(request).input_tokens).toBeGreaterThan(20);
    expect(lexicalUsage(request).output_tokens).toBe(0);
  });

  it('reserves exactly what it will use', () => {
    const upstream = createLexicalUpstream();
    expect(upstream.usageBound(request, 10_000)).toEqual(lexicalUsage(request));
  });

  it('counts more tokens for a longer state', () => {
    const longer = { ...request, state: refundText.repeat(10) };
    expect(lexicalUsage(longer).input_tokens).toBeGreaterThan(lexicalUsage(request).input_tokens + 100);
  });
});
