import { describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../store.ts';
import { backoffMs, troubleOf, withDeadline } from './deadline.ts';

/** An error as postgres.js raises it: a SQLSTATE or its own code in `code`. */
const pgError = (code: string) => Object.assign(new Error(`error ${code}`), { code });

/** Fails with each of `errors` in turn, then answers `value`; counts its tries. */
function flaky<T>(errors: Error[], value: T) {
  const attempt = {
    tries: 0,
    run: () => {
      const error = errors[attempt.tries++];
      return error ? Promise.reject(error) : Promise.resolve(value);
    },
  };
  return attempt;
}

describe('troubleOf', () => {
  it.each([
    ['40P01', 'conflict'],
    ['40001', 'conflict'],
    ['08006', 'unavailable'],
    ['57P01', 'unavailable'],
    ['57014', 'unavailable'],
    ['53300', 'unavailable'],
    ['CONNECTION_CLOSED', 'unavailable'],
    ['ECONNREFUSED', 'unavailable'],
    ['23505', 'other'],
    ['22003', 'other'],
  ])('%s is %s', (code, trouble) => {
    expect(troubleOf(pgError(code))).toBe(trouble);
  });

  it('an error without a code is a bug, not storage trouble', () => {
    expect(troubleOf(new RangeError('int8 beyond a safe integer'))).toBe('other');
    expect(troubleOf(undefined)).toBe('other');
  });
});

describe('withDeadline', () => {
  const soon = () => Date.now() + 30_000;

  it('retries deadlocks and serialization failures until the statement goes through', async () => {
    const attempt = flaky([pgError('40P01'), pgError('40001'), pgError('40P01')], 'done');
    expect(await withDeadline('settle', soon(), { run: attempt.run, idempotent: false })).toBe('done');
    expect(attempt.tries).toBe(4);
  });

  it('retries a lost connection only for idempotent calls', async () => {
    const retried = flaky([pgError('ECONNRESET')], 'done');
    expect(await withDeadline('read', soon(), { run: retried.run, idempotent: true })).toBe('done');
    const once = flaky([pgError('ECONNRESET')], 'done');
    await expect(withDeadline('adjust', soon(), { run: once.run, idempotent: false })).rejects.toBeInstanceOf(
      StoreUnavailableError,
    );
    expect(once.tries).toBe(1);
  });

  it('throws a bug as it is, without retrying', async () => {
    const attempt = flaky([pgError('23505')], 'done');
    await expect(
      withDeadline('insert', soon(), { run: attempt.run, idempotent: true }),
    ).rejects.toMatchObject({
      code: '23505',
    });
    expect(attempt.tries).toBe(1);
  });

  it('ends with StoreUnavailableError at the deadline, whether a try hangs or keeps failing', async () => {
    const hanging = { run: () => new Promise<never>(() => {}), idempotent: true };
    await expect(withDeadline('stuck', Date.now() + 50, hanging)).rejects.toThrow(
      /did not answer within its deadline/,
    );
    const failing = { run: () => Promise.reject(pgError('ECONNREFUSED')), idempotent: true };
    await expect(withDeadline('down', Date.now() + 50, failing)).rejects.toBeInstanceOf(
      StoreUnavailableError,
    );
    await expect(withDeadline('past', Date.now() - 1, failing)).rejects.toBeInstanceOf(StoreUnavailableError);
  });
});

describe('backoffMs', () => {
  it('grows from 5 ms to at most 200 ms, jittered over the upper half', () => {
    expect(backoffMs(0, () => 0)).toBe(2.5);
    expect(backoffMs(0, () => 1)).toBe(5);
    expect(backoffMs(3, () => 0.5)).toBe(30);
    expect(backoffMs(20, () => 1)).toBe(200);
    expect(backoffMs(20, () => 0)).toBe(100);
  });
});
