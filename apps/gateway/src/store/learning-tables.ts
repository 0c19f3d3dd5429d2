/**
 * What the gateway learns from outcomes (docs/calibration-maps.md, docs/review.md), written once for
 * both stores' migrations: the calibration maps it fitted, the review items a route marked, and
 * where each outcome came from (a caller, or a reviewer).
 */
export function learningTables(dialect: 'sqlite' | 'postgres'): string {
  const pg = dialect === 'postgres';
  const time = pg ? 'bigint' : 'INTEGER';
  const flag = pg ? 'boolean' : 'INTEGER';
  return `
      CREATE TABLE calibration_maps (
        id text PRIMARY KEY,
        upstream text NOT NULL,
        type text NOT NULL CHECK (type IN ('noul', 'choice', 'score')),
        fitted_at ${time} NOT NULL,
        outcomes integer NOT NULL,
        params text NOT NULL,
        held_out text NOT NULL,
        active ${flag} NOT NULL
      );
      CREATE INDEX calibration_maps_fitted ON calibration_maps(fitted_at);
      CREATE TABLE review_items (
        id text PRIMARY KEY,
        request_id text NOT NULL UNIQUE,
        key_id text NOT NULL,
        route text NOT NULL,
        at ${time} NOT NULL,
        status text NOT NULL CHECK (status IN ('open', 'done')),
        item text NOT NULL,
        outcomes text,
        reviewer text,
        reviewed_at ${time}
      );
      CREATE INDEX review_items_queue ON review_items(status, at, id);
      ALTER TABLE decision_outcomes ADD COLUMN source text NOT NULL DEFAULT 'caller';`;
}
