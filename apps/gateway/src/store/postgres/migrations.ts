/**
 * Versioned schema changes for PostgreSQL, applied in order at start. Several instances may start
 * at once: the runner holds a transaction-level advisory lock, so one applies and the others then
 * find nothing to do. Never edit a released step: add the next one. Amounts are bigint
 * micro-credits; times are bigint epoch milliseconds, as the Store interface speaks them.
 */
export const POSTGRES_MIGRATIONS: readonly { version: number; name: string; sql: string }[] = [
  {
    version: 1,
    name: 'keys, ledger, reservations, usage, heartbeat',
    sql: `
      CREATE TABLE api_keys (
        id text PRIMARY KEY,
        name text NOT NULL,
        prefix text NOT NULL,
        hash text NOT NULL UNIQUE,
        credits_micro bigint CHECK (credits_micro IS NULL OR credits_micro >= 0),
        rate_limit_per_minute integer,
        created_at bigint NOT NULL,
        expires_at bigint,
        revoked_at bigint,
        last_used_at bigint
      );
      CREATE INDEX api_keys_newest ON api_keys (created_at DESC, id DESC);
      -- Credits granted or removed by an operator. Debits are the usage records' credits, so
      -- balance = Σ ledger − Σ usage_records.credits_micro for every key, exactly.
      CREATE TABLE credit_ledger (
        id bigserial PRIMARY KEY,
        key_id text NOT NULL REFERENCES api_keys (id),
        delta_micro bigint NOT NULL,
        at bigint NOT NULL
      );
      CREATE INDEX credit_ledger_key ON credit_ledger (key_id);
      CREATE TABLE reservations (
        id bigserial PRIMARY KEY,
        key_id text NOT NULL REFERENCES api_keys (id),
        request_id text NOT NULL,
        amount_micro bigint NOT NULL CHECK (amount_micro >= 0),
        created_at bigint NOT NULL
      );
      CREATE INDEX reservations_key ON reservations (key_id, created_at);
      CREATE TABLE usage_records (
        id bigserial PRIMARY KEY,
        request_id text NOT NULL,
        key_id text NOT NULL REFERENCES api_keys (id),
        credits_micro bigint NOT NULL CHECK (credits_micro >= 0),
        input_tokens integer NOT NULL,
        output_tokens integer NOT NULL,
        questions integer NOT NULL,
        status integer NOT NULL,
        elapsed_ms integer NOT NULL,
        at bigint NOT NULL
      );
      CREATE INDEX usage_records_key_at ON usage_records (key_id, at);
      -- /readyz writes here: a database that can be read but not written is not ready.
      CREATE TABLE heartbeat (id integer PRIMARY KEY CHECK (id = 1), at bigint NOT NULL);
    `,
  },
];
