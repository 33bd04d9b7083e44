-- 0.2.0 -> 0.3.0, part 99 (sqldup5): the internal helpers run on their caller's search_path
-- (issue 19).
--
-- A helper (a function of mlplat whose name starts with '_', executable by its owner only,
-- neither SECURITY DEFINER nor a trigger) no longer pins search_path itself: its callers
-- already run on pg_catalog, mlplat, pg_temp (an intent call or a SECURITY DEFINER reader by
-- the rule of sql/install/99_entry_points.sql, a worker by the override it sets when it
-- connects, src/worker/worker.c), and nobody else may execute it.  The helpers an earlier
-- part of this upgrade defines lost the clause where they are defined; these are the ones
-- 0.2.0 shipped and this upgrade does not redefine.
ALTER FUNCTION mlplat._take_leadership(text,integer,integer) RESET search_path;
ALTER FUNCTION mlplat._instance_id() RESET search_path;
ALTER FUNCTION mlplat._rolebinding_name(text,text) RESET search_path;
ALTER FUNCTION mlplat._run_container(jsonb) RESET search_path;
ALTER FUNCTION mlplat._artifact_remember(text,text,text,bigint,text) RESET search_path;
ALTER FUNCTION mlplat._spans_record_set(text[],text[],text[],text[],text[],timestamp with time zone[],timestamp with time zone[],text[],text[],jsonb[],text[],text[],bigint[],text[]) RESET search_path;
ALTER FUNCTION mlplat._spans_record(jsonb) RESET search_path;
ALTER FUNCTION mlplat._otlp_value(jsonb) RESET search_path;
ALTER FUNCTION mlplat._otlp_span(mlplat.spans) RESET search_path;
ALTER FUNCTION mlplat._otlp_render(mlplat.spans[],text,text) RESET search_path;
ALTER FUNCTION mlplat._rollout_replicas(jsonb) RESET search_path;
ALTER FUNCTION mlplat._rollout_contract(bigint) RESET search_path;
ALTER FUNCTION mlplat._rollout_fraction(bigint) RESET search_path;
ALTER FUNCTION mlplat._rollout_record(mlplat.rollouts,text,text[],text,numeric,numeric,jsonb,jsonb,jsonb,bigint,text) RESET search_path;
ALTER FUNCTION mlplat._prometheus_classify(integer,text) RESET search_path;
