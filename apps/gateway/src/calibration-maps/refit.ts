import type { CalibratedType, HeldOutScores } from '@decision-gateway/contract';
import type { Judged } from '@decision-gateway/questions';
import { calibrationGroup, type JudgedAnswer } from '../outcomes/calibration.ts';
import { isCalibrated, type MapParams, mapKept } from './apply.ts';
import { fitPlatt, fitTemperature, logsOf } from './fit.ts';

/** A new fit, before it is stored. */
export interface Fit {
  upstream: string;
  type: CalibratedType;
  /** Every outcome it used, fitted and held out. */
  outcomes: number;
  params: MapParams;
  heldOut: { n: number; before: HeldOutScores; after: HeldOutScores };
  /** It lowers the held-out log loss: it becomes the active map of its upstream and type. */
  active: boolean;
}

/** The earliest 80% by decision time are fitted, the latest 20% held out. */
const FITTED_SHARE = 0.8;

/**
 * A fit per upstream and question type with at least `minOutcomes` judged answers
 * (docs/calibration-maps.md): fitted on the earliest 80% by decision time, checked on the latest
 * 20% with the log loss, Brier score and ECE of docs/outcomes.md before and after.
 */
export function fitMaps(answers: readonly JudgedAnswer[], minOutcomes: number): Fit[] {
  const groups = new Map<string, JudgedAnswer[]>();
  for (const answer of answers) {
    if (!isCalibrated(answer.type)) continue;
    const key = `${answer.upstream}\u0000${answer.type}`;
    const group = groups.get(key);
    if (group) group.push(answer);
    else groups.set(key, [answer]);
  }
  const fits: Fit[] = [];
  for (const group of groups.values()) {
    if (group.length < minOutcomes) continue;
    const { upstream, type } = group[0] as JudgedAnswer & { type: CalibratedType };
    // Stable: answers of one decision keep their order.
    const ordered = [...group].sort((x, y) => (x.at ?? 0) - (y.at ?? 0));
    const cut = Math.floor(ordered.length * FITTED_SHARE);
    const fitted = ordered.slice(0, cut);
    const heldOut = ordered.slice(cut);
    const params = fitOne(type, fitted);
    const before = scores(calibrationGroup(upstream, type, heldOut));
    const after = scores(
      calibrationGroup(
        upstream,
        type,
        heldOut.map((judged) => ({ ...judged, answer: mapKept(judged.answer, params) })),
      ),
    );
    fits.push({
      upstream,
      type,
      outcomes: ordered.length,
      params,
      heldOut: { n: heldOut.length, before, after },
      active: after.logLoss < before.logLoss,
    });
  }
  return fits;
}

function fitOne(type: CalibratedType, answers: readonly JudgedAnswer[]): MapParams {
  if (type === 'noul')
    return fitPlatt(
      answers.map((a) => a.answer.p as number),
      answers.map((a) => ((a.truth as Extract<Judged, { type: 'noul' }>).value ? 1 : 0)),
    );
  return fitTemperature(
    answers.map((a) => ({
      logs: logsOf(a.answer.p as number[]),
      truth: (a.truth as Extract<Judged, { type: 'choice' | 'score' }>).index,
    })),
  );
}

const scores = (group: ReturnType<typeof calibrationGroup>): HeldOutScores => ({
  logLoss: group.logLoss as number,
  brier: group.brier as number,
  ece: group.ece,
});
