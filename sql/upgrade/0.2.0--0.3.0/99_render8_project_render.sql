-- 0.2.0 -> 0.3.0, part 99 (render8): a project's intent-determined objects rendered at intent
-- time (issue 19, item 3).  Its Namespace, ResourceQuota, LimitRange and the members'
-- RoleBindings are determined by create_project, set_project_quota, grant_role and
-- revoke_role alone: those store them on the project (rendered, rendered_content_id; their
-- final definitions, and _project_render_store's, are in part 99_isvc9), and the claim returns
-- them as stored.  The pass renders only the objects that carry server settings.
--
-- Every existing project is rendered here, with the same bytes the 0.2.0 pass rendered
-- (the instance id is mlplat.installation's): its objects compare equal to what the cluster
-- holds, so an upgrade re-applies nothing.
ALTER TABLE mlplat.projects ADD COLUMN rendered json, ADD COLUMN rendered_content_id text;

-- The objects a project's intents alone determine, a JSON array of manifests (in C:
-- src/reconcile/projects.c, render_intent, where the pass's own objects are rendered too).
-- members: [{principal, role, binding}] (_project_bound_members).
CREATE FUNCTION mlplat._render_project(p_project text, p_project_id bigint, p_instance text, p_gpu_quota int,
                                       p_cpu_quota text, p_memory_quota text, p_members jsonb)
RETURNS json LANGUAGE C IMMUTABLE AS 'MODULE_PATHNAME', 'mlplat_render_project';
REVOKE ALL ON FUNCTION mlplat._render_project(text, bigint, text, int, text, text, jsonb) FROM PUBLIC;

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

-- (returns the seam type of part 20, without the quotas and members, with the stored render:
-- dropped and made again)
-- manifests: the stored render, one element a manifest, each as its bytes were rendered.
DROP FUNCTION mlplat._projects_claim();
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

SELECT mlplat._project_render_store(p.id) FROM mlplat.projects p ORDER BY p.id;
