-- Rules the tables, the API, the views and the reconcilers share, each defined once
-- (issue 19 item 5).  Plain IMMUTABLE SQL functions without SET clauses, so the planner
-- inlines them: a query or a partial index predicate that calls one plans exactly as the
-- expression it stands for (and a partial index on rollout_is_active(status) serves a query
-- that asks rollout_is_active).  Public: the views tenants read call them.  A SET clause would
-- stop the inlining, so every name in their bodies is schema-qualified instead
-- (test/pgtap/api_security.sql calls them under a hostile search_path).

-- A rollout that still holds its deployment (one at a time) and its GPUs.
CREATE FUNCTION mlplat.rollout_is_active(status text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT status OPERATOR(pg_catalog.=) ANY ('{PROGRESSING,HOLDING,AT_CEILING,ROLLING_BACK}'::pg_catalog.text[]) $$;
COMMENT ON FUNCTION mlplat.rollout_is_active(text) IS
  'True for the rollout statuses that hold their deployment: PROGRESSING, HOLDING, AT_CEILING, ROLLING_BACK.';

-- A run or pipeline run that is in flight (reconciled, counted against the project's GPUs).
CREATE FUNCTION mlplat.run_is_active(status text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT status OPERATOR(pg_catalog.=) ANY ('{PENDING,SUBMITTED,RUNNING,CANCEL_REQUESTED}'::pg_catalog.text[]) $$;
COMMENT ON FUNCTION mlplat.run_is_active(text) IS
  'True for the run statuses that are in flight: PENDING, SUBMITTED, RUNNING, CANCEL_REQUESTED.';

-- A project or a deployment deleted or being deleted: no new work is accepted for it.
CREATE FUNCTION mlplat.project_is_deleting(status text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT status OPERATOR(pg_catalog.=) ANY ('{DELETING,DELETED}'::pg_catalog.text[]) $$;
COMMENT ON FUNCTION mlplat.project_is_deleting(text) IS
  'True for the project statuses of a project deleted or being deleted: DELETING, DELETED.';
CREATE FUNCTION mlplat.deployment_is_deleting(status text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT status OPERATOR(pg_catalog.=) ANY ('{DELETING,DELETED}'::pg_catalog.text[]) $$;
COMMENT ON FUNCTION mlplat.deployment_is_deleting(text) IS
  'True for the deployment statuses of a deployment undeployed or being undeployed: DELETING, DELETED.';
-- A deployment the reconciler acts on whatever its resync time (the claim's changed rows).
CREATE FUNCTION mlplat.deployment_is_changing(status text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT status OPERATOR(pg_catalog.=) ANY ('{PENDING,DEPLOYING,DRIFTED,DELETING}'::pg_catalog.text[]) $$;
COMMENT ON FUNCTION mlplat.deployment_is_changing(text) IS
  'True for the deployment statuses the reconciler acts on whatever its resync time: PENDING, DEPLOYING, DRIFTED, DELETING.';
-- A deployment whose endpoint serves its last ready revision (routes follow it).
CREATE FUNCTION mlplat.deployment_is_serving(status text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT status OPERATOR(pg_catalog.=) ANY ('{READY,DRIFTED,DEPLOYING}'::pg_catalog.text[]) $$;
COMMENT ON FUNCTION mlplat.deployment_is_serving(text) IS
  'True for the deployment statuses whose endpoint serves its last ready revision: READY, DRIFTED, DEPLOYING.';

-- A model version's stage from which it may be deployed, rolled out or lab-tested.
CREATE FUNCTION mlplat.model_stage_is_deployable(stage text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT stage OPERATOR(pg_catalog.=) ANY ('{CANDIDATE,CHAMPION}'::pg_catalog.text[]) $$;
COMMENT ON FUNCTION mlplat.model_stage_is_deployable(text) IS
  'True for the model version stages that may be deployed: CANDIDATE, CHAMPION.';

-- A project's namespace, and the label every object mlplat creates carries: one definition
-- for C and SQL (include/mlplat/labels.h, src/render/labels.c).
CREATE FUNCTION mlplat._project_namespace(project text) RETURNS text
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'mlplat_sql_project_namespace';
CREATE FUNCTION mlplat._managed_by_label() RETURNS jsonb
LANGUAGE C IMMUTABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'mlplat_sql_managed_by_label';
