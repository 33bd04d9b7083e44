-- 0.2.0 -> 0.3.0: the API call (mlplat.api_call) that carries an entry point's action,
-- project, project id, traceparent and idempotency key, so the preamble (_api_begin), the
-- idempotency claim (_api_claim) and the epilogue (_api_accept, _api_keep) are each written
-- once.  Numbered first: the parts after it that define API functions declare the type.

-- What an API entry point carries from its first line to its answer, so the preamble and
-- the epilogue of the API convention (top of 14_api_core.sql) are each written once: the
-- action (the name its idempotency key and audit row go under), the project as the caller
-- named it, its id once authorized, the traceparent the intent stores, and the idempotency
-- key (NULL: none).
CREATE TYPE mlplat.api_call AS (
  action          text,
  project         text,
  pid             bigint,
  tp              text,
  idempotency_key text
);

-- The preamble: authorize first (42501/42704 before anything is read, locked or claimed),
-- then draw the intent's traceparent.  p_policy is the policy action when it is not the
-- call's own action (several calls share one permission).
CREATE FUNCTION mlplat._api_begin(p_action text, p_project text, p_key text DEFAULT NULL, p_policy text DEFAULT NULL)
RETURNS mlplat.api_call LANGUAGE plpgsql AS $$
DECLARE
  pid bigint := mlplat._authorize(coalesce(p_policy, p_action), p_project);
BEGIN
  RETURN (p_action, p_project, pid, mlplat._traceparent(), p_key)::mlplat.api_call;
END $$;

-- The preamble of a platform call (signers, presets, components, capabilities, lab nodes: no
-- project): administrators only (_require_admin, 37_api_campaigns.sql; p_detail and p_hint:
-- the refusal's words when they are not its default ones), then the traceparent.
CREATE FUNCTION mlplat._api_platform(p_action text, p_detail text DEFAULT NULL, p_hint text DEFAULT NULL)
RETURNS mlplat.api_call LANGUAGE plpgsql AS $$
BEGIN
  IF p_detail IS NULL THEN
    PERFORM mlplat._require_admin(p_action);
  ELSE
    PERFORM mlplat._require_admin(p_action, p_detail, p_hint);
  END IF;
  RETURN (p_action, NULL, NULL, mlplat._traceparent(), NULL)::mlplat.api_call;
END $$;

-- The call's idempotency claim (see _idem_claim): NULL to go on, or the stored answer.
CREATE FUNCTION mlplat._api_claim(c mlplat.api_call, p_request jsonb) RETURNS mlplat.accepted
LANGUAGE plpgsql AS $$
BEGIN
  RETURN mlplat._idem_claim(c.action, c.idempotency_key, p_request);
END $$;

-- The answer to a call that found its work already done (the same request made before):
-- no audit row and no wake, but a replay of its idempotency key gives the same answer.
CREATE FUNCTION mlplat._api_keep(c mlplat.api_call, r mlplat.accepted) RETURNS mlplat.accepted
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM mlplat._idem_store(c.action, c.idempotency_key, r);
  RETURN r;
END $$;

-- The epilogue: audit the answer r (its entity and entity id), keep it for a replay of the
-- idempotency key, wake the kind's reconciler at commit (p_wake NULL: none), answer r.
CREATE FUNCTION mlplat._api_accept(c mlplat.api_call, r mlplat.accepted, p_detail jsonb, p_wake text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql AS $$
BEGIN
  PERFORM mlplat._audit(c.action, c.project, c.pid, r.entity, r.entity_id, r.request_id, c.tp, p_detail);
  PERFORM mlplat._idem_store(c.action, c.idempotency_key, r);   -- nothing to keep without a key
  PERFORM mlplat._wake_on_commit(p_wake);                       -- STRICT: NULL wakes no one
  RETURN r;
END $$;

REVOKE ALL ON FUNCTION mlplat._api_begin(text, text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._api_platform(text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._api_claim(mlplat.api_call, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._api_keep(mlplat.api_call, mlplat.accepted) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._api_accept(mlplat.api_call, mlplat.accepted, jsonb, text) FROM PUBLIC;

-- _start_run takes its caller's API call (the callers authorized already: once, not twice)
DROP FUNCTION mlplat._start_run(text, text, text, text, jsonb, int, jsonb, text, jsonb);
-- A run or a pipeline started for start_run or start_pipeline_run (api: their call).
CREATE FUNCTION mlplat._start_run(api mlplat.api_call, p_name text, p_kind text, p_spec jsonb, p_gpus int,
                                  p_steps jsonb, p_request jsonb)
RETURNS mlplat.accepted LANGUAGE plpgsql AS $$
DECLARE
  r mlplat.accepted;
  p mlplat.projects;
  u mlplat.runs;
  st jsonb;
  i int := 0;
BEGIN
  r := mlplat._api_claim(api, p_request);
  IF r.request_id IS NOT NULL THEN RETURN r; END IF;
  -- validation that needs no data happened in the caller; now state
  p := mlplat._lock_project(api.pid, p_gpus > 0, api.action);
  r := (pg_catalog.gen_random_uuid(), p_kind, NULL, NULL, NULL, false)::mlplat.accepted;
  SELECT * INTO u FROM mlplat.runs x WHERE x.project_id = api.pid AND x.name = p_name;
  IF u.id IS NOT NULL THEN
    IF u.kind = p_kind AND u.spec = p_spec THEN
      r.entity_id := u.id; r.status := u.status;   -- the same run again: nothing to do
      RETURN mlplat._api_keep(api, r);
    END IF;
    RAISE EXCEPTION USING ERRCODE = '42710',
      MESSAGE = pg_catalog.format('run "%s" already exists in project "%s" with a different spec', p_name, api.project),
      DETAIL = 'Run names are unique within a project and runs are immutable.',
      HINT = 'Choose a new run name.';
  END IF;
  IF p_gpus > 0 THEN
    PERFORM mlplat._check_gpu_quota(p, p_gpus, NULL);
  END IF;
  INSERT INTO mlplat.runs (project_id, name, kind, spec, gpus, created_by, traceparent)
  VALUES (api.pid, p_name, p_kind, p_spec, p_gpus, mlplat._actor(), api.tp)
  ON CONFLICT ON CONSTRAINT runs_project_id_name_key DO NOTHING
  RETURNING * INTO u;
  IF u.id IS NULL THEN
    PERFORM mlplat._cas_lost('run', p_name);   -- a concurrent start of the same name won
  END IF;
  IF p_steps IS NOT NULL THEN
    FOR st IN SELECT e FROM pg_catalog.jsonb_array_elements(p_steps) e LOOP
      i := i + 1;
      INSERT INTO mlplat.run_steps (run_id, project_id, name, ordinal, spec, depends_on)
      VALUES (u.id, api.pid, st->>'name', i, st - 'name' - 'depends_on',
              ARRAY(SELECT pg_catalog.jsonb_array_elements_text(coalesce(st->'depends_on', '[]'))));
    END LOOP;
  END IF;
  r.entity_id := u.id; r.status := u.status;
  RETURN mlplat._api_accept(api, r,
    pg_catalog.jsonb_build_object('run', p_name, 'gpus', p_gpus), 'runs');
END $$;
REVOKE ALL ON FUNCTION mlplat._start_run(mlplat.api_call, text, text, jsonb, int, jsonb, jsonb) FROM PUBLIC;
