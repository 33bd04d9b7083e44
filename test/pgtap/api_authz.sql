-- pgTAP: the full role x action matrix of the desired-state API, and cross-project isolation.
-- Each call runs in a subtransaction that is always rolled back, so outcomes do not depend
-- on order; "allowed" means the call got past authorization (it may still fail later for a
-- state reason, which is not 42501).
BEGIN;
SELECT plan(153);
\ir lib/helpers.sql

DO $$ DECLARE r text; BEGIN
  FOREACH r IN ARRAY ARRAY['tap_viewer', 'tap_developer', 'tap_deployer', 'tap_owner', 'tap_outsider', 'tap_other'] LOOP
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN EXECUTE format('CREATE ROLE %I', r); END IF;
  END LOOP;
END $$;

DO $$ DECLARE p text; BEGIN
  PERFORM mlplat.create_project('tapp', 8, NULL, NULL, NULL, 'tap_owner');
  PERFORM mlplat.create_project('tapq', 8, NULL, NULL, NULL, 'tap_other');
  PERFORM mlplat.add_artifact_location('tapp', 's3://b/');
  PERFORM mlplat.add_artifact_location('tapq', 's3://b/');
  PERFORM mlplat.grant_role('tapp', 'tap_viewer', 'viewer');
  PERFORM mlplat.grant_role('tapp', 'tap_developer', 'developer');
  PERFORM mlplat.grant_role('tapp', 'tap_deployer', 'deployer');
  FOREACH p IN ARRAY ARRAY['tapp', 'tapq'] LOOP
    PERFORM mlplat.register_model_version(p, 'm', '1', 's3://b/m1', repeat('a', 64), 'kserve-sklearnserver', 'sklearn');
    PERFORM mlplat.set_model_stage(p, 'm', '1', 'CHAMPION');
    PERFORM mlplat.deploy(p, 'web', 'm', '1', 'kserve-sklearnserver');
    PERFORM mlplat.start_run(p, 'r1', '{"image": "x"}');
  END LOOP;
  PERFORM mlplat.register_model_version('tapp', 'm', '2', 's3://b/m2', repeat('b', 64), 'kserve-sklearnserver', 'sklearn');
  PERFORM mlplat.set_model_stage('tapp', 'm', '2', 'CANDIDATE');
END $$;


CREATE TEMP TABLE tap_actions (action text, rank int, sql text);
INSERT INTO tap_actions VALUES
  ('view',                1, $q$SELECT mlplat.render_inference_service('tapp', 'web')$q$),
  ('register_model',      2, $q$SELECT mlplat.register_model_version('tapp', 'm', '9', 's3://b/m9', repeat('c', 64), 'kserve-sklearnserver', 'sklearn')$q$),
  ('start_run',           2, $q$SELECT mlplat.start_run('tapp', 'r9', '{"image": "x"}')$q$),
  ('start_pipeline_run',  2, $q$SELECT mlplat.start_pipeline_run('tapp', 'p9', '[{"name": "a", "image": "x"}]')$q$),
  ('cancel_run',          2, $q$SELECT mlplat.cancel_run('tapp', 'r1')$q$),
  ('deploy',              3, $q$SELECT mlplat.deploy('tapp', 'web2', 'm', '1', 'kserve-sklearnserver')$q$),
  ('rollback_deployment', 3, $q$SELECT mlplat.rollback_deployment('tapp', 'web')$q$),
  ('undeploy',            3, $q$SELECT mlplat.undeploy('tapp', 'web')$q$),
  ('set_model_stage',     3, $q$SELECT mlplat.set_model_stage('tapp', 'm', '2', 'NONE')$q$),
  ('start_rollout',       3, $q$SELECT mlplat.start_rollout('tapp', 'web', 'm', '2', '{"steps": [0.5]}')$q$),
  ('promote_rollout',     3, $q$SELECT mlplat.promote_rollout('tapp', 'web')$q$),
  ('abort_rollout',       3, $q$SELECT mlplat.abort_rollout('tapp', 'web')$q$),
  ('set_drift_policy',    3, $q$SELECT mlplat.set_drift_policy('tapp', 'web', 'report')$q$),
  ('set_deploy_deadline', 3, $q$SELECT mlplat.set_deploy_deadline('tapp', 'web', '1 hour')$q$),
  ('set_project_quota',   4, $q$SELECT mlplat.set_project_quota('tapp', 10)$q$),
  ('delete_project',      4, $q$SELECT mlplat.delete_project('tapp')$q$),
  ('grant_role',          4, $q$SELECT mlplat.grant_role('tapp', 'someone', 'viewer')$q$),
  ('revoke_role',         4, $q$SELECT mlplat.revoke_role('tapp', 'tap_viewer', 'viewer')$q$),
  ('set_artifact_locations', 4, $q$SELECT mlplat.add_artifact_location('tapp', 's3://tapp-only/')$q$),
  ('create_project',      9, $q$SELECT mlplat.create_project('tapnew', 1)$q$);
CREATE TEMP TABLE tap_roles (role text, rank int);
INSERT INTO tap_roles VALUES ('tap_outsider', 0), ('tap_viewer', 1), ('tap_developer', 2), ('tap_deployer', 3), ('tap_owner', 4);
GRANT SELECT ON tap_actions, tap_roles TO PUBLIC;

-- the matrix (20 actions x 5 roles = 100 tests): allowed exactly when the role's rank reaches the action's
SELECT is(public.tap_api_try(r.role, a.sql) <> '42501', r.rank >= a.rank,
          format('%s %s %s', r.role, CASE WHEN r.rank >= a.rank THEN 'may' ELSE 'may not' END, a.action))
FROM tap_roles r CROSS JOIN tap_actions a ORDER BY a.rank, a.action, r.rank;

-- allowed calls really succeed where the state permits (not just "not denied")
SELECT is(public.tap_api_try('tap_developer', sql), 'ok', 'developer ' || action || ' succeeds')
FROM tap_actions WHERE action IN ('register_model', 'start_run', 'start_pipeline_run', 'cancel_run') ORDER BY action;
SELECT is(public.tap_api_try('tap_deployer', sql), 'ok', 'deployer ' || action || ' succeeds')
FROM tap_actions WHERE action IN ('deploy', 'undeploy', 'set_model_stage', 'set_drift_policy', 'set_deploy_deadline') ORDER BY action;
SELECT is(public.tap_api_try('tap_owner', sql), 'ok', 'owner ' || action || ' succeeds')
FROM tap_actions WHERE action IN ('set_project_quota', 'grant_role') ORDER BY action;

-- denials say 42501 with the action and the project
SET LOCAL ROLE tap_viewer;
SELECT throws_ok($$SELECT mlplat.undeploy('tapp', 'web')$$, '42501', 'permission denied: undeploy on project "tapp"',
                 'denial names the action and the project');
RESET ROLE;

-- cross-project isolation: a full owner of tapp has no rights in tapq
SELECT is(public.tap_api_try('tap_owner', replace(sql, '''tapp''', '''tapq''')), '42501',
          'tapp owner may not ' || action || ' in tapq')
FROM tap_actions WHERE action IN ('view', 'deploy', 'undeploy', 'cancel_run', 'grant_role', 'delete_project', 'set_project_quota',
                                  'set_drift_policy', 'set_deploy_deadline')
ORDER BY action;

-- ... and reads nothing of tapq through tables, views or COPY
SET LOCAL ROLE tap_owner;
SELECT is((SELECT count(*) FROM mlplat.projects WHERE name = 'tapq'), 0::bigint, 'projects table hides tapq');
SELECT is((SELECT count(*) FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id WHERE p.name = 'tapq'), 0::bigint, 'deployments hide tapq');
SELECT is((SELECT count(*) FROM mlplat.deployments WHERE project_id = (SELECT id FROM mlplat.projects WHERE name = 'tapp')), 1::bigint, 'deployments show tapp');
SELECT is((SELECT count(*) FROM mlplat.audit_events WHERE project = 'tapq'), 0::bigint, 'audit_events hide tapq');
SELECT is((SELECT count(*) FROM mlplat.runs WHERE name = 'r1'), 1::bigint, 'runs show only the own r1');
SELECT is((SELECT count(*) FROM mlplat.deployment_status WHERE project = 'tapq'), 0::bigint, 'deployment_status hides tapq');
SELECT is((SELECT count(*) FROM mlplat.run_status WHERE project = 'tapq'), 0::bigint, 'run_status hides tapq');
SELECT is((SELECT count(*) FROM mlplat.audit_log WHERE project = 'tapq'), 0::bigint, 'audit_log hides tapq');
SELECT is((SELECT count(*) FROM mlplat.project_status WHERE project IN ('tapp', 'tapq')), 1::bigint, 'project_status shows tapp only');
SELECT ok(NOT has_table_privilege('tap_owner', 'mlplat.projects', 'INSERT'), 'COPY FROM needs INSERT, which callers lack');
RESET ROLE;

-- routes: both projects' web become READY (the publishing trigger fires at once, not at the
-- commit this test never reaches); a member sees their project's routes only
SET CONSTRAINTS ALL IMMEDIATE;
UPDATE mlplat.deployments d SET status = 'READY', endpoint = 'http://web.' || p.name, observed_revision = d.desired_revision, ready_revision = d.desired_revision
FROM mlplat.projects p WHERE p.id = d.project_id AND d.name = 'web';
SELECT is((SELECT count(DISTINCT project_id) FROM mlplat.route_generations), 2::bigint, 'both projects published routes');
SET LOCAL ROLE tap_owner;
SELECT is((SELECT array_agg(project || '/' || deployment) FROM mlplat.routes), ARRAY['tapp/web'], 'routes shows tapp only');
SELECT is((SELECT array_agg(project || '/' || deployment) FROM mlplat.route_table()), ARRAY['tapp/web'], 'route_table shows tapp only');
SELECT is((SELECT count(*) FROM mlplat.route_generations g JOIN mlplat.projects p ON p.id = g.project_id), 1::bigint,
          'route_generations hide tapq');
SET LOCAL ROLE tap_viewer;
SELECT is((SELECT array_agg(endpoint) FROM mlplat.route_table()), ARRAY['http://web.tapp'], 'a viewer reads the routes of the project');
SET LOCAL ROLE tap_outsider;
SELECT is((SELECT count(*) FROM mlplat.routes), 0::bigint, 'an outsider sees no routes');
SELECT is((SELECT count(*) FROM mlplat.route_table()), 0::bigint, 'nor through route_table');
SELECT ok(NOT has_table_privilege('tap_outsider', 'mlplat.route_head', 'SELECT'), 'the publishers'' lock row is not readable');
RESET ROLE;
-- writes straight to the tables are refused for every caller
SET LOCAL ROLE tap_owner;
SELECT throws_ok($$INSERT INTO mlplat.deployments (project_id, name) SELECT id, 'x' FROM mlplat.projects WHERE name = 'tapp'$$, '42501', NULL, 'no INSERT');
SELECT throws_ok($$UPDATE mlplat.projects SET gpu_quota = 1000$$, '42501', NULL, 'no UPDATE');
SELECT throws_ok($$DELETE FROM mlplat.members$$, '42501', NULL, 'no DELETE');
SELECT throws_ok($$TRUNCATE mlplat.runs$$, '42501', NULL, 'no TRUNCATE');
RESET ROLE;

-- "Allowed" is not enough: the matrix above counts a call as allowed when it fails with
-- anything but 42501.  The actions below need a state of their own to succeed, built here
-- (after every check above, so none of them sees it); each call is still rolled back, and
-- its SQLSTATE and message are shown when it fails.
SELECT is(public.tap_api_try('tap_viewer', sql, true), 'ok', 'viewer ' || action || ' succeeds')
FROM tap_actions WHERE action = 'view';
SELECT is(public.tap_api_try('tap_owner', sql, true), 'ok', 'owner ' || action || ' succeeds')
FROM tap_actions WHERE action = 'revoke_role';
-- web is READY (above) and version 2 a CANDIDATE: a rollout can start
SELECT is(public.tap_api_try('tap_deployer', sql, true), 'ok', 'deployer ' || action || ' succeeds on a READY deployment')
FROM tap_actions WHERE action = 'start_rollout';
-- ... and once one is in flight it can be promoted or aborted
SELECT lives_ok($$SELECT mlplat.start_rollout('tapp', 'web', 'm', '2', '{"steps": [0.5]}')$$, 'a rollout of web is started');
SELECT is(public.tap_api_try('tap_deployer', sql, true), 'ok', 'deployer ' || action || ' succeeds on a rollout in flight')
FROM tap_actions WHERE action IN ('abort_rollout', 'promote_rollout') ORDER BY action;
-- a deployment with a previous revision can be rolled back (web is busy with its rollout)
SELECT lives_ok($$SELECT mlplat.deploy('tapp', 'web3', 'm', '1', 'kserve-sklearnserver', 0, 1, 1)$$, 'web3 revision 1');
SELECT lives_ok($$SELECT mlplat.deploy('tapp', 'web3', 'm', '1', 'kserve-sklearnserver', 0, 1, 2)$$, 'web3 revision 2');
SELECT is(public.tap_api_try('tap_deployer', $$SELECT mlplat.rollback_deployment('tapp', 'web3')$$, true), 'ok',
          'deployer rollback_deployment succeeds when there is a revision to go back to');
-- a project with nothing live can be deleted
UPDATE mlplat.rollouts SET status = 'ROLLING_BACK' WHERE deployment_id IN (SELECT d.id FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id WHERE p.name = 'tapp');
UPDATE mlplat.rollouts SET status = 'ABORTED' WHERE deployment_id IN (SELECT d.id FROM mlplat.deployments d JOIN mlplat.projects p ON p.id = d.project_id WHERE p.name = 'tapp');
UPDATE mlplat.deployments SET status = 'DELETING' WHERE project_id = (SELECT id FROM mlplat.projects WHERE name = 'tapp') AND status NOT IN ('DELETING', 'DELETED');
UPDATE mlplat.deployments SET status = 'DELETED' WHERE project_id = (SELECT id FROM mlplat.projects WHERE name = 'tapp');
UPDATE mlplat.runs SET status = 'CANCEL_REQUESTED' WHERE project_id = (SELECT id FROM mlplat.projects WHERE name = 'tapp') AND status IN ('PENDING', 'SUBMITTED', 'RUNNING');
UPDATE mlplat.runs SET status = 'CANCELLED' WHERE project_id = (SELECT id FROM mlplat.projects WHERE name = 'tapp') AND status = 'CANCEL_REQUESTED';
SELECT is(public.tap_api_try('tap_owner', sql, true), 'ok', 'owner ' || action || ' succeeds once nothing in the project is live')
FROM tap_actions WHERE action = 'delete_project';

SELECT * FROM finish();
ROLLBACK;
