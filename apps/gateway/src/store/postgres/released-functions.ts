import { addRecordSql, PENDING_COLUMNS, pendingRollupsSql } from '../rollups.ts';

/**
 * The PostgreSQL functions as migrations 1 to 6 released them, kept word for word: a released
 * migration never changes (migrations.test.ts pins each). Never edit this file. The functions as
 * they are now live in functions.ts, applied by the migrations after 6.
 */

/**
 * `dg_apply`: many reserve, settle and release steps in one statement (migration 4); from migration
 * 6 on, a settle or a release that carries its decision keeps it too, and the batch's usage records
 * are summed into the rollups once per row at its end. Written once for both.
 */
export function releasedDgApply(keepsDecisions: boolean): string {
  return `      ${keepsDecisions ? 'CREATE OR REPLACE' : 'CREATE'} FUNCTION dg_apply(p_steps jsonb)
      RETURNS TABLE (step integer, granted boolean, reservation bigint, available bigint, debit bigint, refused text)
      LANGUAGE plpgsql VOLATILE AS $fn$
      DECLARE
        v_step jsonb;
        v_i integer;
        v_r record;
      BEGIN${keepsDecisions ? "\n        PERFORM set_config('dg.batch', 'on', true);" : ''}
        PERFORM 1 FROM api_keys k
        WHERE k.id IN (SELECT DISTINCT s.value->>'key' FROM jsonb_array_elements(p_steps) s)
        ORDER BY k.id FOR UPDATE;
        FOR v_step, v_i IN SELECT s.value, (s.ordinality - 1)::integer FROM jsonb_array_elements(p_steps) WITH ORDINALITY s
        LOOP
          IF (extract(epoch FROM clock_timestamp()) * 1000)::bigint > (v_step->>'deadline')::bigint THEN
            RETURN QUERY SELECT v_i, false, NULL::bigint, NULL::bigint, NULL::bigint, 'late'::text;
          ELSIF v_step->>'op' = 'reserve' THEN
            SELECT * INTO v_r FROM dg_step_reserve(v_step->>'key', v_step->>'request', (v_step->>'amount')::bigint,
              (v_step->>'at')::bigint, (v_step->>'staleBefore')::bigint, v_step->>'token');
            RETURN QUERY SELECT v_i, v_r.granted, v_r.reservation, v_r.available, NULL::bigint, v_r.refused;
          ELSIF v_step->>'op' = 'settle' THEN
            RETURN QUERY SELECT v_i, true, NULL::bigint, NULL::bigint,
              dg_step_settle((v_step->>'reservation')::bigint, v_step->>'request', v_step->>'key', (v_step->>'cost')::bigint,
                (v_step->>'staleBefore')::bigint, (v_step->>'input')::integer, (v_step->>'output')::integer,
                (v_step->>'questions')::integer, (v_step->>'status')::integer, (v_step->>'elapsed')::integer,
                (v_step->>'at')::bigint, v_step->>'route', v_step->>'upstream', (v_step->>'cached')::boolean,
                v_step->>'token', v_step->>'subject'),
              NULL::text;${keepsDecisions ? '\n            PERFORM dg_keep_decision(v_step);' : ''}
          ELSIF v_step->>'op' = 'release' THEN
            PERFORM dg_step_release((v_step->>'reservation')::bigint, v_step->>'request', v_step->>'key',
              (v_step->>'input')::integer, (v_step->>'output')::integer, (v_step->>'questions')::integer,
              (v_step->>'status')::integer, (v_step->>'elapsed')::integer, (v_step->>'at')::bigint,
              v_step->>'route', v_step->>'upstream', (v_step->>'cached')::boolean, v_step->>'token', v_step->>'subject');
            ${keepsDecisions ? 'PERFORM dg_keep_decision(v_step);\n            ' : ''}RETURN QUERY SELECT v_i, true, NULL::bigint, NULL::bigint, 0::bigint, NULL::text;
          ELSE
            RAISE EXCEPTION 'dg_apply: unknown step %', v_step->>'op';
          END IF;
        END LOOP;${keepsDecisions ? '\n        PERFORM dg_flush_rollups();' : ''}
      END
      $fn$;
`;
}

export const RELEASED_FUNCTIONS = {
  // What a capped token can still spend beside its live reservations; NULL when uncapped.
  dg_token_left: `CREATE OR REPLACE FUNCTION dg_token_left(p_token text, p_stale_before bigint) RETURNS bigint
LANGUAGE sql STABLE AS $fn$
  SELECT t.max_credits_micro
         - (SELECT COALESCE(SUM(u.credits_micro), 0) FROM usage_records u WHERE u.token_id = p_token)
         - (SELECT COALESCE(SUM(r.amount_micro), 0) FROM reservations r
            WHERE r.token_id = p_token AND r.created_at >= p_stale_before)
  FROM tokens t WHERE t.id = p_token
$fn$;`,

  dg_step_reserve: `CREATE OR REPLACE FUNCTION dg_step_reserve(p_key text, p_request text, p_amount bigint, p_at bigint, p_stale_before bigint, p_token text)
RETURNS TABLE (granted boolean, reservation bigint, available bigint, refused text)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  v_credits bigint;
  v_revoked bigint;
  v_expires bigint;
  v_held bigint;
  v_existing bigint;
  v_token_expires bigint;
  v_token_left bigint;
  v_available bigint;
BEGIN
  -- The key as it stands now (authentication may have read it from a cache), what its live
  -- holds hold, and this request's own hold if it has one, in one pass.
  SELECT k.credits_micro, k.revoked_at, k.expires_at, h.held, h.existing
  INTO v_credits, v_revoked, v_expires, v_held, v_existing
  FROM api_keys k, LATERAL (
    SELECT COALESCE(SUM(r.amount_micro) FILTER (WHERE r.created_at >= p_stale_before), 0) AS held,
           MIN(r.id) FILTER (WHERE r.request_id = p_request) AS existing
    FROM reservations r WHERE r.key_id = k.id) h
  WHERE k.id = p_key;
  IF NOT FOUND THEN
    RETURN QUERY SELECT false, NULL::bigint, 0::bigint, 'unknown'::text;
    RETURN;
  END IF;
  IF v_revoked IS NOT NULL THEN
    RETURN QUERY SELECT false, NULL::bigint, 0::bigint, 'revoked'::text;
    RETURN;
  END IF;
  IF v_expires IS NOT NULL AND v_expires <= p_at THEN
    RETURN QUERY SELECT false, NULL::bigint, 0::bigint, 'expired'::text;
    RETURN;
  END IF;
  IF p_token IS NOT NULL THEN
    SELECT t.expires_at INTO v_token_expires FROM tokens t WHERE t.id = p_token;
    IF NOT FOUND OR v_token_expires <= p_at THEN
      RETURN QUERY SELECT false, NULL::bigint, 0::bigint, 'token_expired'::text;
      RETURN;
    END IF;
  END IF;
  IF v_existing IS NOT NULL THEN
    RETURN QUERY SELECT true, v_existing, NULL::bigint, NULL::text;
    RETURN;
  END IF;
  IF p_token IS NOT NULL THEN
    v_token_left := dg_token_left(p_token, p_stale_before);
  END IF;
  IF v_credits IS NULL AND v_token_left IS NULL THEN
    RETURN QUERY SELECT true, NULL::bigint, NULL::bigint, NULL::text;
    RETURN;
  END IF;
  v_available := LEAST(v_credits - v_held, v_token_left);
  IF v_available < p_amount THEN
    RETURN QUERY SELECT false, NULL::bigint, GREATEST(0, v_available), NULL::text;
    RETURN;
  END IF;
  RETURN QUERY INSERT INTO reservations (key_id, request_id, amount_micro, created_at, token_id)
    VALUES (p_key, p_request, p_amount, p_at, p_token)
    RETURNING true, reservations.id, v_available - p_amount, NULL::text;
END
$fn$;`,

  dg_step_settle: `CREATE OR REPLACE FUNCTION dg_step_settle(
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
  v_reserved bigint;
  v_recorded bigint;
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
      RETURN v_recorded;
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
  SELECT k.credits_micro,
         (SELECT COALESCE(SUM(r.amount_micro), 0) FROM reservations r
          WHERE r.key_id = p_key AND r.created_at >= p_stale_before)
  INTO v_credits, v_held FROM api_keys k WHERE k.id = p_key;
  -- Never more than the key can still cover beside other live holds; stale ones count nowhere.
  IF v_credits IS NOT NULL THEN
    v_debit := LEAST(v_debit, GREATEST(0, v_credits - v_held));
  END IF;
  WITH debited AS (
    UPDATE api_keys SET credits_micro = credits_micro - v_debit, last_used_at = p_at WHERE id = p_key)
  INSERT INTO usage_records (request_id, key_id, credits_micro, input_tokens, output_tokens, questions, status,
                             elapsed_ms, at, route, upstream, cached, token_id, subject)
  VALUES (p_request, p_key, v_debit, p_input, p_output, p_questions, p_status, p_elapsed, p_at,
          p_route, p_upstream, p_cached, p_token, p_subject);
  RETURN v_debit;
END
$fn$;`,

  dg_step_release: `CREATE OR REPLACE FUNCTION dg_step_release(
  p_reservation bigint, p_request text, p_key text,
  p_input integer, p_output integer, p_questions integer, p_status integer, p_elapsed integer, p_at bigint,
  p_route text, p_upstream text, p_cached boolean, p_token text, p_subject text)
RETURNS void
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  v_held bigint;
  v_debit bigint;
  v_status integer;
BEGIN
  IF p_reservation IS NOT NULL THEN
    DELETE FROM reservations r WHERE r.id = p_reservation AND r.request_id = p_request RETURNING r.id INTO v_held;
  END IF;
  -- No hold left: the request may have been recorded already.
  IF v_held IS NULL THEN
    SELECT u.credits_micro, u.status INTO v_debit, v_status
    FROM usage_records u WHERE u.request_id = p_request AND u.key_id = p_key;
    IF FOUND THEN
      -- Settled, yet its caller was answered a failure (the settle's acknowledgement was
      -- lost with the connection): a failed request is never charged, so the debit is undone.
      IF v_status = 200 AND p_status <> 200 THEN
        UPDATE usage_records SET credits_micro = 0, status = p_status WHERE request_id = p_request AND key_id = p_key;
        UPDATE api_keys SET credits_micro = credits_micro + v_debit WHERE id = p_key;
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

  dg_reserve: `CREATE OR REPLACE FUNCTION dg_reserve(p_key text, p_request text, p_amount bigint, p_at bigint, p_stale_before bigint, p_token text)
RETURNS TABLE (granted boolean, reservation bigint, available bigint, refused text)
LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
  PERFORM 1 FROM api_keys k WHERE k.id = p_key FOR UPDATE;
  RETURN QUERY SELECT * FROM dg_step_reserve(p_key, p_request, p_amount, p_at, p_stale_before, p_token);
END
$fn$;`,

  dg_settle: `CREATE OR REPLACE FUNCTION dg_settle(
  p_reservation bigint, p_request text, p_key text, p_cost bigint, p_stale_before bigint,
  p_input integer, p_output integer, p_questions integer, p_status integer, p_elapsed integer, p_at bigint,
  p_route text, p_upstream text, p_cached boolean, p_token text, p_subject text)
RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
  PERFORM 1 FROM api_keys k WHERE k.id = p_key FOR UPDATE;
  RETURN dg_step_settle(p_reservation, p_request, p_key, p_cost, p_stale_before, p_input, p_output, p_questions,
    p_status, p_elapsed, p_at, p_route, p_upstream, p_cached, p_token, p_subject);
END
$fn$;`,

  dg_release: `CREATE OR REPLACE FUNCTION dg_release(
  p_reservation bigint, p_request text, p_key text,
  p_input integer, p_output integer, p_questions integer, p_status integer, p_elapsed integer, p_at bigint,
  p_route text, p_upstream text, p_cached boolean, p_token text, p_subject text)
RETURNS void
LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
  PERFORM 1 FROM api_keys k WHERE k.id = p_key FOR UPDATE;
  PERFORM dg_step_release(p_reservation, p_request, p_key, p_input, p_output, p_questions, p_status, p_elapsed,
    p_at, p_route, p_upstream, p_cached, p_token, p_subject);
END
$fn$;`,

  dg_flush_rollups: `CREATE OR REPLACE FUNCTION dg_flush_rollups() RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
  ${pendingRollupsSql('usage_totals')};
  ${pendingRollupsSql('usage_rollups')};
  DELETE FROM dg_pending_rollups WHERE tx = txid_current();
  PERFORM set_config('dg.batch', 'off', true);
END
$fn$;`,

  dg_rollup_record: `CREATE OR REPLACE FUNCTION dg_rollup_record() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF TG_OP = 'UPDATE' THEN
    IF EXISTS (SELECT 1 FROM usage_rollup_backfill b WHERE OLD.id BETWEEN b.next_id AND b.last_id) THEN
      RETURN NULL;
    END IF;
  END IF;
  IF current_setting('dg.batch', true) = 'on' THEN
    IF TG_OP = 'UPDATE' THEN
      INSERT INTO dg_pending_rollups (${PENDING_COLUMNS}, sign)
      SELECT ${PENDING_COLUMNS.split(', ')
        .map((c) => `OLD.${c}`)
        .join(', ')}, -1;
    END IF;
    INSERT INTO dg_pending_rollups (${PENDING_COLUMNS}, sign)
    SELECT ${PENDING_COLUMNS.split(', ')
      .map((c) => `NEW.${c}`)
      .join(', ')}, 1;
    RETURN NULL;
  END IF;
  IF TG_OP = 'UPDATE' THEN
    ${addRecordSql('postgres', 'usage_totals', 'OLD', -1)};
    ${addRecordSql('postgres', 'usage_rollups', 'OLD', -1)};
  END IF;
  ${addRecordSql('postgres', 'usage_totals', 'NEW', 1)};
  ${addRecordSql('postgres', 'usage_rollups', 'NEW', 1)};
  RETURN NULL;
END
$fn$;`,

  dg_keep_decision: `CREATE OR REPLACE FUNCTION dg_keep_decision(p_step jsonb) RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
  IF jsonb_typeof(p_step->'decision') = 'object' THEN
    INSERT INTO decision_records (request_id, key_id, route, at, reused, questions)
    VALUES (p_step->>'request', p_step->>'key', p_step->>'route', (p_step->>'at')::bigint,
            p_step->'decision'->>'reused', p_step->'decision'->>'questions')
    ON CONFLICT (request_id) DO NOTHING;
  END IF;
END
$fn$;`,

  // Many reserve, settle and release steps in one statement; a step that reaches the database
  // after its deadline does nothing and says 'late'. Settles and releases keep their decisions.
  dg_apply: releasedDgApply(true).trim(),
} as const;
