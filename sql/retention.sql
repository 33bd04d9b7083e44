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
-- route generations: a superseded old one goes, the latest stays however old; the route entry
-- only the one that goes showed goes with it, the one the latest shows stays
INSERT INTO mlplat.route_generations (generation, project_id, created_at)
SELECT 900000 + g, (SELECT id FROM mlplat.projects WHERE name = 'ret-live'), now() - interval '10 days'
  FROM generate_series(1, 2) g;
INSERT INTO mlplat.route_entries (project_id, deployment, model, endpoint, revision, from_gen, to_gen)
SELECT (SELECT id FROM mlplat.projects WHERE name = 'ret-live'), 'ret-d', 'm', 'http://ret-d', r, 900000 + r,
       CASE WHEN r = 1 THEN 900002 END
  FROM generate_series(1, 2) r;

-- the owner cannot remove the history of a living entity, however old it is
\set VERBOSITY terse
DELETE FROM mlplat.audit_events WHERE project_id = (SELECT id FROM mlplat.projects WHERE name = 'ret-live');
DELETE FROM mlplat.deployment_revisions
 WHERE deployment_id = (SELECT id FROM mlplat.deployments WHERE name = 'ret-d') AND revision = 3;
DELETE FROM mlplat.route_generations WHERE generation = 900002;
DELETE FROM mlplat.route_entries WHERE from_gen > 900000;
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
SELECT from_gen, to_gen FROM mlplat.route_entries WHERE from_gen > 900000 ORDER BY from_gen;
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

-- campaign and lab histories: purged once their entity ended more than history_retention
-- ago, unless live state refers to them.  Campaigns: ended 400 days ago (purged, with its
-- approval, candidate, transition, prediction and unserved artifact); ended as long ago but its
-- artifact is the model version live deployment ret-d serves (kept); ended 10 days ago; never
-- approved (AWAITING_APPROVAL, not ended).  Lab: a run ended 400 days ago (purged); one ended
-- 10 days ago; one as old still holding its node lease; one RUNNING; probes of one scope with a
-- live approval (the older superseded one purged, the latest kept as evidence) and of a scope
-- without one (purged); each probe's run goes with it.
SET session_replication_role = replica;
CREATE TEMP TABLE ret_ids AS
SELECT p.id AS pid, v.id AS mv FROM mlplat.projects p JOIN mlplat.model_versions v ON v.project_id = p.id
 WHERE p.name = 'ret-live';
INSERT INTO mlplat.campaigns (project_id, name, definition, content_id, base_model_version_id, base_artifact_sha256,
                              model_family, quality_gate, output_prefix, max_parallel, created_by, db_role, created_at)
SELECT pid, c, '{}', c, mv, repeat('b', 64), 'text_generation', '{}', 's3://b/ret/opt/', 1, 'ret', 'ret',
       now() - interval '400 days'
  FROM ret_ids, unnest(ARRAY['c-ended', 'c-served', 'c-recent', 'c-waiting']) c;
INSERT INTO mlplat.campaign_approvals (campaign_id, project_id, approved_by, db_role, max_spend_gpu_seconds, valid_for,
                                       expires_at, approved_at, request_hash)
SELECT c.id, c.project_id, 'ret', 'ret', 100, '1 day', c.created_at + interval '1 day', c.created_at, 'h'
  FROM mlplat.campaigns c JOIN ret_ids ON c.project_id = pid WHERE c.name <> 'c-waiting';
INSERT INTO mlplat.campaign_candidates (campaign_id, project_id, ordinal, name, plan, content_id, gpus, reserved_gpu_seconds,
                                        status, finished_at, cleanup_done_at, updated_at, created_at)
SELECT c.id, c.project_id, 1, 'k', '{}', 'k', 1, 10,
       CASE c.name WHEN 'c-waiting' THEN 'PLANNED' WHEN 'c-ended' THEN 'FAILED' ELSE 'BUILT' END,
       CASE WHEN c.name <> 'c-waiting' THEN x.t END, CASE WHEN c.name <> 'c-waiting' THEN x.t END, x.t, c.created_at
  FROM mlplat.campaigns c JOIN ret_ids ON c.project_id = pid
 CROSS JOIN LATERAL (SELECT now() - CASE c.name WHEN 'c-recent' THEN interval '10 days' ELSE interval '400 days' END AS t) x;
INSERT INTO mlplat.candidate_transitions (candidate_id, project_id, seq, to_status, at)
SELECT k.id, k.project_id, 1, 'PLANNED', k.created_at FROM mlplat.campaign_candidates k JOIN ret_ids ON k.project_id = pid;
INSERT INTO mlplat.candidate_predictions (candidate_id, project_id, seq, metric, value, estimator, evidence, content_id,
                                          fence_version, recorded_by, db_role, at)
SELECT k.id, k.project_id, 1, 'latency_p95_ms', 10, 'ret', '{}', 'x', 0, 'ret', 'ret', k.created_at
  FROM mlplat.campaign_candidates k JOIN ret_ids ON k.project_id = pid;
INSERT INTO mlplat.optimized_artifacts (project_id, campaign_id, candidate_id, kind, base_model_version_id, base_artifact_sha256,
  tool, tool_version, builder_image, builder_image_digest, algorithm, "precision", config, config_content_id, hardware, spdx,
  output_uri, output_sha256, output_bytes, attestation, attestation_sha256, verified_by, content_id, created_at)
SELECT c.project_id, c.id, k.id, 'checkpoint', mv, repeat('b', 64), 't', '1', 'i', 'sha256:' || repeat('d', 64), 'a', 'fp8',
       '{}', 'x', '{}', 'MIT', 's3://b/ret/opt/' || c.name, CASE c.name WHEN 'c-served' THEN repeat('b', 64) ELSE encode(sha256('ret: served by nothing'), 'hex') END,
       1, '{}', 'x', 'download', 'x', c.created_at
  FROM mlplat.campaigns c JOIN ret_ids ON c.project_id = pid JOIN mlplat.campaign_candidates k ON k.campaign_id = c.id
 WHERE c.name IN ('c-ended', 'c-served');

INSERT INTO mlplat.lab_nodes (name, accelerator, gpus, registered_by) VALUES ('ret-node', 'nvidia-a100', 8, 'ret');
INSERT INTO mlplat.lab_profiles (project_id, name, spec, content_id, runtime_kind, image, gpus, accelerator, families,
                                 max_execution_seconds, max_output_bytes, created_by)
SELECT pid, 'ret-prof', '{}', 'x', 'vllm', 'i', 1, 'nvidia-a100', '{text_generation}', 60, 100, 'ret' FROM ret_ids;
CREATE TEMP TABLE ret_lab AS
SELECT (SELECT id FROM mlplat.lab_nodes WHERE name = 'ret-node') AS node,
       (SELECT f.id FROM mlplat.lab_profiles f JOIN ret_ids ON f.project_id = pid) AS prof;
INSERT INTO mlplat.lab_approvals (project_id, candidate_id, artifact_sha256, runtime_profile_id, node_id, families, limits,
                                  max_runs, approved_by, db_role, valid_for, expires_at)
SELECT pid, mv, repeat('b', 64), prof, node, '{text_generation}', '{}', 10, 'ret', 'ret', '1 day', now() + interval '1 day'
  FROM ret_ids, ret_lab;
INSERT INTO mlplat.lab_runs (project_id, purpose, actor, db_role, idempotency_key, request_digest, candidate_id, model_version_id,
  artifact_uri, artifact_sha256, runtime_profile_id, profile_content_id, node_id, node_name, approval_id, limits, gpus,
  max_attempts, queue_deadline_at, run_deadline_at, status, finished_at, updated_at, created_at)
SELECT pid, x.purpose, 'ret', 'ret', x.k, 'd', mv, mv, 's3://b/ret/1', x.sha, prof, 'x', node, 'ret-node',
       CASE x.purpose WHEN 'run' THEN (SELECT a.id FROM mlplat.lab_approvals a WHERE a.node_id = node) END, '{}', 1, 1,
       x.t, x.t, x.status, CASE WHEN x.status <> 'RUNNING' THEN x.t END, x.t, x.t
  FROM ret_ids, ret_lab, (VALUES ('l-old', 'run', 'SUCCEEDED', repeat('b', 64), now() - interval '400 days'),
                                 ('l-recent', 'run', 'FAILED', repeat('b', 64), now() - interval '10 days'),
                                 ('l-leased', 'run', 'FAILED', repeat('b', 64), now() - interval '400 days'),
                                 ('l-running', 'run', 'RUNNING', repeat('b', 64), now() - interval '400 days'),
                                 ('pr-superseded', 'probe', 'SUCCEEDED', repeat('b', 64), now() - interval '500 days'),
                                 ('pr-evidence', 'probe', 'SUCCEEDED', repeat('b', 64), now() - interval '400 days'),
                                 ('pr-unapproved', 'probe', 'SUCCEEDED', repeat('c', 64), now() - interval '400 days'))
       x (k, purpose, status, sha, t);
INSERT INTO mlplat.lab_run_transitions (lab_run_id, project_id, seq, attempt, to_status, at)
SELECT r.id, r.project_id, 1, 1, 'QUEUED', r.created_at FROM mlplat.lab_runs r JOIN ret_ids ON r.project_id = pid;
-- the one place probes are written by hand (every other test makes them with start_lab_probe):
-- retention needs probes that completed 400 and 500 days ago, an age the API cannot give
INSERT INTO mlplat.lab_probes (project_id, artifact_sha256, runtime_profile_id, node_id, lab_run_id, status, completed_at, created_at)
SELECT r.project_id, r.artifact_sha256, r.runtime_profile_id, r.node_id, r.id, 'PASSED', r.finished_at, r.created_at
  FROM mlplat.lab_runs r JOIN ret_ids ON r.project_id = pid WHERE r.purpose = 'probe';
INSERT INTO mlplat.lab_leases (node_id, lab_run_id, attempt)
SELECT r.node_id, r.id, 1 FROM mlplat.lab_runs r JOIN ret_ids ON r.project_id = pid WHERE r.idempotency_key = 'l-leased';
RESET session_replication_role;

-- the owner cannot remove the history of a campaign or lab run that ended too recently
\set VERBOSITY terse
DELETE FROM mlplat.candidate_transitions WHERE candidate_id IN
  (SELECT k.id FROM mlplat.campaign_candidates k JOIN mlplat.campaigns c ON c.id = k.campaign_id
    JOIN ret_ids ON c.project_id = pid WHERE c.name = 'c-recent');
DELETE FROM mlplat.campaign_candidates WHERE campaign_id IN
  (SELECT c.id FROM mlplat.campaigns c JOIN ret_ids ON c.project_id = pid WHERE c.name = 'c-recent');
DELETE FROM mlplat.campaigns WHERE id IN
  (SELECT c.id FROM mlplat.campaigns c JOIN ret_ids ON c.project_id = pid WHERE c.name = 'c-waiting');
DELETE FROM mlplat.optimized_artifacts WHERE output_uri = 's3://b/ret/opt/c-served';
DELETE FROM mlplat.lab_run_transitions WHERE lab_run_id IN
  (SELECT r.id FROM mlplat.lab_runs r JOIN ret_ids ON r.project_id = pid WHERE r.idempotency_key = 'l-leased');
\set VERBOSITY default

SELECT what, deleted FROM mlplat.run_retention()
 WHERE what IN ('campaigns', 'candidate_transitions', 'lab_probes', 'lab_run_transitions', 'lab_runs') ORDER BY what;
SELECT c.name, mlplat._campaign_state(c.id) AS state,
       (SELECT count(*) FROM mlplat.campaign_approvals a WHERE a.campaign_id = c.id) AS approvals,
       (SELECT count(*) FROM mlplat.candidate_transitions t JOIN mlplat.campaign_candidates k ON k.id = t.candidate_id
         WHERE k.campaign_id = c.id) AS transitions,
       (SELECT count(*) FROM mlplat.candidate_predictions x JOIN mlplat.campaign_candidates k ON k.id = x.candidate_id
         WHERE k.campaign_id = c.id) AS predictions,
       (SELECT count(*) FROM mlplat.optimized_artifacts o WHERE o.campaign_id = c.id) AS artifacts
  FROM mlplat.campaigns c JOIN ret_ids ON c.project_id = pid ORDER BY c.name;
SELECT count(*) AS candidates_of_purged_campaigns FROM mlplat.campaign_candidates k JOIN ret_ids ON k.project_id = pid
 WHERE NOT EXISTS (SELECT 1 FROM mlplat.campaigns c WHERE c.id = k.campaign_id);
SELECT r.idempotency_key, r.status, (SELECT count(*) FROM mlplat.lab_run_transitions t WHERE t.lab_run_id = r.id) AS transitions,
       EXISTS (SELECT 1 FROM mlplat.lab_probes pb WHERE pb.lab_run_id = r.id) AS probe
  FROM mlplat.lab_runs r JOIN ret_ids ON r.project_id = pid ORDER BY r.idempotency_key;

-- the artifact's deployment deleted long ago: nothing refers to the campaign any more
SET session_replication_role = replica;
UPDATE mlplat.deployments SET status = 'DELETED', updated_at = now() - interval '400 days'
 WHERE name = 'ret-d' AND project_id = (SELECT pid FROM ret_ids);
RESET session_replication_role;
SELECT what, deleted FROM mlplat.run_retention() WHERE what = 'campaigns';
SELECT c.name FROM mlplat.campaigns c JOIN ret_ids ON c.project_id = pid ORDER BY c.name;

-- its node lease released, the old run goes too; nothing of ours left in flight for the
-- tests that follow (the running one ends now: kept)
SET session_replication_role = replica;
DELETE FROM mlplat.lab_leases WHERE node_id = (SELECT node FROM ret_lab);
UPDATE mlplat.lab_runs SET status = 'CANCELLED', finished_at = now() WHERE idempotency_key = 'l-running'
   AND project_id = (SELECT pid FROM ret_ids);
UPDATE mlplat.lab_nodes SET enabled = false WHERE name = 'ret-node';
RESET session_replication_role;
SELECT what, deleted FROM mlplat.run_retention() WHERE what IN ('lab_run_transitions', 'lab_runs') ORDER BY what;
SELECT r.idempotency_key, r.status FROM mlplat.lab_runs r JOIN ret_ids ON r.project_id = pid ORDER BY r.idempotency_key;

-- leave nothing in flight for the tests that follow (alerts read every live entity)
UPDATE mlplat.runs SET status = 'CANCEL_REQUESTED'
 WHERE project_id = (SELECT id FROM mlplat.projects WHERE name = 'ret-live') AND status = 'RUNNING';
UPDATE mlplat.runs SET status = 'CANCELLED', updated_at = now()
 WHERE project_id = (SELECT id FROM mlplat.projects WHERE name = 'ret-live') AND status = 'CANCEL_REQUESTED';
