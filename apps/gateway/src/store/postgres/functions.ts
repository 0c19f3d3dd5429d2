import { RELEASED_FUNCTIONS } from './released-functions.ts';

/**
 * The current definition of every PostgreSQL function the store calls, in one place. Migrations
 * stay append-only: the migration that gave a function its current form loads it from here. To
 * change one, freeze its text where the migrations that loaded it can still read it (as
 * released-functions.ts holds migrations 1 to 6's), change it here and add a migration that
 * applies it again. postgres-store.test.ts checks that a migrated database holds exactly these.
 */

/** A condition on budget rows: those of the key and of its project (docs/budgets.md). */
const BUDGETS_OF = `(b.holder = p_key OR b.holder = v_project)`;
/** A budget row's spend in the current window, whose start the step carries (budgets/windows.ts). */
const SPENT_NOW = `CASE WHEN b.window_start = (p_starts->>b.period)::bigint THEN b.spent_micro ELSE 0 END`;

/**
 * How a batch of steps locks what it touches: every key of the batch, then every project of those
 * keys, each in id order, so batches from any number of instances never deadlock. Unchanged since
 * migration 7; the released `dg_apply` texts of migrations.ts read it too, and their checksums
 * (migrations.test.ts) pin it.
 */
export const LOCK_KEYS_THEN_PROJECTS = `PERFORM 1 FROM api_keys k
        WHERE k.id IN (SELECT DISTINCT s.value->>'key' FROM jsonb_array_elements(p_steps) s)
        ORDER BY k.id FOR UPDATE;
        PERFORM 1 FROM projects p
        WHERE p.id IN (SELECT k.project_id FROM api_keys k
                       WHERE k.id IN (SELECT DISTINCT s.value->>'key' FROM jsonb_array_elements(p_steps) s))
        ORDER BY p.id FOR UPDATE;`;

/** Functions not changed since migration 6 are its released texts; the others are defined here. */
export const FUNCTIONS = {
  // What a capped token can still spend beside its live reservations; NULL when uncapped.
  dg_token_left: RELEASED_FUNCTIONS.dg_token_left,

  // What the live holds of a project's keys hold.
  dg_project_held: `CREATE OR REPLACE FUNCTION dg_project_held(p_project text, p_stale_before bigint) RETURNS bigint
LANGUAGE sql STABLE AS $fn$
  SELECT COALESCE(SUM(r.amount_micro), 0)::bigint FROM reservations r JOIN api_keys k ON k.id = r.key_id
  WHERE k.project_id = p_project AND r.created_at >= p_stale_before
$fn$;`,

  dg_step_reserve: `CREATE OR REPLACE FUNCTION dg_step_reserve(p_key text, p_request text, p_amount bigint, p_at bigint, p_stale_before bigint, p_token text, p_starts jsonb)
RETURNS TABLE (granted boolean, reservation bigint, available bigint, refused text, exceeded jsonb)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  v_credits bigint;
  v_revoked bigint;
  v_expires bigint;
  v_project text;
  v_held bigint;
  v_existing bigint;
  v_token_expires bigint;
  v_token_left bigint;
  v_available bigint;
  v_budgeted boolean;
  v_exceeded jsonb;
BEGIN
  -- The key as it stands now (authentication may have read it from a cache), what its live
  -- holds hold, and this request's own hold if it has one, in one pass.
  SELECT k.credits_micro, k.revoked_at, k.expires_at, k.project_id, h.held, h.existing
  INTO v_credits, v_revoked, v_expires, v_project, v_held, v_existing
  FROM api_keys k, LATERAL (
    SELECT COALESCE(SUM(r.amount_micro) FILTER (WHERE r.created_at >= p_stale_before), 0) AS held,
           MIN(r.id) FILTER (WHERE r.request_id = p_request) AS existing
    FROM reservations r WHERE r.key_id = k.id) h
  WHERE k.id = p_key;
  IF NOT FOUND THEN
    RETURN QUERY SELECT false, NULL::bigint, 0::bigint, 'unknown'::text, NULL::jsonb;
    RETURN;
  END IF;
  IF v_revoked IS NOT NULL THEN
    RETURN QUERY SELECT false, NULL::bigint, 0::bigint, 'revoked'::text, NULL::jsonb;
    RETURN;
  END IF;
  IF v_expires IS NOT NULL AND v_expires <= p_at THEN
    RETURN QUERY SELECT false, NULL::bigint, 0::bigint, 'expired'::text, NULL::jsonb;
    RETURN;
  END IF;
  IF p_token IS NOT NULL THEN
    SELECT t.expires_at INTO v_token_expires FROM tokens t WHERE t.id = p_token;
    IF NOT FOUND OR v_token_expires <= p_at THEN
      RETURN QUERY SELECT false, NULL::bigint, 0::bigint, 'token_expired'::text, NULL::jsonb;
      RETURN;
    END IF;
  END IF;
  IF v_existing IS NOT NULL THEN
    RETURN QUERY SELECT true, v_existing, NULL::bigint, NULL::text, NULL::jsonb;
    RETURN;
  END IF;
  IF p_token IS NOT NULL THEN
    v_token_left := dg_token_left(p_token, p_stale_before);
  END IF;
  v_budgeted := EXISTS (SELECT 1 FROM budgets b WHERE ${BUDGETS_OF});
  -- Budgets need a hold even on an unlimited key: it is what the next request's check counts.
  IF v_credits IS NULL AND v_token_left IS NULL AND NOT v_budgeted THEN
    RETURN QUERY SELECT true, NULL::bigint, NULL::bigint, NULL::text, NULL::jsonb;
    RETURN;
  END IF;
  v_available := LEAST(v_credits - v_held, v_token_left);
  IF v_available < p_amount THEN
    RETURN QUERY SELECT false, NULL::bigint, GREATEST(0, v_available), NULL::text, NULL::jsonb;
    RETURN;
  END IF;
  -- Then the hard budgets of the key and of its project (docs/budgets.md: 40202 after 40200).
  IF v_budgeted THEN
    SELECT jsonb_agg(jsonb_build_object('holder', b.holder, 'holderKind', b.holder_kind, 'window', b.period))
    INTO v_exceeded
    FROM budgets b
    WHERE ${BUDGETS_OF} AND b.mode = 'hard'
      AND ${SPENT_NOW}
          + CASE WHEN b.holder_kind = 'key' THEN v_held ELSE dg_project_held(b.holder, p_stale_before) END
          + p_amount > b.limit_micro;
    IF v_exceeded IS NOT NULL THEN
      RETURN QUERY SELECT false, NULL::bigint, NULL::bigint, 'budget'::text, v_exceeded;
      RETURN;
    END IF;
  END IF;
  RETURN QUERY INSERT INTO reservations (key_id, request_id, amount_micro, created_at, token_id)
    VALUES (p_key, p_request, p_amount, p_at, p_token)
    RETURNING true, reservations.id, v_available - p_amount, NULL::text, NULL::jsonb;
END
$fn$;`,

  dg_step_settle: `CREATE OR REPLACE FUNCTION dg_step_settle(
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
  v_budgeted boolean;
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
          WHERE r.key_id = p_key AND r.created_at >= p_stale_before),
         EXISTS (SELECT 1 FROM budgets b WHERE b.holder = k.id OR b.holder = k.project_id)
  INTO v_credits, v_project, v_held, v_budgeted FROM api_keys k WHERE k.id = p_key;
  -- Never more than the key can still cover beside other live holds; stale ones count nowhere.
  IF v_credits IS NOT NULL THEN
    v_debit := LEAST(v_debit, GREATEST(0, v_credits - v_held));
  END IF;
  -- Budgets cost a settle half its time even when there are none to find (docs/scaling-out.md).
  IF v_budgeted THEN
    -- Nor than a hard budget can still take beside its holder's other live holds (docs/budgets.md).
    FOR v_b IN SELECT b.holder, b.holder_kind, b.period, b.limit_micro, ${SPENT_NOW} AS spent
               FROM budgets b WHERE ${BUDGETS_OF} AND b.mode = 'hard' LOOP
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
      FOR v_b IN SELECT b.holder, b.holder_kind, b.period, b.limit_micro, ${SPENT_NOW} AS spent
                 FROM budgets b WHERE ${BUDGETS_OF} AND b.mode = 'soft' LOOP
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
      WHERE ${BUDGETS_OF};
    END IF;
  END IF;
  WITH debited AS (
    UPDATE api_keys SET credits_micro = credits_micro - v_debit, last_used_at = p_at WHERE id = p_key)
  INSERT INTO usage_records (request_id, key_id, credits_micro, input_tokens, output_tokens, questions, status,
                             elapsed_ms, at, route, upstream, cached, token_id, subject)
  VALUES (p_request, p_key, v_debit, p_input, p_output, p_questions, p_status, p_elapsed, p_at,
          p_route, p_upstream, p_cached, p_token, p_subject);
  RETURN QUERY SELECT v_debit, v_events;
END
$fn$;`,

  dg_step_release: `CREATE OR REPLACE FUNCTION dg_step_release(
  p_reservation bigint, p_request text, p_key text,
  p_input integer, p_output integer, p_questions integer, p_status integer, p_elapsed integer, p_at bigint,
  p_route text, p_upstream text, p_cached boolean, p_token text, p_subject text, p_starts jsonb)
RETURNS void
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  v_held bigint;
  v_debit bigint;
  v_status integer;
  v_settled_at bigint;
  v_project text;
BEGIN
  IF p_reservation IS NOT NULL THEN
    DELETE FROM reservations r WHERE r.id = p_reservation AND r.request_id = p_request RETURNING r.id INTO v_held;
  END IF;
  -- No hold left: the request may have been recorded already.
  IF v_held IS NULL THEN
    SELECT u.credits_micro, u.status, u.at INTO v_debit, v_status, v_settled_at
    FROM usage_records u WHERE u.request_id = p_request AND u.key_id = p_key;
    IF FOUND THEN
      -- Settled, yet its caller was answered a failure (the settle's acknowledgement was
      -- lost with the connection): a failed request is never charged, so the debit is undone,
      -- and leaves the budget windows that counted it.
      IF v_status = 200 AND p_status <> 200 THEN
        UPDATE usage_records SET credits_micro = 0, status = p_status WHERE request_id = p_request AND key_id = p_key;
        UPDATE api_keys SET credits_micro = credits_micro + v_debit WHERE id = p_key RETURNING project_id INTO v_project;
        UPDATE budgets b SET spent_micro = GREATEST(0, b.spent_micro - v_debit)
        WHERE ${BUDGETS_OF} AND b.window_start = (p_starts->>b.period)::bigint AND v_settled_at >= b.window_start;
      END IF;
      RETURN;
    END IF;
    -- Without its id (a reserve whose answer was lost), the hold is found by the request.
    DELETE FROM reservations r WHERE r.key_id = p_key AND r.request_id = p_request;
  END IF;
  WITH touched AS (UPDATE api_keys SET last_used_at = p_at WHERE id = p_key)
  INSERT INTO usage_records (request_id, key_id, credits_micro, input_tokens, output_tokens, questions, status,
                             elapsed_ms, at, route, upstream, cached, token_id, subject)
  VALUES (p_request, p_key, 0, p_input, p_output, p_questions, p_status, p_elapsed, p_at,
          p_route, p_upstream, p_cached, p_token, p_subject);
END
$fn$;`,

  dg_flush_rollups: RELEASED_FUNCTIONS.dg_flush_rollups,

  dg_rollup_record: RELEASED_FUNCTIONS.dg_rollup_record,

  dg_keep_decision: RELEASED_FUNCTIONS.dg_keep_decision,

  // Many reserve, settle and release steps in one statement; a step that reaches the database
  // after its deadline does nothing and says 'late'. Settles and releases keep their decisions.
  // Locks: the keys of the batch, then their projects, each in id order, so batches from any
  // number of instances never deadlock (a project's budgets are shared by its keys). A batch of
  // one step locks its key and then its project by their ids, the same order in two lookups,
  // rather than through the set-based statements (a third of its own time at c=1).
  // Generic plans for everything it runs, the steps and triggers included: left to choose,
  // PostgreSQL planned the budget statements anew at every call, for plans no better.
  // Rollups: a batch of several steps sums its usage records once per rollup row at its end, and
  // only if it wrote any (reserves write none); a batch of one step (alone, c=1) leaves its one
  // record's rows to the record's trigger, two upserts rather than a pending row and three statements.
  // Durability: a batch that wrote no usage record (reserves only) commits without waiting for the
  // disk (docs/scaling-out.md, "What a reserve's commit waits for").
  dg_apply: dgApply(13),
} as const;

/**
 * `dg_apply` as migration 12 released it (migrations.test.ts pins that text), and as migration 13
 * changed it: a batch that wrote no usage record sets `synchronous_commit` off for its own
 * transaction. Holds are all such a batch writes. Should the server lose one that was never
 * flushed (its crash within a few hundred milliseconds), the request's settle still charges what
 * the key and its budgets can cover, as for a hold swept as stale, and writes its usage record
 * with a commit that waits, flushing every reserve before it too.
 */
function dgApply(migration: 12 | 13): string {
  const reservesOnly =
    migration === 13
      ? `
        IF NOT v_recorded THEN
          PERFORM set_config('synchronous_commit', 'off', true);
        END IF;`
      : '';
  return `CREATE OR REPLACE FUNCTION dg_apply(p_steps jsonb)
      RETURNS TABLE (step integer, granted boolean, reservation bigint, available bigint, debit bigint, refused text, events jsonb)
      LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan AS $fn$
      DECLARE
        v_step jsonb;
        v_i integer;
        v_r record;
        v_recorded boolean := false;
        v_batched boolean := jsonb_array_length(p_steps) > 1;
        v_project text;
      BEGIN
        IF v_batched THEN
          PERFORM set_config('dg.batch', 'on', true);
          ${LOCK_KEYS_THEN_PROJECTS}
        ELSE
          SELECT k.project_id INTO v_project FROM api_keys k WHERE k.id = p_steps->0->>'key' FOR UPDATE;
          IF v_project IS NOT NULL THEN
            PERFORM 1 FROM projects p WHERE p.id = v_project FOR UPDATE;
          END IF;
        END IF;
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
            PERFORM dg_keep_decision(v_step);
            v_recorded := true;
            RETURN QUERY SELECT v_i, true, NULL::bigint, NULL::bigint, v_r.debit, NULL::text, v_r.events;
          ELSIF v_step->>'op' = 'release' THEN
            PERFORM dg_step_release((v_step->>'reservation')::bigint, v_step->>'request', v_step->>'key',
              (v_step->>'input')::integer, (v_step->>'output')::integer, (v_step->>'questions')::integer,
              (v_step->>'status')::integer, (v_step->>'elapsed')::integer, (v_step->>'at')::bigint,
              v_step->>'route', v_step->>'upstream', (v_step->>'cached')::boolean, v_step->>'token', v_step->>'subject',
              v_step->'starts');
            PERFORM dg_keep_decision(v_step);
            v_recorded := true;
            RETURN QUERY SELECT v_i, true, NULL::bigint, NULL::bigint, 0::bigint, NULL::text, NULL::jsonb;
          ELSE
            RAISE EXCEPTION 'dg_apply: unknown step %', v_step->>'op';
          END IF;
        END LOOP;
        IF v_recorded AND v_batched THEN
          PERFORM dg_flush_rollups();
        ELSIF v_batched THEN
          PERFORM set_config('dg.batch', 'off', true);
        END IF;${reservesOnly}
      END
      $fn$;`;
}

/** `dg_apply` as migration 12 released it, word for word (migrations.test.ts pins it). */
export const APPLY_OF_MIGRATION_12 = dgApply(12);
