import { describe, expect, it } from 'vitest';
import { seeded } from '../../test/support/seeded.ts';
import { applyPlatt, applyTemperature, fitPlatt, fitTemperature, logsOf } from './fit.ts';

// Every expected value here is computed in this file, by formulas written out again, never by
// the module under test: a seeded generator draws truths from known maps, and a brute-force grid
// search over the log loss finds the minimum the fit must reach.

const logistic = (z: number) => 1 / (1 + Math.exp(-z));
const logOdds = (p: number) => Math.log(p / (1 - p));

/** Nouls whose truth is drawn with q = σ(a·logit(p) + b): p is miscalibrated by exactly (a, b). */
function nouls(n: number, a: number, b: number, random: () => number) {
  const p: number[] = [];
  const y: number[] = [];
  for (let i = 0; i < n; i++) {
    const pi = 0.01 + 0.98 * random();
    p.push(pi);
    y.push(random() < logistic(a * logOdds(pi) + b) ? 1 : 0);
  }
  return { p, y };
}

/** The mean log loss of p′ = σ(a·logit(p) + b), written out directly. */
function meanPlattLoss(p: number[], y: number[], a: number, b: number) {
  let sum = 0;
  p.forEach((pi, i) => {
    const q = logistic(a * logOdds(pi) + b);
    sum -= y[i] ? Math.log(q) : Math.log(1 - q);
  });
  return sum / p.length;
}

describe('Platt scaling', () => {
  it('recovers the (a, b) the truths were drawn with', () => {
    const { p, y } = nouls(40_000, 0.4, -0.3, seeded(7));
    const fitted = fitPlatt(p, y);
    expect(fitted.a).toBeCloseTo(0.4, 1);
    expect(fitted.b).toBeCloseTo(-0.3, 1);
  });

  it('reaches the minimum a brute-force grid search finds', () => {
    const { p, y } = nouls(600, 1.7, 0.5, seeded(11));
    // Coarse, then fine around the coarse minimum.
    const search = (a0: number, a1: number, b0: number, b1: number, step: number) => {
      let found = { a: 0, b: 0, loss: Number.POSITIVE_INFINITY };
      for (let a = a0; a <= a1; a += step)
        for (let b = b0; b <= b1; b += step) {
          const loss = meanPlattLoss(p, y, a, b);
          if (loss < found.loss) found = { a, b, loss };
        }
      return found;
    };
    const coarse = search(0.5, 3, -0.5, 1.5, 0.05);
    const best = search(coarse.a - 0.05, coarse.a + 0.05, coarse.b - 0.05, coarse.b + 0.05, 0.002);
    const fitted = fitPlatt(p, y);
    expect(meanPlattLoss(p, y, fitted.a, fitted.b)).toBeLessThanOrEqual(best.loss + 1e-12);
    expect(Math.abs(fitted.a - best.a)).toBeLessThanOrEqual(0.0021);
    expect(Math.abs(fitted.b - best.b)).toBeLessThanOrEqual(0.0021);
  });

  it('stays near the identity for well-calibrated answers, and maps as σ(a·logit(p) + b)', () => {
    const { p, y } = nouls(40_000, 1, 0, seeded(3));
    const fitted = fitPlatt(p, y);
    expect(fitted.a).toBeCloseTo(1, 1);
    expect(fitted.b).toBeCloseTo(0, 1);
    expect(applyPlatt(0.8, { a: 0.5, b: 0.2 })).toBeCloseTo(logistic(0.5 * Math.log(4) + 0.2), 12);
    // p is clamped to [1e−6, 1 − 1e−6] before its logit.
    expect(applyPlatt(0, { a: 1, b: 0 })).toBeCloseTo(1e-6, 12);
    expect(applyPlatt(1, { a: 1, b: 0 })).toBeCloseTo(1 - 1e-6, 12);
  });
});

/** Distributions over k options sharpened by `sharpen` (p ∝ q^sharpen), the truth drawn from q. */
function sharpened(n: number, k: number, sharpen: number, random: () => number) {
  const data: { p: number[]; truth: number }[] = [];
  for (let i = 0; i < n; i++) {
    const raw = Array.from({ length: k }, () => random() ** 2 + 0.01);
    const total = raw.reduce((s, x) => s + x, 0);
    const q = raw.map((x) => x / total);
    let u = random();
    let truth = 0;
    while (truth < k - 1 && u >= (q[truth] as number)) u -= q[truth++] as number;
    const powered = q.map((x) => x ** sharpen);
    const sum = powered.reduce((s, x) => s + x, 0);
    data.push({ p: powered.map((x) => x / sum), truth });
  }
  return data;
}

/** The mean log loss of the truth under p′ₖ ∝ pₖ^(1/T), written out directly. */
function meanTemperatureLoss(data: { p: number[]; truth: number }[], t: number) {
  let sum = 0;
  for (const { p, truth } of data) {
    const w = p.map((x) => x ** (1 / t));
    const total = w.reduce((s, x) => s + x, 0);
    sum -= Math.log((w[truth] as number) / total);
  }
  return sum / data.length;
}

describe('temperature scaling', () => {
  it('recovers the temperature a choice distribution was sharpened by (0.4 → T = 2.5)', () => {
    const data = sharpened(20_000, 4, 1 / 0.4, seeded(5));
    const fitted = fitTemperature(data.map(({ p, truth }) => ({ logs: logsOf(p), truth })));
    expect(fitted.temperature).toBeGreaterThan(2.3);
    expect(fitted.temperature).toBeLessThan(2.7);
  });

  it('reaches the minimum a brute-force search over T finds', () => {
    const data = sharpened(800, 3, 0.6, seeded(13));
    const search = (from: number, to: number, step: number) => {
      let found = { t: 0, loss: Number.POSITIVE_INFINITY };
      for (let t = from; t <= to; t += step) {
        const loss = meanTemperatureLoss(data, t);
        if (loss < found.loss) found = { t, loss };
      }
      return found;
    };
    const coarse = search(0.2, 3, 0.01);
    const best = search(coarse.t - 0.01, coarse.t + 0.01, 0.0002);
    const fitted = fitTemperature(data.map(({ p, truth }) => ({ logs: logsOf(p), truth })));
    expect(meanTemperatureLoss(data, fitted.temperature)).toBeLessThanOrEqual(best.loss + 1e-12);
    expect(Math.abs(fitted.temperature - best.t)).toBeLessThanOrEqual(0.00021);
  });

  it('maps as pₖ^(1/T), normalized; a 0 stays 0', () => {
    const mapped = applyTemperature([0.5, 0.25, 0.25, 0], { temperature: 0.5 });
    expect(mapped[0]).toBeCloseTo(0.25 / 0.375, 12);
    expect(mapped[1]).toBeCloseTo(0.0625 / 0.375, 12);
    expect(mapped[3]).toBe(0);
    // A very sharp distribution does not underflow to nothing.
    const sharp = applyTemperature([1 - 1e-300, 1e-300], { temperature: 0.01 });
    expect(sharp[0]).toBe(1);
    expect(sharp.reduce((s, x) => s + x, 0)).toBeCloseTo(1, 12);
  });
});
