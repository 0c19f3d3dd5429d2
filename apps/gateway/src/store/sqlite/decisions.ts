import { groupJudged, QUESTIONS_ONCE, type Store } from '../store.ts';
import type { SqliteParts } from './parts.ts';

type DecisionMethods = Pick<
  Store,
  'findDecision' | 'recordOutcomes' | 'judgedDecisions' | 'deleteDecisionsBefore'
>;

/** A page of decisions that have outcomes, then their outcomes: one row per outcome, by decision. */
const JUDGED = `SELECT d.id, d.route, d.at, ${QUESTIONS_ONCE}, o.question_id, o.truth, o.source
  FROM decision_records d JOIN decision_outcomes o ON o.request_id = d.request_id
  WHERE d.id IN (
    SELECT p.id FROM decision_records p
    WHERE p.at >= ? AND p.at < ? AND p.id > ? AND (? IS NULL OR p.key_id = ?) AND (? IS NULL OR p.route = ?)
      AND EXISTS (SELECT 1 FROM decision_outcomes q WHERE q.request_id = p.request_id)
    ORDER BY p.id LIMIT ?)
  ORDER BY d.id, o.question_id`;

/** Decisions kept for their outcomes, the outcomes reported, and their retention (docs/outcomes.md). */
export function sqliteDecisions({ sql, write, background }: SqliteParts): DecisionMethods {
  return {
    async findDecision(requestId) {
      return sql.decision.get(requestId);
    },
    recordOutcomes: (requestId, outcomes, at) =>
      write(() => {
        let replaced = 0;
        for (const { questionId, truth } of outcomes) {
          if (sql.outcomeExists.get(requestId, questionId)) replaced++;
          sql.upsertOutcome.run(requestId, questionId, truth, at, 'caller');
        }
        return replaced;
      }),
    async judgedDecisions({ from, to, keyId, route, after, limit }) {
      const rows = await background().all<Parameters<typeof groupJudged>[0][number]>({
        sql: JUDGED,
        params: [
          from,
          to,
          after ?? -1,
          keyId ?? null,
          keyId ?? null,
          route ?? null,
          route ?? null,
          limit ?? -1,
        ],
      });
      return groupJudged(rows);
    },
    async deleteDecisionsBefore(before, limit) {
      const [, changed] = await background().transaction([
        {
          sql: `DELETE FROM decision_outcomes WHERE request_id IN (
                  SELECT request_id FROM (SELECT request_id, at FROM decision_records ORDER BY id LIMIT ?) WHERE at < ?)`,
          params: [limit, before],
        },
        {
          sql: `DELETE FROM decision_records WHERE id IN (
                  SELECT id FROM (SELECT id, at FROM decision_records ORDER BY id LIMIT ?) WHERE at < ?)`,
          params: [limit, before],
        },
      ]);
      return changed ?? 0;
    },
  };
}
