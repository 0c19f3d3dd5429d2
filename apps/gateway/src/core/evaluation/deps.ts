import type { Coalescer } from '../../cache/coalesce.ts';
import type { InFlight } from './in-flight.ts';
import type { Ledger } from './ledger.ts';
import type { RateForecast } from './rate-limit.ts';
import type { EvaluationDeps } from './types.ts';

/** What every stage may use: the evaluator's dependencies and the pipeline's own parts. */
export interface StageDeps extends EvaluationDeps {
  clock: () => number;
  ledger: Ledger;
  inFlight: InFlight;
  coalescer: Coalescer;
  /** What a limiter asked over the network last said of each bucket (rate-limit.ts). */
  forecast: RateForecast | undefined;
}
