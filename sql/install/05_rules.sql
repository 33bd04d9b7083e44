-- Rules the tables, the API, the views and the reconcilers share, each defined once
-- (issue 19 item 5).  Plain IMMUTABLE SQL functions without SET clauses, so the planner
-- inlines them: a query or a partial index predicate that calls one plans exactly as the
-- expression it stands for (and a partial index on rollout_is_active(status) serves a query
-- that asks rollout_is_active).  Public: the views tenants read call them.  A SET clause would
-- stop the inlining, so every name in their bodies is schema-qualified instead
-- (test/pgtap/api_security.sql calls them under a hostile search_path).

-- A status rule, the one shape of all of them: mlplat.<p_name>(<p_arg> text) is true for
-- the values p_values and false for any other, and its COMMENT says p_says followed by that
-- same list, so the list tenants read in the comment is the one the rule tests.  Called while
-- the extension's script runs: what it creates belongs to the extension.
CREATE FUNCTION mlplat._status_rule(p_name text, p_values text[], p_says text, p_arg text DEFAULT 'status')
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE pg_catalog.format('CREATE FUNCTION mlplat.%I(%I text) RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE '
                            'AS $rule$ SELECT %I OPERATOR(pg_catalog.=) ANY (%L::pg_catalog.text[]) $rule$',
                            p_name, p_arg, p_arg, p_values);
  EXECUTE pg_catalog.format('COMMENT ON FUNCTION mlplat.%I(text) IS %L', p_name,
                            p_says || ': ' || pg_catalog.array_to_string(p_values, ', ') || '.');
END $$;

-- The rules, one row each (the kinds' rules too: campaign candidates, lab runs): name, the
-- values it is true for, what its comment says of them, the argument's name.
SELECT mlplat._status_rule(r.name, r.vals::pg_catalog.text[], r.says, r.arg)
FROM (VALUES
  -- a rollout that still holds its deployment (one at a time) and its GPUs
  ('rollout_is_active', '{PROGRESSING,HOLDING,AT_CEILING,ROLLING_BACK}', 'True for the rollout statuses that hold their deployment', 'status'),
  -- a run or pipeline run that is in flight (reconciled, counted against the project's GPUs)
  ('run_is_active', '{PENDING,SUBMITTED,RUNNING,CANCEL_REQUESTED}', 'True for the run statuses that are in flight', 'status'),
  -- a project or a deployment deleted or being deleted: no new work is accepted for it
  ('project_is_deleting', '{DELETING,DELETED}', 'True for the project statuses of a project deleted or being deleted', 'status'),
  ('deployment_is_deleting', '{DELETING,DELETED}', 'True for the deployment statuses of a deployment undeployed or being undeployed', 'status'),
  -- a deployment the reconciler acts on whatever its resync time (the claim's changed rows)
  ('deployment_is_changing', '{PENDING,DEPLOYING,DRIFTED,DELETING}', 'True for the deployment statuses the reconciler acts on whatever its resync time', 'status'),
  -- a deployment whose endpoint serves its last ready revision (routes follow it)
  ('deployment_is_serving', '{READY,DRIFTED,DEPLOYING}', 'True for the deployment statuses whose endpoint serves its last ready revision', 'status'),
  -- a campaign candidate whose builder is admitted and not yet gone: it holds its GPUs and
  -- its reservation until its Job is seen gone (37_api_campaigns)
  ('candidate_is_building', '{BUILDING,CANCEL_REQUESTED}', 'True for the campaign candidate statuses whose builder holds its GPUs', 'status'),
  -- a candidate that has ended (its builder's Job, if any, is left to clean up)
  ('candidate_is_finished', '{BUILT,FAILED,CANCELLED,NOT_RUN}', 'True for the campaign candidate statuses that are final', 'status'),
  -- a LabRun or probe that is in flight (reconciled, counted against the project's GPUs; a
  -- finished one still counts while it holds its node lease; 39_api_lab)
  ('lab_run_is_active', '{QUEUED,DISPATCHED,RUNNING,RETRY_WAIT,CANCEL_REQUESTED}', 'True for the lab run statuses that are in flight', 'status'),
  -- a LabRun or probe whose Job is out: created or being created, its run deadline counting
  ('lab_run_is_running', '{DISPATCHED,RUNNING}', 'True for the lab run statuses whose Job is out', 'status'),
  -- a model version's stage from which it may be deployed, rolled out or lab-tested
  ('model_stage_is_deployable', '{CANDIDATE,CHAMPION}', 'True for the model version stages that may be deployed', 'stage')
) r(name, vals, says, arg);

-- A project's namespace, and the label every object mlplat creates carries: one definition
-- for C and SQL (include/mlplat/labels.h, src/render/labels.c).
CREATE FUNCTION mlplat._project_namespace(project text) RETURNS text
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'mlplat_sql_project_namespace';
CREATE FUNCTION mlplat._managed_by_label() RETURNS jsonb
LANGUAGE C IMMUTABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'mlplat_sql_managed_by_label';
