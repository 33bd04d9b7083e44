-- 30_api_deployments: deploy, roll back, undeploy; the KServe manifest each revision applies.

-- drift_policy: 'repair' re-applies the desired revision over drift, 'report' only shows it.
-- ready_wait_since: when the intent (deploy, rollback) that the deployment still waits on was
--   made; the deploy deadline counts from it.  NULL once READY.
-- deploy_deadline: this deployment's deadline; NULL: the setting mlplat.deploy_deadline.
ALTER TABLE mlplat.deployments
  ADD COLUMN drift_policy text NOT NULL DEFAULT 'repair' CHECK (drift_policy IN ('repair', 'report')),
  ADD COLUMN ready_wait_since timestamptz,
  ADD COLUMN deploy_deadline interval;
INSERT INTO mlplat.policies (role, action)
VALUES ('deployer', 'set_drift_policy'), ('owner', 'set_drift_policy'),
       ('deployer', 'set_deploy_deadline'), ('owner', 'set_deploy_deadline');

-- Pure renderer: the exact KServe v1beta1 InferenceService for one revision.  Deterministic
-- (same arguments and the same mlplat.predictor_service_account, same jsonb: STABLE), no I/O.  The result is stored in the revision at deploy time
-- and the deployments reconciler applies exactly that.  In C (src/render/isvc.c): it is on
-- deploy()'s hot path, and the nested jsonb_build_object it replaces (same jsonb, byte for
-- byte) cost as much as the rest of deploy()'s validation.
CREATE FUNCTION mlplat._render_isvc(p_project text, p_deployment text, p_revision int, p_instance text,
                                    p_model_format text, p_runtime text, p_storage_uri text, p_sha256 text,
                                    p_gpus int, p_min_replicas int, p_max_replicas int, p_env jsonb)
RETURNS jsonb LANGUAGE C STABLE AS 'MODULE_PATHNAME', 'mlplat_render_isvc';

CREATE FUNCTION mlplat._spec_digest(spec jsonb) RETURNS text
LANGUAGE sql STABLE AS $$   -- STABLE like convert_to, so it is inlined
  SELECT pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(spec::text, 'UTF8')), 'hex')
$$;

CREATE FUNCTION mlplat._find_deployment(p_project_id bigint, p_deployment text)
RETURNS mlplat.deployments LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN mlplat._found((SELECT x FROM mlplat.deployments x WHERE x.project_id = p_project_id AND x.name = p_deployment),
                       'deployment', p_deployment, 'Create it with mlplat.deploy().');
END $$;

CREATE FUNCTION mlplat._no_active_rollout(d mlplat.deployments, p_action text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM mlplat.rollouts ro WHERE ro.deployment_id = d.id
             AND mlplat.rollout_is_active(ro.status)) THEN
    RAISE EXCEPTION USING ERRCODE = '55000',
      MESSAGE = pg_catalog.format('deployment "%s" has an active rollout: %s is not possible', d.name, p_action),
      DETAIL = 'While a rollout runs, the rollout controller owns the deployment''s traffic.',
      HINT = 'Promote or abort the rollout first.';
  END IF;
END $$;

-- The project row is the project's lock.  (0.2.0 used advisory locks on published keys, and
-- any login could hold them and stall a project's deploys.)  Only the API can take a row
-- lock: SELECT ... FOR ... needs UPDATE on mlplat.projects, which no caller has.  Strengths:
--   'share'     FOR KEY SHARE: every change that adds to the project without raising its GPU
--               allocation (deploy, start_run, ...); they never wait for each other, nor for
--               a GPU reservation, nor for the reconciler's status write-backs;
--   'reserve'   FOR NO KEY UPDATE and every quota slot: changes that raise the GPU allocation
--               (deploy, start_run, retry_run, start_rollout with a surge), so quota checks
--               serialize; the slots (src/quota_slot.c) make it wait for the lab GPU
--               reservations in flight, which hold one slot each instead of the row
--               (_lab_reserve_gpus), and keep new ones out until it ends;
--   'exclusive' FOR UPDATE: delete_project and set_project_quota wait for everything in flight.
-- The wait is bounded by mlplat.api_lock_timeout and fails with 55P03 naming the project.
-- The bound then stays (SET LOCAL) for the rest of the calling API function, so its waits
-- for entity rows (a deployment another call holds) are bounded too (plain 55P03).  Every
-- API function that calls this names lock_timeout in its SET clause ('5s' until the project
-- lock, the default bound): that clause is what gives the caller's own lock_timeout back
-- when the function returns (a SET LOCAL outlives a function whose SET clause does not name
-- the setting).
-- Lock order everywhere: the project row, then the entity row.
-- API functions that wait for an entity row without taking the project's lock first
-- (undeploy, cancel_run, promote/abort_rollout, set_model_stage) bound those waits the
-- same way: lock_timeout from mlplat.api_lock_timeout for the rest of the call (their SET
-- clause names lock_timeout, which gives the caller's own value back on return).
CREATE FUNCTION mlplat._bound_api_waits() RETURNS void LANGUAGE sql AS $$
  SELECT FROM pg_catalog.set_config('lock_timeout',
    coalesce(pg_catalog.current_setting('mlplat.api_lock_timeout', true), '5s'), true)
$$;

-- src/quota_slot.c: every quota slot of the project for an exact reservation; without wait,
-- those that are free (true when that was all of them).
CREATE FUNCTION mlplat._quota_slots_take(project_id bigint, wait boolean) RETURNS boolean
LANGUAGE C STRICT VOLATILE AS 'MODULE_PATHNAME', 'mlplat_take_quota_slots';

CREATE FUNCTION mlplat._lock_project_row(p_project_id bigint, p_strength text, p_action text)
RETURNS mlplat.projects LANGUAGE plpgsql AS $$
DECLARE
  p mlplat.projects;
  wait text := coalesce(pg_catalog.current_setting('mlplat.api_lock_timeout', true), '5s');
  ignored text;
BEGIN
  ignored := pg_catalog.set_config('lock_timeout', wait, true);   -- an expression: PERFORM is a statement
  -- uncontended (the usual case): no wait and no subtransaction
  IF p_strength = 'share' THEN
    SELECT * INTO p FROM mlplat.projects x WHERE x.id = p_project_id FOR KEY SHARE SKIP LOCKED;
  ELSIF p_strength = 'reserve' THEN
    SELECT * INTO p FROM mlplat.projects x WHERE x.id = p_project_id FOR NO KEY UPDATE SKIP LOCKED;
  ELSE
    SELECT * INTO p FROM mlplat.projects x WHERE x.id = p_project_id FOR UPDATE SKIP LOCKED;
  END IF;
  -- a reservation also takes every quota slot (src/quota_slot.c): it waits for the lab GPU
  -- reservations in flight, which hold one each, before its quota sum
  IF FOUND AND (p_strength <> 'reserve' OR mlplat._quota_slots_take(p_project_id, false)) THEN
    RETURN p;
  END IF;
  BEGIN
    IF p_strength = 'share' THEN
      SELECT * INTO p FROM mlplat.projects x WHERE x.id = p_project_id FOR KEY SHARE;
    ELSIF p_strength = 'reserve' THEN
      SELECT * INTO p FROM mlplat.projects x WHERE x.id = p_project_id FOR NO KEY UPDATE;
      PERFORM mlplat._quota_slots_take(p_project_id, true);
    ELSE
      SELECT * INTO p FROM mlplat.projects x WHERE x.id = p_project_id FOR UPDATE;
    END IF;
  EXCEPTION WHEN lock_not_available THEN
    RAISE EXCEPTION USING ERRCODE = '55P03',
      MESSAGE = pg_catalog.format('project "%s" is busy: %s waited %s for the project''s lock',
                  (SELECT x.name FROM mlplat.projects x WHERE x.id = p_project_id), p_action, wait),
      DETAIL = 'Another transaction holds the project''s row lock: a quota change or deletion, a GPU '
               'reservation, or an open transaction that called the API and has not ended.',
      HINT = 'Retry. If it persists, look for a long-open transaction in pg_stat_activity; '
             'mlplat.api_lock_timeout sets how long the API waits.';
  END;
  RETURN p;
END $$;

CREATE FUNCTION mlplat._lock_project(p_project_id bigint, p_for_quota boolean, p_action text)
RETURNS mlplat.projects LANGUAGE plpgsql AS $$
DECLARE
  p mlplat.projects;
BEGIN
  p := mlplat._lock_project_row(p_project_id, CASE WHEN p_for_quota THEN 'reserve' ELSE 'share' END, p_action);
  IF mlplat.project_is_deleting(p.status) THEN
    PERFORM mlplat._wrong_state('project', p.name, p.status, p_action, 'The project is being deleted.');
  END IF;
  RETURN p;
END $$;

-- The GPU quota rule, once: p_more GPUs fit next to what the project has in use (but the
-- deployment p_except_deployment), else 23514.  p_words: the refusal's message (a format of
-- project, GPUs asked, in use, quota), detail and hint where a caller words it its own way
-- (start_rollout's canary); NULL: a deployment's or a run's request.
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

-- The GPUs of a project's deployments (desired_gpus of each one not DELETED), kept by
-- deployments_gpus_* so the GPU quota (_gpus_in_use) reads a few rows instead of summing
-- every deployment the project has (a quota check on each deploy(), start_run, lab start).
-- The sum of a project's rows is the sum over its deployments at every commit.  Two kinds:
--  * slot rows (slot 0-7), updated in place, each only by a transaction holding that quota
--    slot (src/quota_slot.c): a change that raises an allocation is an exact reservation
--    (_lock_project_row 'reserve', all eight slots) and writes row 0;
--  * journal rows (slot NULL), inserted by every other change (an allocation lowered, the
--    reconciler's DELETED, a row deleted): an insert waits for no one, so the reconciler's
--    write-backs and the API's calls never queue on, nor deadlock over, a counter row.
-- Each write also folds the committed journal rows no other transaction is folding (FOR
-- UPDATE SKIP LOCKED: it never waits) into the row it writes, so the journal stays a few
-- rows.  A transaction that is not READ COMMITTED only inserts a journal row: updating or
-- folding a row another transaction changed after its snapshot would fail it with 40001.
-- Internal: no privileges, RLS on with no policy; not in pg_dump's data (restoring
-- deployments fires the trigger, which rebuilds it).
CREATE TABLE mlplat.deployment_gpus (
  project_id bigint NOT NULL REFERENCES mlplat.projects (id) ON DELETE CASCADE,
  slot       int CHECK (slot BETWEEN 0 AND 7),   -- NULL: a journal row (unique only per slot)
  gpus       bigint NOT NULL,
  UNIQUE (project_id, slot)
);
ALTER TABLE mlplat.deployment_gpus ENABLE ROW LEVEL SECURITY;

-- (SECURITY DEFINER: whoever changes a deployment, the reconciler's role included, counts)
CREATE FUNCTION mlplat._deployment_gpus_count() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  project bigint;
  delta bigint := 0;
  rc boolean := pg_catalog.current_setting('transaction_isolation') = 'read committed';
  held int := -1;
BEGIN
  IF TG_OP <> 'INSERT' THEN
    project := OLD.project_id;
    delta := CASE WHEN OLD.status = 'DELETED' THEN 0 ELSE -OLD.desired_gpus END;
  END IF;
  IF TG_OP <> 'DELETE' THEN
    project := NEW.project_id;
    delta := delta + CASE WHEN NEW.status = 'DELETED' THEN 0 ELSE NEW.desired_gpus END;
  END IF;
  IF rc THEN
    held := mlplat._lab_quota_slot_held(project);
  END IF;
  WITH folded AS (
    DELETE FROM mlplat.deployment_gpus x
     WHERE x.ctid = ANY (ARRAY(SELECT y.ctid FROM mlplat.deployment_gpus y
                                WHERE rc AND y.project_id = project AND y.slot IS NULL
                                  FOR UPDATE SKIP LOCKED))
    RETURNING x.gpus
  ), total AS (
    SELECT delta + coalesce((SELECT pg_catalog.sum(f.gpus) FROM folded f), 0) AS gpus
  )
  INSERT INTO mlplat.deployment_gpus AS c (project_id, slot, gpus)
  SELECT project, CASE WHEN held >= 0 THEN held END, t.gpus FROM total t
   WHERE held >= 0 OR t.gpus <> 0
  ON CONFLICT (project_id, slot) DO UPDATE SET gpus = c.gpus + EXCLUDED.gpus;
  RETURN NULL;
END $$;
CREATE TRIGGER deployments_gpus_insert AFTER INSERT ON mlplat.deployments FOR EACH ROW
  WHEN (NEW.status <> 'DELETED' AND NEW.desired_gpus <> 0)
  EXECUTE FUNCTION mlplat._deployment_gpus_count();
-- (a redeploy of the same allocation, and every status write-back but DELETED, write nothing)
CREATE TRIGGER deployments_gpus_update AFTER UPDATE OF desired_gpus, status ON mlplat.deployments FOR EACH ROW
  WHEN (CASE WHEN OLD.status = 'DELETED' THEN 0 ELSE OLD.desired_gpus END
        <> CASE WHEN NEW.status = 'DELETED' THEN 0 ELSE NEW.desired_gpus END)
  EXECUTE FUNCTION mlplat._deployment_gpus_count();
CREATE TRIGGER deployments_gpus_delete AFTER DELETE ON mlplat.deployments FOR EACH ROW
  WHEN (OLD.status <> 'DELETED' AND OLD.desired_gpus <> 0)
  EXECUTE FUNCTION mlplat._deployment_gpus_count();

CREATE FUNCTION mlplat.deploy(project text, deployment text, model text, version text, runtime_kind text,
                              gpus int DEFAULT 0, min_replicas int DEFAULT 1, max_replicas int DEFAULT 1,
                              env jsonb DEFAULT '{}', idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
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

CREATE FUNCTION mlplat.rollback_deployment(project text, deployment text)
RETURNS mlplat.accepted LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
  api mlplat.api_call := mlplat._api_begin('rollback_deployment', rollback_deployment.project);
  r mlplat.accepted := (pg_catalog.gen_random_uuid(), 'deployment', NULL, NULL, NULL, false)::mlplat.accepted;
  seen mlplat.deployments;
  d mlplat.deployments;
  p mlplat.projects;
  prev jsonb;
  alloc int;
BEGIN
  seen := mlplat._find_deployment(api.pid, rollback_deployment.deployment);
  IF mlplat.deployment_is_deleting(seen.status) THEN
    PERFORM mlplat._wrong_state('deployment', seen.name, seen.status, 'rollback_deployment', 'Deploy it again instead.');
  END IF;
  IF seen.previous_revision IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = '55000',
      MESSAGE = pg_catalog.format('deployment "%s" has no previous revision to roll back to', seen.name),
      DETAIL = 'Only one revision has been desired since the deployment was created.',
      HINT = 'Deploy the version you want instead.';
  END IF;
  SELECT dr.intent INTO prev FROM mlplat.deployment_revisions dr
  WHERE dr.deployment_id = seen.id AND dr.revision = seen.previous_revision;
  alloc := (prev->>'gpus')::int * (prev->>'max_replicas')::int;
  p := mlplat._lock_project(api.pid, alloc > seen.desired_gpus, 'rollback_deployment');
  -- Locked, then decided on the row as it is: a reconciler's write-back in flight (status,
  -- row_version) is waited for, not failed on.  Another caller's intent that moved the
  -- revisions since the read above (a deploy, a rollback) is 40001: the lock and the
  -- allocation were chosen from them.
  SELECT * INTO d FROM mlplat.deployments x WHERE x.id = seen.id FOR NO KEY UPDATE;
  IF (d.desired_revision, d.previous_revision, d.desired_gpus)
     IS DISTINCT FROM (seen.desired_revision, seen.previous_revision, seen.desired_gpus) THEN
    PERFORM mlplat._cas_lost('deployment', seen.name);
  END IF;
  IF mlplat.deployment_is_deleting(d.status) THEN
    PERFORM mlplat._wrong_state('deployment', d.name, d.status, 'rollback_deployment', 'Deploy it again instead.');
  END IF;
  PERFORM mlplat._no_active_rollout(d, 'rollback_deployment');
  IF alloc > d.desired_gpus THEN
    PERFORM mlplat._check_gpu_quota(p, alloc, d.id);
  END IF;
  -- Revisions are never edited: the previous one becomes desired again (a new intent).
  UPDATE mlplat.deployments x
  SET desired_revision = d.previous_revision, previous_revision = d.desired_revision, desired_gpus = alloc,
      generation = x.generation + 1, row_version = x.row_version + 1, status = 'DEPLOYING',
      status_reason = pg_catalog.format('rollback to revision %s requested', d.previous_revision),
      attempts = 0, last_error = NULL, next_attempt_at = pg_catalog.now(), traceparent = api.tp,
      ready_wait_since = pg_catalog.now(), updated_at = pg_catalog.now()
  WHERE x.id = d.id;
  r.entity_id := d.id; r.revision := d.previous_revision; r.status := 'DEPLOYING';
  RETURN mlplat._api_accept(api, r,
    pg_catalog.jsonb_build_object('from_revision', d.desired_revision, 'to_revision', d.previous_revision), 'deployments');
END $$;

CREATE FUNCTION mlplat.undeploy(project text, deployment text)
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

-- Preview: the manifest the reconciler applies for a revision (default: the desired one).
CREATE FUNCTION mlplat.render_inference_service(project text, deployment text, revision int DEFAULT NULL)
RETURNS jsonb LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  pid bigint := mlplat._authorize('view', render_inference_service.project);
  d mlplat.deployments := mlplat._find_deployment(pid, render_inference_service.deployment);
  s jsonb;
BEGIN
  SELECT dr.spec INTO s FROM mlplat.deployment_revisions dr
  WHERE dr.deployment_id = d.id AND dr.revision = coalesce(render_inference_service.revision, d.desired_revision);
  IF s IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = '42704',
      MESSAGE = pg_catalog.format('deployment "%s" has no revision %s', d.name,
                                  coalesce(render_inference_service.revision::text, '(desired)')),
      HINT = 'List revisions in mlplat.deployment_revisions.';
  END IF;
  RETURN s;
END $$;

-- set_drift_policy and set_deploy_deadline, one call that differs by the setting it changes
-- (p_action; the other value NULL): authorized, then the value checked, then not an intent
-- for the cluster (no revision, no generation bump), so only row_version + 1 (a pass that
-- decided under the old setting loses its compare-and-swap) and a wake: the reconciler looks
-- again at once.
CREATE FUNCTION mlplat._set_deployment_option(p_action text, p_project text, p_deployment text,
                                              p_policy text, p_deadline interval, p_key text)
RETURNS mlplat.accepted LANGUAGE plpgsql AS $$
DECLARE
  pid bigint := mlplat._authorize(p_action, p_project);
  who text := mlplat._actor();
  r mlplat.accepted;
  tp text := mlplat._traceparent();
  d mlplat.deployments;
  is_policy boolean := p_action = 'set_drift_policy';
  unchanged boolean;
BEGIN
  PERFORM mlplat._check_key(p_key);
  IF is_policy AND (p_policy IS NULL OR p_policy NOT IN ('repair', 'report')) THEN
    PERFORM mlplat._bad_input('policy', 'must be ''repair'' or ''report''',
      '''repair'' re-applies the desired revision over drift; ''report'' only shows the differing paths.');
  ELSIF NOT is_policy AND (p_deadline < interval '0' OR p_deadline > interval '7 days') THEN
    PERFORM mlplat._bad_input('deadline', 'must be from 0 to 7 days',
      'Pass e.g. ''15 minutes''; 0 disables the deadline, NULL uses the setting mlplat.deploy_deadline.');
  END IF;
  r := mlplat._idem_claim(p_action, p_key,
         pg_catalog.jsonb_build_array(p_project, p_deployment,
           CASE WHEN is_policy THEN pg_catalog.to_jsonb(p_policy)
                ELSE pg_catalog.to_jsonb(pg_catalog.date_part('epoch', p_deadline)) END), who);
  IF r.request_id IS NOT NULL THEN RETURN r; END IF;
  PERFORM mlplat._find_deployment(pid, p_deployment);
  PERFORM mlplat._lock_project(pid, false, p_action);
  SELECT * INTO d FROM mlplat.deployments x WHERE x.project_id = pid AND x.name = p_deployment FOR NO KEY UPDATE;
  IF mlplat.deployment_is_deleting(d.status) THEN
    PERFORM mlplat._wrong_state('deployment', d.name, d.status, p_action, 'Deploy it again first.');
  END IF;
  r := (pg_catalog.gen_random_uuid(), 'deployment', d.id, d.desired_revision, d.status, false)::mlplat.accepted;
  unchanged := CASE WHEN is_policy THEN d.drift_policy = p_policy
                    ELSE d.deploy_deadline IS NOT DISTINCT FROM p_deadline END;
  IF NOT unchanged THEN
    UPDATE mlplat.deployments x
    SET drift_policy = CASE WHEN is_policy THEN p_policy ELSE x.drift_policy END,
        deploy_deadline = CASE WHEN is_policy THEN x.deploy_deadline ELSE p_deadline END,
        row_version = x.row_version + 1, next_attempt_at = LEAST(x.next_attempt_at, pg_catalog.now()),
        -- the row is compared again at once: no pass reads it otherwise (it changed nothing to apply)
        next_resync_at = pg_catalog.now(),
        updated_at = pg_catalog.now()
    WHERE x.id = d.id;
    PERFORM mlplat._wake_on_commit('deployments');
  END IF;
  PERFORM mlplat._audit(p_action, p_project, pid, 'deployment', d.id, r.request_id, tp,
    CASE WHEN is_policy THEN pg_catalog.jsonb_build_object('from', d.drift_policy, 'to', p_policy)
         ELSE pg_catalog.jsonb_build_object('from_seconds', pg_catalog.date_part('epoch', d.deploy_deadline),
                                            'to_seconds', pg_catalog.date_part('epoch', p_deadline)) END
    || pg_catalog.jsonb_build_object('unchanged', unchanged), who);
  PERFORM mlplat._idem_store(p_action, p_key, r, who);
  RETURN r;
END $$;

-- How the deployments reconciler treats drift of this deployment: 'repair' (the default)
-- re-applies the desired revision, 'report' only marks it DRIFTED with the differing paths.
CREATE FUNCTION mlplat.set_drift_policy(project text, deployment text, policy text,
                                        idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE sql SET lock_timeout = '5s'
RETURN mlplat._set_deployment_option('set_drift_policy', project, deployment, policy, NULL, idempotency_key);

-- This deployment's deploy deadline (NULL: the setting mlplat.deploy_deadline; 0: none).  It
-- applies to the wait in progress too, counted from the deploy or rollback that started it.
CREATE FUNCTION mlplat.set_deploy_deadline(project text, deployment text, deadline interval,
                                           idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE sql SET lock_timeout = '5s'
RETURN mlplat._set_deployment_option('set_deploy_deadline', project, deployment, NULL, deadline, idempotency_key);
