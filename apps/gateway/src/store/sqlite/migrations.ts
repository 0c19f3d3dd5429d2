import { decisionTables } from '../decision-tables.ts';
import { learningTables } from '../learning-tables.ts';
import { rollupSchema } from '../rollups.ts';
import type { Migration } from '../shared-rules.ts';

/**
 * Versioned schema changes, applied in order at start inside one transaction each. Never edit a
 * released step: add the next one. Balances can't go below 0 even if code tried (CHECK).
 */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'keys, ledger, reservations, usage',
    sql: `
      CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        prefix TEXT NOT NULL,
        hash TEXT NOT NULL UNIQUE,
        credits_micro INTEGER CHECK (credits_micro IS NULL OR credits_micro >= 0),
        rate_limit_per_minute INTEGER,
        created_at INTEGER NOT NULL,
        expires_at INTEGER,
        revoked_at INTEGER,
        last_used_at INTEGER
      );
      -- Credits granted or removed by an operator. Debits are the usage records' credits, so
      -- balance = Σ ledger − Σ usage_records.credits_micro for every key, exactly.
      CREATE TABLE credit_ledger (
        id INTEGER PRIMARY KEY,
        key_id TEXT NOT NULL REFERENCES api_keys(id),
        delta_micro INTEGER NOT NULL,
        at INTEGER NOT NULL
      );
      CREATE INDEX credit_ledger_key ON credit_ledger(key_id);
      -- Credits held for requests in flight; integer ids keep the hot inserts and deletes cheap.
      CREATE TABLE reservations (
        id INTEGER PRIMARY KEY,
        key_id TEXT NOT NULL REFERENCES api_keys(id),
        request_id TEXT NOT NULL,
        amount_micro INTEGER NOT NULL CHECK (amount_micro >= 0),
        created_at INTEGER NOT NULL
      );
      CREATE INDEX reservations_key ON reservations(key_id, created_at);
      CREATE TABLE usage_records (
        id INTEGER PRIMARY KEY,
        request_id TEXT NOT NULL,
        key_id TEXT NOT NULL REFERENCES api_keys(id),
        credits_micro INTEGER NOT NULL CHECK (credits_micro >= 0),
        input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        questions INTEGER NOT NULL,
        status INTEGER NOT NULL,
        elapsed_ms INTEGER NOT NULL,
        at INTEGER NOT NULL
      );
      CREATE INDEX usage_records_key_at ON usage_records(key_id, at);
    `,
  },
  {
    version: 2,
    name: 'readiness heartbeat',
    sql: `
      -- /readyz writes here: a store that can be read but not written is not ready.
      CREATE TABLE heartbeat (id INTEGER PRIMARY KEY CHECK (id = 1), at INTEGER NOT NULL);
    `,
  },
  {
    version: 3,
    name: 'routes, the decision cache and browser tokens on keys, reservations and usage records',
    sql: `
      ALTER TABLE api_keys ADD COLUMN route TEXT;
      ALTER TABLE usage_records ADD COLUMN route TEXT;
      ALTER TABLE usage_records ADD COLUMN upstream TEXT;
      ALTER TABLE usage_records ADD COLUMN cached INTEGER NOT NULL DEFAULT 0;
      -- Only the hash of a token is stored. Its spend is the sum of its usage records, so its
      -- cap is exact the way a key's balance is.
      CREATE TABLE tokens (
        id TEXT PRIMARY KEY,
        key_id TEXT NOT NULL REFERENCES api_keys(id),
        hash TEXT NOT NULL UNIQUE,
        expires_at INTEGER NOT NULL,
        max_credits_micro INTEGER CHECK (max_credits_micro IS NULL OR max_credits_micro > 0),
        origins TEXT,
        subject TEXT,
        rate_limit_per_minute INTEGER,
        route TEXT,
        created_at INTEGER NOT NULL
      );
      ALTER TABLE reservations ADD COLUMN token_id TEXT;
      CREATE INDEX reservations_token ON reservations(token_id) WHERE token_id IS NOT NULL;
      ALTER TABLE usage_records ADD COLUMN token_id TEXT;
      ALTER TABLE usage_records ADD COLUMN subject TEXT;
      CREATE INDEX usage_records_token ON usage_records(token_id) WHERE token_id IS NOT NULL;
    `,
  },
  {
    version: 4,
    name: 'reserve, settle and release idempotent per request',
    sql: `
      CREATE INDEX usage_records_request ON usage_records(request_id);
    `,
  },
  {
    version: 5,
    name: 'reservations read from their indexes alone',
    sql: `
      -- A key's live holds are summed on every reserve and settle: with the amount in the index
      -- the sum never reads the table. A request holds at most one reservation (the core reserves
      -- once per request id), so a retried reserve meets the unique index instead of a scan.
      -- Duplicates could only be left by a bug; the oldest hold of each request stays.
      DELETE FROM reservations WHERE id NOT IN (SELECT MIN(id) FROM reservations GROUP BY request_id);
      DROP INDEX reservations_key;
      CREATE INDEX reservations_key_live ON reservations(key_id, created_at, amount_micro);
      CREATE UNIQUE INDEX reservations_request ON reservations(request_id);
    `,
  },
  {
    version: 6,
    name: 'usage rollups, written with each record',
    // The rollups of docs/usage.md. Records written from now on are added by the
    // store in the transaction that writes them (sqlite/rollup-batch.ts sums each group-commit
    // batch); those already here are folded in the background (usage/maintenance.ts) from
    // next_id to last_id, a batch per transaction that also moves next_id, so each is counted once.
    // A record changed before it is folded (a release voiding a settle) is left to the fold.
    sql: `
      ${rollupSchema('sqlite')}
    `,
  },
  {
    version: 7,
    name: 'decision records and their outcomes',
    // docs/outcomes.md: written by the settle (or a cache hit's record) in the
    // same transaction as the usage record.
    sql: `
      ${decisionTables('sqlite')}
    `,
  },
  {
    version: 8,
    name: 'projects and budgets',
    // docs/budgets.md. A budget row also holds its holder's spend in its current window
    // (window_start, spent_micro), moved by each settle that debits: a new window starts from 0
    // by arithmetic, with no job, and the request path never sums usage records.
    sql: `
      CREATE TABLE projects (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        created_at INTEGER NOT NULL
      );
      ALTER TABLE api_keys ADD COLUMN project_id TEXT REFERENCES projects(id);
      CREATE INDEX api_keys_project ON api_keys(project_id);
      CREATE TABLE budgets (
        holder TEXT NOT NULL,
        holder_kind TEXT NOT NULL CHECK (holder_kind IN ('key', 'project')),
        period TEXT NOT NULL CHECK (period IN ('minute', 'hour', 'day', 'week', 'month')),
        limit_micro INTEGER NOT NULL CHECK (limit_micro > 0),
        mode TEXT NOT NULL CHECK (mode IN ('hard', 'soft')),
        window_start INTEGER NOT NULL,
        spent_micro INTEGER NOT NULL CHECK (spent_micro >= 0),
        PRIMARY KEY (holder, period)
      );
    `,
  },
  {
    version: 9,
    name: 'calibration maps, review items and where each outcome came from',
    // docs/calibration-maps.md and docs/review.md: fits and review items are written off the
    // request path; an outcome's source tells a reviewer's truth from a caller's.
    sql: `
      ${learningTables('sqlite')}
    `,
  },
  {
    version: 10,
    name: 'what each key holds, kept as holds come and go',
    // Reserve and settle read what a key's live holds hold. Summed from the index, that cost grew
    // with the requests in flight (24 µs a read at 1,024); kept on the key by these triggers, it
    // is one row, whoever inserts or deletes a hold (a settle, a release, the stale sweep, another
    // process). Stale holds still count nowhere: while a key has one, the read sums as before.
    sql: `
      ALTER TABLE api_keys ADD COLUMN reserved_micro INTEGER NOT NULL DEFAULT 0;
      UPDATE api_keys SET reserved_micro =
        (SELECT COALESCE(SUM(amount_micro), 0) FROM reservations WHERE key_id = api_keys.id);
      CREATE TRIGGER reservations_held AFTER INSERT ON reservations BEGIN
        UPDATE api_keys SET reserved_micro = reserved_micro + NEW.amount_micro WHERE id = NEW.key_id;
      END;
      CREATE TRIGGER reservations_let_go AFTER DELETE ON reservations BEGIN
        UPDATE api_keys SET reserved_micro = reserved_micro - OLD.amount_micro WHERE id = OLD.key_id;
      END;
    `,
  },
];
