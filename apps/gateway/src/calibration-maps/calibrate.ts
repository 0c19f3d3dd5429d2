import { type Answer, type Question, setOwn } from '@decision-gateway/contract';
import { type ActiveMap, calibrateAnswer, isCalibrated } from './apply.ts';

/** Where a route finds the active map of an upstream and a question type (the maps service). */
export interface MapLookup {
  activeFor(upstream: string, type: string): ActiveMap | undefined;
}

/**
 * Each calibrated answer's raw answer and the map that made it, kept beside the answer itself: the
 * decision record reads both (docs/calibration-maps.md), and nothing else needs to know.
 */
const RAW = new WeakMap<Answer, { raw: Answer; map: string }>();

/** The raw answer a calibrated one came from, and the map's id; undefined for an answer as it came. */
export const rawOf = (answer: Answer) => RAW.get(answer);

/**
 * An upstream's checked answers through the active map of their upstream and type, each
 * recomputed from its transformed distribution; an answer with no active map stays as it came.
 */
export function calibrated(
  questions: Readonly<Record<string, Question>>,
  answers: Readonly<Record<string, Answer>>,
  upstream: string,
  maps: MapLookup,
): Record<string, Answer> {
  const result: Record<string, Answer> = {};
  for (const id of Object.keys(answers)) {
    const answer = answers[id] as Answer;
    const question = questions[id] as Question;
    const map = isCalibrated(answer.type) ? maps.activeFor(upstream, answer.type) : undefined;
    let given = answer;
    if (map !== undefined) {
      given = calibrateAnswer(question, answer, map.params);
      RAW.set(given, { raw: answer, map: map.id });
    }
    setOwn(result, id, given);
  }
  return result;
}

/** The maps applied to these answers, each once, in order of their ids. */
export function mapsApplied(answers: Readonly<Record<string, Answer>>): string[] {
  const ids = new Set<string>();
  for (const id of Object.keys(answers)) {
    const map = RAW.get(answers[id] as Answer)?.map;
    if (map !== undefined) ids.add(map);
  }
  return [...ids].sort();
}
