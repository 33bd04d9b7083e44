-- Deployments: drift policy API, deploy deadline bookkeeping, route generations.
\set SHOW_CONTEXT never
\set acc 'entity, revision, status, replayed'
DO $$ DECLARE r text; BEGIN
  FOREACH r IN ARRAY ARRAY['regress_rt_owner', 'regress_rt_deployer', 'regress_rt_viewer', 'regress_rt_dev',
                           'regress_rt_outsider'] LOOP
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN EXECUTE format('CREATE ROLE %I', r); END IF;
  END LOOP;
END $$;
SELECT :acc FROM mlplat.create_project('routes', 4, NULL, NULL, NULL, 'regress_rt_owner');
SELECT :acc FROM mlplat.create_project('routes2', 4, NULL, NULL, NULL, 'regress_rt_outsider');
SELECT :acc FROM mlplat.add_artifact_location('routes', 's3://models/');
SELECT :acc FROM mlplat.add_artifact_location('routes2', 's3://models/');
SELECT :acc FROM mlplat.grant_role('routes', 'regress_rt_deployer', 'deployer');
SELECT :acc FROM mlplat.grant_role('routes', 'regress_rt_viewer', 'viewer');
SELECT :acc FROM mlplat.grant_role('routes', 'regress_rt_dev', 'developer');
SELECT :acc FROM mlplat.register_model_version('routes', 'iris', '1', 's3://models/iris/1', repeat('a', 64), 'kserve-sklearnserver', 'sklearn');
SELECT :acc FROM mlplat.register_model_version('routes', 'iris', '2', 's3://models/iris/2', repeat('b', 64), 'kserve-sklearnserver', 'sklearn');
SELECT :acc FROM mlplat.register_model_version('routes', 'wine', '1', 's3://models/wine/1', repeat('c', 64), 'kserve-sklearnserver', 'sklearn');
SELECT :acc FROM mlplat.register_model_version('routes2', 'iris', '1', 's3://models/iris/1', repeat('a', 64), 'kserve-sklearnserver', 'sklearn');
SELECT :acc FROM mlplat.set_model_stage('routes', 'iris', '1', 'CHAMPION');
SELECT :acc FROM mlplat.set_model_stage('routes', 'iris', '2', 'CANDIDATE');
SELECT :acc FROM mlplat.set_model_stage('routes', 'wine', '1', 'CHAMPION');
SELECT :acc FROM mlplat.set_model_stage('routes2', 'iris', '1', 'CHAMPION');
SELECT :acc FROM mlplat.deploy('routes', 'iris', 'iris', '1', 'kserve-sklearnserver');
SELECT :acc FROM mlplat.deploy('routes', 'wine', 'wine', '1', 'kserve-sklearnserver');
SELECT :acc FROM mlplat.deploy('routes2', 'iris', 'iris', '1', 'kserve-sklearnserver');

-- ---------------------------------------------------------------- drift policy
-- default: repair, shown in deployment_status
SELECT deployment, drift_policy, drift_paths FROM mlplat.deployment_status WHERE project = 'routes' ORDER BY 1;
SET ROLE regress_rt_deployer;
SELECT :acc FROM mlplat.set_drift_policy('routes', 'iris', 'report', 'k1');
-- same key, same request: the stored answer; same key, other request: refused
SELECT :acc FROM mlplat.set_drift_policy('routes', 'iris', 'report', 'k1');
SELECT :acc FROM mlplat.set_drift_policy('routes', 'iris', 'repair', 'k1');
-- setting what is already set changes nothing (but is audited)
SELECT :acc FROM mlplat.set_drift_policy('routes', 'iris', 'report');
-- validation names the field and the rule
SELECT :acc FROM mlplat.set_drift_policy('routes', 'iris', 'ignore');
SELECT :acc FROM mlplat.set_drift_policy('routes', 'iris', NULL);
SELECT :acc FROM mlplat.set_drift_policy('routes', 'nosuch', 'report');
SELECT :acc FROM mlplat.set_drift_policy('routes', 'iris', 'report', repeat('k', 129));
RESET ROLE;
-- authorization: deployers and owners; not viewers, developers or outsiders (no existence leak)
SET ROLE regress_rt_viewer;
SELECT :acc FROM mlplat.set_drift_policy('routes', 'iris', 'repair');
SET ROLE regress_rt_dev;
SELECT :acc FROM mlplat.set_drift_policy('routes', 'iris', 'repair');
SET ROLE regress_rt_outsider;
SELECT :acc FROM mlplat.set_drift_policy('routes', 'iris', 'repair');
SELECT :acc FROM mlplat.set_drift_policy('nosuchproject', 'iris', 'repair');
SET ROLE regress_rt_owner;
SELECT :acc FROM mlplat.set_drift_policy('routes', 'wine', 'report');
SELECT :acc FROM mlplat.set_drift_policy('routes', 'wine', 'repair');
RESET ROLE;
-- the change bumped the row version (a pass that decided under the old policy loses its
-- compare-and-swap) but not the generation (no new intent for the cluster)
SELECT name, drift_policy, generation, row_version FROM mlplat.deployments d
WHERE project_id = (SELECT id FROM mlplat.projects WHERE name = 'routes') ORDER BY 1;
SELECT actor, action, detail FROM mlplat.audit_events WHERE project = 'routes' AND action = 'set_drift_policy' ORDER BY id;
-- drifted paths are shown while DRIFTED
UPDATE mlplat.deployments SET status = 'DRIFTED', observed = '{"drift_paths": ["spec.predictor.minReplicas"]}' WHERE name = 'iris'
  AND project_id = (SELECT id FROM mlplat.projects WHERE name = 'routes');
SELECT deployment, status, drift_policy, drift_paths, in_flight FROM mlplat.deployment_status WHERE project = 'routes' ORDER BY 1;
UPDATE mlplat.deployments SET status = 'DEPLOYING' WHERE name = 'iris'
  AND project_id = (SELECT id FROM mlplat.projects WHERE name = 'routes');
-- a DELETING deployment takes no policy
SET ROLE regress_rt_deployer;
SELECT :acc FROM mlplat.undeploy('routes', 'wine');
SELECT :acc FROM mlplat.set_drift_policy('routes', 'wine', 'report');
RESET ROLE;
UPDATE mlplat.deployments SET status = 'DELETED' WHERE name = 'wine';
SELECT :acc FROM mlplat.deploy('routes', 'wine', 'wine', '1', 'kserve-sklearnserver');

-- ---------------------------------------------------------------- deploy deadline
INSERT INTO mlplat.leader_epochs (kind, epoch, pid, replica, host) VALUES ('deployments', 42, 1, 0, 'test')
ON CONFLICT (kind) DO UPDATE SET epoch = 42;
-- every deploy and rollback starts the wait; the claim says when it has run out
SELECT name, ready_wait_since IS NOT NULL AS waiting FROM mlplat.deployments WHERE name IN ('iris', 'wine') ORDER BY 1;
UPDATE mlplat.deployments SET ready_wait_since = now() - interval '10 seconds' WHERE name = 'iris';
SELECT c.project, c.name, c.status, c.deadline_passed AS passed_5s,
       (SELECT x.deadline_passed FROM mlplat._deployments_claim(false, false, 60000) x WHERE x.id = c.id) AS passed_60s,
       (SELECT x.deadline_passed FROM mlplat._deployments_claim(false, false, 0) x WHERE x.id = c.id) AS passed_off
FROM mlplat._deployments_claim(false, false, 5000) c WHERE c.project IN ('routes', 'routes2') ORDER BY 1, 2;
SELECT :acc FROM mlplat.deploy('routes', 'iris', 'iris', '2', 'kserve-sklearnserver');
SELECT c.name, c.deadline_passed FROM mlplat._deployments_claim(false, false, 5000) c WHERE c.project = 'routes' ORDER BY 1;
-- a deployment's own deadline overrides the setting, also for the wait in progress
SET ROLE regress_rt_deployer;
SELECT :acc FROM mlplat.set_deploy_deadline('routes', 'wine', '2 seconds', 'k2');
SELECT :acc FROM mlplat.set_deploy_deadline('routes', 'wine', '2 seconds', 'k2');
SELECT :acc FROM mlplat.set_deploy_deadline('routes', 'wine', '-1 second');
SELECT :acc FROM mlplat.set_deploy_deadline('routes', 'wine', '8 days');
SELECT :acc FROM mlplat.set_deploy_deadline('routes', 'nosuch', '1 hour');
SET ROLE regress_rt_viewer;
SELECT :acc FROM mlplat.set_deploy_deadline('routes', 'wine', '1 hour');
RESET ROLE;
UPDATE mlplat.deployments SET ready_wait_since = now() - interval '3 seconds' WHERE name = 'wine';
SELECT c.name, c.deadline_ms, c.deadline_own, c.deadline_passed
FROM mlplat._deployments_claim(false, false, 60000) c WHERE c.project = 'routes' ORDER BY 1;
SELECT deployment, deploy_deadline FROM mlplat.deployment_status WHERE project = 'routes' ORDER BY 1;
-- 0 disables it; NULL goes back to the setting
SET ROLE regress_rt_deployer;
SELECT :acc FROM mlplat.set_deploy_deadline('routes', 'wine', '0');
RESET ROLE;
SELECT c.name, c.deadline_ms, c.deadline_passed FROM mlplat._deployments_claim(false, false, 1000) c WHERE c.name = 'wine';
SET ROLE regress_rt_deployer;
SELECT :acc FROM mlplat.set_deploy_deadline('routes', 'wine', NULL);
RESET ROLE;
SELECT c.name, c.deadline_ms, c.deadline_own, c.deadline_passed FROM mlplat._deployments_claim(false, false, 1000) c WHERE c.name = 'wine';
SELECT actor, detail FROM mlplat.audit_events WHERE project = 'routes' AND action = 'set_deploy_deadline' ORDER BY id;

-- ---------------------------------------------------------------- route generations
SELECT coalesce(max(generation), 0) AS base FROM mlplat.route_generations \gset
-- a generation's whole route set, put together by route_table from the entries (a
-- generation records what changed): {"<model>": [{deployment, endpoint, revision, version}]}
CREATE FUNCTION pg_temp.routes_at(p_generation bigint) RETURNS jsonb LANGUAGE sql AS $$
  SELECT coalesce(jsonb_object_agg(x.model, x.entries), '{}') FROM (
    SELECT t.model, jsonb_agg(jsonb_build_object('deployment', t.deployment, 'endpoint', t.endpoint,
                                                 'revision', t.revision, 'version', t.version)
                              ORDER BY t.deployment COLLATE "C") AS entries
      FROM mlplat.route_generations g
      JOIN mlplat.projects p ON p.id = g.project_id
      JOIN mlplat.route_table(p_generation) t ON t.project = p.name
     WHERE g.generation = p_generation GROUP BY t.model) x
$$;
-- (standing in for the reconciler's write-back) iris becomes READY: a first generation
SELECT mlplat._deployments_writeback(d.id, d.row_version, 42, 'READY', 'revision 2 ready', d.generation, 2,
                                     'http://iris.mlp-routes.example.com', NULL, NULL, NULL)
FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id WHERE p.name = 'routes' AND d.name = 'iris';
SELECT generation - :base AS gen, (SELECT name FROM mlplat.projects WHERE id = project_id) AS project, jsonb_pretty(pg_temp.routes_at(generation))
FROM mlplat.route_generations WHERE generation > :base ORDER BY generation;
-- READY clears the deadline
SELECT name, ready_wait_since IS NULL AS ready_wait_cleared FROM mlplat.deployments WHERE name = 'iris' ORDER BY project_id;
-- a write that changes nothing a route shows (a reason, a retry) makes no generation
UPDATE mlplat.deployments SET status_reason = 'still ready', attempts = 1 WHERE name = 'iris';
SELECT count(*) - 1 AS new_generations FROM mlplat.route_generations WHERE generation > :base;
-- a rolled-back write-back publishes nothing
BEGIN;
UPDATE mlplat.deployments SET status = 'READY', endpoint = 'http://wine.mlp-routes.example.com', observed_revision = 2, ready_revision = 2
WHERE name = 'wine';
ROLLBACK;
SELECT count(*) AS generations FROM mlplat.route_generations WHERE generation > :base;
-- two deployments in one transaction: one generation with both (the trigger is deferred to commit)
BEGIN;
UPDATE mlplat.deployments SET status = 'READY', endpoint = 'http://wine.mlp-routes.example.com', observed_revision = 2, ready_revision = 2
WHERE name = 'wine' AND project_id = (SELECT id FROM mlplat.projects WHERE name = 'routes');
UPDATE mlplat.deployments SET status = 'READY', endpoint = 'http://iris.mlp-routes2.example.com', observed_revision = 1, ready_revision = 1
WHERE name = 'iris' AND project_id = (SELECT id FROM mlplat.projects WHERE name = 'routes2');
UPDATE mlplat.deployments SET endpoint = 'http://iris2.mlp-routes.example.com'
WHERE name = 'iris' AND project_id = (SELECT id FROM mlplat.projects WHERE name = 'routes');
UPDATE mlplat.deployments SET endpoint = 'http://iris.mlp-routes.example.com'
WHERE name = 'iris' AND project_id = (SELECT id FROM mlplat.projects WHERE name = 'routes');
SELECT count(*) AS before_commit FROM mlplat.route_generations WHERE generation > :base;
COMMIT;
SELECT generation - :base AS gen, (SELECT name FROM mlplat.projects WHERE id = project_id) AS project, pg_temp.routes_at(generation) AS routes
FROM mlplat.route_generations WHERE generation > :base ORDER BY generation;
-- a redeploy (READY -> DEPLOYING) keeps the route on the revision seen READY: KServe serves
-- it until the new one is ready.  No generation until then ...
SET ROLE regress_rt_deployer;
SELECT :acc FROM mlplat.deploy('routes', 'iris', 'iris', '2', 'kserve-sklearnserver', 0, 1, 2);
RESET ROLE;
SELECT d.status, d.desired_revision, d.ready_revision FROM mlplat.deployments d
JOIN mlplat.projects p ON p.id = d.project_id WHERE p.name = 'routes' AND d.name = 'iris';
SELECT count(*) AS generations FROM mlplat.route_generations WHERE generation > :base;
-- ... then the route moves to the new revision
SELECT mlplat._deployments_writeback(d.id, d.row_version, 42, 'READY', 'ready', d.generation, d.desired_revision,
                                     'http://iris.mlp-routes.example.com', NULL, NULL, NULL)
FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id WHERE p.name = 'routes' AND d.name = 'iris';
SELECT generation - :base AS gen, pg_temp.routes_at(generation)->'iris' AS iris FROM mlplat.route_generations WHERE generation > :base
ORDER BY generation DESC LIMIT 1;
-- DRIFTED keeps the route (the endpoint still serves); leaving READY removes it
UPDATE mlplat.deployments SET status = 'DRIFTED' WHERE name = 'wine';
SELECT count(*) AS generations FROM mlplat.route_generations WHERE generation > :base;
SET ROLE regress_rt_deployer;
SELECT :acc FROM mlplat.undeploy('routes', 'wine');
RESET ROLE;
SELECT generation - :base AS gen, pg_temp.routes_at(generation) AS routes FROM mlplat.route_generations WHERE generation > :base
ORDER BY generation DESC LIMIT 1;
-- the people's view: the current generation per project; a gateway reads any generation
SELECT project, generation - :base AS gen, model, deployment, endpoint, revision, version FROM mlplat.routes
WHERE project LIKE 'routes%' ORDER BY 1, 3, 4;
SELECT generation - :base AS gen, project, model, deployment, revision FROM mlplat.route_table(:base + 2)
WHERE project LIKE 'routes%';
SELECT count(*) AS rows_before_any FROM mlplat.route_table(:base) WHERE project LIKE 'routes%';
-- members see their projects only, through the view and the function
SET ROLE regress_rt_viewer;
SELECT project, model, deployment FROM mlplat.routes ORDER BY 1, 2;
SELECT project, model, deployment FROM mlplat.route_table() ORDER BY 1, 2;
SELECT DISTINCT (SELECT name FROM mlplat.projects p WHERE p.id = g.project_id) AS visible FROM mlplat.route_generations g;
SET ROLE regress_rt_outsider;
SELECT project, model, deployment FROM mlplat.routes ORDER BY 1, 2;
RESET ROLE;
-- a write-back of 1,000 rows of two projects becoming READY in one transaction: one
-- generation per project holding all of its rows, published in a few statements at commit,
-- not a few a row: the publishers' lock row is read by the one firing that publishes (its
-- lock, then each generation's number), not by each of the 1,000 firings
SELECT :acc FROM mlplat.create_project('routes3', 4);
SELECT :acc FROM mlplat.create_project('routes4', 4);
SELECT count(*) FROM (VALUES ('routes3'), ('routes4')) AS p(name),
  mlplat.add_artifact_location(p.name, 's3://models/'),
  mlplat.register_model_version(p.name, 'iris', '1', 's3://models/iris/1', repeat('a', 64), 'kserve-sklearnserver', 'sklearn'),
  mlplat.set_model_stage(p.name, 'iris', '1', 'CHAMPION');
SELECT count(*) FROM generate_series(1, 1000) i,
  mlplat.deploy(CASE WHEN i <= 600 THEN 'routes3' ELSE 'routes4' END, 'b' || i, 'iris', '1', 'kserve-sklearnserver');
SELECT coalesce(max(generation), 0) AS bulk_base FROM mlplat.route_generations \gset
BEGIN;
SELECT count(*) AS written FROM mlplat._deployments_writeback_set(42, ARRAY(
  SELECT ROW(d.id, d.row_version, 'READY', 'ready', d.generation, d.desired_revision, 'http://' || d.name || '.' || p.name,
             NULL, NULL, NULL)::mlplat.deployment_writeback
    FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id WHERE p.name IN ('routes3', 'routes4') ORDER BY d.id));
SELECT seq_scan + coalesce(idx_scan, 0) AS head_reads FROM pg_stat_xact_user_tables WHERE relid = 'mlplat.route_head'::regclass \gset
SET CONSTRAINTS ALL IMMEDIATE;
SELECT seq_scan + coalesce(idx_scan, 0) - :head_reads AS head_reads_to_publish
FROM pg_stat_xact_user_tables WHERE relid = 'mlplat.route_head'::regclass;
COMMIT;
SELECT (SELECT name FROM mlplat.projects WHERE id = g.project_id) AS project, g.generation - :bulk_base AS gen,
       (SELECT count(*) FROM mlplat.route_entries e WHERE e.project_id = g.project_id AND e.from_gen = g.generation) AS entries,
       (SELECT count(*) FROM mlplat.route_table(g.generation) t JOIN mlplat.projects p ON p.name = t.project
         WHERE p.id = g.project_id AND t.endpoint = 'http://' || t.deployment || '.' || p.name) AS routed
FROM mlplat.route_generations g WHERE g.generation > :bulk_base ORDER BY g.generation;
-- a savepoint rolled back after its SET CONSTRAINTS IMMEDIATE published takes the publish
-- back with it: PostgreSQL fires those rows' triggers again at commit, and they publish
SELECT coalesce(max(generation), 0) AS bulk_base FROM mlplat.route_generations \gset
BEGIN;
SELECT count(*) AS written FROM mlplat._deployments_writeback_set(42, ARRAY(
  SELECT ROW(d.id, d.row_version, 'FAILED', 'gone', d.generation, d.desired_revision, NULL, NULL, 'gone', NULL)::mlplat.deployment_writeback
    FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id WHERE p.name = 'routes3' AND d.name IN ('b1', 'b2')));
SAVEPOINT s;
SET CONSTRAINTS ALL IMMEDIATE;
SELECT count(*) AS published_in_savepoint FROM mlplat.route_generations WHERE generation > :bulk_base;
ROLLBACK TO SAVEPOINT s;
SELECT count(*) AS after_rollback_to FROM mlplat.route_generations WHERE generation > :bulk_base;
COMMIT;
SELECT g.generation - :bulk_base AS gen, (SELECT name FROM mlplat.projects WHERE id = g.project_id) AS project,
       (SELECT count(*) FROM mlplat.route_entries e WHERE e.project_id = g.project_id AND e.to_gen = g.generation) AS closed,
       (SELECT string_agg(e.deployment, ',' ORDER BY e.deployment) FROM mlplat.route_entries e
         WHERE e.project_id = g.project_id AND e.to_gen = g.generation) AS removed
FROM mlplat.route_generations g WHERE g.generation > :bulk_base ORDER BY g.generation;
-- generations are immutable; a route entry is only ever closed
UPDATE mlplat.route_generations SET created_at = now();
DELETE FROM mlplat.route_generations;
TRUNCATE mlplat.route_generations;
UPDATE mlplat.route_entries SET endpoint = 'http://elsewhere';
UPDATE mlplat.route_entries SET to_gen = NULL WHERE to_gen IS NOT NULL;
DELETE FROM mlplat.route_entries;
TRUNCATE mlplat.route_entries;
-- and only the extension writes them
SET ROLE regress_rt_owner;
INSERT INTO mlplat.route_generations (generation, project_id) VALUES (999999, 1);
INSERT INTO mlplat.route_entries (project_id, deployment, model, endpoint, revision, from_gen) VALUES (1, 'x', 'm', 'http://x', 1, 999999);
RESET ROLE;
