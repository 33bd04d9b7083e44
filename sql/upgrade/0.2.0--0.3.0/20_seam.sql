-- 20_seam: the typed seam between each kind's SQL and its C pass (src/reconcile/seam.c).
-- A claim returns rows of a named composite type and the write-back takes an array of one;
-- functions whose return or argument types change are dropped and made again.

-- deployments
-- The seam between this SQL and the C pass (src/reconcile/seam.c): the claim returns rows of
-- mlplat.deployment_claim and the write-back takes an array of mlplat.deployment_writeback.
-- C reads and builds them by attribute name and checks them against its own table when a
-- worker starts (a mismatch stops the pass with a message naming the attribute): a field is
-- one attribute here and one line in src/reconcile/deployments.c.
--
-- deadline_ms is the deploy deadline that applies (deadline_own: the deployment's own),
-- deadline_passed says the revision asked for at ready_wait_since has had longer than that to
-- become READY.  seen_*: what KServe showed at the revision's first apply (seen_known: it was
-- recorded; observed.kserve_at_apply, see isvc_status_current in deployments.c).
CREATE TYPE mlplat.deployment_claim AS (
  id bigint, project text, namespace text, name text, status text,
  generation bigint, observed_generation bigint, row_version bigint,
  desired_revision int, spec text, spec_digest text, traceparent text,
  attempts int, due boolean, drift_policy text, status_reason text,
  deadline_passed boolean, deadline_ms bigint, deadline_own boolean,
  seen_known boolean, seen_rev int, seen_og bigint, seen_lcr text);

-- One deployment's write-back.  retry_ms: NULL = no retry scheduled (success: attempts reset);
-- otherwise attempts + 1 and next_attempt_at = now() + retry_ms.  NULL in observed_generation /
-- observed_revision / endpoint keeps the stored value; top-level keys of observed replace those
-- of the stored observed.
CREATE TYPE mlplat.deployment_writeback AS (
  id bigint, row_version bigint, status text, reason text,
  observed_generation bigint, observed_revision int, endpoint text, observed jsonb,
  error text, retry_ms int);

-- When a row just compared with the cluster is compared again although nothing changed:
-- mlplat.resync_interval (the caller's setting: the worker's) x a uniform [0.5, 1.5) from now,
-- so a fleet written or resynced in one pass does not fall due in one pass again.  While the
-- leader's watch cache is healthy it sets mlplat.row_resync_interval (mlplat.watch_resync_interval:
-- out-of-band changes then arrive as events), which takes the place of mlplat.resync_interval.
CREATE FUNCTION mlplat._next_resync_at() RETURNS timestamptz
LANGUAGE sql VOLATILE
AS $$
  SELECT pg_catalog.now()
         + coalesce(nullif(pg_catalog.current_setting('mlplat.row_resync_interval', true), '0'),
                    pg_catalog.current_setting('mlplat.resync_interval', true), '30s')::interval
           * (0.5 + pg_catalog.random())
$$;
REVOKE ALL ON FUNCTION mlplat._next_resync_at() FROM PUBLIC;

ALTER TABLE mlplat.deployments ADD COLUMN next_resync_at timestamptz NOT NULL DEFAULT pg_catalog.now();
-- its indexes deployments_resync_due and deployments_changed: part 99_claim9

-- the claim's 0.2.0 signature; the claim with its chunk's arguments: part 99_claim9
DROP FUNCTION mlplat._deployments_claim(boolean, boolean, int);

-- The write-back of a whole pass in one statement, one element of p_rows per deployment
-- written.  A row is written only if it is still at its row_version (an intent or another
-- leader that got there first wins) and p_epoch is still the kind's epoch.  Returns the ids
-- written.  The planner takes an unnest of a parameter for a few rows, so it probes the
-- primary key once per element, in array order: a caller passing ids ascending locks rows in
-- id order, as writing them one by one did.
DROP FUNCTION mlplat._deployments_writeback_set(bigint, bigint[], bigint[], text[], text[], bigint[], int[], text[], jsonb[], text[], int[]);
CREATE FUNCTION mlplat._deployments_writeback_set(p_epoch bigint, p_rows mlplat.deployment_writeback[])
RETURNS SETOF bigint
LANGUAGE sql
AS $$
  UPDATE mlplat.deployments d
     SET status = w.status,
         status_reason = w.reason,
         observed_generation = coalesce(w.observed_generation, d.observed_generation),
         observed_revision = coalesce(w.observed_revision, d.observed_revision),
         ready_revision = CASE WHEN w.status = 'READY' THEN coalesce(w.observed_revision, d.observed_revision)
                               WHEN w.status = 'DELETED' THEN NULL ELSE d.ready_revision END,
         endpoint = CASE WHEN w.status IN ('DELETED') THEN NULL ELSE coalesce(w.endpoint, d.endpoint) END,
         ready_wait_since = CASE WHEN w.status = 'READY' THEN NULL ELSE d.ready_wait_since END,
         observed = CASE WHEN w.observed IS NULL THEN d.observed ELSE coalesce(d.observed, '{}'::jsonb) || w.observed END,
         observed_at = pg_catalog.now(),
         last_error = w.error,
         attempts = mlplat._retry_attempts(d.attempts, w.retry_ms),
         next_attempt_at = mlplat._retry_at(w.retry_ms),
         next_resync_at = mlplat._next_resync_at(),
         epoch = p_epoch,
         row_version = d.row_version + 1,
         updated_at = pg_catalog.now()
    FROM pg_catalog.unnest(p_rows) AS w
   WHERE d.id = w.id AND mlplat._writeback_holds(d.row_version, w.row_version, 'deployments', p_epoch)
  RETURNING d.id
$$;
REVOKE ALL ON FUNCTION mlplat._deployments_writeback_set(bigint, mlplat.deployment_writeback[]) FROM PUBLIC;

-- One deployment's write-back (tests and operators standing in for the reconciler).
CREATE OR REPLACE FUNCTION mlplat._deployments_writeback(
    p_id bigint, p_row_version bigint, p_epoch bigint,
    p_status text, p_reason text, p_observed_generation bigint, p_observed_revision int,
    p_endpoint text, p_observed jsonb, p_error text, p_retry_ms int)
RETURNS boolean
LANGUAGE sql
AS $$
  SELECT EXISTS (SELECT 1 FROM mlplat._deployments_writeback_set(p_epoch, ARRAY[
           ROW(p_id, p_row_version, p_status, p_reason, p_observed_generation, p_observed_revision,
               p_endpoint, p_observed, p_error, p_retry_ms)::mlplat.deployment_writeback]))
$$;
REVOKE ALL ON FUNCTION mlplat._deployments_writeback(bigint, bigint, bigint, text, text, bigint, int, text, jsonb, text, int) FROM PUBLIC;


-- model aliases
-- The seam (src/reconcile/seam.c): the claim returns mlplat.model_alias_claim rows, the
-- write-back takes an array of mlplat.model_alias_writeback; C reads and builds them by name.
CREATE TYPE mlplat.model_alias_claim AS (
  id bigint, project text, registered_model text, alias text,
  version_id bigint, version text, artifact_uri text, registry_version text,
  status text, generation bigint, observed_generation bigint, row_version bigint,
  moved_by text, traceparent text, attempts int, due boolean);

-- retry_ms: NULL = no retry (attempts reset); otherwise attempts + 1 and
-- next_attempt_at = now() + retry_ms.  NULL observed_generation / observed keep the stored ones.
CREATE TYPE mlplat.model_alias_writeback AS (
  id bigint, row_version bigint, status text, reason text,
  observed_generation bigint, observed jsonb, error text, retry_ms int);

DROP FUNCTION mlplat._aliases_claim(boolean);
CREATE FUNCTION mlplat._aliases_claim(p_resync boolean)
RETURNS SETOF mlplat.model_alias_claim
LANGUAGE sql STABLE
AS $$
  SELECT a.id, p.name, p.name || '.' || m.name, a.alias,
         a.version_id, mv.version, mv.artifact_uri, rv.registry_version,
         a.status, a.generation, a.observed_generation, a.row_version,
         a.moved_by, a.traceparent, a.attempts,
         a.next_attempt_at <= pg_catalog.now()
           AND (p_resync OR a.status <> 'SYNCED' OR a.generation <> a.observed_generation)
    FROM mlplat.model_aliases a
    JOIN mlplat.models m ON m.id = a.model_id
    JOIN mlplat.projects p ON p.id = a.project_id
    LEFT JOIN mlplat.model_versions mv ON mv.id = a.version_id
    LEFT JOIN mlplat.model_registry_versions rv ON rv.version_id = a.version_id
   WHERE p.status <> 'DELETED'
   ORDER BY a.id
$$;

-- The compare-and-swap write-back of the kinds whose rows carry only the common reconcile
-- columns (projects, model_aliases: their writeback types have the same fields), one
-- statement a pass: a row is written only while still at its row_version and while p_epoch
-- is the kind's epoch (the kind is named as its table).  Returns each row written with the
-- status it now has.  The one statement is built per call (the table is an argument): one
-- parse and plan a pass, not one a row.
CREATE FUNCTION mlplat._status_writeback_set(p_table text, p_epoch bigint, p_rows anyarray)
RETURNS TABLE (id bigint, status text)
LANGUAGE plpgsql
AS $$
BEGIN
  RETURN QUERY EXECUTE pg_catalog.format(
    'UPDATE mlplat.%I t
        SET status = w.status,
            status_reason = w.reason,
            observed_generation = coalesce(w.observed_generation, t.observed_generation),
            observed = coalesce(w.observed, t.observed),
            observed_at = pg_catalog.now(),
            last_error = w.error,
            attempts = mlplat._retry_attempts(t.attempts, w.retry_ms),
            next_attempt_at = mlplat._retry_at(w.retry_ms),
            epoch = $1,
            row_version = t.row_version + 1,
            updated_at = pg_catalog.now()
       FROM pg_catalog.unnest($2) AS w
      WHERE t.id = w.id AND mlplat._writeback_holds(t.row_version, w.row_version, %L, $1)
     RETURNING t.id, t.status', p_table, p_table) USING p_epoch, p_rows;
END $$;
REVOKE ALL ON FUNCTION mlplat._status_writeback_set(text, bigint, anyarray) FROM PUBLIC;

-- The write-back of a pass in one statement: compare-and-swap on each row's row_version and
-- on the epoch.  Returns the ids written.
CREATE FUNCTION mlplat._aliases_writeback_set(p_epoch bigint, p_rows mlplat.model_alias_writeback[])
RETURNS SETOF bigint
LANGUAGE sql
AS $$
  SELECT u.id FROM mlplat._status_writeback_set('model_aliases', p_epoch, p_rows) u
$$;

REVOKE ALL ON FUNCTION mlplat._aliases_claim(boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._aliases_writeback_set(bigint, mlplat.model_alias_writeback[]) FROM PUBLIC;

-- projects (the claim is made again in part 99_render8; the wake of runs is in _projects_writeback_set)
-- The seam (src/reconcile/seam.c): the claim returns mlplat.project_claim rows, the write-back
-- takes an array of mlplat.project_writeback; C reads and builds them by name.
CREATE TYPE mlplat.project_claim AS (
  id bigint, name text,
  status text, status_reason text, last_error text,
  generation bigint, observed_generation bigint, row_version bigint,
  traceparent text, attempts int, due boolean, manifests text[], quota_generation bigint);

-- retry_ms: NULL = no retry scheduled (attempts reset, due again at once); otherwise
-- attempts + 1 and next_attempt_at = now() + retry_ms.  NULL observed_generation / observed
-- keep the stored ones.
CREATE TYPE mlplat.project_writeback AS (
  id bigint, row_version bigint, status text, reason text,
  observed_generation bigint, observed jsonb, error text, retry_ms int);

-- The write-back of a pass in one statement: compare-and-swap on each row's row_version and
-- on the epoch.  Returns the ids written.  Runs wait for their project to be READY (its runner
-- identity): a project written READY wakes them, not the resync.
CREATE FUNCTION mlplat._projects_writeback_set(p_epoch bigint, p_rows mlplat.project_writeback[])
RETURNS SETOF bigint
LANGUAGE plpgsql
AS $$
DECLARE
    ids bigint[];
    ready boolean;
BEGIN
    SELECT pg_catalog.array_agg(u.id), coalesce(pg_catalog.bool_or(u.status = 'READY'), false)
      INTO ids, ready FROM mlplat._status_writeback_set('projects', p_epoch, p_rows) u;
    IF ready THEN
        PERFORM mlplat._wake_on_commit('runs');
    END IF;
    RETURN QUERY SELECT x FROM pg_catalog.unnest(ids) x;
END;
$$;
REVOKE ALL ON FUNCTION mlplat._projects_writeback_set(bigint, mlplat.project_writeback[]) FROM PUBLIC;


-- runs (the claim is made again in part 96)
-- The seam (src/reconcile/seam.c): the claim returns mlplat.run_claim rows, the write-back
-- takes an array of mlplat.run_writeback; C reads and builds them by name.
CREATE TYPE mlplat.run_claim AS (
  id bigint, project text, namespace text, name text, kind text, status text,
  attempt int, workflow text, manifest text, row_version bigint, attempts int,
  due boolean, submitted boolean, observed_rv text, traceparent text);

-- One run's write-back: see _runs_writeback for what each attribute does.
CREATE TYPE mlplat.run_writeback AS (
  id bigint, row_version bigint, status text, reason text, error text, retry_ms int,
  submitted boolean, observed_rv text, nodes jsonb);

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
CREATE OR REPLACE FUNCTION mlplat._runs_writeback(
    p_id bigint, p_row_version bigint, p_epoch bigint, p_status text, p_reason text,
    p_error text, p_retry_ms int, p_submitted boolean, p_observed_rv text, p_nodes jsonb)
RETURNS int
LANGUAGE sql
AS $$
  SELECT coalesce((SELECT s.step_rows FROM mlplat._runs_writeback_set(p_epoch, ARRAY[
           ROW(p_id, p_row_version, p_status, p_reason, p_error, p_retry_ms, p_submitted, p_observed_rv,
               p_nodes)::mlplat.run_writeback]) s), -1)
$$;
REVOKE ALL ON FUNCTION mlplat._runs_writeback_set(bigint, mlplat.run_writeback[]) FROM PUBLIC;

-- rollouts (the claim is made again in part 74)
-- The seam (src/reconcile/seam.c): the claim returns mlplat.rollout_claim rows, which C reads
-- by name.  The write-back is _rollouts_observe, one call per rollout: it applies the pass's
-- decision and records (see docs/rollouts.md).
CREATE TYPE mlplat.rollout_claim AS (
  id bigint, project text, namespace text, name text, status text /* STATUS rollout */, row_version bigint,
  spec text, want_percent int, target_revision int, target_kn text, previous_kn text,
  window_start_ms bigint, window_seconds int, decide_at_ms bigint, attempts int, due boolean,
  traceparent text, metrics_preset text, requested_action text, fraction numeric, window_started boolean,
  contract text, target_replicas int, previous_replicas int);

