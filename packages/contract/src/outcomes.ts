import { z } from 'zod';
import { ownKeyRecord } from './own-key-record.ts';
import { QUESTION_TYPES, Truth } from './question-types/index.ts';

const QuestionType = z.enum(QUESTION_TYPES, { error: `must be ${QUESTION_TYPES.join(', ')}` });

/**
 * Outcomes and calibration (docs/outcomes.md): callers report what turned out
 * true, and the gateway measures how well each upstream's probabilities matched it.
 */

/** The most truths one call may carry: as many as a decision can hold. */
export const MAX_OUTCOMES = 400;

/** `POST /v1/outcomes`, and the tRPC mutation `outcomes.record`. */
export const RecordOutcomesBody = z
  .strictObject({
    requestId: z
      .string({ error: 'must be the request id of a decision (req_…)' })
      .min(1, { error: 'must be the request id of a decision (req_…)' })
      .max(200, { error: 'must be at most 200 characters' }),
    // Keyed by question IDs, which may be any text, `__proto__` included.
    outcomes: ownKeyRecord(
      z.string(),
      Truth,
      { min: 1, max: MAX_OUTCOMES, tooFew: 'give 1 to 400 outcomes', tooMany: 'give 1 to 400 outcomes' },
      '{"<question ID>": truth, …}: 1 to 400 entries.',
    ),
  })
  .meta({ id: 'RecordOutcomesBody' });
export type RecordOutcomesBody = z.infer<typeof RecordOutcomesBody>;

export const RecordedOutcomes = z
  .strictObject({
    recorded: z.number().int().meta({ description: 'The outcomes of this call.' }),
    replaced: z.number().int().meta({ description: 'How many of them replaced a truth recorded before.' }),
  })
  .meta({ id: 'RecordedOutcomes' });
export type RecordedOutcomes = z.infer<typeof RecordedOutcomes>;

const isoTime = z.iso.datetime({ offset: true });

/** `GET /admin/calibration`: every filter optional. */
export const CalibrationQuery = z
  .strictObject({
    from: isoTime.optional().meta({ description: 'Decisions from (default: 30 days ago).' }),
    to: isoTime.optional().meta({ description: 'Decisions before (default: now).' }),
    route: z.string().min(1).optional(),
    upstream: z.string().min(1).optional(),
    type: QuestionType.optional(),
    keyId: z.string().min(1).optional(),
    target: z.coerce
      .number({ error: 'must be a number' })
      .gt(0, { error: 'must be above 0' })
      .max(1, { error: 'must be at most 1' })
      .default(0.9)
      .meta({ description: 'The accuracy the advice aims for (default 0.9).' }),
    calibrated: z
      .enum(['true', 'false'], { error: 'must be true or false' })
      .optional()
      .transform((v) => v === 'true')
      .meta({
        description:
          'true: the answers as calibrated on routes with `calibrate` (docs/calibration-maps.md); default the raw ones.',
      }),
  })
  .refine((q) => q.from === undefined || q.to === undefined || Date.parse(q.to) > Date.parse(q.from), {
    error: 'to must come after from',
    path: ['to'],
  });
export type CalibrationQuery = z.infer<typeof CalibrationQuery>;

export const ReliabilityBin = z.strictObject({
  from: z.number(),
  to: z.number(),
  count: z.number().int(),
  meanPredicted: z.number().nullable(),
  observed: z.number().nullable().meta({ description: 'The share correct (noul: the share true).' }),
});
export type ReliabilityBin = z.infer<typeof ReliabilityBin>;

export const CalibrationGroup = z
  .strictObject({
    upstream: z.string(),
    type: QuestionType,
    outcomes: z.number().int(),
    accuracy: z.number().meta({ description: 'The share correct (box: with IoU ≥ 0.5 against the truth).' }),
    brier: z.number().nullable().meta({ description: 'null for box.' }),
    logLoss: z.number().nullable().meta({ description: 'null for box.' }),
    ece: z.number(),
    mae: z.number().nullable().meta({ description: 'Scores only: mean |score − truth|.' }),
    meanIoU: z.number().nullable().meta({ description: 'Boxes only: the mean intersection over union.' }),
    reviewed: z.number().int().meta({ description: 'Answers whose truth a reviewer gave (docs/review.md).' }),
    overridden: z.number().nullable().meta({
      description: "The share of reviewed answers the reviewer's truth contradicted; null with none.",
    }),
    bins: z.array(ReliabilityBin).length(10),
  })
  .meta({ id: 'CalibrationGroup' });
export type CalibrationGroup = z.infer<typeof CalibrationGroup>;

export const EscalationAdvice = z
  .strictObject({
    route: z.string(),
    upstream: z.string(),
    type: QuestionType,
    outcomes: z.number().int(),
    confidenceBelow: z.number().nullable().optional().meta({ description: 'choice, score and box.' }),
    noulWithin: z.tuple([z.number(), z.number()]).nullable().optional().meta({ description: 'noul.' }),
    keptAccuracy: z.number().nullable(),
    escalatedShare: z.number().nullable(),
  })
  .meta({ id: 'EscalationAdvice' });
export type EscalationAdvice = z.infer<typeof EscalationAdvice>;

export const Calibration = z
  .strictObject({ groups: z.array(CalibrationGroup), advice: z.array(EscalationAdvice) })
  .meta({ id: 'Calibration' });
export type Calibration = z.infer<typeof Calibration>;

/** The question types a calibration map corrects: those answered with a distribution. */
export const CALIBRATED_TYPES = ['noul', 'choice', 'score'] as const;
export type CalibratedType = (typeof CALIBRATED_TYPES)[number];

const HeldOutScores = z.strictObject({ logLoss: z.number(), brier: z.number(), ece: z.number() });
export type HeldOutScores = z.infer<typeof HeldOutScores>;

/** One fit (docs/calibration-maps.md): Platt scaling for a noul, temperature scaling otherwise. */
export const CalibrationMap = z
  .strictObject({
    id: z.string().meta({ description: '`cal_…`' }),
    upstream: z.string(),
    type: z.enum(CALIBRATED_TYPES),
    fittedAt: isoTime,
    outcomes: z.number().int().meta({ description: 'Every outcome it used, fitted and held out.' }),
    params: z.union([
      z
        .strictObject({ a: z.number(), b: z.number() })
        .meta({ description: 'noul: p′ = σ(a · logit(p) + b)' }),
      z.strictObject({ temperature: z.number() }).meta({ description: 'choice, score: p′ₖ ∝ pₖ^(1/T)' }),
    ]),
    heldOut: z.strictObject({
      n: z.number().int().meta({ description: 'The latest 20% of the outcomes by decision time.' }),
      before: HeldOutScores,
      after: HeldOutScores,
    }),
    active: z.boolean().meta({ description: 'Applied on routes with `calibrate: true`.' }),
  })
  .meta({ id: 'CalibrationMap' });
export type CalibrationMap = z.infer<typeof CalibrationMap>;

export const CalibrationMapList = z
  .strictObject({ maps: z.array(CalibrationMap).meta({ description: 'Newest first.' }) })
  .meta({ id: 'CalibrationMapList' });
export type CalibrationMapList = z.infer<typeof CalibrationMapList>;
