-- 0.2.0 -> 0.3.0: a run's first submission waits for its project to be READY (the runner
-- ServiceAccount and Role it runs as), and a project becoming READY wakes the runs.
-- Numbered after part 11, which also redefines _runs_claim.

CREATE OR REPLACE FUNCTION mlplat._runs_claim()
RETURNS TABLE (id bigint, project text, namespace text, name text, kind text, status text,
               attempt int, workflow text, manifest text, row_version bigint, attempts int,
               due boolean, submitted boolean, observed_rv text, traceparent text)
LANGUAGE sql STABLE
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
  SELECT u.id, p.name, mlplat._project_namespace(p.name), u.name, u.kind, u.status, u.attempt,
         mlplat._run_workflow_name(u.name, u.attempt),
         CASE WHEN u.status = 'PENDING' OR u.submitted_at IS NULL THEN mlplat._workflow_as_sent(u.id)::text END,
         u.row_version, u.attempts, u.next_attempt_at <= pg_catalog.now(),
         u.submitted_at IS NOT NULL, u.observed_rv, u.traceparent
    FROM mlplat.runs u
    JOIN mlplat.projects p ON p.id = u.project_id
   WHERE mlplat.run_is_active(u.status)
     -- A first submission waits for its project to be READY: Argo runs the workflow as the
     -- project's runner ServiceAccount, which the projects reconciler makes, and fails it at
     -- once if that identity (or its Role) is not there yet.  A create that may already have
     -- been sent (an unanswered write) is claimed regardless, to be looked for.
     AND (u.status <> 'PENDING' OR u.submitted_at IS NOT NULL OR p.status = 'READY'
          OR EXISTS (SELECT 1 FROM mlplat.unanswered_writes w WHERE w.kind = 'runs' AND w.entity_id = u.id))
   ORDER BY u.id
$$;

CREATE OR REPLACE FUNCTION mlplat._projects_writeback(
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
