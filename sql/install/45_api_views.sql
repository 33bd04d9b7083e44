-- 45_api_views: what people look at, row-level security, privileges.
--
-- Callers read tables and views; only the SECURITY DEFINER API functions write.  Row-level
-- security shows a member only their projects' rows; the views are security_invoker, so
-- the same policies apply through them.

CREATE VIEW mlplat.project_status WITH (security_invoker = true) AS
SELECT p.name AS project, p.status, p.status_reason,
       (p.status IN ('PROVISIONING', 'DELETING') OR p.observed_generation < p.generation) AS in_flight,
       p.gpu_quota,
       coalesce((SELECT pg_catalog.sum(d.desired_gpus) FROM mlplat.deployments d
                 WHERE d.project_id = p.id AND d.status <> 'DELETED'), 0)
       + coalesce((SELECT pg_catalog.sum(ro.surge_gpus) FROM mlplat.rollouts ro WHERE ro.project_id = p.id
                   AND mlplat.rollout_is_active(ro.status)), 0)
       + coalesce((SELECT pg_catalog.sum(u.gpus) FROM mlplat.runs u WHERE u.project_id = p.id
                   AND mlplat.run_is_active(u.status)), 0)
       + coalesce((SELECT pg_catalog.sum(k.gpus) FROM mlplat.campaign_candidates k WHERE k.project_id = p.id
                   AND mlplat.candidate_is_building(k.status)), 0)
       + coalesce((SELECT pg_catalog.sum(l.gpus) FROM mlplat.lab_runs l WHERE l.project_id = p.id
                   AND mlplat.lab_run_is_active(l.status)), 0)
       + coalesce((SELECT pg_catalog.sum(l.gpus) FROM mlplat.lab_leases ls JOIN mlplat.lab_runs l ON l.id = ls.lab_run_id
                   WHERE l.project_id = p.id AND NOT mlplat.lab_run_is_active(l.status)), 0) AS gpus_in_use,
       p.cpu_quota, p.memory_quota, p.generation, p.observed_generation,
       p.attempts, p.last_error, p.next_attempt_at, p.traceparent, p.created_at, p.updated_at
FROM mlplat.projects p;

CREATE VIEW mlplat.deployment_status WITH (security_invoker = true) AS
SELECT p.name AS project, d.name AS deployment, d.status, d.status_reason,
       (d.status IN ('PENDING', 'DEPLOYING', 'DELETING') OR (d.status = 'DRIFTED' AND d.drift_policy = 'repair')
        OR d.observed_generation < d.generation) AS in_flight,
       d.desired_revision, d.observed_revision, dr.intent->>'model' AS model, dr.intent->>'version' AS version,
       (dr.intent->>'gpus')::int AS gpus, (dr.intent->>'min_replicas')::int AS min_replicas,
       (dr.intent->>'max_replicas')::int AS max_replicas, d.endpoint,
       d.drift_policy, CASE WHEN d.status = 'DRIFTED' THEN d.observed->'drift_paths' END AS drift_paths,
       d.ready_wait_since, d.deploy_deadline,
       d.generation, d.observed_generation, d.attempts, d.last_error, d.next_attempt_at,
       CASE WHEN d.observed_generation < d.generation THEN pg_catalog.now() - d.updated_at END AS pending_for,
       d.traceparent, d.created_at, d.updated_at
FROM mlplat.deployments d
JOIN mlplat.projects p ON p.id = d.project_id
LEFT JOIN mlplat.deployment_revisions dr ON dr.deployment_id = d.id AND dr.revision = d.desired_revision;

CREATE VIEW mlplat.run_status WITH (security_invoker = true) AS
SELECT p.name AS project, u.name AS run, u.kind, u.status, u.status_reason,
       (mlplat.run_is_active(u.status)) AS in_flight,
       u.gpus, (SELECT pg_catalog.count(*) FROM mlplat.run_steps s WHERE s.run_id = u.id) AS steps,
       u.created_by, u.generation, u.observed_generation, u.attempts, u.last_error, u.next_attempt_at,
       u.traceparent, u.created_at, u.updated_at
FROM mlplat.runs u
JOIN mlplat.projects p ON p.id = u.project_id;

CREATE VIEW mlplat.rollout_status WITH (security_invoker = true) AS
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

CREATE VIEW mlplat.audit_log WITH (security_invoker = true) AS
SELECT a.id, a.at, a.actor, a.db_role, a.action, a.project, a.entity, a.entity_id, a.request_id,
       a.trace_id, a.detail, a.epoch, a.controller
FROM mlplat.audit_events a;

-- Row-level security: one policy per table, all through mlplat._can_view().
SELECT mlplat._member_reads('members', 'models', 'model_versions', 'model_aliases', 'deployments',
                            'deployment_revisions', 'runs', 'run_steps', 'rollouts', 'audit_events');
ALTER TABLE mlplat.projects ENABLE ROW LEVEL SECURITY;
CREATE POLICY member_reads ON mlplat.projects FOR SELECT USING (mlplat._can_view(id));

-- Privileges: read-only for everyone (RLS filters); nothing writable; internals not callable.
GRANT SELECT ON mlplat.projects, mlplat.members, mlplat.models, mlplat.model_versions, mlplat.model_aliases,
                mlplat.deployments, mlplat.deployment_revisions, mlplat.runs, mlplat.run_steps, mlplat.rollouts,
                mlplat.audit_events, mlplat.policies, mlplat.installation,
                mlplat.project_status, mlplat.deployment_status, mlplat.run_status, mlplat.rollout_status,
                mlplat.audit_log
  TO PUBLIC;
DO $$
DECLARE
  f regprocedure;
BEGIN
  FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
           WHERE p.pronamespace = 'mlplat'::regnamespace AND p.proname LIKE '\_%' AND p.proname NOT IN ('_can_view', '_campaign_state', '_campaign_state_of') LOOP
    EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
  END LOOP;
END $$;

-- pg_dump keeps the data of extension tables marked as configuration.
SELECT mlplat._config_dump('admins', 'impersonators', 'idempotency_keys', 'projects', 'members', 'models',
                           'model_versions', 'model_aliases', 'deployments', 'deployment_revisions', 'runs',
                           'run_steps', 'rollouts', 'audit_events');
