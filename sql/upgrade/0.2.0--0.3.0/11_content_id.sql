-- 0.2.0 -> 0.3.0, part 11: a Workflow is sent with its content id (annotation
-- mlplat.io/content-id), and the runs claim renders for every run never marked submitted, so
-- that a workflow found by name is adopted only when it is this run's (issue 18, finding 5).
CREATE FUNCTION mlplat._workflow_as_sent(p_run_id bigint) RETURNS jsonb
LANGUAGE sql STABLE
SET search_path = pg_catalog, mlplat, pg_temp AS $$
  SELECT x.w || pg_catalog.jsonb_build_object('metadata', (x.w->'metadata') || pg_catalog.jsonb_build_object(
           'annotations', coalesce(x.w->'metadata'->'annotations', '{}'::jsonb)
                          || pg_catalog.jsonb_build_object('mlplat.io/content-id', mlplat.content_id(x.w))))
    FROM (SELECT mlplat._render_workflow(p_run_id) AS w) x
$$;
REVOKE ALL ON FUNCTION mlplat._workflow_as_sent(bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION mlplat.render_workflow(project text, run text) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  pid bigint := mlplat._authorize('view', render_workflow.project);
BEGIN
  RETURN mlplat._workflow_as_sent((mlplat._find_run(pid, render_workflow.run)).id);
END $$;

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
   ORDER BY u.id
$$;
