-- 0.2.0 -> 0.3.0: a run's first submission waits for its project to be READY (the runner
-- ServiceAccount and Role it runs as), and a project becoming READY wakes the runs.
-- _runs_claim's final form (with part 11's render for every run not yet submitted) is defined
-- here only.

-- (returns the seam type of part 20 now: dropped and made again)
DROP FUNCTION mlplat._runs_claim();
CREATE FUNCTION mlplat._runs_claim()
RETURNS SETOF mlplat.run_claim
LANGUAGE sql STABLE
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
REVOKE ALL ON FUNCTION mlplat._runs_claim() FROM PUBLIC;
