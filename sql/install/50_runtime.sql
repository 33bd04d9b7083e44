-- 50_runtime: state the reconciler workers keep in tables.
--
-- Leadership itself is a session lock no SQL can take (see src/worker/worker.c); the
-- table only records each acquisition, so every write a leader makes can be
-- stamped with, and fenced by, the epoch it led under.

CREATE TABLE mlplat.leader_epochs (
    kind        text PRIMARY KEY,
    epoch       bigint NOT NULL,
    pid         int NOT NULL,
    replica     int NOT NULL,
    host        text NOT NULL,
    acquired_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE mlplat.leader_epochs IS
  'Current leader epoch per reconciler kind; bumped each time a replica takes the leader lock.';

CREATE TABLE mlplat.leader_history (
    kind        text NOT NULL,
    epoch       bigint NOT NULL,
    pid         int NOT NULL,
    replica     int NOT NULL,
    host        text NOT NULL,
    acquired_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (kind, epoch)
);

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

-- Called by a worker right after it took the kind's leader lock.
CREATE FUNCTION mlplat._take_leadership(p_kind text, p_pid int, p_replica int)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_epoch bigint;
    v_host  text := coalesce(pg_catalog.inet_server_addr()::text, pg_catalog.current_setting('cluster_name'), '')
                    || ':' || pg_catalog.current_setting('port');
BEGIN
    INSERT INTO mlplat.leader_epochs AS e (kind, epoch, pid, replica, host, acquired_at)
    VALUES (p_kind, 1, p_pid, p_replica, v_host, pg_catalog.clock_timestamp())
    ON CONFLICT (kind) DO UPDATE
       SET epoch = e.epoch + 1, pid = EXCLUDED.pid, replica = EXCLUDED.replica,
           host = EXCLUDED.host, acquired_at = EXCLUDED.acquired_at
    RETURNING epoch INTO v_epoch;
    INSERT INTO mlplat.leader_history (kind, epoch, pid, replica, host, acquired_at)
    VALUES (p_kind, v_epoch, p_pid, p_replica, v_host, pg_catalog.clock_timestamp());
    RETURN v_epoch;
END;
$$;
REVOKE ALL ON FUNCTION mlplat._take_leadership(text, int, int) FROM PUBLIC;

-- One row per worker replica, from shared memory (empty when not preloaded).
CREATE FUNCTION mlplat._replica_states(
    OUT kind text, OUT replica int, OUT pid int, OUT role text, OUT epoch bigint,
    OUT started_at timestamptz, OUT last_pass_start timestamptz, OUT last_pass_end timestamptz,
    OUT passes bigint, OUT pass_errors bigint, OUT http_requests bigint, OUT http_errors bigint,
    OUT status text, OUT http_latency_ms_total float8)
RETURNS SETOF record
LANGUAGE C VOLATILE
AS 'MODULE_PATHNAME', 'mlplat_replica_states';
REVOKE ALL ON FUNCTION mlplat._replica_states() FROM PUBLIC;

-- The reconcile ledger: one row per apply, delete, repair or orphan teardown,
-- written by the leader that did it, in the same transaction as its write-back.
CREATE TABLE mlplat.reconcile_ledger (
    id             bigserial PRIMARY KEY,
    at             timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    kind           text NOT NULL,
    entity         text NOT NULL,
    entity_id      bigint,
    project        text,
    action         text NOT NULL CHECK (action IN ('APPLY', 'CREATE', 'ADOPT', 'DELETE', 'REPAIR',
                                                   'ORPHAN_TEARDOWN', 'PATCH', 'VERIFY', 'OBSERVE')),
    outcome        text NOT NULL CHECK (outcome IN ('OK', 'FAILED', 'CONFLICT', 'RETRY', 'SKIPPED')),
    desired_digest text,
    observed_digest text,
    http_status    int,
    error          text,
    epoch          bigint NOT NULL,
    controller     text NOT NULL,
    trace_id       text,
    detail         jsonb
);
CREATE INDEX reconcile_ledger_at ON mlplat.reconcile_ledger (at);
CREATE INDEX reconcile_ledger_entity ON mlplat.reconcile_ledger (kind, entity_id, at);
COMMENT ON TABLE mlplat.reconcile_ledger IS
  'What each reconciler did to the outside world, with the leader epoch and controller that did it.';

-- Appends ledger rows if, and only if, p_epoch is still the kind's current epoch: a deposed
-- leader's write is refused, never silently mixed in.  Element i of every array is one row
-- (a pass writes all its rows with one statement); they are inserted in array order.  A note
-- goes into detail as {"note": ...}.  Returns the number of rows written.
CREATE FUNCTION mlplat._ledger_append_set(
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
REVOKE ALL ON FUNCTION mlplat._ledger_append_set(text, bigint, text, text[], bigint[], text[], text[], text[], text[], text[], int[], text[], text[], text[]) FROM PUBLIC;

-- One row: true if it was written (false: p_epoch is not the kind's current epoch).
CREATE FUNCTION mlplat._ledger_append(
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
REVOKE ALL ON FUNCTION mlplat._ledger_append(text, text, bigint, text, text, text, text, text, int, text, bigint, text, text, jsonb) FROM PUBLIC;

-- Write-ahead record of external writes whose answer is not (yet) recorded.  A reconciler
-- notes every write here, committed, before it sends the request, and removes the note in
-- the write-back of the pass that heard the answer.  A note that outlives its pass (the
-- leader was terminated between the request and its write-back, or the answer never came)
-- tells the next leader that the object may exist, or may still appear, although nothing
-- else in the database says so: it looks for the object in the cluster before concluding
-- anything ("never submitted", "gone"), adopts what it finds (a ledger ADOPT row), and
-- treats an object that has not appeared within mlplat.unanswered_write_grace as never made.
CREATE TABLE mlplat.unanswered_writes (
    kind       text NOT NULL,         -- the reconciler (leader_epochs.kind)
    entity_id  bigint NOT NULL,
    object     text NOT NULL,         -- namespace/name of the object written
    action     text NOT NULL,         -- the ledger action the write will be recorded as
    sent_at    timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    epoch      bigint NOT NULL,       -- the leader that sent it: one note per leader and write
    -- A later leader's write of the same object was answered after this note was made: seeing
    -- the object no longer proves that this write landed (it may be the later write's), so
    -- only the grace settles this note (a sight does not).
    overtaken  boolean NOT NULL DEFAULT false,
    PRIMARY KEY (kind, entity_id, object, action, epoch)
);
COMMENT ON TABLE mlplat.unanswered_writes IS
  'External writes sent (or about to be) whose answer no write-back has recorded yet.';

-- Note writes about to be sent, if and only if p_epoch is still the kind's current epoch.
-- Returns the rows noted: fewer than asked means the caller is no longer the leader and
-- must send nothing.
CREATE FUNCTION mlplat._unanswered_note(p_kind text, p_epoch bigint, p_entity_id bigint[], p_object text[],
                                        p_action text[])
RETURNS int
LANGUAGE sql
AS $$
  WITH ins AS (
    INSERT INTO mlplat.unanswered_writes AS w (kind, entity_id, object, action, sent_at, epoch)
    SELECT p_kind, r.entity_id, r.object, r.action, pg_catalog.clock_timestamp(), p_epoch
      FROM unnest(p_entity_id, p_object, p_action) AS r(entity_id, object, action)
     WHERE mlplat._epoch_current(p_kind, p_epoch)
    ON CONFLICT (kind, entity_id, object, action, epoch) DO UPDATE
       SET sent_at = EXCLUDED.sent_at
    RETURNING 1)
  SELECT pg_catalog.count(*)::int FROM ins
$$;

-- The notes of one kind, with their age in milliseconds (the claim of a pass reads them):
-- one per entity, object and action, the youngest of its leaders' notes, so that a note
-- counts as past the grace only when every write it stands for is; overtaken when all of
-- them are (a sight of the object then proves none of them landed).
-- Read by name through the seam (seam.h, src/reconcile/unanswered.c).
CREATE TYPE mlplat.unanswered_note AS (entity_id bigint, object text, action text, age_ms bigint,
                                       overtaken boolean);
CREATE FUNCTION mlplat._unanswered_of(p_kind text)
RETURNS SETOF mlplat.unanswered_note
LANGUAGE sql STABLE
AS $$
  SELECT w.entity_id, w.object, w.action,
         (pg_catalog.date_part('epoch', pg_catalog.clock_timestamp() - pg_catalog.max(w.sent_at)) * 1000)::bigint,
         pg_catalog.bool_and(w.overtaken)
    FROM mlplat.unanswered_writes w
   WHERE w.kind = p_kind
   GROUP BY w.entity_id, w.object, w.action
$$;

-- Remove notes whose answer a write-back records (or whose object a pass found or gave up
-- on), if p_epoch is still current.  A NULL action names every note of that object.
--   p_answer 1: the caller's own write was answered.  That settles only the caller's own
--     notes (epoch p_epoch): an earlier leader's write of the object, sent before it died,
--     may still be in flight and land later (the real-peer soak: the next leader's answered
--     apply removed the note of the held one, the deployment was deleted, and the held apply
--     left an orphan).
--   p_answer 2: the same, and the answer says the write made or set the object (a 2xx to a
--     create or an apply): earlier leaders' notes of the object are marked overtaken, since
--     the object now seen may be this write's.  A refusal or a delete makes nothing (1).
--   p_answer 0: the object was found (adopted), or a note had the grace to land.  A
--     sight settles the notes it can prove, those not overtaken; the grace settles any
--     note older than p_grace_ms.  A note both found and overtaken in one call (adopted,
--     then written over in the same pass) goes: it was seen before the answer.
CREATE FUNCTION mlplat._unanswered_clear(p_kind text, p_epoch bigint, p_entity_id bigint[], p_object text[],
                                         p_action text[], p_answer int[], p_grace_ms bigint)
RETURNS int
LANGUAGE sql
AS $$
  WITH r AS (
    SELECT u.*
      FROM unnest(p_entity_id, p_object, p_action, p_answer) AS u(entity_id, object, action, answer)
     WHERE mlplat._epoch_current(p_kind, p_epoch)),
  del AS (
    DELETE FROM mlplat.unanswered_writes w
     USING r
     WHERE w.kind = p_kind AND w.entity_id = r.entity_id AND w.object = r.object
       AND (r.action IS NULL OR w.action = r.action)
       AND CASE WHEN r.answer > 0 THEN w.epoch = p_epoch
                ELSE NOT w.overtaken
                     OR w.sent_at <= pg_catalog.clock_timestamp() - p_grace_ms * interval '1 millisecond' END
    RETURNING 1),
  overtaken AS (
    UPDATE mlplat.unanswered_writes w SET overtaken = true
      FROM r
     WHERE r.answer = 2 AND w.kind = p_kind AND w.entity_id = r.entity_id AND w.object = r.object
       AND w.epoch < p_epoch AND NOT w.overtaken
       AND NOT EXISTS (SELECT 1 FROM r s
                        WHERE s.answer = 0 AND s.entity_id = w.entity_id AND s.object = w.object
                          AND (s.action IS NULL OR s.action = w.action))
    RETURNING 1)
  SELECT pg_catalog.count(*)::int FROM del
$$;
REVOKE ALL ON FUNCTION mlplat._unanswered_note(text, bigint, bigint[], text[], text[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._unanswered_of(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._unanswered_clear(text, bigint, bigint[], text[], text[], int[], bigint)
  FROM PUBLIC;

-- Retention (mlplat.run_retention and who runs it): 80_retention.sql.


-- Every live reconciled entity with the columns all kinds share; the health
-- and alerts views read it.
CREATE VIEW mlplat._entities AS
    SELECT 'projects' AS kind, p.name AS entity, p.id AS entity_id, p.name AS project,
           p.generation, p.observed_generation, p.attempts, p.last_error, p.status, p.updated_at
      FROM mlplat.projects p WHERE p.status <> 'DELETED'
    UNION ALL
    SELECT 'deployments', d.name, d.id, p.name, d.generation, d.observed_generation, d.attempts,
           d.last_error, d.status, d.updated_at
      FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id WHERE d.status <> 'DELETED'
    UNION ALL
    SELECT 'runs', r.name, r.id, p.name, r.generation, r.observed_generation, r.attempts,
           r.last_error, r.status, r.updated_at
      FROM mlplat.runs r JOIN mlplat.projects p ON p.id = r.project_id
     WHERE mlplat.run_is_active(r.status)
    UNION ALL
    SELECT 'model_aliases', a.alias, a.id, p.name, a.generation, a.observed_generation, a.attempts,
           a.last_error, a.status, a.updated_at
      FROM mlplat.model_aliases a JOIN mlplat.models m ON m.id = a.model_id JOIN mlplat.projects p ON p.id = m.project_id
    UNION ALL
    SELECT 'rollouts', d.name, o.id, p.name, o.generation, o.observed_generation, o.attempts,
           o.last_error, o.status, o.updated_at
      FROM mlplat.rollouts o JOIN mlplat.deployments d ON d.id = o.deployment_id JOIN mlplat.projects p ON p.id = d.project_id
     WHERE mlplat.rollout_is_active(o.status)
    UNION ALL
    -- campaign candidates the campaigns reconciler acts on: a build running or being stopped
    -- (PLANNED ones wait for an approval or their turn: the admission, not a reconcile)
    SELECT 'campaigns', c.name || '/' || k.name, k.id, p.name, k.generation, k.observed_generation, k.attempts,
           k.last_error, k.status, k.updated_at
      FROM mlplat.campaign_candidates k JOIN mlplat.campaigns c ON c.id = k.campaign_id JOIN mlplat.projects p ON p.id = k.project_id
     WHERE mlplat.candidate_is_building(k.status);
REVOKE ALL ON mlplat._entities FROM PUBLIC;

-- Per kind and replica: leader or standby, epoch, last pass, the kind's pending
-- entities and the age of the oldest, errors, HTTP counts and mean latency.
CREATE VIEW mlplat.reconciler_health AS
SELECT s.kind, s.replica, s.pid, s.role,
       CASE WHEN s.role IN ('leader', 'idle') THEN e.epoch END AS epoch,
       s.started_at, s.last_pass_start, s.last_pass_end,
       s.last_pass_end - s.last_pass_start AS last_pass_duration,
       s.passes, s.pass_errors,
       coalesce(p.pending, 0) AS pending,
       p.oldest_pending_age,
       (SELECT count(*) FROM mlplat.reconcile_ledger l
         WHERE l.kind = s.kind AND l.outcome = 'FAILED' AND l.at > pg_catalog.now() - interval '1 hour') AS errors_last_hour,
       s.http_requests, s.http_errors,
       round((s.http_latency_ms_total / NULLIF(s.http_requests, 0))::numeric, 1) AS http_mean_latency_ms,
       s.status
  FROM mlplat._replica_states() s
  LEFT JOIN mlplat.leader_epochs e ON e.kind = s.kind
  LEFT JOIN (SELECT x.kind, count(*) AS pending, pg_catalog.now() - min(x.updated_at) AS oldest_pending_age
               FROM mlplat._entities x
              WHERE x.generation <> x.observed_generation
                 OR x.status IN ('PENDING', 'PROVISIONING', 'DEPLOYING', 'DRIFTED', 'DELETING',
                                 'SUBMITTED', 'CANCEL_REQUESTED', 'PROGRESSING', 'ROLLING_BACK')
              GROUP BY x.kind) p ON p.kind = s.kind;
COMMENT ON VIEW mlplat.reconciler_health IS
  'One row per reconciler replica: role, epoch, last pass, pending work and its age, errors, HTTP counts and latency.';
REVOKE ALL ON mlplat.reconciler_health FROM PUBLIC;

-- Conditions of canary rollouts an operator should look at (part of mlplat.alerts):
--   repeated_holds       the last 3 decisions of a HOLDING rollout were all HOLD
--   stale_health         an active rollout not observed for longer than its window
--   rollback_route_loss  the previous revision is missing from the route (rolling back,
--                        or a decision found it not warm)
--   surge_exhaustion     an active canary's reserved GPUs (start_rollout reserves them) no
--                        longer fit the project's quota (the quota row was changed
--                        outside set_project_quota, which refuses to go below use)
--   request_regression   a rollout rolled back on a demonstrated request regression (last hour)
CREATE VIEW mlplat._rollout_alerts AS
WITH active AS (
  SELECT ro.id, ro.project_id, ro.status, ro.status_reason, ro.policy, ro.surge_gpus, ro.last_error,
         ro.observed_at, ro.created_at, ro.updated_at, p.name AS project, d.name AS deployment, p.gpu_quota,
         (SELECT pg_catalog.array_agg(t.decision ORDER BY t.seq DESC) FROM
            (SELECT t.decision, t.seq FROM mlplat.rollout_transitions t WHERE t.rollout_id = ro.id
              ORDER BY t.seq DESC LIMIT 3) t) AS last3,
         (SELECT t.reasons FROM mlplat.rollout_transitions t WHERE t.rollout_id = ro.id
           ORDER BY t.seq DESC LIMIT 1) AS last_reasons
    FROM mlplat.rollouts ro
    JOIN mlplat.deployments d ON d.id = ro.deployment_id
    JOIN mlplat.projects p ON p.id = ro.project_id
   WHERE mlplat.rollout_is_active(ro.status))
SELECT 'repeated_holds' AS alert, 'warning' AS severity, a.project, a.deployment, a.id AS rollout_id,
       pg_catalog.format('3 HOLD decisions in a row; last reasons: %s', pg_catalog.array_to_string(a.last_reasons, ', ')) AS detail,
       a.updated_at AS since
  FROM active a WHERE a.status = 'HOLDING' AND a.last3 = ARRAY['HOLD', 'HOLD', 'HOLD']
UNION ALL
SELECT 'stale_health', 'warning', a.project, a.deployment, a.id,
       pg_catalog.format('InferenceService last observed %s ago; last error: %s',
                         pg_catalog.date_trunc('second', pg_catalog.now() - coalesce(a.observed_at, a.created_at)),
                         coalesce(a.last_error, '-')),
       coalesce(a.observed_at, a.created_at)
  FROM active a
 WHERE coalesce(a.observed_at, a.created_at)
       < pg_catalog.now() - pg_catalog.make_interval(secs => GREATEST((a.policy->>'window_seconds')::int, 30))
UNION ALL
SELECT 'rollback_route_loss', 'critical', a.project, a.deployment, a.id,
       coalesce(CASE WHEN a.status_reason LIKE 'rollback route lost%' THEN a.status_reason END,
                'the last decision found the previous revision not ready and warm'),
       a.updated_at
  FROM active a
 WHERE a.status_reason LIKE 'rollback route lost%' OR 'PREVIOUS_NOT_WARM' = ANY (a.last_reasons)
UNION ALL
SELECT 'surge_exhaustion', 'warning', a.project, a.deployment, a.id,
       pg_catalog.format('canary reserves %s GPUs; %s committed, quota %s', a.surge_gpus, x.in_use, a.gpu_quota),
       a.created_at
  FROM active a
  CROSS JOIN LATERAL (SELECT mlplat._gpus_in_use(a.project_id) AS in_use) x
 WHERE a.surge_gpus > 0 AND x.in_use > a.gpu_quota
UNION ALL
SELECT 'request_regression', 'critical', p.name, d.name, ro.id,
       pg_catalog.format('rolled back revision %s: %s', ro.target_revision, pg_catalog.array_to_string(t.reasons, ', ')),
       t.at
  FROM mlplat.rollout_transitions t
  JOIN mlplat.rollouts ro ON ro.id = t.rollout_id
  JOIN mlplat.deployments d ON d.id = ro.deployment_id
  JOIN mlplat.projects p ON p.id = ro.project_id
 WHERE t.decision = 'ROLLBACK' AND t.at > pg_catalog.now() - interval '1 hour';
REVOKE ALL ON mlplat._rollout_alerts FROM PUBLIC;

