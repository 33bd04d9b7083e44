-- 0.2.0 -> 0.3.0, part 99 (z_api_shape2): a lookup's "not there" decided once (issue 19).
-- Each function it changes is defined here only (earlier parts no longer carry a copy), so it
-- is named to run after the other 99 parts.
--
-- mlplat._found (sql/install/14_api_core.sql): the row a finder's one query found, or 42704.
-- The finders that each held their own IF ... RAISE (_find_deployment, _find_run,
-- _find_campaign, _find_candidate, _find_artifact, _lab_run_of), with the same errors as before.
--
-- mlplat._lab_begin (sql/install/39_api_lab.sql): the preamble of the lab calls that change
-- one named row, as _api_begin is for the others; disable_lab_profile, revoke_lab_approval
-- and cancel_lab_run begin with it and answer through _api_accept.
--
-- mlplat._lab_idem_claim takes p_optional, so register_lab_profile and approve_lab
-- claim their optional key through it instead of each wrapping _idem_claim by hand.
-- They begin with _lab_begin too (its p_key: the call's key) and answer through
-- _api_accept (_api_keep for a profile registered again), instead of each writing its own
-- audit and key store.
--
-- mlplat._check_gpu_quota (unchanged since 0.2.0 until now) takes the refusal's words (p_words), so
-- start_rollout checks its canary's GPUs with it instead of a copy of the rule.

CREATE FUNCTION mlplat._found(p_row anyelement, p_entity text, p_name text, p_hint text, p_message text DEFAULT NULL)
RETURNS anyelement LANGUAGE plpgsql AS $$
BEGIN
  IF p_row IS NULL AND p_message IS NULL THEN
    PERFORM mlplat._no_such(p_entity, p_name, p_hint);
  ELSIF p_row IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = p_message, HINT = p_hint;
  END IF;
  RETURN p_row;
END $$;

-- (a fresh install revokes every internal function in 45_api_views)
REVOKE ALL ON FUNCTION mlplat._found(anyelement, text, text, text, text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION mlplat._find_deployment(p_project_id bigint, p_deployment text)
RETURNS mlplat.deployments LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN mlplat._found((SELECT x FROM mlplat.deployments x WHERE x.project_id = p_project_id AND x.name = p_deployment),
                       'deployment', p_deployment, 'Create it with mlplat.deploy().');
END $$;

CREATE OR REPLACE FUNCTION mlplat._find_run(p_project_id bigint, p_run text)
RETURNS mlplat.runs LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN mlplat._found((SELECT x FROM mlplat.runs x WHERE x.project_id = p_project_id AND x.name = p_run),
                       'run', p_run, 'See mlplat.run_status for the project''s runs.');
END $$;
REVOKE ALL ON FUNCTION mlplat._find_run(bigint, text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION mlplat._find_campaign(p_project_id bigint, p_campaign text) RETURNS mlplat.campaigns
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN mlplat._found((SELECT x FROM mlplat.campaigns x WHERE x.project_id = p_project_id AND x.name = p_campaign),
                       'campaign', p_campaign, 'See mlplat.campaign_status for the project''s campaigns.');
END $$;
REVOKE ALL ON FUNCTION mlplat._find_campaign(bigint, text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION mlplat._find_candidate(p_campaign mlplat.campaigns, p_candidate text) RETURNS mlplat.campaign_candidates
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN mlplat._found((SELECT x FROM mlplat.campaign_candidates x WHERE x.campaign_id = p_campaign.id AND x.name = p_candidate),
                       NULL, NULL, 'See mlplat.campaign_candidate_status.',
                       pg_catalog.format('candidate "%s" does not exist in campaign "%s"', pg_catalog.left(p_candidate, 64), p_campaign.name));
END $$;
REVOKE ALL ON FUNCTION mlplat._find_candidate(mlplat.campaigns, text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION mlplat._find_artifact(p_project_id bigint, p_artifact_id bigint) RETURNS mlplat.optimized_artifacts
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN mlplat._found((SELECT x FROM mlplat.optimized_artifacts x WHERE x.id = p_artifact_id AND x.project_id = p_project_id),
                       NULL, NULL, 'See mlplat.optimized_artifact_status.', pg_catalog.format('optimized artifact %s does not exist', p_artifact_id));
END $$;
REVOKE ALL ON FUNCTION mlplat._find_artifact(bigint, bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION mlplat._lab_run_of(p_project_id bigint, p_id bigint) RETURNS mlplat.lab_runs
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN mlplat._found((SELECT x FROM mlplat.lab_runs x WHERE x.id = p_id AND x.project_id = p_project_id), NULL, NULL,
                       'Lab runs are identified by their id in the project (mlplat.lab_run_status).', 'lab run does not exist');
END $$;
REVOKE ALL ON FUNCTION mlplat._lab_run_of(bigint, bigint) FROM PUBLIC;

CREATE FUNCTION mlplat._lab_begin(p_action text, p_project text, p_missing boolean, p_key text DEFAULT NULL)
RETURNS mlplat.api_call LANGUAGE plpgsql AS $$
DECLARE
  pid bigint := mlplat._authorize_member(p_action, p_project);
BEGIN
  IF p_missing THEN PERFORM mlplat._lab_reject('null_argument'); END IF;
  PERFORM mlplat._bound_api_waits();
  RETURN (p_action, p_project, pid, mlplat._traceparent(), p_key)::mlplat.api_call;
END $$;
-- (a fresh install revokes every internal function in 45_api_views)
REVOKE ALL ON FUNCTION mlplat._lab_begin(text, text, boolean, text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION mlplat.disable_lab_profile(project text, profile_id bigint)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
  api mlplat.api_call := mlplat._lab_begin('disable_lab_profile', disable_lab_profile.project,
                                           disable_lab_profile.profile_id IS NULL);
  found_id bigint;
BEGIN
  UPDATE mlplat.lab_profiles x SET enabled = false
  WHERE x.id = disable_lab_profile.profile_id AND x.project_id = api.pid RETURNING x.id INTO found_id;
  PERFORM mlplat._found(found_id, NULL, NULL, 'Profiles are identified by their id in the project.',
                        'lab profile does not exist');
  RETURN mlplat._api_accept(api,
    (pg_catalog.gen_random_uuid(), 'lab_profile', found_id, NULL, 'DISABLED', false)::mlplat.accepted, '{}');
END $$;

CREATE OR REPLACE FUNCTION mlplat.revoke_lab_approval(project text, approval_id bigint)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
  api mlplat.api_call := mlplat._lab_begin('revoke_lab_approval', revoke_lab_approval.project,
                                           revoke_lab_approval.approval_id IS NULL);
  r mlplat.accepted;
  a mlplat.lab_approvals;
BEGIN
  SELECT * INTO a FROM mlplat.lab_approvals x
  WHERE x.id = revoke_lab_approval.approval_id AND x.project_id = api.pid FOR UPDATE;
  PERFORM mlplat._found(a, NULL, NULL, 'Approvals are identified by their id in the project (mlplat.lab_approval_status).',
                        'lab approval does not exist');
  r := (pg_catalog.gen_random_uuid(), 'lab_approval', a.id, NULL, 'REVOKED', false)::mlplat.accepted;
  IF a.revoked_at IS NOT NULL THEN
    r.replayed := true;   -- final: a repeat changes nothing
    RETURN r;
  END IF;
  UPDATE mlplat.lab_approvals x SET revoked_at = pg_catalog.now(), revoked_by = mlplat._actor() WHERE x.id = a.id;
  -- No wake: a run already dispatched under the approval runs on; a QUEUED one is assessed
  -- again by the lab_runs worker's next claim once its node's lease is free (a resync at the
  -- latest) and fails ADMISSION_WITHDRAWN then.
  RETURN mlplat._api_accept(api, r, '{}');
END $$;

CREATE OR REPLACE FUNCTION mlplat.cancel_lab_run(project text, lab_run_id bigint)
RETURNS mlplat.accepted LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
  api mlplat.api_call := mlplat._lab_begin('cancel_lab_run', cancel_lab_run.project, cancel_lab_run.lab_run_id IS NULL);
  who text := mlplat._actor();
  r mlplat.accepted;
  seen mlplat.lab_runs;
BEGIN
  -- locked and read again: a concurrent cancel finds this one's CANCEL_REQUESTED
  seen := mlplat._lock_again(mlplat._lab_run_of(api.pid, cancel_lab_run.lab_run_id));
  r := (pg_catalog.gen_random_uuid(), 'lab_run', seen.id, NULL, seen.status, false)::mlplat.accepted;
  IF seen.status = 'CANCEL_REQUESTED' THEN
    r.replayed := true;   -- already requested: a repeat changes nothing
    RETURN r;
  END IF;
  IF seen.status IN ('SUCCEEDED', 'FAILED', 'CANCELLED') THEN
    PERFORM mlplat._wrong_state('lab run', seen.id::text, seen.status, 'cancel_lab_run', 'The run has already ended.');
  END IF;
  UPDATE mlplat.lab_runs x
  SET status = 'CANCEL_REQUESTED', cancel_requested_at = pg_catalog.now(), cancel_requested_by = who,
      generation = x.generation + 1, row_version = x.row_version + 1, next_attempt_at = pg_catalog.now(),
      updated_at = pg_catalog.now()
  WHERE x.id = seen.id;
  PERFORM mlplat._lab_transition(seen, 'CANCEL_REQUESTED', NULL, who, NULL);
  r.status := 'CANCEL_REQUESTED';
  RETURN mlplat._api_accept(api, r, pg_catalog.jsonb_build_object('from_status', seen.status), 'lab_runs');
END $$;

CREATE FUNCTION mlplat._lab_idem_claim(p_action text, p_key text, p_request jsonb, p_who text,
                                       p_optional boolean DEFAULT false)
RETURNS mlplat.accepted LANGUAGE plpgsql AS $$
BEGIN
  IF p_key IS NULL AND NOT p_optional THEN
    PERFORM mlplat._lab_reject('idempotency_key_required');
  END IF;
  IF pg_catalog.length(p_key) NOT BETWEEN 1 AND 128 THEN
    PERFORM mlplat._lab_reject('bad_idempotency_key');
  END IF;
  BEGIN
    RETURN mlplat._idem_claim(p_action, p_key, p_request, p_who);
  EXCEPTION WHEN invalid_parameter_value THEN
    PERFORM mlplat._lab_reject('bad_idempotency_key');
  END;
  RETURN NULL;
END $$;
-- (a fresh install revokes every internal function in 45_api_views)
REVOKE ALL ON FUNCTION mlplat._lab_idem_claim(text, text, jsonb, text, boolean) FROM PUBLIC;

CREATE OR REPLACE FUNCTION mlplat.register_lab_profile(project text, name text, spec jsonb, idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
  api mlplat.api_call := mlplat._lab_begin('register_lab_profile', register_lab_profile.project, false,
                                           register_lab_profile.idempotency_key);
  who text := mlplat._actor();
  r mlplat.accepted;
  prof mlplat.lab_profiles;
  cid text;
  added boolean;
BEGIN
  r := mlplat._lab_idem_claim(api.action, api.idempotency_key,
         pg_catalog.jsonb_build_array(register_lab_profile.project, register_lab_profile.name, register_lab_profile.spec),
         who, true);
  IF r.request_id IS NOT NULL THEN RETURN r; END IF;
  IF register_lab_profile.name IS NULL OR register_lab_profile.spec IS NULL THEN
    PERFORM mlplat._lab_reject('null_argument');
  END IF;
  IF NOT mlplat.is_dns_label(register_lab_profile.name, 63) THEN
    PERFORM mlplat._lab_reject('bad_name');
  END IF;
  IF NOT mlplat._lab_profile_ok(register_lab_profile.spec) THEN
    PERFORM mlplat._lab_reject('profile_spec');
  END IF;
  PERFORM mlplat._lock_project(api.pid, false, api.action);
  cid := mlplat.content_id(register_lab_profile.spec);
  SELECT * INTO prof FROM mlplat.lab_profiles x WHERE x.project_id = api.pid AND x.name = register_lab_profile.name;
  added := prof.id IS NULL;
  IF added THEN
    INSERT INTO mlplat.lab_profiles (project_id, name, spec, content_id, runtime_kind, image, gpus, accelerator,
                                     families, max_execution_seconds, max_output_bytes, created_by)
    VALUES (api.pid, register_lab_profile.name, register_lab_profile.spec, cid,
            register_lab_profile.spec->>'runtime_kind', register_lab_profile.spec->>'image',
            (register_lab_profile.spec->>'gpus')::int, register_lab_profile.spec->>'accelerator',
            ARRAY(SELECT pg_catalog.jsonb_array_elements_text(register_lab_profile.spec->'families')),
            (register_lab_profile.spec->>'max_execution_seconds')::int,
            (register_lab_profile.spec->>'max_output_bytes')::int, who)
    RETURNING * INTO prof;
  END IF;
  -- a profile is immutable, as every platform registration: the same spec again is the
  -- existing profile (nothing written, nothing audited, the answer kept for the key),
  -- another spec under its name is 42710
  RETURN mlplat._registered(api,
    (pg_catalog.gen_random_uuid(), 'lab_profile', prof.id, NULL,
     CASE WHEN prof.enabled THEN 'ENABLED' ELSE 'DISABLED' END, false)::mlplat.accepted,
    added, prof.content_id = cid,
    ARRAY['lab profile already exists with another spec', 'A profile''s spec never changes.',
          'Register the new spec under a new name and disable the old profile.'],
    pg_catalog.jsonb_build_object('content_id', cid));
END $$;

CREATE OR REPLACE FUNCTION mlplat.approve_lab(project text, candidate_id bigint, artifact_sha256 text, runtime_profile_id bigint,
                                   node_id bigint, families text[], limits jsonb, max_runs int, valid_for interval,
                                   idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
  api mlplat.api_call := mlplat._lab_begin('approve_lab', approve_lab.project, false, approve_lab.idempotency_key);
  who text := mlplat._actor();
  r mlplat.accepted;
  req jsonb;
  lim jsonb;
  v mlplat.model_versions;
  aid bigint;
BEGIN
  req := pg_catalog.jsonb_build_array(approve_lab.project, approve_lab.candidate_id, approve_lab.artifact_sha256,
           approve_lab.runtime_profile_id, approve_lab.node_id, approve_lab.families, approve_lab.limits,
           approve_lab.max_runs, approve_lab.valid_for::text);
  r := mlplat._lab_idem_claim(api.action, api.idempotency_key, req, who, true);
  IF r.request_id IS NOT NULL THEN RETURN r; END IF;
  PERFORM mlplat._lab_check_ids(approve_lab.candidate_id, approve_lab.artifact_sha256,
    approve_lab.runtime_profile_id, approve_lab.node_id, NULL, false);
  IF approve_lab.families IS NULL THEN PERFORM mlplat._lab_reject('null_argument'); END IF;
  IF pg_catalog.cardinality(approve_lab.families) NOT BETWEEN 1 AND 5
     OR EXISTS (SELECT 1 FROM pg_catalog.unnest(approve_lab.families) f
                WHERE f IS NULL OR f NOT IN ('text_generation', 'embedding', 'tabular_predict',
                                             'image_classification', 'speech_to_text')) THEN
    PERFORM mlplat._lab_reject('unknown_family');
  END IF;
  lim := mlplat._lab_limits(approve_lab.limits, true);
  IF approve_lab.max_runs IS NULL THEN PERFORM mlplat._lab_reject('null_argument'); END IF;
  IF approve_lab.max_runs NOT BETWEEN 1 AND 1000 THEN PERFORM mlplat._lab_reject('bad_max_runs'); END IF;
  IF approve_lab.valid_for IS NULL THEN PERFORM mlplat._lab_reject('null_argument'); END IF;
  IF approve_lab.valid_for <= '0'::interval OR approve_lab.valid_for > '30 days'::interval THEN
    PERFORM mlplat._lab_reject('bad_valid_for');
  END IF;
  PERFORM mlplat._lock_project(api.pid, false, api.action);
  SELECT * INTO v FROM mlplat.model_versions x WHERE x.id = approve_lab.candidate_id AND x.project_id = api.pid;
  IF v.id IS NULL
     OR NOT EXISTS (SELECT 1 FROM mlplat.lab_profiles x WHERE x.id = approve_lab.runtime_profile_id AND x.project_id = api.pid)
     OR NOT EXISTS (SELECT 1 FROM mlplat.lab_nodes x WHERE x.id = approve_lab.node_id) THEN
    RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = 'lab approval refers to an unknown id',
      DETAIL = 'The candidate and runtime profile must be the project''s, the node a registered lab node.',
      HINT = 'Take the ids from mlplat.model_versions, mlplat.lab_profiles and mlplat.lab_node_status.';
  END IF;
  IF v.artifact_sha256 <> approve_lab.artifact_sha256 THEN
    RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = 'lab approval artifact does not match the candidate',
      DETAIL = 'An approval binds the exact artifact the candidate was registered with.',
      HINT = 'Pass the candidate''s artifact_sha256.';
  END IF;
  INSERT INTO mlplat.lab_approvals (project_id, candidate_id, artifact_sha256, runtime_profile_id, node_id, families,
                                    limits, max_runs, approved_by, db_role, valid_for, expires_at, request_hash)
  VALUES (api.pid, approve_lab.candidate_id, approve_lab.artifact_sha256, approve_lab.runtime_profile_id,
          approve_lab.node_id, ARRAY(SELECT DISTINCT f FROM pg_catalog.unnest(approve_lab.families) f ORDER BY 1),
          lim, approve_lab.max_runs, who, mlplat._db_role(), approve_lab.valid_for,
          pg_catalog.now() + approve_lab.valid_for, mlplat.content_id(req))
  RETURNING id INTO aid;
  RETURN mlplat._api_accept(api,
    (pg_catalog.gen_random_uuid(), 'lab_approval', aid, NULL, 'APPROVED', false)::mlplat.accepted,
    pg_catalog.jsonb_build_object('candidate_id', approve_lab.candidate_id, 'artifact_sha256', approve_lab.artifact_sha256,
      'runtime_profile_id', approve_lab.runtime_profile_id, 'node_id', approve_lab.node_id,
      'families', approve_lab.families, 'limits', lim, 'max_runs', approve_lab.max_runs,
      'valid_for', approve_lab.valid_for::text));
END $$;

DROP FUNCTION mlplat._check_gpu_quota(mlplat.projects, bigint, bigint);
CREATE FUNCTION mlplat._check_gpu_quota(p mlplat.projects, p_more bigint, p_except_deployment bigint,
                                        p_words text[] DEFAULT NULL) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
  used bigint := mlplat._gpus_in_use(p.id, p_except_deployment);
BEGIN
  IF used + p_more > p.gpu_quota THEN
    p_words := coalesce(p_words, ARRAY['GPU quota of project "%s" exceeded: %s requested, %s of %s in use',
      'A deployment counts gpus x max_replicas; active runs count their GPUs.',
      'Ask a project owner to raise the quota (set_project_quota), or request fewer GPUs or replicas.']);
    RAISE EXCEPTION USING ERRCODE = '23514',
      MESSAGE = pg_catalog.format(p_words[1], p.name, p_more, used, p.gpu_quota), DETAIL = p_words[2], HINT = p_words[3];
  END IF;
END $$;
-- (a fresh install revokes every internal function in 45_api_views)
REVOKE ALL ON FUNCTION mlplat._check_gpu_quota(mlplat.projects, bigint, bigint, text[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION mlplat.start_rollout(project text, deployment text, model text, version text, policy jsonb,
                                     idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp SET lock_timeout = '5s' AS $$
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
