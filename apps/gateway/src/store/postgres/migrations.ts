import { decisionTables } from '../decision-tables.ts';
import { learningTables } from '../learning-tables.ts';
import { rollupSchema } from '../rollups.ts';
import type { Migration } from '../shared-rules.ts';
import {
  APPLY_OF_MIGRATION_12,
  APPLY_OF_MIGRATION_13,
  FUNCTIONS,
  LOCK_KEYS_THEN_PROJECTS,
} from './functions.ts';
import { RELEASED_FUNCTIONS as RELEASED, releasedDgApply } from './released-functions.ts';

/**
 * Versioned schema changes for PostgreSQL, applied in order at start. Several instances may start
 * at once: the runner holds a transaction-level advisory lock, so one applies and the others then
 * find nothing to do. Never edit a released step: add the next one. Amounts are bigint
 * micro-credits; times are bigint epoch milliseconds, as the Store interface speaks them.
 */
export const POSTGRES_MIGRATIONS: readonly Migration[] = [
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
  {
    version: 2,
    name: 'reserve, settle and release as one round trip each',
    // Each function is one statement, so one round trip and one implicit transaction: the key's
    // row is locked first (FOR UPDATE), then, in READ COMMITTED, every later statement of a
    // VOLATILE function takes a fresh snapshot and sees the reservations committed before the
    // lock was granted. The lock is held for the server-side work only, not for network trips.
    sql: `
      CREATE FUNCTION dg_reserve(p_key text, p_request text, p_amount bigint, p_at bigint, p_stale_before bigint)
      RETURNS TABLE (granted boolean, reservation bigint, available bigint)
      LANGUAGE plpgsql VOLATILE AS $fn$
      DECLARE
        v_credits bigint;
        v_held bigint;
      BEGIN
        SELECT k.credits_micro INTO v_credits FROM api_keys k WHERE k.id = p_key FOR UPDATE;
        IF NOT FOUND THEN
          RETURN QUERY SELECT false, NULL::bigint, 0::bigint;
          RETURN;
        END IF;
        IF v_credits IS NULL THEN
          RETURN QUERY SELECT true, NULL::bigint, NULL::bigint;
          RETURN;
        END IF;
        SELECT COALESCE(SUM(r.amount_micro), 0) INTO v_held FROM reservations r
        WHERE r.key_id = p_key AND r.created_at >= p_stale_before;
        IF v_credits - v_held < p_amount THEN
          RETURN QUERY SELECT false, NULL::bigint, GREATEST(0, v_credits - v_held);
          RETURN;
        END IF;
        RETURN QUERY INSERT INTO reservations (key_id, request_id, amount_micro, created_at)
          VALUES (p_key, p_request, p_amount, p_at)
          RETURNING true, reservations.id, v_credits - v_held - p_amount;
      END
      $fn$;

      CREATE FUNCTION dg_settle(
        p_reservation bigint, p_request text, p_key text, p_cost bigint, p_stale_before bigint,
        p_input integer, p_output integer, p_questions integer, p_status integer, p_elapsed integer, p_at bigint)
      RETURNS bigint
      LANGUAGE plpgsql VOLATILE AS $fn$
      DECLARE
        v_credits bigint;
        v_held bigint;
        v_debit bigint := p_cost;
      BEGIN
        SELECT k.credits_micro INTO v_credits FROM api_keys k WHERE k.id = p_key FOR UPDATE;
        IF p_reservation IS NOT NULL THEN
          -- The request id too: a reservation swept as stale must not take a newer one with it.
          DELETE FROM reservations r WHERE r.id = p_reservation AND r.request_id = p_request;
        END IF;
        IF v_credits IS NOT NULL THEN
          -- Never more than the key can still cover beside other live reservations; stale ones
          -- count nowhere (docs/http-api.md#credits).
          SELECT COALESCE(SUM(r.amount_micro), 0) INTO v_held FROM reservations r
          WHERE r.key_id = p_key AND r.created_at >= p_stale_before;
          v_debit := LEAST(p_cost, GREATEST(0, v_credits - v_held));
          UPDATE api_keys SET credits_micro = credits_micro - v_debit, last_used_at = p_at WHERE id = p_key;
        ELSE
          UPDATE api_keys SET last_used_at = p_at WHERE id = p_key;
        END IF;
        INSERT INTO usage_records (request_id, key_id, credits_micro, input_tokens, output_tokens, questions, status, elapsed_ms, at)
        VALUES (p_request, p_key, v_debit, p_input, p_output, p_questions, p_status, p_elapsed, p_at);
        RETURN v_debit;
      END
      $fn$;

      CREATE FUNCTION dg_release(
        p_reservation bigint, p_request text, p_key text,
        p_input integer, p_output integer, p_questions integer, p_status integer, p_elapsed integer, p_at bigint)
      RETURNS void
      LANGUAGE plpgsql VOLATILE AS $fn$
      BEGIN
        IF p_reservation IS NOT NULL THEN
          DELETE FROM reservations r WHERE r.id = p_reservation AND r.request_id = p_request;
        END IF;
        INSERT INTO usage_records (request_id, key_id, credits_micro, input_tokens, output_tokens, questions, status, elapsed_ms, at)
        VALUES (p_request, p_key, 0, p_input, p_output, p_questions, p_status, p_elapsed, p_at);
        UPDATE api_keys SET last_used_at = p_at WHERE id = p_key;
      END
      $fn$;
    `,
  },
  {
    version: 3,
    name: 'routes, the decision cache and browser tokens on keys, reservations and usage records',
    // A token belongs to one key, whose row reserve and settle lock first: its cap is checked and
    // charged under that lock, so it is exact under any concurrency and across instances. The
    // usage-writing functions gain the new columns; the old signatures go, so no caller can write
    // a record without them.
    sql: `
      ALTER TABLE api_keys ADD COLUMN route text;
      ALTER TABLE usage_records ADD COLUMN route text, ADD COLUMN upstream text,
        ADD COLUMN cached boolean NOT NULL DEFAULT false;

      CREATE TABLE tokens (
        id text PRIMARY KEY,
        key_id text NOT NULL REFERENCES api_keys(id),
        hash text NOT NULL UNIQUE,
        expires_at bigint NOT NULL,
        max_credits_micro bigint CHECK (max_credits_micro IS NULL OR max_credits_micro > 0),
        origins text,
        subject text,
        rate_limit_per_minute integer,
        route text,
        created_at bigint NOT NULL
      );
      ALTER TABLE reservations ADD COLUMN token_id text;
      CREATE INDEX reservations_token ON reservations (token_id) WHERE token_id IS NOT NULL;
      ALTER TABLE usage_records ADD COLUMN token_id text, ADD COLUMN subject text;
      CREATE INDEX usage_records_token ON usage_records (token_id) WHERE token_id IS NOT NULL;

      DROP FUNCTION dg_reserve(text, text, bigint, bigint, bigint);
      DROP FUNCTION dg_settle(bigint, text, text, bigint, bigint, integer, integer, integer, integer, integer, bigint);
      DROP FUNCTION dg_release(bigint, text, text, integer, integer, integer, integer, integer, bigint);

      -- What a capped token can still spend beside its live reservations; NULL when uncapped.
${RELEASED.dg_token_left}

      CREATE FUNCTION dg_reserve(p_key text, p_request text, p_amount bigint, p_at bigint, p_stale_before bigint, p_token text)
      RETURNS TABLE (granted boolean, reservation bigint, available bigint)
      LANGUAGE plpgsql VOLATILE AS $fn$
      DECLARE
        v_credits bigint;
        v_held bigint;
        v_token_left bigint;
        v_available bigint;
      BEGIN
        SELECT k.credits_micro INTO v_credits FROM api_keys k WHERE k.id = p_key FOR UPDATE;
        IF NOT FOUND THEN
          RETURN QUERY SELECT false, NULL::bigint, 0::bigint;
          RETURN;
        END IF;
        IF p_token IS NOT NULL THEN
          v_token_left := dg_token_left(p_token, p_stale_before);
        END IF;
        IF v_credits IS NULL AND v_token_left IS NULL THEN
          RETURN QUERY SELECT true, NULL::bigint, NULL::bigint;
          RETURN;
        END IF;
        IF v_credits IS NOT NULL THEN
          SELECT COALESCE(SUM(r.amount_micro), 0) INTO v_held FROM reservations r
          WHERE r.key_id = p_key AND r.created_at >= p_stale_before;
          v_available := v_credits - v_held;
        END IF;
        v_available := LEAST(v_available, v_token_left);
        IF v_available < p_amount THEN
          RETURN QUERY SELECT false, NULL::bigint, GREATEST(0, v_available);
          RETURN;
        END IF;
        RETURN QUERY INSERT INTO reservations (key_id, request_id, amount_micro, created_at, token_id)
          VALUES (p_key, p_request, p_amount, p_at, p_token)
          RETURNING true, reservations.id, v_available - p_amount;
      END
      $fn$;

      CREATE FUNCTION dg_settle(
        p_reservation bigint, p_request text, p_key text, p_cost bigint, p_stale_before bigint,
        p_input integer, p_output integer, p_questions integer, p_status integer, p_elapsed integer, p_at bigint,
        p_route text, p_upstream text, p_cached boolean, p_token text, p_subject text)
      RETURNS bigint
      LANGUAGE plpgsql VOLATILE AS $fn$
      DECLARE
        v_credits bigint;
        v_held bigint;
        v_debit bigint := p_cost;
        v_token_left bigint;
      BEGIN
        SELECT k.credits_micro INTO v_credits FROM api_keys k WHERE k.id = p_key FOR UPDATE;
        IF p_reservation IS NOT NULL THEN
          DELETE FROM reservations r WHERE r.id = p_reservation AND r.request_id = p_request;
        END IF;
        IF p_token IS NOT NULL THEN
          v_token_left := dg_token_left(p_token, p_stale_before);
          IF v_token_left IS NOT NULL THEN
            v_debit := LEAST(v_debit, GREATEST(0, v_token_left));
          END IF;
        END IF;
        IF v_credits IS NOT NULL THEN
          SELECT COALESCE(SUM(r.amount_micro), 0) INTO v_held FROM reservations r
          WHERE r.key_id = p_key AND r.created_at >= p_stale_before;
          v_debit := LEAST(v_debit, GREATEST(0, v_credits - v_held));
          UPDATE api_keys SET credits_micro = credits_micro - v_debit, last_used_at = p_at WHERE id = p_key;
        ELSE
          UPDATE api_keys SET last_used_at = p_at WHERE id = p_key;
        END IF;
        INSERT INTO usage_records (request_id, key_id, credits_micro, input_tokens, output_tokens, questions, status,
                                   elapsed_ms, at, route, upstream, cached, token_id, subject)
        VALUES (p_request, p_key, v_debit, p_input, p_output, p_questions, p_status, p_elapsed, p_at,
                p_route, p_upstream, p_cached, p_token, p_subject);
        RETURN v_debit;
      END
      $fn$;

      CREATE FUNCTION dg_release(
        p_reservation bigint, p_request text, p_key text,
        p_input integer, p_output integer, p_questions integer, p_status integer, p_elapsed integer, p_at bigint,
        p_route text, p_upstream text, p_cached boolean, p_token text, p_subject text)
      RETURNS void
      LANGUAGE plpgsql VOLATILE AS $fn$
      BEGIN
        IF p_reservation IS NOT NULL THEN
          DELETE FROM reservations r WHERE r.id = p_reservation AND r.request_id = p_request;
        END IF;
        INSERT INTO usage_records (request_id, key_id, credits_micro, input_tokens, output_tokens, questions, status,
                                   elapsed_ms, at, route, upstream, cached, token_id, subject)
        VALUES (p_request, p_key, 0, p_input, p_output, p_questions, p_status, p_elapsed, p_at,
                p_route, p_upstream, p_cached, p_token, p_subject);
        UPDATE api_keys SET last_used_at = p_at WHERE id = p_key;
      END
      $fn$;
    `,
  },
  {
    version: 4,
    name: 'one lock order, idempotent steps, keys re-checked at reserve, and batches of steps',
    // Every step locks its key's row first, before any other row: dg_release used to insert its
    // usage record (a key-share lock on the key's row, through the foreign key) before updating
    // that row, while reserve and settle locked it first, and PostgreSQL found deadlocks between
    // them. The dg_step_* functions hold each step's logic once and expect the key's row to be
    // locked already, so that, the lock granted, every statement of theirs sees what was
    // committed before it; dg_reserve, dg_settle and dg_release lock, then run a step (for
    // callers one at a time). dg_apply runs many steps in one statement and one commit, locking
    // all their keys first, in id order, so batches from any number of instances never wait on
    // each other in a cycle. A step asked again for the same request (a retry after a lost
    // connection) finds what the first did, so the store may retry any step safely.
    sql: `
      CREATE INDEX usage_records_request ON usage_records (request_id);

${RELEASED.dg_step_reserve}

${RELEASED.dg_step_settle}

${RELEASED.dg_step_release}

      DROP FUNCTION dg_reserve(text, text, bigint, bigint, bigint, text);
${RELEASED.dg_reserve}

${RELEASED.dg_settle}

${RELEASED.dg_release}

      -- Steps are {op: reserve | settle | release, deadline, …their arguments}; one row per step,
      -- in order. A step that reaches the database after its deadline (epoch ms) does nothing and
      -- says 'late': its caller has given up and answered 503, so nothing may be held or charged
      -- for it (a settle arriving late would charge a failed request).
${releasedDgApply(false)}    `,
  },
  {
    version: 5,
    name: 'usage rollups, written with each record',
    // The rollups of docs/usage.md. A trigger catches each record in the transaction
    // that writes it: inside dg_apply it notes it for the batch, summed once per row at the batch's
    // end (dg_flush_rollups); elsewhere it upserts its rows itself. So every instance counts every
    // record exactly once. All keys share the rows of usage_totals: every writer takes them day,
    // hour, minute, so writers on other keys queue there rather than deadlock. Records already here are
    // folded in the background (usage/maintenance.ts) from next_id to last_id, a batch per
    // transaction that also moves next_id under its row lock; a record changed before it is
    // folded is left to the fold.
    sql: `
      ${rollupSchema('postgres')}

      -- A batch of dg_apply sums its records once per rollup row (dg_flush_rollups): while it
      -- runs (dg.batch on) the trigger only notes each record, with its sign and its transaction,
      -- in dg_pending_rollups. Its rows live within their transaction, so it needs no WAL (UNLOGGED).
      CREATE UNLOGGED TABLE dg_pending_rollups (
        tx bigint NOT NULL DEFAULT txid_current(),
        key_id text, at bigint, route text, upstream text, cached boolean, status integer,
        credits_micro bigint, input_tokens integer, output_tokens integer, elapsed_ms integer, sign integer
      );
      CREATE INDEX dg_pending_rollups_tx ON dg_pending_rollups (tx);
${RELEASED.dg_flush_rollups}

${RELEASED.dg_rollup_record}
      CREATE TRIGGER usage_rollup_insert AFTER INSERT ON usage_records
        FOR EACH ROW EXECUTE FUNCTION dg_rollup_record();
      CREATE TRIGGER usage_rollup_update AFTER UPDATE OF credits_micro, status ON usage_records
        FOR EACH ROW EXECUTE FUNCTION dg_rollup_record();
    `,
  },
  {
    version: 6,
    name: 'decision records and their outcomes',
    // docs/outcomes.md. A settle (or a cache hit's record) may carry its decision:
    // dg_apply keeps it in the same statement as the usage record, so a caller who has the answer
    // can report its outcome at once, and a decision exists only for a request that succeeded.
    sql: `
      ${decisionTables('postgres')}

${RELEASED.dg_keep_decision}

${RELEASED.dg_apply}    `,
  },
  {
    version: 7,
    name: 'projects and budgets',
    // docs/budgets.md. A budget row also holds its holder's spend in its current window
    // (window_start, spent_micro), moved by each settle that debits: a new window starts from 0
    // by arithmetic, with no job, and the request path never sums usage records. The steps take
    // the windows' starts from the gateway (budgets/windows.ts), so the calendar has one rule.
    // dg_apply locks a batch's projects after its keys and answers each step's budget events;
    // the one-step wrappers of migration 4 had no caller left and go.
    sql: `
      CREATE TABLE projects (
        id text PRIMARY KEY,
        name text NOT NULL,
        created_at bigint NOT NULL
      );
      ALTER TABLE api_keys ADD COLUMN project_id text REFERENCES projects(id);
      CREATE INDEX api_keys_project ON api_keys (project_id);
      CREATE TABLE budgets (
        holder text NOT NULL,
        holder_kind text NOT NULL CHECK (holder_kind IN ('key', 'project')),
        period text NOT NULL CHECK (period IN ('minute', 'hour', 'day', 'week', 'month')),
        limit_micro bigint NOT NULL CHECK (limit_micro > 0),
        mode text NOT NULL CHECK (mode IN ('hard', 'soft')),
        window_start bigint NOT NULL,
        spent_micro bigint NOT NULL CHECK (spent_micro >= 0),
        PRIMARY KEY (holder, period)
      );

      DROP FUNCTION dg_apply(jsonb);
      DROP FUNCTION dg_reserve(text, text, bigint, bigint, bigint, text);
      DROP FUNCTION dg_settle(bigint, text, text, bigint, bigint, integer, integer, integer, integer, integer, bigint, text, text, boolean, text, text);
      DROP FUNCTION dg_release(bigint, text, text, integer, integer, integer, integer, integer, bigint, text, text, boolean, text, text);
      DROP FUNCTION dg_step_reserve(text, text, bigint, bigint, bigint, text);
      DROP FUNCTION dg_step_settle(bigint, text, text, bigint, bigint, integer, integer, integer, integer, integer, bigint, text, text, boolean, text, text);
      DROP FUNCTION dg_step_release(bigint, text, text, integer, integer, integer, integer, integer, bigint, text, text, boolean, text, text);

${FUNCTIONS.dg_project_held}

${FUNCTIONS.dg_step_reserve}

${settleOfMigration7()}

${FUNCTIONS.dg_step_release}

${releasedApplyWithEvents(7)}
    `,
  },
  {
    version: 8,
    name: 'calibration maps, review items and where each outcome came from',
    // docs/calibration-maps.md and docs/review.md: fits and review items are written off the
    // request path; an outcome's source tells a reviewer's truth from a caller's.
    sql: `
      ${learningTables('postgres')}
    `,
  },
  {
    version: 9,
    name: 'a settle skips the budget checks of a key and project that have none',
    // The two budget loops and the spend update cost a settle about half its time in PostgreSQL
    // even with no budget to find (docs/scaling-out.md); one EXISTS, read with the key, skips them.
    sql: `
${FUNCTIONS.dg_step_settle}
    `,
  },
  {
    version: 10,
    name: 'a batch of steps plans its statements once',
    // docs/scaling-out.md: PostgreSQL planned some of the steps' statements anew at every call.
    sql: `
${releasedApplyWithEvents(10)}
    `,
  },
  {
    version: 11,
    name: 'a batch sums rollups only when it wrote usage records, a batch of one step not at all',
    // docs/scaling-out.md: alone (c=1) every request paid for summing rollups twice, its
    // reserve's batch with nothing to sum and its settle's with one record to sum.
    sql: `
${releasedApplyWithEvents(11)}
    `,
  },
  {
    version: 12,
    name: 'a batch of one step locks its key and project by their ids',
    // docs/scaling-out.md: at c=1 the set-based lock statements were a third of dg_apply's own time.
    sql: `
${APPLY_OF_MIGRATION_12}
    `,
  },
  {
    version: 13,
    name: 'a batch of reserves only commits without waiting for the disk',
    // docs/scaling-out.md: alone (c=1) a request waited for two flushes of the WAL, its reserve's
    // and its settle's; a hold the settle finds missing is charged as a stale one is.
    sql: `
${APPLY_OF_MIGRATION_13}
    `,
  },
  {
    version: 14,
    name: 'a batch settles the plain settles of its keys all at once',
    // docs/scaling-out.md, "Settles in bulk": each settle had cost a function call, five
    // statements and a second call for its decision, the most of PostgreSQL's time a request.
    sql: `
${FUNCTIONS.dg_apply}
    `,
  },
];

/** `dg_step_settle` as migration 7 released it, word for word (migrations.test.ts pins it). */
function settleOfMigration7(): string {
  return `CREATE OR REPLACE FUNCTION dg_step_settle(
  p_reservation bigint, p_request text, p_key text, p_cost bigint, p_stale_before bigint,
  p_input integer, p_output integer, p_questions integer, p_status integer, p_elapsed integer, p_at bigint,
  p_route text, p_upstream text, p_cached boolean, p_token text, p_subject text, p_starts jsonb)
RETURNS TABLE (debit bigint, events jsonb)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  v_credits bigint;
  v_project text;
  v_held bigint;
  v_debit bigint := p_cost;
  v_token_left bigint;
  v_reserved bigint;
  v_recorded bigint;
  v_events jsonb := '[]'::jsonb;
  v_b record;
  v_room bigint;
BEGIN
  IF p_reservation IS NOT NULL THEN
    DELETE FROM reservations r WHERE r.id = p_reservation AND r.request_id = p_request
    RETURNING r.amount_micro INTO v_reserved;
  END IF;
  -- A hold still there means no settle or release has run for the request; without one
  -- (an unlimited key, a retry, a hold swept as stale) the usage records say.
  IF v_reserved IS NULL THEN
    SELECT u.credits_micro INTO v_recorded FROM usage_records u WHERE u.request_id = p_request AND u.key_id = p_key;
    IF FOUND THEN
      RETURN QUERY SELECT v_recorded, v_events;
      RETURN;
    END IF;
  ELSE
    -- Never more than was reserved (docs/http-api.md#credits).
    v_debit := LEAST(v_debit, v_reserved);
  END IF;
  IF p_token IS NOT NULL THEN
    v_token_left := dg_token_left(p_token, p_stale_before);
    IF v_token_left IS NOT NULL THEN
      v_debit := LEAST(v_debit, GREATEST(0, v_token_left));
    END IF;
  END IF;
  SELECT k.credits_micro, k.project_id,
         (SELECT COALESCE(SUM(r.amount_micro), 0) FROM reservations r
          WHERE r.key_id = p_key AND r.created_at >= p_stale_before)
  INTO v_credits, v_project, v_held FROM api_keys k WHERE k.id = p_key;
  -- Never more than the key can still cover beside other live holds; stale ones count nowhere.
  IF v_credits IS NOT NULL THEN
    v_debit := LEAST(v_debit, GREATEST(0, v_credits - v_held));
  END IF;
  -- Nor than a hard budget can still take beside its holder's other live holds (docs/budgets.md).
  FOR v_b IN SELECT b.holder, b.holder_kind, b.period, b.limit_micro, CASE WHEN b.window_start = (p_starts->>b.period)::bigint THEN b.spent_micro ELSE 0 END AS spent
             FROM budgets b WHERE (b.holder = p_key OR b.holder = v_project) AND b.mode = 'hard' LOOP
    v_room := GREATEST(0, v_b.limit_micro - v_b.spent
      - CASE WHEN v_b.holder_kind = 'key' THEN v_held ELSE dg_project_held(v_b.holder, p_stale_before) END);
    IF v_debit > v_room THEN
      v_events := v_events || jsonb_build_array(jsonb_build_object('kind', 'capped', 'holder', v_b.holder,
        'holderKind', v_b.holder_kind, 'window', v_b.period, 'excess', v_debit - v_room));
      v_debit := v_room;
    END IF;
  END LOOP;
  IF v_debit > 0 THEN
    -- A soft budget's spend crossing 80% or 100% of its limit (spend only grows within a window).
    FOR v_b IN SELECT b.holder, b.holder_kind, b.period, b.limit_micro, CASE WHEN b.window_start = (p_starts->>b.period)::bigint THEN b.spent_micro ELSE 0 END AS spent
               FROM budgets b WHERE (b.holder = p_key OR b.holder = v_project) AND b.mode = 'soft' LOOP
      IF v_b.spent * 5 < v_b.limit_micro * 4 AND (v_b.spent + v_debit) * 5 >= v_b.limit_micro * 4 THEN
        v_events := v_events || jsonb_build_array(jsonb_build_object('kind', 'crossing', 'holder', v_b.holder,
          'holderKind', v_b.holder_kind, 'window', v_b.period, 'threshold', 0.8));
      END IF;
      IF v_b.spent < v_b.limit_micro AND v_b.spent + v_debit >= v_b.limit_micro THEN
        v_events := v_events || jsonb_build_array(jsonb_build_object('kind', 'crossing', 'holder', v_b.holder,
          'holderKind', v_b.holder_kind, 'window', v_b.period, 'threshold', 1));
      END IF;
    END LOOP;
    -- Every budget's window counts the debit: a later window starts again from it.
    UPDATE budgets b SET
      spent_micro = CASE WHEN b.window_start = (p_starts->>b.period)::bigint THEN b.spent_micro + v_debit
                         WHEN b.window_start < (p_starts->>b.period)::bigint THEN v_debit ELSE b.spent_micro END,
      window_start = GREATEST(b.window_start, (p_starts->>b.period)::bigint)
    WHERE (b.holder = p_key OR b.holder = v_project);
  END IF;
  WITH debited AS (
    UPDATE api_keys SET credits_micro = credits_micro - v_debit, last_used_at = p_at WHERE id = p_key)
  INSERT INTO usage_records (request_id, key_id, credits_micro, input_tokens, output_tokens, questions, status,
                             elapsed_ms, at, route, upstream, cached, token_id, subject)
  VALUES (p_request, p_key, v_debit, p_input, p_output, p_questions, p_status, p_elapsed, p_at,
          p_route, p_upstream, p_cached, p_token, p_subject);
  RETURN QUERY SELECT v_debit, v_events;
END
$fn$;`;
}

/**
 * `dg_apply` as migrations 7, 10 and 11 released it, word for word (migrations.test.ts pins each):
 * migration 10 only made its plans generic; 11 batched and summed rollups only where a batch of
 * several steps wrote usage records.
 */
function releasedApplyWithEvents(migration: 7 | 10 | 11): string {
  const recorded = migration === 11;
  return `${migration === 7 ? 'CREATE' : 'CREATE OR REPLACE'} FUNCTION dg_apply(p_steps jsonb)
      RETURNS TABLE (step integer, granted boolean, reservation bigint, available bigint, debit bigint, refused text, events jsonb)
      LANGUAGE plpgsql VOLATILE${migration === 7 ? '' : ' SET plan_cache_mode = force_generic_plan'} AS $fn$
      DECLARE
        v_step jsonb;
        v_i integer;
        v_r record;${recorded ? '\n        v_recorded boolean := false;\n        v_batched boolean := jsonb_array_length(p_steps) > 1;' : ''}
      BEGIN
        ${recorded ? "IF v_batched THEN PERFORM set_config('dg.batch', 'on', true); END IF;" : "PERFORM set_config('dg.batch', 'on', true);"}
        ${LOCK_KEYS_THEN_PROJECTS}
        FOR v_step, v_i IN SELECT s.value, (s.ordinality - 1)::integer FROM jsonb_array_elements(p_steps) WITH ORDINALITY s
        LOOP
          IF (extract(epoch FROM clock_timestamp()) * 1000)::bigint > (v_step->>'deadline')::bigint THEN
            RETURN QUERY SELECT v_i, false, NULL::bigint, NULL::bigint, NULL::bigint, 'late'::text, NULL::jsonb;
          ELSIF v_step->>'op' = 'reserve' THEN
            SELECT * INTO v_r FROM dg_step_reserve(v_step->>'key', v_step->>'request', (v_step->>'amount')::bigint,
              (v_step->>'at')::bigint, (v_step->>'staleBefore')::bigint, v_step->>'token', v_step->'starts');
            RETURN QUERY SELECT v_i, v_r.granted, v_r.reservation, v_r.available, NULL::bigint, v_r.refused, v_r.exceeded;
          ELSIF v_step->>'op' = 'settle' THEN
            SELECT * INTO v_r FROM dg_step_settle((v_step->>'reservation')::bigint, v_step->>'request', v_step->>'key',
                (v_step->>'cost')::bigint, (v_step->>'staleBefore')::bigint, (v_step->>'input')::integer,
                (v_step->>'output')::integer, (v_step->>'questions')::integer, (v_step->>'status')::integer,
                (v_step->>'elapsed')::integer, (v_step->>'at')::bigint, v_step->>'route', v_step->>'upstream',
                (v_step->>'cached')::boolean, v_step->>'token', v_step->>'subject', v_step->'starts');
            PERFORM dg_keep_decision(v_step);${recorded ? '\n            v_recorded := true;' : ''}
            RETURN QUERY SELECT v_i, true, NULL::bigint, NULL::bigint, v_r.debit, NULL::text, v_r.events;
          ELSIF v_step->>'op' = 'release' THEN
            PERFORM dg_step_release((v_step->>'reservation')::bigint, v_step->>'request', v_step->>'key',
              (v_step->>'input')::integer, (v_step->>'output')::integer, (v_step->>'questions')::integer,
              (v_step->>'status')::integer, (v_step->>'elapsed')::integer, (v_step->>'at')::bigint,
              v_step->>'route', v_step->>'upstream', (v_step->>'cached')::boolean, v_step->>'token', v_step->>'subject',
              v_step->'starts');
            PERFORM dg_keep_decision(v_step);${recorded ? '\n            v_recorded := true;' : ''}
            RETURN QUERY SELECT v_i, true, NULL::bigint, NULL::bigint, 0::bigint, NULL::text, NULL::jsonb;
          ELSE
            RAISE EXCEPTION 'dg_apply: unknown step %', v_step->>'op';
          END IF;
        END LOOP;
        ${recorded ? "IF v_recorded AND v_batched THEN PERFORM dg_flush_rollups(); ELSIF v_batched THEN PERFORM set_config('dg.batch', 'off', true); END IF;" : 'PERFORM dg_flush_rollups();'}
      END
      $fn$;`;
}
