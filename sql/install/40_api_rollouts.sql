-- 40_api_rollouts: canary rollout intents.  The rollouts reconciler (its own issue) shifts
-- traffic, reads metrics and records decisions; these functions only record what is wanted.

-- Validate a rollout policy and return it with defaults filled in.
CREATE FUNCTION mlplat._check_policy(policy jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  allowed text[] := ARRAY['steps', 'ceiling', 'min_samples', 'window_seconds', 'max_error_rate',
                          'max_p95_ms', 'max_error_rate_ratio', 'max_p95_ratio'];
  k text;
  s jsonb;
  i int := 0;
  prev numeric := 0;
  f numeric;
  ceiling numeric := 1;
  res jsonb;
BEGIN
  IF policy IS NULL OR pg_catalog.jsonb_typeof(policy) <> 'object' THEN
    PERFORM mlplat._bad_input('policy', 'must be a JSON object', 'Pass e.g. {"steps": [0.1, 0.5, 1]}.');
  END IF;
  FOR k IN SELECT pg_catalog.jsonb_object_keys(policy) LOOP
    IF NOT k = ANY (allowed) THEN
      PERFORM mlplat._bad_input('policy', pg_catalog.format('unknown key "%s"', pg_catalog.left(k, 64)),
        pg_catalog.format('Allowed keys: %s.', pg_catalog.array_to_string(allowed, ', ')));
    END IF;
  END LOOP;
  IF policy ? 'ceiling' THEN
    ceiling := mlplat._json_num('policy.ceiling', policy->'ceiling', 0, 1, false, true);
  END IF;
  PERFORM mlplat._json_array('policy.steps', policy->'steps', 1, 20,
    'is required: an array of 1 to 20 traffic fractions', 'Fractions are in (0, 1], e.g. [0.05, 0.25, 0.5, 1].');
  FOR s IN SELECT e FROM pg_catalog.jsonb_array_elements(policy->'steps') e LOOP
    i := i + 1;
    f := mlplat._json_num(pg_catalog.format('policy.steps[%s]', i), s, 0, 1, false, true);
    IF f <= prev THEN
      PERFORM mlplat._bad_input('policy.steps', 'fractions must increase strictly', 'Sort the steps and drop repeats.');
    END IF;
    IF f > ceiling THEN
      PERFORM mlplat._bad_input('policy.steps', 'a step exceeds the ceiling', 'Lower the step or raise policy.ceiling.');
    END IF;
    prev := f;
  END LOOP;
  res := pg_catalog.jsonb_build_object(
    'steps', policy->'steps',
    'ceiling', ceiling,
    'min_samples', CASE WHEN policy ? 'min_samples'
                        THEN mlplat._json_num('policy.min_samples', policy->'min_samples', 1, 1000000000, true) ELSE 100 END,
    'window_seconds', CASE WHEN policy ? 'window_seconds'
                        THEN mlplat._json_num('policy.window_seconds', policy->'window_seconds', 5, 86400, true) ELSE 300 END,
    'max_error_rate', CASE WHEN policy ? 'max_error_rate'
                        THEN mlplat._json_num('policy.max_error_rate', policy->'max_error_rate', 0, 1, false) ELSE 0.01 END);
  IF policy ? 'max_p95_ms' THEN
    res := res || pg_catalog.jsonb_build_object('max_p95_ms',
      mlplat._json_num('policy.max_p95_ms', policy->'max_p95_ms', 0, 600000, false, true));
  END IF;
  IF policy ? 'max_error_rate_ratio' THEN
    res := res || pg_catalog.jsonb_build_object('max_error_rate_ratio',
      mlplat._json_num('policy.max_error_rate_ratio', policy->'max_error_rate_ratio', 1, 100, false));
  END IF;
  IF policy ? 'max_p95_ratio' THEN
    res := res || pg_catalog.jsonb_build_object('max_p95_ratio',
      mlplat._json_num('policy.max_p95_ratio', policy->'max_p95_ratio', 1, 100, false));
  END IF;
  RETURN res;
END $$;

CREATE FUNCTION mlplat.start_rollout(project text, deployment text, model text, version text, policy jsonb,
                                     idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
  api mlplat.api_call := mlplat._api_begin('start_rollout', start_rollout.project, start_rollout.idempotency_key);
  r mlplat.accepted;
  pol jsonb;
  v mlplat.model_versions;
  d mlplat.deployments;
  base jsonb;
  v_intent jsonb;
  v_spec jsonb;
  rev int;
  ro_id bigint;
  surge bigint;
  prj mlplat.projects;
BEGIN
  r := mlplat._api_claim(api,
         pg_catalog.jsonb_build_array(start_rollout.project, start_rollout.deployment, start_rollout.model,
                                      start_rollout.version, start_rollout.policy));
  IF r.request_id IS NOT NULL THEN RETURN r; END IF;
  pol := mlplat._check_policy(start_rollout.policy);
  d := mlplat._find_deployment(api.pid, start_rollout.deployment);
  v := mlplat._find_version(api.pid, start_rollout.model, start_rollout.version);
  IF NOT mlplat.model_stage_is_deployable(v.stage) THEN
    RAISE EXCEPTION USING ERRCODE = '55000',
      MESSAGE = pg_catalog.format('model version "%s" of "%s" is %s: a rollout needs CANDIDATE or CHAMPION',
                                  v.version, start_rollout.model, v.stage),
      HINT = 'Stage it with mlplat.set_model_stage(..., ''CANDIDATE'') first.';
  END IF;
  -- the canary's GPUs are reserved for the rollout's life: take the quota lock when it has any
  SELECT (dr.intent->>'gpus')::bigint * (dr.intent->>'max_replicas')::bigint INTO surge
  FROM mlplat.deployment_revisions dr WHERE dr.deployment_id = d.id AND dr.revision = d.desired_revision;
  surge := coalesce(surge, 0);
  prj := mlplat._lock_project(api.pid, surge > 0, 'start_rollout');
  SELECT * INTO d FROM mlplat.deployments x WHERE x.id = d.id FOR UPDATE;
  IF d.status NOT IN ('READY', 'DRIFTED') THEN
    PERFORM mlplat._wrong_state('deployment', d.name, d.status, 'start_rollout',
      'A rollout starts from a READY deployment; wait for the current change to finish.');
  END IF;
  -- KServe splits traffic between revisions only in Serverless mode (Knative)
  IF d.observed->>'deployment_mode' = 'RawDeployment' THEN
    RAISE EXCEPTION 'deployment "%" is served in KServe''s RawDeployment mode: a canary rollout needs Serverless mode', d.name
      USING ERRCODE = '55000',
      DETAIL = 'In RawDeployment mode KServe publishes no revisions and no traffic split, so a canary could neither be observed nor rolled back.',
      HINT = 'Change the version with mlplat.deploy(), or serve the deployment in Serverless mode.';
  END IF;
  PERFORM mlplat._no_active_rollout(d, 'start_rollout');
  SELECT dr.intent INTO base FROM mlplat.deployment_revisions dr
  WHERE dr.deployment_id = d.id AND dr.revision = d.desired_revision;
  IF v.runtime_kind <> base->>'runtime_kind' THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = 'invalid version: its runtime kind differs from the deployment''s',
      DETAIL = pg_catalog.format('The deployment serves runtime kind "%s"; the version needs "%s".',
                                 base->>'runtime_kind', v.runtime_kind),
      HINT = 'Roll out a version built for the same runtime, or deploy a new deployment.';
  END IF;
  -- The canary revision: the desired revision's shape with the new model version.
  v_intent := base || pg_catalog.jsonb_build_object('model', start_rollout.model, 'version', v.version);
  -- ... which runs beside the previous revision until the rollout ends: its allocation must fit
  -- next to everything the project has committed (the deployment's own desired GPUs included).
  IF (base->>'gpus')::bigint * (base->>'max_replicas')::bigint <> surge THEN
    PERFORM mlplat._cas_lost('deployment', d.name);   -- redeployed between our read and the lock
  END IF;
  IF surge > 0 THEN
    PERFORM mlplat._check_gpu_quota(prj, surge, NULL, ARRAY[
      'GPU quota of project "%s" cannot hold the canary: it needs %s GPUs, %s of %s are in use',
      'During a rollout the target revision runs beside the previous one, so its gpus x max_replicas are reserved until the rollout ends.',
      'Ask a project owner to raise the quota (set_project_quota), or free GPUs before starting the rollout.']);
  END IF;
  rev := d.latest_revision + 1;
  v_spec := mlplat._render_isvc(start_rollout.project, d.name, rev, (SELECT i.instance_id FROM mlplat.installation i),
              v.model_format, v.runtime_kind, v.artifact_uri, v.artifact_sha256, (base->>'gpus')::int,
              (base->>'min_replicas')::int, (base->>'max_replicas')::int, base->'env');
  INSERT INTO mlplat.deployment_revisions (deployment_id, revision, project_id, model_version_id, intent,
                                           spec, spec_digest, created_by, traceparent)
  VALUES (d.id, rev, api.pid, v.id, v_intent, v_spec, mlplat._spec_digest(v_spec), mlplat._actor(), api.tp);
  UPDATE mlplat.deployments x SET latest_revision = rev, row_version = x.row_version + 1, updated_at = pg_catalog.now()
  WHERE x.id = d.id;
  INSERT INTO mlplat.rollouts (project_id, deployment_id, baseline_revision, target_revision, policy, created_by, traceparent,
                              surge_gpus)
  VALUES (api.pid, d.id, d.desired_revision, rev, pol, mlplat._actor(), api.tp, surge)
  RETURNING id INTO ro_id;
  r := (pg_catalog.gen_random_uuid(), 'rollout', ro_id, rev, 'PROGRESSING', false)::mlplat.accepted;
  RETURN mlplat._api_accept(api, r,
    pg_catalog.jsonb_build_object('deployment', d.name, 'baseline_revision', d.desired_revision,
                                  'target_revision', rev, 'policy', pol), 'rollouts');
END $$;

-- promote/abort: CAS on the active rollout's status + row_version.
CREATE FUNCTION mlplat._rollout_request(p_action text, p_project text, p_deployment text) RETURNS mlplat.accepted
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

CREATE FUNCTION mlplat.promote_rollout(project text, deployment text)
RETURNS mlplat.accepted LANGUAGE sql SET lock_timeout = '5s' AS $$
  SELECT * FROM mlplat._rollout_request('promote_rollout', project, deployment)
$$;

CREATE FUNCTION mlplat.abort_rollout(project text, deployment text)
RETURNS mlplat.accepted LANGUAGE sql SET lock_timeout = '5s' AS $$
  SELECT * FROM mlplat._rollout_request('abort_rollout', project, deployment)
$$;
