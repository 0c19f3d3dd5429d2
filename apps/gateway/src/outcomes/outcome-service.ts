import {
  type Calibration,
  type CalibrationQuery,
  failure,
  type GatewayFailure,
  type Issue,
  QUESTION_TYPES,
  type QuestionType,
  type RecordedOutcomes,
  type RecordOutcomesBody,
  type Truth,
} from '@decision-gateway/contract';
import type { Store } from '../store/store.ts';
import { calibrationGroups, escalationAdvice } from './calibration.ts';
import { judgeTruth, type KeptQuestions, readKept } from './decision-record.ts';
import { judgedAnswers } from './judged-answers.ts';

type Result<T> = { ok: true; value: T } | { ok: false; error: GatewayFailure };

const DAY_MS = 86_400_000;

/** A route that escalates, as the advice needs it. */
export interface EscalatingRoute {
  name: string;
  upstreams: readonly string[];
  escalateTo: string;
}

/** The routes of a configuration (built, or as read) that escalate. */
export function escalatingRoutes(
  routes: Iterable<[string, { upstreams: readonly string[]; escalate?: { to: string } | undefined }]>,
): EscalatingRoute[] {
  return [...routes].flatMap(([name, route]) =>
    route.escalate ? [{ name, upstreams: route.upstreams, escalateTo: route.escalate.to }] : [],
  );
}

/** The advice needs this many outcomes of an upstream on a route for a question type. */
export const ADVICE_MIN_OUTCOMES = 20;

/** One message for an unknown id, another key's and one past retention: the caller learns nothing more. */
const NO_DECISION = (requestId: string) =>
  failure('not_found', `no decision of this key with request id ${JSON.stringify(requestId)} is kept`);

export interface OutcomeDeps {
  store: Store;
  clock: () => number;
  /** DECISION_RETENTION_DAYS: 0 keeps none, and every outcome is refused. */
  retentionDays: number;
  /** The routes of the configuration that escalate, for the advice: their upstreams and `escalate.to`. */
  escalating: readonly EscalatingRoute[];
  /** Told of each truth, once for each upstream whose answer it judges (`dg_outcomes_total`). */
  onJudged?(upstream: string, type: QuestionType): void;
}

/**
 * Outcomes and calibration (docs/outcomes.md): a caller reports what turned out
 * true for a decision of its key; an operator reads how well each upstream's probabilities
 * matched those truths, and which escalation threshold would reach a target accuracy.
 */
export function createOutcomes(deps: OutcomeDeps) {
  /** Each truth judged against its question, or every issue with its path. */
  function judgeAll(questions: KeptQuestions, outcomes: Record<string, Truth>) {
    const issues: Issue[] = [];
    const judged: { questionId: string; truth: string }[] = [];
    for (const [questionId, truth] of Object.entries(outcomes)) {
      const question = Object.hasOwn(questions, questionId) ? questions[questionId] : undefined;
      if (question === undefined) {
        issues.push({
          path: ['outcomes', questionId],
          message: 'the decision has no answer to this question (not asked, or declined by every upstream)',
        });
        continue;
      }
      const verdict = judgeTruth(question, truth);
      if (!verdict.ok) issues.push({ path: ['outcomes', questionId], message: verdict.reason });
      else judged.push({ questionId, truth: JSON.stringify(truth) });
    }
    return { issues, judged };
  }

  return {
    /** `POST /v1/outcomes` for the key that asked (its API key or one of its tokens). */
    async record(keyId: string, body: RecordOutcomesBody): Promise<Result<RecordedOutcomes>> {
      if (deps.retentionDays === 0) return { ok: false, error: NO_DECISION(body.requestId) };
      const now = deps.clock();
      const decision = await deps.store.findDecision(body.requestId);
      if (
        decision === undefined ||
        decision.keyId !== keyId ||
        decision.at < now - deps.retentionDays * DAY_MS
      )
        return { ok: false, error: NO_DECISION(body.requestId) };
      const questions = readKept(decision.questions).questions;
      const { issues, judged } = judgeAll(questions, body.outcomes);
      if (issues.length > 0) {
        const [first] = issues as [Issue];
        const message = `outcomes.${first.path[1]}: ${first.message}${issues.length > 1 ? ` (and ${issues.length - 1} more)` : ''}`;
        return { ok: false, error: failure('invalid_request', message, { issues }) };
      }
      const replaced = await deps.store.recordOutcomes(body.requestId, judged, now);
      for (const { questionId } of judged) {
        const question = questions[questionId] as KeptQuestions[string];
        deps.onJudged?.(question.upstream, question.type);
        if (question.first) deps.onJudged?.(question.first.upstream, question.type);
      }
      return { ok: true, value: { recorded: judged.length, replaced } };
    },

    /** `GET /admin/calibration`: groups per upstream and type, and the advice for routes that escalate. */
    async calibration(query: CalibrationQuery): Promise<Result<Calibration>> {
      const now = deps.clock();
      const to = query.to === undefined ? now : Date.parse(query.to);
      const from = query.from === undefined ? to - 30 * DAY_MS : Date.parse(query.from);
      if (query.keyId !== undefined && !(await deps.store.getKey(query.keyId)))
        return { ok: false, error: failure('not_found', `no key with id "${query.keyId}"`) };
      const decisions = await deps.store.judgedDecisions({
        from,
        to,
        ...(query.keyId !== undefined && { keyId: query.keyId }),
        ...(query.route !== undefined && { route: query.route }),
      });
      const answers = judgedAnswers(decisions, {
        ...(query.type !== undefined && { type: query.type }),
        calibrated: query.calibrated,
      });
      const selected =
        query.upstream === undefined ? answers : answers.filter((a) => a.upstream === query.upstream);
      const advice = [];
      for (const { name, upstreams, escalateTo } of deps.escalating) {
        if (query.route !== undefined && query.route !== name) continue;
        for (const upstream of upstreams) {
          if (upstream === escalateTo) continue;
          for (const type of QUESTION_TYPES) {
            const mine = selected.filter(
              (a) => a.route === name && a.upstream === upstream && a.type === type,
            );
            if (mine.length >= ADVICE_MIN_OUTCOMES)
              advice.push(escalationAdvice(name, upstream, type, mine, query.target));
          }
        }
      }
      return { ok: true, value: { groups: calibrationGroups(selected), advice } };
    },
  };
}

export type Outcomes = ReturnType<typeof createOutcomes>;
