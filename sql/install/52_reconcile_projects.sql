-- 52_reconcile_projects: the projects reconciler's two short transactions.
--
-- observed->'quota_generation' is the generation whose quota was last applied: a
-- quota change may drop a resource, which only an apply removes and a comparison of
-- the fields still wanted cannot see.
--
-- The claim returns every live project with everything its objects are rendered
-- from, members included: grant_role/revoke_role do not bump the project's
-- generation, but every pass compares each desired object with what it observed,
-- so a membership change is seen on the pass its commit wakes.  Write-back is a
-- compare-and-swap on row_version and the leader epoch, as for deployments.

-- The RoleBinding name for a member: mlplat-<role>-<principal>, where a
-- principal that is not already a DNS label is slugged and suffixed with a short
-- hash of its exact spelling (so "Alice" and "alice" never share a binding).
CREATE FUNCTION mlplat._rolebinding_name(p_role text, p_principal text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT 'mlplat-' || p_role || '-' ||
         CASE WHEN p_principal ~ '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$' THEN p_principal
              ELSE coalesce(nullif(pg_catalog.left(pg_catalog.btrim(
                       pg_catalog.regexp_replace(pg_catalog.lower(p_principal), '[^a-z0-9]+', '-', 'g'), '-'), 40), ''), 'p')
                   || '-' || pg_catalog.left(pg_catalog.md5(p_principal), 8)
         END
$$;
REVOKE ALL ON FUNCTION mlplat._rolebinding_name(text, text) FROM PUBLIC;

CREATE FUNCTION mlplat._projects_claim()
RETURNS TABLE (id bigint, name text, gpu_quota int, cpu_quota text, memory_quota text,
               status text, status_reason text, last_error text,
               generation bigint, observed_generation bigint, row_version bigint,
               traceparent text, attempts int, due boolean, members text,
               quota_generation bigint)
LANGUAGE sql STABLE
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
  SELECT p.id, p.name, p.gpu_quota, p.cpu_quota, p.memory_quota,
         p.status, p.status_reason, p.last_error,
         p.generation, p.observed_generation, p.row_version,
         p.traceparent, p.attempts, p.next_attempt_at <= pg_catalog.now(),
         coalesce((SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                            'principal', m.principal, 'role', m.role,
                            'binding', mlplat._rolebinding_name(m.role, m.principal))
                          ORDER BY m.role, m.principal)
                     -- a Kubernetes system identity (system:anonymous, system:serviceaccount:...)
                     -- is never a RoleBinding subject: grant_role refuses one, and a member row
                     -- from before 0.3.0 is left unbound (its old binding is deleted as extra)
                     FROM mlplat.members m WHERE m.project_id = p.id
                      AND pg_catalog.lower(pg_catalog.btrim(m.principal)) NOT LIKE 'system:%'), '[]'::jsonb)::text,
         coalesce((p.observed->>'quota_generation')::bigint, 0)
    FROM mlplat.projects p
   WHERE p.status <> 'DELETED'
   ORDER BY p.id
$$;
REVOKE ALL ON FUNCTION mlplat._projects_claim() FROM PUBLIC;

-- p_retry_ms: NULL = no retry scheduled (attempts reset, due again at once);
-- otherwise attempts + 1 and next_attempt_at = now() + p_retry_ms.
CREATE FUNCTION mlplat._projects_writeback(
    p_id bigint, p_row_version bigint, p_epoch bigint,
    p_status text, p_reason text, p_observed_generation bigint,
    p_observed jsonb, p_error text, p_retry_ms int)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
DECLARE
    written boolean;
BEGIN
    UPDATE mlplat.projects p
       SET status = p_status,
           status_reason = p_reason,
           observed_generation = coalesce(p_observed_generation, p.observed_generation),
           observed = coalesce(p_observed, p.observed),
           observed_at = pg_catalog.now(),
           last_error = p_error,
           attempts = CASE WHEN p_retry_ms IS NULL THEN 0 ELSE p.attempts + 1 END,
           next_attempt_at = CASE WHEN p_retry_ms IS NULL THEN pg_catalog.now()
                                  ELSE pg_catalog.now() + pg_catalog.make_interval(secs => p_retry_ms / 1000.0) END,
           epoch = p_epoch,
           row_version = p.row_version + 1,
           updated_at = pg_catalog.now()
     WHERE p.id = p_id AND p.row_version = p_row_version
       AND EXISTS (SELECT 1 FROM mlplat.leader_epochs e WHERE e.kind = 'projects' AND e.epoch = p_epoch);
    written := FOUND;
    -- runs wait for their project to be READY (its runner identity): wake them, not the resync
    IF written AND p_status = 'READY' THEN
        PERFORM mlplat._wake_on_commit('runs');
    END IF;
    RETURN written;
END;
$$;
REVOKE ALL ON FUNCTION mlplat._projects_writeback(bigint, bigint, bigint, text, text, bigint, jsonb, text, int) FROM PUBLIC;
