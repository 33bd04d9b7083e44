-- 0.2.0 -> 0.3.0, part 14: the write-back rules written once (issue 19).
--
-- mlplat._epoch_current (a write counts only under the kind's current epoch) and
-- mlplat._retry_attempts / mlplat._retry_at (the retry schedule after a write-back), as in
-- sql/install/50_runtime.sql, and mlplat._runs_write_nodes (sql/install/53_reconcile_runs.sql);
-- then the functions of 0.2.0 that this part redefines to call
-- them (the seam's set-based write-backs are redefined in part 20 with the same calls,
-- _rollout_artifact_verdict in part 12, _retention_tick in part 50).

-- The rules every kind's write-back applies, written once (issue 19: one write-back shape).
-- A write-back counts only while its epoch is the kind's current one: the caller that took
-- leadership after it wins, and a deposed leader's write changes nothing.  Not inlined (it
-- reads a table); in a WHERE clause its arguments are constants, so it runs once a statement.
CREATE FUNCTION mlplat._epoch_current(p_kind text, p_epoch bigint)
RETURNS boolean
LANGUAGE sql STABLE
AS $$ SELECT EXISTS (SELECT 1 FROM mlplat.leader_epochs e WHERE e.kind = p_kind AND e.epoch = p_epoch) $$;
REVOKE ALL ON FUNCTION mlplat._epoch_current(text, bigint) FROM PUBLIC;

-- The compare-and-swap every set-based write-back applies, once: a row is written only while
-- it is still at the row_version its pass read (an intent or another leader that got there
-- first wins) and p_epoch is still the kind's epoch.  Plain SQL without SET clauses and no
-- subquery of its own, so the planner inlines it: each UPDATE gets the same two conditions
-- as when it spelled them (_epoch_current, with constant arguments, still runs once a statement).
CREATE FUNCTION mlplat._writeback_holds(p_row_version bigint, p_read_version bigint, p_kind text, p_epoch bigint)
RETURNS boolean
LANGUAGE sql STABLE
AS $$ SELECT p_row_version OPERATOR(pg_catalog.=) p_read_version AND mlplat._epoch_current(p_kind, p_epoch) $$;
REVOKE ALL ON FUNCTION mlplat._writeback_holds(bigint, bigint, text, bigint) FROM PUBLIC;

-- After a write-back, a row's attempts and when it is due again: retry_ms NULL (no retry
-- scheduled) resets attempts and makes it due at once; otherwise attempts + 1, due
-- retry_ms from now.  Plain SQL without SET clauses, every name qualified, so the planner
-- inlines them into each UPDATE (as the rules of 05_rules.sql).
CREATE FUNCTION mlplat._retry_attempts(p_attempts int, p_retry_ms int)
RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN p_retry_ms IS NULL THEN 0 ELSE p_attempts OPERATOR(pg_catalog.+) 1 END $$;
CREATE FUNCTION mlplat._retry_at(p_retry_ms int)
RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN p_retry_ms IS NULL THEN pg_catalog.now()
                  ELSE pg_catalog.now() OPERATOR(pg_catalog.+)
                       pg_catalog.make_interval(secs => p_retry_ms OPERATOR(pg_catalog./) 1000.0) END $$;
REVOKE ALL ON FUNCTION mlplat._retry_attempts(int, int) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._retry_at(int) FROM PUBLIC;

-- a run's nodes, written by the set-based runs write-back (part 20)
CREATE FUNCTION mlplat._runs_write_nodes(p_run_id bigint, p_project_id bigint, p_attempt int, p_nodes jsonb)
RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
  n int;
  m int;
BEGIN
  INSERT INTO mlplat.run_nodes AS o (run_id, project_id, attempt, name, node_id, type, phase, exit_code,
                                     started_at, finished_at, message)
  SELECT p_run_id, p_project_id, p_attempt, x.name, x.node_id, x.type, x.phase,
         CASE WHEN x.exit_code ~ '^-?[0-9]{1,9}$' THEN x.exit_code::int END,
         NULLIF(x.started_at, '')::timestamptz, NULLIF(x.finished_at, '')::timestamptz,
         NULLIF(x.message, '')
    FROM pg_catalog.jsonb_to_recordset(p_nodes)
         AS x(name text, node_id text, type text, phase text, exit_code text, started_at text,
              finished_at text, message text)
  ON CONFLICT (run_id, name) DO UPDATE
     SET attempt = EXCLUDED.attempt, node_id = EXCLUDED.node_id, type = EXCLUDED.type, phase = EXCLUDED.phase,
         exit_code = EXCLUDED.exit_code, started_at = EXCLUDED.started_at, finished_at = EXCLUDED.finished_at,
         message = EXCLUDED.message, updated_at = pg_catalog.now()
   WHERE (o.attempt, o.node_id, o.type, o.phase, o.exit_code, o.started_at, o.finished_at, o.message)
         IS DISTINCT FROM (EXCLUDED.attempt, EXCLUDED.node_id, EXCLUDED.type, EXCLUDED.phase, EXCLUDED.exit_code,
                           EXCLUDED.started_at, EXCLUDED.finished_at, EXCLUDED.message);
  GET DIAGNOSTICS n = ROW_COUNT;
  -- the declared steps of a pipeline carry phase and exit code too (exit code as Argo's string)
  UPDATE mlplat.run_steps s SET phase = x.phase, exit_code = NULLIF(x.exit_code, '')
    FROM pg_catalog.jsonb_to_recordset(p_nodes) AS x(name text, phase text, exit_code text)
   WHERE s.run_id = p_run_id AND s.name = x.name
     AND (s.phase, s.exit_code) IS DISTINCT FROM (x.phase, NULLIF(x.exit_code, ''));
  GET DIAGNOSTICS m = ROW_COUNT;
  n := n + m;
  UPDATE mlplat.runs r SET step_rows_written = r.step_rows_written + n WHERE r.id = p_run_id AND n > 0;
  RETURN n;
END;
$$;
REVOKE ALL ON FUNCTION mlplat._runs_write_nodes(bigint, bigint, int, jsonb) FROM PUBLIC;

CREATE OR REPLACE FUNCTION mlplat._aliases_map_version(p_version_id bigint, p_registered_model text,
                                            p_registry_version text, p_epoch bigint)
RETURNS boolean
LANGUAGE plpgsql
AS $$
BEGIN
    IF NOT mlplat._epoch_current('model_aliases', p_epoch) THEN
        RETURN false;
    END IF;
    IF p_registry_version IS NULL THEN
        DELETE FROM mlplat.model_registry_versions WHERE version_id = p_version_id;
        RETURN true;
    END IF;
    INSERT INTO mlplat.model_registry_versions (version_id, project_id, registered_model, registry_version, epoch)
    SELECT mv.id, mv.project_id, p_registered_model, p_registry_version, p_epoch
      FROM mlplat.model_versions mv WHERE mv.id = p_version_id
    ON CONFLICT (version_id) DO UPDATE
      SET registered_model = excluded.registered_model, registry_version = excluded.registry_version,
          epoch = excluded.epoch, recorded_at = pg_catalog.now();
    RETURN true;
END;
$$;

CREATE OR REPLACE FUNCTION mlplat._ledger_append_set(
    p_kind text, p_epoch bigint, p_controller text,
    p_entity text[], p_entity_id bigint[], p_project text[], p_action text[], p_outcome text[],
    p_desired_digest text[], p_observed_digest text[], p_http_status int[], p_error text[],
    p_trace_id text[], p_note text[])
RETURNS int
LANGUAGE sql
AS $$
  WITH ins AS (
    INSERT INTO mlplat.reconcile_ledger (kind, entity, entity_id, project, action, outcome, desired_digest,
                                         observed_digest, http_status, error, epoch, controller, trace_id, detail)
    SELECT p_kind, r.entity, r.entity_id, r.project, r.action, r.outcome, r.desired_digest,
           r.observed_digest, r.http_status, left(r.error, 2000), p_epoch, p_controller, r.trace_id,
           CASE WHEN r.note IS NULL THEN NULL ELSE pg_catalog.jsonb_build_object('note', r.note) END
      -- multi-argument unnest is FROM-clause syntax only unqualified (search_path is pinned)
      FROM unnest(p_entity, p_entity_id, p_project, p_action, p_outcome, p_desired_digest,
                             p_observed_digest, p_http_status, p_error, p_trace_id, p_note) WITH ORDINALITY
           AS r(entity, entity_id, project, action, outcome, desired_digest, observed_digest,
                http_status, error, trace_id, note, ord)
     WHERE mlplat._epoch_current(p_kind, p_epoch)
     ORDER BY r.ord
    RETURNING 1)
  SELECT pg_catalog.count(*)::int FROM ins
$$;

CREATE OR REPLACE FUNCTION mlplat._ledger_append(
    p_kind text, p_entity text, p_entity_id bigint, p_project text, p_action text, p_outcome text,
    p_desired_digest text, p_observed_digest text, p_http_status int, p_error text,
    p_epoch bigint, p_controller text, p_trace_id text, p_detail jsonb DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql
AS $$
BEGIN
    IF NOT mlplat._epoch_current(p_kind, p_epoch) THEN
        RETURN false;
    END IF;
    INSERT INTO mlplat.reconcile_ledger (kind, entity, entity_id, project, action, outcome, desired_digest,
                                         observed_digest, http_status, error, epoch, controller, trace_id, detail)
    VALUES (p_kind, p_entity, p_entity_id, p_project, p_action, p_outcome, p_desired_digest,
            p_observed_digest, p_http_status, left(p_error, 2000), p_epoch, p_controller, p_trace_id, p_detail);
    RETURN true;
END;
$$;

CREATE OR REPLACE FUNCTION mlplat._spans_mark_exported(p_ids bigint[], p_epoch bigint)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  n int;
BEGIN
  UPDATE mlplat.spans s SET exported_at = pg_catalog.now()
   WHERE s.id = ANY (p_ids) AND s.exported_at IS NULL
     AND mlplat._epoch_current('span_export', p_epoch);
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END $$;
