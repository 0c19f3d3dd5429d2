import { describe, expect, it } from 'vitest';
import { RecordOutcomesBody } from './outcomes.ts';
import { setOwn } from './own-key-record.ts';
import { SubmitReviewBody } from './reviews.ts';

describe('setOwn', () => {
  it('makes __proto__ an own member, as any other key, and leaves the prototype alone', () => {
    const record: Record<string, unknown> = {};
    setOwn(record, '__proto__', { upstream: 'strong' });
    setOwn(record, 'constructor', 'cheap');
    expect(Object.keys(record)).toEqual(['__proto__', 'constructor']);
    expect(Object.getPrototypeOf(record)).toBe(Object.prototype);
    expect(JSON.stringify(record)).toBe('{"__proto__":{"upstream":"strong"},"constructor":"cheap"}');
    setOwn(record, '__proto__', 'again');
    expect(Object.getOwnPropertyDescriptor(record, '__proto__')?.value).toBe('again');
  });
});

describe('truths keyed by question IDs take __proto__ as an ID', () => {
  const truths = '{"__proto__":true,"constructor":"billing"}';

  it('an outcome for a question named __proto__ is kept, alone or beside others', () => {
    const alone = RecordOutcomesBody.safeParse(
      JSON.parse('{"requestId":"req_1","outcomes":{"__proto__":true}}'),
    );
    expect(alone.success && Object.keys(alone.data.outcomes)).toEqual(['__proto__']);
    const both = RecordOutcomesBody.safeParse(JSON.parse(`{"requestId":"req_1","outcomes":${truths}}`));
    expect(both.success && Object.keys(both.data.outcomes)).toEqual(['__proto__', 'constructor']);
    const none = RecordOutcomesBody.safeParse({ requestId: 'req_1', outcomes: {} });
    expect(none.error?.issues.map((issue) => issue.message)).toEqual(['give 1 to 400 outcomes']);
  });

  it('a review’s truth for a question named __proto__ is kept; a wrong truth is named by its path', () => {
    const review = SubmitReviewBody.safeParse(JSON.parse(`{"reviewer":"ana","outcomes":${truths}}`));
    expect(review.success && Object.keys(review.data.outcomes)).toEqual(['__proto__', 'constructor']);
    const wrong = SubmitReviewBody.safeParse(JSON.parse('{"reviewer":"ana","outcomes":{"__proto__":{}}}'));
    expect(wrong.error?.issues[0]?.path).toEqual(['outcomes', '__proto__']);
    const none = SubmitReviewBody.safeParse({ reviewer: 'ana', outcomes: {} });
    expect(none.error?.issues.map((issue) => issue.message)).toEqual([
      'give the truth of at least one question',
    ]);
  });
});
