/**
 * The two calibration maps (docs/calibration-maps.md) and how each is fitted: parameters that
 * minimize the log loss of the truths. Pure arithmetic on plain arrays, so the fitting can run on a
 * thread of its own.
 *
 * Both losses are convex in the parameters as written here (Platt's in (a, b), temperature's in
 * β = 1/T), so Newton's method with a backtracking line search finds the minimum: the routine
 * libsvm uses for Platt scaling (Lin, Lin and Weng, "A note on Platt's probabilistic outputs for
 * support vector machines", 2007). No maintained JavaScript optimizer is smaller than these few
 * lines or as exact for two convex problems of one and two parameters.
 */

export interface PlattParams {
  a: number;
  b: number;
}
export interface TemperatureParams {
  temperature: number;
}

/** Where a noul's probability is clamped before its logit. */
const P_CLAMP = 1e-6;
/** A probability of 0 counts as this in a log (the log loss's own clamp, docs/outcomes.md). */
const LOG_FLOOR = Math.log(1e-15);
const MAX_ITERATIONS = 100;

export function logit(p: number): number {
  const q = Math.min(1 - P_CLAMP, Math.max(P_CLAMP, p));
  return Math.log(q / (1 - q));
}

export function sigmoid(z: number): number {
  if (z >= 0) return 1 / (1 + Math.exp(-z));
  const e = Math.exp(z);
  return e / (1 + e);
}

/** log(1 + eᶻ) without overflow. */
const softplus = (z: number) => (z > 0 ? z + Math.log1p(Math.exp(-z)) : Math.log1p(Math.exp(z)));

/** Platt scaling: p′ = σ(a · logit(p) + b). */
export const applyPlatt = (p: number, { a, b }: PlattParams) => sigmoid(a * logit(p) + b);

/**
 * Temperature scaling: p′ₖ ∝ pₖ^(1/T). Computed from logs, shifted by the largest, so a sharp
 * distribution cannot underflow; a probability of 0 stays 0.
 */
export function applyTemperature(p: readonly number[], { temperature }: TemperatureParams): number[] {
  const beta = 1 / temperature;
  let max = Number.NEGATIVE_INFINITY;
  for (const pk of p) if (pk > 0) max = Math.max(max, Math.log(pk));
  const w = p.map((pk) => (pk > 0 ? Math.exp(beta * (Math.log(pk) - max)) : 0));
  const sum = w.reduce((s, x) => s + x, 0);
  return w.map((x) => x / sum);
}

/** Platt's log loss over (logit(pᵢ), yᵢ): Σ log(1 + eᶻ) − y·z, with z = a·x + b. */
export function plattLoss(x: ArrayLike<number>, y: ArrayLike<number>, { a, b }: PlattParams): number {
  let loss = 0;
  for (let i = 0; i < x.length; i++) {
    const z = a * (x[i] as number) + b;
    loss += softplus(z) - (y[i] as number) * z;
  }
  return loss;
}

/**
 * The (a, b) minimizing Platt's log loss over noul probabilities `p` and truths `y` (1 true, 0
 * false), from the identity map (a = 1, b = 0).
 */
export function fitPlatt(p: ArrayLike<number>, y: ArrayLike<number>): PlattParams {
  const n = p.length;
  const x = Float64Array.from({ length: n }, (_, i) => logit(p[i] as number));
  let params: PlattParams = { a: 1, b: 0 };
  let loss = plattLoss(x, y, params);
  for (let iteration = 0; iteration < MAX_ITERATIONS; iteration++) {
    let ga = 0;
    let gb = 0;
    let haa = 1e-12;
    let hab = 0;
    let hbb = 1e-12;
    for (let i = 0; i < n; i++) {
      const xi = x[i] as number;
      const s = sigmoid(params.a * xi + params.b);
      const r = s - (y[i] as number);
      const w = s * (1 - s);
      ga += r * xi;
      gb += r;
      haa += w * xi * xi;
      hab += w * xi;
      hbb += w;
    }
    if (Math.hypot(ga, gb) < 1e-9 * Math.max(1, n)) break;
    const det = haa * hbb - hab * hab;
    const da = -(hbb * ga - hab * gb) / det;
    const db = -(haa * gb - hab * ga) / det;
    const slope = ga * da + gb * db;
    let step = 1;
    let next = params;
    let nextLoss = loss;
    while (step > 1e-10) {
      next = { a: params.a + step * da, b: params.b + step * db };
      nextLoss = plattLoss(x, y, next);
      if (nextLoss <= loss + 1e-4 * step * slope) break;
      step /= 2;
    }
    if (step <= 1e-10) break;
    const converged = loss - nextLoss < 1e-12 * Math.max(1, Math.abs(loss));
    params = next;
    loss = nextLoss;
    if (converged) break;
  }
  return params;
}

/** One choice or score answer for temperature scaling: its probabilities' logs and the true option. */
export interface LoggedDistribution {
  logs: Float64Array;
  truth: number;
}

/** Logs of a distribution, a 0 as the log loss's floor. */
export const logsOf = (p: readonly number[]): Float64Array =>
  Float64Array.from(p, (pk) => (pk > 0 ? Math.max(LOG_FLOOR, Math.log(pk)) : LOG_FLOOR));

/** The log loss of the truths with β = 1/T, and its first two derivatives in β. */
function temperatureTerms(data: readonly LoggedDistribution[], beta: number) {
  let loss = 0;
  let d1 = 0;
  let d2 = 0;
  for (const { logs, truth } of data) {
    let max = Number.NEGATIVE_INFINITY;
    for (const l of logs) max = Math.max(max, beta * l);
    let sum = 0;
    let mean = 0;
    let square = 0;
    for (const l of logs) {
      const e = Math.exp(beta * l - max);
      sum += e;
      mean += e * l;
      square += e * l * l;
    }
    mean /= sum;
    square /= sum;
    loss += max + Math.log(sum) - beta * (logs[truth] as number);
    d1 += mean - (logs[truth] as number);
    d2 += square - mean * mean;
  }
  return { loss, d1, d2 };
}

export const temperatureLoss = (data: readonly LoggedDistribution[], { temperature }: TemperatureParams) =>
  temperatureTerms(data, 1 / temperature).loss;

const BETA = { min: 1e-3, max: 1e3 };

/** The T minimizing the log loss of the truths under p′ₖ ∝ pₖ^(1/T), from T = 1. */
export function fitTemperature(data: readonly LoggedDistribution[]): TemperatureParams {
  let beta = 1;
  let terms = temperatureTerms(data, beta);
  for (let iteration = 0; iteration < MAX_ITERATIONS; iteration++) {
    if (Math.abs(terms.d1) < 1e-9 * Math.max(1, data.length)) break;
    // Newton where the curvature says so; a plain gradient step where the loss is flat.
    const direction = terms.d2 > 1e-12 ? -terms.d1 / terms.d2 : -Math.sign(terms.d1);
    let step = 1;
    let next = beta;
    let nextTerms = terms;
    while (step > 1e-10) {
      next = Math.min(BETA.max, Math.max(BETA.min, beta + step * direction));
      nextTerms = temperatureTerms(data, next);
      if (nextTerms.loss <= terms.loss + 1e-4 * step * terms.d1 * direction) break;
      step /= 2;
    }
    if (step <= 1e-10 || next === beta) break;
    const converged = terms.loss - nextTerms.loss < 1e-12 * Math.max(1, Math.abs(terms.loss));
    beta = next;
    terms = nextTerms;
    if (converged) break;
  }
  return { temperature: 1 / beta };
}
