-- 0.2.0 -> 0.3.0: _rollouts_observe takes the write-back row (mlplat.rollout_writeback, part 45)
-- and reads its fields by name, instead of eight positional arguments that
-- _rollouts_writeback_set had to pass in the right order.  After part 45.

DROP FUNCTION mlplat._rollouts_observe(bigint, bigint, bigint, text, jsonb, int, text, int);

-- Write-back of one rollout (w).  w.observation (from the C pass) is
--   {"observed_at": epoch s (millisecond precision), "settled": bool (status describes the current generation and
--    the object carries the wanted revision and traffic setting), "ready": bool,
--    "latest_ready_kn", "latest_created_kn", "rolledout_kn": KServe revision names,
--    "traffic": [{"revision", "percent", "latest"}], "load": transitionStatus,
--    "metrics": {"window_start", "window_seconds", "target": {requests, errors, p95_ms},
--                "previous": {...}, "gaps": [why a value is missing]} or absent}
-- w.applied_percent, when w.applied: the canaryTrafficPercent this pass applied.  w.error:
-- the pass could not observe or apply (retried after w.retry_ms).  Returns what happened:
-- LOST (compare-and-swap lost), ERROR, APPLIED, OBSERVED, a decision, REPLAYED, or the
-- terminal status.
CREATE FUNCTION mlplat._rollouts_observe(p_epoch bigint, w mlplat.rollout_writeback)
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
  p_applied int := CASE WHEN w.applied THEN w.applied_percent END;
  ro mlplat.rollouts;
  frac numeric;
  result text := 'OBSERVED';
BEGIN
  SELECT * INTO ro FROM mlplat.rollouts x
   WHERE x.id = w.id AND mlplat._writeback_holds(x.row_version, w.row_version, 'rollouts', p_epoch)
     FOR UPDATE;
  IF NOT FOUND THEN
    RETURN 'LOST';
  END IF;
  UPDATE mlplat.rollouts x SET epoch = p_epoch, row_version = x.row_version + 1, updated_at = pg_catalog.now()
   WHERE x.id = ro.id;
  IF w.error IS NOT NULL THEN
    UPDATE mlplat.rollouts x
       SET last_error = w.error, attempts = x.attempts + 1,
           next_attempt_at = pg_catalog.now() + pg_catalog.make_interval(secs => coalesce(w.retry_ms, 1000) / 1000.0)
     WHERE x.id = ro.id;
    RETURN 'ERROR';
  END IF;
  UPDATE mlplat.rollouts x SET last_error = NULL, attempts = 0, next_attempt_at = pg_catalog.now()
   WHERE x.id = ro.id;
  IF p_applied IS NOT NULL THEN
    -- a new traffic setting: any window in progress no longer describes what users get
    UPDATE mlplat.rollouts x SET applied_percent = p_applied, window_start = NULL, decide_at = NULL
     WHERE x.id = ro.id;
    RETURN 'APPLIED';
  END IF;

  IF w.step IS NULL THEN
    RETURN result;              -- nothing decided: nothing to store
  END IF;
  frac := mlplat._rollout_fraction(ro.id);
  -- What this observation means, as the pass decided it (rollout_decide.c): KServe's names for
  -- our two revisions (fixed at first sight), the traffic on each, and one step.
  UPDATE mlplat.rollouts x
     SET observed = pg_catalog.jsonb_build_object('target_kn', w.target_kn, 'previous_kn', w.previous_kn,
                      'traffic', w.observation->'traffic', 'target_percent', w.target_percent,
                      'previous_percent', w.previous_percent,
                      'ready', w.observation->'ready', 'load', w.observation->'load', 'observed_at', w.observation->'observed_at'),
         observed_at = pg_catalog.now()
   WHERE x.id = ro.id;
  SELECT * INTO ro FROM mlplat.rollouts x WHERE x.id = ro.id;
  IF w.step = 'WAIT' THEN
    RETURN result;              -- KServe has not caught up with what we applied yet
  END IF;
  IF w.step = 'CLOSE' THEN
    RETURN mlplat._rollout_close(ro, w.observation, w.close_kn, w.close_status, p_epoch, w.controller);
  END IF;
  IF w.step = 'REASON' THEN
    UPDATE mlplat.rollouts x
       SET status_reason = w.status_reason,
           window_start = CASE WHEN w.clear_window THEN NULL ELSE x.window_start END,
           decide_at = CASE WHEN w.clear_window THEN NULL ELSE x.decide_at END
     WHERE x.id = ro.id;
    RETURN result;
  END IF;
  IF w.window_start_ms IS NOT NULL THEN
    UPDATE mlplat.rollouts x
       SET window_start = pg_catalog.to_timestamp(mlplat._rollout_ms_secs(w.window_start_ms)::float8),
           decide_at = mlplat._rollout_ms_secs(w.decide_at_ms),
           status_reason = w.status_reason
     WHERE x.id = ro.id;
    SELECT * INTO ro FROM mlplat.rollouts x WHERE x.id = ro.id;
  END IF;
  IF w.step <> 'DECIDE' THEN
    RETURN result;              -- a window runs (or just started); no decision due yet
  END IF;

  -- The one transition the pass decided (src/rollout/pass_plan.c): the evidence record and
  -- its content id, plan_rollout's output and the rollout after it; stored here.
  IF w.refused IS NOT NULL THEN
    -- evidence this controller built and the decision function refused: a bug to see,
    -- not a transition; keep it out of the ledger and retry slowly
    UPDATE mlplat.rollouts x
       SET last_error = pg_catalog.format('plan_rollout refused the evidence: %s', w.refused),
           attempts = x.attempts + 1, next_attempt_at = pg_catalog.now() + interval '30 seconds'
     WHERE x.id = ro.id;
    RETURN 'REFUSED';
  END IF;
  IF NOT mlplat._rollout_record(ro, w.decision, w.reasons, w.plan_status, frac, w.next_fraction,
                                w.evidence, w.plan, w.observation - 'metrics' || pg_catalog.jsonb_build_object(
                                  'target_kn', w.target_kn, 'previous_kn', w.previous_kn,
                                  'metric_gaps', w.observation->'metrics'->'gaps'),
                                p_epoch, w.controller) THEN
    RETURN 'REPLAYED';
  END IF;
  UPDATE mlplat.rollouts x
     SET status = w.plan_status,
         current_fraction = w.next_fraction,
         status_reason = w.plan_reason,
         window_start = CASE WHEN w.keep_window THEN x.window_start END,
         decide_at = mlplat._rollout_ms_secs(w.recheck_at_ms),
         observed_generation = x.generation
   WHERE x.id = ro.id;
  RETURN w.decision;
END $$;
REVOKE ALL ON FUNCTION mlplat._rollouts_observe(bigint, mlplat.rollout_writeback) FROM PUBLIC;
