-- 0.2.0 -> 0.3.0, part 30: project locks only the API can take (issue 18, finding 2).
-- 0.2.0 serialised a project's changes on advisory locks whose keys docs/api.md published:
-- any login could hold them and stall the project's deploys.  The project row is the lock
-- now (see mlplat._lock_project_row), and every wait is bounded by mlplat.api_lock_timeout:
-- the API functions that take it name lock_timeout in their SET clause.
-- deploy() takes it too; its final form is defined once, in part 80; set_project_quota's,
-- with _membership_changed's, in part 99_isvc9.

-- src/quota_slot.c: every quota slot of the project for an exact reservation; without wait,
-- those that are free (true when that was all of them).
CREATE FUNCTION mlplat._quota_slots_take(project_id bigint, wait boolean) RETURNS boolean
LANGUAGE C STRICT VOLATILE AS 'MODULE_PATHNAME', 'mlplat_take_quota_slots';

CREATE OR REPLACE FUNCTION mlplat._lock_project_row(p_project_id bigint, p_strength text, p_action text)
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

CREATE OR REPLACE FUNCTION mlplat._lock_project(p_project_id bigint, p_for_quota boolean, p_action text)
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

CREATE OR REPLACE FUNCTION mlplat.delete_project(name text)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
  api mlplat.api_call := mlplat._api_begin('delete_project', delete_project.name);
  r mlplat.accepted := (pg_catalog.gen_random_uuid(), 'project', NULL, NULL, NULL, false)::mlplat.accepted;
  p mlplat.projects;
BEGIN
  r.entity_id := api.pid;
  -- Decided on the row as it is once locked: a reconciler's write-back in flight is waited
  -- for, not failed on.  The exclusive project lock also waits for deploys in flight (they
  -- hold it shared), so the count below is final.
  p := mlplat._lock_project_row(api.pid, 'exclusive', 'delete_project');
  IF mlplat.project_is_deleting(p.status) THEN
    r.status := p.status;          -- already asked for: nothing changes
    RETURN r;
  END IF;
  IF EXISTS (SELECT 1 FROM mlplat.deployments d WHERE d.project_id = api.pid AND d.status <> 'DELETED')
     OR EXISTS (SELECT 1 FROM mlplat.runs u WHERE u.project_id = api.pid
                AND mlplat.run_is_active(u.status))
     -- a campaign's builder holds GPUs and objects in the namespace until its Job is gone
     OR EXISTS (SELECT 1 FROM mlplat.campaign_candidates k WHERE k.project_id = api.pid
                AND mlplat.candidate_is_building(k.status)) THEN
    RAISE EXCEPTION USING ERRCODE = '55000',
      MESSAGE = pg_catalog.format('project "%s" still has deployments or active runs', p.name),
      DETAIL = 'A project is deleted only once nothing in it is live.',
      HINT = 'Undeploy its deployments and cancel its runs, wait for DELETED/CANCELLED, then retry.';
  END IF;
  UPDATE mlplat.projects x SET status = 'DELETING', status_reason = 'deletion requested',
         generation = x.generation + 1, row_version = x.row_version + 1, traceparent = api.tp,
         attempts = 0, next_attempt_at = pg_catalog.now(), updated_at = pg_catalog.now()
  WHERE x.id = api.pid RETURNING * INTO p;
  r.status := p.status;
  RETURN mlplat._api_accept(api, r, '{}', 'projects');
END $$;

CREATE OR REPLACE FUNCTION mlplat.revoke_role(project text, principal text, role text)
RETURNS mlplat.accepted LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
  api mlplat.api_call := mlplat._membership_begin('revoke_role', revoke_role.project, revoke_role.principal, revoke_role.role);
  changed boolean;
BEGIN
  -- Serialize membership changes of this project so "last owner" is decided on settled data.
  PERFORM mlplat._lock_project_row(api.pid, 'reserve', 'revoke_role');
  DELETE FROM mlplat.members m
  WHERE m.project_id = api.pid AND m.principal = revoke_role.principal AND m.role = revoke_role.role;
  changed := FOUND;
  IF revoke_role.role = 'owner' AND changed
     AND NOT EXISTS (SELECT 1 FROM mlplat.members m WHERE m.project_id = api.pid AND m.role = 'owner') THEN
    RAISE EXCEPTION USING ERRCODE = '55000',
      MESSAGE = pg_catalog.format('cannot revoke the last owner of project "%s"', revoke_role.project),
      DETAIL = 'Every project keeps at least one owner.',
      HINT = 'Grant owner to someone else first.';
  END IF;
  RETURN mlplat._membership_changed(api, 'REVOKED', revoke_role.principal, revoke_role.role, changed);
END $$;

CREATE OR REPLACE FUNCTION mlplat.rollback_deployment(project text, deployment text)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp SET lock_timeout = '5s' AS $$
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

CREATE OR REPLACE FUNCTION mlplat.start_run(project text, run text, spec jsonb, idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
  api mlplat.api_call := mlplat._api_begin('start_run', start_run.project, start_run.idempotency_key);
  g int;
BEGIN
  PERFORM mlplat._check_key(start_run.idempotency_key);
  PERFORM mlplat._check_label('run', start_run.run, 50);
  g := mlplat._check_container('spec', start_run.spec);
  RETURN mlplat._start_run(api, start_run.run, 'run', start_run.spec, g, NULL,
           pg_catalog.jsonb_build_array(start_run.project, start_run.run, start_run.spec));
END $$;

CREATE OR REPLACE FUNCTION mlplat.start_pipeline_run(project text, name text, steps jsonb, idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
  api mlplat.api_call := mlplat._api_begin('start_pipeline_run', start_pipeline_run.project,
                                           start_pipeline_run.idempotency_key);
  g int;
BEGIN
  PERFORM mlplat._check_key(start_pipeline_run.idempotency_key);
  PERFORM mlplat._check_label('name', start_pipeline_run.name, 50);
  g := mlplat._check_steps(start_pipeline_run.steps);
  RETURN mlplat._start_run(api, start_pipeline_run.name, 'pipeline',
           pg_catalog.jsonb_build_object('steps', start_pipeline_run.steps), g, start_pipeline_run.steps,
           pg_catalog.jsonb_build_array(start_pipeline_run.project, start_pipeline_run.name, start_pipeline_run.steps));
END $$;

CREATE OR REPLACE FUNCTION mlplat.retry_run(project text, run text)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
  pid bigint := mlplat._authorize('retry_run', retry_run.project);
  r mlplat.accepted := (pg_catalog.gen_random_uuid(), 'run', NULL, NULL, NULL, false)::mlplat.accepted;
  tp text := mlplat._traceparent();
  seen mlplat.runs;
  p mlplat.projects;
BEGIN
  seen := mlplat._find_run(pid, retry_run.run);
  p := mlplat._lock_project(pid, seen.gpus > 0, 'retry_run');
  -- locked (after the project, as every writer of both) and read again: a reconciler's
  -- write-back in flight is waited for, not failed on, and a concurrent retry finds PENDING
  SELECT * INTO STRICT seen FROM mlplat.runs x WHERE x.id = seen.id FOR NO KEY UPDATE;
  IF seen.status NOT IN ('FAILED', 'CANCELLED') THEN
    PERFORM mlplat._wrong_state('run', seen.name, seen.status, 'retry_run',
      'Only a FAILED or CANCELLED run can be retried.');
  END IF;
  IF seen.gpus > 0 THEN
    PERFORM mlplat._check_gpu_quota(p, seen.gpus, NULL);
  END IF;
  UPDATE mlplat.runs x
  SET status = 'PENDING', status_reason = pg_catalog.format('retry requested: attempt %s', seen.attempt + 1),
      attempt = seen.attempt + 1, submitted_at = NULL, observed_rv = NULL, last_error = NULL,
      generation = x.generation + 1, row_version = x.row_version + 1, attempts = 0,
      next_attempt_at = pg_catalog.now(), traceparent = tp, updated_at = pg_catalog.now()
  WHERE x.id = seen.id;
  DELETE FROM mlplat.run_nodes n WHERE n.run_id = seen.id;
  UPDATE mlplat.run_steps s SET phase = NULL, exit_code = NULL WHERE s.run_id = seen.id;
  r.entity := seen.kind; r.entity_id := seen.id; r.status := 'PENDING';
  PERFORM mlplat._audit('retry_run', retry_run.project, pid, seen.kind, seen.id, r.request_id, tp,
    pg_catalog.jsonb_build_object('from', seen.status, 'attempt', seen.attempt + 1,
                                  'workflow', mlplat._run_workflow_name(seen.name, seen.attempt + 1)));
  PERFORM mlplat._wake_on_commit('runs');
  RETURN r;
END $$;

REVOKE ALL ON FUNCTION mlplat._lock_project_row(bigint, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._quota_slots_take(bigint, boolean) FROM PUBLIC;
DROP FUNCTION mlplat._project_lock_key(int);
