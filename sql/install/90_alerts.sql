-- 90_alerts: the one view an operator watches.  Last, because it reads every part
-- before it (the reconcilers' entities, the rollouts' alerts, the span exporter).

-- What an operator should look at now.  One row per condition:
--   reconcile_age      intent not yet observed after 5 minutes
--   repeated_failures  5 or more failed attempts in a row
--   no_leader          a kind with no leading replica (workers not running?)
--   stale_leader       a leader whose last pass ended over 3 resync intervals ago
--   write_conflicts    ledger CONFLICT outcomes in the last hour
--   repeated_holds, stale_health, rollback_route_loss, surge_exhaustion,
--   request_regression: canary rollouts (see _rollout_alerts)
--   span_export_stalled  mlplat.otlp_endpoint is set but a span has waited for export
--                        longer than max(1 minute, 10 export intervals)
--   finalizer_stuck      an InferenceService, or a project's namespace, deleted but held by
--                        finalizers longer than mlplat.finalizer_alert_after
--                        (observed.terminating of the deployment or the project); or a campaign's
--                        builder Job still there after its cancel (candidate CANCEL_REQUESTED;
--                        the detail says whether its DELETE was answered, and when)
--   lab_cancel_stuck     a lab run CANCEL_REQUESTED longer than mlplat.lab_cancel_alert_after
--   lab_lease_unreclaimed  a finished lab run still holding its node lease after 5 minutes
--   lab_node_unobserved  an enabled lab node never observed, or not for mlplat.lab_node_max_age
CREATE VIEW mlplat.alerts AS
SELECT 'reconcile_age' AS alert, 'warning' AS severity, e.kind, e.project, e.entity, e.entity_id,
       pg_catalog.format('intent generation %s not observed for %s', e.generation,
                         pg_catalog.date_trunc('second', pg_catalog.now() - e.updated_at)) AS detail,
       e.updated_at AS since
  FROM mlplat._entities e
 WHERE e.generation <> e.observed_generation AND e.updated_at < pg_catalog.now() - interval '5 minutes'
UNION ALL
SELECT 'repeated_failures', 'critical', e.kind, e.project, e.entity, e.entity_id,
       pg_catalog.format('%s failed attempts; last error: %s', e.attempts, coalesce(e.last_error, '-')),
       e.updated_at
  FROM mlplat._entities e WHERE e.attempts >= 5
UNION ALL
SELECT 'no_leader', 'critical', k.kind, NULL, NULL, NULL,
       'no replica of this kind leads (is mlplat in shared_preload_libraries, and mlplat.database this database?)', NULL
  FROM pg_catalog.unnest(ARRAY['projects', 'deployments', 'runs', 'rollouts', 'model_aliases', 'lab_runs', 'campaigns', 'span_export']) AS k(kind)
 WHERE NOT EXISTS (SELECT 1 FROM mlplat._replica_states() s WHERE s.kind = k.kind AND s.role IN ('leader', 'idle'))
UNION ALL
SELECT 'stale_leader', 'critical', s.kind, NULL, NULL, NULL,
       pg_catalog.format('leader pid %s last finished a pass at %s', s.pid, s.last_pass_end), s.last_pass_end
  FROM mlplat._replica_states() s
 WHERE s.role = 'leader' AND s.last_pass_end IS NOT NULL
   AND s.last_pass_end < pg_catalog.now() - 3 * pg_catalog.current_setting('mlplat.resync_interval')::interval
UNION ALL
SELECT 'write_conflicts', 'warning', l.kind, l.project, l.entity, l.entity_id,
       pg_catalog.format('%s CONFLICT outcomes in the last hour', pg_catalog.count(*)), pg_catalog.min(l.at)
  FROM mlplat.reconcile_ledger l
 WHERE l.outcome = 'CONFLICT' AND l.at > pg_catalog.now() - interval '1 hour'
 GROUP BY l.kind, l.project, l.entity, l.entity_id
UNION ALL
SELECT a.alert, a.severity, 'rollouts', a.project, a.deployment, a.rollout_id, a.detail, a.since
  FROM mlplat._rollout_alerts a
UNION ALL
SELECT 'span_export_stalled', 'warning', 'projects', NULL, 'span exporter', NULL,
       pg_catalog.format('%s spans wait for export, the oldest for %s; %s consecutive failed POSTs; last error: %s',
                         x.spans_waiting, pg_catalog.date_trunc('second', x.oldest_waiting_age),
                         coalesce(x.consecutive_failures, 0), coalesce(x.last_error, '-')),
       pg_catalog.now() - x.oldest_waiting_age
  FROM mlplat.span_export_status x
 WHERE x.enabled
   AND x.oldest_waiting_age > GREATEST(interval '1 minute',
                                       10 * pg_catalog.current_setting('mlplat.otlp_export_interval')::interval)
UNION ALL
SELECT 'finalizer_stuck', 'warning', 'deployments', p.name, 'deployment', d.id,
       pg_catalog.format('InferenceService %s/%s terminating for %s, held by finalizer(s) %s', mlplat._project_namespace(p.name), d.name,
                         pg_catalog.date_trunc('second', pg_catalog.now() - (d.observed->'terminating'->>'since')::timestamptz),
                         coalesce((SELECT pg_catalog.string_agg(f, ', ')
                                     FROM pg_catalog.jsonb_array_elements_text(d.observed->'terminating'->'finalizers') f), '-')),
       (d.observed->'terminating'->>'since')::timestamptz
  FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id
 WHERE d.status <> 'DELETED' AND pg_catalog.jsonb_typeof(d.observed->'terminating') = 'object'
   AND (d.observed->'terminating'->>'since')::timestamptz < pg_catalog.now()
       - coalesce(NULLIF(pg_catalog.current_setting('mlplat.finalizer_alert_after', true), ''), '10min')::interval
UNION ALL
SELECT 'finalizer_stuck', 'warning', 'projects', p.name, 'project', p.id,
       pg_catalog.format('Namespace %s terminating for %s, held by finalizer(s) %s', mlplat._project_namespace(p.name),
                         pg_catalog.date_trunc('second', pg_catalog.now() - (p.observed->'terminating'->>'since')::timestamptz),
                         coalesce((SELECT pg_catalog.string_agg(f, ', ')
                                     FROM pg_catalog.jsonb_array_elements_text(p.observed->'terminating'->'finalizers') f), '-')),
       (p.observed->'terminating'->>'since')::timestamptz
  FROM mlplat.projects p
 WHERE p.status = 'DELETING' AND pg_catalog.jsonb_typeof(p.observed->'terminating') = 'object'
   AND (p.observed->'terminating'->>'since')::timestamptz < pg_catalog.now()
       - coalesce(NULLIF(pg_catalog.current_setting('mlplat.finalizer_alert_after', true), ''), '10min')::interval
UNION ALL
SELECT 'finalizer_stuck', 'warning', 'campaigns', p.name, 'campaign_candidate', k.id,
       -- the age of the cancel is what the threshold measures; the age of the deletion is the
       -- first answered DELETE of the Job after it (the ledger), if the worker sent one yet
       CASE WHEN d.at IS NULL THEN
         pg_catalog.format('builder Job %s/%s not yet deleted; cancel requested %s ago (candidate %s CANCEL_REQUESTED: its GPU reservation is held)',
                           mlplat._project_namespace(p.name), coalesce(k.job_name, '-'), pg_catalog.date_trunc('second', pg_catalog.now() - t.at), k.name)
       ELSE
         pg_catalog.format('builder Job %s/%s deleted %s ago and not yet gone; cancel requested %s ago (candidate %s CANCEL_REQUESTED: its GPU reservation is held)',
                           mlplat._project_namespace(p.name), coalesce(k.job_name, '-'), pg_catalog.date_trunc('second', pg_catalog.now() - d.at),
                           pg_catalog.date_trunc('second', pg_catalog.now() - t.at), k.name)
       END,
       t.at
  FROM mlplat.campaign_candidates k JOIN mlplat.projects p ON p.id = k.project_id
  JOIN LATERAL (SELECT pg_catalog.max(x.at) AS at FROM mlplat.candidate_transitions x
                 WHERE x.candidate_id = k.id AND x.to_status = 'CANCEL_REQUESTED') t ON true
  LEFT JOIN LATERAL (SELECT pg_catalog.min(l.at) AS at FROM mlplat.reconcile_ledger l
                      WHERE l.kind = 'campaigns' AND l.entity_id = k.id AND l.action = 'DELETE' AND l.outcome = 'OK'
                        AND l.at >= t.at) d ON true
 WHERE k.status = 'CANCEL_REQUESTED'
   AND t.at < pg_catalog.now()
       - coalesce(NULLIF(pg_catalog.current_setting('mlplat.finalizer_alert_after', true), ''), '10min')::interval
UNION ALL
SELECT 'lab_cancel_stuck', 'warning', 'lab_runs', p.name, 'lab_run', r.id,
       pg_catalog.format('cancel requested %s ago and its Job not yet seen gone: node lease and %s GPUs held',
                         pg_catalog.date_trunc('second', pg_catalog.now() - r.cancel_requested_at), r.gpus),
       r.cancel_requested_at
  FROM mlplat.lab_runs r JOIN mlplat.projects p ON p.id = r.project_id
 WHERE r.status = 'CANCEL_REQUESTED'
   AND r.cancel_requested_at < pg_catalog.now()
       - coalesce(NULLIF(pg_catalog.current_setting('mlplat.lab_cancel_alert_after', true), ''), '5min')::interval
UNION ALL
SELECT 'lab_lease_unreclaimed', 'warning', 'lab_runs', p.name, 'lab_run', r.id,
       pg_catalog.format('%s run still holds the lease of node %s', r.status, r.node_name), r.finished_at
  FROM mlplat.lab_leases l JOIN mlplat.lab_runs r ON r.id = l.lab_run_id JOIN mlplat.projects p ON p.id = r.project_id
 WHERE NOT mlplat.lab_run_is_active(r.status) AND r.finished_at < pg_catalog.now() - interval '5 minutes'
UNION ALL
SELECT 'lab_node_unobserved', 'warning', 'lab_runs', NULL, 'lab_node', n.id,
       CASE WHEN n.observed_at IS NULL THEN pg_catalog.format('lab node %s has never been observed', n.name)
            ELSE pg_catalog.format('lab node %s last observed %s ago', n.name,
                                   pg_catalog.date_trunc('second', pg_catalog.now() - n.observed_at)) END,
       n.observed_at
  FROM mlplat.lab_nodes n
 WHERE n.enabled AND (n.observed_at IS NULL OR pg_catalog.now() - n.observed_at
       > coalesce(NULLIF(pg_catalog.current_setting('mlplat.lab_node_max_age', true), ''), '60s')::interval);
COMMENT ON VIEW mlplat.alerts IS
  'Conditions an operator should look at: reconcile age, repeated failures, missing or stale leaders, write conflicts, canary rollouts, stalled span export, lab runs and nodes.';
REVOKE ALL ON mlplat.alerts FROM PUBLIC;
