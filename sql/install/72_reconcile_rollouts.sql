-- 72_reconcile_rollouts: the rollouts reconciler's state, its transition ledger and
-- its two short transactions (see docs/rollouts.md, "The reconciler").
--
-- The C pass (src/reconcile/rollouts.c) reads the InferenceService, applies the traffic
-- split it is told to, queries Prometheus, and decides what it saw means for the claimed
-- row (the pure C decision, src/reconcile/rollout_decide.c: when a window starts, whether
-- evidence is due, close, the status and its reason).  It hands observation and decision
-- to mlplat._rollouts_observe(): there, in one transaction, under a compare-and-swap on the
-- rollout's row_version and the kind's leader epoch (the row is the one the decision was
-- made on), this file applies the step; for a due decision the pass has also built the
-- evidence record, called plan_rollout and named the status after it (src/rollout/pass_plan.c):
-- here the ledger row is appended and the one transition stored.

-- Replicas a revision is expected to keep ready: its minReplicas, at least one (a
-- revision scaled to zero cannot prove readiness).
CREATE FUNCTION mlplat._rollout_replicas(p_intent jsonb) RETURNS int
LANGUAGE sql IMMUTABLE
AS $$ SELECT GREATEST(coalesce((p_intent->>'min_replicas')::int, 1), 1) $$;
REVOKE ALL ON FUNCTION mlplat._rollout_replicas(jsonb) FROM PUBLIC;

-- The decision contract of a rollout, from its row, its revisions and its policy.
-- Built once (the first claim stores it); see docs/rollouts.md for the mapping.
CREATE FUNCTION mlplat._rollout_contract(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE
AS $$
  SELECT mlplat.with_content_id(pg_catalog.jsonb_build_object(
    'scope', pg_catalog.jsonb_build_object(
      'project', p.name, 'deployment', d.name,
      'target_revision', 'r' || ro.target_revision, 'previous_revision', 'r' || ro.baseline_revision,
      'model_digest', 'sha256:' || mv.artifact_sha256, 'config_digest', 'sha256:' || tr.spec_digest),
    'policy', pg_catalog.jsonb_build_object(
      'steps', ro.policy->'steps',
      'ceiling_fraction', LEAST((ro.policy->>'ceiling')::numeric,
                                (ro.policy->'steps'->>(pg_catalog.jsonb_array_length(ro.policy->'steps') - 1))::numeric),
      'min_samples', ro.policy->'min_samples',
      'window_seconds', ro.policy->'window_seconds',
      'max_error_rate', ro.policy->'max_error_rate',
      'max_p95_ms', coalesce(ro.policy->'max_p95_ms', '600000'),
      'max_error_rate_increase', ro.policy->'max_error_rate',
      'max_p95_increase_ratio', coalesce(ro.policy->'max_p95_ratio', '100'),
      'health_max_age_seconds', ro.policy->'window_seconds',
      'surge_replicas', 0,
      'rollback_headroom_replicas', 0,
      'capacity_quota_replicas', GREATEST((tr.intent->>'max_replicas')::int, mlplat._rollout_replicas(tr.intent))
                                 + GREATEST((br.intent->>'max_replicas')::int, mlplat._rollout_replicas(br.intent)))))
    FROM mlplat.rollouts ro
    JOIN mlplat.deployments d ON d.id = ro.deployment_id
    JOIN mlplat.projects p ON p.id = ro.project_id
    JOIN mlplat.deployment_revisions tr ON tr.deployment_id = d.id AND tr.revision = ro.target_revision
    JOIN mlplat.deployment_revisions br ON br.deployment_id = d.id AND br.revision = ro.baseline_revision
    JOIN mlplat.model_versions mv ON mv.id = tr.model_version_id
   WHERE ro.id = p_id
$$;
REVOKE ALL ON FUNCTION mlplat._rollout_contract(bigint) FROM PUBLIC;

-- The traffic fraction the rollout stands at, from the ledger (not from memory).
CREATE FUNCTION mlplat._rollout_fraction(p_id bigint) RETURNS numeric
LANGUAGE sql STABLE
AS $$
  SELECT coalesce((SELECT t.to_fraction FROM mlplat.rollout_transitions t
                    WHERE t.rollout_id = p_id ORDER BY t.seq DESC LIMIT 1), 0)
$$;
REVOKE ALL ON FUNCTION mlplat._rollout_fraction(bigint) FROM PUBLIC;

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
-- pure; the pass calls it directly, this is its SQL face for the tests): from the claimed row (status, requested action, fraction, the revision names fixed
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

-- The seam (src/reconcile/seam.c): the claim returns mlplat.rollout_claim rows, which C reads
-- by name, with what the pass's decision needs (requested_action, the ledger's fraction as
-- numeric, which C reads as numeric_out's decimal text, window_started).  The write-back (_rollouts_writeback_set, below) calls
-- _rollouts_observe for each rollout: it applies the pass's decision and records (see
-- docs/rollouts.md).
CREATE TYPE mlplat.rollout_claim AS (
  id bigint, project text, namespace text, name text, status text /* STATUS rollout */, row_version bigint,
  spec text, want_percent int, target_revision int, target_kn text, previous_kn text,
  window_start_ms bigint, window_seconds int, decide_at_ms bigint, attempts int, due boolean,
  traceparent text, metrics_preset text, requested_action text, fraction numeric, window_started boolean,
  contract text, target_replicas int, previous_replicas int);

-- Claim: every active rollout, with the target's manifest, what the pass must do and what
-- its decision reads.
-- Freezes the contract of a rollout seen for the first time.
CREATE FUNCTION mlplat._rollouts_claim()
RETURNS SETOF mlplat.rollout_claim
LANGUAGE plpgsql
AS $$
BEGIN
  UPDATE mlplat.rollouts ro SET contract = mlplat._rollout_contract(ro.id)
   WHERE ro.contract IS NULL AND mlplat.rollout_is_active(ro.status);
  RETURN QUERY
  SELECT c.id, c.project, c.namespace, c.name, c.status, c.row_version,
         (CASE WHEN c.want < 0 THEN c.spec
               ELSE pg_catalog.jsonb_set(c.spec, '{spec,predictor,canaryTrafficPercent}', pg_catalog.to_jsonb(c.want)) END)::text,
         c.want, c.target_revision, c.target_kn, c.previous_kn, c.window_start_ms, c.window_seconds, c.decide_at_ms,
         c.attempts, c.due, c.traceparent, c.metrics_preset, c.requested_action, c.fraction, c.window_started,
         c.contract::text, c.target_replicas, c.previous_replicas
    FROM (
  SELECT f.*, mlplat._rollout_want_percent(f.status, f.requested_action, f.fraction) AS want
    FROM (
  SELECT ro.id, p.name AS project, mlplat._project_namespace(p.name) AS namespace, d.name, ro.status, ro.row_version,
         tr.spec, ro.requested_action, mlplat._rollout_fraction(ro.id) AS fraction,
         ro.target_revision, ro.observed->>'target_kn' AS target_kn, ro.observed->>'previous_kn' AS previous_kn,
         pg_catalog.round(EXTRACT(epoch FROM ro.window_start) * 1000)::bigint AS window_start_ms,
         ro.window_start IS NOT NULL AS window_started,
         (ro.policy->>'window_seconds')::int AS window_seconds,
         pg_catalog.round(ro.decide_at * 1000)::bigint AS decide_at_ms, ro.attempts,
         ro.next_attempt_at <= pg_catalog.now() AS due, ro.traceparent,
         coalesce(d.metrics_preset, '') AS metrics_preset, ro.contract,
         mlplat._rollout_replicas(tr.intent) AS target_replicas, mlplat._rollout_replicas(br.intent) AS previous_replicas
    FROM mlplat.rollouts ro
    JOIN mlplat.deployments d ON d.id = ro.deployment_id
    JOIN mlplat.projects p ON p.id = ro.project_id
    JOIN mlplat.deployment_revisions tr ON tr.deployment_id = d.id AND tr.revision = ro.target_revision
    JOIN mlplat.deployment_revisions br ON br.deployment_id = d.id AND br.revision = ro.baseline_revision
   WHERE mlplat.rollout_is_active(ro.status)) f) c
   ORDER BY c.id;
END $$;
REVOKE ALL ON FUNCTION mlplat._rollouts_claim() FROM PUBLIC;

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

-- Append one transition (transaction open, rollout row locked).  Returns false when
-- a transition on this evidence is already recorded: a replay, nothing to apply.
CREATE FUNCTION mlplat._rollout_record(ro mlplat.rollouts, p_decision text, p_reasons text[], p_to_status text,
                                       p_from_fraction numeric, p_to_fraction numeric, p_evidence jsonb,
                                       p_plan jsonb, p_obs jsonb, p_epoch bigint, p_controller text)
RETURNS boolean
LANGUAGE plpgsql
AS $$
BEGIN
  INSERT INTO mlplat.rollout_transitions (rollout_id, project_id, seq, decision, reasons, from_status, to_status,
                                          from_fraction, to_fraction, contract_content_id, contract,
                                          evidence_content_id, evidence, plan, observation, epoch, controller)
  VALUES (ro.id, ro.project_id,
          coalesce((SELECT max(t.seq) FROM mlplat.rollout_transitions t WHERE t.rollout_id = ro.id), 0) + 1,
          p_decision, p_reasons, ro.status, p_to_status, p_from_fraction, p_to_fraction,
          ro.contract->>'content_id', ro.contract, p_evidence->>'content_id', p_evidence, p_plan, p_obs,
          p_epoch, p_controller)
  ON CONFLICT (rollout_id, evidence_content_id) DO NOTHING;
  RETURN FOUND;
END $$;
REVOKE ALL ON FUNCTION mlplat._rollout_record(mlplat.rollouts, text, text[], text, numeric, numeric, jsonb, jsonb, jsonb, bigint, text) FROM PUBLIC;

-- Close a rollout whose final route is proven: the observation shows 100% of the
-- traffic on the revision it must be on.
CREATE FUNCTION mlplat._rollout_close(ro mlplat.rollouts, p_obs jsonb, p_revision_kn text, p_to_status text,
                                      p_epoch bigint, p_controller text)
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
  frac numeric := mlplat._rollout_fraction(ro.id);
  route jsonb;
  v mlplat.model_versions;
BEGIN
  route := mlplat.with_content_id(pg_catalog.jsonb_build_object(
    'contract_content_id', ro.contract->'content_id', 'observed_at', p_obs->'observed_at',
    'revision', p_revision_kn, 'traffic', p_obs->'traffic'));
  IF NOT mlplat._rollout_record(ro, CASE WHEN p_to_status = 'PROMOTED' THEN 'PROMOTED' ELSE 'ROUTE_RESTORED' END,
                                ARRAY['TRAFFIC_OBSERVED_100'], p_to_status, frac,
                                CASE WHEN p_to_status = 'PROMOTED' THEN 1 ELSE 0 END,
                                route, NULL, p_obs, p_epoch, p_controller) THEN
    RETURN 'REPLAYED';
  END IF;
  UPDATE mlplat.rollouts x
     SET status = p_to_status, current_fraction = CASE WHEN p_to_status = 'PROMOTED' THEN 1 ELSE 0 END,
         status_reason = pg_catalog.format('100%% of the traffic observed on %s', p_revision_kn),
         observed_generation = x.generation
   WHERE x.id = ro.id;
  IF p_to_status = 'PROMOTED' THEN
    -- The deployment now serves the target; the baseline becomes its rollback revision
    -- (and stops being reserved: the rollout's extra capacity is released).
    UPDATE mlplat.deployments d
       SET previous_revision = ro.baseline_revision, desired_revision = ro.target_revision,
           status = 'DEPLOYING', status_reason = pg_catalog.format('rollout %s promoted revision %s', ro.id, ro.target_revision),
           generation = d.generation + 1, row_version = d.row_version + 1, ready_wait_since = pg_catalog.now(),
           -- KServe was seen serving the target: its status counts as it is (deployments.c,
           -- isvc_status_current), where a first apply would wait for the child to move
           observed = coalesce(d.observed, '{}'::jsonb) || pg_catalog.jsonb_build_object('kserve_at_apply',
                        pg_catalog.jsonb_build_object('revision', ro.target_revision, 'observedGeneration', NULL,
                                                      'latestCreatedRevision', NULL)),
           updated_at = pg_catalog.now()
     WHERE d.id = ro.deployment_id;
    -- The promoted version becomes the model's CHAMPION, as set_model_stage would do.
    SELECT mv.* INTO v FROM mlplat.model_versions mv
      JOIN mlplat.deployment_revisions dr ON dr.model_version_id = mv.id
     WHERE dr.deployment_id = ro.deployment_id AND dr.revision = ro.target_revision;
    IF v.stage <> 'CHAMPION' THEN
      PERFORM 1 FROM mlplat.models m WHERE m.id = v.model_id FOR UPDATE;
      UPDATE mlplat.model_versions mv SET stage = 'ARCHIVED', stage_changed_at = pg_catalog.clock_timestamp()
       WHERE mv.model_id = v.model_id AND mv.stage = 'CHAMPION';
      UPDATE mlplat.model_versions mv SET stage = 'CHAMPION', stage_changed_at = pg_catalog.clock_timestamp()
       WHERE mv.id = v.id;
      IF mlplat._sync_aliases(v.model_id, ro.traceparent) THEN
        PERFORM mlplat._wake_on_commit('model_aliases');
      END IF;
    END IF;
  ELSE
    -- Rolled back: the deployment reconciler owns the object again and re-applies the
    -- baseline's manifest (dropping the canary setting).
    UPDATE mlplat.deployments d
       SET status = 'DEPLOYING', status_reason = pg_catalog.format('rollout %s rolled back to revision %s', ro.id, ro.baseline_revision),
           generation = d.generation + 1, row_version = d.row_version + 1, ready_wait_since = pg_catalog.now(),
           -- the baseline's re-apply is a first apply again: KServe's status before it is the target's
           observed = d.observed - 'kserve_at_apply',
           updated_at = pg_catalog.now()
     WHERE d.id = ro.deployment_id;
  END IF;
  PERFORM mlplat._wake_on_commit('deployments');
  RETURN p_to_status;
END $$;
REVOKE ALL ON FUNCTION mlplat._rollout_close(mlplat.rollouts, jsonb, text, text, bigint, text) FROM PUBLIC;

-- The write-back row of one rollout, what the C pass observed, applied and decided (seam.h): it is
-- _rollouts_observe's argument, so the pass and the function read its fields by name.
CREATE TYPE mlplat.rollout_writeback AS (
  id bigint, row_version bigint, controller text, observation jsonb,
  applied boolean, applied_percent int, error text, retry_ms int /* NULL<0 */,
  step text, target_kn text, previous_kn text, target_percent int, previous_percent int,
  close_kn text, close_status text /* STATUS rollout */, status_reason text, clear_window boolean,
  window_start_ms bigint /* NULL<0 */, decide_at_ms bigint /* NULL<0 */,
  evidence jsonb, plan jsonb, decision text, reasons text[], next_fraction numeric,
  plan_status text /* STATUS rollout */,
  plan_reason text, keep_window boolean, recheck_at_ms bigint /* NULL<0 */, refused text);
CREATE TYPE mlplat.rollout_writeback_result AS (id bigint, result text);

-- Write-back of one rollout (w).  w.observation (from the C pass) is
--   {"observed_at": epoch s (millisecond precision), "settled": bool (status describes the current generation and
--    the object carries the wanted revision and traffic setting), "ready": bool,
--    "latest_ready_kn", "latest_created_kn", "rolledout_kn": KServe revision names,
--    "traffic": [{"revision", "percent", "latest"}], "load": transitionStatus,
--    "metrics": {"window_start", "window_seconds", "target": {requests, errors, p95_ms},
--                "previous": {...}, "gaps": [why a value is missing]} or absent}
-- w.applied_percent, when w.applied: the canaryTrafficPercent this pass applied.  w.error:
-- the pass could not observe or apply (retried after w.retry_ms).  Otherwise w.step .. w.decide_at_ms
-- are what the pass decided the observation means for the claimed row (rollout_decide.c,
-- ml_rollout_pass_decide; the fields of _rollout_decide's result): the compare-and-swap proves
-- the row unchanged since that claim, so the decision holds for the locked row; a row without a
-- step only has its error cleared.  A DECIDE step also carries the transition the pass made
-- (src/rollout/pass_plan.c, the fields of _rollout_pass_plan's result: the evidence with its
-- content id, the plan, the status after it, or why plan_rollout refused), which is stored
-- here as it is.  Returns what happened:
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

-- Test hook: how the reconciler reads one Prometheus /api/v1/query answer.
CREATE FUNCTION mlplat._prometheus_classify(http_status int, body text) RETURNS jsonb
LANGUAGE C IMMUTABLE
AS 'MODULE_PATHNAME', 'mlplat_prometheus_classify';
REVOKE ALL ON FUNCTION mlplat._prometheus_classify(int, text) FROM PUBLIC;

-- The write-back of a pass through the seam (seam.h): one mlplat.rollout_writeback (above) per
-- rollout the pass observed or applied (applied false: nothing applied, applied_percent is
-- ignored; retry_ms NULL: no retry), each answered, in order, by what _rollouts_observe
-- made of it (mlplat.rollout_writeback_result).

CREATE FUNCTION mlplat._rollouts_writeback_set(p_epoch bigint, p_rows mlplat.rollout_writeback[])
RETURNS SETOF mlplat.rollout_writeback_result
LANGUAGE plpgsql
AS $$
DECLARE
  w mlplat.rollout_writeback;
BEGIN
  FOREACH w IN ARRAY coalesce(p_rows, '{}') LOOP
    RETURN NEXT ROW(w.id, mlplat._rollouts_observe(p_epoch, w))::mlplat.rollout_writeback_result;
  END LOOP;
END $$;
REVOKE ALL ON FUNCTION mlplat._rollouts_writeback_set(bigint, mlplat.rollout_writeback[]) FROM PUBLIC;
