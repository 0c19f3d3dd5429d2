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

/**
 * Migration 14's first pass over a batch (see `dgApply`). A key is plain in the batch when nothing
 * in it can take the key to a limit: no browser token on any of its steps, no budget on its project,
 * its credits (if capped) cover every live hold and every reserve of the batch at once, and so
 * does every hard budget of the key beside what it has spent this window; no soft budget of the
 * key would reach 80 % with every settle's full cost; and all its steps fall in the same windows.
 * Its holds are summed from the earliest `staleBefore` of its steps, so they are never fewer than
 * any one step counts, and each settle's own hold counts among them. Then a settle's cap (what the
 * key or a budget can cover beside its other holds) is at least its own hold, whatever settles
 * before it, no settle crosses a soft budget's threshold (so none has an event to tell), and each
 * reserve is granted as it would have been, though the `available` it answers (read only on a
 * refusal) may count settles that came after it.
 *
 * Only a key whose settles all find their holds goes in bulk, and none with a release in the batch:
 * the loop's steps of a bulk key are then reserves, which leave `last_used_at` alone, so its last
 * settle in the batch's order sets it last, as one at a time. A settle asked again (its hold gone)
 * or one whose hold was lost goes to the loop with the rest of its key's steps. A settle late at
 * this point is left to the loop, which answers it `late` and writes nothing. A bulk key's budgets
 * take the sum of its debits once, as each settle would have added its own.
 */
const PLAIN_SETTLES = `
          SELECT array_agg(b.key) INTO v_plain
          FROM (SELECT s.key, bool_and(s.token IS NULL) AS tokenless,
                       COALESCE(SUM(s.amount) FILTER (WHERE s.op = 'reserve'), 0) AS reserving,
                       COALESCE(SUM(s.cost) FILTER (WHERE s.op = 'settle'), 0) AS settling,
                       MIN(s."staleBefore") AS stale_before,
                       count(DISTINCT s.starts) = 1 AS one_window, (array_agg(s.starts))[1] AS starts
                FROM jsonb_to_recordset(p_steps)
                  AS s(op text, key text, token text, amount bigint, cost bigint, "staleBefore" bigint,
                       reservation bigint, starts jsonb)
                GROUP BY 1
                HAVING bool_or(s.op = 'settle') AND NOT bool_or(s.op = 'release')
                   AND bool_and(s.op <> 'settle' OR s.reservation IS NOT NULL)) b
          JOIN api_keys k ON k.id = b.key
          CROSS JOIN LATERAL (SELECT COALESCE(SUM(r.amount_micro), 0) AS held FROM reservations r
                              WHERE r.key_id = k.id AND r.created_at >= b.stale_before) h
          WHERE b.tokenless
            AND NOT EXISTS (SELECT 1 FROM budgets bu WHERE bu.holder = k.project_id)
            AND (k.credits_micro IS NULL OR k.credits_micro - b.reserving >= h.held)
            AND NOT EXISTS (
              SELECT 1 FROM budgets bu
              CROSS JOIN LATERAL (SELECT CASE WHEN bu.window_start = (b.starts->>bu.period)::bigint
                                              THEN bu.spent_micro ELSE 0 END AS spent) w
              WHERE bu.holder = k.id
                AND (NOT b.one_window
                     OR (bu.mode = 'hard' AND bu.limit_micro - w.spent - b.reserving < h.held)
                     OR (bu.mode = 'soft' AND (w.spent + b.settling) * 5 >= bu.limit_micro * 4)));
          IF v_plain IS NOT NULL THEN
            WITH settles AS (
              SELECT s.*, (s.n - 1)::integer AS i
              FROM ROWS FROM (jsonb_to_recordset(p_steps) AS (op text, key text, request text, reservation bigint,
                     cost bigint, input integer, output integer, questions integer, status integer, elapsed integer,
                     at bigint, route text, upstream text, cached boolean, subject text, deadline bigint, decision jsonb,
                     starts jsonb))
                WITH ORDINALITY AS s(op, key, request, reservation, cost, input, output, questions, status, elapsed, at,
                                     route, upstream, cached, subject, deadline, decision, starts, n)
              WHERE s.op = 'settle' AND s.key = ANY(v_plain)
                AND s.deadline >= (extract(epoch FROM clock_timestamp()) * 1000)::bigint),
            found AS (
              SELECT s.*, r.id AS hold FROM settles s
              LEFT JOIN reservations r ON r.id = s.reservation AND r.request_id = s.request),
            whole AS (
              SELECT f.key FROM found f GROUP BY 1
              HAVING bool_and(f.hold IS NOT NULL) AND count(DISTINCT f.hold) = count(*)),
            held AS (
              DELETE FROM reservations r USING found f
              WHERE r.id = f.hold AND f.key IN (SELECT w.key FROM whole w)
              RETURNING f.*, LEAST(f.cost, r.amount_micro) AS debit),
            debited AS (
              UPDATE api_keys k SET credits_micro = k.credits_micro - d.total, last_used_at = d.at
              FROM (SELECT h.key, SUM(h.debit) AS total, (array_agg(h.at ORDER BY h.i DESC))[1] AS at
                    FROM held h GROUP BY 1) d
              WHERE k.id = d.key),
            spent AS (
              UPDATE budgets bu SET
                spent_micro = CASE WHEN bu.window_start = (d.starts->>bu.period)::bigint THEN bu.spent_micro + d.total
                                   WHEN bu.window_start < (d.starts->>bu.period)::bigint THEN d.total
                                   ELSE bu.spent_micro END,
                window_start = GREATEST(bu.window_start, (d.starts->>bu.period)::bigint)
              FROM (SELECT h.key, SUM(h.debit) AS total, (array_agg(h.starts))[1] AS starts
                    FROM held h GROUP BY 1 HAVING SUM(h.debit) > 0) d
              WHERE bu.holder = d.key),
            recorded AS (
              INSERT INTO usage_records (request_id, key_id, credits_micro, input_tokens, output_tokens, questions,
                                         status, elapsed_ms, at, route, upstream, cached, token_id, subject)
              SELECT h.request, h.key, h.debit, h.input, h.output, h.questions, h.status, h.elapsed, h.at, h.route,
                     h.upstream, h.cached, NULL, h.subject
              FROM held h ORDER BY h.i),
            kept AS (
              INSERT INTO decision_records (request_id, key_id, route, at, reused, questions)
              SELECT h.request, h.key, h.route, h.at, h.decision->>'reused', h.decision->>'questions'
              FROM held h WHERE jsonb_typeof(h.decision) = 'object' ORDER BY h.i
              ON CONFLICT (request_id) DO NOTHING)
            SELECT array_agg(h.i), array_agg(h.debit) INTO v_settled, v_debits FROM held h;
            IF v_settled IS NOT NULL THEN
              v_recorded := true;
              RETURN QUERY SELECT d.i, true, NULL::bigint, NULL::bigint, d.debit, NULL::text, '[]'::jsonb
                FROM unnest(v_settled, v_debits) d(i, debit);
            END IF;
          END IF;`;

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
  // Plain settles: a batch settles those of its keys that nothing in it can take to a limit in a
  // few statements for all of them, before its other steps (docs/scaling-out.md, "Settles in bulk").
  dg_apply: dgApply(14),
} as const;

/**
 * `dg_apply` as migration 12 released it (migrations.test.ts pins that text), and as migrations 13
 * and 14 changed it.
 *
 * 13: a batch that wrote no usage record sets `synchronous_commit` off for its own transaction.
 * Holds are all such a batch writes. Should the server lose one that was never flushed (its crash
 * within a few hundred milliseconds), the request's settle still charges what the key and its
 * budgets can cover, as for a hold swept as stale, and writes its usage record with a commit that
 * waits, flushing every reserve before it too.
 *
 * 14: a batch of several steps first settles, all at once, the settles that find their hold and
 * whose key is plain in this batch (`PLAIN_SETTLES`: nothing in the batch can take it to a limit of
 * its credits or budgets). Then no step of that key can meet a limit in any order, so each settle
 * debits its cost up to its hold, exactly as one at a time, and each reserve is granted as it would
 * be; what the steps' functions spend on each settle alone (a call, five statements and a
 * decision's call) is spent once for the batch. The batch's other steps run one by one as before.
 */
function dgApply(migration: 12 | 13 | 14): string {
  const plainSettles = migration >= 14 ? PLAIN_SETTLES : '';
  const skipSettled =
    migration >= 14
      ? `
          IF v_settled IS NOT NULL AND v_i = ANY(v_settled) THEN
            CONTINUE;
          END IF;`
      : '';
  const settledVars =
    migration >= 14
      ? `
        v_plain text[];
        v_settled integer[];
        v_debits bigint[];`
      : '';
  const reservesOnly =
    migration >= 13
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
        v_project text;${settledVars}
      BEGIN
        IF v_batched THEN
          PERFORM set_config('dg.batch', 'on', true);
          ${LOCK_KEYS_THEN_PROJECTS}${plainSettles}
        ELSE
          SELECT k.project_id INTO v_project FROM api_keys k WHERE k.id = p_steps->0->>'key' FOR UPDATE;
          IF v_project IS NOT NULL THEN
            PERFORM 1 FROM projects p WHERE p.id = v_project FOR UPDATE;
          END IF;
        END IF;
        FOR v_step, v_i IN SELECT s.value, (s.ordinality - 1)::integer FROM jsonb_array_elements(p_steps) WITH ORDINALITY s
        LOOP${skipSettled}
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
/** `dg_apply` as migration 13 released it, word for word (migrations.test.ts pins it). */
export const APPLY_OF_MIGRATION_13 = dgApply(13);
