-- 0.2.0 -> 0.3.0: a due rollout decision is made once, in the pass (src/rollout/pass_plan.c):
-- the evidence record and its content id, plan_rollout's transition and the status after it come
-- in the write-back row (mlplat.rollout_writeback, part 45; the claim carries the contract and the
-- replica counts, part 20); _rollouts_observe (99_rollouts_observe_row) only stores them.  The SQL
-- evidence builder goes; its C successor has a SQL face for the tests.
DROP FUNCTION mlplat._rollout_evidence(jsonb, numeric, int, int, jsonb, text, text);

-- A due decision, as the pass makes it (C, src/rollout/pass_plan.c; the pass calls it
-- directly, this is its SQL face for the tests): from the claimed contract, fraction (the
-- claim's numeric) and replica counts, and one observation with its metrics, the evidence record
-- with its content id (time texts epoch seconds with millisecond precision, no trailing
-- zeros), plan_rollout's output on it, and the rollout after it (ml_rollout_after_plan's
-- fields); or refused: why plan_rollout refused the evidence.  The fields of the write-back
-- row a DECIDE step carries.
CREATE FUNCTION mlplat._rollout_pass_plan(p_contract jsonb, p_fraction numeric, p_target_replicas int,
                                          p_previous_replicas int, p_obs jsonb, p_target_kn text,
                                          p_previous_kn text, p_window_seconds int,
                                          OUT evidence jsonb, OUT plan jsonb, OUT decision text,
                                          OUT reasons text[], OUT next_fraction numeric, OUT plan_status text,
                                          OUT plan_reason text,
                                          OUT keep_window boolean, OUT recheck_at_ms bigint, OUT refused text)
LANGUAGE C IMMUTABLE
AS 'MODULE_PATHNAME', 'mlplat_rollout_pass_plan';
REVOKE ALL ON FUNCTION mlplat._rollout_pass_plan(jsonb, numeric, int, int, jsonb, text, text, int) FROM PUBLIC;
