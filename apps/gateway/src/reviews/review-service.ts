import { randomBytes } from 'node:crypto';
import {
  type Answer,
  type DecisionImage,
  type EvaluationRequest,
  failure,
  type GatewayFailure,
  type Issue,
  type ReviewItem,
  type ReviewList,
  type ReviewQuery,
  type SubmitReviewBody,
  type Truth,
} from '@decision-gateway/contract';
import { behaviourOfType } from '@decision-gateway/questions';
import type { Logger } from 'pino';
import { judgeTruth, readKept } from '../outcomes/decision-record.ts';
import type { Store, StoredReviewItem } from '../store/store.ts';

type Result<T> = { ok: true; value: T } | { ok: false; error: GatewayFailure };

/** What a review item holds beside its ids (stored as JSON): the one place a state or an image is kept. */
interface ItemBody {
  state: EvaluationRequest['state'];
  assets: ReviewItem['assets'];
  questions: EvaluationRequest['questions'];
  answers: Record<string, Answer>;
  review: string[];
}

export interface ReviewDeps {
  store: Store;
  clock: () => number;
  logger: Logger;
  /** Told of each reviewed answer: the reviewer agreed with it, or overrode it (`dg_reviews_total`). */
  onReviewed?(outcome: 'agreed' | 'overridden'): void;
}

/** A decision's images as its caller sent them: bytes as base64, or the URL. */
function assetsOf(images: readonly DecisionImage[] | undefined): ReviewItem['assets'] {
  const assets: ReviewItem['assets'] = {};
  for (const image of images ?? [])
    assets[image.ref] =
      image.source === 'bytes'
        ? { type: 'image', format: image.format, data_base64: image.base64 }
        : { type: 'image', url: image.url };
  return assets;
}

const iso = (ms: number) => new Date(ms).toISOString();

function view(stored: StoredReviewItem): ReviewItem {
  const body = JSON.parse(stored.item) as ItemBody;
  return {
    id: stored.id,
    requestId: stored.requestId,
    keyId: stored.keyId,
    route: stored.route,
    at: iso(stored.at),
    status: stored.status,
    ...body,
    outcomes: stored.outcomes === null ? null : (JSON.parse(stored.outcomes) as Record<string, Truth>),
    reviewer: stored.reviewer,
    reviewedAt: stored.reviewedAt === null ? null : iso(stored.reviewedAt),
  };
}

/** A page's end, opaque to callers: the last item's time and id. */
const cursorOf = (item: StoredReviewItem) =>
  Buffer.from(JSON.stringify([item.at, item.id])).toString('base64url');
function readCursor(cursor: string): { at: number; id: string } | undefined {
  try {
    const [at, id] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown[];
    return typeof at === 'number' && typeof id === 'string' ? { at, id } : undefined;
  } catch {
    return undefined;
  }
}

const NO_ITEM = (id: string) =>
  failure('not_found', `no review item with id ${JSON.stringify(id.slice(0, 100))}`);

/**
 * Review by a person (docs/review.md): the items a route marks, read and answered with the admin
 * token; a reviewer's truths become the decision's outcomes (docs/outcomes.md), `source: review`.
 */
export function createReviews(deps: ReviewDeps) {
  const { store, clock } = deps;
  return {
    /** A marked decision, after its settle: its item. Never fails the caller's request. */
    async keep(decision: {
      requestId: string;
      keyId: string;
      route: string;
      request: EvaluationRequest;
      images?: readonly DecisionImage[] | undefined;
      answers: Record<string, Answer>;
      review: string[];
    }): Promise<void> {
      const body: ItemBody = {
        state: decision.request.state,
        assets: assetsOf(decision.images),
        questions: decision.request.questions,
        answers: decision.answers,
        review: decision.review,
      };
      try {
        await store.saveReviewItem({
          id: `rev_${randomBytes(12).toString('hex')}`,
          requestId: decision.requestId,
          keyId: decision.keyId,
          route: decision.route,
          at: clock(),
          status: 'open',
          item: JSON.stringify(body),
          outcomes: null,
          reviewer: null,
          reviewedAt: null,
        });
      } catch (error) {
        // The caller has its answers; the item is lost, and the log says so (never what it held).
        deps.logger.error({ err: error, requestId: decision.requestId }, 'a review item could not be kept');
      }
    },

    /** `GET /admin/reviews`: oldest first, a page at a time. */
    async list(query: ReviewQuery): Promise<Result<ReviewList>> {
      const after = query.cursor === undefined ? undefined : readCursor(query.cursor);
      if (query.cursor !== undefined && after === undefined) {
        const issues: Issue[] = [{ path: ['cursor'], message: 'is not a cursor this API gave' }];
        return {
          ok: false,
          error: failure('invalid_request', 'cursor: is not a cursor this API gave', { issues }),
        };
      }
      const rows = await store.reviewItems({
        limit: query.limit + 1,
        ...(query.status !== undefined && { status: query.status }),
        ...(query.route !== undefined && { route: query.route }),
        ...(after !== undefined && { after }),
      });
      const page = rows.slice(0, query.limit);
      const last = page[page.length - 1];
      return {
        ok: true,
        value: {
          reviews: page.map(view),
          nextCursor: rows.length > query.limit && last ? cursorOf(last) : null,
        },
      };
    },

    async get(id: string): Promise<Result<ReviewItem>> {
      const stored = await store.reviewItem(id);
      return stored ? { ok: true, value: view(stored) } : { ok: false, error: NO_ITEM(id) };
    },

    /**
     * `POST /admin/reviews/{id}`: each truth judged against the decision's answer as outcomes are
     * (docs/outcomes.md), recorded with source `review`, and the item done.
     */
    async submit(id: string, body: SubmitReviewBody): Promise<Result<ReviewItem>> {
      const stored = await store.reviewItem(id);
      if (stored === undefined) return { ok: false, error: NO_ITEM(id) };
      if (stored.status === 'done')
        return { ok: false, error: failure('invalid_request', `the review item ${id} was reviewed already`) };
      const decision = await store.findDecision(stored.requestId);
      if (decision === undefined)
        return {
          ok: false,
          error: failure('not_found', `the decision of review item ${id} is no longer kept`),
        };
      const questions = readKept(decision.questions).questions;
      const issues: Issue[] = [];
      const truths: { questionId: string; truth: string }[] = [];
      const verdicts: ('agreed' | 'overridden')[] = [];
      for (const [questionId, truth] of Object.entries(body.outcomes)) {
        const question = Object.hasOwn(questions, questionId) ? questions[questionId] : undefined;
        if (question === undefined) {
          issues.push({
            path: ['outcomes', questionId],
            message: 'the decision has no answer to this question',
          });
          continue;
        }
        const judged = judgeTruth(question, truth);
        if (!judged.ok) {
          issues.push({ path: ['outcomes', questionId], message: judged.reason });
          continue;
        }
        truths.push({ questionId, truth: JSON.stringify(truth) });
        // The answer the caller got: the calibrated one, where a map made it.
        const given = question.calibrated ?? question;
        const right = behaviourOfType(question.type).score(given, judged.judged).correct;
        verdicts.push(right ? 'agreed' : 'overridden');
      }
      if (issues.length > 0) {
        const [first] = issues as [Issue];
        return {
          ok: false,
          error: failure('invalid_request', `${first.path.join('.')}: ${first.message}`, { issues }),
        };
      }
      const now = clock();
      const done = await store.completeReview(
        id,
        { outcomes: JSON.stringify(body.outcomes), reviewer: body.reviewer, at: now },
        truths,
      );
      if (!done)
        return { ok: false, error: failure('invalid_request', `the review item ${id} was reviewed already`) };
      for (const verdict of verdicts) deps.onReviewed?.(verdict);
      const after = await store.reviewItem(id);
      return after ? { ok: true, value: view(after) } : { ok: false, error: NO_ITEM(id) };
    },

    openCount: () => store.openReviews(),
  };
}

export type Reviews = ReturnType<typeof createReviews>;
