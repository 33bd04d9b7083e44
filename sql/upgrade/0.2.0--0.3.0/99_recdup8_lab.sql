-- 0.2.0 -> 0.3.0, part 99 (recdup8): the lab calls that were not on the API call yet
-- (issue 19).  Each function below is defined here only (part 65 no longer carries a copy);
-- the other two this change touches are changed where they are defined: _api_platform
-- (part 01: the refusal's words as arguments) and disable_lab_profile (part 99_z: its
-- "does not exist" through _found).
--
-- start_lab_run and start_lab_probe are one call of mlplat._lab_start, which now does what
-- each did by hand before it: begin (mlplat._lab_begin, with the call's key, as the other
-- lab calls in a project), claim the key, check the ids, and answer through _api_accept
-- instead of writing its audit, key store and wake itself.  register_lab_node and
-- disable_lab_node begin with mlplat._lab_node_begin (_api_platform in the lab's words) and
-- answer through _api_accept; disable_lab_node's "does not exist" is _found's.

-- The preamble of a lab node call: administrators only, in the lab's words.
CREATE FUNCTION mlplat._lab_node_begin(p_action text) RETURNS mlplat.api_call
LANGUAGE sql AS $$
  SELECT mlplat._api_platform(p_action, 'Lab nodes are platform data.', 'Ask a platform administrator.')
$$;

REVOKE ALL ON FUNCTION mlplat._lab_node_begin(text) FROM PUBLIC;

CREATE FUNCTION mlplat.register_lab_node(node text, accelerator text, gpus int)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  api mlplat.api_call := mlplat._lab_node_begin('register_lab_node');
  nid bigint;
BEGIN
  IF register_lab_node.node IS NULL OR register_lab_node.accelerator IS NULL OR register_lab_node.gpus IS NULL THEN
    PERFORM mlplat._lab_reject('null_argument');
  END IF;
  IF pg_catalog.length(register_lab_node.node) > 253
     OR register_lab_node.node !~ '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'
     OR NOT mlplat.is_dns_label(register_lab_node.accelerator, 63) THEN
    PERFORM mlplat._lab_reject('bad_name');
  END IF;
  IF register_lab_node.gpus NOT BETWEEN 1 AND 64 THEN
    PERFORM mlplat._lab_reject('bad_gpus');
  END IF;
  INSERT INTO mlplat.lab_nodes AS x (name, accelerator, gpus, registered_by)
  VALUES (register_lab_node.node, register_lab_node.accelerator, register_lab_node.gpus, mlplat._actor())
  ON CONFLICT (name) DO UPDATE SET accelerator = excluded.accelerator, gpus = excluded.gpus, enabled = true
  RETURNING x.id INTO nid;
  -- No wake: the lab_runs worker's next claim (a resync at the latest) assesses a QUEUED run
  -- on this node again once its lease is free, and dispatches only after a LIST of Nodes has
  -- observed it.
  RETURN mlplat._api_accept(api,
    (pg_catalog.gen_random_uuid(), 'lab_node', nid, NULL, 'ENABLED', false)::mlplat.accepted,
    pg_catalog.jsonb_build_object('node', register_lab_node.node, 'accelerator', register_lab_node.accelerator,
                                  'gpus', register_lab_node.gpus));
END $$;

CREATE FUNCTION mlplat.disable_lab_node(node text)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  api mlplat.api_call := mlplat._lab_node_begin('disable_lab_node');
  nid bigint;
BEGIN
  UPDATE mlplat.lab_nodes x SET enabled = false WHERE x.name = disable_lab_node.node RETURNING x.id INTO nid;
  PERFORM mlplat._found(nid, NULL, NULL, 'See mlplat.lab_node_status for the registered nodes.',
                        'lab node does not exist');
  RETURN mlplat._api_accept(api,
    (pg_catalog.gen_random_uuid(), 'lab_node', nid, NULL, 'DISABLED', false)::mlplat.accepted, '{}');
END $$;

-- A run or a probe (p_probe), from its call's _lab_begin (api) on: the key claimed (a replay
-- answers what the first call did), the ids checked, a run's inputs and limits checked (a
-- probe's limits are fixed), then admission, the row, its first transition, and the answer
-- through _api_accept (the audit event, the idempotent answer, the wake).  p_req: the call's
-- arguments, as its key's request.  A probe is a run with no approval, family or inputs, one
-- attempt and a 600 s queue (its limits).
CREATE FUNCTION mlplat._lab_start(api mlplat.api_call, p_probe boolean, p_req jsonb, p_candidate bigint,
                                  p_sha256 text, p_profile bigint, p_node bigint, p_approval bigint, p_family text,
                                  p_inputs jsonb, p_limits jsonb)
RETURNS mlplat.accepted LANGUAGE plpgsql AS $$
DECLARE
  who text := mlplat._actor();
  r mlplat.accepted;
  c text;
  lim jsonb;
  pr mlplat.lab_profiles;
  v mlplat.model_versions;
  run mlplat.lab_runs;
BEGIN
  r := mlplat._lab_idem_claim(api.action, api.idempotency_key, p_req, who);
  IF r.request_id IS NOT NULL THEN RETURN r; END IF;
  PERFORM mlplat._lab_check_ids(p_candidate, p_sha256, p_profile, p_node, p_approval, NOT p_probe);
  IF p_probe THEN
    -- fixed probe limits, within the profile's own caps so a probe never blocks itself
    SELECT pg_catalog.jsonb_build_object('max_execution_seconds', least(300, coalesce(x.max_execution_seconds, 300)),
             'max_queue_seconds', 600, 'retention_seconds', 3600,
             'max_output_bytes', least(4096, coalesce(x.max_output_bytes, 4096)), 'max_attempts', 1, 'concurrency', 1)
    INTO lim FROM (SELECT NULL) d
    LEFT JOIN mlplat.lab_profiles x ON x.id = p_profile AND x.project_id = api.pid;
  ELSE
    c := mlplat._lab_check_inputs(p_family, p_inputs);
    lim := mlplat._lab_limits(p_limits, false);
  END IF;
  pr := mlplat._lab_admit(api.pid, api.action, p_candidate, p_sha256, p_profile, p_node, p_approval, p_family,
    lim, coalesce(pg_catalog.jsonb_array_length(p_inputs), 0));
  PERFORM mlplat._lab_reserve_gpus(api.pid, pr.gpus, api.action);
  SELECT * INTO v FROM mlplat.model_versions x WHERE x.id = p_candidate;
  INSERT INTO mlplat.lab_runs (project_id, purpose, actor, db_role, idempotency_key, request_digest, candidate_id,
                               model_version_id, artifact_uri, artifact_sha256, runtime_profile_id, profile_content_id,
                               node_id, node_name, approval_id, family, input_digest, input_count, input_bytes, limits,
                               gpus, max_attempts, queue_deadline_at, run_deadline_at, traceparent)
  SELECT api.pid, CASE WHEN p_probe THEN 'probe' ELSE 'run' END, who, mlplat._db_role(), api.idempotency_key,
         mlplat.content_id(p_req), v.id, v.id, v.artifact_uri, v.artifact_sha256, pr.id, pr.content_id, n.id, n.name,
         p_approval, p_family, pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(c, 'UTF8')), 'hex'),
         pg_catalog.jsonb_array_length(p_inputs), pg_catalog.octet_length(c), lim, pr.gpus,
         (lim->>'max_attempts')::int,
         pg_catalog.now() + pg_catalog.make_interval(secs => (lim->>'max_queue_seconds')::int),
         pg_catalog.now() + pg_catalog.make_interval(secs => (lim->>'max_queue_seconds')::int
           + (lim->>'max_attempts')::int * ((lim->>'max_execution_seconds')::int + 30)),
         api.tp
  FROM mlplat.lab_nodes n WHERE n.id = p_node
  RETURNING * INTO run;
  IF p_probe THEN
    INSERT INTO mlplat.lab_probes (project_id, artifact_sha256, runtime_profile_id, node_id, lab_run_id)
    VALUES (api.pid, run.artifact_sha256, run.runtime_profile_id, run.node_id, run.id);
  ELSE
    INSERT INTO mlplat.lab_run_payloads (lab_run_id, direction, content, sha256, bytes)
    VALUES (run.id, 'input', pg_catalog.convert_to(c, 'UTF8'), run.input_digest, run.input_bytes);
    UPDATE mlplat.lab_approvals x SET runs_used = x.runs_used + 1 WHERE x.id = p_approval;
  END IF;
  PERFORM mlplat._lab_transition(run, 'QUEUED', NULL, who, NULL);
  -- a probe's event leaves out what only a run has (and, as before, the profile's content id)
  RETURN mlplat._api_accept(api,
    (pg_catalog.gen_random_uuid(), 'lab_run', run.id, NULL, 'QUEUED', false)::mlplat.accepted,
    pg_catalog.jsonb_build_object('candidate_id', run.candidate_id, 'artifact_sha256', run.artifact_sha256,
      'runtime_profile_id', run.runtime_profile_id, 'profile_content_id', run.profile_content_id,
      'node_id', run.node_id, 'approval_id', run.approval_id, 'family', run.family,
      'input_digest', run.input_digest, 'input_count', run.input_count, 'input_bytes', run.input_bytes,
      'limits', run.limits)
    - CASE WHEN p_probe THEN ARRAY['profile_content_id', 'approval_id', 'family', 'input_digest', 'input_count',
                                 'input_bytes'] ELSE '{}'::text[] END, 'lab_runs');
END $$;

REVOKE ALL ON FUNCTION mlplat._lab_start(mlplat.api_call, boolean, jsonb, bigint, text, bigint, bigint, bigint, text,
                                          jsonb, jsonb) FROM PUBLIC;

CREATE FUNCTION mlplat.start_lab_run(project text, candidate_id bigint, artifact_sha256 text, runtime_profile_id bigint,
                                     node_id bigint, approval_id bigint, family text, inputs jsonb,
                                     limits jsonb DEFAULT '{}', idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp SET lock_timeout = '5s' AS $$
BEGIN
  RETURN mlplat._lab_start(
    mlplat._lab_begin('start_lab_run', start_lab_run.project, false, start_lab_run.idempotency_key), false,
    pg_catalog.jsonb_build_array(start_lab_run.project, start_lab_run.candidate_id, start_lab_run.artifact_sha256,
      start_lab_run.runtime_profile_id, start_lab_run.node_id, start_lab_run.approval_id, start_lab_run.family,
      start_lab_run.inputs, start_lab_run.limits),
    start_lab_run.candidate_id, start_lab_run.artifact_sha256, start_lab_run.runtime_profile_id, start_lab_run.node_id,
    start_lab_run.approval_id, start_lab_run.family, start_lab_run.inputs, start_lab_run.limits);
END $$;

CREATE FUNCTION mlplat.start_lab_probe(project text, candidate_id bigint, artifact_sha256 text, runtime_profile_id bigint,
                                       node_id bigint, idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp SET lock_timeout = '5s' AS $$
BEGIN
  RETURN mlplat._lab_start(
    mlplat._lab_begin('start_lab_probe', start_lab_probe.project, false, start_lab_probe.idempotency_key), true,
    pg_catalog.jsonb_build_array(start_lab_probe.project, start_lab_probe.candidate_id,
      start_lab_probe.artifact_sha256, start_lab_probe.runtime_profile_id, start_lab_probe.node_id),
    start_lab_probe.candidate_id, start_lab_probe.artifact_sha256, start_lab_probe.runtime_profile_id,
    start_lab_probe.node_id, NULL, NULL, NULL, NULL);
END $$;
