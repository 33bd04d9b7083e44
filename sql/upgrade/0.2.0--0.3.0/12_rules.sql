-- 0.3.0: each input rule defined once (issue 19 item 5).  The env rule and the DNS label
-- rules live in C (src/validate/env.c, names.c); _check_env and _check_label call them
-- instead of repeating them as regular expressions.
CREATE FUNCTION mlplat._env_problem(env jsonb) RETURNS text[]
LANGUAGE C STRICT IMMUTABLE AS 'MODULE_PATHNAME', 'mlplat_env_problem';
REVOKE ALL ON FUNCTION mlplat._env_problem(jsonb) FROM PUBLIC;

CREATE FUNCTION mlplat._is_dns1035_label(name text, max_len integer) RETURNS boolean
LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'mlplat_is_dns1035_label';
REVOKE ALL ON FUNCTION mlplat._is_dns1035_label(text, integer) FROM PUBLIC;

CREATE OR REPLACE FUNCTION mlplat._check_label(field text, v text, max_len int) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF v IS NULL THEN
    PERFORM mlplat._bad_input(field, 'must not be null', 'Pass a name.');
  ELSIF NOT mlplat.is_dns_label(v, max_len) THEN   -- the rule: src/validate/names.c
    PERFORM mlplat._bad_input(field,
      pg_catalog.format('must be a DNS-1123 label of 1 to %s characters', max_len),
      'Use lower-case letters, digits and ''-'', starting and ending with a letter or digit.');
  END IF;
END $$;

CREATE OR REPLACE FUNCTION mlplat._check_env(field text, env jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  p text[] := mlplat._env_problem(env);
BEGIN
  IF p IS NOT NULL THEN
    PERFORM mlplat._bad_input(field, p[1], p[2]);
  END IF;
END $$;

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

-- A project's namespace and mlplat's ownership label, one definition for C and SQL.
CREATE FUNCTION mlplat._project_namespace(project text) RETURNS text
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'mlplat_sql_project_namespace';
CREATE FUNCTION mlplat._managed_by_label() RETURNS jsonb
LANGUAGE C IMMUTABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'mlplat_sql_managed_by_label';
REVOKE ALL ON FUNCTION mlplat._project_namespace(text), mlplat._managed_by_label() FROM PUBLIC;

-- The partial indexes say "active" through the same rules (the planner inlines them on both
-- sides, so the queries that used them still do).
DROP INDEX mlplat.runs_active;
CREATE INDEX runs_active ON mlplat.runs (project_id)
  WHERE mlplat.run_is_active(status);
DROP INDEX mlplat.rollouts_one_active;
CREATE UNIQUE INDEX rollouts_one_active ON mlplat.rollouts (deployment_id)
  WHERE mlplat.rollout_is_active(status);

-- Functions and views that asked for the active statuses with their own lists (none of
-- them is redefined by another part of this upgrade).

CREATE OR REPLACE FUNCTION mlplat._gpus_in_use(p_project_id bigint, p_except_deployment bigint DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql STABLE AS $$
BEGIN
  -- deployments: kept by trigger in mlplat.deployment_gpus (a few rows), less the one excepted
  RETURN (SELECT coalesce((SELECT pg_catalog.sum(c.gpus) FROM mlplat.deployment_gpus c
                     WHERE c.project_id = p_project_id), 0)
         - coalesce((SELECT d.desired_gpus FROM mlplat.deployments d
                     WHERE d.id = p_except_deployment AND d.project_id = p_project_id
                       AND d.status <> 'DELETED'), 0)
         + coalesce((SELECT pg_catalog.sum(ro.surge_gpus) FROM mlplat.rollouts ro
                     WHERE ro.project_id = p_project_id
                       AND mlplat.rollout_is_active(ro.status)
                       AND ro.deployment_id IS DISTINCT FROM p_except_deployment), 0)
         + coalesce((SELECT pg_catalog.sum(r.gpus) FROM mlplat.runs r
                     WHERE r.project_id = p_project_id
                       AND mlplat.run_is_active(r.status)), 0)
         -- builders of optimization campaigns, from their admission until their Job is gone
         + coalesce((SELECT pg_catalog.sum(k.gpus) FROM mlplat.campaign_candidates k
                     WHERE k.project_id = p_project_id
                       AND mlplat.candidate_is_building(k.status)), 0)
         -- lab runs and probes (39_api_lab): from QUEUED until they end (kept by trigger in
         -- mlplat.lab_gpus, at most nine rows), and while they hold a node lease (released only
         -- once the Job is seen reclaimed)
         + coalesce((SELECT pg_catalog.sum(c.gpus) FROM mlplat.lab_gpus c
                     WHERE c.project_id = p_project_id), 0)
         -- (from the leases, one per node at most, each run by its key: never a scan of the
         -- project's ended runs, which only grow)
         + coalesce((SELECT pg_catalog.sum((SELECT l.gpus FROM mlplat.lab_runs l
                                            WHERE l.id = ls.lab_run_id AND l.project_id = p_project_id
                                              AND NOT mlplat.lab_run_is_active(l.status)))
                     FROM mlplat.lab_leases ls), 0));
END $$;


CREATE OR REPLACE FUNCTION mlplat._no_active_rollout(d mlplat.deployments, p_action text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM mlplat.rollouts ro WHERE ro.deployment_id = d.id
             AND mlplat.rollout_is_active(ro.status)) THEN
    RAISE EXCEPTION USING ERRCODE = '55000',
      MESSAGE = pg_catalog.format('deployment "%s" has an active rollout: %s is not possible', d.name, p_action),
      DETAIL = 'While a rollout runs, the rollout controller owns the deployment''s traffic.',
      HINT = 'Promote or abort the rollout first.';
  END IF;
END $$;


-- its rows are a seam type now (read by name, seam.h): a new return type, so drop and create
DROP FUNCTION mlplat._rollout_artifacts_pending(bigint[]);
CREATE TYPE mlplat.rollout_artifact_claim AS (id bigint, deployment_id bigint, target_revision int);
CREATE FUNCTION mlplat._rollout_artifacts_pending(p_ids bigint[])
RETURNS SETOF mlplat.rollout_artifact_claim
LANGUAGE sql STABLE
AS $$
  SELECT ro.id, ro.deployment_id, ro.target_revision
    FROM mlplat.rollouts ro
   WHERE ro.id = ANY (p_ids) AND ro.artifact_verified_at IS NULL
     AND mlplat.rollout_is_active(ro.status)
   ORDER BY ro.id
$$;
REVOKE ALL ON FUNCTION mlplat._rollout_artifacts_pending(bigint[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION mlplat._rollout_artifact_verdict(p_id bigint, p_row_version bigint, p_epoch bigint,
                                                 p_verdict text, p_reason text, p_retry_ms int)
RETURNS text
LANGUAGE plpgsql
AS $$
BEGIN
  IF p_verdict NOT IN ('OK', 'FAILED', 'RETRY', 'WAIT') THEN
    RAISE EXCEPTION 'mlplat: unknown artifact verdict %', p_verdict USING ERRCODE = '22023';
  END IF;
  IF p_verdict = 'OK' THEN
    UPDATE mlplat.rollouts x SET artifact_verified_at = pg_catalog.now()
     WHERE x.id = p_id AND x.artifact_verified_at IS NULL
       AND mlplat._epoch_current('rollouts', p_epoch);
    RETURN CASE WHEN FOUND THEN 'OK' ELSE 'LOST' END;
  END IF;
  UPDATE mlplat.rollouts x
     SET epoch = p_epoch, row_version = x.row_version + 1, updated_at = pg_catalog.now(),
         status_reason = p_reason, last_error = p_reason,
         status = CASE WHEN p_verdict = 'FAILED' THEN 'FAILED' ELSE x.status END,
         observed_generation = CASE WHEN p_verdict = 'FAILED' THEN x.generation ELSE x.observed_generation END,
         attempts = CASE WHEN p_verdict = 'FAILED' THEN x.attempts ELSE x.attempts + 1 END,
         next_attempt_at = pg_catalog.now() + pg_catalog.make_interval(secs => coalesce(p_retry_ms, 1000) / 1000.0)
   WHERE x.id = p_id AND mlplat._writeback_holds(x.row_version, p_row_version, 'rollouts', p_epoch)
     AND mlplat.rollout_is_active(x.status);
  IF NOT FOUND THEN
    RETURN 'LOST';
  END IF;
  IF p_verdict = 'FAILED' THEN
    -- the deployment serves its own revision as before; let its reconciler look at once
    PERFORM mlplat._wake_on_commit('deployments');
  END IF;
  RETURN p_verdict;
END $$;

-- (mlplat.project_status is redefined in part 65_lab, after the campaign and lab tables it reads)

CREATE OR REPLACE VIEW mlplat._rollout_alerts AS
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

CREATE OR REPLACE VIEW mlplat.run_status WITH (security_invoker = true) AS
SELECT p.name AS project, u.name AS run, u.kind, u.status, u.status_reason,
       (mlplat.run_is_active(u.status)) AS in_flight,
       u.gpus, (SELECT pg_catalog.count(*) FROM mlplat.run_steps s WHERE s.run_id = u.id) AS steps,
       u.created_by, u.generation, u.observed_generation, u.attempts, u.last_error, u.next_attempt_at,
       u.traceparent, u.created_at, u.updated_at,
       u.attempt, u.name || '-' || u.attempt AS workflow, u.submitted_at
FROM mlplat.runs u
JOIN mlplat.projects p ON p.id = u.project_id;

CREATE OR REPLACE VIEW mlplat.rollout_status WITH (security_invoker = true) AS
SELECT p.name AS project, d.name AS deployment, ro.id AS rollout_id, ro.status, ro.status_reason,
       ro.requested_action,
       (mlplat.rollout_is_active(ro.status)) AS in_flight,
       ro.baseline_revision, ro.target_revision, ro.current_fraction, ro.policy, ro.created_by,
       ro.generation, ro.observed_generation, ro.attempts, ro.last_error, ro.traceparent,
       ro.created_at, ro.updated_at,
       -- what the controller last saw, not what it asked for: the split KServe reports
       (ro.observed->>'target_percent')::int AS observed_target_percent,
       ro.observed->'traffic' AS observed_traffic, ro.observed_at,
       ro.window_start,
       lt.decision AS last_decision, lt.reasons AS last_reasons, lt.at AS last_decision_at,
       (SELECT pg_catalog.count(*) FROM mlplat.rollout_transitions t WHERE t.rollout_id = ro.id) AS transitions
FROM mlplat.rollouts ro
LEFT JOIN LATERAL (SELECT t.decision, t.reasons, t.at FROM mlplat.rollout_transitions t
                    WHERE t.rollout_id = ro.id ORDER BY t.seq DESC LIMIT 1) lt ON true
JOIN mlplat.deployments d ON d.id = ro.deployment_id
JOIN mlplat.projects p ON p.id = ro.project_id;
