import { describe, expect, it } from 'vitest';
import { sameHiddenClass } from '../../../test/support/hidden-class.ts';
import { StoreUnavailableError } from '../store.ts';
import { createStepBatcher, type Step, type StepRow } from './step-batcher.ts';

const row = (step: number, fields: Partial<StepRow> = {}): StepRow => ({
  step,
  granted: true,
  reservation: null,
  available: null,
  debit: 0,
  refused: null,
  events: null,
  ...fields,
});

const step = (request: string): Step => ({ op: 'release', key: 'k', request });

/** `apply` held open until the test lets it go: what it was sent, batch by batch. */
function heldApply(
  answer: (steps: Step[]) => StepRow[] | Promise<StepRow[]> = (steps) => steps.map((_, i) => row(i)),
) {
  const batches: Step[][] = [];
  const gates: (() => void)[] = [];
  return {
    batches,
    release: () => gates.shift()?.(),
    apply: async (steps: Step[]) => {
      batches.push(steps);
      await new Promise<void>((resolve) => gates.push(resolve));
      return answer(steps);
    },
  };
}

const later = () => Date.now() + 30_000;
const settled = () => new Promise((resolve) => setImmediate(resolve));

describe('createStepBatcher', () => {
  it('sends a lone step at once, and the steps asked for meanwhile together in the next batch', async () => {
    const held = heldApply();
    const submit = createStepBatcher({ apply: held.apply });
    const first = submit(step('a'), later());
    const rest = ['b', 'c', 'd'].map((request) => submit(step(request), later()));
    await settled();
    expect(held.batches.map((b) => b.map((s) => s.request))).toEqual([['a']]);
    held.release();
    await first;
    await settled();
    expect(held.batches.map((b) => b.map((s) => s.request))).toEqual([['a'], ['b', 'c', 'd']]);
    held.release();
    expect((await Promise.all(rest)).map((r) => r.step)).toEqual([0, 1, 2]);
    // Each step carries its own deadline to the database.
    expect(held.batches[1]?.every((s) => typeof s.deadline === 'number')).toBe(true);
  });

  it('sends steps of one kind in objects of one hidden class, batch after batch', async () => {
    const sent: Step[] = [];
    const submit = createStepBatcher({
      apply: async (steps) => {
        sent.push(...steps);
        return steps.map((_, i) => row(i));
      },
    });
    // Many, as V8 warms up: its first few copies of a spread share a class even when later ones do not.
    for (let i = 0; i < 60; i++) await submit(step(`r${i}`), later());
    const first = sent[0] as Step;
    expect(first).toMatchObject({ op: 'release', request: 'r0', deadline: expect.any(Number) });
    expect(sent.filter((s) => !sameHiddenClass(s, first))).toHaveLength(0);
  });

  it('with two batches allowed on their way, sends the next while the first is out, and no third', async () => {
    const held = heldApply();
    const submit = createStepBatcher({ apply: held.apply, maxInFlight: 2 });
    const first = submit(step('a'), later());
    await settled();
    const second = submit(step('b'), later());
    await settled();
    const third = ['c', 'd'].map((request) => submit(step(request), later()));
    await settled();
    expect(held.batches.map((b) => b.map((s) => s.request))).toEqual([['a'], ['b']]);
    held.release();
    await first;
    await settled();
    expect(held.batches.map((b) => b.map((s) => s.request))).toEqual([['a'], ['b'], ['c', 'd']]);
    held.release();
    held.release();
    await Promise.all([second, ...third]);
  });

  it('behind a batch on its way, sends the steps one turn asked for in one batch, not the first alone', async () => {
    const held = heldApply();
    const submit = createStepBatcher({ apply: held.apply, maxInFlight: 2 });
    const first = submit(step('a'), later());
    await settled();
    const turn = ['b', 'c', 'd'].map((request) => submit(step(request), later()));
    await settled();
    expect(held.batches.map((b) => b.map((s) => s.request))).toEqual([['a'], ['b', 'c', 'd']]);
    held.release();
    held.release();
    await first;
    expect((await Promise.all(turn)).map((r) => r.step)).toEqual([0, 1, 2]);
  });

  it('a step the database found late, or still queued at its deadline, is the store being unavailable', async () => {
    const submit = createStepBatcher({
      apply: async (steps) => steps.map((s, i) => row(i, s.request === 'late' ? { refused: 'late' } : {})),
    });
    await expect(submit(step('late'), later())).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(submit(step('expired'), Date.now() - 1)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect((await submit(step('fine'), later())).granted).toBe(true);
  });

  it('when one step of a batch fails for a reason of its own, only that step fails', async () => {
    const held = heldApply((steps) => {
      if (steps.length > 1) throw Object.assign(new Error('a bug'), { code: '22P02' });
      if (steps[0]?.request === 'bad') throw Object.assign(new Error('bad step'), { code: '22P02' });
      return [row(0)];
    });
    const submit = createStepBatcher({ apply: held.apply });
    const first = submit(step('first'), later());
    const batch = Promise.allSettled(
      ['good', 'bad', 'also-good'].map((request) => submit(step(request), later())),
    );
    held.release();
    await first;
    for (let i = 0; i < 4; i++) {
      await settled();
      held.release();
    }
    const outcomes = await batch;
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
  });

  it('storage trouble fails the whole batch as it is (the caller answers 503)', async () => {
    const submit = createStepBatcher({
      apply: async () => {
        throw new StoreUnavailableError('down');
      },
    });
    const outcomes = await Promise.allSettled([submit(step('a'), later()), submit(step('b'), later())]);
    expect(outcomes.every((o) => o.status === 'rejected' && o.reason instanceof StoreUnavailableError)).toBe(
      true,
    );
  });
});
