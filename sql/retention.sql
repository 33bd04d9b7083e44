-- Retention (issue 18, finding 11): every growing table is purged by a setting, and the
-- append-only histories keep their guarantee while their entity lives.  Rows are made old by
-- backdating them with triggers off (session_replication_role), as a test only can.
SELECT mlplat.create_project('ret-live', 4) IS NOT NULL AS created,
       mlplat.create_project('ret-gone', 4) IS NOT NULL AS created;
SELECT (mlplat.add_artifact_location(p, 's3://b/ret/')).status FROM unnest(ARRAY['ret-live', 'ret-gone']) p;
SELECT mlplat.register_model_version(p, 'm', '1', 's3://b/ret/1', repeat('b', 64), 'kserve-sklearnserver', 'sklearn') IS NOT NULL
  FROM unnest(ARRAY['ret-live', 'ret-gone']) p;
SELECT (mlplat.set_model_stage(p, 'm', '1', 'CANDIDATE')).status IS NOT NULL FROM unnest(ARRAY['ret-live', 'ret-gone']) p;
-- three revisions of ret-d (desired 3, previous 2: revision 1 is referred to by nothing)
SELECT (mlplat.deploy('ret-live', 'ret-d', 'm', '1', 'kserve-sklearnserver', 0, n, n)).revision FROM generate_series(1, 3) n;
-- gone_long: deleted 400 days ago; gone_recent: deleted 10 days ago
SELECT (mlplat.deploy('ret-live', 'gone-long', 'm', '1', 'kserve-sklearnserver')).revision,
       (mlplat.deploy('ret-live', 'gone-recent', 'm', '1', 'kserve-sklearnserver')).revision;
SELECT (mlplat.deploy('ret-gone', 'x', 'm', '1', 'kserve-sklearnserver')).revision;
-- runs: one finished long ago, one finished lately, one still running
SELECT (mlplat.start_run('ret-live', r, '{"image": "busybox:1.36", "command": ["true"]}')).status
  FROM unnest(ARRAY['old-done', 'new-done', 'running']) r;

SET session_replication_role = replica;
UPDATE mlplat.deployment_revisions SET created_at = now() - interval '400 days'
 WHERE project_id IN (SELECT id FROM mlplat.projects WHERE name LIKE 'ret-%');
UPDATE mlplat.deployments SET status = 'DELETED', updated_at = now() - interval '400 days' WHERE name = 'gone-long';
UPDATE mlplat.deployments SET status = 'DELETED', updated_at = now() - interval '10 days' WHERE name = 'gone-recent';
UPDATE mlplat.audit_events SET at = now() - interval '400 days'
 WHERE project_id IN (SELECT id FROM mlplat.projects WHERE name LIKE 'ret-%');
UPDATE mlplat.projects SET status = 'DELETED', updated_at = now() - interval '400 days' WHERE name = 'ret-gone';
UPDATE mlplat.deployments SET status = 'DELETED', updated_at = now() - interval '400 days'
 WHERE project_id = (SELECT id FROM mlplat.projects WHERE name = 'ret-gone');
UPDATE mlplat.runs SET status = 'SUCCEEDED', updated_at = now() - interval '400 days' WHERE name = 'old-done';
UPDATE mlplat.runs SET status = 'FAILED', updated_at = now() - interval '10 days' WHERE name = 'new-done';
UPDATE mlplat.runs SET status = 'RUNNING', updated_at = now() - interval '400 days' WHERE name = 'running';
RESET session_replication_role;

-- leader history: the current epoch's row stays, however old
INSERT INTO mlplat.leader_history (kind, epoch, pid, replica, host, acquired_at)
SELECT 'ret_kind', e, 1, 0, 'test', now() - interval '40 days' FROM generate_series(1, 3) e;
INSERT INTO mlplat.leader_epochs (kind, epoch, pid, replica, host) VALUES ('ret_kind', 3, 1, 0, 'test');
-- route generations: a superseded old one goes, the latest stays however old
INSERT INTO mlplat.route_generations (generation, project_id, routes, created_at)
SELECT 900000 + g, (SELECT id FROM mlplat.projects WHERE name = 'ret-live'), '{}', now() - interval '10 days'
  FROM generate_series(1, 2) g;

-- the owner cannot remove the history of a living entity, however old it is
\set VERBOSITY terse
DELETE FROM mlplat.audit_events WHERE project_id = (SELECT id FROM mlplat.projects WHERE name = 'ret-live');
DELETE FROM mlplat.deployment_revisions
 WHERE deployment_id = (SELECT id FROM mlplat.deployments WHERE name = 'ret-d') AND revision = 3;
DELETE FROM mlplat.route_generations WHERE generation = 900002;
\set VERBOSITY default

SELECT what, deleted > 0 AS some_deleted FROM mlplat.run_retention() ORDER BY what;

-- kept: every revision some live state refers to; purged: the unreferenced old one and
-- every revision of a deployment deleted past retention
SELECT d.name, array_agg(r.revision ORDER BY r.revision) AS revisions_left
  FROM mlplat.deployments d
  JOIN mlplat.projects p ON p.id = d.project_id AND p.name LIKE 'ret-%'
  LEFT JOIN mlplat.deployment_revisions r ON r.deployment_id = d.id
 GROUP BY d.name ORDER BY d.name;
-- the audit of the living project stays; of the project deleted 400 days ago, none
SELECT p.name, count(a.id) > 0 AS has_audit
  FROM mlplat.projects p LEFT JOIN mlplat.audit_events a ON a.project_id = p.id
 WHERE p.name LIKE 'ret-%' GROUP BY p.name ORDER BY p.name;
SELECT name, status FROM mlplat.runs
 WHERE project_id = (SELECT id FROM mlplat.projects WHERE name = 'ret-live') ORDER BY name;
SELECT epoch FROM mlplat.leader_history WHERE kind = 'ret_kind' ORDER BY epoch;
SELECT generation FROM mlplat.route_generations WHERE generation > 900000 ORDER BY generation;
SELECT last_run_by = current_user AS by_caller, last_result ? 'audit_events' AS has_result
  FROM mlplat.retention_state;

-- idempotency: a retry after its key was purged is refused, not run a second time (the
-- request below would succeed if it ran: its key is all that is left to stop it)
SELECT (mlplat.create_project('ret-keyed', 1, idempotency_key => 'ret-key-1')).replayed;
SELECT (mlplat.create_project('ret-keyed', 1, idempotency_key => 'ret-key-1')).replayed AS retry_replays;
UPDATE mlplat.idempotency_keys SET created_at = now() - interval '8 days' WHERE key = 'ret-key-1';
SELECT deleted FROM mlplat.run_retention() WHERE what = 'idempotency_keys';
SELECT count(*) AS tombstones FROM mlplat.idempotency_tombstones
 WHERE fingerprint = mlplat._idem_fingerprint(current_user, 'create_project', 'ret-key-1');
DO $$
BEGIN
  PERFORM mlplat.create_project('ret-keyed2', 1, idempotency_key => 'ret-key-1');
  RAISE NOTICE 'the retry ran again';
EXCEPTION WHEN others THEN
  RAISE NOTICE '% %', SQLSTATE, regexp_replace(SQLERRM, '\d{4}-\d{2}-\d{2}', 'DATE');
END $$;
SELECT count(*) AS not_created FROM mlplat.projects WHERE name = 'ret-keyed2';
-- a new key is fine
SELECT (mlplat.create_project('ret-keyed2', 1, idempotency_key => 'ret-key-2')).replayed;

-- leave nothing in flight for the tests that follow (alerts read every live entity)
UPDATE mlplat.runs SET status = 'CANCEL_REQUESTED'
 WHERE project_id = (SELECT id FROM mlplat.projects WHERE name = 'ret-live') AND status = 'RUNNING';
UPDATE mlplat.runs SET status = 'CANCELLED', updated_at = now()
 WHERE project_id = (SELECT id FROM mlplat.projects WHERE name = 'ret-live') AND status = 'CANCEL_REQUESTED';
