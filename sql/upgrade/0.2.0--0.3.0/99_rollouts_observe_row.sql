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
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
DECLARE
  p_applied int := CASE WHEN w.applied THEN w.applied_percent END;
  ro mlplat.rollouts;
  frac numeric;
  want int;
  at numeric := pg_catalog.trim_scale((w.observation->>'observed_at')::numeric);
  tkn text;
  pkn text;
  t_pct int;
  p_pct int;
  ws numeric;
  evidence jsonb;
  plan jsonb;
  reasons text[];
  new_status text;
  recheck int;
  tr jsonb;
  br jsonb;
  result text := 'OBSERVED';
BEGIN
  SELECT * INTO ro FROM mlplat.rollouts x
   WHERE x.id = w.id AND x.row_version = w.row_version
     AND mlplat._epoch_current('rollouts', p_epoch)
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

  frac := mlplat._rollout_fraction(ro.id);
  want := mlplat._rollout_want_percent(ro.status, ro.requested_action, frac);
  -- KServe's names for our two revisions, fixed at first sight: the target is the
  -- revision created for our manifest, the previous one is what KServe had rolled out.
  tkn := coalesce(ro.observed->>'target_kn', CASE WHEN (w.observation->>'settled')::boolean THEN w.observation->>'latest_created_kn' END);
  pkn := coalesce(ro.observed->>'previous_kn',
                  CASE WHEN (w.observation->>'settled')::boolean AND w.observation->>'rolledout_kn' IS DISTINCT FROM tkn
                       THEN w.observation->>'rolledout_kn' END);
  SELECT coalesce(sum((e->>'percent')::int) FILTER (WHERE e->>'revision' = tkn), 0),
         coalesce(sum((e->>'percent')::int) FILTER (WHERE e->>'revision' = pkn), 0)
    INTO t_pct, p_pct
    FROM pg_catalog.jsonb_array_elements(coalesce(w.observation->'traffic', '[]')) e;
  UPDATE mlplat.rollouts x
     SET observed = pg_catalog.jsonb_build_object('target_kn', tkn, 'previous_kn', pkn,
                      'traffic', w.observation->'traffic', 'target_percent', t_pct, 'previous_percent', p_pct,
                      'ready', w.observation->'ready', 'load', w.observation->'load', 'observed_at', w.observation->'observed_at'),
         observed_at = pg_catalog.now()
   WHERE x.id = ro.id;
  SELECT * INTO ro FROM mlplat.rollouts x WHERE x.id = ro.id;
  IF NOT coalesce((w.observation->>'settled')::boolean, false) OR tkn IS NULL THEN
    RETURN result;              -- KServe has not caught up with what we applied yet
  END IF;

  IF ro.status = 'ROLLING_BACK' THEN
    IF pkn IS NOT NULL AND p_pct = 100 THEN
      RETURN mlplat._rollout_close(ro, w.observation, pkn, CASE WHEN ro.requested_action = 'ABORT' THEN 'ABORTED' ELSE 'ROLLED_BACK' END,
                                   p_epoch, w.controller);
    END IF;
    UPDATE mlplat.rollouts x
       SET status_reason = CASE WHEN pkn IS NULL OR NOT EXISTS (
                                   SELECT 1 FROM pg_catalog.jsonb_array_elements(coalesce(w.observation->'traffic', '[]')) e
                                    WHERE e->>'revision' = pkn)
                                THEN pg_catalog.format('rollback route lost: previous revision %s is not in the route',
                                                       coalesce(pkn, '(unknown)'))
                                ELSE pg_catalog.format('rolling back: %s%% still on the target', t_pct) END
     WHERE x.id = ro.id;
    RETURN result;
  END IF;
  IF ro.requested_action = 'PROMOTE' THEN
    IF t_pct = 100 THEN
      RETURN mlplat._rollout_close(ro, w.observation, tkn, 'PROMOTED', p_epoch, w.controller);
    END IF;
    UPDATE mlplat.rollouts x SET status_reason = pg_catalog.format('promoting: %s%% on the target so far', t_pct)
     WHERE x.id = ro.id;
    RETURN result;
  END IF;

  -- A window runs while the observed split is the one the rollout stands at.
  IF t_pct <> want THEN
    UPDATE mlplat.rollouts x SET window_start = NULL, decide_at = NULL,
           status_reason = pg_catalog.format('waiting for %s%% on the target (observed %s%%)', want, t_pct)
     WHERE x.id = ro.id;
    RETURN result;
  END IF;
  IF ro.window_start IS NULL THEN
    -- The window starts when this observation saw the split (evidence times have
    -- millisecond precision, so no waiting for a whole second).
    ws := at;
    UPDATE mlplat.rollouts x
       SET window_start = pg_catalog.to_timestamp(ws::float8),
           decide_at = ws + CASE WHEN frac = 0 THEN 0 ELSE (ro.policy->>'window_seconds')::int END,
           status_reason = pg_catalog.format('observing %s%% on the target', want)
     WHERE x.id = ro.id;
    IF frac <> 0 THEN
      RETURN result;
    END IF;
    -- At 0% the first decision needs readiness only (no window, no request metrics):
    -- this observation is the evidence, so decide on it at once.
    SELECT * INTO ro FROM mlplat.rollouts x WHERE x.id = ro.id;
  END IF;
  IF (w.observation->'metrics' IS NULL AND frac <> 0) OR at < ro.decide_at THEN
    RETURN result;
  END IF;

  -- Decide exactly one transition.
  SELECT dr.intent INTO tr FROM mlplat.deployment_revisions dr
   WHERE dr.deployment_id = ro.deployment_id AND dr.revision = ro.target_revision;
  SELECT dr.intent INTO br FROM mlplat.deployment_revisions dr
   WHERE dr.deployment_id = ro.deployment_id AND dr.revision = ro.baseline_revision;
  evidence := mlplat.with_content_id(mlplat._rollout_evidence(ro.contract, frac, mlplat._rollout_replicas(tr),
                                                              mlplat._rollout_replicas(br), w.observation, tkn, pkn));
  BEGIN
    plan := mlplat.plan_rollout(ro.contract, evidence);
  EXCEPTION WHEN invalid_parameter_value THEN
    -- evidence this controller built and the decision function refused: a bug to see,
    -- not a transition; keep it out of the ledger and retry slowly
    UPDATE mlplat.rollouts x
       SET last_error = pg_catalog.format('plan_rollout refused the evidence: %s', SQLERRM),
           attempts = x.attempts + 1, next_attempt_at = pg_catalog.now() + interval '30 seconds'
     WHERE x.id = ro.id;
    RETURN 'REFUSED';
  END;
  SELECT pg_catalog.array_agg(r ORDER BY r) INTO reasons FROM pg_catalog.jsonb_array_elements_text(plan->'reasons') r;
  new_status := CASE plan->>'decision'
                  WHEN 'ADVANCE' THEN 'PROGRESSING'
                  WHEN 'ROLLBACK' THEN 'ROLLING_BACK'
                  ELSE CASE WHEN reasons && ARRAY['AT_CEILING', 'TRAFFIC_COMPLETE'] THEN 'AT_CEILING' ELSE 'HOLDING' END
                END;
  IF NOT mlplat._rollout_record(ro, plan->>'decision', reasons, new_status, frac, (plan->>'next_fraction')::numeric,
                                evidence, plan, w.observation - 'metrics' || pg_catalog.jsonb_build_object(
                                  'target_kn', tkn, 'previous_kn', pkn, 'metric_gaps', w.observation->'metrics'->'gaps'),
                                p_epoch, w.controller) THEN
    RETURN 'REPLAYED';
  END IF;
  -- After a hold, look again a fifth of a window later (1 s to 60 s); at the ceiling,
  -- where only a regression can still change anything, once per window.
  recheck := CASE WHEN new_status = 'AT_CEILING' THEN (ro.policy->>'window_seconds')::int
                  ELSE LEAST(GREATEST((ro.policy->>'window_seconds')::int / 5, 1), 60) END;
  UPDATE mlplat.rollouts x
     SET status = new_status,
         current_fraction = (plan->>'next_fraction')::numeric,
         status_reason = pg_catalog.format('%s: %s', plan->>'decision', pg_catalog.array_to_string(reasons, ', ')),
         window_start = CASE WHEN plan->>'decision' = 'HOLD' THEN x.window_start END,
         decide_at = CASE WHEN plan->>'decision' = 'HOLD' THEN at + recheck END,
         observed_generation = x.generation
   WHERE x.id = ro.id;
  RETURN plan->>'decision';
END $$;
REVOKE ALL ON FUNCTION mlplat._rollouts_observe(bigint, mlplat.rollout_writeback) FROM PUBLIC;
