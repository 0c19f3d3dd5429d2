import { groupJudged, type Store } from '../store.ts';
import type { SqliteParts } from './parts.ts';

type DecisionMethods = Pick<
  Store,
  'findDecision' | 'recordOutcomes' | 'judgedDecisions' | 'deleteDecisionsBefore'
>;

const JUDGED = `SELECT d.request_id, d.route, d.questions, o.question_id, o.truth
  FROM decision_records d JOIN decision_outcomes o ON o.request_id = d.request_id
  WHERE d.at >= ? AND d.at < ? AND (? IS NULL OR d.key_id = ?) AND (? IS NULL OR d.route = ?)
  ORDER BY d.request_id`;

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
          sql.upsertOutcome.run(requestId, questionId, truth, at);
        }
        return replaced;
      }),
    async judgedDecisions({ from, to, keyId, route }) {
      const rows = await background().all<{
        request_id: string;
        route: string | null;
        questions: string;
        question_id: string;
        truth: string;
      }>({
        sql: JUDGED,
        params: [from, to, keyId ?? null, keyId ?? null, route ?? null, route ?? null],
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
