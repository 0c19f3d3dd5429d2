import { type Box, Box as BoxSchema, isPlainObject } from '@decision-gateway/contract';
import { probability } from '../distribution.ts';
import { fail, isProbability } from '../distribution-checks.ts';
import type { QuestionBehaviour } from './behaviour.ts';

/**
 * A box is asked only of upstreams that see images (docs/images.md): never of a chat model read
 * through its logprobs, nor of the lexical baseline, so it offers no options to weigh.
 */
const noOptions = (): never => {
  throw new Error('a box question is asked only of upstreams that take box questions');
};

/** Intersection over union of two boxes: 1 when they coincide, 0 when they do not meet. */
export function intersectionOverUnion(a: Box, b: Box): number {
  const width = Math.max(0, Math.min(a.right, b.right) - Math.max(a.left, b.left));
  const height = Math.max(0, Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top));
  const intersection = width * height;
  const area = (box: Box) => (box.right - box.left) * (box.bottom - box.top);
  const union = area(a) + area(b) - intersection;
  // Two boxes of no area at the same place coincide.
  if (union === 0) return a.top === b.top && a.left === b.left ? 1 : 0;
  return intersection / union;
}

/** A box counts as found where it overlaps the truth at least this much (docs/outcomes.md). */
export const BOX_IOU_HIT = 0.5;

const edge = (box: Box) => [box.top, box.bottom, box.left, box.right].map((n) => n.toFixed(2));

export const box: QuestionBehaviour<'box'> = {
  optionCount: noOptions,
  render: noOptions,
  fromWeights: noOptions,
  lexicalScores: noOptions,

  check(_question, raw) {
    if (!isPlainObject(raw.box)) return fail('.box: not an object {top, bottom, left, right}');
    const parsed = BoxSchema.safeParse(raw.box);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      return fail(
        `.box${issue?.path.length ? `.${issue.path.join('.')}` : ''}: ${issue?.message ?? 'invalid'}`,
      );
    }
    if (!isProbability(raw.confidence))
      return fail(`.confidence: ${JSON.stringify(raw.confidence)} is not a probability in [0, 1]`);
    return { ok: true, value: { type: 'box', box: parsed.data, confidence: raw.confidence } };
  },

  unsureBy: 'confidence',
  unsure: (answer, rule) => rule.confidenceBelow !== undefined && answer.confidence < rule.confidenceBelow,

  summarize(answer) {
    const [top, bottom, left, right] = edge(answer.box);
    return `top ${top}, bottom ${bottom}, left ${left}, right ${right} (confidence ${probability(answer.confidence)})`;
  },

  keepQuestion: () => ({}),

  keep: (_question, answer) => ({ p: answer.confidence, confidence: answer.confidence, box: answer.box }),

  judge(_kept, truth) {
    const parsed = BoxSchema.safeParse(truth);
    return parsed.success
      ? { ok: true, judged: { type: 'box', box: parsed.data } }
      : {
          ok: false,
          reason:
            'the truth of a box is {top, bottom, left, right}, each in [0, 1], top ≤ bottom and left ≤ right',
        };
  },

  score(kept, truth) {
    const iou = truth.type === 'box' && kept.box ? intersectionOverUnion(kept.box, truth.box) : 0;
    const hit = iou >= BOX_IOU_HIT;
    return { binned: kept.p as number, correct: hit, observed: hit, brier: null, logLoss: null, iou };
  },
};
