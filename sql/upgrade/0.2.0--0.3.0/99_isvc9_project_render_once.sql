-- 0.2.0 -> 0.3.0, part 99 (isvc9): an intent that changes a project's quotas or members
-- writes its render in the UPDATE that makes the change, one row version instead of two
-- (set_project_quota, _membership_changed, and create_project re-creating a DELETED project;
-- a new project's render still follows its owner's member row).  _project_rendered renders
-- for the quotas given; _project_render_store (which part 99_render8 calls to fill every
-- project, after this part) now uses it.  The final definitions of create_project (part 41
-- before), set_project_quota and _membership_changed (part 30) and _project_render_store
-- (part 99_render8) are here.  Part 99_render8 adds the rendered columns and _render_project
-- after this part: the bodies below are read only when called.

CREATE FUNCTION mlplat._project_rendered(p_id bigint, p_name text, p_gpu_quota int, p_cpu_quota text,
                                         p_memory_quota text, OUT rendered json, OUT content_id text)
LANGUAGE sql STABLE
AS $$
  SELECT r.m, mlplat.content_id(r.m::jsonb)
    FROM (SELECT mlplat._render_project(p_name, p_id, i.instance_id, p_gpu_quota, p_cpu_quota, p_memory_quota,
                                        mlplat._project_bound_members(p_id)) AS m
            FROM mlplat.installation i) r
$$;
REVOKE ALL ON FUNCTION mlplat._project_rendered(bigint, text, int, text, text) FROM PUBLIC;

CREATE FUNCTION mlplat._project_render_store(p_id bigint) RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
  UPDATE mlplat.projects x
     SET (rendered, rendered_content_id) = (SELECT r.rendered, r.content_id
                                              FROM mlplat._project_rendered(x.id, x.name, x.gpu_quota, x.cpu_quota, x.memory_quota) r)
   WHERE x.id = p_id;
END $$;
REVOKE ALL ON FUNCTION mlplat._project_render_store(bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION mlplat.create_project(name text, gpu_quota int, cpu_quota text DEFAULT NULL,
                                      memory_quota text DEFAULT NULL, idempotency_key text DEFAULT NULL,
                                      owner text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  -- no project to authorize against yet: administrators only (below); its id once written
  api mlplat.api_call := ('create_project', create_project.name, NULL, mlplat._traceparent(),
                          create_project.idempotency_key)::mlplat.api_call;
  r mlplat.accepted;
  p mlplat.projects;
  recreated boolean := false;   -- a DELETED project of that name comes back
BEGIN
  IF NOT mlplat._is_admin() THEN
    RAISE EXCEPTION USING ERRCODE = '42501',
      MESSAGE = pg_catalog.format('permission denied: create_project on project "%s"', create_project.name),
      DETAIL = 'Only platform administrators create projects.',
      HINT = 'Ask an administrator (a member of mlplat.admins) to create the project and grant you a role.';
  END IF;
  r := mlplat._api_claim(api,
         pg_catalog.jsonb_build_array(create_project.name, create_project.gpu_quota, create_project.cpu_quota,
                                      create_project.memory_quota, create_project.owner));
  IF r.request_id IS NOT NULL THEN RETURN r; END IF;

  PERFORM mlplat._check_label('name', create_project.name, 59);
  PERFORM mlplat._check_quotas(create_project.gpu_quota, create_project.cpu_quota, create_project.memory_quota);
  IF create_project.owner IS NOT NULL AND (pg_catalog.length(create_project.owner) NOT BETWEEN 1 AND 63
                                           OR create_project.owner ~ '[[:cntrl:]]') THEN
    PERFORM mlplat._bad_input('owner', 'must be a principal name of 1 to 63 printable characters', 'Pass the person''s role name.');
  END IF;
  PERFORM mlplat._check_subject('owner', create_project.owner);

  r := (pg_catalog.gen_random_uuid(), 'project', NULL, NULL, NULL, false)::mlplat.accepted;
  INSERT INTO mlplat.projects (name, gpu_quota, cpu_quota, memory_quota, traceparent)
  VALUES (create_project.name, create_project.gpu_quota, create_project.cpu_quota, create_project.memory_quota, api.tp)
  ON CONFLICT ON CONSTRAINT projects_name_key DO NOTHING
  RETURNING * INTO p;
  IF p.id IS NULL THEN
    SELECT * INTO p FROM mlplat.projects x WHERE x.name = create_project.name FOR UPDATE;
    IF p.status = 'DELETED' THEN
      -- A re-created project starts with no members and no artifact locations: old grants
      -- do not come back.
      DELETE FROM mlplat.members m WHERE m.project_id = p.id;
      DELETE FROM mlplat.artifact_locations l WHERE l.project_id = p.id;
      recreated := true;
    ELSIF p.status = 'DELETING' THEN
      PERFORM mlplat._wrong_state('project', p.name, p.status, 'create_project', 'Wait until the project is DELETED, then create it again.');
    ELSIF (p.gpu_quota, p.cpu_quota, p.memory_quota) IS DISTINCT FROM
          (create_project.gpu_quota, create_project.cpu_quota, create_project.memory_quota) THEN
      RAISE EXCEPTION USING ERRCODE = '42710',
        MESSAGE = pg_catalog.format('project "%s" already exists with different quotas', p.name),
        DETAIL = 'create_project is repeatable only with the same arguments.',
        HINT = 'Use mlplat.set_project_quota() to change quotas.';
    ELSE
      -- Nothing to change: the existing project is the answer.
      r.entity_id := p.id; r.status := p.status; api.pid := p.id;
      RETURN mlplat._api_accept(api, r, pg_catalog.jsonb_build_object('unchanged', true));
    END IF;
  END IF;
  IF create_project.owner IS NOT NULL THEN
    INSERT INTO mlplat.members (project_id, principal, role, granted_by)
    VALUES (p.id, create_project.owner, 'owner', mlplat._actor()) ON CONFLICT DO NOTHING;
  END IF;
  -- its objects as its quotas and members now determine them: a re-created project's in the
  -- one UPDATE that revives it (its row is locked above, its members are final), a new one's
  -- once its owner's member row, which needs the project's row, is in
  IF recreated THEN
    UPDATE mlplat.projects x SET gpu_quota = create_project.gpu_quota, cpu_quota = create_project.cpu_quota,
           memory_quota = create_project.memory_quota, status = 'PROVISIONING', status_reason = NULL,
           generation = x.generation + 1, row_version = x.row_version + 1, attempts = 0, last_error = NULL,
           next_attempt_at = pg_catalog.now(), traceparent = api.tp, updated_at = pg_catalog.now(),
           (rendered, rendered_content_id) = (SELECT o.rendered, o.content_id
                                                FROM mlplat._project_rendered(x.id, x.name, create_project.gpu_quota,
                                                       create_project.cpu_quota, create_project.memory_quota) o)
    WHERE x.id = p.id RETURNING * INTO p;
  ELSE
    PERFORM mlplat._project_render_store(p.id);
  END IF;
  r.entity_id := p.id; r.status := p.status; api.pid := p.id;
  RETURN mlplat._api_accept(api, r,
    pg_catalog.jsonb_build_object('gpu_quota', p.gpu_quota, 'cpu_quota', p.cpu_quota,
                                  'memory_quota', p.memory_quota, 'owner', create_project.owner), 'projects');
END $$;

CREATE OR REPLACE FUNCTION mlplat.set_project_quota(project text, gpu_quota int, cpu_quota text DEFAULT NULL,
                                         memory_quota text DEFAULT NULL, idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp SET lock_timeout = '5s' AS $$
DECLARE
  api mlplat.api_call := mlplat._api_begin('set_project_quota', set_project_quota.project, set_project_quota.idempotency_key);
  r mlplat.accepted;
  p mlplat.projects;
  used bigint;
BEGIN
  r := mlplat._api_claim(api,
         pg_catalog.jsonb_build_array(set_project_quota.project, set_project_quota.gpu_quota,
                                      set_project_quota.cpu_quota, set_project_quota.memory_quota));
  IF r.request_id IS NOT NULL THEN RETURN r; END IF;
  PERFORM mlplat._check_quotas(set_project_quota.gpu_quota, set_project_quota.cpu_quota, set_project_quota.memory_quota);
  -- Exclusive project lock: waits for every deploy or run start in flight (they hold it shared).
  p := mlplat._lock_project_row(api.pid, 'exclusive', 'set_project_quota');
  IF mlplat.project_is_deleting(p.status) THEN
    PERFORM mlplat._wrong_state('project', p.name, p.status, 'set_project_quota', 'The project is being deleted.');
  END IF;
  used := mlplat._gpus_in_use(api.pid);
  IF set_project_quota.gpu_quota < used THEN
    RAISE EXCEPTION USING ERRCODE = '23514',
      MESSAGE = pg_catalog.format('invalid gpu_quota: %s is below the %s GPUs project "%s" already uses',
                                  set_project_quota.gpu_quota, used, p.name),
      DETAIL = 'Deployments'' desired GPUs (gpus x max_replicas) and active runs count against the quota.',
      HINT = 'Scale down or undeploy first, or choose a larger quota.';
  END IF;
  -- the ResourceQuota follows the quotas: rendered with the new ones, in the same UPDATE
  UPDATE mlplat.projects x SET gpu_quota = set_project_quota.gpu_quota, cpu_quota = set_project_quota.cpu_quota,
         memory_quota = set_project_quota.memory_quota, generation = x.generation + 1,
         row_version = x.row_version + 1, traceparent = api.tp, attempts = 0, next_attempt_at = pg_catalog.now(),
         updated_at = pg_catalog.now(),
         (rendered, rendered_content_id) = (SELECT o.rendered, o.content_id
                                              FROM mlplat._project_rendered(x.id, x.name, set_project_quota.gpu_quota,
                                                     set_project_quota.cpu_quota, set_project_quota.memory_quota) o)
  WHERE x.id = api.pid RETURNING * INTO p;
  r := (pg_catalog.gen_random_uuid(), 'project', api.pid, NULL, p.status, false)::mlplat.accepted;
  RETURN mlplat._api_accept(api, r,
    pg_catalog.jsonb_build_object('gpu_quota', p.gpu_quota, 'cpu_quota', p.cpu_quota, 'memory_quota', p.memory_quota), 'projects');
END $$;

CREATE FUNCTION mlplat._membership_changed(c mlplat.api_call, p_status text, p_principal text, p_role text,
                                           p_changed boolean)
RETURNS mlplat.accepted LANGUAGE plpgsql AS $$
BEGIN
  IF p_changed THEN
    -- the members' RoleBindings, rendered in the same UPDATE
    UPDATE mlplat.projects x SET traceparent = c.tp,
           (rendered, rendered_content_id) = (SELECT o.rendered, o.content_id
                                                FROM mlplat._project_rendered(x.id, x.name, x.gpu_quota, x.cpu_quota, x.memory_quota) o)
     WHERE x.id = c.pid;
  END IF;
  RETURN mlplat._api_accept(c, (pg_catalog.gen_random_uuid(), 'member', c.pid, NULL, p_status, false)::mlplat.accepted,
    pg_catalog.jsonb_build_object('principal', p_principal, 'role', p_role, 'changed', p_changed), 'projects');
END $$;

REVOKE ALL ON FUNCTION mlplat._membership_changed(mlplat.api_call, text, text, text, boolean) FROM PUBLIC;
