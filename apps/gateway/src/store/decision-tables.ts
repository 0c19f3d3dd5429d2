/**
 * The tables of decisions and their outcomes (docs/outcomes.md), written once
 * for both stores' migrations. Both are read by request id; retention deletes the oldest by id.
 */
export function decisionTables(dialect: 'sqlite' | 'postgres'): string {
  const pg = dialect === 'postgres';
  const id = pg ? 'id bigserial PRIMARY KEY' : 'id INTEGER PRIMARY KEY';
  const time = pg ? 'bigint' : 'INTEGER';
  return `
      CREATE TABLE decision_records (
        ${id},
        request_id text NOT NULL UNIQUE,
        key_id text NOT NULL,
        route text,
        at ${time} NOT NULL,
        reused text,
        questions text NOT NULL
      );
      CREATE TABLE decision_outcomes (
        request_id text NOT NULL,
        question_id text NOT NULL,
        truth text NOT NULL,
        recorded_at ${time} NOT NULL,
        PRIMARY KEY (request_id, question_id)
      )${pg ? '' : ' WITHOUT ROWID'};`;
}
