import { describe, expect, it } from 'vitest';
import {
  calibrationGroup,
  calibrationGroups,
  compareFraction,
  escalationAdvice,
  type JudgedAnswer,
} from './calibration.ts';

const choice = (p: number[], truth: number, confidence = Math.max(...p)): JudgedAnswer => ({
  route: 'default',
  upstream: 'cheap',
  type: 'choice',
  answer: { upstream: 'cheap', p, confidence },
  truth: { type: 'choice', index: truth },
});
const score = (p: number[], truth: number): JudgedAnswer => ({
  route: 'default',
  upstream: 'cheap',
  type: 'score',
  answer: { upstream: 'cheap', p, confidence: Math.max(...p), score: p.reduce((s, pi, i) => s + i * pi, 0) },
  truth: { type: 'score', index: truth },
});
const noul = (p: number, truth: boolean): JudgedAnswer => ({
  route: 'default',
  upstream: 'cheap',
  type: 'noul',
  answer: { upstream: 'cheap', p },
  truth: { type: 'noul', value: truth },
});

const emptyBin = (b: number) => ({
  from: b / 10,
  to: (b + 1) / 10,
  count: 0,
  meanPredicted: null,
  observed: null,
});

describe('calibration of one upstream on one question type (values computed by hand)', () => {
  it('choice: the first label on ties, p_truth = 0 clamped at 1e−15, the top probability binned', () => {
    const group = calibrationGroup('cheap', 'choice', [
      choice([0.7, 0.2, 0.1], 0), // right; Brier .09+.04+.01 = .14; −ln .7
      choice([0.4, 0.4, 0.2], 1), // a tie goes to the first label: wrong; Brier .16+.36+.04 = .56; −ln .4
      choice([0, 1, 0], 0), // wrong; Brier 1+1+0 = 2; −ln 1e−15 = 34.538776…
    ]);
    expect(group).toEqual({
      upstream: 'cheap',
      type: 'choice',
      outcomes: 3,
      accuracy: 0.333333,
      brier: 0.9,
      // (0.356675 + 0.916291 + 34.538776) / 3
      logLoss: 11.937247,
      // (|1 − .7| + |0 − .4| + |0 − 1|) / 3
      ece: 0.566667,
      mae: null,
      meanIoU: null,
      reviewed: 0,
      overridden: null,
      bins: [
        emptyBin(0),
        emptyBin(1),
        emptyBin(2),
        emptyBin(3),
        { from: 0.4, to: 0.5, count: 1, meanPredicted: 0.4, observed: 0 },
        emptyBin(5),
        emptyBin(6),
        { from: 0.7, to: 0.8, count: 1, meanPredicted: 0.7, observed: 1 },
        emptyBin(8),
        { from: 0.9, to: 1, count: 1, meanPredicted: 1, observed: 0 },
      ],
    });
  });

  it('score: accuracy on the top level and MAE of the expected score', () => {
    const group = calibrationGroup('cheap', 'score', [
      score([0.1, 0.2, 0.7], 2), // score 1.6: |1.6 − 2| = .4; Brier .01+.04+.09 = .14
      score([0.5, 0.5, 0], 0), // tie: level 0, right; score .5: |.5 − 0| = .5; Brier .25+.25 = .5
    ]);
    expect(group).toMatchObject({ accuracy: 1, brier: 0.32, mae: 0.45, outcomes: 2 });
    // −(ln .7 + ln .5) / 2
    expect(group.logLoss).toBe(0.524911);
  });

  it('noul: right when p ≥ 0.5 matches the truth, observed the share true, p clamped for log loss', () => {
    const group = calibrationGroup('cheap', 'noul', [
      noul(0, false), // right; Brier 0; −ln(1 − 1e−15) ≈ 0
      noul(0.5, false), // p ≥ .5 says yes: wrong; Brier .25; −ln .5
      noul(1, true), // right; Brier 0
      noul(0, true), // wrong; Brier 1; −ln 1e−15
    ]);
    expect(group).toMatchObject({
      accuracy: 0.5,
      brier: 0.3125,
      // (0.693147 + 34.538776) / 4
      logLoss: 8.807981,
      mae: null,
      meanIoU: null,
    });
    expect(group.bins[0]).toEqual({ from: 0, to: 0.1, count: 2, meanPredicted: 0, observed: 0.5 });
    expect(group.bins[5]).toEqual({ from: 0.5, to: 0.6, count: 1, meanPredicted: 0.5, observed: 0 });
    expect(group.bins[9]).toEqual({ from: 0.9, to: 1, count: 1, meanPredicted: 1, observed: 1 });
    // (2/4)·|.5 − 0| + (1/4)·|0 − .5| + (1/4)·|1 − 1|
    expect(group.ece).toBe(0.375);
  });

  it('groups by upstream and type, leaving out what has no outcomes', () => {
    const other = { ...noul(0.9, true), upstream: 'strong' };
    const groups = calibrationGroups([noul(0.2, false), other, choice([0.6, 0.4], 0)]);
    expect(groups.map((g) => [g.upstream, g.type, g.outcomes])).toEqual([
      ['cheap', 'choice', 1],
      ['cheap', 'noul', 1],
      ['strong', 'noul', 1],
    ]);
  });
});

describe('exact comparison with k/20', () => {
  it('compares the double itself, not k/20 rounded to a double', () => {
    // The double 0.3 is 0.29999999999999998889…, below 6/20; 0.55 is 0.55000000000000004440…, above 11/20.
    expect(compareFraction(0.3, 6, 20)).toBe(-1);
    expect(compareFraction(0.55, 11, 20)).toBe(1);
    expect(compareFraction(0.25, 5, 20)).toBe(0);
    expect(compareFraction(0, 0, 20)).toBe(0);
    expect(compareFraction(1, 20, 20)).toBe(0);
    expect(compareFraction(5e-324, 0, 20)).toBe(1);
  });
});

describe('escalation advice', () => {
  const mixed = [
    ...Array.from({ length: 10 }, () => choice([0.9, 0.1], 0, 0.9)),
    ...Array.from({ length: 5 }, () => choice([0.25, 0.75], 1, 0.75)),
    ...Array.from({ length: 5 }, () => choice([0.3, 0.7], 0, 0.3)),
  ];

  it('advises the smallest k/20 whose kept answers reach the target', () => {
    // t ≤ .3 keeps all (15 of 20 right); .3 itself drops the 0.3s (the double is below 6/20): 15 of 15.
    expect(escalationAdvice('default', 'cheap', 'choice', mixed, 0.9)).toEqual({
      route: 'default',
      upstream: 'cheap',
      type: 'choice',
      outcomes: 20,
      confidenceBelow: 0.3,
      keptAccuracy: 1,
      escalatedShare: 0.25,
    });
    // A target every answer meets: keep everything, escalate nothing.
    expect(escalationAdvice('default', 'cheap', 'choice', mixed, 0.75)).toMatchObject({
      confidenceBelow: 0,
      keptAccuracy: 0.75,
      escalatedShare: 0,
    });
  });

  it('gives nulls when no threshold reaches the target', () => {
    const wrong = Array.from({ length: 20 }, () => choice([0.9, 0.1], 1, 0.9));
    expect(escalationAdvice('default', 'cheap', 'choice', wrong, 0.5)).toEqual({
      route: 'default',
      upstream: 'cheap',
      type: 'choice',
      outcomes: 20,
      confidenceBelow: null,
      keptAccuracy: null,
      escalatedShare: null,
    });
  });

  it('nouls: the smallest band [0.5 − w, 0.5 + w] outside which the answers reach the target', () => {
    const answers = [
      ...Array.from({ length: 10 }, () => noul(0.9, true)),
      // 0.55 says yes; the truth is no. The double 0.55 lies above 11/20, so w = 0.05 keeps it.
      ...Array.from({ length: 10 }, () => noul(0.55, false)),
    ];
    expect(escalationAdvice('default', 'cheap', 'noul', answers, 0.9)).toEqual({
      route: 'default',
      upstream: 'cheap',
      type: 'noul',
      outcomes: 20,
      noulWithin: [0.4, 0.6],
      keptAccuracy: 1,
      escalatedShare: 0.5,
    });
    const none = Array.from({ length: 20 }, () => noul(1, false));
    expect(escalationAdvice('default', 'cheap', 'noul', none, 0.9)).toMatchObject({
      noulWithin: null,
      keptAccuracy: null,
    });
  });
});
