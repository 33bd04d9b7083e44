-- 52_reconcile_projects: the projects reconciler's two short transactions.
--
-- observed->'quota_generation' is the generation whose quota was last applied: a
-- quota change may drop a resource, which only an apply removes and a comparison of
-- the fields still wanted cannot see.
--
-- The objects a project's intents alone determine (Namespace, ResourceQuota, LimitRange,
-- the members' RoleBindings) are rendered at intent time: create_project, set_project_quota,
-- grant_role and revoke_role store them on the project (projects.rendered, with
-- rendered_content_id) in their own transaction, through _project_rendered.  The claim
-- returns them as stored; the pass renders only the objects that carry server settings.
-- grant_role/revoke_role do not bump the project's generation, but every pass compares each
-- desired object with what it observed, so a membership change is seen on the pass its
-- commit wakes.  Write-back is a compare-and-swap on row_version and the leader epoch, as
-- for deployments.

-- The RoleBinding name for a member: mlplat-<role>-<principal>, where a
-- principal that is not already a DNS label is slugged and suffixed with a short
-- hash of its exact spelling (so "Alice" and "alice" never share a binding).
CREATE FUNCTION mlplat._rolebinding_name(p_role text, p_principal text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT
AS $$
  SELECT 'mlplat-' || p_role || '-' ||
         CASE WHEN p_principal ~ '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$' THEN p_principal
              ELSE coalesce(nullif(pg_catalog.left(pg_catalog.btrim(
                       pg_catalog.regexp_replace(pg_catalog.lower(p_principal), '[^a-z0-9]+', '-', 'g'), '-'), 40), ''), 'p')
                   || '-' || pg_catalog.left(pg_catalog.md5(p_principal), 8)
         END
$$;
REVOKE ALL ON FUNCTION mlplat._rolebinding_name(text, text) FROM PUBLIC;

-- The objects a project's intents alone determine, a JSON array of manifests (in C:
-- src/reconcile/projects.c, render_intent, where the pass's own objects are rendered too).
-- members: [{principal, role, binding}] (_project_bound_members).
CREATE FUNCTION mlplat._render_project(p_project text, p_project_id bigint, p_instance text, p_gpu_quota int,
                                       p_cpu_quota text, p_memory_quota text, p_members jsonb)
RETURNS json LANGUAGE C IMMUTABLE AS 'MODULE_PATHNAME', 'mlplat_render_project';
REVOKE ALL ON FUNCTION mlplat._render_project(text, bigint, text, int, text, text, jsonb) FROM PUBLIC;

-- The seam (src/reconcile/seam.c): the claim returns mlplat.project_claim rows, the write-back
-- takes an array of mlplat.project_writeback; C reads and builds them by name.
CREATE TYPE mlplat.project_claim AS (
  id bigint, name text,
  status text /* STATUS project */, status_reason text, last_error text,
  generation bigint, observed_generation bigint, row_version bigint,
  traceparent text, attempts int, due boolean, manifests text[], quota_generation bigint);

-- retry_ms: NULL = no retry scheduled (attempts reset, due again at once); otherwise
-- attempts + 1 and next_attempt_at = now() + retry_ms.  NULL observed_generation / observed
-- keep the stored ones.
CREATE TYPE mlplat.project_writeback AS (
  id bigint, row_version bigint, status text /* STATUS project */, reason text,
  observed_generation bigint /* NULL<0 */, observed jsonb, error text, retry_ms int /* NULL<0 */);

-- The members a project's RoleBindings are rendered from, [{principal, role, binding}].
CREATE FUNCTION mlplat._project_bound_members(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE
AS $$
  SELECT coalesce(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                    'principal', m.principal, 'role', m.role,
                    'binding', mlplat._rolebinding_name(m.role, m.principal))
                  ORDER BY m.role, m.principal), '[]'::jsonb)
    -- a Kubernetes system identity (system:anonymous, system:serviceaccount:...)
    -- is never a RoleBinding subject: grant_role refuses one, and a member row
    -- from before 0.3.0 is left unbound (its old binding is deleted as extra)
    FROM mlplat.members m WHERE m.project_id = p_id
     AND pg_catalog.lower(pg_catalog.btrim(m.principal)) NOT LIKE 'system:%'
$$;
REVOKE ALL ON FUNCTION mlplat._project_bound_members(bigint) FROM PUBLIC;

-- The objects project p_id's intents determine (src/reconcile/projects.c, render_intent), as
-- the pass applies them byte for byte (json keeps the bytes), with their content id, for the
-- quotas given and the members it has now.  The intents that change the project's quotas or
-- members set them in the same UPDATE as the rest of their change (one new row version, not
-- two): SET (rendered, rendered_content_id) = (SELECT ... FROM _project_rendered(...)), with
-- the quotas the row will have.  The instance id comes from mlplat.installation, not from a
-- setting.
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

-- Project p_id's render stored as its row now is: the upgrade fills every project with it (and
-- a new project, whose owner's member row comes after its row).
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

-- manifests: the stored render, one element a manifest, each as its bytes were rendered.
CREATE FUNCTION mlplat._projects_claim()
RETURNS SETOF mlplat.project_claim
LANGUAGE sql STABLE
AS $$
  SELECT p.id, p.name,
         p.status, p.status_reason, p.last_error,
         p.generation, p.observed_generation, p.row_version,
         p.traceparent, p.attempts, p.next_attempt_at <= pg_catalog.now(),
         ARRAY(SELECT e::text FROM pg_catalog.json_array_elements(p.rendered) e),
         coalesce((p.observed->>'quota_generation')::bigint, 0)
    FROM mlplat.projects p
   WHERE p.status <> 'DELETED'
   ORDER BY p.id
$$;
REVOKE ALL ON FUNCTION mlplat._projects_claim() FROM PUBLIC;

-- Which orphan namespaces (by ordinal in the arrays) name, in their mlplat.io/project-id
-- annotation, a deleted project of the same name: only those are this installation's to tear
-- down.  A namespace someone else made with mlplat's labels names none (issue 18, finding 5).
CREATE FUNCTION mlplat._project_orphans_known(p_names text[], p_ids text[])
RETURNS SETOF int
LANGUAGE sql STABLE
AS $$
  SELECT c.ord::int
    FROM unnest(p_names, p_ids) WITH ORDINALITY AS c(name, id, ord)
    JOIN mlplat.projects p ON c.id ~ '^[0-9]{1,18}$' AND p.id = c.id::bigint
   WHERE p.name = c.name AND p.status = 'DELETED'
$$;
REVOKE ALL ON FUNCTION mlplat._project_orphans_known(text[], text[]) FROM PUBLIC;

-- The write-back of a pass in one statement: compare-and-swap on each row's row_version and
-- on the epoch.  Returns the ids written.  Runs wait for their project to be READY (its runner
-- identity): a project written READY wakes them, not the resync.
CREATE FUNCTION mlplat._projects_writeback_set(p_epoch bigint, p_rows mlplat.project_writeback[])
RETURNS SETOF bigint
LANGUAGE plpgsql
AS $$
DECLARE
    ids bigint[];
    ready boolean;
BEGIN
    SELECT pg_catalog.array_agg(u.id), coalesce(pg_catalog.bool_or(u.status = 'READY'), false)
      INTO ids, ready FROM mlplat._status_writeback_set('projects', p_epoch, p_rows) u;
    IF ready THEN
        PERFORM mlplat._wake_on_commit('runs');
    END IF;
    RETURN QUERY SELECT x FROM pg_catalog.unnest(ids) x;
END;
$$;
REVOKE ALL ON FUNCTION mlplat._projects_writeback_set(bigint, mlplat.project_writeback[]) FROM PUBLIC;

