import { describe, expect, it } from 'vitest';
import type { JudgedAnswer } from '../outcomes/calibration.ts';
import { fitMaps } from './refit.ts';

const logistic = (z: number) => 1 / (1 + Math.exp(-z));
const logOdds = (p: number) => Math.log(p / (1 - p));

/** A noul answer at time `at`, judged by `truth`. */
const noul = (p: number, truth: boolean, at: number, upstream = 'cheap'): JudgedAnswer => ({
  route: 'default',
  upstream,
  type: 'noul',
  answer: { upstream, p },
  truth: { type: 'noul', value: truth },
  at,
});

/** Deterministic truths whose share true at each p is exactly q(p): the k-th of every 20 answers at p. */
function exact(q: (p: number) => number, rounds: number, upstream?: string): JudgedAnswer[] {
  const answers: JudgedAnswer[] = [];
  let at = 0;
  for (let round = 0; round < rounds; round++)
    for (const p of [0.1, 0.3, 0.5, 0.7, 0.9])
      for (let k = 0; k < 20; k++) answers.push(noul(p, k < Math.round(q(p) * 20), at++, upstream));
  return answers;
}

describe('fitting maps from judged answers', () => {
  it('fits a noul miscalibrated by a known map, holds out the latest 20%, and activates it', () => {
    const answers = exact((p) => logistic(0.4 * logOdds(p) - 0.3), 5);
    const [fit] = fitMaps(answers, 200);
    expect(fit).toMatchObject({ upstream: 'cheap', type: 'noul', outcomes: 500, active: true });
    expect(fit?.heldOut.n).toBe(100);
    expect(fit?.heldOut.after.logLoss).toBeLessThan(fit?.heldOut.before.logLoss as number);
    expect(fit?.heldOut.after.ece).toBeLessThan((fit?.heldOut.before.ece as number) / 3);
  });

  it('keeps a well-calibrated upstream’s fit inactive: the map cannot lower its held-out log loss', () => {
    const [fit] = fitMaps(
      exact((p) => p, 5),
      200,
    );
    expect(fit?.active).toBe(false);
    expect(fit?.params).toMatchObject({ a: expect.closeTo(1, 6), b: expect.closeTo(0, 6) });
  });

  it('fits only groups with the minimum of outcomes, each upstream and type apart, and never a box', () => {
    const answers = [
      ...exact((p) => p * 0.5, 2, 'small'),
      ...exact((p) => p * 0.5, 3, 'big'),
      {
        route: 'default',
        upstream: 'big',
        type: 'box' as const,
        answer: { upstream: 'big', p: 0.9 },
        truth: { type: 'box' as const, box: { top: 0, bottom: 1, left: 0, right: 1 } },
        at: 1,
      },
    ];
    expect(fitMaps(answers, 250).map((f) => [f.upstream, f.type, f.outcomes])).toEqual([
      ['big', 'noul', 300],
    ]);
  });

  it('splits by decision time, not by the order the answers came in', () => {
    const late = exact((p) => p, 4).map((a) => ({ ...a, at: (a.at as number) + 10_000 }));
    const early = exact((p) => logistic(0.4 * logOdds(p) - 0.3), 1);
    // The latest 20% are the calibrated ones: the miscalibrated early answers are all fitted.
    const [fit] = fitMaps([...late, ...early], 200);
    expect(fit?.heldOut.n).toBe(100);
    const [reversed] = fitMaps([...early, ...late], 200);
    expect(reversed).toEqual(fit);
  });
});
