-- 0.2.0 -> 0.3.0: rollouts decide in C (issue 19 point 3).  _rollouts_observe (part
-- 99_rollouts_observe_row, after this one) stores what the pass decided with the rules of
-- src/reconcile/rollout_decide.c (mlplat._rollout_decide is their SQL face for the tests);
-- the want percent of the claim is the same C rule.

DROP FUNCTION mlplat._rollout_want_percent(text, text, numeric);
-- canaryTrafficPercent the InferenceService must carry now: 0 while rolling back,
-- -1 (no canary setting) once promotion is requested, else the current fraction
-- (rollout_decide.c, the rule the write-back's decision uses too).
CREATE FUNCTION mlplat._rollout_want_percent(p_status text, p_requested text, p_fraction numeric) RETURNS int
LANGUAGE C IMMUTABLE
AS 'MODULE_PATHNAME', 'mlplat_rollout_want_percent';
REVOKE ALL ON FUNCTION mlplat._rollout_want_percent(text, text, numeric) FROM PUBLIC;

-- Epoch milliseconds as the epoch seconds the rollout's times are kept in (no trailing zeros).
CREATE FUNCTION mlplat._rollout_ms_secs(p_ms bigint) RETURNS numeric
LANGUAGE sql IMMUTABLE STRICT
AS $$ SELECT pg_catalog.trim_scale(p_ms::numeric / 1000) $$;
REVOKE ALL ON FUNCTION mlplat._rollout_ms_secs(bigint) FROM PUBLIC;

-- What one observation means for a rollout, decided in C (src/reconcile/rollout_decide.c,
-- pure): from the locked row (status, requested action, fraction, the revision names fixed
-- so far, the window) and the observation (its time, whether KServe settled, its revision
-- names, the traffic entries in order, whether request metrics came with it).  step is
-- WAIT (KServe has not caught up), CLOSE (on close_kn with close_status), REASON (store
-- status_reason; clear the window when clear_window), START (a window starts at
-- window_start_ms, due at decide_at_ms), NOT_DUE or DECIDE (call plan_rollout; after a
-- START at 0% the window fields are set too).
CREATE FUNCTION mlplat._rollout_decide(
  p_status text, p_requested text, p_fraction numeric, p_target_kn text, p_previous_kn text,
  p_window_started boolean, p_decide_at_ms bigint, p_window_seconds int,
  p_observed_at_ms bigint, p_settled boolean, p_latest_created_kn text, p_rolledout_kn text,
  p_traffic_revisions text[], p_traffic_percents int[], p_has_metrics boolean,
  OUT want_percent int, OUT target_kn text, OUT previous_kn text, OUT target_percent int,
  OUT previous_percent int, OUT step text, OUT close_kn text, OUT close_status text,
  OUT status_reason text, OUT clear_window boolean, OUT window_start_ms bigint, OUT decide_at_ms bigint)
LANGUAGE C IMMUTABLE
AS 'MODULE_PATHNAME', 'mlplat_rollout_decide';
REVOKE ALL ON FUNCTION mlplat._rollout_decide(text, text, numeric, text, text, boolean, bigint, int, bigint, boolean,
                                              text, text, text[], int[], boolean) FROM PUBLIC;
