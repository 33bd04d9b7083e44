-- 0.2.0 -> 0.3.0, part 72: Argo runs need an identity (issue 17 item 1): Workflows run as the
-- project's runner ServiceAccount (mlplat.runner_service_account) that the projects
-- reconciler makes with the Role Argo's executor needs.

-- The ServiceAccount a project's Workflows run as (mlplat.runner_service_account; the
-- projects reconciler makes it, with the Role Argo's executor needs, in every project).
CREATE FUNCTION mlplat._runner_service_account() RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT coalesce(NULLIF(pg_catalog.current_setting('mlplat.runner_service_account', true), ''), 'mlplat-runner')
$$;
REVOKE ALL ON FUNCTION mlplat._runner_service_account() FROM PUBLIC;

CREATE OR REPLACE FUNCTION mlplat._render_workflow(p_run_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT pg_catalog.jsonb_build_object(
    'apiVersion', 'argoproj.io/v1alpha1',
    'kind', 'Workflow',
    'metadata', pg_catalog.jsonb_build_object(
      'name', mlplat._run_workflow_name(u.name, u.attempt),
      'namespace', mlplat._project_namespace(p.name),
      'labels', mlplat._managed_by_label() || pg_catalog.jsonb_build_object(
        'mlplat.io/project', p.name,
        'mlplat.io/run', u.name,
        'mlplat.io/attempt', u.attempt::text,
        'mlplat.io/instance', mlplat._instance_id())),
    'spec', pg_catalog.jsonb_build_object(
        'serviceAccountName', mlplat._runner_service_account(),
        'automountServiceAccountToken', false,
        'executor', pg_catalog.jsonb_build_object('serviceAccountName', mlplat._runner_service_account()))
    || CASE WHEN u.kind = 'run' THEN
      pg_catalog.jsonb_build_object(
        'entrypoint', 'main',
        'templates', pg_catalog.jsonb_build_array(
          pg_catalog.jsonb_build_object('name', 'main', 'container', mlplat._run_container(u.spec))))
    ELSE
      pg_catalog.jsonb_build_object(
        'entrypoint', 'pipeline',
        'templates', pg_catalog.jsonb_build_array(
          pg_catalog.jsonb_build_object('name', 'pipeline', 'dag', pg_catalog.jsonb_build_object('tasks',
            (SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
                      'name', s.name, 'template', 'step-' || s.name,
                      'dependencies', CASE WHEN pg_catalog.cardinality(s.depends_on) > 0
                                           THEN pg_catalog.to_jsonb(s.depends_on) END)) ORDER BY s.ordinal)
               FROM mlplat.run_steps s WHERE s.run_id = u.id))))
        || (SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                     'name', 'step-' || s.name, 'container', mlplat._run_container(s.spec)) ORDER BY s.ordinal)
              FROM mlplat.run_steps s WHERE s.run_id = u.id))
    END)
  FROM mlplat.runs u JOIN mlplat.projects p ON p.id = u.project_id
  WHERE u.id = p_run_id
$$;
