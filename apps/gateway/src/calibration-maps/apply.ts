import {
  type Answer,
  CALIBRATED_TYPES,
  type CalibratedType,
  type Question,
} from '@decision-gateway/contract';
import { behaviourOf, type KeptDistribution } from '@decision-gateway/questions';
import { applyPlatt, applyTemperature, type PlattParams, type TemperatureParams } from './fit.ts';

/** A map's parameters: Platt's for a noul, a temperature for a choice or a score. */
export type MapParams = PlattParams | TemperatureParams;

/** An active map as a route applies it. */
export interface ActiveMap {
  id: string;
  params: MapParams;
}

/** A type a map corrects: one answered with a distribution (a box is not). */
export const isCalibrated = (type: string): type is CalibratedType =>
  (CALIBRATED_TYPES as readonly string[]).includes(type);

/** A distribution as a decision record keeps it (a noul's p, or p in option order), mapped. */
export function mapDistribution(p: number | readonly number[], params: MapParams): number | number[] {
  if (typeof p === 'number') {
    if (!('a' in params)) throw new Error('a noul is mapped by Platt scaling');
    return applyPlatt(p, params);
  }
  if (!('temperature' in params)) throw new Error('a choice or a score is mapped by temperature scaling');
  return applyTemperature(p, params);
}

/** A kept answer mapped: its distribution, and a score's expected level with it. */
export function mapKept<K extends KeptDistribution>(kept: K, params: MapParams): K {
  const p = mapDistribution(kept.p, params);
  return {
    ...kept,
    p,
    ...(kept.score !== undefined && Array.isArray(p) && { score: p.reduce((s, pk, k) => s + k * pk, 0) }),
  };
}

/**
 * A live answer through a map (docs/calibration-maps.md): its distribution transformed, then
 * `choice`, `score` and `confidence` computed from it by the formulas of docs/http-api.md#answers,
 * which the type's own `fromWeights` applies.
 */
export function calibrateAnswer(question: Question, answer: Answer, params: MapParams): Answer {
  const behaviour = behaviourOf(question);
  const mapped = mapDistribution(behaviour.keep(question, answer as never).p, params);
  const weights = typeof mapped === 'number' ? [mapped, 1 - mapped] : mapped;
  return behaviour.fromWeights(question, weights) as Answer;
}
