-- 20_api_projects: projects, quotas and membership.

-- GPUs the project has committed: every deployment's desired allocation (gpus x max_replicas)
-- that is not yet DELETED, every active rollout's canary reservation, plus every active run's
-- and lab run's GPUs: desired allocations, never transient ready counts.  Callers that need a stable answer
-- hold the project's quota lock.
CREATE FUNCTION mlplat._gpus_in_use(p_project_id bigint, p_except_deployment bigint DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql STABLE AS $$
BEGIN
  -- deployments: kept by trigger in mlplat.deployment_gpus (a few rows), less the one excepted
  RETURN (SELECT coalesce((SELECT pg_catalog.sum(c.gpus) FROM mlplat.deployment_gpus c
                     WHERE c.project_id = p_project_id), 0)
         - coalesce((SELECT d.desired_gpus FROM mlplat.deployments d
                     WHERE d.id = p_except_deployment AND d.project_id = p_project_id
                       AND d.status <> 'DELETED'), 0)
         + coalesce((SELECT pg_catalog.sum(ro.surge_gpus) FROM mlplat.rollouts ro
                     WHERE ro.project_id = p_project_id
                       AND mlplat.rollout_is_active(ro.status)
                       AND ro.deployment_id IS DISTINCT FROM p_except_deployment), 0)
         + coalesce((SELECT pg_catalog.sum(r.gpus) FROM mlplat.runs r
                     WHERE r.project_id = p_project_id
                       AND mlplat.run_is_active(r.status)), 0)
         -- builders of optimization campaigns, from their admission until their Job is gone
         + coalesce((SELECT pg_catalog.sum(k.gpus) FROM mlplat.campaign_candidates k
                     WHERE k.project_id = p_project_id
                       AND mlplat.candidate_is_building(k.status)), 0)
         -- lab runs and probes (39_api_lab): from QUEUED until they end (kept by trigger in
         -- mlplat.lab_gpus, at most nine rows), and while they hold a node lease (released only
         -- once the Job is seen reclaimed)
         + coalesce((SELECT pg_catalog.sum(c.gpus) FROM mlplat.lab_gpus c
                     WHERE c.project_id = p_project_id), 0)
         -- (from the leases, one per node at most, each run by its key: never a scan of the
         -- project's ended runs, which only grow)
         + coalesce((SELECT pg_catalog.sum((SELECT l.gpus FROM mlplat.lab_runs l
                                            WHERE l.id = ls.lab_run_id AND l.project_id = p_project_id
                                              AND NOT mlplat.lab_run_is_active(l.status)))
                     FROM mlplat.lab_leases ls), 0));
END $$;

CREATE FUNCTION mlplat._check_quotas(gpu_quota int, cpu_quota text, memory_quota text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF gpu_quota IS NULL OR gpu_quota < 0 OR gpu_quota > 100000 THEN
    PERFORM mlplat._bad_input('gpu_quota', 'must be an integer from 0 to 100000', 'Pass the number of GPUs the project may use.');
  END IF;
  PERFORM mlplat._check_quantity('cpu_quota', cpu_quota);
  PERFORM mlplat._check_quantity('memory_quota', memory_quota);
END $$;

CREATE FUNCTION mlplat._wrong_state(p_entity text, p_name text, p_status text, p_action text, p_hint text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = '55000',
    MESSAGE = pg_catalog.format('%s "%s" is %s: %s is not possible', p_entity, p_name, p_status, p_action),
    DETAIL = pg_catalog.format('The %s''s current status does not allow %s.', p_entity, p_action),
    HINT = p_hint;
END $$;

CREATE FUNCTION mlplat.create_project(name text, gpu_quota int, cpu_quota text DEFAULT NULL,
                                      memory_quota text DEFAULT NULL, idempotency_key text DEFAULT NULL,
                                      owner text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql AS $$
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

CREATE FUNCTION mlplat.set_project_quota(project text, gpu_quota int, cpu_quota text DEFAULT NULL,
                                         memory_quota text DEFAULT NULL, idempotency_key text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
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

CREATE FUNCTION mlplat.delete_project(name text)
RETURNS mlplat.accepted LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
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

-- The opening of a membership change, the same for a grant and a revoke: the call
-- authorized (p_action on the project), then its principal and role checked.
CREATE FUNCTION mlplat._membership_begin(p_action text, p_project text, principal text, role text)
RETURNS mlplat.api_call LANGUAGE plpgsql AS $$
DECLARE
  api mlplat.api_call := mlplat._api_begin(p_action, p_project);
BEGIN
  IF principal IS NULL OR pg_catalog.length(principal) NOT BETWEEN 1 AND 63 OR principal ~ '[[:cntrl:]]' THEN
    PERFORM mlplat._bad_input('principal', 'must be a name of 1 to 63 printable characters', 'Pass the person''s or role''s name.');
  END IF;
  IF role IS NULL OR role NOT IN ('viewer', 'developer', 'deployer', 'owner') THEN
    PERFORM mlplat._bad_input('role', 'must be one of viewer, developer, deployer, owner',
      'Roles are cumulative: developer can do what viewer can, and so on; see mlplat.policies.');
  END IF;
  RETURN api;
END $$;

-- A principal becomes the subject (kind User) of a RoleBinding in the project's namespace.
-- Kubernetes reserves the prefix "system:" for its own identities (system:anonymous is every
-- unauthenticated request, system:serviceaccount:<ns>:<name> a service account of any
-- namespace, system:kube-controller-manager a control-plane component): a binding to one of
-- them would hand the project to that identity, so such a principal is never granted.
CREATE FUNCTION mlplat._check_subject(field text, principal text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF pg_catalog.lower(pg_catalog.btrim(principal)) LIKE 'system:%' THEN
    PERFORM mlplat._bad_input(field, 'must not start with "system:", the prefix Kubernetes reserves for its own users, groups and service accounts',
      'Grant roles to people (their login names), never to Kubernetes system identities.');
  END IF;
END $$;

-- What a membership change does once the members row is written, the same for a grant and a
-- revoke: when it changed anything the project takes this call's traceparent (the projects
-- reconciler writes the RoleBindings under this call's span) and its objects rendered again
-- (_project_rendered: the RoleBindings are stored at intent time); the call is answered (a member
-- of the project, p_status: GRANTED or REVOKED) and audited either way, with changed; the
-- projects reconciler is woken at commit.
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

CREATE FUNCTION mlplat.grant_role(project text, principal text, role text)
RETURNS mlplat.accepted LANGUAGE plpgsql AS $$
DECLARE
  api mlplat.api_call := mlplat._membership_begin('grant_role', grant_role.project, grant_role.principal, grant_role.role);
BEGIN
  PERFORM mlplat._check_subject('principal', grant_role.principal);
  INSERT INTO mlplat.members (project_id, principal, role, granted_by)
  VALUES (api.pid, grant_role.principal, grant_role.role, mlplat._actor()) ON CONFLICT DO NOTHING;
  RETURN mlplat._membership_changed(api, 'GRANTED', grant_role.principal, grant_role.role, FOUND);
END $$;

CREATE FUNCTION mlplat.revoke_role(project text, principal text, role text)
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
