-- 0.2.0 -> 0.3.0, part 11: a Workflow is sent with its content id (annotation
-- mlplat.io/content-id), and the runs claim renders for every run never marked submitted, so
-- that a workflow found by name is adopted only when it is this run's (issue 18, finding 5).
-- That claim's final form is defined once, in part 96 (_runs_claim).
CREATE FUNCTION mlplat._workflow_as_sent(p_run_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
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
