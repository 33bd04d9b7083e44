-- 0.2.0 -> 0.3.0: every API wait for an entity row is bounded by mlplat.api_lock_timeout,
-- not only the waits behind the project's lock (undeploy, cancel_run, set_model_stage,
-- promote/abort_rollout).  Numbered after the other parts: it carries the final bodies.

CREATE FUNCTION mlplat._bound_api_waits() RETURNS void LANGUAGE sql AS $$
  SELECT FROM pg_catalog.set_config('lock_timeout',
    coalesce(pg_catalog.current_setting('mlplat.api_lock_timeout', true), '5s'), true)
$$;
REVOKE ALL ON FUNCTION mlplat._bound_api_waits() FROM PUBLIC;

CREATE OR REPLACE FUNCTION mlplat.undeploy(project text, deployment text)
RETURNS mlplat.accepted LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
  api mlplat.api_call := mlplat._api_begin('undeploy', undeploy.project);
  -- locked and read again: a concurrent undeploy finds this one's DELETING
  seen mlplat.deployments := mlplat._lock_again(mlplat._find_deployment(api.pid, undeploy.deployment));
  r mlplat.accepted := (pg_catalog.gen_random_uuid(), 'deployment', seen.id, seen.desired_revision, seen.status,
                        false)::mlplat.accepted;
BEGIN
  IF mlplat.deployment_is_deleting(seen.status) THEN
    RETURN r;      -- already asked for
  END IF;
  PERFORM mlplat._no_active_rollout(seen, 'undeploy');
  UPDATE mlplat.deployments x
  SET status = 'DELETING', status_reason = 'undeploy requested', generation = x.generation + 1,
      row_version = x.row_version + 1, attempts = 0, last_error = NULL, next_attempt_at = pg_catalog.now(),
      traceparent = api.tp, updated_at = pg_catalog.now()
  WHERE x.id = seen.id;
  r.status := 'DELETING';
  RETURN mlplat._api_accept(api, r,
    pg_catalog.jsonb_build_object('revision', seen.desired_revision), 'deployments');
END $$;

CREATE OR REPLACE FUNCTION mlplat.cancel_run(project text, run text)
RETURNS mlplat.accepted LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
  api mlplat.api_call := mlplat._api_begin('cancel_run', cancel_run.project);
  -- locked and read again: a concurrent cancel finds this one's CANCEL_REQUESTED
  seen mlplat.runs := mlplat._lock_again(mlplat._find_run(api.pid, cancel_run.run));
  r mlplat.accepted := (pg_catalog.gen_random_uuid(), seen.kind, seen.id, NULL, seen.status, false)::mlplat.accepted;
BEGIN
  IF seen.status IN ('CANCEL_REQUESTED', 'CANCELLED') THEN
    RETURN r;      -- already asked for
  END IF;
  IF seen.status IN ('SUCCEEDED', 'FAILED') THEN
    PERFORM mlplat._wrong_state('run', seen.name, seen.status, 'cancel_run', 'The run has already finished.');
  END IF;
  UPDATE mlplat.runs x
  SET status = 'CANCEL_REQUESTED', status_reason = 'cancel requested', generation = x.generation + 1,
      row_version = x.row_version + 1, attempts = 0, next_attempt_at = pg_catalog.now(), traceparent = api.tp,
      updated_at = pg_catalog.now()
  WHERE x.id = seen.id;
  r.status := 'CANCEL_REQUESTED';
  RETURN mlplat._api_accept(api, r,
    pg_catalog.jsonb_build_object('from', seen.status), 'runs');
END $$;

CREATE OR REPLACE FUNCTION mlplat.set_model_stage(project text, model text, version text, stage text)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
  api mlplat.api_call := mlplat._api_begin('set_model_stage', set_model_stage.project);
  r mlplat.accepted := (pg_catalog.gen_random_uuid(), 'model_version', NULL, NULL, NULL, false)::mlplat.accepted;
  v mlplat.model_versions;
  demoted text;
  moved boolean;
BEGIN
  PERFORM mlplat._bound_api_waits();
  IF set_model_stage.stage IS NULL OR set_model_stage.stage NOT IN ('NONE', 'CANDIDATE', 'CHAMPION', 'ARCHIVED') THEN
    PERFORM mlplat._bad_input('stage', 'must be one of NONE, CANDIDATE, CHAMPION, ARCHIVED',
      'CHAMPION serves production; CANDIDATE may be deployed for trials.');
  END IF;
  v := mlplat._find_version(api.pid, set_model_stage.model, set_model_stage.version);
  -- Stage changes of one model are serialized on the model row.
  PERFORM 1 FROM mlplat.models m WHERE m.id = v.model_id FOR UPDATE;
  SELECT * INTO v FROM mlplat.model_versions mv WHERE mv.id = v.id;
  r.entity_id := v.id;
  IF v.stage = set_model_stage.stage THEN
    r.status := v.stage;
    RETURN r;
  END IF;
  IF set_model_stage.stage = 'CHAMPION' THEN
    -- One CHAMPION per model: the previous one is ARCHIVED.
    UPDATE mlplat.model_versions mv SET stage = 'ARCHIVED', stage_changed_at = pg_catalog.clock_timestamp()
    WHERE mv.model_id = v.model_id AND mv.stage = 'CHAMPION'
    RETURNING mv.version INTO demoted;
  END IF;
  UPDATE mlplat.model_versions mv SET stage = set_model_stage.stage, stage_changed_at = pg_catalog.clock_timestamp()
  WHERE mv.id = v.id;
  moved := mlplat._sync_aliases(v.model_id, api.tp);
  r.status := set_model_stage.stage;
  RETURN mlplat._api_accept(api, r,
    pg_catalog.jsonb_build_object('model', set_model_stage.model, 'version', v.version, 'from', v.stage,
                                  'to', set_model_stage.stage, 'archived_champion', demoted, 'aliases_moved', moved),
    CASE WHEN moved THEN 'model_aliases' END);
END $$;

CREATE OR REPLACE FUNCTION mlplat._rollout_request(p_action text, p_project text, p_deployment text) RETURNS mlplat.accepted
LANGUAGE plpgsql AS $$
DECLARE
  api mlplat.api_call := mlplat._api_begin(p_action, p_project);
  r mlplat.accepted := (pg_catalog.gen_random_uuid(), 'rollout', NULL, NULL, NULL, false)::mlplat.accepted;
  d mlplat.deployments := mlplat._find_deployment(api.pid, p_deployment);
  seen mlplat.rollouts;
  want text := CASE p_action WHEN 'promote_rollout' THEN 'PROMOTE' ELSE 'ABORT' END;
  new_status text;
BEGIN
  PERFORM mlplat._bound_api_waits();
  -- locked: the reconciler writes the row every few hundred ms while a rollout runs, and a
  -- person's promote or abort must not fail on that (the reconciler's next write-back loses
  -- its compare-and-swap instead, and reads the row again)
  SELECT * INTO seen FROM mlplat.rollouts ro WHERE ro.deployment_id = d.id ORDER BY ro.id DESC LIMIT 1 FOR UPDATE;
  IF seen.id IS NULL OR NOT mlplat.rollout_is_active(seen.status) THEN
    RAISE EXCEPTION USING ERRCODE = '55000',
      MESSAGE = pg_catalog.format('deployment "%s" has no active rollout: %s is not possible', d.name, p_action),
      DETAIL = pg_catalog.format('The latest rollout is %s.', coalesce(seen.status, 'absent')),
      HINT = 'Start one with mlplat.start_rollout().';
  END IF;
  r.entity_id := seen.id; r.revision := seen.target_revision;
  IF seen.requested_action IS NOT DISTINCT FROM want THEN
    r.status := seen.status;    -- already requested
    RETURN r;
  END IF;
  IF seen.status = 'ROLLING_BACK' OR seen.requested_action IS NOT NULL THEN
    PERFORM mlplat._wrong_state('rollout of deployment', d.name, coalesce(seen.requested_action || ' requested', seen.status),
      p_action, 'The rollout is already being finished; watch mlplat.rollout_status.');
  END IF;
  new_status := CASE want WHEN 'ABORT' THEN 'ROLLING_BACK' ELSE seen.status END;
  UPDATE mlplat.rollouts ro
  SET requested_action = want, status = new_status,
      status_reason = pg_catalog.format('%s requested', pg_catalog.lower(want)),
      generation = ro.generation + 1, row_version = ro.row_version + 1, attempts = 0,
      next_attempt_at = pg_catalog.now(), traceparent = api.tp, updated_at = pg_catalog.now()
  WHERE ro.id = seen.id;   -- no compare-and-swap: the row is locked since it was read (FOR UPDATE above)
  r.status := new_status;
  RETURN mlplat._api_accept(api, r,
    pg_catalog.jsonb_build_object('deployment', d.name, 'from', seen.status, 'requested', want), 'rollouts');
END $$;

CREATE OR REPLACE FUNCTION mlplat.promote_rollout(project text, deployment text)
RETURNS mlplat.accepted LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp SET lock_timeout = '5s' AS $$
  SELECT * FROM mlplat._rollout_request('promote_rollout', project, deployment)
$$;

CREATE OR REPLACE FUNCTION mlplat.abort_rollout(project text, deployment text)
RETURNS mlplat.accepted LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp SET lock_timeout = '5s' AS $$
  SELECT * FROM mlplat._rollout_request('abort_rollout', project, deployment)
$$;
