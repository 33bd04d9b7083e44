-- 0.2.0 -> 0.3.0, part 80: deploy() writes its API span in the statement that writes the revision,
-- the deployment, the idempotency result and the audit event (bench/deploy: a separate
-- _span_api call and statement per deploy).  Same rows, same values.
CREATE OR REPLACE FUNCTION mlplat.deploy(project text, deployment text, model text, version text, runtime_kind text,
                              gpus int DEFAULT 0, min_replicas int DEFAULT 1, max_replicas int DEFAULT 1,
                              env jsonb DEFAULT '{}', idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
  pid bigint := mlplat._authorize('deploy', deploy.project);
  who text := mlplat._actor();
  r mlplat.accepted;
  tp text := mlplat._traceparent();
  v mlplat.model_versions;
  p mlplat.projects;
  d mlplat.deployments;
  seen_alloc int;
  old_alloc int;
  alloc int;
  need_quota boolean;
  v_intent jsonb;
  rev int;
  v_spec jsonb;
  rollout_active boolean;
  unchanged boolean;
  inst text;
  q record;
BEGIN
  r := mlplat._idem_claim('deploy', deploy.idempotency_key,
         pg_catalog.jsonb_build_array(deploy.project, deploy.deployment, deploy.model, deploy.version,
           deploy.runtime_kind, deploy.gpus, deploy.min_replicas, deploy.max_replicas, deploy.env), who);
  IF r.request_id IS NOT NULL THEN RETURN r; END IF;

  -- validate (nothing is written before this passes)
  IF deploy.deployment IS NULL OR NOT mlplat._is_dns1035_label(deploy.deployment, 45) THEN
    PERFORM mlplat._bad_input('deployment', 'must be a DNS-1035 label of 1 to 45 characters',
      'Start with a letter; use lower-case letters, digits and ''-''. KServe appends suffixes up to 63 characters.');
  END IF;
  IF deploy.runtime_kind IS NULL OR NOT mlplat.is_dns_label(deploy.runtime_kind, 63) THEN
    PERFORM mlplat._check_label('runtime_kind', deploy.runtime_kind, 63);   -- the same rule; raises
  END IF;
  IF deploy.gpus IS NULL OR deploy.gpus NOT BETWEEN 0 AND 64 THEN
    PERFORM mlplat._bad_input('gpus', 'must be an integer from 0 to 64 (GPUs per replica)', 'Pass 0 for CPU-only serving.');
  END IF;
  IF deploy.min_replicas IS NULL OR deploy.min_replicas NOT BETWEEN 0 AND 100 THEN
    PERFORM mlplat._bad_input('min_replicas', 'must be an integer from 0 to 100', '0 allows scale to zero.');
  END IF;
  IF deploy.max_replicas IS NULL OR deploy.max_replicas NOT BETWEEN 1 AND 100 OR deploy.max_replicas < deploy.min_replicas THEN
    PERFORM mlplat._bad_input('max_replicas', 'must be an integer from 1 to 100 and at least min_replicas',
      'Raise max_replicas or lower min_replicas.');
  END IF;
  IF deploy.env IS NOT NULL AND NOT mlplat._env_ok(deploy.env) THEN
    PERFORM mlplat._check_env('env', deploy.env);   -- decides, and names what is wrong
  END IF;
  v := mlplat._find_version(pid, deploy.model, deploy.version);
  IF NOT mlplat.model_stage_is_deployable(v.stage) THEN
    RAISE EXCEPTION USING ERRCODE = '55000',
      MESSAGE = pg_catalog.format('model version "%s" of "%s" is %s: deploy needs CANDIDATE or CHAMPION',
                                  v.version, deploy.model, v.stage),
      DETAIL = 'Only versions staged for serving may be deployed.',
      HINT = 'Stage it with mlplat.set_model_stage(..., ''CANDIDATE'') first.';
  END IF;
  IF v.runtime_kind <> deploy.runtime_kind THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = 'invalid runtime_kind: does not match the model version''s runtime kind',
      DETAIL = pg_catalog.format('The version was registered for runtime kind "%s".', v.runtime_kind),
      HINT = 'Deploy with the runtime kind the version was registered with.';
  END IF;

  v_intent := pg_catalog.jsonb_build_object('model', deploy.model, 'version', deploy.version,
              'runtime_kind', deploy.runtime_kind, 'gpus', deploy.gpus, 'min_replicas', deploy.min_replicas,
              'max_replicas', deploy.max_replicas, 'env', coalesce(deploy.env, '{}'::jsonb));
  alloc := deploy.gpus * deploy.max_replicas;

  -- lock order everywhere: the project row, then the deployment row
  SELECT CASE WHEN x.status = 'DELETED' THEN 0 ELSE x.desired_gpus END INTO seen_alloc
  FROM mlplat.deployments x WHERE x.project_id = pid AND x.name = deploy.deployment;
  need_quota := alloc > coalesce(seen_alloc, 0);
  p := mlplat._lock_project(pid, need_quota, 'deploy');

  -- the deployment row, whether a rollout is active, whether the desired revision is this request,
  -- and (for the manifest) the installation id
  SELECT x AS dep,
         EXISTS (SELECT 1 FROM mlplat.rollouts ro WHERE ro.deployment_id = x.id
                 AND mlplat.rollout_is_active(ro.status)) AS ra,
         NOT mlplat.deployment_is_deleting(x.status) AND EXISTS (SELECT 1 FROM mlplat.deployment_revisions dr
                 WHERE dr.deployment_id = x.id AND dr.revision = x.desired_revision
                   AND dr.intent = v_intent AND dr.model_version_id = v.id) AS un,
         (SELECT i.instance_id FROM mlplat.installation i) AS inst
  INTO q
  FROM mlplat.deployments x WHERE x.project_id = pid AND x.name = deploy.deployment FOR NO KEY UPDATE OF x;
  IF FOUND THEN
    d := q.dep; rollout_active := q.ra; unchanged := q.un; inst := q.inst;
  ELSE
    inst := (SELECT i.instance_id FROM mlplat.installation i);
    INSERT INTO mlplat.deployments (project_id, name, traceparent) VALUES (pid, deploy.deployment, tp)
    ON CONFLICT ON CONSTRAINT deployments_project_id_name_key DO NOTHING;
    SELECT * INTO d FROM mlplat.deployments x WHERE x.project_id = pid AND x.name = deploy.deployment FOR NO KEY UPDATE;
    rollout_active := false; unchanged := false;
  END IF;
  old_alloc := CASE WHEN d.status = 'DELETED' THEN 0 ELSE d.desired_gpus END;
  IF alloc > old_alloc AND NOT need_quota THEN
    PERFORM mlplat._cas_lost('deployment', d.name);   -- its allocation dropped under us
  END IF;
  -- DELETING: the intent is taken; the reconciler applies the new revision only once the
  -- InferenceService being deleted is gone (a new object, never the terminating one), or onto
  -- the old one if its DELETE was not sent yet.  Its GPUs stay counted until then (old_alloc).
  IF rollout_active THEN
    PERFORM mlplat._no_active_rollout(d, 'deploy');   -- raises the error
  END IF;

  r := (pg_catalog.gen_random_uuid(), 'deployment', d.id, NULL, NULL, false)::mlplat.accepted;
  -- Deploying what is already desired changes nothing: the existing revision is the answer.
  IF unchanged THEN
    r.revision := d.desired_revision; r.status := d.status;
    PERFORM mlplat._audit('deploy', deploy.project, pid, 'deployment', d.id, r.request_id, tp,
      pg_catalog.jsonb_build_object('revision', d.desired_revision, 'unchanged', true), who);
    PERFORM mlplat._idem_store('deploy', deploy.idempotency_key, r, who);
    RETURN r;
  END IF;
  IF need_quota THEN
    PERFORM mlplat._check_gpu_quota(p, alloc, d.id);
  END IF;

  rev := d.latest_revision + 1;
  v_spec := mlplat._render_isvc(deploy.project, deploy.deployment, rev,
            inst, v.model_format, v.runtime_kind, v.artifact_uri,
            v.artifact_sha256, deploy.gpus, deploy.min_replicas, deploy.max_replicas, deploy.env);
  r.revision := rev; r.status := 'DEPLOYING';
  -- one statement: the new revision, the deployment's desired state, the idempotency result
  -- (what _idem_store does, for the key claimed above), the API span, the audit event
  WITH new_rev AS (
    INSERT INTO mlplat.deployment_revisions (deployment_id, revision, project_id, model_version_id, intent,
                                             spec, spec_digest, created_by, traceparent)
    VALUES (d.id, rev, pid, v.id, v_intent, v_spec, mlplat._spec_digest(v_spec), who, tp)
  ), upd AS (
    UPDATE mlplat.deployments x
    SET previous_revision = CASE WHEN mlplat.deployment_is_deleting(x.status) THEN NULL ELSE x.desired_revision END,
        desired_revision = rev, latest_revision = rev, desired_gpus = alloc,
        generation = x.generation + 1, row_version = x.row_version + 1,
        status = 'DEPLOYING', status_reason = pg_catalog.format('revision %s requested', rev),
        attempts = 0, last_error = NULL, next_attempt_at = pg_catalog.now(), traceparent = tp,
        ready_wait_since = pg_catalog.now(), updated_at = pg_catalog.now()
    WHERE x.id = d.id
  ), idem AS (
    UPDATE mlplat.idempotency_keys k SET result = r
    WHERE deploy.idempotency_key IS NOT NULL
      AND k.principal = who AND k.action = 'deploy' AND k.key = deploy.idempotency_key
  ), span AS (
    -- the API span, as mlplat._span_api writes it (a call and a statement of its own cost
    -- about a quarter of what the span row costs)
    INSERT INTO mlplat.spans (trace_id, span_id, parent_span_id, name, kind, start_time, end_time, status,
                              attributes, project_id, entity, entity_id)
    SELECT pg_catalog.substr(tp, 4, 32), pg_catalog.substr(tp, 37, 16),
           CASE WHEN pg_catalog.substr(c.caller, 4, 32) = pg_catalog.substr(tp, 4, 32)
                THEN pg_catalog.substr(c.caller, 37, 16) END,
           'mlplat.deploy', 'SERVER', pg_catalog.statement_timestamp(), pg_catalog.clock_timestamp(), 'UNSET',
           pg_catalog.jsonb_build_object('mlplat.request_id', r.request_id), pid, 'deployment', d.id
    FROM (SELECT pg_catalog.current_setting('mlplat.traceparent', true) AS caller) c
    WHERE tp IS NOT NULL AND pg_catalog.length(tp) = 55
    ON CONFLICT DO NOTHING
  )
  INSERT INTO mlplat.audit_events (actor, db_role, action, project, project_id, entity, entity_id,
                                   request_id, trace_id, traceparent, detail)
  VALUES (who, mlplat._db_role(), 'deploy', deploy.project, pid, 'deployment', d.id, r.request_id,
          pg_catalog.split_part(tp, '-', 2), tp,
          pg_catalog.jsonb_build_object('revision', rev, 'model', deploy.model, 'version', deploy.version,
                                        'gpus', deploy.gpus, 'max_replicas', deploy.max_replicas));
  PERFORM mlplat._wake_on_commit('deployments');
  RETURN r;
END $$;
