-- 53_reconcile_runs: runs and pipeline runs on Argo Workflows.
--
-- A run is submitted once as a Workflow named <run>-<attempt> (deterministic: a retried
-- create after a lost response finds the same object, answered 409 AlreadyExists, and
-- adopts it).  The reconciler observes workflows by LIST with our labels and writes the
-- phase back into mlplat.runs and the nodes into mlplat.run_nodes, only when the
-- workflow's resourceVersion moved.  An explicit retry_run() is a new attempt with a new
-- workflow name.

ALTER TABLE mlplat.runs
  ADD COLUMN attempt            int NOT NULL DEFAULT 1,
  ADD COLUMN submitted_at       timestamptz,          -- the create was acknowledged (201 or 409) or the workflow seen
  ADD COLUMN observed_rv        text,                 -- resourceVersion of the workflow last written back
  ADD COLUMN observed_changes   bigint NOT NULL DEFAULT 0,  -- workflow versions written back
  ADD COLUMN step_rows_written  bigint NOT NULL DEFAULT 0;  -- step rows inserted/updated for them

-- What Argo reports per node (the Pod nodes: one per pipeline step; "main" for a single run).
CREATE TABLE mlplat.run_nodes (
  run_id      bigint NOT NULL REFERENCES mlplat.runs (id),
  project_id  bigint NOT NULL REFERENCES mlplat.projects (id),
  attempt     int NOT NULL,
  name        text NOT NULL,
  node_id     text,
  type        text,
  phase       text,
  exit_code   int,          -- parsed from Argo's string form; NULL while unknown
  started_at  timestamptz,
  finished_at timestamptz,
  message     text,
  updated_at  timestamptz NOT NULL DEFAULT pg_catalog.now(),
  PRIMARY KEY (run_id, name)
);
SELECT mlplat._member_reads('run_nodes');
GRANT SELECT ON mlplat.run_nodes TO PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('mlplat.run_nodes', '');

INSERT INTO mlplat.policies (role, action)
VALUES ('developer', 'retry_run'), ('deployer', 'retry_run'), ('owner', 'retry_run');

CREATE FUNCTION mlplat._run_workflow_name(p_run text, p_attempt int) RETURNS text
LANGUAGE sql IMMUTABLE AS $$ SELECT p_run || '-' || p_attempt $$;

-- One Argo container from a validated container spec.
CREATE FUNCTION mlplat._run_container(s jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
    'name', 'main',
    'image', s->>'image',
    'command', s->'command',
    'args', s->'args',
    'env', (SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('name', e.key, 'value', e.value) ORDER BY e.key)
              FROM pg_catalog.jsonb_each_text(s->'env') e),
    'resources', CASE WHEN s ?| ARRAY['cpu', 'memory'] OR coalesce((s->>'gpus')::int, 0) > 0 THEN
      pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
        'requests', CASE WHEN s ?| ARRAY['cpu', 'memory'] THEN
                      pg_catalog.jsonb_build_object('cpu', s->'cpu', 'memory', s->'memory') END,
        'limits', CASE WHEN coalesce((s->>'gpus')::int, 0) > 0 THEN
                    pg_catalog.jsonb_build_object('nvidia.com/gpu', (s->>'gpus')::int) END)) END))
$$;

-- The ServiceAccount a project's Workflows run as (mlplat.runner_service_account; the
-- projects reconciler makes it, with the Role Argo's executor needs, in every project).
CREATE FUNCTION mlplat._runner_service_account() RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT coalesce(NULLIF(pg_catalog.current_setting('mlplat.runner_service_account', true), ''), 'mlplat-runner')
$$;
REVOKE ALL ON FUNCTION mlplat._runner_service_account() FROM PUBLIC;

-- The exact Workflow for a run's current attempt.  Its pods run as the project's runner
-- ServiceAccount with no token of their own: Argo mounts the runner's token into its
-- executor containers only (executor.serviceAccountName), which write the steps'
-- workflowtaskresults; the run's code gets no Kubernetes credential.
CREATE FUNCTION mlplat._render_workflow(p_run_id bigint) RETURNS jsonb
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

-- The Workflow as it is sent: the render with its own content id (annotation
-- mlplat.io/content-id, the content id of the render without it).  A Workflow found under
-- the run's name is adopted as this run's only when it carries the same id.
CREATE FUNCTION mlplat._workflow_as_sent(p_run_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT x.w || pg_catalog.jsonb_build_object('metadata', (x.w->'metadata') || pg_catalog.jsonb_build_object(
           'annotations', coalesce(x.w->'metadata'->'annotations', '{}'::jsonb)
                          || pg_catalog.jsonb_build_object('mlplat.io/content-id', mlplat.content_id(x.w))))
    FROM (SELECT mlplat._render_workflow(p_run_id) AS w) x
$$;
REVOKE ALL ON FUNCTION mlplat._workflow_as_sent(bigint) FROM PUBLIC;

-- The SQL-callable preview: callers see renders only for projects they may view.
CREATE FUNCTION mlplat.render_workflow(project text, run text) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, mlplat, pg_temp AS $$
DECLARE
  pid bigint := mlplat._authorize('view', render_workflow.project);
BEGIN
  RETURN mlplat._workflow_as_sent((mlplat._find_run(pid, render_workflow.run)).id);
END $$;

-- An explicit retry of a finished, unsuccessful run: a new attempt, a new workflow name.
CREATE FUNCTION mlplat.retry_run(project text, run text)
RETURNS mlplat.accepted LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
  pid bigint := mlplat._authorize('retry_run', retry_run.project);
  r mlplat.accepted := (pg_catalog.gen_random_uuid(), 'run', NULL, NULL, NULL, false)::mlplat.accepted;
  tp text := mlplat._traceparent();
  seen mlplat.runs;
  p mlplat.projects;
BEGIN
  seen := mlplat._find_run(pid, retry_run.run);
  p := mlplat._lock_project(pid, seen.gpus > 0, 'retry_run');
  -- locked (after the project, as every writer of both) and read again: a reconciler's
  -- write-back in flight is waited for, not failed on, and a concurrent retry finds PENDING
  SELECT * INTO STRICT seen FROM mlplat.runs x WHERE x.id = seen.id FOR NO KEY UPDATE;
  IF seen.status NOT IN ('FAILED', 'CANCELLED') THEN
    PERFORM mlplat._wrong_state('run', seen.name, seen.status, 'retry_run',
      'Only a FAILED or CANCELLED run can be retried.');
  END IF;
  IF seen.gpus > 0 THEN
    PERFORM mlplat._check_gpu_quota(p, seen.gpus, NULL);
  END IF;
  UPDATE mlplat.runs x
  SET status = 'PENDING', status_reason = pg_catalog.format('retry requested: attempt %s', seen.attempt + 1),
      attempt = seen.attempt + 1, submitted_at = NULL, observed_rv = NULL, last_error = NULL,
      generation = x.generation + 1, row_version = x.row_version + 1, attempts = 0,
      next_attempt_at = pg_catalog.now(), traceparent = tp, updated_at = pg_catalog.now()
  WHERE x.id = seen.id;
  DELETE FROM mlplat.run_nodes n WHERE n.run_id = seen.id;
  UPDATE mlplat.run_steps s SET phase = NULL, exit_code = NULL WHERE s.run_id = seen.id;
  r.entity := seen.kind; r.entity_id := seen.id; r.status := 'PENDING';
  PERFORM mlplat._audit('retry_run', retry_run.project, pid, seen.kind, seen.id, r.request_id, tp,
    pg_catalog.jsonb_build_object('from', seen.status, 'attempt', seen.attempt + 1,
                                  'workflow', mlplat._run_workflow_name(seen.name, seen.attempt + 1)));
  PERFORM mlplat._wake_on_commit('runs');
  RETURN r;
END $$;

-- The seam (src/reconcile/seam.c): the claim returns mlplat.run_claim rows, the write-back
-- takes an array of mlplat.run_writeback; C reads and builds them by name.
CREATE TYPE mlplat.run_claim AS (
  id bigint, project text, namespace text, name text, kind text, status text /* STATUS run */,
  attempt int, workflow text, manifest text, row_version bigint, attempts int,
  due boolean, submitted boolean, observed_rv text, traceparent text);

-- One run's write-back: see _runs_writeback for what each attribute does.
CREATE TYPE mlplat.run_writeback AS (
  id bigint, row_version bigint, status text /* STATUS run */, reason text, error text, retry_ms int /* NULL<0 */,
  submitted boolean, observed_rv text, nodes jsonb);

-- Claim: every active run; the render where a create may be needed, or where a workflow
-- found may have to be recognised as this run's (never marked submitted).
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

-- The nodes of a run's observed workflow, written by its write-back: p_nodes is
-- [{name, node_id, type, phase, exit_code (string), started_at, finished_at, message}]; only
-- rows that differ are written (run_nodes, and the phase and exit code of the declared steps
-- of a pipeline).  Returns the rows written, also added to runs.step_rows_written.
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

-- The write-back of a pass in one statement, as every kind's: compare-and-swap on each row's
-- row_version and on the epoch; then the nodes of each run written whose workflow moved
-- (_runs_write_nodes).  Returns the runs written and the step rows each wrote.  The planner
-- probes the primary key once per element, in array order: ids ascending lock in id order.
CREATE FUNCTION mlplat._runs_writeback_set(p_epoch bigint, p_rows mlplat.run_writeback[])
RETURNS TABLE (id bigint, step_rows int)
LANGUAGE plpgsql
AS $$
DECLARE
  u record;
BEGIN
  FOR u IN
    UPDATE mlplat.runs r
       SET status = w.status,
           status_reason = coalesce(w.reason, r.status_reason),
           submitted_at = CASE WHEN w.submitted THEN coalesce(r.submitted_at, pg_catalog.now()) ELSE r.submitted_at END,
           observed_rv = coalesce(w.observed_rv, r.observed_rv),
           observed_changes = r.observed_changes + (w.observed_rv IS NOT NULL)::int,
           observed_generation = r.generation,
           observed_at = pg_catalog.now(),
           last_error = w.error,
           attempts = mlplat._retry_attempts(r.attempts, w.retry_ms),
           next_attempt_at = mlplat._retry_at(w.retry_ms),
           epoch = p_epoch,
           row_version = r.row_version + 1,
           updated_at = pg_catalog.now()
      FROM pg_catalog.unnest(p_rows) AS w
     WHERE r.id = w.id AND mlplat._writeback_holds(r.row_version, w.row_version, 'runs', p_epoch)
    RETURNING r.id, r.project_id, r.attempt, w.nodes
  LOOP
    id := u.id;
    step_rows := CASE WHEN u.nodes IS NULL THEN 0
                      ELSE mlplat._runs_write_nodes(u.id, u.project_id, u.attempt, u.nodes) END;
    RETURN NEXT;
  END LOOP;
END;
$$;

-- One run's write-back (tests and operators standing in for the reconciler): the step rows
-- written, or -1 when the compare-and-swap lost.
CREATE FUNCTION mlplat._runs_writeback(
    p_id bigint, p_row_version bigint, p_epoch bigint, p_status text, p_reason text,
    p_error text, p_retry_ms int, p_submitted boolean, p_observed_rv text, p_nodes jsonb)
RETURNS int
LANGUAGE sql
AS $$
  SELECT coalesce((SELECT s.step_rows FROM mlplat._runs_writeback_set(p_epoch, ARRAY[
           ROW(p_id, p_row_version, p_status, p_reason, p_error, p_retry_ms, p_submitted, p_observed_rv,
               p_nodes)::mlplat.run_writeback]) s), -1)
$$;

-- The runs view, plus the attempt and its workflow.
CREATE OR REPLACE VIEW mlplat.run_status WITH (security_invoker = true) AS
SELECT p.name AS project, u.name AS run, u.kind, u.status, u.status_reason,
       (mlplat.run_is_active(u.status)) AS in_flight,
       u.gpus, (SELECT pg_catalog.count(*) FROM mlplat.run_steps s WHERE s.run_id = u.id) AS steps,
       u.created_by, u.generation, u.observed_generation, u.attempts, u.last_error, u.next_attempt_at,
       u.traceparent, u.created_at, u.updated_at,
       u.attempt, u.name || '-' || u.attempt AS workflow, u.submitted_at
FROM mlplat.runs u
JOIN mlplat.projects p ON p.id = u.project_id;

-- One row per step: the declared steps of a pipeline (observed or not yet), and what Argo
-- reports for a single run ("main").
CREATE VIEW mlplat.run_step_status WITH (security_invoker = true) AS
SELECT p.name AS project, u.name AS run, u.attempt, st.name AS step, st.ordinal, st.depends_on,
       n.type, coalesce(n.phase, 'Waiting') AS phase, n.exit_code, n.started_at, n.finished_at, n.message,
       n.updated_at
FROM mlplat.runs u
JOIN mlplat.projects p ON p.id = u.project_id
JOIN LATERAL (
  SELECT s.name, s.ordinal, s.depends_on FROM mlplat.run_steps s WHERE s.run_id = u.id
  UNION ALL
  SELECT o.name, NULL::int, NULL::text[] FROM mlplat.run_nodes o
   WHERE o.run_id = u.id AND NOT EXISTS (SELECT 1 FROM mlplat.run_steps s WHERE s.run_id = u.id AND s.name = o.name)
) st ON true
LEFT JOIN mlplat.run_nodes n ON n.run_id = u.id AND n.name = st.name;
GRANT SELECT ON mlplat.run_step_status TO PUBLIC;

REVOKE ALL ON FUNCTION mlplat._run_workflow_name(text, int) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._run_container(jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._render_workflow(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._runs_claim() FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._runs_writeback(bigint, bigint, bigint, text, text, text, int, boolean, text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._runs_writeback_set(bigint, mlplat.run_writeback[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._runs_write_nodes(bigint, bigint, int, jsonb) FROM PUBLIC;
