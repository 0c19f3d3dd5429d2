import type { Statement as Prepared } from 'better-sqlite3';
import type { Store, StoredCalibrationMap, StoredReviewItem } from '../store.ts';
import type { SqliteParts } from './parts.ts';

type LearningMethods = Pick<
  Store,
  | 'saveCalibrationMaps'
  | 'calibrationMaps'
  | 'saveReviewItem'
  | 'reviewItems'
  | 'reviewItem'
  | 'completeReview'
  | 'openReviews'
  | 'deleteReviewItems'
>;

const MAP_COLUMNS = `id, upstream, type, fitted_at AS fittedAt, outcomes, params, held_out AS heldOut, active`;
const ITEM_COLUMNS = `id, request_id AS requestId, key_id AS keyId, route, at, status, item, outcomes, reviewer,
  reviewed_at AS reviewedAt`;

const asMap = (row: StoredCalibrationMap) => ({ ...row, active: Boolean(row.active) });

/**
 * Calibration maps and review items (docs/calibration-maps.md, docs/review.md): fits are written and
 * read on the background connection; a review item is written with the hot writes' next commit,
 * and a review's truths and its item in one of them.
 */
export function sqliteLearning({ db, write, background }: SqliteParts): LearningMethods {
  let statements:
    | { insertItem: Prepared; finish: Prepared; requestOf: Prepared; upsertOutcome: Prepared }
    | undefined;
  // Prepared on first use: a gateway without review never prepares them.
  const prepared = () => {
    statements ??= {
      insertItem: db.prepare(
        `INSERT INTO review_items (id, request_id, key_id, route, at, status, item) VALUES (?, ?, ?, ?, ?, 'open', ?)
         ON CONFLICT (request_id) DO NOTHING`,
      ),
      finish: db.prepare(
        `UPDATE review_items SET status = 'done', outcomes = ?, reviewer = ?, reviewed_at = ? WHERE id = ? AND status = 'open'`,
      ),
      requestOf: db.prepare('SELECT request_id AS requestId FROM review_items WHERE id = ?'),
      upsertOutcome: db.prepare(
        `INSERT INTO decision_outcomes (request_id, question_id, truth, recorded_at, source) VALUES (?, ?, ?, ?, 'review')
         ON CONFLICT (request_id, question_id) DO UPDATE SET truth = excluded.truth, recorded_at = excluded.recorded_at,
           source = 'review'`,
      ),
    };
    return statements;
  };

  return {
    async saveCalibrationMaps(maps) {
      const steps = maps.flatMap((map) => [
        ...(map.active
          ? [
              {
                sql: 'UPDATE calibration_maps SET active = 0 WHERE upstream = ? AND type = ? AND active = 1',
                params: [map.upstream, map.type],
              },
            ]
          : []),
        {
          sql: 'INSERT INTO calibration_maps (id, upstream, type, fitted_at, outcomes, params, held_out, active) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
          params: [
            map.id,
            map.upstream,
            map.type,
            map.fittedAt,
            map.outcomes,
            map.params,
            map.heldOut,
            map.active ? 1 : 0,
          ],
        },
      ]);
      if (steps.length > 0) await background().transaction(steps);
    },
    async calibrationMaps({ activeOnly }) {
      const rows = await background().all<StoredCalibrationMap>({
        sql: `SELECT ${MAP_COLUMNS} FROM calibration_maps ${activeOnly ? 'WHERE active = 1' : ''} ORDER BY fitted_at DESC, id DESC`,
        params: [],
      });
      return rows.map(asMap);
    },
    saveReviewItem: (item) =>
      write(() => {
        prepared().insertItem.run(item.id, item.requestId, item.keyId, item.route, item.at, item.item);
      }),
    reviewItems: ({ status, route, limit, after }) =>
      background().all<StoredReviewItem>({
        sql: `SELECT ${ITEM_COLUMNS} FROM review_items
          WHERE (? IS NULL OR status = ?) AND (? IS NULL OR route = ?) AND (at > ? OR (at = ? AND id > ?))
          ORDER BY at, id LIMIT ?`,
        params: [
          status ?? null,
          status ?? null,
          route ?? null,
          route ?? null,
          after?.at ?? -1,
          after?.at ?? -1,
          after?.id ?? '',
          limit,
        ],
      }),
    async reviewItem(id) {
      const [row] = await background().all<StoredReviewItem>({
        sql: `SELECT ${ITEM_COLUMNS} FROM review_items WHERE id = ?`,
        params: [id],
      });
      return row;
    },
    completeReview: (id, review, truths) =>
      write(() => {
        const { finish, requestOf, upsertOutcome } = prepared();
        if (finish.run(review.outcomes, review.reviewer, review.at, id).changes === 0) return false;
        const { requestId } = requestOf.get(id) as { requestId: string };
        for (const { questionId, truth } of truths)
          upsertOutcome.run(requestId, questionId, truth, review.at);
        return true;
      }),
    async openReviews() {
      const [row] = await background().all<{ n: number }>({
        sql: `SELECT count(*) AS n FROM review_items WHERE status = 'open'`,
        params: [],
      });
      return row?.n ?? 0;
    },
    async deleteReviewItems(before, reviewedBefore, limit) {
      const [changed] = await background().transaction([
        {
          sql: `DELETE FROM review_items WHERE id IN (
                  SELECT id FROM review_items WHERE at < ? OR (status = 'done' AND reviewed_at < ?) LIMIT ?)`,
          params: [before, reviewedBefore, limit],
        },
      ]);
      return changed ?? 0;
    },
  };
}
