-- 0.2.0 -> 0.3.0, part 50: retention that always runs and bounds every growing table
-- (issue 18, finding 11).  See sql/install/80_retention.sql; pg_cron's job, if 0.2.0
-- scheduled it, stays as it was.

-- What is left of a purged idempotency key (run_retention): a fingerprint of (principal,
-- action, key), so a retry that arrives after its key was purged is refused instead of doing
-- the request a second time.  Kept mlplat.idempotency_tombstone_retention days.
CREATE TABLE mlplat.idempotency_tombstones (
  fingerprint    bytea PRIMARY KEY,     -- _idem_fingerprint: 16 bytes of a SHA-256
  key_created_at timestamptz NOT NULL,  -- when the key was first used
  purged_at      timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE mlplat.idempotency_tombstones IS
  'Fingerprints of purged idempotency keys: a retry with one is refused (mlplat.idempotency_tombstone_retention days).';

-- Lengths first, so no two (principal, action, key) triples share the hashed text.
-- Inlinable (STABLE like convert_to(), only strict calls in the body, as a STRICT SQL
-- function needs); format() made every call parse and plan its body.
CREATE FUNCTION mlplat._idem_fingerprint(p_principal text, p_action text, p_key text) RETURNS bytea
LANGUAGE sql STABLE STRICT AS $$
  SELECT pg_catalog.substr(pg_catalog.sha256(pg_catalog.convert_to(
           pg_catalog.length(p_principal)::text OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) p_principal
           OPERATOR(pg_catalog.||) '|' OPERATOR(pg_catalog.||) pg_catalog.length(p_action)::text
           OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) p_action OPERATOR(pg_catalog.||) '|'
           OPERATOR(pg_catalog.||) p_key, 'UTF8')), 1, 16)
$$;
REVOKE ALL ON FUNCTION mlplat._idem_fingerprint(text, text, text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION mlplat._idem_claim(p_action text, p_key text, p_request jsonb, p_who text DEFAULT NULL)
RETURNS mlplat.accepted LANGUAGE plpgsql AS $$
DECLARE
  h text;
  who text;
  rec mlplat.idempotency_keys;
  res mlplat.accepted;
  first_used timestamptz;
BEGIN
  IF p_key IS NULL THEN
    RETURN NULL;
  END IF;
  IF pg_catalog.length(p_key) NOT BETWEEN 1 AND 128 THEN
    PERFORM mlplat._check_key(p_key);   -- raises (a PERFORM per call cost a statement)
  END IF;
  h := pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(p_request::text, 'UTF8')), 'hex');
  who := coalesce(p_who, mlplat._actor());
  INSERT INTO mlplat.idempotency_keys (principal, action, key, request_hash)
  VALUES (who, p_action, p_key, h) ON CONFLICT DO NOTHING;
  IF FOUND THEN
    -- new here, unless retention purged it: then this retries a request that may have run
    SELECT t.key_created_at INTO first_used FROM mlplat.idempotency_tombstones t
     WHERE t.fingerprint = mlplat._idem_fingerprint(who, p_action, p_key);
    IF FOUND THEN
      RAISE EXCEPTION USING ERRCODE = '22023',
        MESSAGE = pg_catalog.format('idempotency key expired: first used for %s on %s, it is past mlplat.idempotency_retention',
                                    p_action, pg_catalog.to_char(first_used, 'YYYY-MM-DD')),
        DETAIL = 'The request made with this key may have run; doing it again could do it twice.',
        HINT = 'If this retries that request, look up its outcome (mlplat.audit_log); otherwise use a new idempotency key.';
    END IF;
    RETURN NULL;
  END IF;
  SELECT * INTO rec FROM mlplat.idempotency_keys k
  WHERE k.principal = who AND k.action = p_action AND k.key = p_key;
  IF rec.request_hash <> h THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = pg_catalog.format('idempotency key already used for a different %s request', p_action),
      DETAIL = 'The same key was used before with different arguments.',
      HINT = 'Use a new idempotency key for a new request.';
  END IF;
  res := rec.result;
  res.replayed := true;
  RETURN res;
END $$;

CREATE OR REPLACE FUNCTION mlplat._refuse_change() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, mlplat, pg_temp AS $$
BEGIN
  IF TG_OP = 'DELETE' AND mlplat._purgeable(TG_TABLE_NAME, pg_catalog.to_jsonb(OLD)) THEN
    RETURN OLD;
  END IF;
  RAISE EXCEPTION USING ERRCODE = '55000',
    MESSAGE = pg_catalog.format('%s on %s is not allowed: rows are immutable', TG_OP, TG_TABLE_NAME),
    DETAIL = pg_catalog.format('%s is append-only.', TG_TABLE_NAME),
    HINT = 'Record a new row instead of changing history.';
END $$;

-- 80_retention: what the retention job purges, and who runs it.
--
-- Every table that grows with time is bounded by a setting (docs/configuration.md):
--   reconcile_ledger          rows older than mlplat.ledger_retention days
--   idempotency_keys          keys older than mlplat.idempotency_retention days; each leaves a
--                             fingerprint (idempotency_tombstones) so a late retry is refused
--   idempotency_tombstones    older than mlplat.idempotency_tombstone_retention days
--   spans                     older than mlplat.span_retention days, exported or not
--   leader_history            older than mlplat.leader_history_retention days (never the
--                             current epoch's row)
--   route_generations         superseded generations older than
--                             mlplat.route_generation_retention days (never a project's latest),
--   route_entries             and the route entries only they showed
--   rollouts + transitions    rollouts finished more than mlplat.history_retention days ago
--   deployment_revisions      of deployments deleted more than mlplat.history_retention days
--                             ago, and revisions older than that which nothing refers to
--                             (desired, previous, latest, applied or serving revision, a rollout)
--   runs + steps + nodes      runs finished more than mlplat.history_retention days ago
--   audit_events,             of projects deleted more than mlplat.history_retention days ago
--   model_alias_history
--
-- The append-only tables keep their guarantee: _refuse_change lets a DELETE through only for a
-- row _purgeable() says is past retention, so not even their owner can remove the history of an
-- entity that lives.  Projects, members, models, model versions, aliases and deployment rows
-- stay: they are what people created, not a record of time passing.
--
-- Who runs it: pg_cron's job mlplat-retention (hourly) when pg_cron was there at CREATE
-- EXTENSION; and in any case the projects leader (_retention_tick, every
-- mlplat.retention_interval) when no such job is active, or when the job missed two runs.

CREATE TABLE mlplat.retention_state (
  singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  last_run_at timestamptz,
  last_run_by text,             -- 'pg_cron', 'leader <kind>' or the role that called run_retention()
  last_result jsonb             -- rows deleted per table
);
INSERT INTO mlplat.retention_state DEFAULT VALUES;
REVOKE ALL ON mlplat.retention_state FROM PUBLIC;
COMMENT ON TABLE mlplat.retention_state IS
  'When the retention job last ran, who ran it and what it deleted (one row).';

-- now() minus the days of a retention setting (the default when the library is not loaded).
CREATE FUNCTION mlplat._retention_cutoff(p_setting text, p_default_days int) RETURNS timestamptz
LANGUAGE sql STABLE
AS $$
  SELECT pg_catalog.now() - pg_catalog.make_interval(
           days => coalesce(NULLIF(pg_catalog.current_setting(p_setting, true), '')::int, p_default_days))
$$;

-- The cutoff of mlplat.history_retention, which every ended entity's history is judged by
-- (the days and their default named here once).  Plain SQL without SET clauses, every name
-- qualified, so the planner inlines it where it is called (as the rules of 05_rules.sql).
CREATE FUNCTION mlplat._history_cutoff() RETURNS timestamptz
LANGUAGE sql STABLE
AS $$ SELECT mlplat._retention_cutoff('mlplat.history_retention', 365) $$;

-- May this revision go?  Its deployment was deleted more than mlplat.history_retention days
-- ago, or the revision is that old and no live state refers to it; and no rollout names it.
CREATE FUNCTION mlplat._revision_expired(p_deployment_id bigint, p_revision int, p_created_at timestamptz)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
  SELECT EXISTS (
    SELECT 1 FROM mlplat.deployments d
     WHERE d.id = p_deployment_id
       AND ((d.status = 'DELETED' AND d.updated_at < mlplat._history_cutoff())
            OR (p_created_at < mlplat._history_cutoff()
                AND p_revision IS DISTINCT FROM d.desired_revision
                AND p_revision IS DISTINCT FROM d.previous_revision
                AND p_revision IS DISTINCT FROM d.latest_revision
                AND p_revision IS DISTINCT FROM d.observed_revision
                AND p_revision IS DISTINCT FROM d.ready_revision))
       AND NOT EXISTS (SELECT 1 FROM mlplat.rollouts r
                        WHERE r.deployment_id = d.id
                          AND p_revision IN (r.baseline_revision, r.target_revision)))
$$;

-- Is this row of an append-only table past retention (see the header)?  The row as jsonb, so
-- one function serves every table _refuse_change guards.
CREATE FUNCTION mlplat._purgeable(p_table text, p_row jsonb) RETURNS boolean
LANGUAGE plpgsql STABLE
AS $$
BEGIN
  IF p_table IN ('audit_events', 'model_alias_history') THEN
    RETURN EXISTS (SELECT 1 FROM mlplat.projects p
                    WHERE p.id = (p_row->>'project_id')::bigint AND p.status = 'DELETED'
                      AND p.updated_at < mlplat._history_cutoff());
  ELSIF p_table = 'rollout_transitions' THEN
    RETURN EXISTS (SELECT 1 FROM mlplat.rollouts r
                    WHERE r.id = (p_row->>'rollout_id')::bigint
                      AND NOT mlplat.rollout_is_active(r.status)
                      AND r.updated_at < mlplat._history_cutoff());
  ELSIF p_table = 'deployment_revisions' THEN
    RETURN mlplat._revision_expired((p_row->>'deployment_id')::bigint, (p_row->>'revision')::int,
                                    (p_row->>'created_at')::timestamptz);
  ELSIF p_table = 'route_generations' THEN
    RETURN (p_row->>'created_at')::timestamptz < mlplat._retention_cutoff('mlplat.route_generation_retention', 7)
       AND EXISTS (SELECT 1 FROM mlplat.route_generations n
                    WHERE n.project_id = (p_row->>'project_id')::bigint
                      AND n.generation > (p_row->>'generation')::bigint);
  ELSIF p_table = 'route_entries' THEN
    -- closed, and no generation kept shows it any more
    RETURN (p_row->>'to_gen') IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM mlplat.route_generations g
                        WHERE g.project_id = (p_row->>'project_id')::bigint
                          AND g.generation >= (p_row->>'from_gen')::bigint AND g.generation < (p_row->>'to_gen')::bigint);
  ELSIF p_table = 'campaigns' THEN
    RETURN mlplat._campaign_expired((p_row->>'id')::bigint);
  ELSIF p_table IN ('campaign_approvals', 'campaign_candidates', 'optimized_artifacts') THEN
    RETURN mlplat._campaign_expired((p_row->>'campaign_id')::bigint);
  ELSIF p_table IN ('candidate_transitions', 'candidate_predictions', 'candidate_measurements',
                    'artifact_qualifications') THEN
    RETURN mlplat._campaign_expired((SELECT k.campaign_id FROM mlplat.campaign_candidates k
                                      WHERE k.id = (p_row->>'candidate_id')::bigint));
  ELSIF p_table = 'lab_run_transitions' THEN
    RETURN mlplat._lab_run_expired((p_row->>'lab_run_id')::bigint);
  END IF;
  RETURN false;
END $$;

-- The purge itself; p_by says who ran it (retention_state.last_run_by).
CREATE FUNCTION mlplat._run_retention(p_by text)
RETURNS TABLE (what text, deleted bigint)
LANGUAGE plpgsql
AS $$
DECLARE
  n bigint;
  hcut timestamptz := mlplat._history_cutoff();
  done jsonb := '{}';
  ids bigint[];
BEGIN
  -- one run at a time: a second caller waits here, then finds little left to do
  PERFORM 1 FROM mlplat.retention_state FOR UPDATE;

  DELETE FROM mlplat.reconcile_ledger WHERE at < mlplat._retention_cutoff('mlplat.ledger_retention', 30);
  GET DIAGNOSTICS n = ROW_COUNT;
  what := 'reconcile_ledger'; deleted := n; done := done || pg_catalog.jsonb_build_object(what, n); RETURN NEXT;

  -- a purged key leaves its fingerprint: a retry that arrives later is refused, not run again
  WITH gone AS (
    DELETE FROM mlplat.idempotency_keys k
     WHERE k.created_at < mlplat._retention_cutoff('mlplat.idempotency_retention', 7)
    RETURNING mlplat._idem_fingerprint(k.principal, k.action, k.key) AS fp, k.created_at)
  INSERT INTO mlplat.idempotency_tombstones AS t (fingerprint, key_created_at)
  SELECT g.fp, g.created_at FROM gone g
  ON CONFLICT (fingerprint) DO UPDATE SET key_created_at = EXCLUDED.key_created_at, purged_at = pg_catalog.now();
  GET DIAGNOSTICS n = ROW_COUNT;
  what := 'idempotency_keys'; deleted := n; done := done || pg_catalog.jsonb_build_object(what, n); RETURN NEXT;

  DELETE FROM mlplat.idempotency_tombstones
   WHERE purged_at < mlplat._retention_cutoff('mlplat.idempotency_tombstone_retention', 365);
  GET DIAGNOSTICS n = ROW_COUNT;
  what := 'idempotency_tombstones'; deleted := n; done := done || pg_catalog.jsonb_build_object(what, n); RETURN NEXT;

  -- exported or not: an exporter down for that long must not grow the table without bound
  DELETE FROM mlplat.spans WHERE end_time < mlplat._retention_cutoff('mlplat.span_retention', 7);
  GET DIAGNOSTICS n = ROW_COUNT;
  what := 'spans'; deleted := n; done := done || pg_catalog.jsonb_build_object(what, n); RETURN NEXT;

  DELETE FROM mlplat.leader_history h
   WHERE h.acquired_at < mlplat._retention_cutoff('mlplat.leader_history_retention', 30)
     AND NOT EXISTS (SELECT 1 FROM mlplat.leader_epochs e WHERE e.kind = h.kind AND e.epoch = h.epoch);
  GET DIAGNOSTICS n = ROW_COUNT;
  what := 'leader_history'; deleted := n; done := done || pg_catalog.jsonb_build_object(what, n); RETURN NEXT;

  DELETE FROM mlplat.route_generations g
   WHERE g.created_at < mlplat._retention_cutoff('mlplat.route_generation_retention', 7)
     AND EXISTS (SELECT 1 FROM mlplat.route_generations n2
                  WHERE n2.project_id = g.project_id AND n2.generation > g.generation);
  GET DIAGNOSTICS n = ROW_COUNT;
  what := 'route_generations'; deleted := n; done := done || pg_catalog.jsonb_build_object(what, n); RETURN NEXT;

  -- the route entries that only the generations just deleted showed
  DELETE FROM mlplat.route_entries e
   WHERE e.to_gen IS NOT NULL
     AND NOT EXISTS (SELECT 1 FROM mlplat.route_generations g
                      WHERE g.project_id = e.project_id AND g.generation >= e.from_gen AND g.generation < e.to_gen);
  GET DIAGNOSTICS n = ROW_COUNT;
  what := 'route_entries'; deleted := n; done := done || pg_catalog.jsonb_build_object(what, n); RETURN NEXT;

  DELETE FROM mlplat.rollout_transitions t USING mlplat.rollouts r
   WHERE r.id = t.rollout_id AND NOT mlplat.rollout_is_active(r.status) AND r.updated_at < hcut;
  GET DIAGNOSTICS n = ROW_COUNT;
  what := 'rollout_transitions'; deleted := n; done := done || pg_catalog.jsonb_build_object(what, n); RETURN NEXT;
  DELETE FROM mlplat.rollouts r
   WHERE NOT mlplat.rollout_is_active(r.status) AND r.updated_at < hcut;
  GET DIAGNOSTICS n = ROW_COUNT;
  what := 'rollouts'; deleted := n; done := done || pg_catalog.jsonb_build_object(what, n); RETURN NEXT;

  DELETE FROM mlplat.deployment_revisions dr USING mlplat.deployments d
   WHERE d.id = dr.deployment_id
     AND ((d.status = 'DELETED' AND d.updated_at < hcut) OR dr.created_at < hcut)
     AND mlplat._revision_expired(dr.deployment_id, dr.revision, dr.created_at);
  GET DIAGNOSTICS n = ROW_COUNT;
  what := 'deployment_revisions'; deleted := n; done := done || pg_catalog.jsonb_build_object(what, n); RETURN NEXT;

  DELETE FROM mlplat.run_nodes x USING mlplat.runs r
   WHERE r.id = x.run_id AND NOT mlplat.run_is_active(r.status) AND r.updated_at < hcut;
  DELETE FROM mlplat.run_steps x USING mlplat.runs r
   WHERE r.id = x.run_id AND NOT mlplat.run_is_active(r.status) AND r.updated_at < hcut;
  DELETE FROM mlplat.runs r WHERE NOT mlplat.run_is_active(r.status) AND r.updated_at < hcut;
  GET DIAGNOSTICS n = ROW_COUNT;
  what := 'runs'; deleted := n; done := done || pg_catalog.jsonb_build_object(what, n); RETURN NEXT;

  -- campaigns that ended past retention, with everything that is theirs (_campaign_expired)
  SELECT coalesce(pg_catalog.array_agg(c.id), '{}') INTO ids
    FROM mlplat.campaigns c WHERE c.created_at < hcut AND mlplat._campaign_expired(c.id);
  DELETE FROM mlplat.artifact_qualifications q USING mlplat.optimized_artifacts o
   WHERE o.id = q.artifact_id AND o.campaign_id = ANY (ids);
  DELETE FROM mlplat.optimized_artifacts o WHERE o.campaign_id = ANY (ids);
  DELETE FROM mlplat.candidate_measurements x USING mlplat.campaign_candidates k
   WHERE k.id = x.candidate_id AND k.campaign_id = ANY (ids);
  DELETE FROM mlplat.candidate_predictions x USING mlplat.campaign_candidates k
   WHERE k.id = x.candidate_id AND k.campaign_id = ANY (ids);
  DELETE FROM mlplat.candidate_transitions x USING mlplat.campaign_candidates k
   WHERE k.id = x.candidate_id AND k.campaign_id = ANY (ids);
  GET DIAGNOSTICS n = ROW_COUNT;
  what := 'candidate_transitions'; deleted := n; done := done || pg_catalog.jsonb_build_object(what, n); RETURN NEXT;
  DELETE FROM mlplat.campaign_candidates k WHERE k.campaign_id = ANY (ids);
  DELETE FROM mlplat.campaign_approvals a WHERE a.campaign_id = ANY (ids);
  DELETE FROM mlplat.campaigns c WHERE c.id = ANY (ids);
  GET DIAGNOSTICS n = ROW_COUNT;
  what := 'campaigns'; deleted := n; done := done || pg_catalog.jsonb_build_object(what, n); RETURN NEXT;

  -- probes that are no longer evidence, then the lab runs that ended past retention
  DELETE FROM mlplat.lab_probes pb WHERE pb.completed_at < hcut AND mlplat._lab_probe_expired(pb.id);
  GET DIAGNOSTICS n = ROW_COUNT;
  what := 'lab_probes'; deleted := n; done := done || pg_catalog.jsonb_build_object(what, n); RETURN NEXT;
  SELECT coalesce(pg_catalog.array_agg(r.id), '{}') INTO ids
    FROM mlplat.lab_runs r
   WHERE NOT mlplat.lab_run_is_active(r.status) AND r.updated_at < hcut AND mlplat._lab_run_expired(r.id);
  DELETE FROM mlplat.lab_run_transitions t WHERE t.lab_run_id = ANY (ids);
  GET DIAGNOSTICS n = ROW_COUNT;
  what := 'lab_run_transitions'; deleted := n; done := done || pg_catalog.jsonb_build_object(what, n); RETURN NEXT;
  DELETE FROM mlplat.lab_run_payloads pl WHERE pl.lab_run_id = ANY (ids);
  DELETE FROM mlplat.lab_runs r WHERE r.id = ANY (ids);
  GET DIAGNOSTICS n = ROW_COUNT;
  what := 'lab_runs'; deleted := n; done := done || pg_catalog.jsonb_build_object(what, n); RETURN NEXT;

  DELETE FROM mlplat.model_alias_history h USING mlplat.projects p
   WHERE p.id = h.project_id AND p.status = 'DELETED' AND p.updated_at < hcut;
  GET DIAGNOSTICS n = ROW_COUNT;
  what := 'model_alias_history'; deleted := n; done := done || pg_catalog.jsonb_build_object(what, n); RETURN NEXT;
  DELETE FROM mlplat.audit_events a USING mlplat.projects p
   WHERE p.id = a.project_id AND p.status = 'DELETED' AND p.updated_at < hcut;
  GET DIAGNOSTICS n = ROW_COUNT;
  what := 'audit_events'; deleted := n; done := done || pg_catalog.jsonb_build_object(what, n); RETURN NEXT;

  UPDATE mlplat.retention_state
     SET last_run_at = pg_catalog.clock_timestamp(), last_run_by = p_by, last_result = done;
END;
$$;

-- Purges what is past retention (see the header of this part); one row per table.
CREATE OR REPLACE FUNCTION mlplat.run_retention()
RETURNS TABLE (what text, deleted bigint)
LANGUAGE sql
SET search_path = pg_catalog, mlplat, pg_temp
AS $$
  SELECT r.what, r.deleted
    FROM mlplat._run_retention(CASE WHEN pg_catalog.current_setting('application_name') = 'pg_cron' THEN 'pg_cron'
                                    ELSE SESSION_USER::text END) r
$$;
REVOKE ALL ON FUNCTION mlplat.run_retention() FROM PUBLIC;
COMMENT ON FUNCTION mlplat.run_retention() IS
  'Purges what is past retention: ledger rows, idempotency keys (leaving a fingerprint), spans, leader history, superseded route generations, and the histories of ended entities (mlplat.*_retention settings).';

-- Called by the projects leader (src/worker/retention.c): run the purge when it is due and
-- pg_cron does not run it.  With pg_cron's job active the leader steps in only after two
-- missed runs (every hour, or mlplat.retention_interval if longer), so the purge does not
-- run twice.  Returns what it did: ran, not due, not leader, busy.
CREATE FUNCTION mlplat._retention_tick(p_kind text, p_epoch bigint, p_interval_ms bigint)
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
  last timestamptz;
  every interval := pg_catalog.make_interval(secs => p_interval_ms / 1000.0);
  cron boolean := false;
BEGIN
  -- a deposed leader would make it run twice
  IF NOT mlplat._epoch_current(p_kind, p_epoch) THEN
    RETURN 'not leader';
  END IF;
  SELECT s.last_run_at INTO last FROM mlplat.retention_state s FOR UPDATE SKIP LOCKED;
  IF NOT FOUND THEN
    RETURN 'busy';
  END IF;
  IF pg_catalog.to_regclass('cron.job') IS NOT NULL THEN
    EXECUTE 'SELECT EXISTS (SELECT 1 FROM cron.job j WHERE j.jobname = $1 AND j.active
                                 AND j.database = pg_catalog.current_database())'
       INTO cron USING 'mlplat-retention';
  END IF;
  IF cron THEN
    every := GREATEST(every, interval '1 hour') * 2;
  END IF;
  IF last IS NOT NULL AND last > pg_catalog.now() - every THEN
    RETURN 'not due';
  END IF;
  PERFORM mlplat._run_retention('leader ' || p_kind);
  RETURN 'ran';
END $$;

REVOKE ALL ON FUNCTION mlplat._retention_cutoff(text, int) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._history_cutoff() FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._revision_expired(bigint, int, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._purgeable(text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._run_retention(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION mlplat._retention_tick(text, bigint, bigint) FROM PUBLIC;

-- pg_dump keeps the fingerprints with the keys (45_api_views marks idempotency_keys).
SELECT pg_catalog.pg_extension_config_dump('mlplat.idempotency_tombstones', '');
