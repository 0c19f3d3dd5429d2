import type {
  CalibrationGroup,
  EscalationAdvice,
  QuestionType,
  ReliabilityBin,
} from '@decision-gateway/contract';
import { behaviourOfType, type Judged, type KeptAnswer } from '@decision-gateway/questions';

/**
 * How well an upstream's probabilities matched what callers reported
 * (docs/outcomes.md), computed exactly as defined there: accuracy (the first
 * label on ties), Brier score, log loss (clamped at 1e−15), ten reliability bins and the expected
 * calibration error over them, MAE for scores, mean IoU for boxes; every number rounded to 6 decimals.
 */

/** One answer an upstream gave, with the truth it is judged by. */
export interface JudgedAnswer {
  route: string | null;
  upstream: string;
  type: QuestionType;
  answer: KeptAnswer;
  truth: Judged;
  /** When the decision was made (the fits split by it). */
  at?: number;
  /** A reviewer gave the truth (docs/review.md). */
  reviewed?: boolean;
}

const round6 = (n: number) => Math.round(n * 1e6) / 1e6;

/** What one answer scores, by its type's own rule: the probability a bin places it by, right or not, Brier, log loss. */
const scored = ({ type, answer, truth }: JudgedAnswer) => behaviourOfType(type).score(answer, truth);

/** Bin b holds [b/10, (b+1)/10), the last [0.9, 1.0]: compared with the bounds as JavaScript writes them. */
function binOf(x: number): number {
  let bin = 0;
  while (bin < 9 && x >= (bin + 1) / 10) bin++;
  return bin;
}

/** One upstream's answers to one type of question, summed up. */
export function calibrationGroup(
  upstream: string,
  type: QuestionType,
  answers: readonly JudgedAnswer[],
): CalibrationGroup {
  const n = answers.length;
  const bins = Array.from({ length: 10 }, () => ({ count: 0, predicted: 0, observed: 0 }));
  let correct = 0;
  let brier: number | null = null;
  let logLoss: number | null = null;
  let absError: number | null = null;
  let iou: number | null = null;
  let reviewed = 0;
  let overridden = 0;
  for (const judged of answers) {
    const s = scored(judged);
    if (s.correct) correct++;
    // A reviewer's truth overrides an answer it contradicts: what "correct" says for each type.
    if (judged.reviewed) {
      reviewed++;
      if (!s.correct) overridden++;
    }
    if (s.brier !== null) brier = (brier ?? 0) + s.brier;
    if (s.logLoss !== null) logLoss = (logLoss ?? 0) + s.logLoss;
    if (s.absError !== undefined) absError = (absError ?? 0) + s.absError;
    if (s.iou !== undefined) iou = (iou ?? 0) + s.iou;
    const bin = bins[binOf(s.binned)] as (typeof bins)[number];
    bin.count++;
    bin.predicted += s.binned;
    if (s.observed) bin.observed++;
  }
  const reliability: ReliabilityBin[] = bins.map((bin, b) => ({
    from: b / 10,
    to: (b + 1) / 10,
    count: bin.count,
    meanPredicted: bin.count === 0 ? null : round6(bin.predicted / bin.count),
    observed: bin.count === 0 ? null : round6(bin.observed / bin.count),
  }));
  const ece = bins.reduce(
    (sum, bin) =>
      bin.count === 0
        ? sum
        : sum + (bin.count / n) * Math.abs(bin.observed / bin.count - bin.predicted / bin.count),
    0,
  );
  return {
    upstream,
    type,
    outcomes: n,
    accuracy: round6(correct / n),
    brier: brier === null ? null : round6(brier / n),
    logLoss: logLoss === null ? null : round6(logLoss / n),
    ece: round6(ece),
    mae: absError === null ? null : round6(absError / n),
    meanIoU: iou === null ? null : round6(iou / n),
    reviewed,
    overridden: reviewed === 0 ? null : round6(overridden / reviewed),
    bins: reliability,
  };
}

/** Every group with outcomes: an upstream and a question type, in that order. */
export function calibrationGroups(answers: readonly JudgedAnswer[]): CalibrationGroup[] {
  const groups = new Map<string, JudgedAnswer[]>();
  for (const judged of answers) {
    const key = `${judged.upstream}\u0000${judged.type}`;
    const group = groups.get(key);
    if (group) group.push(judged);
    else groups.set(key, [judged]);
  }
  return [...groups.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([, group]) =>
      calibrationGroup((group[0] as JudgedAnswer).upstream, (group[0] as JudgedAnswer).type, group),
    );
}

/**
 * The sign of x − k/n, exactly: the double `x` is an exact binary fraction, so it is compared with
 * k/n in integers rather than with k/n rounded to a double (0.15 is not one).
 */
export function compareFraction(x: number, k: number, n: number): -1 | 0 | 1 {
  if (!Number.isFinite(x)) throw new RangeError(`not a finite number: ${x}`);
  if (x < 0) return k >= 0 ? -1 : (-compareFraction(-x, -k, n) as -1 | 0 | 1);
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  const bits = view.getBigUint64(0);
  const exponent = Number((bits >> 52n) & 0x7ffn);
  const fraction = bits & ((1n << 52n) - 1n);
  // x = mantissa × 2^power exactly.
  const mantissa = exponent === 0 ? fraction : fraction | (1n << 52n);
  const power = (exponent === 0 ? 1 : exponent) - 1075;
  let left = mantissa * BigInt(n);
  let right = BigInt(k);
  if (power >= 0) left <<= BigInt(power);
  else right <<= BigInt(-power);
  return left > right ? 1 : left < right ? -1 : 0;
}

/**
 * For a route that escalates: for one of its upstreams (not `escalate.to`) and one question type,
 * the smallest threshold on the grid k/20 whose kept answers (choice and score: `confidence` ≥ t;
 * noul: outside [0.5 − w, 0.5 + w]) are at least one and reach `target` accuracy.
 */
export function escalationAdvice(
  route: string,
  upstream: string,
  type: QuestionType,
  answers: readonly JudgedAnswer[],
  target: number,
): EscalationAdvice {
  const n = answers.length;
  const right = answers.map((judged) => scored(judged).correct);
  const byBand = behaviourOfType(type).unsureBy === 'band';
  const steps = byBand ? 10 : 20;
  for (let k = 0; k <= steps; k++) {
    const keep = answers.map((judged) => {
      if (!byBand) return compareFraction(judged.answer.confidence ?? 0, k, 20) >= 0;
      const p = judged.answer.p as number;
      // Outside [(10 − k)/20, (10 + k)/20]: below its low end or above its high end.
      return compareFraction(p, 10 - k, 20) < 0 || compareFraction(p, 10 + k, 20) > 0;
    });
    const kept = keep.filter(Boolean).length;
    if (kept === 0) continue;
    const keptRight = keep.filter((k2, i) => k2 && right[i]).length;
    if (keptRight / kept >= target) {
      const threshold = round6(k / 20);
      return {
        route,
        upstream,
        type,
        outcomes: n,
        ...(byBand
          ? { noulWithin: [round6(0.5 - threshold), round6(0.5 + threshold)] as [number, number] }
          : { confidenceBelow: threshold }),
        keptAccuracy: round6(keptRight / kept),
        escalatedShare: round6((n - kept) / n),
      };
    }
  }
  return {
    route,
    upstream,
    type,
    outcomes: n,
    ...(byBand ? { noulWithin: null } : { confidenceBelow: null }),
    keptAccuracy: null,
    escalatedShare: null,
  };
}
